"""The audit trail each store keeps (memory, a SQLite file, a real Redis): one chain that verifies, the
filters, the retention (old entries dropped, the rest still verifying, the next entry following the
last), a SQLite file reopened continuing its chain, and two Redis stores (two replicas) appending at
once making one chain."""

import asyncio
import gc
import itertools
from datetime import UTC, datetime, timedelta

import pytest

from elicitation_gateway.audit import parse_since, rfc3339, verify
from elicitation_gateway.stores.audit_trail import MemoryAuditTrail
from elicitation_gateway.stores.memory import MemoryStore
from elicitation_gateway.stores.redis import RedisStore
from elicitation_gateway.stores.sqlite import SqliteStore

pytest_plugins = ["tests.redis_server"]

_prefixes = itertools.count()
KINDS = ("memory", "sqlite", "redis")


async def opened(kind: str, request, prefix: str | None = None):
    if kind == "memory":
        store = MemoryStore()
    elif kind == "sqlite":
        store = SqliteStore(request.getfixturevalue("tmp_path") / "audit.db")
    else:
        prefix = prefix or f"audit{next(_prefixes)}"
        store = RedisStore(request.getfixturevalue("redis_url"), prefix=prefix)
    await store.start()
    return store


def lines(entries) -> list[bytes]:
    return [entry.line() for entry in entries]


@pytest.mark.parametrize("kind", KINDS)
async def test_entries_chain_and_filter(kind, request):
    store = await opened(kind, request)
    try:
        trail = store.audit_trail
        long_ago = datetime.now(UTC) - timedelta(days=3)
        await trail.append(event="asked", question="que_1", via="tool", at=long_ago)
        await trail.append(event="asked", question="que_2", via="tool")
        await trail.append(event="replied", question="que_1", via="page", who="alice", answers=[["yes"]])
        everything = await trail.entries()
        assert [(e.seq, e.event, e.question) for e in everything] == [
            (1, "asked", "que_1"),
            (2, "asked", "que_2"),
            (3, "replied", "que_1"),
        ]
        assert everything[2].who == "alice"
        assert everything[2].answers == [["yes"]]
        verdict = verify(lines(everything))
        assert verdict.ok
        assert verdict.entries == 3
        assert [e.seq for e in await trail.entries(question="que_1")] == [1, 3]
        recent = await trail.entries(since=parse_since(rfc3339(datetime.now(UTC) - timedelta(days=1))))
        assert [e.seq for e in recent] == [2, 3]
    finally:
        await store.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_retention_drops_old_entries_and_the_rest_verifies(kind, request):
    store = await opened(kind, request)
    try:
        trail = store.audit_trail
        old = datetime.now(UTC) - timedelta(days=40)
        for number in range(5):
            await trail.append(event="asked", question=f"que_old{number}", via="tool", at=old)
        await trail.append(event="asked", question="que_new", via="tool")
        dropped = await trail.prune(rfc3339(datetime.now(UTC) - timedelta(days=30)))
        assert dropped == 5
        kept = await trail.entries()
        assert [e.question for e in kept] == ["que_new"]
        await trail.append(event="expired", question="que_new", via="gateway")
        kept = await trail.entries()
        verdict = verify(lines(kept))
        assert verdict.ok, verdict.problem
        assert [e.seq for e in kept] == [6, 7]
        # Everything past the retention: the next entry still follows the last one.
        await trail.prune(rfc3339(datetime.now(UTC) + timedelta(days=1)))
        last = await trail.append(event="asked", question="que_later", via="tool")
        assert last.seq == 8
        assert last.prev == kept[-1].hash
    finally:
        await store.close()


async def test_a_sqlite_file_reopened_continues_its_chain(tmp_path):
    path = tmp_path / "gateway.db"
    store = SqliteStore(path)
    await store.start()
    await store.audit_trail.append(event="asked", question="que_1", via="tool")
    await store.audit_trail.append(event="rejected", question="que_1", via="terminal", who="bob")
    await store.close()
    store = SqliteStore(path)
    await store.start()
    try:
        entry = await store.audit_trail.append(event="asked", question="que_2", via="tool")
        assert entry.seq == 3
        everything = await store.audit_trail.entries()
        assert [e.seq for e in everything] == [1, 2, 3]
        assert verify(lines(everything)).ok
    finally:
        await store.close()


async def test_two_redis_replicas_appending_at_once_make_one_chain(redis_url):
    prefix = f"replicas{next(_prefixes)}"
    first, second = RedisStore(redis_url, prefix=prefix), RedisStore(redis_url, prefix=prefix)
    await first.start()
    await second.start()
    try:

        async def appends(store, name: str) -> None:
            for number in range(100):
                await store.audit_trail.append(event="asked", question=f"que_{name}{number}", via="tool")

        # Several appends in flight on each replica at once, interleaved across both.
        await asyncio.gather(
            *(appends(store, f"{id(store)}x{k}") for store in (first, second) for k in range(4))
        )
        everything = await second.audit_trail.entries()
        assert len(everything) == 800
        assert [e.seq for e in everything] == list(range(1, 801))
        verdict = verify(lines(everything))
        assert verdict.ok, verdict.problem
        assert len({e.question for e in everything}) == 800
    finally:
        await first.close()
        await second.close()


async def test_the_memory_trail_keeps_its_latest_entries_and_they_verify():
    trail = MemoryAuditTrail(limit=3)
    for number in range(5):
        await trail.append(event="asked", question=f"que_{number}", via="tool")
    kept = await trail.entries()
    assert [e.seq for e in kept] == [3, 4, 5]
    assert verify(lines(kept)).ok


async def test_the_memory_trail_keeps_its_bytes_bounded_however_long_the_answers():
    """Entries of long answers (an emoji makes a string 4 bytes a character) are dropped, oldest first,
    once the trail holds more than its bytes; the rest verify, and the newest is always kept."""
    trail = MemoryAuditTrail(limit_bytes=1_000_000)
    for number in range(40):
        await trail.append(
            event="replied", question=f"que_{number}", via="page", who="alice", answers=[["😀" * 20_000]]
        )
    kept = await trail.entries()
    assert 10 <= len(kept) <= 13  # each holds some 80 KB
    assert kept[-1].seq == 40
    assert trail.bytes <= 1_000_000
    written = sum(len(entry.line()) for entry in kept)
    assert written < trail.bytes < written + 100 * len(kept)  # the lines, and a little for each
    assert verify(lines(kept)).ok
    huge = MemoryAuditTrail(limit_bytes=1000)
    await huge.append(event="replied", question="que_x", via="page", answers=[["x" * 5000]])
    assert [entry.question for entry in await huge.entries()] == ["que_x"]
    assert await trail.prune("9999") == len(kept)
    assert trail.bytes == 0


async def test_the_memory_trail_is_not_walked_by_the_garbage_collector():
    """A full trail is a hundred thousand entries: kept as objects with lists of answers, every
    collection would walk them all and stall the loop. Kept as lines, they add nothing it tracks."""
    trail = MemoryAuditTrail()
    await trail.append(event="asked", question="que_first", via="tool")  # the trail's own objects made
    gc.collect()
    gc.disable()  # no collection meanwhile: what it would walk next is counted before it first looks
    try:
        tracked = len(gc.get_objects())
        for number in range(500):
            await trail.append(event="asked", question=f"que_{number}", via="tool")
            await trail.append(
                event="replied", question=f"que_{number}", via="page", who="a", answers=[["x", "y"]]
            )
        added = len(gc.get_objects()) - tracked
    finally:
        gc.enable()
    assert added < 100  # as objects: 500 * (1 + 4 + 1) more; as tuples of strings, 1,000
    assert [(e.event, e.answers) for e in await trail.entries(question="que_7")] == [
        ("asked", None),
        ("replied", [["x", "y"]]),
    ]


async def test_a_memory_batch_with_an_entry_it_cannot_write_keeps_none_of_it():
    trail = MemoryAuditTrail()
    await trail.append(event="asked", question="que_1", via="tool")
    batch = [
        {"event": "asked", "question": "que_2", "via": "tool"},
        {"event": "replied", "question": "que_2", "via": "page", "answers": [["\ud800"]]},
    ]
    with pytest.raises(UnicodeEncodeError):
        await trail.append_many(batch)
    await trail.append(event="asked", question="que_3", via="tool")
    kept = await trail.entries()
    assert [entry.question for entry in kept] == ["que_1", "que_3"]
    assert verify(lines(kept)).ok


async def test_the_memory_trail_finds_a_question_whatever_its_id_holds():
    trail = MemoryAuditTrail()
    odd = ['que_"question":', 'que_a",b', "que_\\", "que_é😀", "que_1"]
    for question in odd:
        await trail.append(event="asked", question=question, via="tool", who='"question":"que_1",')
    for question in odd:
        assert [entry.question for entry in await trail.entries(question=question)] == [question]
    assert await trail.entries(question="que_") == []


@pytest.mark.parametrize("kind", KINDS)
async def test_since_gives_every_entry_from_the_first_at_or_after_it(kind, request):
    """Replicas' clocks differ a little: an entry may follow one a few milliseconds later than it. A
    reading from ``since`` is still a chain, from its first entry at or after ``since`` on."""
    store = await opened(kind, request)
    try:
        trail = store.audit_trail
        now = datetime.now(UTC)
        for offset in (0, 10, 9, 11):  # the third entry's clock ran behind
            at = now + timedelta(milliseconds=offset)
            await trail.append(event="asked", question="que_1", via="tool", at=at)
        since = rfc3339(now + timedelta(milliseconds=10))
        cut = await trail.entries(since=since)
        assert [e.seq for e in cut] == [2, 3, 4]
        assert verify(lines(cut)).ok
        assert await trail.entries(since=rfc3339(now + timedelta(days=1))) == []
    finally:
        await store.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_a_batch_is_appended_at_once_in_order_and_the_chain_goes_on(kind, request):
    store = await opened(kind, request)
    try:
        trail = store.audit_trail
        await trail.append(event="asked", question="que_0", via="tool")
        batch = [{"event": "asked", "question": f"que_{n}", "via": "tool"} for n in range(1, 6)]
        made = await trail.append_many(batch)
        assert [e.seq for e in made] == [2, 3, 4, 5, 6]
        assert await trail.append_many([]) == []
        await trail.append(event="replied", question="que_3", via="page", who="bob", answers=[["no"]])
        everything = await trail.entries()
        assert [e.question for e in everything] == [f"que_{n}" for n in range(6)] + ["que_3"]
        assert everything[1:6] == made
        assert verify(lines(everything)).ok
    finally:
        await store.close()
