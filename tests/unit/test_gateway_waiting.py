"""Waiting for results (:mod:`elicitation_gateway.gateway.waiting`): a tool waits until its question
finishes, through store outages until its expiry, told how its wait stands; the store hears which
questions have a tool waiting."""

import asyncio
import time
from typing import Any

import pytest

from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.gateway import owed as owed_module
from elicitation_gateway.gateway import waiting as waiting_module
from elicitation_gateway.gateway.errors import NotFound
from elicitation_gateway.gateway.expiry import EXPIRY
from elicitation_gateway.gateway.waiting import Waiting, WaitStatus
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.stores.base import StoreUnavailable
from elicitation_gateway.stores.memory import MemoryStore
from elicitation_gateway.stores.tool_liveness import ProcessToolLiveness
from tests.conftest import settings_for_tests


def record_of(request_id: str, lasts: float = 60) -> Record:
    form = build_form({"type": "object", "properties": {"name": {"type": "string"}}}, "Who?")
    request = QuestionRequest.new(request_id, "ses_1", list(form.questions), None)
    now = time.time()
    return Record.new(request, form, "Who?", None, now, now + lasts, "cancel")


class HeardWaits(ProcessToolLiveness):
    def __init__(self, waits: list[str]) -> None:
        self.heard = waits

    def waits(self, request_id: str) -> None:
        self.heard.append(request_id)


class Heard(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.waits: list[str] = []
        self.tool_liveness = HeardWaits(self.waits)

    async def get(self, request_id: str) -> Record | None:
        if self.down:
            raise StoreUnavailable("down")
        return await super().get(request_id)


def waiting_with(store: Heard, **settings: Any) -> tuple[Waiting, list[str], list[tuple[str, str]]]:
    released: list[str] = []
    owed: list[tuple[str, str]] = []
    waiting = Waiting(
        settings_for_tests(**settings),
        store,
        owe=lambda request_id, reason: owed.append((request_id, reason)),
        closing=lambda: False,
        answerers=lambda: 2,
        released=released.append,
    )
    return waiting, released, owed


def test_the_store_hears_when_the_last_tool_waiting_stops():
    store = Heard()
    waiting, released, _ = waiting_with(store)
    with waiting.tool_waiting("que_1"):
        with waiting.tool_waiting("que_1"):
            assert waiting.waits("que_1")
            assert waiting.waiting() == ["que_1"]
        assert released == []
    assert released == ["que_1"]
    assert not waiting.waits("que_1")
    assert store.waits == ["que_1", "que_1"]


async def test_a_result_is_waited_for_and_an_unknown_one_is_not_found():
    store = Heard()
    waiting, _, _ = waiting_with(store)
    with pytest.raises(NotFound):
        await waiting.result("que_none")
    record = record_of("que_1")
    await store.add(record)
    assert (await waiting.result("que_1", wait=0.01)).pending

    async def answer() -> None:
        await asyncio.sleep(0.05)
        await store.finish("que_1", "answered", {"action": "accept", "content": {"name": "Ada"}})

    answering = asyncio.ensure_future(answer())
    assert await waiting.wait_for_result(record, None) == {"action": "accept", "content": {"name": "Ada"}}
    await answering


async def test_through_an_outage_the_wait_ends_at_the_expiry_and_owes_it(monkeypatch):
    monkeypatch.setattr(waiting_module, "STORE_RETRY", 0.01)
    monkeypatch.setattr(owed_module, "STORE_RETRY", 0.01)
    store = Heard()
    waiting, _, owed = waiting_with(store)
    record = record_of("que_1", lasts=0.2)
    await store.add(record)
    store.down = True
    assert await waiting.wait_for_result(record, None) == {"action": "cancel"}
    assert owed == [("que_1", EXPIRY)]
    assert time.time() >= record.expires_at


async def test_a_waiting_caller_hears_how_it_stands():
    store = Heard()
    waiting, _, _ = waiting_with(store, mcp_progress_interval=0.05)
    record = record_of("que_1")
    await store.add(record)
    told: list[WaitStatus] = []

    async def heartbeat(status: WaitStatus) -> None:
        told.append(status)
        if len(told) == 2:
            await store.finish("que_1", "cancelled", {"action": "cancel"})

    assert await waiting.wait_for_result(record, heartbeat) == {"action": "cancel"}
    assert len(told) == 2
    assert all(status.answerers == 2 for status in told)
    assert told[1].describe().startswith("waiting for an answer, 2 answerers connected, expires in")


def test_a_wait_status_reads_as_a_person_would_say_it():
    assert (
        WaitStatus(1, 2460, 1).describe() == "waiting for an answer, 1 answerer connected, expires in 41 min"
    )
    assert WaitStatus(1, 9.2, 0).describe() == "waiting for an answer, 0 answerers connected, expires in 10 s"
