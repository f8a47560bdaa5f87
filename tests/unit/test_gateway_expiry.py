"""Expiry (:mod:`elicitation_gateway.gateway.expiry`): what a tool gets when its question expires, the
defaults checked when asked, and the timers that expire questions, now or owed while the store is down."""

import asyncio
from typing import Any

import pytest

from elicitation_gateway.conversion.schema import SchemaError, build_form
from elicitation_gateway.gateway.expiry import EXPIRY, Expiry, check_defaults, expiry_result
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.stores.base import StoreUnavailable
from elicitation_gateway.stores.memory import MemoryStore

NAME = {"type": "object", "properties": {"name": {"type": "string", "default": "Ada"}}, "required": ["name"]}
NO_DEFAULT = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def record_of(schema: dict[str, Any], on_timeout: str = "cancel", request_id: str = "que_1") -> Record:
    form = build_form(schema, "Who?")
    request = QuestionRequest.new(request_id, "ses_1", list(form.questions), None)
    return Record.new(request, form, "Who?", None, 0, 60, on_timeout)  # type: ignore[arg-type]


def test_an_expired_question_is_cancel_or_its_defaults():
    assert expiry_result(record_of(NAME)) == {"action": "cancel"}
    assert expiry_result(record_of(NAME, "default")) == {"action": "accept", "content": {"name": "Ada"}}


def test_defaults_are_checked_when_asked():
    check_defaults(build_form(NAME, "Who?"))
    with pytest.raises(SchemaError, match="'name' has none") as refused:
        check_defaults(build_form(NO_DEFAULT, "Who?"))
    assert refused.value.code == "invalid_timeout_choice"
    with pytest.raises(SchemaError, match="confirmation"):
        check_defaults(build_form({"type": "object", "properties": {}}, "Sure?"))


class Parts:
    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.owed: list[tuple[str, str]] = []
        self.finished: list[tuple[str, str, dict[str, Any]]] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.expiry = Expiry(store, finish=self.finish, owe=self.owe, spawn=self.spawn)

    async def finish(self, request_id, status, result, *, reason, answers=None, defaulted=False):
        self.finished.append((request_id, status, result))
        return await self.store.finish(request_id, status, result, answers)

    def owe(self, request_id: str, reason: str) -> None:
        self.owed.append((request_id, reason))

    def spawn(self, work) -> None:
        self.tasks.append(asyncio.get_running_loop().create_task(work))


async def until_done(parts: Parts) -> None:
    for _ in range(200):
        if parts.tasks and all(task.done() for task in parts.tasks):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the timer never fired")


async def test_a_timer_expires_its_question():
    store = MemoryStore()
    parts = Parts(store)
    await store.add(record_of(NAME))
    parts.expiry.schedule("que_1", 0.01)
    assert "que_1" in parts.expiry
    await until_done(parts)
    assert parts.finished == [("que_1", "expired", {"action": "cancel"})]
    assert (await store.get("que_1")).status == "expired"


async def test_with_defaults_the_question_is_answered_on_the_persons_behalf():
    store = MemoryStore()
    parts = Parts(store)
    await store.add(record_of(NAME, "default"))
    await parts.expiry.expire_now("que_1")
    assert parts.finished == [("que_1", "answered", {"action": "accept", "content": {"name": "Ada"}})]


async def test_a_discarded_timer_never_fires_and_a_finished_question_is_left_alone():
    store = MemoryStore()
    parts = Parts(store)
    await store.add(record_of(NAME))
    parts.expiry.schedule("que_1", 0.01)
    parts.expiry.discard("que_1")
    await asyncio.sleep(0.05)
    assert not parts.tasks
    await store.finish("que_1", "answered", {"action": "accept", "content": {"name": "Bo"}})
    await parts.expiry.expire_now("que_1")
    assert parts.finished == []


class Down(MemoryStore):
    async def get(self, request_id: str) -> Record | None:
        raise StoreUnavailable("down")


async def test_an_expiry_the_store_cannot_take_is_owed():
    parts = Parts(Down())
    parts.expiry.schedule("que_1", 0)
    await until_done(parts)
    assert parts.owed == [("que_1", EXPIRY)]
