"""The SQLite store when its file is taken away or cannot be written: every change refused as
:class:`StoreUnavailable` and made nowhere (neither in the file nor in memory), the reason said, one
ERROR when it starts and one INFO when writes work again, no empty file ever made at the path, and what
the store held written back when it closes."""

import logging
import os
import sqlite3
from pathlib import Path

import pytest

from elicitation_gateway.stores.base import StoreUnavailable
from elicitation_gateway.stores.sqlite import SqliteStore
from tests.stores.test_store import record

ANSWERED = {"action": "accept", "content": {"a": "x"}}


async def opened(path: Path) -> SqliteStore:
    store = SqliteStore(path)
    await store.start()
    return store


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_deleted_file_refuses_every_change_and_keeps_memory_as_the_file(tmp_path, caplog):
    path = tmp_path / "gateway.db"
    store = await opened(path)
    await store.add(record("que_1"))
    await store.add(record("que_2"))
    await store.finish("que_2", "answered", ANSWERED, [["x"]])
    watcher = await store.subscribe()
    path.unlink()

    with caplog.at_level(logging.INFO, logger="elicitation_gateway.stores.sqlite"):
        for _ in range(3):
            with pytest.raises(StoreUnavailable, match="deleted"):
                await store.add(record("que_3"))
            with pytest.raises(StoreUnavailable, match="deleted"):
                await store.finish("que_1", "cancelled", {"action": "cancel"})
        store.tool_liveness.waits("que_1")  # refused quietly: the fault is logged once
        problem = await store.problem()
    assert "deleted" in (problem or "")
    assert not await store.healthy()
    assert len(errors(caplog)) == 1, errors(caplog)
    assert "gateway.db was deleted" in errors(caplog)[0]

    # Nothing changed in memory, nothing was published.
    assert [r.id for r in await store.pending()] == ["que_1"]
    assert await store.get("que_3") is None
    assert watcher._queue == type(watcher._queue)()  # (nothing queued for it)

    store._checkpoint_now()  # (as the thread runs it)
    assert not path.exists(), "a checkpoint made an empty file at the path"

    watcher.close()
    await store.close()  # writes what it held back to the path
    again = await opened(path)
    assert [r.id for r in await again.pending()] == ["que_1"]
    assert (await again.get("que_2")).result == ANSWERED
    await again.add(record("que_4"))
    await again.close()


async def test_writes_work_again_once_the_file_is_back(tmp_path, caplog):
    path = tmp_path / "gateway.db"
    moved = tmp_path / "elsewhere.db"
    store = await opened(path)
    await store.add(record("que_1"))
    path.rename(moved)
    with caplog.at_level(logging.INFO, logger="elicitation_gateway.stores.sqlite"):
        assert "deleted" in (await store.problem() or "")
        with pytest.raises(StoreUnavailable):
            await store.add(record("que_2"))
        moved.rename(path)
        assert await store.problem() is None  # the small write the readiness check makes works
        await store.add(record("que_2"))
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("written again" in message for message in infos), infos
    assert len(errors(caplog)) == 1
    await store.close()
    again = await opened(path)
    assert [r.id for r in await again.pending()] == ["que_1", "que_2"]
    await again.close()


async def test_a_replaced_file_is_left_alone_and_what_the_store_held_is_saved_beside_it(tmp_path):
    path = tmp_path / "gateway.db"
    store = await opened(path)
    await store.add(record("que_1"))
    path.unlink()
    with sqlite3.connect(path) as other:  # someone else's database, now at the path
        other.execute("CREATE TABLE theirs (x)")
    other.close()
    assert "replaced" in (await store.problem() or "")
    with pytest.raises(StoreUnavailable, match="replaced"):
        await store.add(record("que_2"))
    await store.close()

    with sqlite3.connect(path) as theirs:
        assert theirs.execute("SELECT name FROM sqlite_master").fetchall() == [("theirs",)]
    theirs.close()
    [saved] = tmp_path.glob("gateway.db.*.saved")
    kept = await opened(saved)
    assert [r.id for r in await kept.pending()] == ["que_1"]
    await kept.close()


async def test_what_sqlite_refuses_is_store_unavailable_and_changes_nothing(tmp_path, caplog, monkeypatch):
    """A full disk or an I/O error, as SQLite reports it (``OperationalError``) at the commit."""
    path = tmp_path / "gateway.db"
    store = await opened(path)
    await store.add(record("que_1"))
    real = store._db
    assert real is not None

    class Failing:
        """The connection, whose commits fail as on a full disk."""

        def __getattr__(self, name):
            return getattr(real, name)

        def execute(self, sql, *args):
            if sql == "COMMIT":
                raise sqlite3.OperationalError("database or disk is full")
            return real.execute(sql, *args)

    store._db = Failing()  # type: ignore[assignment]
    with caplog.at_level(logging.INFO, logger="elicitation_gateway.stores.sqlite"):
        for _ in range(2):
            with pytest.raises(StoreUnavailable, match="disk is full"):
                await store.finish("que_1", "cancelled", {"action": "cancel"})
            with pytest.raises(StoreUnavailable, match="disk is full"):
                await store.add(record("que_2"))
        assert "disk is full" in (await store.problem() or "")
        assert not real.in_transaction  # rolled back
        store._db = real
        assert await store.problem() is None  # recovered by the readiness check's own write
    assert len(errors(caplog)) == 1
    assert [r.id for r in await store.pending()] == ["que_1"]
    await store.close()
    again = await opened(path)
    assert [r.id for r in await again.pending()] == ["que_1"]
    await again.close()


async def test_a_constraint_broken_by_a_bug_is_not_taken_for_a_full_disk(tmp_path):
    store = await opened(tmp_path / "gateway.db")
    await store.add(record("que_1"))
    store._index._pending.clear()  # (a bug: memory forgot a record the file has)
    with pytest.raises(sqlite3.IntegrityError):
        await store.add(record("que_1"))
    assert await store.problem() is None
    await store.close()


async def test_the_checkpoint_never_creates_a_file(tmp_path, monkeypatch):
    path = tmp_path / "gateway.db"
    store = await opened(path)
    await store.add(record("que_1"))
    os.unlink(path)
    monkeypatch.setattr(store, "_moved", lambda: None)  # even had it not noticed the file is gone
    store._checkpoint_now()  # (as the thread runs it)
    assert not path.exists()
    monkeypatch.undo()
    await store.close()
