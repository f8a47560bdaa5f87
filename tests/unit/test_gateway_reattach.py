"""Re-attaching (:mod:`elicitation_gateway.gateway.reattach`): a caller who went away is kept its
question for the window and attaches to it when it comes back; calls of one key share one question;
a key reused with another body is refused; without a caller, the question is withdrawn."""

import asyncio
from typing import Any

import pytest

from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.gateway.asking import AskOptions
from elicitation_gateway.gateway.errors import KeyReused
from elicitation_gateway.gateway.reattach import Caller, Reattach
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.stores.memory import MemoryStore
from tests.conftest import settings_for_tests

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


class Parts:
    def __init__(self, **settings: Any) -> None:
        self.store = MemoryStore()
        self.asked: list[str] = []
        self.owed: list[tuple[str, str]] = []
        self.released: list[str] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.reattach = Reattach(
            settings_for_tests(**settings),
            self.store,
            ask=self.ask,
            owe=lambda request_id, reason: self.owed.append((request_id, reason)),
            spawn=lambda work: self.tasks.append(asyncio.get_running_loop().create_task(work)),
            released=self.released.append,
        )

    async def ask(self, message: str, schema: Any, options: AskOptions, request_id: str | None) -> Record:
        await asyncio.sleep(0.01)
        form = build_form(schema, message)
        request_id = request_id or f"que_{len(self.asked)}"
        request = QuestionRequest.new(request_id, "ses_1", list(form.questions), None)
        record = Record.new(request, form, message, None, 0, 60, "cancel")
        await self.store.add(record)
        self.asked.append(record.id)
        return record

    async def settle(self) -> None:
        while pending := [task for task in self.tasks if not task.done()]:
            await asyncio.wait(pending)


async def test_without_a_caller_it_asks_and_a_call_gone_withdraws():
    parts = Parts()
    record = await parts.reattach.ask_or_attach("Who?", SCHEMA, AskOptions())
    assert parts.asked == [record.id]
    assert parts.reattach.went_away(record, None, None) is False
    assert parts.owed == [(record.id, "withdrawn")]


async def test_a_caller_gone_is_kept_its_question_and_attaches_when_it_comes_back():
    parts = Parts(reattach_window=30)
    caller = Caller("same call")
    record = await parts.reattach.ask_or_attach("Who?", SCHEMA, AskOptions(), caller)
    parts.reattach.went_away(record, caller, None)
    assert parts.reattach.keeps(record.id)
    await parts.settle()
    again = await parts.reattach.ask_or_attach("Who?", SCHEMA, AskOptions(), caller)
    assert again.id == record.id
    assert parts.asked == [record.id]
    assert parts.owed == []


async def test_a_window_nobody_came_back_in_withdraws_the_question():
    parts = Parts(reattach_window=0.05)
    caller = Caller("same call")
    record = await parts.reattach.ask_or_attach("Who?", SCHEMA, AskOptions(), caller)
    parts.reattach.went_away(record, caller, None)
    await parts.settle()
    for _ in range(100):
        if parts.owed:
            break
        await asyncio.sleep(0.01)
    await parts.settle()
    assert parts.owed == [(record.id, "nobody came back for it")]
    assert not parts.reattach.keeps(record.id)


async def test_calls_of_one_key_share_one_question_and_give_the_key_back():
    parts = Parts()
    caller = Caller("key", digest="body", exclusive=True, proven=True)
    first, second = await asyncio.gather(
        parts.reattach.ask_or_attach("Who?", SCHEMA, AskOptions(), caller),
        parts.reattach.ask_or_attach("Who?", SCHEMA, AskOptions(), caller),
    )
    assert first.id == second.id
    assert parts.asked == [first.id]
    hold = parts.reattach.hold_of(caller)
    assert hold is not None
    assert hold.holders == 2
    with pytest.raises(KeyReused):
        await parts.reattach.ask_or_attach(
            "Who?", SCHEMA, AskOptions(), Caller("key", "other", exclusive=True)
        )
    parts.reattach.release(caller, hold)
    parts.reattach.release(caller, hold)
    assert parts.reattach.holds == {}


class SlowParts(Parts):
    """A store write that takes a while (a shared store's): the call can be cancelled during it."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.writing = asyncio.Event()
        self.written = asyncio.Event()

    async def ask(self, message: str, schema: Any, options: AskOptions, request_id: str | None) -> Record:
        self.writing.set()
        await self.written.wait()
        return await super().ask(message, schema, options, request_id)

    async def cancel_while_writing(self, caller: Caller) -> None:
        """A call of ``caller`` cancelled (its agent gone) while its question is written; then the write
        ends."""
        call = asyncio.create_task(self.reattach.ask_or_attach("Who?", SCHEMA, AskOptions(), caller))
        await self.writing.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        self.written.set()


async def test_a_caller_gone_while_its_question_is_stored_is_kept_it_all_the_same():
    parts = SlowParts(reattach_window=30)
    caller = Caller("same call")
    await parts.cancel_while_writing(caller)  # the agent's connection drops while the store writes
    for _ in range(100):
        if parts.reattach.keeps(parts.asked[-1] if parts.asked else ""):
            break
        await asyncio.sleep(0.01)
    (made,) = parts.asked
    assert parts.reattach.keeps(made)
    await parts.settle()
    again = await parts.reattach.ask_or_attach("Who?", SCHEMA, AskOptions(), caller)
    assert again.id == made  # the call re-issued attaches to it
    assert parts.asked == [made]
    assert parts.owed == []


async def test_a_key_whose_only_call_went_away_while_asking_is_kept_and_attached_to():
    parts = SlowParts(reattach_window=30)
    caller = Caller("key", digest="body", exclusive=True, proven=True)
    await parts.cancel_while_writing(caller)
    for _ in range(100):
        if parts.asked and parts.reattach.keeps(parts.asked[0]) and parts.reattach.holds == {}:
            break
        await asyncio.sleep(0.01)
    await parts.settle()
    (made,) = parts.asked
    assert parts.reattach.holds == {}  # the key is free: its question is kept for it
    again = await parts.reattach.ask_or_attach("Who?", SCHEMA, AskOptions(), caller)
    assert again.id == made
    assert parts.asked == [made]


async def test_an_ask_refused_after_its_caller_went_away_leaves_nothing():
    parts = SlowParts(reattach_window=30)
    caller = Caller("same call")

    async def refused(*args: Any) -> Record:
        parts.writing.set()
        await parts.written.wait()
        raise KeyReused("refused")

    parts.reattach.ask = refused
    await parts.cancel_while_writing(caller)
    await asyncio.sleep(0.05)
    await parts.settle()
    assert parts.reattach.orphaned == set()
    assert parts.owed == []
    assert parts.reattach._asking == set()
