"""The facade (:class:`elicitation_gateway.gateway.Gateway`) over its parts: the one rule for when the
store hears that no tool waits on a question (no call waits on it here, it is not kept for a caller who
went away, and its finish is not owed), and a wait's end as the parts together make it."""

import asyncio

from elicitation_gateway.gateway import AskOptions, Caller, Gateway
from elicitation_gateway.stores.memory import MemoryStore
from elicitation_gateway.stores.tool_liveness import ProcessToolLiveness
from tests.conftest import settings_for_tests

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


class HeardDone(ProcessToolLiveness):
    def __init__(self, done: list[str]) -> None:
        self.heard = done

    def done(self, request_id: str) -> None:
        self.heard.append(request_id)


class Heard(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.done: list[str] = []
        self.tool_liveness = HeardDone(self.done)


async def until(condition, what: str) -> None:
    for _ in range(300):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def test_the_store_hears_once_the_last_wait_ends():
    store = Heard()
    gateway = Gateway(settings_for_tests(), store)
    await gateway.start()
    try:
        record = await gateway.ask("Who?", SCHEMA, AskOptions())
        waits = [asyncio.ensure_future(gateway.final_result(record)) for _ in range(2)]
        await until(lambda: gateway.waiting.waits(record.id), "the tools wait")
        await gateway.reply(record.id, [["Ada"]])
        assert [await wait for wait in waits] == [{"action": "accept", "content": {"name": "Ada"}}] * 2
        assert store.done == [record.id]
    finally:
        await gateway.shutdown()


async def test_a_question_kept_for_its_caller_is_not_done_until_its_window_ends_unclaimed():
    store = Heard()
    gateway = Gateway(settings_for_tests(reattach_window=0.2), store)
    await gateway.start()
    try:
        caller = Caller("the same call")
        record = await gateway.ask_or_attach("Who?", SCHEMA, AskOptions(), caller)
        wait = asyncio.ensure_future(gateway.final_result(record, caller=caller))
        await until(lambda: gateway.waiting.waits(record.id), "the tool waits")
        wait.cancel()  # the caller went away
        await asyncio.wait({wait})
        assert gateway.reattach.keeps(record.id)
        assert store.done == []  # kept for the caller: the store must not hear the tool is done
        await until(lambda: store.done, "the window ended")
        assert store.done == [record.id]
        assert (await store.get(record.id)).status == "cancelled"  # nobody came back: withdrawn
        assert not gateway.reattach.keeps(record.id)
        assert record.id not in gateway.owed
    finally:
        await gateway.shutdown()


async def test_a_call_gone_without_a_window_withdraws_its_question():
    store = Heard()
    gateway = Gateway(settings_for_tests(reattach_window=0), store)
    await gateway.start()
    try:
        record = await gateway.ask("Who?", SCHEMA, AskOptions())
        wait = asyncio.ensure_future(gateway.final_result(record))
        await until(lambda: gateway.waiting.waits(record.id), "the tool waits")
        wait.cancel()
        await asyncio.wait({wait})
        await until(lambda: store.done, "the withdrawal made")
        assert (await store.get(record.id)).status == "cancelled"
        assert store.done == [record.id]
    finally:
        await gateway.shutdown()
