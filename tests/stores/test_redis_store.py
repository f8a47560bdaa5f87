"""What the Redis store adds to the store interface (tests/test_store.py checks the interface itself):
event ids derived from stream ids, several stores on one Redis acting as replicas, a finish that
happens once across them, expiry, the capped stream, the setting that selects it, and what happens
while Redis is unreachable. Everything runs against a real ``redis-server``."""

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from elicitation_gateway import ids
from elicitation_gateway.server.command import main as serve_main
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores import make_store
from elicitation_gateway.stores.base import Store, StoreUnavailable
from elicitation_gateway.stores.memory import MemoryStore
from elicitation_gateway.stores.orphans import DigestMismatch
from elicitation_gateway.stores.redis import RedisStore, connection, follower
from elicitation_gateway.stores.redis import store as redis_store
from elicitation_gateway.stores.redis.codec import decode, encode, event_id_of, stream_id_of
from elicitation_gateway.stores.redis.scripts import FINISH
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


async def stop_reading(store: RedisStore) -> None:
    """End the store's loop, as a replica that stops reading; redis-py can swallow a cancellation that
    lands just as a reply arrives, so insist (as ``close`` does)."""
    task = store._follower.task
    assert task is not None
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)


async def caught_up(*stores: RedisStore) -> None:
    """Wait until each store's loop has read everything the stream holds now."""
    for store in stores:
        await store._follower.deliver_everything_published()


async def events_of(redis_url: str, store: RedisStore) -> list[dict[str, str]]:
    """Every entry of the store's stream, read straight from Redis."""
    from redis.asyncio import Redis

    async with Redis.from_url(redis_url, decode_responses=True) as client:
        return [fields for _, fields in await client.xrange(store._keys.events)]


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
    await caught_up(second)  # counts are as of the entries a replica has read
    assert (await second.count_pending(), await second.count_pending("ses_1")) == (2, 2)
    assert await second.count_pending("ses_other") == 0
    await second.finish("que_1", "cancelled", {"action": "cancel"})
    await first.finish("que_2", "cancelled", {"action": "cancel"})
    await caught_up(first)
    assert (await first.count_pending(), await first.count_pending("ses_1")) == (0, 0)
    assert await first._client.hgetall(first._keys.sessions) == {}  # nothing left behind


async def test_a_burst_larger_than_the_connection_pool_waits_for_connections(replicas):
    """Hundreds of requests at once each run a command: they share the pool's connections in turn,
    none is refused for want of one (a pool that refuses would answer them 503)."""
    first, _ = replicas
    burst = connection.POOL_SIZE * 4
    await asyncio.gather(*(first.add(record(f"que_{n}")) for n in range(burst)))
    found = await asyncio.gather(*(first.get(f"que_{n}") for n in range(burst)))
    assert all(r is not None and r.pending for r in found)
    assert await first.count_pending() == burst


async def test_finished_results_expire_and_pending_records_wait_for_their_timeout(replicas):
    """A pending record leaves Redis only by finishing (the cluster enforces its timeout); a finished
    one expires after the retention period."""
    first, _ = replicas
    await first.add(record("que_1"))
    key = first._keys.record("que_1")
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
        length = await store._client.xlen(store._keys.events)
    finally:
        await store.close()
    assert length <= 200  # trimmed to about 10, a whole stream node (100 entries) at a time


async def test_a_replica_that_falls_behind_the_cap_ends_its_streams(redis_url, monkeypatch, caplog):
    """Events trimmed from the capped stream before this replica read them cannot reach its
    subscribers: it notices, and ends their streams, so that they reconnect and catch up."""
    monkeypatch.setattr(redis_store, "MIN_STREAM_LENGTH", 10)
    monkeypatch.setattr(follower, "READ_BATCH", 5)
    prefix = f"behind{next(_prefixes)}"
    writer, reader = (RedisStore(redis_url, prefix=prefix, history_size=5) for _ in range(2))
    await writer.start()
    await reader.start()
    try:
        subscription = await reader.subscribe()
        assert reader._follower.task is not None
        await stop_reading(reader)  # the replica stops reading for a while
        for index in range(400):
            await writer.add(record(f"que_{index}"))
        reader._follower.task = asyncio.get_running_loop().create_task(reader._follower.run())
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
    entry = encode(asked)
    assert asked._properties is None  # the request's JSON, spliced as it was encoded once
    read_back = decode("1700000000000-0", {"e": entry})
    assert read_back is not None
    assert (read_back.type, read_back.directory) == ("question.asked", "/p")
    assert read_back.properties == asked.properties


async def test_an_entry_that_is_not_an_event_is_skipped(replicas):
    first, second = replicas
    subscription = await first.subscribe()
    await first.add(record("que_1"))
    await first._client.xadd(first._keys.events, {"something": "else"})
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
# Pending counts: kept by each replica from the stream, no round trip per count

SESSIONS = (None, "ses_1", "ses_2", "ses_3")


async def counted(store: RedisStore) -> list[int]:
    """What ``count_pending`` says for all of ``SESSIONS``."""
    return [await store.count_pending(session) for session in SESSIONS]


async def counted_in_redis(store: RedisStore) -> list[int]:
    """The same, read from Redis itself."""
    client = store._client
    pending = int(await client.zcard(store._keys.pending))
    in_sessions = [int(await client.hget(store._keys.sessions, s) or 0) for s in SESSIONS[1:]]
    return [pending, *in_sessions]


def without_redis_counts(store: RedisStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting in Redis fails from now on: whatever the store counts comes from what it keeps."""

    async def refused(*args: object, **options: object) -> int:
        raise AssertionError("counted in Redis")

    monkeypatch.setattr(store._client, "zcard", refused)
    monkeypatch.setattr(store._client, "hget", refused)


async def test_counts_stay_right_across_replicas(replicas, monkeypatch):
    first, second = replicas
    for store in replicas:
        without_redis_counts(store, monkeypatch)
    steps = [
        (first, "add", "que_1", "ses_1"),
        (second, "add", "que_2", "ses_1"),
        (second, "add", "que_3", "ses_2"),
        (first, "finish", "que_2", None),
        (first, "add", "que_4", "ses_3"),
        (second, "finish", "que_1", None),
        (first, "finish", "que_1", None),  # already finished: changes nothing
        (second, "finish", "que_4", None),
        (first, "add", "que_5", "ses_1"),
    ]
    for store, change, request_id, session in steps:
        if change == "add":
            await store.add(record(request_id, session_id=session or "ses_1"))
        else:
            await store.finish(request_id, "expired", {"action": "cancel"})
        monkeypatch.undo()  # the reference below reads Redis
        expected = await counted_in_redis(first)
        for each in replicas:
            without_redis_counts(each, monkeypatch)
        assert await counted(store) == expected  # the replica that changed it knows at once
        await caught_up(first, second)
        assert await counted(first) == await counted(second) == expected
    assert await counted(first) == [2, 1, 1, 0]


async def test_a_replica_counts_its_own_changes_before_its_loop_reads_them(replicas):
    """Its loop is held back: its own changes count from Redis's reply, which has the counts after
    them; another replica's ask in a session this replica has not changed since counts once the loop
    has read it."""
    first, second = replicas
    assert first._follower.task is not None
    await stop_reading(first)  # the replica stops reading for a while
    await first.add(record("que_1"))
    await second.add(record("que_2"))
    await first.add(record("que_3", session_id="ses_2"))
    assert await counted(first) == [3, 1, 1, 0]  # que_2, asked before que_3, is in the total only
    await first.finish("que_1", "cancelled", {"action": "cancel"})
    assert await counted(first) == [2, 1, 1, 0]  # and in ses_1, counted by que_1's finish
    first._follower.task = asyncio.get_running_loop().create_task(first._follower.run())
    await caught_up(first)
    assert await counted(first) == await counted_in_redis(first) == [2, 1, 1, 0]


async def test_a_replica_started_later_counts_what_is_pending(replicas, redis_url):
    first, _ = replicas
    await first.add(record("que_1"))
    await first.add(record("que_2", session_id="ses_2"))
    later = RedisStore(redis_url, prefix=first._keys.prefix)
    await later.start()
    try:
        assert await counted(later) == [2, 1, 1, 0]
        await first.finish("que_2", "cancelled", {"action": "cancel"})
        await caught_up(later)
        assert await counted(later) == [1, 1, 0, 0]
    finally:
        await later.close()


async def test_questions_of_a_crashed_replica_count_until_they_expire(replicas, redis_url):
    """A replica that dies leaves its questions pending (counted on every replica) until another one
    times them out."""
    first, second = replicas
    prefix = first._keys.prefix
    crashing = RedisStore(redis_url, prefix=prefix)
    await crashing.start()
    await crashing.add(record("que_1", session_id="ses_3"))
    await crashing.add(record("que_2", session_id="ses_3"))
    assert crashing._follower.task is not None
    crashing._follower.task.cancel()  # gone without a word: nothing finished, nothing closed
    await caught_up(first, second)
    assert await counted(first) == await counted(second) == [2, 0, 0, 2]
    for request_id in ("que_1", "que_2"):
        assert await second.finish(request_id, "expired", {"action": "cancel"}) is not None
    await caught_up(first, second)
    assert await counted(first) == await counted(second) == [0, 0, 0, 0]
    assert await first._client.hgetall(first._keys.sessions) == {}
    await crashing.close()


async def test_an_entry_without_counts_makes_a_replica_count_again(replicas, monkeypatch):
    """A replica of an earlier version, during a rolling update, asks without saying the counts: the
    others take them from Redis again rather than miss that question."""
    first, second = replicas
    await first.add(record("que_1"))
    older = record("que_2", session_id="ses_2")
    async with first._client.pipeline(transaction=True) as pipe:  # what such a replica does
        pipe.set(first._keys.record(older.id), older.model_dump_json())
        pipe.zadd(first._keys.pending, {older.id: older.created_at})
        pipe.hincrby(first._keys.sessions, "ses_2", 1)
        pipe.xadd(first._keys.events, {"e": encode(older.asked_event())})
        await pipe.execute()
    await caught_up(first, second)
    await until(lambda: second._follower.counts is not None, what="the second replica counted again")
    assert await counted(first) == await counted(second) == [2, 1, 1, 0]
    await first.finish("que_2", "cancelled", {"action": "cancel"})
    await caught_up(first, second)
    assert await counted(second) == [1, 1, 0, 0]


async def test_counts_come_from_redis_while_the_stream_is_not_followed(replicas):
    first, second = replicas
    await first.add(record("que_1"))
    second._follower.reading = False  # as while its loop reconnects
    second._follower.counts = None
    assert await counted(second) == [1, 1, 0, 0]


# ---------------------------------------------------------------------------------------------------
# Finished records reach those waiting without reading them back


async def test_a_waiter_gets_the_finished_record_from_the_stream(replicas, monkeypatch):
    first, second = replicas
    await first.add(record("que_1"))  # pending in the first replica's memory
    waiter = asyncio.create_task(first.wait("que_1", 30))
    await until(lambda: waited_on(first, "que_1"), what="the waiter is registered")

    async def refused(*args: object, **options: object) -> None:
        raise AssertionError("read from Redis")

    monkeypatch.setattr(first._client, "get", refused)
    await second.finish("que_1", "answered", ANSWERED, [["x"]])
    finished = await asyncio.wait_for(waiter, 5)
    assert (finished.id, finished.status, finished.result) == ("que_1", "answered", ANSWERED)


async def test_a_finish_here_hands_the_record_to_its_waiters_at_once(replicas):
    """They need not wait for the loop to read the finish back from the stream."""
    first, _ = replicas
    await first.add(record("que_1"))
    waiter = asyncio.create_task(first.wait("que_1", 30))
    await until(lambda: waited_on(first, "que_1"), what="the waiter is registered")
    assert first._follower.task is not None
    await stop_reading(first)
    finished = await first.finish("que_1", "cancelled", {"action": "cancel"})
    assert await asyncio.wait_for(waiter, 5) is finished
    assert first._waiters.results == 0  # nothing kept once nobody waits


# ---------------------------------------------------------------------------------------------------
# Changes: one script each


async def test_changes_at_once_each_get_their_own_reply(replicas):
    """Hundreds of changes in flight on one connection, some given up half way: each of the others
    gets its own reply, and the counts stay right."""
    first, _ = replicas
    adds = [asyncio.create_task(first.add(record(f"que_{n}"))) for n in range(300)]
    await asyncio.sleep(0)
    for task in adds[::7]:
        task.cancel()
    await asyncio.gather(*adds, return_exceptions=True)
    finishes = await asyncio.gather(
        *(first.finish(f"que_{n}", "cancelled", {"action": "cancel"}) for n in range(300) if n % 7)
    )
    assert all(finished is not None and finished.status == "cancelled" for finished in finishes)
    await caught_up(first)
    assert await counted(first) == await counted_in_redis(first)


async def test_a_change_alone_goes_as_one_command_and_changes_at_once_in_batches(replicas, monkeypatch):
    first, _ = replicas
    scripts = first._connection.scripts
    assert scripts is not None
    alone: list[str] = []
    batches: list[int] = []
    execute_one, execute = scripts._execute_one, scripts._execute

    async def one(script: Any, keys: list[str], args: list[Any]) -> Any:
        alone.append(args[0])
        return await execute_one(script, keys, args)

    async def batch(commands: list[Any]) -> list[Any]:
        batches.append(len(commands))
        return await execute(commands)

    monkeypatch.setattr(scripts, "_execute_one", one)
    monkeypatch.setattr(scripts, "_execute", batch)
    for n in range(3):
        await first.add(record(f"que_{n}"))
    assert (alone, batches) == (["que_0", "que_1", "que_2"], [])
    await asyncio.gather(*(first.add(record(f"que_{n}")) for n in range(3, 53)))
    assert len(alone) == 4  # the first of them
    assert sum(batches) == 49
    assert len(batches) < 10
    assert await first.count_pending() == 53


async def test_an_add_sent_again_after_a_lost_reply_changes_nothing(replicas):
    """redis-py sends a command again when its connection breaks before the reply: the add that ran
    already is not counted or announced twice."""
    first, second = replicas
    await first.add(record("que_1"))
    await first.add(record("que_1"))  # the same script, with the same record, again
    await caught_up(first, second)
    assert await counted(first) == await counted(second) == await counted_in_redis(first)
    assert await first.count_pending() == 1
    asked = [e for e in await first._client.xrange(first._keys.events) if '"question.asked"' in e[1]["e"]]
    assert len(asked) == 1


async def test_a_finish_sent_again_after_a_lost_reply_is_still_this_finish(replicas):
    """Sent again, the finish script finds the record finished by this very finish: it says so, rather
    than that another replica finished it first, and neither counts nor announces it twice."""
    first, _ = replicas
    await first.add(record("que_1"))
    pending = await first.get("que_1")
    assert pending is not None
    finished = pending.finished("cancelled", {"action": "cancel"})
    args = [
        "que_1",
        finished.model_dump_json(),
        60_000,
        "ses_1",
        encode(finished.finished_event(None)),
        first._stream_length,
    ]
    keys = first._keys.changed("que_1")
    assert await first._connection.scripts.run(FINISH, keys, args) not in (None, 0)
    assert await first._connection.scripts.run(FINISH, keys, args) == 0
    other = pending.finished("answered", {"action": "accept", "content": {}}).model_dump_json()
    assert await first._connection.scripts.run(FINISH, keys, [args[0], other, *args[2:]]) is None
    await caught_up(first)
    assert await counted(first) == await counted_in_redis(first)
    assert await first.count_pending() == 0
    ended = [e for e in await first._client.xrange(first._keys.events) if '"question.rejected"' in e[1]["e"]]
    assert len(ended) == 1


async def test_changes_go_on_after_redis_drops_every_connection(replicas):
    """A batch whose connection Redis closed is sent again on a new one, as redis-py retries a
    command: every change in it gets its reply, once."""
    first, _ = replicas
    await asyncio.gather(*(first.add(record(f"que_{n}")) for n in range(20)))
    await first._client.client_kill_filter(_type="normal", skipme=False)
    await first.add(record("que_20"))  # alone, on the connection held for that: it broke
    await first._client.client_kill_filter(_type="normal", skipme=False)
    await asyncio.gather(*(first.add(record(f"que_{n}")) for n in range(21, 40)))
    finished = await asyncio.gather(
        *(first.finish(f"que_{n}", "cancelled", {"action": "cancel"}) for n in range(0, 40, 2))
    )
    assert all(record is not None for record in finished)
    await caught_up(first)
    assert await counted(first) == await counted_in_redis(first)
    assert await first.count_pending() == 20


async def test_a_lone_change_given_up_on_leaves_no_reply_for_the_next(replicas):
    """A request cancelled while its script is on the held connection: the next command there gets
    its own reply, not the abandoned one."""
    first, _ = replicas
    scripts = first._connection.scripts
    assert scripts is not None
    await first._client.execute_command("CLIENT", "PAUSE", 300, "WRITE")  # the script waits in Redis
    given_up = asyncio.create_task(first.add(record("que_1")))
    await until(lambda: scripts._alone, what="the script is on its way")
    given_up.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await given_up
    await first.add(record("que_2"))
    assert await scripts._held.execute("PING") in (True, "PONG")
    await caught_up(first)
    assert await counted(first) == await counted_in_redis(first)


async def test_scripts_are_sent_again_when_redis_forgot_them(replicas):
    first, _ = replicas
    await first.add(record("que_1"))
    await first._client.script_flush()  # as after a restart of Redis
    await first.add(record("que_2"))
    assert await first.finish("que_1", "cancelled", {"action": "cancel"}) is not None
    assert [r.id for r in await first.pending()] == ["que_2"]


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


# ---------------------------------------------------------------------------------------------------
# Idempotency-Keys held across replicas


async def test_a_key_is_held_by_the_first_call_and_joined_by_the_others(replicas):
    a, b = replicas
    first = await a.held_keys.join("key", "body", "que_1")
    assert first is not None
    assert (first.request_id, first.first) == ("que_1", True)
    joined = await b.held_keys.join("key", "body", "que_2")
    assert joined is not None
    assert (joined.epoch, joined.request_id, joined.first) == (
        first.epoch,
        "que_1",
        False,
    )
    with pytest.raises(DigestMismatch):
        await b.held_keys.join("key", "another body", "que_3")
    await a.held_keys.rekey("key", first.epoch, "que_0")  # an orphan claimed instead
    assert (await b.held_keys.held("key")).request_id == "que_0"

    assert await a.held_keys.leave("key", first.epoch, keep=True) == 1  # b still holds it
    assert await b.held_keys.leave("key", joined.epoch, keep=True) == 0  # the last: kept for the orphan
    assert await a.held_keys.join("key", "body", "que_4") is None  # wait until it is kept
    await b.held_keys.free("key", joined.epoch)
    again = await a.held_keys.join("key", "body", "que_4")
    assert again is not None
    assert again.first
    assert again.epoch != first.epoch
    assert await b.held_keys.leave("key", first.epoch) == 0  # that holding is over: nothing changes
    assert (await b.held_keys.held("key")).epoch == again.epoch


async def test_a_held_key_lapses_unless_a_replica_renews_it(redis_url):
    prefix = f"lapse{next(_prefixes)}"
    # A lease of 0.75 s (three liveness periods), renewed every 0.25 s: a loop held up under load for
    # less than half a second still renews it in time.
    store = RedisStore(redis_url, prefix=prefix, replica_liveness=0.25)
    await store.start()
    try:
        await store.held_keys.join("kept", "body", "que_1")
        await asyncio.sleep(1.0)  # past its first lease: renewed meanwhile
        assert await store.held_keys.held("kept") is not None
        store.held_keys._joined.clear()  # as a replica gone stops renewing
        await until(lambda: _not_held(store, "kept"), what="the lease lapses")
    finally:
        await store.close()


async def _not_held(store: RedisStore, caller: str) -> bool:
    return await store.held_keys.held(caller) is None


async def test_an_escalation_step_is_marked_by_one_replica_and_the_mark_expires(replicas, redis_url):
    one, other = replicas
    kept = record(ids.question_id())
    await one.add(kept)
    marks = await asyncio.gather(
        one.once.mark_escalated(kept.id, 0, kept.expires_at),
        other.once.mark_escalated(kept.id, 0, kept.expires_at),
    )
    assert sorted(marks) == [False, True]
    ttl = await one._client.pttl(one._keys.escalated(kept.id, 0))
    assert 60_000 < ttl <= (kept.expires_at - kept.created_at + 60) * 1000
