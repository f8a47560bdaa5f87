"""Escalating (:mod:`elicitation_gateway.gateway.escalating`) on a real in-memory store: each step
announced at its time on this process's streams, its people notified and the listeners told once,
nothing for a finished question, and a step that meets a store outage tried again."""

import asyncio
import time
from collections.abc import Sequence

from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.escalation import Step
from elicitation_gateway.gateway.escalating import Escalating
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.people import parse_people
from elicitation_gateway.records import Record
from elicitation_gateway.stores.base import StoreUnavailable
from elicitation_gateway.stores.memory import MemoryStore
from tests.helpers import until

PEOPLE = parse_people(
    """
[people.alice]
password = "a"
[people.bob]
password = "b"
groups = ["leads"]
[people.carol]
password = "c"
groups = ["leads"]
"""
)


def record_of(request_id: str, to: list[str], steps: tuple[Step, ...], created_at: float) -> Record:
    form = build_form({"type": "object", "properties": {"a": {"type": "string"}}}, "Go?")
    request = QuestionRequest.new(request_id, "ses_1", list(form.questions), None, to)
    return Record.new(request, form, "Go?", None, created_at, created_at + 60, "cancel", None, steps)


class Parts:
    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.notified: list[tuple[str, tuple[str, ...]]] = []
        self.told: list[tuple[str, tuple[str, ...]]] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.escalating = Escalating(store, people=lambda: PEOPLE, notify=self.notify, spawn=self.spawn)
        self.escalating.on_escalated(lambda request_id, names: self.told.append((request_id, names)))

    def notify(self, record: Record, names: Sequence[str], escalated_after: float) -> None:
        assert escalated_after in {step.after for step in record.escalate}
        self.notified.append((record.id, tuple(names)))

    def spawn(self, work) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


async def test_each_step_is_announced_at_its_time_once():
    store = MemoryStore()
    parts = Parts(store)
    steps = (Step(after=0.2, to=("bob",)), Step(after=0.4, to=("group:leads",)))
    record = record_of("que_1", ["alice"], steps, time.time())
    await store.add(record)
    subscription = await store.subscribe()
    try:
        parts.escalating.follow(record)
        parts.escalating.follow(record)  # followed once, however often it is seen
        assert parts.escalating.audience_of({"id": "que_1", "to": ["alice"]}) == ("alice",)
        first = await anext(aiter(subscription))
        assert first.properties["to"] == ["alice", "bob"]
        assert not first.replayable
        await until(lambda: len(parts.told) == 2, what="both steps")
    finally:
        subscription.close()
    assert parts.told == [("que_1", ("bob",)), ("que_1", ("bob", "carol"))]
    assert parts.notified == parts.told
    assert parts.escalating.audience_of({"id": "que_1"}) == ("alice", "bob", "group:leads")
    assert not parts.escalating.timers  # no step left


async def test_a_step_already_marked_is_announced_on_streams_but_not_notified_again():
    """A restarted process (or another replica) finds the step marked: its streams are shown the
    question, nobody is told twice."""
    store = MemoryStore()
    parts = Parts(store)
    record = record_of("que_2", ["alice"], (Step(after=0.01, to=("bob",)),), time.time() - 5)
    await store.add(record)
    assert await store.once.mark_escalated("que_2", 0, record.expires_at)
    subscription = await store.subscribe()
    try:
        parts.escalating.follow(record)
        announced = await anext(aiter(subscription))
        assert announced.properties["to"] == ["alice", "bob"]
    finally:
        subscription.close()
    # Marked as handled here right after the store's answer, and told then, were it the first to mark it.
    await until(lambda: parts.escalating.handled.get("que_2") == 1, what="the step handled")
    assert parts.told == []
    assert parts.notified == []


async def test_a_finished_question_is_not_escalated():
    store = MemoryStore()
    parts = Parts(store)
    record = record_of("que_3", ["alice"], (Step(after=0.1, to=("bob",)),), time.time())
    await store.add(record)
    parts.escalating.follow(record)
    await store.finish("que_3", "cancelled", {"action": "cancel"})
    # Forgotten once its step's time came and it was found finished: nothing was told.
    await until(lambda: "que_3" not in parts.escalating.followed, what="the question found finished")
    assert parts.told == []


async def test_a_step_that_meets_a_store_outage_is_tried_again(monkeypatch):
    store = MemoryStore()
    parts = Parts(store)
    record = record_of("que_4", ["alice"], (Step(after=0.01, to=("bob",)),), time.time())
    await store.add(record)
    real, failures = store.once.mark_escalated, [1]

    async def flaky(*args):
        if failures:
            failures.pop()
            raise StoreUnavailable("down")
        return await real(*args)

    monkeypatch.setattr(store.once, "mark_escalated", flaky)
    monkeypatch.setattr("elicitation_gateway.gateway.escalating.STORE_RETRY", 0.05)
    parts.escalating.follow(record)
    await until(lambda: parts.told == [("que_4", ("bob",))], what="the step, once the store is back")
