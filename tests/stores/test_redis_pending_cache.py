"""The Redis store's cache of pending records, against a real Redis.

A pending record never changes until it finishes, so each replica keeps the records it knows to be
pending (asked here, or listed) and answers ``get`` from memory: no round trip, no JSON parse. That is
only right while nothing stale stays in it: a record leaves the cache when it finishes on this replica
(before the stream's event comes back), when this replica's loop reads that another replica finished it,
when a listing no longer holds it, and when the loop loses the stream (it may miss finishes meanwhile);
until the loop follows the stream again, ``get`` reads Redis. A listing that raced a finish must not put
the record back.

To tell the cache from Redis, tests change what Redis holds behind the store's back, or hold this
replica's loop back from handing out events (``_dispatch``) to stand for a loop that has not read the
finish yet.
"""

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from elicitation_gateway import events
from elicitation_gateway.stores.redis import RedisStore
from elicitation_gateway.stores.redis.store import RedisSubscription
from tests.helpers import until
from tests.stores.test_store import record

pytest_plugins = ["tests.redis_server"]

_prefixes = itertools.count()
CANCEL = {"action": "cancel"}
ACCEPT = {"action": "accept", "content": {"a": "x"}}


@pytest.fixture
async def replicas(redis_url: str) -> AsyncIterator[tuple[RedisStore, RedisStore]]:
    """Two stores on the same keys: two replicas, as far as the store is concerned."""
    prefix = f"cache{next(_prefixes)}"
    first, second = (RedisStore(redis_url, prefix=prefix) for _ in range(2))
    await first.start()
    await second.start()
    yield first, second
    await second.close()
    await first.close()


async def forget_in_redis(store: RedisStore, request_id: str) -> None:
    """Delete the record's key behind the store's back: only a cache can still answer for it."""
    await store._client.delete(store._keys.record(request_id))


async def finish_seen(subscription: RedisSubscription, request_id: str) -> None:
    """Wait until this replica's loop has handed out the finish of ``request_id``."""
    async with asyncio.timeout(5):
        async for event in subscription:
            if (
                event.type in (events.REPLIED, events.REJECTED)
                and event.properties["requestID"] == request_id
            ):
                return
    raise AssertionError(f"the stream ended before the finish of {request_id}")


def hold_events(store: RedisStore, monkeypatch: pytest.MonkeyPatch) -> list[events.Event]:
    """From now on the store's loop reads the stream but hands nothing out: a replica that has not read
    the latest events yet."""
    held: list[events.Event] = []
    monkeypatch.setattr(store._follower, "_dispatch", held.append)
    return held


# ---------------------------------------------------------------------------------------------------
# What goes in


async def test_a_record_asked_here_is_answered_from_memory(replicas):
    first, second = replicas
    asked = record("que_1")
    await first.add(asked)
    await forget_in_redis(first, "que_1")
    assert await first.get("que_1") is asked
    assert await second.get("que_1") is None  # a replica that neither asked nor listed it reads Redis


async def test_a_listed_record_is_answered_from_memory(replicas):
    first, second = replicas
    await first.add(record("que_1"))
    assert [r.id for r in await second.pending()] == ["que_1"]
    await forget_in_redis(first, "que_1")
    cached = await second.get("que_1")
    assert cached is not None
    assert (cached.id, cached.status) == ("que_1", "pending")


async def test_a_finished_record_is_not_cached_by_a_listing(replicas):
    """Finished records are read from Redis each time: their key expires after the retention period."""
    first, second = replicas
    await first.add(record("que_1"))
    await first.add(record("que_2"))
    await first.finish("que_1", "cancelled", CANCEL)
    assert [r.id for r in await second.pending()] == ["que_2"]
    await forget_in_redis(first, "que_1")
    assert await second.get("que_1") is None


# ---------------------------------------------------------------------------------------------------
# What comes out


async def test_a_finish_on_this_replica_drops_the_record_before_its_event_comes_back(replicas, monkeypatch):
    first, _ = replicas
    await first.add(record("que_1"))
    hold_events(first, monkeypatch)  # the finish's own event has not been read back yet
    finished = await first.finish("que_1", "answered", ACCEPT, [["x"]])
    assert finished is not None
    got = await first.get("que_1")
    assert got is not None
    assert (got.status, got.result) == ("answered", ACCEPT)


async def test_a_finish_by_another_replica_drops_the_record_when_its_event_is_read(replicas):
    first, second = replicas
    await second.add(record("que_1"))  # cached on the second replica
    watching = await second.subscribe()
    assert await first.finish("que_1", "cancelled", CANCEL) is not None
    await finish_seen(watching, "que_1")
    watching.close()
    got = await second.get("que_1")
    assert got is not None
    assert (got.status, got.result) == ("cancelled", CANCEL)


async def test_a_finish_that_lost_to_another_replica_drops_the_stale_record(replicas, monkeypatch):
    """The second replica has not read the first one's finish: its own finish finds the record gone
    from the pending set, returns None, and stops answering from its stale copy."""
    first, second = replicas
    await second.add(record("que_1"))
    hold_events(second, monkeypatch)
    assert await first.finish("que_1", "answered", ACCEPT, [["x"]]) is not None
    assert await second.finish("que_1", "cancelled", CANCEL) is None
    got = await second.get("que_1")
    assert got is not None
    assert (got.status, got.result) == ("answered", ACCEPT)


async def test_a_listing_forgets_cached_records_that_are_no_longer_pending(replicas, monkeypatch):
    """A finish this replica did not read (its loop was behind) is noticed at the next listing."""
    first, second = replicas
    await second.add(record("que_1"))
    await second.add(record("que_2"))
    hold_events(second, monkeypatch)
    await first.finish("que_1", "cancelled", CANCEL)
    assert [r.id for r in await second.pending()] == ["que_2"]
    got = await second.get("que_1")
    assert got is not None
    assert got.status == "cancelled"


async def test_a_listing_that_raced_a_finish_does_not_bring_the_record_back(replicas, monkeypatch):
    """The second replica reads the record while it is pending; before the listing ends, the first
    finishes it and the second's loop hands out that finish. The listing must not then cache the
    pending copy it read: no event would ever take it out again."""
    first, second = replicas
    watching = await second.subscribe()  # first: subscribing lists (and caches) what is pending
    await first.add(record("que_1"))
    read_records = second._client.mget

    async def read_then_finish(keys: list[str]) -> list[Any]:
        assert keys == [second._keys.record("que_1")]
        found = await read_records(keys)  # que_1, still pending
        assert await first.finish("que_1", "cancelled", CANCEL) is not None
        await finish_seen(watching, "que_1")  # the second replica has handled the finish
        return found

    monkeypatch.setattr(second._client, "mget", read_then_finish)
    listed = await second.pending()
    assert [(r.id, r.status) for r in listed] == [("que_1", "pending")]  # as it was when read
    monkeypatch.undo()
    watching.close()
    got = await second.get("que_1")
    assert got is not None
    assert got.status == "cancelled"


async def test_a_replica_that_lost_the_stream_forgets_what_it_cached(replicas, monkeypatch, caplog):
    """The second replica's connection breaks while the first finishes a question: when it follows
    the stream again, from its end, it never reads that finish, so it must not trust its cache."""
    first, second = replicas
    await second.add(record("que_1"))
    read_stream = second._follower._read_stream
    broke = asyncio.Event()

    async def finish_elsewhere_then_break() -> Any:
        if broke.is_set():
            return await read_stream()
        assert await first.finish("que_1", "cancelled", CANCEL) is not None
        broke.set()
        raise RedisConnectionError("connection lost (test)")

    monkeypatch.setattr(second._follower, "_read_stream", finish_elsewhere_then_break)
    await first.add(record("que_2"))  # wakes the second replica's blocked read: its next one breaks
    await asyncio.wait_for(broke.wait(), 10)
    await until(second.healthy, timeout=10, what="the second replica follows the stream again")
    assert "Redis is unreachable" in caplog.text
    got = await second.get("que_1")
    assert got is not None
    assert got.status == "cancelled"


@contextlib.asynccontextmanager
async def stream_lost(store: RedisStore, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """Break the store's stream connection and keep it from following the stream again until the block
    ends (its command connections still work, as when one connection drops); then wait until it does."""
    read_stream, follow = store._follower._read_stream, store._follower.follow_from_tail
    broken, gap, reopen = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def break_once() -> Any:
        if not broken.is_set():
            broken.set()
            raise RedisConnectionError("connection lost (test)")
        return await read_stream()

    async def follow_when_reopened() -> None:
        gap.set()
        await reopen.wait()
        await follow()

    monkeypatch.setattr(store._follower, "_read_stream", break_once)
    monkeypatch.setattr(store._follower, "follow_from_tail", follow_when_reopened)
    await store._client.xadd(store._keys.events, {"wake": "up"})  # ends the blocked read: the next breaks
    await asyncio.wait_for(gap.wait(), 10)
    assert not await store.healthy()
    try:
        yield
    finally:
        reopen.set()
    await until(store.healthy, timeout=10, what="the store follows the stream again")


async def test_while_the_loop_is_not_following_get_reads_redis(replicas, monkeypatch):
    first, second = replicas
    async with stream_lost(second, monkeypatch):
        await second.add(record("que_1"))
        await first.finish("que_1", "cancelled", CANCEL)  # never read by the second replica
        got = await second.get("que_1")
        assert got is not None
        assert got.status == "cancelled"


async def test_a_record_cached_while_the_loop_was_not_following_is_not_trusted_after(replicas, monkeypatch):
    first, second = replicas
    async with stream_lost(second, monkeypatch):
        await second.add(record("que_1"))
        await first.finish("que_1", "cancelled", CANCEL)  # never read by the second replica
    got = await second.get("que_1")
    assert got is not None
    assert got.status == "cancelled"


async def test_a_replica_that_lost_the_stream_counts_again(replicas, monkeypatch):
    """The pending counts, like the records, may miss changes while the loop is not following: they
    come from Redis meanwhile, and from a fresh snapshot after."""
    first, second = replicas
    await second.add(record("que_1"))
    async with stream_lost(second, monkeypatch):
        await first.finish("que_1", "cancelled", CANCEL)  # never read by the second replica
        await first.add(record("que_2", session_id="ses_2"))
        assert (await second.count_pending(), await second.count_pending("ses_1")) == (1, 0)
    assert second._follower.counts is not None
    assert [await second.count_pending(s) for s in (None, "ses_1", "ses_2")] == [1, 0, 1]
