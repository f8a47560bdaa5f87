"""What the Redis store adds to the store interface (tests/test_store.py checks the interface itself):
event ids derived from stream ids, several stores on one Redis acting as replicas, a finish that
happens once across them, expiry, the capped stream, the setting that selects it, and what happens
while Redis is unreachable. Everything runs against a real ``redis-server``."""

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from elicitation_gateway import ids
from elicitation_gateway.server.command import main as serve_main
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores import make_store
from elicitation_gateway.stores import redis as redis_store
from elicitation_gateway.stores.base import Store, StoreUnavailable
from elicitation_gateway.stores.memory import MemoryStore
from elicitation_gateway.stores.redis import RedisStore, event_id_of, stream_id_of
from tests.helpers import until, waited_on
from tests.stores.test_store import drain, record

pytest_plugins = ["tests.redis_server"]

_prefixes = itertools.count()
ANSWERED = {"action": "accept", "content": {"a": "x"}}


@pytest.fixture
async def replicas(redis_url: str) -> AsyncIterator[list[RedisStore]]:
    """Two stores on the same keys: two replicas, as far as the store is concerned."""
    prefix = f"replicas{next(_prefixes)}"
    stores = [RedisStore(redis_url, prefix=prefix, result_ttl=30) for _ in range(2)]
    for store in stores:
        await store.start()
    yield stores
    for store in stores:
        await store.close()


async def events_of(redis_url: str, store: RedisStore) -> list[dict[str, str]]:
    """Every entry of the store's stream, read straight from Redis."""
    from redis.asyncio import Redis

    async with Redis.from_url(redis_url, decode_responses=True) as client:
        return [fields for _, fields in await client.xrange(store._events_key)]


# ---------------------------------------------------------------------------------------------------
# Event ids


@given(st.integers(0, 2**48 - 1), st.integers(0, 2**64 - 1))
def test_event_ids_and_stream_ids_map_one_to_one(millis: int, seq: int):
    event_id = event_id_of(f"{millis}-{seq}")
    assert ids.ID_PATTERN.match(event_id)
    assert event_id.startswith("evt_")
    assert stream_id_of(event_id) == f"{millis}-{seq}"


@given(
    st.tuples(st.integers(0, 2**48 - 1), st.integers(0, 2**64 - 1)),
    st.tuples(st.integers(0, 2**48 - 1), st.integers(0, 2**64 - 1)),
)
def test_event_ids_sort_as_the_stream_does(first: tuple[int, int], second: tuple[int, int]):
    """Clients and the TUI order events by id; the stream orders entries by (ms, seq)."""
    first_id, second_id = event_id_of("{}-{}".format(*first)), event_id_of("{}-{}".format(*second))
    assert (first_id < second_id) == (first < second)


@pytest.mark.parametrize(
    "event_id",
    [
        "que_0193a1c2b3d4AbCdEfGhIjKlMn",
        "evt_0193a1c2b3d4zzzzzzzzzzzzzz",
        "evt_1",
        "",
        "evt_0193A1C2B3D4AbCdEfGhIjKlMn",
    ],
    ids=["question-id", "sequence-beyond-64-bits", "short", "empty", "upper-case-hex"],
)
def test_ids_no_stream_could_have_made_map_to_nothing(event_id: str):
    assert stream_id_of(event_id) is None


# ---------------------------------------------------------------------------------------------------
# The setting


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6379/0", "rediss://user:secret@redis.example:6380/1", "unix:///run/redis.sock"]
)
def test_a_redis_url_selects_the_redis_store(url: str):
    settings = Settings(store=url)
    assert settings.store == url
    assert isinstance(make_store(settings), RedisStore)


def test_memory_stays_the_default():
    assert isinstance(make_store(Settings()), MemoryStore)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("redis", "must be 'memory', a SQLite file"),
        ("postgres://db/1", "must be 'memory', a SQLite file"),
        ("http://127.0.0.1:6379", "must be 'memory', a SQLite file"),
        ("", "must be 'memory', a SQLite file"),
        ("redis://127.0.0.1:port/0", "not a usable Redis URL: Port could not be cast to integer"),
    ],
)
def test_other_store_values_are_refused_with_a_clear_message(value: str, problem: str, capsys):
    with pytest.raises(ValidationError, match=problem):
        Settings(store=value)
    assert serve_main(["--store", value]) == 2
    assert f"invalid setting store (GATEWAY_STORE): Value error, {problem}" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------
# Several replicas on one Redis


async def test_every_replica_sends_the_same_events_in_the_same_order(replicas):
    first, second = replicas
    watching = [await first.subscribe(), await second.subscribe()]
    await first.add(record("que_1"))
    await second.add(record("que_2"))
    await second.finish("que_1", "answered", ANSWERED, [["x"]])
    await first.finish("que_2", "cancelled", {"action": "cancel"})
    seen = [[(e.id, e.type, e.properties) for e in await drain(s, 4)] for s in watching]
    assert seen[0] == seen[1]
    assert [(t, p.get("id") or p.get("requestID")) for _, t, p in seen[0]] == [
        ("question.asked", "que_1"),
        ("question.asked", "que_2"),
        ("question.replied", "que_1"),
        ("question.rejected", "que_2"),
    ]
    event_ids = [event_id for event_id, _, _ in seen[0]]
    assert event_ids == sorted(event_ids)
    assert len(set(event_ids)) == 4
    for subscription in watching:
        subscription.close()


async def test_a_record_finishes_once_across_replicas(replicas, redis_url):
    first, second = replicas
    for index in range(5):  # several races, so that both orders come up
        request_id = f"que_{index}"
        await first.add(record(request_id))
        outcomes = await asyncio.gather(
            first.finish(request_id, "answered", ANSWERED, [["x"]]),
            second.finish(request_id, "cancelled", {"action": "cancel"}),
        )
        [winner] = [outcome for outcome in outcomes if outcome is not None]
        assert (await second.get(request_id)).status == winner.status
    finishing = [e for e in await events_of(redis_url, first) if '"requestID"' in e["e"]]
    assert len(finishing) == 5
    assert await first.pending() == []


async def test_a_waiter_on_one_replica_wakes_when_another_finishes(replicas):
    first, second = replicas
    await first.add(record("que_1"))
    waiter = asyncio.create_task(first.wait("que_1", 30))
    await until(lambda: waited_on(first, "que_1"), what="the waiter is registered")
    assert not waiter.done()
    await second.finish("que_1", "answered", ANSWERED, [["x"]])
    finished = await asyncio.wait_for(waiter, 5)
    assert (finished.status, finished.result) == ("answered", ANSWERED)


async def test_a_last_event_id_from_one_replica_replays_on_another(replicas):
    first, second = replicas
    watcher = await first.subscribe()
    for name in ("que_1", "que_2"):
        await first.add(record(name))
    await second.finish("que_1", "cancelled", {"action": "cancel"})
    seen = await drain(watcher, 3)
    watcher.close()
    resumed = await second.subscribe(seen[0].id)
    assert [(e.id, e.type, e.replayable) for e in resumed.backlog] == [(e.id, e.type, True) for e in seen[1:]]
    resumed.close()


async def test_pending_records_and_counts_are_shared(replicas):
    first, second = replicas
    await first.add(record("que_1"))
    await first.add(record("que_2"))
    assert [r.id for r in await second.pending()] == ["que_1", "que_2"]
    assert (await second.count_pending(), await second.count_pending("ses_1")) == (2, 2)
    assert await second.count_pending("ses_other") == 0
    await second.finish("que_1", "cancelled", {"action": "cancel"})
    await first.finish("que_2", "cancelled", {"action": "cancel"})
    assert (await first.count_pending(), await first.count_pending("ses_1")) == (0, 0)
    assert await first._client.hgetall(first._sessions_key) == {}  # nothing left behind


async def test_a_burst_larger_than_the_connection_pool_waits_for_connections(replicas):
    """Hundreds of requests at once each run a command: they share the pool's connections in turn,
    none is refused for want of one (a pool that refuses would answer them 503)."""
    first, _ = replicas
    burst = redis_store.POOL_SIZE * 4
    await asyncio.gather(*(first.add(record(f"que_{n}")) for n in range(burst)))
    found = await asyncio.gather(*(first.get(f"que_{n}") for n in range(burst)))
    assert all(r is not None and r.pending for r in found)
    assert await first.count_pending() == burst


async def test_finished_results_expire_and_pending_records_wait_for_their_timeout(replicas):
    """A pending record leaves Redis only by finishing (the cluster enforces its timeout); a finished
    one expires after the retention period."""
    first, _ = replicas
    await first.add(record("que_1"))
    key = first._record_key("que_1")
    assert await first._client.pttl(key) == -1
    await first.finish("que_1", "cancelled", {"action": "cancel"})
    assert 0 < await first._client.pttl(key) <= 30_000


async def test_the_stream_is_capped(redis_url, monkeypatch):
    monkeypatch.setattr(redis_store, "MIN_STREAM_LENGTH", 10)
    store = RedisStore(redis_url, prefix=f"capped{next(_prefixes)}", history_size=5)
    await store.start()
    try:
        for index in range(400):
            await store.add(record(f"que_{index}"))
        length = await store._client.xlen(store._events_key)
    finally:
        await store.close()
    assert length <= 200  # trimmed to about 10, a whole stream node (100 entries) at a time


async def test_a_replica_that_falls_behind_the_cap_ends_its_streams(redis_url, monkeypatch, caplog):
    """Events trimmed from the capped stream before this replica read them cannot reach its
    subscribers: it notices, and ends their streams, so that they reconnect and catch up."""
    monkeypatch.setattr(redis_store, "MIN_STREAM_LENGTH", 10)
    monkeypatch.setattr(redis_store, "READ_BATCH", 5)
    prefix = f"behind{next(_prefixes)}"
    writer, reader = (RedisStore(redis_url, prefix=prefix, history_size=5) for _ in range(2))
    await writer.start()
    await reader.start()
    try:
        subscription = await reader.subscribe()
        assert reader._reader_task is not None
        reader._reader_task.cancel()  # the replica stops reading for a while
        with contextlib.suppress(asyncio.CancelledError):
            await reader._reader_task
        for index in range(400):
            await writer.add(record(f"que_{index}"))
        reader._reader_task = asyncio.get_running_loop().create_task(reader._read_events())
        async with asyncio.timeout(5):
            received = [event async for event in subscription]  # ends instead of skipping ahead
        assert len(received) < 400
        assert "behind the capped event stream" in caplog.text
        fresh = await reader.subscribe()  # a reconnecting client gets every pending question
        assert len(fresh.backlog) == 400
        fresh.close()
    finally:
        await reader.close()
        await writer.close()


def test_a_pending_question_goes_into_the_stream_without_being_encoded_again():
    asked = record("que_1", "/p").asked_event()
    entry = redis_store._encode(asked)
    assert asked._properties is None  # the request's JSON, spliced as it was encoded once
    read_back = redis_store._decode("1700000000000-0", {"e": entry})
    assert read_back is not None
    assert (read_back.type, read_back.directory) == ("question.asked", "/p")
    assert read_back.properties == asked.properties


async def test_an_entry_that_is_not_an_event_is_skipped(replicas):
    first, second = replicas
    subscription = await first.subscribe()
    await first.add(record("que_1"))
    await first._client.xadd(first._events_key, {"something": "else"})
    await first.add(record("que_2"))
    [asked, then] = await drain(subscription, 2)
    assert [(e.type, e.properties["id"]) for e in (asked, then)] == [
        ("question.asked", "que_1"),
        ("question.asked", "que_2"),
    ]
    subscription.close()
    resumed = await second.subscribe(asked.id)  # replay skips it too
    assert [e.id for e in resumed.backlog] == [then.id]
    resumed.close()


# ---------------------------------------------------------------------------------------------------
# Redis unreachable


async def until_healthy(store: Store, healthy: bool = True) -> bool:
    async with asyncio.timeout(10):
        while await store.healthy() != healthy:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    return True


async def test_an_unreachable_redis_is_reported_and_recovered_from(make_redis_server):
    server = make_redis_server()  # not started yet
    store = RedisStore(server.url, prefix="outage")
    await store.start()  # the process starts anyway, and waits for Redis
    try:
        assert not await store.healthy()
        for call in (store.pending(), store.get("que_1"), store.add(record("que_1")), store.subscribe()):
            with pytest.raises(StoreUnavailable, match="Redis"):
                await call

        server.start()
        assert await until_healthy(store)
        await store.add(record("que_1"))
        subscription = await store.subscribe()
        waiter = asyncio.create_task(store.wait("que_1", 30))

        server.stop()
        async with asyncio.timeout(10):
            assert [event async for event in subscription] == []  # the stream ends: clients reconnect
            with pytest.raises(StoreUnavailable):
                await waiter  # woken, and told the store is unreachable
        assert not await store.healthy()

        server.start()
        assert await until_healthy(store)
        await store.add(record("que_2"))
        assert [r.id for r in await store.pending()] == ["que_2"]  # this server kept no data
    finally:
        await store.close()
