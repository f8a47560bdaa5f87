"""The memory budget charges what pending questions really hold.

Measured, not assumed: a real gateway and store hold N pending questions, an answerer has taken every
one's frames, and tracemalloc's count of what they hold is held against the sum of their charges, for
ASCII, CJK and emoji text (1, 2 and 4 bytes a character in a ``str``; 1, 3 and 4 in UTF-8), for small
and large forms, each asked once (a form of its own) or many times (one form, shared).
"""

import gc
import tracemalloc
from typing import Any

import pytest

from elicitation_gateway.budget import Charge, PendingBytes, charge
from elicitation_gateway.conversion.forms import footprint, shared_footprint
from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.gateway import AskOptions, Gateway
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from tests.conftest import settings_for_tests

WORDS = {"ascii": "Option", "cjk": "選択肢の説明", "emoji": "🙂🚀🎉🌍"}


def small(word: str, seed: str) -> dict[str, Any]:
    """Three properties, as the benchmark asks (a choice, a number, a text)."""
    return {
        "type": "object",
        "properties": {
            "model": {"type": "string", "title": f"{word} {seed}", "enum": [f"{word} 215", f"{word} 235"]},
            "hours": {"type": "integer", "title": "Hours", "minimum": 0, "maximum": 20000},
            "note": {"type": "string", "title": "Note", "description": f"{word}?"},
        },
        "required": ["model", "hours"],
    }


def texts(word: str, seed: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            f"t{i}": {"type": "string", "title": f"{word} {i} {seed}", "description": f"{word} " * 10}
            for i in range(10)
        },
    }


def choices(questions: int, options: int):
    def make(word: str, seed: str) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                f"q{i}": {
                    "type": "string",
                    "title": f"{word} {i} {seed}",
                    "enum": [f"{word * 3} {seed} {i}-{j}" for j in range(options)],
                }
                for i in range(questions)
            },
        }

    return make


SHAPES = {"small": (small, 150), "ten texts": (texts, 50), "10 x 20": (choices(10, 20), 15)}
LARGE = (choices(50, 200), 1)  # 10,000 options: too large for the form cache, each ask its own form


async def held_and_charged(
    tmp_path, store: str, make: Any, count: int, word: str, shared: bool
) -> tuple[float, float]:
    """Bytes held and charged per pending question, ``count`` of them, with an answerer's frames."""
    url = "memory" if store == "memory" else f"sqlite:///{tmp_path / 'budget.db'}"
    settings = settings_for_tests(
        store=url,
        history_size=1,  # the replay history is bounded by a budget of its own
        max_pending=100_000,
        max_pending_per_session=100_000,
        max_pending_bytes=1 << 40,
        max_pending_bytes_per_session=1 << 40,
    )
    gateway = Gateway(settings)
    await gateway.start()
    try:
        await gateway.ask("warm", small("warm", "up"))  # what the first ask makes once
        gc.collect()
        tracemalloc.start()
        try:
            before, charged = tracemalloc.get_traced_memory()[0], gateway.pending_bytes.total
            for number in range(count):
                schema = make(word, "one" if shared else str(number))
                await gateway.ask(f"{word} {number}", schema, AskOptions(session_id="ses_budget"))
            gateway.forms.clear()  # the form cache has a budget of its own: only the records hold them
            answerer = await gateway.subscribe()
            for event in answerer.backlog:  # as /event and /global/event write them
                event.frame()
                event.global_frame(settings.directory)
            gateway.unsubscribe(answerer)
            await gateway.auditing.flush()  # entries waiting for the store are not the questions'
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        return held / count, (gateway.pending_bytes.total - charged) / count
    finally:
        await gateway.shutdown()


@pytest.mark.parametrize("shared", [False, True], ids=["own form", "one form"])
@pytest.mark.parametrize("kind", list(WORDS))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_the_charge_is_what_pending_questions_hold(tmp_path, store, shape, kind, shared):
    make, count = SHAPES[shape]
    held, charged = await held_and_charged(tmp_path, store, make, count, WORDS[kind], shared)
    assert 0.75 <= charged / held <= 1.25, f"charged {charged:.0f} bytes, held {held:.0f}"


@pytest.mark.parametrize("kind", list(WORDS))
async def test_the_charge_of_a_large_form_is_what_it_holds(tmp_path, kind):
    make, count = LARGE
    held, charged = await held_and_charged(tmp_path, "memory", make, count, WORDS[kind], shared=True)
    assert 0.75 <= charged / held <= 1.25, f"charged {charged:.0f} bytes, held {held:.0f}"


@pytest.mark.parametrize("kind", ["ascii", "emoji"])
@pytest.mark.parametrize("shape", ["small", "10 x 20"])
async def test_questions_read_back_from_a_store_are_charged_their_own_copies(tmp_path, shape, kind):
    """A SQLite gateway restarted reads its pending questions back from the file (as a Redis replica
    reads another's): each has validated models and strings of its own, nothing shared."""
    make, count = SHAPES[shape]
    word = WORDS[kind]
    settings = settings_for_tests(
        store=f"sqlite:///{tmp_path / 'restart.db'}",
        history_size=1,
        max_pending_bytes=1 << 40,
        max_pending_bytes_per_session=1 << 40,
    )
    first = Gateway(settings)
    await first.start()
    for number in range(count):
        await first.ask(f"{word} {number}", make(word, "one"), AskOptions(session_id="ses_budget"))
    asked = first.pending_bytes.total
    await first.shutdown()  # a graceful stop leaves them pending in the file
    del first
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        again = Gateway(settings)
        await again.start()
        answerer = await again.subscribe()
        for event in answerer.backlog:
            event.frame()
            event.global_frame(settings.directory)
        again.unsubscribe(answerer)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    try:
        assert again.pending_bytes.total > asked  # copies, where the first shared one form
        assert 0.75 <= again.pending_bytes.total / held <= 1.25, (again.pending_bytes.total, held)
    finally:
        await again.shutdown()


def record_of(schema: dict[str, Any], number: int = 0, session: str = "ses_1") -> Record:
    form = build_form(schema, "Please answer")
    request = QuestionRequest.new(f"que_{number}", session, list(form.questions), None)
    return Record.new(request, form, "Please answer", None, 0, 60, "cancel")


def test_a_forms_shared_parts_are_counted_once_a_form():
    record = record_of(choices(3, 5)("x", "y"))
    held = charge(record)
    assert held.shared == shared_footprint(record.form) > 0
    assert held.parts is record.form.fields
    assert held.whole > footprint(record.form)  # and the record, its JSON and its frames


def test_text_is_charged_by_its_width_not_its_length():
    """The same number of characters holds twice as much as CJK, four times as much as emoji."""
    charges = {
        kind: charge(record_of(choices(2, 50)(word[0] * 8, "s"))).whole for kind, word in WORDS.items()
    }
    assert charges["ascii"] < charges["cjk"] < charges["emoji"]
    assert charges["emoji"] > 1.5 * charges["ascii"]


def test_shared_parts_are_charged_once_in_all_and_once_a_session():
    budget = PendingBytes()
    parts, other = object(), object()
    one = Charge(own=10, parts=parts, shared=1000)
    budget.add("que_1", "ses_a", one)
    budget.add("que_1", "ses_a", one)  # the ask, and then the event announcing it
    assert (budget.total, budget.session("ses_a"), len(budget)) == (1010, 1010, 1)
    assert budget.cost(one, "ses_a") == (10, 10)
    assert budget.cost(one, "ses_b") == (10, 1010)
    budget.add("que_2", "ses_a", one)
    budget.add("que_3", "ses_b", one)
    budget.add("que_4", "ses_b", Charge(own=5, parts=other, shared=100))
    assert (budget.total, budget.session("ses_a"), budget.session("ses_b")) == (1135, 1020, 1115)
    budget.remove("que_1")
    budget.remove("que_1")
    assert (budget.total, budget.session("ses_a"), "que_1" in budget) == (1125, 1010, False)
    budget.remove("que_2")
    assert (budget.total, budget.session("ses_a")) == (1115, 0)
    budget.remove("que_3")
    budget.remove("que_4")
    assert (budget.total, budget.session("ses_b"), len(budget)) == (0, 0, 0)


def test_a_question_without_a_session_is_charged_in_all_only():
    budget = PendingBytes()
    budget.add("que_1", None, Charge(own=10, parts=object(), shared=90))
    assert budget.cost(Charge(own=10, parts=object(), shared=90), None) == (100, 0)
    assert (budget.total, budget.session("ses_a")) == (100, 0)
    budget.remove("que_1")
    assert budget.total == 0
