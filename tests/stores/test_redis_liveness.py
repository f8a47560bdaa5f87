"""Replicas that die on Redis: each keeps a liveness entry and a set of the questions its tools wait
for; another replica claims a gone one's set (once across replicas) and hands its ids to the gateway
(``abandoned``), which withdraws them. Real ``redis-server``, several stores on the same keys."""

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable

import pytest
from redis.asyncio import Redis

from elicitation_gateway.stores.redis import RedisStore
from tests.helpers import until, waited_on
from tests.stores.test_redis_store import stop_reading
from tests.stores.test_store import record

pytest_plugins = ["tests.redis_server"]

LIVENESS = 0.3
_prefixes = itertools.count()


@pytest.fixture
async def make_replica(redis_url: str) -> AsyncIterator[Callable[..., RedisStore]]:
    """``await make_replica()``: a started store on this test's keys (a replica, for the store)."""
    prefix = f"liveness{next(_prefixes)}"
    made: list[RedisStore] = []

    async def make(liveness: float = LIVENESS) -> RedisStore:
        store = RedisStore(redis_url, prefix=prefix, replica_liveness=liveness)
        await store.start()
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    async with Redis.from_url(redis_url, decode_responses=True) as client:
        yield client


async def crash(store: RedisStore) -> None:
    """Gone without a word: its tasks stop and its connections close, and nothing is cleaned up."""

    async def nothing() -> None:
        return None

    store.tool_liveness.leave = nothing  # type: ignore[method-assign]
    await store.close()


def waits_key(store: RedisStore) -> str:
    return store._keys.waits(store.replica_id)


async def test_the_questions_a_gone_replica_waited_for_are_claimed_by_one_other(make_replica, redis):
    gone, *others = [await make_replica() for _ in range(3)]
    await gone.add(record("que_1"))
    await gone.add(record("que_2"))
    gone.tool_liveness.waits("que_1")
    gone.tool_liveness.waits("que_2")
    gone.tool_liveness.done("que_2")  # its tool got its answer
    await until(lambda: _members(redis, gone, {"que_1"}))
    await crash(gone)

    async def claimed() -> bool:
        return any([await other.tool_liveness.abandoned() for other in others])

    await until(claimed, what="another replica claims the gone one's questions")
    await asyncio.sleep(3 * LIVENESS)  # every replica has looked again meanwhile
    found = [await other.tool_liveness.abandoned() for other in others]
    assert sorted(found, key=len) == [[], ["que_1"]], "claimed once, by one replica"
    claimer = others[0] if found[0] else others[1]
    assert await redis.exists(waits_key(gone)) == 0
    assert gone.replica_id not in await redis.smembers(claimer._keys.replicas)

    claimer.tool_liveness.done("que_1")  # the gateway finished it
    assert await claimer.tool_liveness.abandoned() == []
    await until(lambda: _members(redis, claimer, set()), what="the claimer forgets it in Redis too")


async def test_a_live_replica_keeps_what_its_tools_wait_for(make_replica, redis):
    alive, other = await make_replica(), await make_replica()
    await alive.add(record("que_1"))
    alive.tool_liveness.waits("que_1")
    await until(lambda: _members(redis, alive, {"que_1"}))
    await asyncio.sleep(4 * LIVENESS)  # several refreshes and looks
    assert await other.tool_liveness.abandoned() == []
    alive.tool_liveness.done("que_1")
    await until(lambda: _members(redis, alive, set()), what="a tool that stops waiting leaves the set")


async def test_a_replica_that_stops_in_order_leaves_nothing_behind(make_replica, redis):
    store = await make_replica()
    store.tool_liveness.waits("que_1")
    await until(lambda: _members(redis, store, {"que_1"}))
    store.tool_liveness.done("que_1")
    await store.close()
    assert await redis.exists(waits_key(store), store._keys.replica(store.replica_id)) == 0
    assert store.replica_id not in await redis.smembers(store._keys.replicas)


async def test_what_a_replica_stopping_without_redis_left_is_claimed(make_replica):
    """Stopped while its tools still waited (Redis was unreachable for their withdrawal): its entry goes
    at once, so another replica need not wait for it to lapse."""
    stopping, other = await make_replica(liveness=30), await make_replica(liveness=0.3)
    stopping.tool_liveness.waits("que_1")
    await until(lambda: _members_of(other, stopping, {"que_1"}))
    await stopping.close()
    await until(lambda: _abandoned(other, ["que_1"]), what="claimed well before 30 s")


async def test_a_replica_claims_only_once_connected_for_a_whole_liveness_period(make_replica):
    gone = await make_replica()
    gone.tool_liveness.waits("que_1")
    await crash(gone)
    made_at = time.monotonic()
    late = await make_replica(liveness=1.0)  # just started: others may not have refreshed yet
    await asyncio.sleep(0.5)  # half its liveness period, on an idle machine
    found = await late.tool_liveness.abandoned()
    # Nothing before a whole period connected (however late this look comes on a loaded machine).
    assert found == [] or time.monotonic() - made_at >= 1.0, found
    await until(lambda: _abandoned(late, ["que_1"]), what="claimed after a whole liveness period")


async def test_a_replica_whose_entry_lapsed_notes_its_waits_again(make_replica, redis):
    """Cut off from Redis for longer than its liveness, a replica is taken for gone and its set claimed;
    its tools still wait (they get the withdrawal's ``cancel``), and it notes them again, so a crash
    after that still leaves nothing behind."""
    cut_off, other = await make_replica(), await make_replica()
    cut_off.tool_liveness.waits("que_1")
    await until(lambda: _members(redis, cut_off, {"que_1"}))
    await until(lambda: _claim_after_lapse(redis, cut_off, other), what="the lapsed replica is claimed")
    assert await other.tool_liveness.abandoned() == ["que_1"]
    await until(lambda: _members(redis, cut_off, {"que_1"}), what="noted again at the next refresh")


async def test_a_waiter_that_began_while_the_stream_was_not_followed_sees_a_finish_made_meanwhile(
    make_replica,
):
    """After an outage the loop follows the stream from its end: finishes published before are never
    read, so waiters are woken to read their records again."""
    waiting, finishing = await make_replica(), await make_replica()
    await finishing.add(record("que_1"))
    await stop_reading(waiting)
    waiting._follower.reading = False  # as after an outage: the loop will follow from the stream's end
    waiter = asyncio.create_task(waiting.wait("que_1", 30))
    await until(lambda: waited_on(waiting, "que_1"))
    await finishing.finish("que_1", "cancelled", {"action": "cancel"})
    waiting._follower.task = asyncio.create_task(waiting._follower.run())
    async with asyncio.timeout(5):
        finished = await waiter
    assert finished is not None
    assert finished.status == "cancelled"


async def _members(redis: Redis, store: RedisStore, expected: set[str]) -> bool:
    return set(await redis.smembers(waits_key(store))) == expected


async def _members_of(reader: RedisStore, store: RedisStore, expected: set[str]) -> bool:
    return set(await reader._client.smembers(waits_key(store))) == expected


async def _abandoned(store: RedisStore, expected: list[str]) -> bool:
    return await store.tool_liveness.abandoned() == expected


async def _claim_after_lapse(redis: Redis, lapsed: RedisStore, claimer: RedisStore) -> bool:
    """Delete the lapsed replica's entry (as if it lapsed) until the claimer has taken its set."""
    await redis.delete(lapsed._keys.replica(lapsed.replica_id))
    return bool(await claimer.tool_liveness.abandoned())
