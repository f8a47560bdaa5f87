"""Forms cached by bytes, shared between the asks of one schema, and charged to the memory budget as what
they really hold."""

import gc
import threading
import tracemalloc
from typing import Any

import pytest

from elicitation_gateway.conversion.forms import FormCache, Limits, footprint
from elicitation_gateway.conversion.schema import build_form, shorten
from tests.helpers import COLOR_SCHEMA, RFC0010_SCHEMA, text_properties


def choices(questions: int, options: int, seed: str = "") -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            f"q{i}": {
                "type": "string",
                "title": f"Question {i} {seed}",
                "description": "Which one do you want for this part of the release?",
                "enum": [f"option {seed} {i}-{j}, with a label of some length" for j in range(options)],
            }
            for i in range(questions)
        },
    }


SHAPES = {
    "two fields": lambda seed: {**COLOR_SCHEMA, "title": seed},
    "rfc0010": lambda seed: {**RFC0010_SCHEMA, "title": seed},
    "ten texts": lambda seed: {**text_properties(10), "title": seed},
    "10 x 20 options": lambda seed: choices(10, 20, seed),
    "50 x 200 options": lambda seed: choices(50, 200, seed),
}


def measured(make: Any, count: int = 8) -> float:
    """Bytes one form of ``make`` holds (not shared with any other), by tracemalloc."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = []
        for number in range(count):
            form = build_form(make(str(number)), "Please answer")
            for question in form.questions:
                question.shared()  # as the cache keeps them
            kept.append(form)
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / count
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_forms_footprint_is_what_it_holds(shape):
    """The budget charges what a form really holds: the estimate is within a quarter of tracemalloc's."""
    make = SHAPES[shape]
    estimate = footprint(build_form(make("0"), "Please answer"))
    assert 0.75 <= estimate / measured(make, count=2 if "200" in shape else 8) <= 1.25


def test_asks_of_one_schema_share_its_form_but_their_first_question():
    cache = FormCache(Limits(), 1 << 20)
    schema = choices(3, 4)
    one, two = cache.form(schema, "Deploy 4.2?"), cache.form(schema, "Deploy 4.3?")
    assert len(cache) == 1
    assert one.fields is two.fields
    assert one.questions[1:] == two.questions[1:]
    assert all(a is b for a, b in zip(one.questions[1:], two.questions[1:], strict=True))
    assert one.questions[0].question.startswith("Deploy 4.2?\n\n")
    assert two.questions[0].question.startswith("Deploy 4.3?\n\n")


@pytest.mark.parametrize(
    "message", ["", "  ", "Deploy?", "Which one do you want for this part of the release?"]
)
@pytest.mark.parametrize("shape", ["two fields", "rfc0010", "10 x 20 options"])
def test_a_form_from_the_cache_is_the_form_of_a_conversion(shape, message):
    schema = SHAPES[shape]("s")
    cache = FormCache(Limits(), 1 << 22)
    cache.form(schema, "warm")
    assert cache.form(schema, message) == build_form(schema, message)


def test_the_cache_holds_at_most_its_bytes_least_recently_used_first():
    probe = FormCache(Limits(), max_bytes=1 << 30)
    probe.form(choices(5, 10, "a"), "m")
    cache = FormCache(Limits(), max_bytes=int(probe.size * 8.5))  # room for 8 of them
    for number in range(12):
        cache.form(choices(5, 10, str(number)), "m")
        assert cache.size <= cache.max_bytes
    assert len(cache) == 8
    cache.form(choices(5, 10, "4"), "m")  # recently used: stays
    cache.form(choices(5, 10, "new"), "m")
    assert len(cache) == 8
    assert any("4" in key for key in cache._forms)


def test_a_form_larger_than_an_eighth_of_the_cache_is_not_kept():
    small = footprint(build_form(choices(1, 1)))
    cache = FormCache(Limits(), max_bytes=small * 10)
    form = cache.form(choices(20, 20), "m")
    assert len(form.questions) == 20
    assert len(cache) == 0
    cache.form(choices(1, 1), "m")
    assert len(cache) == 1


def test_legacy_forms_are_built_with_their_message_and_not_kept():
    cache = FormCache(Limits(), 1 << 20)
    form = cache.form({"enum": ["a", "b"], "title": "Pick"}, "Which one?")
    assert form.legacy
    assert form.questions[0].question == "Which one?"
    assert len(cache) == 0


def test_the_cache_serves_threads_and_the_loop_at_once():
    cache = FormCache(Limits(), max_bytes=footprint(build_form(choices(2, 3, "x"))) * 20)
    problems: list[BaseException] = []

    def ask(offset: int) -> None:
        try:
            for number in range(200):
                seed = str((number + offset) % 40)
                header = cache.form(choices(2, 3, seed), "m").questions[1].header
                assert header == shorten(f"Question 1 {seed}", 12)
        except BaseException as error:  # pragma: no cover (reported below)
            problems.append(error)

    threads = [threading.Thread(target=ask, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    assert cache.size == sum(size for _, size in cache._forms.values())
    assert cache.size <= cache.max_bytes
