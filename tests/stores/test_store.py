"""The store interface's promises, checked on every implementation: in memory, in a SQLite file, and on a
real Redis.

Routes and the gateway rely only on these; a new backend passes this file unchanged.
"""

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable

import pytest

from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.stores.base import Store
from elicitation_gateway.stores.memory import MemoryStore
from elicitation_gateway.stores.orphans import DigestMismatch
from elicitation_gateway.stores.redis import RedisStore
from elicitation_gateway.stores.sqlite import SqliteStore
from tests.helpers import until, waited_on

pytest_plugins = ["tests.redis_server"]

_prefixes = itertools.count()


def redis_store(request, **options) -> RedisStore:
    """A Redis store with keys of its own, on the test Redis server."""
    return RedisStore(request.getfixturevalue("redis_url"), prefix=f"test{next(_prefixes)}", **options)


def sqlite_store(request, **options) -> SqliteStore:
    """A SQLite store in a file of its own, in the test's temporary folder."""
    return SqliteStore(request.getfixturevalue("tmp_path") / f"store{next(_prefixes)}.db", **options)


STORES: dict[str, Callable[..., Store]] = {
    "memory": lambda request, **options: MemoryStore(**options),
    "redis": redis_store,
    "sqlite": sqlite_store,
}


@pytest.fixture(params=sorted(STORES))
async def make_store(request) -> AsyncIterator[Callable[..., Store]]:
    made: list[Store] = []

    async def make(**options) -> Store:
        store = STORES[request.param](request, **options)
        await store.start()
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


def record(request_id: str, directory: str | None = None, *, session_id: str = "ses_1") -> Record:
    form = build_form({"type": "object", "properties": {"a": {"type": "string"}}})
    now = time.time()
    return Record(
        request=QuestionRequest(id=request_id, sessionID=session_id, questions=list(form.questions)),
        form=form,
        message="m",
        directory=directory,
        created_at=now,
        expires_at=now + 60,
    )


async def drain(subscription, count: int) -> list:
    got = []
    async with asyncio.timeout(2):
        async for event in subscription:
            got.append(event)
            if len(got) == count:
                return got
    return got


SAYS = {"memory": (False, False), "sqlite": (True, False), "redis": (True, True)}


async def test_each_store_says_whether_its_questions_outlive_the_process_and_others_publish(
    request, make_store
):
    store = await make_store()
    kind = request.node.callspec.params["make_store"]
    assert (store.questions_outlive_process, store.others_publish) == SAYS[kind]


async def test_add_keeps_the_record_pending_and_publishes_asked(make_store):
    store = await make_store()
    subscription = await store.subscribe()
    await store.add(record("que_1", "/p"))
    [asked] = await drain(subscription, 1)
    assert (asked.type, asked.properties["id"], asked.directory, asked.replayable) == (
        "question.asked",
        "que_1",
        "/p",
        True,
    )
    assert [r.id for r in await store.pending()] == ["que_1"]
    assert (await store.get("que_1")).pending
    subscription.close()


async def test_every_field_of_a_record_is_kept(make_store):
    """What the gateway reads back (after a restart on SQLite, on another replica with Redis) is what it
    stored, down to the choice made for the timeout."""
    store = await make_store()
    stored = record("que_1", "/p").model_copy(update={"on_timeout": "default"})
    await store.add(stored)
    assert await store.get("que_1") == stored
    assert await store.pending() == [stored]


async def test_pending_lists_oldest_first(make_store):
    store = await make_store()
    for name in ("que_1", "que_2", "que_3"):
        await store.add(record(name))
    await store.finish("que_2", "answered", {"action": "accept", "content": {}}, [[]])
    assert [r.id for r in await store.pending()] == ["que_1", "que_3"]


async def test_pending_counts_follow_adds_and_finishes(make_store):
    """The limits are checked against these counts, in all and per session, right after a change."""
    store = await make_store()

    async def counts() -> list[int]:
        return [await store.count_pending(session) for session in (None, "ses_1", "ses_2", "ses_3")]

    assert await counts() == [0, 0, 0, 0]
    await store.add(record("que_1"))
    await store.add(record("que_2"))
    await store.add(record("que_3", session_id="ses_2"))
    assert await counts() == [3, 2, 1, 0]
    await store.finish("que_1", "answered", {"action": "accept", "content": {}}, [[]])
    await store.finish("que_1", "cancelled", {"action": "cancel"})  # finished already: no change
    await store.finish("que_3", "expired", {"action": "cancel"})
    assert await counts() == [1, 1, 0, 0]
    await store.finish("que_2", "cancelled", {"action": "cancel"})
    assert await counts() == [0, 0, 0, 0]


async def test_finish_happens_once_and_publishes_one_event(make_store):
    store = await make_store()
    await store.add(record("que_1"))
    subscription = await store.subscribe()
    first = await store.finish("que_1", "answered", {"action": "accept", "content": {"a": "x"}}, [["x"]])
    second = await store.finish("que_1", "cancelled", {"action": "cancel"})
    assert first is not None
    assert (first.status, first.result) == ("answered", {"action": "accept", "content": {"a": "x"}})
    assert second is None
    [replied] = await drain(subscription, 1)
    assert replied.type == "question.replied"
    assert replied.properties == {"sessionID": "ses_1", "requestID": "que_1", "answers": [["x"]]}
    assert (await store.get("que_1")).status == "answered"
    assert await store.pending() == []
    subscription.close()


async def test_a_confirmation_answered_no_is_kept_declined_and_publishes_replied(make_store):
    """A schema with no properties (a plain confirmation): its form is kept as it was asked, and a No
    reply finishes it ``declined`` with the person's answer, which answerers see as ``question.replied``."""
    store = await make_store()
    form = build_form({"type": "object", "properties": {}}, "Delete the old builds?")
    stored = record("que_1").model_copy(
        update={
            "form": form,
            "request": QuestionRequest(id="que_1", sessionID="ses_1", questions=list(form.questions)),
        }
    )
    await store.add(stored)
    assert await store.get("que_1") == stored
    assert (await store.get("que_1")).form.confirm
    subscription = await store.subscribe()
    finished = await store.finish("que_1", "declined", {"action": "decline"}, [["No"]])
    assert finished is not None
    [replied] = await drain(subscription, 1)
    assert replied.type == "question.replied"
    assert replied.properties == {"sessionID": "ses_1", "requestID": "que_1", "answers": [["No"]]}
    kept = await store.get("que_1")
    assert (kept.status, kept.result) == ("declined", {"action": "decline"})
    subscription.close()


async def test_finish_without_answers_publishes_rejected(make_store):
    store = await make_store()
    await store.add(record("que_1"))
    subscription = await store.subscribe()
    await store.finish("que_1", "declined", {"action": "decline"})
    [rejected] = await drain(subscription, 1)
    assert rejected.type == "question.rejected"
    assert rejected.properties == {"sessionID": "ses_1", "requestID": "que_1"}
    subscription.close()


async def test_finish_of_an_unknown_id_changes_nothing(make_store):
    store = await make_store()
    subscription = await store.subscribe()
    assert await store.finish("que_nope", "cancelled", {"action": "cancel"}) is None
    assert await store.get("que_nope") is None
    subscription.close()
    assert await drain(subscription, 1) == []


async def test_retract_finishes_a_kept_record_once_and_publishes_rejected(make_store):
    store = await make_store()
    subscription = await store.subscribe()
    await store.add(record("que_1"))
    retracted = await store.retract(record("que_1"))
    assert retracted is not None
    assert (retracted.status, retracted.result) == ("cancelled", {"action": "cancel"})
    assert [event.type for event in await drain(subscription, 2)] == ["question.asked", "question.rejected"]
    assert await store.retract(record("que_1")) is None  # once
    assert await store.pending() == []
    assert await store.count_pending() == 0
    subscription.close()


async def test_retract_leaves_an_answered_record_answered(make_store):
    store = await make_store()
    await store.add(record("que_1"))
    await store.finish("que_1", "answered", {"action": "accept", "content": {"a": "x"}}, [["x"]])
    assert await store.retract(record("que_1")) is None
    assert (await store.get("que_1")).status == "answered"


async def test_a_retracted_add_that_arrives_afterwards_keeps_nothing(make_store):
    """A write whose reply never came may reach a remote store after its retraction: it then makes
    nothing pending and announces nothing. (An embedded store never gets an add after it failed; it
    keeps the rule all the same, or holds nothing at all.)"""
    store = await make_store()
    subscription = await store.subscribe()
    assert await store.retract(record("que_1")) is None
    if isinstance(store, RedisStore):
        await store.add(record("que_1"))
        assert (await store.get("que_1")).status == "cancelled"
    assert await store.pending() == []
    assert await store.count_pending() == 0
    await store.add(record("que_2"))
    [asked] = await drain(subscription, 1)
    assert asked.properties["id"] == "que_2"
    subscription.close()


async def test_wait_returns_as_soon_as_finished(make_store):
    store = await make_store()
    await store.add(record("que_1"))
    waiter = asyncio.create_task(store.wait("que_1", 30))
    await until(lambda: waited_on(store, "que_1"), what="the waiter is registered")
    assert not waiter.done()
    await store.finish("que_1", "cancelled", {"action": "cancel"})
    finished = await asyncio.wait_for(waiter, 2)
    assert finished.status == "cancelled"


async def test_wait_gives_the_pending_record_after_its_time(make_store):
    store = await make_store()
    await store.add(record("que_1"))
    assert (await store.wait("que_1", 0.05)).status == "pending"
    assert not waited_on(store, "que_1")  # a wait that ended leaves nothing behind
    assert await store.wait("que_unknown", 0.05) is None


async def test_a_cancelled_wait_leaves_the_others_waiting(make_store):
    store = await make_store()
    await store.add(record("que_1"))
    first = asyncio.create_task(store.wait("que_1", 30))
    second = asyncio.create_task(store.wait("que_1", 30))
    await until(lambda: waited_on(store, "que_1"), what="the waiters are registered")
    await asyncio.sleep(0.05)
    first.cancel()
    await asyncio.sleep(0.05)
    assert waited_on(store, "que_1")
    assert not second.done()
    await store.finish("que_1", "cancelled", {"action": "cancel"})
    assert (await asyncio.wait_for(second, 2)).status == "cancelled"
    assert not waited_on(store, "que_1")


async def _forgotten(store: Store, request_id: str) -> bool:
    return await store.get(request_id) is None


async def test_finished_records_are_forgotten_after_their_retention(make_store):
    store = await make_store(result_ttl=0.05)
    await store.add(record("que_1"))
    await store.finish("que_1", "cancelled", {"action": "cancel"})
    assert await store.get("que_1") is not None
    await until(lambda: _forgotten(store, "que_1"), what="the finished record is forgotten")


async def test_subscribing_without_an_id_reannounces_every_pending_question(make_store):
    store = await make_store()
    await store.add(record("que_1"))
    await store.add(record("que_2"))
    await store.finish("que_1", "cancelled", {"action": "cancel"})
    subscription = await store.subscribe()
    assert [(e.type, e.properties["id"], e.replayable) for e in subscription.backlog] == [
        ("question.asked", "que_2", False)
    ]
    subscription.close()


async def test_subscribers_share_one_reannouncement_until_the_next_change(request):
    """Thousands of streams opening at once with thousands pending must not each hold a list of them."""
    for store in (MemoryStore(), sqlite_store(request)):
        await store.start()
        await store.add(record("que_1"))
        first, second = await store.subscribe(), await store.subscribe()
        assert first.backlog is second.backlog
        await store.add(record("que_2"))
        third = await store.subscribe()
        assert [e.properties["id"] for e in third.backlog] == ["que_1", "que_2"]
        assert [e.properties["id"] for e in first.backlog] == ["que_1"]  # what it was given stays
        await store.finish("que_1", "cancelled", {"action": "cancel"})
        fourth = await store.subscribe()
        assert [e.properties["id"] for e in fourth.backlog] == ["que_2"]
        for subscription in (first, second, third, fourth):
            subscription.close()
        await store.close()


async def test_subscribing_with_a_known_id_replays_what_came_after(make_store):
    store = await make_store()
    watcher = await store.subscribe()
    await store.add(record("que_1"))
    await store.add(record("que_2"))
    await store.finish("que_1", "cancelled", {"action": "cancel"})
    seen = await drain(watcher, 3)
    watcher.close()

    again = await store.subscribe(seen[0].id)
    assert [e.id for e in again.backlog] == [seen[1].id, seen[2].id]
    again.close()
    latest = await store.subscribe(seen[2].id)
    assert latest.backlog == []
    latest.close()


async def test_an_id_older_than_the_history_gets_the_reannouncement(make_store):
    store = await make_store(history_size=2)
    watcher = await store.subscribe()
    for name in ("que_1", "que_2", "que_3"):
        await store.add(record(name))
    seen = await drain(watcher, 3)
    watcher.close()
    subscription = await store.subscribe(seen[0].id)
    assert [(e.properties["id"], e.replayable) for e in subscription.backlog] == [
        ("que_1", False),
        ("que_2", False),
        ("que_3", False),
    ]
    subscription.close()


async def test_close_ends_subscriptions_after_what_was_queued(make_store):
    store = await make_store()
    subscription = await store.subscribe()
    await store.add(record("que_1"))
    await store.finish("que_1", "cancelled", {"action": "cancel"})
    await store.close()
    got = [e.type async for e in subscription]
    assert got == ["question.asked", "question.rejected"]


async def test_events_waiting_for_a_subscriber_are_taken_together_in_order(make_store):
    store = await make_store()
    subscription = await store.subscribe()
    for index in range(3):
        await store.add(record(f"que_{index}"))
    [first] = await drain(subscription, 1)
    queued: list = []
    async with asyncio.timeout(2):  # a replica reads the events from the shared stream as they come
        while len(queued) < 2:
            queued += subscription.take_queued()
            await asyncio.sleep(0.01)
    assert [e.properties["id"] for e in (first, *queued)] == ["que_0", "que_1", "que_2"]
    assert subscription.take_queued() == []  # taken: iterating would not yield them again
    await store.add(record("que_3"))
    [later] = await drain(subscription, 1)
    assert later.properties["id"] == "que_3"
    subscription.close()


async def test_a_subscriber_that_falls_too_far_behind_is_dropped(make_store):
    store = await make_store(subscriber_queue=3)
    slow = await store.subscribe()
    keeping_up = await store.subscribe()
    for index in range(5):
        await store.add(record(f"que_{index}"))
        assert (await drain(keeping_up, 1))[0].properties["id"] == f"que_{index}"
    assert [e async for e in slow] == []  # dropped: it reconnects and replays
    keeping_up.close()


async def test_thousands_of_subscribers_get_every_event_in_order(make_store):
    """More subscribers than one fan-out batch (they are woken a batch per loop iteration): each still
    gets every event, in the order published, and close delivers what was still on its way."""
    from elicitation_gateway.stores.fanout import FAN_OUT_BATCH

    store = await make_store()
    subscriptions = [await store.subscribe() for _ in range(FAN_OUT_BATCH * 3 + 7)]
    await store.add(record("que_1"))
    await store.add(record("que_2"))
    await store.finish("que_1", "cancelled", {"action": "cancel"})
    expected = [("question.asked", "que_1"), ("question.asked", "que_2"), ("question.rejected", "que_1")]

    def key(event) -> tuple[str, str]:
        return event.type, event.properties.get("id") or event.properties["requestID"]

    for subscription in subscriptions[:10]:
        assert [key(e) for e in await drain(subscription, 3)] == expected
    await store.finish("que_2", "cancelled", {"action": "cancel"})
    await store.close()
    expected.append(("question.rejected", "que_2"))
    for subscription in subscriptions[10:]:
        assert [key(e) async for e in subscription] == expected


# ---------------------------------------------------------------------------------------------------
# Orphans (store.orphans): questions whose caller went away, for the same caller to come back to


async def test_an_orphan_is_claimed_once_by_its_own_caller(make_store):
    store = await make_store()
    await store.orphans.orphan("caller-a", "que_1", "", 60)
    assert await store.orphans.claim("caller-b", "") is None
    assert await store.orphans.claim("caller-a", "") == "que_1"
    assert await store.orphans.claim("caller-a", "") is None  # once
    assert await store.orphans.end("que_1") is False  # claimed: its window's end finds nothing


async def test_orphans_of_one_caller_are_claimed_oldest_first(make_store):
    store = await make_store()
    for request_id in ("que_1", "que_2"):
        await store.orphans.orphan("caller", request_id, "", 60)
    assert [await store.orphans.claim("caller", "") for _ in range(3)] == ["que_1", "que_2", None]


async def test_an_orphan_whose_window_ended_is_not_claimed(make_store):
    store = await make_store()
    await store.orphans.orphan("caller", "que_1", "", 60)
    await store.orphans.orphan("caller", "que_2", "", 60)
    assert await store.orphans.end("que_1") is True
    assert await store.orphans.end("que_1") is False
    assert await store.orphans.claim("caller", "") == "que_2"
    await store.orphans.orphan("caller", "que_3", "", 0.05)
    await asyncio.sleep(0.15)  # lapsed without its end being called (the process that kept it is gone)
    assert await store.orphans.claim("caller", "") is None


async def test_a_claim_with_another_digest_claims_nothing(make_store):
    store = await make_store()
    await store.orphans.orphan("key", "que_1", "body-a", 60)
    with pytest.raises(DigestMismatch):
        await store.orphans.claim("key", "body-b")
    assert await store.orphans.claim("key", "body-a") == "que_1"


async def test_an_escalation_step_is_marked_once(make_store):
    """Only the first of callers at once marks a step announced; another step, or question, is apart."""
    store = await make_store()
    kept = record("que_esc")
    await store.add(kept)
    marks = await asyncio.gather(*(store.once.mark_escalated(kept.id, 0, kept.expires_at) for _ in range(5)))
    assert sorted(marks) == [False, False, False, False, True]
    assert await store.once.mark_escalated(kept.id, 1, kept.expires_at)
    assert not await store.once.mark_escalated(kept.id, 1, kept.expires_at)
    assert await store.once.mark_escalated("que_other", 0, kept.expires_at)


async def test_an_event_published_here_reaches_subscribers_but_is_not_replayed(make_store):
    store = await make_store()
    kept = record("que_here")
    subscription = await store.subscribe()
    try:
        await store.add(kept)
        [asked] = await drain(subscription, 1)
        store.publish_here(kept.asked_event(replayable=False))
        [again] = await drain(subscription, 1)
        assert again.type == "question.asked"
        assert again.properties["id"] == kept.id
        assert not again.replayable
    finally:
        subscription.close()
    replay = await store.subscribe(asked.id)
    try:
        assert replay.backlog == []  # nothing kept after the asked event
    finally:
        replay.close()
