"""The parts a store exposes besides its records and events, as each backend gives them, and the
in-process defaults on their own (``test_store.py`` checks every part's promises on every store)."""

import types

import pytest

from elicitation_gateway.stores import once as once_module
from elicitation_gateway.stores.base import Store
from elicitation_gateway.stores.memory import MemoryStore
from elicitation_gateway.stores.once import ProcessOnce
from elicitation_gateway.stores.orphans import DigestMismatch, LocalOrphans
from elicitation_gateway.stores.redis import RedisStore
from elicitation_gateway.stores.redis.callers import RedisOrphans
from elicitation_gateway.stores.redis.once import RedisOnce
from elicitation_gateway.stores.sqlite import SqliteStore
from elicitation_gateway.stores.sqlite_once import SqliteOnce


def test_a_store_must_keep_only_records_and_events():
    assert Store.__abstractmethods__ == {"add", "get", "pending", "finish", "wait", "subscribe"}


def test_each_backend_gives_its_own_orphans_and_once_only_marks(tmp_path):
    memory = MemoryStore()
    assert isinstance(memory.orphans, LocalOrphans)
    assert memory.orphans is memory.orphans  # one per store
    assert isinstance(memory.once, ProcessOnce)
    assert memory.once is memory.once
    assert MemoryStore().once is not memory.once
    sqlite = SqliteStore(tmp_path / "gateway.db")
    assert isinstance(sqlite.orphans, LocalOrphans)
    assert isinstance(sqlite.once, SqliteOnce)
    redis = RedisStore("redis://127.0.0.1:1/0")  # not started: nothing connects
    assert isinstance(redis.orphans, RedisOrphans)
    assert isinstance(redis.once, RedisOnce)


async def test_the_default_claim_is_always_the_first():
    once = ProcessOnce()
    assert await once.claim("webhook:evt_1", 60)
    assert await once.claim("webhook:evt_1", 60)  # a store of one process: every event is its own


async def test_the_default_marks_a_step_once_until_its_question_expires(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(once_module, "time", types.SimpleNamespace(time=lambda: now[0]))
    once = ProcessOnce()
    assert await once.mark_escalated("que_1", 0, 1010.0)
    assert not await once.mark_escalated("que_1", 0, 1010.0)
    assert await once.mark_escalated("que_1", 1, 1010.0)  # another step
    assert await once.mark_escalated("que_2", 0, 1010.0)  # another question
    now[0] = 1010.0
    assert not await once.mark_escalated("que_1", 0, 1010.0)  # expiring now, not yet gone
    now[0] = 1010.5
    assert await once.mark_escalated("que_1", 0, 1020.0)  # its question expired: the mark went
    assert not await once.mark_escalated("que_1", 0, 1020.0)


async def test_the_default_orphans_are_claimed_once_by_digest_in_the_process():
    orphans = LocalOrphans()
    await orphans.orphan("key", "que_1", "body-a", 60)
    assert len(orphans) == 1
    with pytest.raises(DigestMismatch):
        await orphans.claim("key", "body-b")
    assert await orphans.claim("key", "body-a") == "que_1"
    assert len(orphans) == 0
    assert not await orphans.end("que_1")
