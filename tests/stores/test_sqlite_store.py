"""The SQLite store's own promise: what it kept is there again when the file is opened anew."""

import asyncio
import os
import sqlite3
import time
from pathlib import Path

import pytest

from elicitation_gateway import ids
from elicitation_gateway.gateway import Gateway
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores import make_store
from elicitation_gateway.stores.sqlite import SqliteStore, SqliteStoreError, check_url, parse_url
from tests.helpers import until
from tests.stores.test_store import drain, record


async def opened(path: Path, **options) -> SqliteStore:
    store = SqliteStore(path, **options)
    await store.start()
    return store


async def test_pending_and_finished_records_outlive_the_store(tmp_path):
    path = tmp_path / "gateway.db"
    store = await opened(path)
    for name in ("que_1", "que_2", "que_3"):
        await store.add(record(name, "/p"))
    await store.finish("que_2", "answered", {"action": "accept", "content": {"a": "x"}}, [["x"]])
    await store.close()

    again = await opened(path)
    assert [r.id for r in await again.pending()] == ["que_1", "que_3"]
    assert (await again.get("que_1")).directory == "/p"
    finished = await again.get("que_2")
    assert (finished.status, finished.result) == ("answered", {"action": "accept", "content": {"a": "x"}})
    subscription = await again.subscribe()
    assert [e.properties["id"] for e in subscription.backlog] == ["que_1", "que_3"]
    subscription.close()
    await again.close()


async def test_last_event_id_replays_across_a_reopen(tmp_path):
    path = tmp_path / "gateway.db"
    store = await opened(path)
    watcher = await store.subscribe()
    await store.add(record("que_1"))
    await store.add(record("que_2"))
    await store.finish("que_1", "cancelled", {"action": "cancel"})
    seen = await drain(watcher, 3)
    watcher.close()
    await store.close()

    again = await opened(path)
    replay = await again.subscribe(seen[0].id)
    assert [(e.id, e.type, e.replayable) for e in replay.backlog] == [
        (seen[1].id, "question.asked", True),
        (seen[2].id, "question.rejected", True),
    ]
    assert replay.backlog[0].frame() == seen[1].frame()  # the same bytes as before the restart
    replay.close()
    latest = await again.subscribe(seen[2].id)
    await again.add(record("que_3"))
    [new] = await drain(latest, 1)
    assert new.id > seen[2].id  # ids keep sorting after the restart
    follow = await again.subscribe(seen[2].id)
    assert [e.id for e in follow.backlog] == [new.id]
    latest.close()
    follow.close()
    await again.close()


async def test_the_history_stays_capped(tmp_path):
    path = tmp_path / "gateway.db"
    store = await opened(path, history_size=2)
    for name in ("que_1", "que_2", "que_3"):
        await store.add(record(name))
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM events").fetchone()[0] == 2


async def test_results_past_their_retention_are_purged(tmp_path):
    path = tmp_path / "gateway.db"
    store = await opened(path, result_ttl=0.2)
    await store.add(record("que_1"))
    await store.add(record("que_2"))
    await store.finish("que_1", "cancelled", {"action": "cancel"})
    await store.close()  # before its forget timer: the row is still in the file
    await asyncio.sleep(0.3)

    again = await opened(path, result_ttl=0.2)
    assert await again.get("que_1") is None
    assert (await again.get("que_2")).pending
    await again.finish("que_2", "cancelled", {"action": "cancel"})
    await again.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT id FROM records").fetchall() == [("que_2",)]


async def test_a_finished_result_is_deleted_from_the_file_after_its_retention(tmp_path):
    path = tmp_path / "gateway.db"
    store = await opened(path, result_ttl=0.05)
    await store.add(record("que_1"))
    await store.finish("que_1", "cancelled", {"action": "cancel"})

    def rows() -> int:
        with sqlite3.connect(path) as db:
            return db.execute("SELECT count(*) FROM records").fetchone()[0]

    await until(lambda: rows() == 0, what="the finished row is deleted")
    await store.close()


async def test_questions_a_blocking_tool_waited_for_are_abandoned_after_a_crash(tmp_path):
    path = tmp_path / "gateway.db"
    store = await opened(path)
    await store.add(record("que_1"))
    await store.add(record("que_2"))
    store.tool_liveness.waits("que_1")
    await store.close()

    again = await opened(path)
    assert await again.tool_liveness.abandoned() == ["que_1"]
    assert await again.tool_liveness.abandoned() == []  # said once
    await again.close()


async def test_a_gateway_on_the_file_withdraws_abandoned_questions_and_resumes_timers(tmp_path):
    path = tmp_path / "gateway.db"
    settings = Settings(store=f"sqlite:///{path}", timeout=60)
    first = Gateway(settings)
    await first.start()
    blocking = await first.ask("m", {"type": "object", "properties": {"a": {"type": "string"}}})
    lasting = await first.ask("m", {"type": "object", "properties": {"a": {"type": "string"}}})
    short = await first.ask("m", {"type": "object", "properties": {"a": {"type": "string"}}})
    first.tool_waiting(blocking.id).__enter__()
    # A crash: nothing finished, the file as it is.
    first.expiry.clear()
    first.store._db.close()  # type: ignore[attr-defined]
    first.store._unlock()  # type: ignore[attr-defined]
    with sqlite3.connect(path) as db:  # as if its timeout passed while the gateway was down
        body = db.execute("SELECT body FROM records WHERE id = ?", (short.id,)).fetchone()[0]
        body = body.replace(f'"expires_at":{short.expires_at}', f'"expires_at":{time.time() - 1}')
        db.execute("UPDATE records SET body = ? WHERE id = ?", (body, short.id))

    second = Gateway(settings)
    await second.start()
    try:
        assert (await second.store.get(blocking.id)).status == "cancelled"

        async def expired() -> bool:
            return (await second.store.get(short.id)).status == "expired"

        await until(expired, what="the question whose time passed expires")
        assert (await second.store.get(lasting.id)).pending
        assert lasting.id in second.expiry
    finally:
        await second.shutdown()
    # A graceful shutdown leaves the question pending for the next start.
    third = SqliteStore(path)
    await third.start()
    assert [r.id for r in await third.pending()] == [lasting.id]
    await third.close()


async def test_a_second_store_on_the_same_file_is_refused(tmp_path):
    path = tmp_path / "gateway.db"
    store = await opened(path)
    with pytest.raises(SqliteStoreError, match="in use by another gateway"):
        await opened(path)
    await store.close()
    await (await opened(path)).close()  # free again once closed


async def test_a_file_that_is_not_a_database_gives_a_clear_error(tmp_path):
    path = tmp_path / "gateway.db"
    path.write_bytes(b"this is not a database, it is a plain text file of some length" * 100)
    with pytest.raises(SqliteStoreError, match="not a usable SQLite database"):
        await opened(path)


@pytest.mark.parametrize(
    ("url", "path", "synchronous"),
    [
        ("sqlite:///gateway.db", "gateway.db", "normal"),
        ("sqlite:///data/gateway.db", "data/gateway.db", "normal"),
        ("sqlite:////data/gateway.db", "/data/gateway.db", "normal"),
        ("sqlite:////data/gateway.db?synchronous=FULL", "/data/gateway.db", "full"),
    ],
)
def test_urls_follow_sqlalchemys_convention(url, path, synchronous):
    assert parse_url(url) == (Path(path), synchronous)


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://gateway.db",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite:///a.db?journal=off",
        "sqlite:///dir/",
    ],
)
def test_bad_urls_are_refused_with_a_reason(url):
    with pytest.raises(ValueError, match=r"SQLite URL|synchronous|names a file"):
        Settings(store=url)


def test_a_folder_that_cannot_be_written_is_refused_at_settings(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        if not os.access(locked, os.W_OK):  # root may write anywhere
            with pytest.raises(ValueError, match="not a writable folder"):
                check_url(f"sqlite:///{locked}/gateway.db")
        with pytest.raises(ValueError, match="is not a file"):
            check_url(f"sqlite:///{tmp_path}")
    finally:
        locked.chmod(0o700)


async def test_make_store_makes_the_file_in_an_existing_folder(tmp_path):
    store = make_store(Settings(store=f"sqlite:///{tmp_path}/gateway.db"))
    assert isinstance(store, SqliteStore)
    await store.start()
    assert (tmp_path / "gateway.db").is_file()
    await store.close()


async def test_a_missing_folder_is_refused_naming_it_and_nothing_is_made(tmp_path):
    """A folder that does not exist is more often a typo than a wish: refused at settings, and a store
    made anyway (as tests and embedders may) makes no folder either."""
    with pytest.raises(ValueError, match=f"the folder {tmp_path}/a/b does not exist: create it first"):
        Settings(store=f"sqlite:///{tmp_path}/a/b/gateway.db")
    store = SqliteStore(tmp_path / "a" / "b" / "gateway.db")
    with pytest.raises(SqliteStoreError, match="cannot open the question store"):
        await store.start()
    assert not (tmp_path / "a").exists()


def test_ids_sort_after_one_from_a_later_clock():
    later = f"evt_{int(time.time() * 1000) + 60_000:012x}" + "0" * 14
    ids.not_before(later)
    assert ids.event_id() > later
    assert ids.question_id()[4:] > later[4:]


async def test_an_escalation_mark_outlives_the_store_until_its_question_finishes(tmp_path):
    path = tmp_path / "gateway.db"
    store = await opened(path)
    kept = record(ids.question_id())
    await store.add(kept)
    assert await store.once.mark_escalated(kept.id, 0, kept.expires_at)
    await store.close()
    store = await opened(path)
    assert not await store.once.mark_escalated(kept.id, 0, kept.expires_at)
    assert await store.once.mark_escalated(kept.id, 1, kept.expires_at)
    await store.finish(kept.id, "cancelled", {"action": "cancel"})
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM escalations").fetchone()[0] == 0
