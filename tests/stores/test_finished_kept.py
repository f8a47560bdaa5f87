"""Finished results are kept for ``result_ttl``, and at most ``max_finished`` of them (in memory and in a
SQLite file): a busy gateway's memory stays bounded, the oldest results going first, and a tool waiting
on a question still gets its result."""

import asyncio
import gc
import sqlite3
import time

import pytest

from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores import make_store as store_of_settings
from elicitation_gateway.stores.sqlite import SqliteStore


def record(request_id: str) -> Record:
    form = build_form({"type": "object", "properties": {"a": {"type": "string"}}})
    request = QuestionRequest.new(request_id, "ses_1", list(form.questions), None)
    now = time.time()
    return Record.new(request, form, "m", None, now, now + 60, "cancel")


async def finish(store, request_id: str) -> None:
    await store.add(record(request_id))
    assert await store.finish(request_id, "cancelled", {"action": "cancel"}) is not None


async def test_the_oldest_results_go_once_more_than_the_most_are_kept(make_process_store):
    store = await make_process_store(max_finished=3)
    for number in range(5):
        await finish(store, f"que_{number}")
    assert [await store.get(f"que_{number}") is None for number in range(5)] == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert store._index.count_finished() == 3
    assert len(store._index._forget_at) == 3  # a result forgotten early leaves no timer behind


async def test_pending_questions_are_never_forgotten_for_results(make_process_store):
    store = await make_process_store(max_finished=1)
    for number in range(3):
        await store.add(record(f"que_p{number}"))
    for number in range(3):
        await finish(store, f"que_f{number}")
    assert [r.id for r in await store.pending()] == ["que_p0", "que_p1", "que_p2"]


async def test_a_waiting_tool_gets_its_result_even_if_forgotten_before_it_wakes(make_process_store):
    store = await make_process_store(max_finished=1)
    await store.add(record("que_1"))
    waiting = asyncio.ensure_future(store.wait("que_1", 5))
    await asyncio.sleep(0)  # it waits
    await store.finish("que_1", "cancelled", {"action": "cancel"})
    await finish(store, "que_2")  # no turn of the loop between: que_1 is forgotten before its tool wakes
    assert await store.get("que_1") is None
    woken = await asyncio.wait_for(waiting, 2)
    assert (woken.id, woken.status) == ("que_1", "cancelled")


async def test_the_bound_holds_at_any_rate_and_drops_the_records_objects(make_process_store):
    """However many finish within the retention, the results held (and their objects, which the garbage
    collector scans) stay at the bound."""
    store = await make_process_store(max_finished=50)
    for number in range(50):
        await finish(store, f"que_a{number:03}")
    gc.collect()
    held = len(gc.get_objects())
    for number in range(500):
        await finish(store, f"que_b{number:03}")
    gc.collect()
    assert store._index.count_finished() == 50
    assert len(gc.get_objects()) < held + 2_000  # 500 more results would be some 5,000 objects


async def test_a_file_reopened_keeps_only_the_newest_results(tmp_path):
    path = tmp_path / "gateway.db"
    store = SqliteStore(path, max_finished=10)
    await store.start()
    for number in range(6):
        await finish(store, f"que_{number}")
    await store.close()

    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM records").fetchone()[0] == 6

    again = SqliteStore(path, max_finished=2)
    await again.start()
    try:
        assert [await again.get(f"que_{number}") is None for number in range(6)] == [True] * 4 + [False] * 2
    finally:
        await again.close()
    with sqlite3.connect(path) as db:
        assert sorted(row[0] for row in db.execute("SELECT id FROM records")) == ["que_4", "que_5"]


async def test_a_result_forgotten_early_leaves_the_file_too(tmp_path):
    path = tmp_path / "gateway.db"
    store = SqliteStore(path, max_finished=2)
    await store.start()
    try:
        for number in range(4):
            await finish(store, f"que_{number}")
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        assert sorted(row[0] for row in db.execute("SELECT id FROM records")) == ["que_2", "que_3"]


@pytest.mark.parametrize("store", ["memory", "sqlite:///{path}"])
async def test_the_setting_reaches_the_store(store, tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_MAX_FINISHED", "2")
    monkeypatch.setenv("GATEWAY_STORE", store.format(path=tmp_path / "setting.db"))
    made = store_of_settings(Settings())
    await made.start()
    try:
        for number in range(3):
            await finish(made, f"que_{number}")
        assert await made.get("que_0") is None
        assert await made.get("que_2") is not None
    finally:
        await made.close()


async def test_a_result_its_caller_may_come_back_for_is_kept_past_the_bound(make_process_store):
    """A tool whose call dropped may send it again (an ``Idempotency-Key``) within its window: the result
    of its question stays, however many finish meanwhile, until its retention ends."""
    store = await make_process_store(max_finished=2)
    await store.add(record("que_orphan"))
    await store.orphans.orphan("caller", "que_orphan", "digest", 60)
    await store.finish("que_orphan", "cancelled", {"action": "cancel"})
    for number in range(5):
        await finish(store, f"que_{number}")
    assert (await store.get("que_orphan")).status == "cancelled"
    assert await store.get("que_0") is None
    assert await store.orphans.claim("caller", "digest") == "que_orphan"
    assert store._index.count_finished() == 3  # the two newest, and the one spared


async def test_an_orphan_whose_window_ended_is_not_spared(make_process_store):
    store = await make_process_store(max_finished=1)
    await store.add(record("que_orphan"))
    await store.orphans.orphan("caller", "que_orphan", "digest", 0)
    await store.finish("que_orphan", "cancelled", {"action": "cancel"})
    await finish(store, "que_1")
    assert await store.get("que_orphan") is None


async def asked_a_b_finished_b_a(path) -> None:
    store = SqliteStore(path)
    await store.start()
    for name in ("que_a", "que_b"):
        await store.add(record(name))
    for name in ("que_b", "que_a"):
        await store.finish(name, "cancelled", {"action": "cancel"})
        await asyncio.sleep(0.01)
    await store.close()


async def test_a_file_reopened_forgets_first_the_results_that_finished_first(tmp_path):
    """Asked in one order, finished in the other: the oldest result is the one that finished first."""
    path = tmp_path / "gateway.db"
    await asked_a_b_finished_b_a(path)
    again = SqliteStore(path, max_finished=2)
    await again.start()
    try:
        await finish(again, "que_c")
        assert await again.get("que_a") is not None
        assert await again.get("que_b") is None
    finally:
        await again.close()


async def test_a_file_reopened_keeps_the_results_that_finished_last(tmp_path):
    path = tmp_path / "gateway.db"
    await asked_a_b_finished_b_a(path)
    again = SqliteStore(path, max_finished=1)
    forgotten: list[str] = []
    again._index._forgotten = forgotten.append
    await again.start()
    try:
        assert await again.get("que_a") is not None
        assert await again.get("que_b") is None
        assert forgotten == []  # a start drops what is past the bound in one statement, not a row at a time
        await finish(again, "que_c")
        assert forgotten == ["que_a"]
    finally:
        await again.close()
