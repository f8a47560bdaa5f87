"""Asking (:mod:`elicitation_gateway.gateway.asking`): a pending record stored, charged, timed and
notified; refused while shutting down or for defaults it lacks; an ask the store fails undone; and the
ids and directories a tool may name."""

import asyncio
from typing import Any

import pytest

from elicitation_gateway.conversion.schema import SchemaError
from elicitation_gateway.gateway.admission import Admission
from elicitation_gateway.gateway.asking import (
    Asking,
    AskOptions,
    normalize_directory,
    printable_id,
    valid_session_id,
)
from elicitation_gateway.gateway.errors import ShuttingDown
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.records import Record
from elicitation_gateway.stores.memory import MemoryStore
from tests.conftest import settings_for_tests

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
DEFAULT = "ses_default"


class Notifier:
    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, record: Record) -> None:
        self.submitted.append(record.id)


class Failing(MemoryStore):
    async def add(self, record: Record) -> None:
        raise ConnectionError("the write never came back")


class Parts:
    def __init__(self, store: MemoryStore | None = None, closing: bool = False, **settings: Any) -> None:
        self.store = store or MemoryStore()
        self.metrics = Metrics()
        self.admission = Admission(settings_for_tests(**settings), self.store, self.metrics, lambda: DEFAULT)
        self.scheduled: list[tuple[str, float]] = []
        self.retracted: list[tuple[str, str]] = []
        self.notifier = Notifier()
        self.asking = Asking(
            settings_for_tests(**settings),
            self.store,
            self.metrics,
            self.admission,
            schedule=lambda request_id, delay: self.scheduled.append((request_id, delay)),
            owe_retraction=lambda record, reason: self.retracted.append((record.id, reason)),
            notifier=lambda: self.notifier,
            closing=lambda: closing,
            default_session=lambda: DEFAULT,
        )


async def test_an_ask_is_stored_charged_timed_and_notified():
    parts = Parts(timeout=60, max_timeout=90)
    record = await parts.asking.ask("Who?", SCHEMA, AskOptions(directory="/srv/a/", timeout=600))
    assert await parts.store.get(record.id) == record
    assert record.request.sessionID == DEFAULT
    assert record.directory == "/srv/a"
    assert parts.scheduled == [(record.id, 90)]  # at most GATEWAY_MAX_TIMEOUT
    assert parts.notifier.submitted == [record.id]
    assert parts.admission.pending_bytes.total > 0
    assert "gateway_elicitations_asked_total 1.0" in parts.metrics.exposition().decode()
    chosen = await parts.asking.ask("Who?", SCHEMA, AskOptions(session_id="ses_x"), "que_chosen")
    assert chosen.id == "que_chosen"
    assert chosen.request.sessionID == "ses_x"


async def test_nothing_is_asked_while_shutting_down_or_without_the_defaults_it_needs():
    with pytest.raises(ShuttingDown):
        await Parts(closing=True).asking.ask("Who?", SCHEMA)
    parts = Parts()
    with pytest.raises(SchemaError) as refused:
        await parts.asking.ask("Who?", SCHEMA, AskOptions(on_timeout="default"))
    assert refused.value.code == "invalid_timeout_choice"
    assert await parts.store.count_pending() == 0


async def test_an_ask_the_store_fails_is_uncharged_and_its_undoing_owed():
    parts = Parts(Failing())
    with pytest.raises(ConnectionError):
        await parts.asking.ask("Who?", SCHEMA)
    [(request_id, reason)] = parts.retracted
    assert reason == "its ask failed"
    assert request_id.startswith("que")
    assert parts.admission.pending_bytes.total == 0
    assert parts.scheduled == []
    assert parts.notifier.submitted == []


async def test_a_big_schema_is_converted_off_the_loop_one_at_a_time():
    parts = Parts()
    properties = {f"field_{n}": {"type": "string", "description": "x" * 2000} for n in range(40)}
    big = {"type": "object", "properties": properties}
    await parts.asking.converting.acquire()  # another big schema is being converted
    converting = asyncio.ensure_future(parts.asking.form(big, "Many?"))
    await asyncio.sleep(0.05)
    assert not converting.done()  # it waits its turn
    small = await parts.asking.form(SCHEMA, "Who?")  # a small one is converted on the loop meanwhile
    assert len(small.fields) == 1
    parts.asking.converting.release()
    form = await converting
    assert len(form.fields) == 40


def test_ids_and_directories():
    assert valid_session_id("ses_1")
    assert not valid_session_id("session 1")
    assert not valid_session_id("abc")
    assert not printable_id("x" * 201)
    assert printable_id("x" * 200)
    assert normalize_directory("/a/b/") == "/a/b"
    assert normalize_directory("/a/./b") == "/a/b"
    assert normalize_directory("  ") is None
    assert normalize_directory("C:\\work\\") == "C:\\work"


def test_a_printable_id_holds_no_whitespace_of_any_kind():
    """Every code point: an id is refused for any character that is unprintable or whitespace."""
    for code in range(0x110000):
        character = chr(code)
        allowed = character.isprintable() and not character.isspace()
        assert printable_id(f"a{character}b") == allowed, hex(code)
