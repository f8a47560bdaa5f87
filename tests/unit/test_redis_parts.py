"""Parts of the Redis store that need no Redis: the names of its keys, and its waiters.

Replicas of different versions share one Redis while a deployment rolls, so the key names are a
contract: each is checked against the layout the package documents. The waiters hand a finished
record to the requests waiting for it, and keep it only while someone waits.
"""

import asyncio
import re
import time

from hypothesis import given
from hypothesis import strategies as st

from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.stores.redis.keys import Keys, hashed
from elicitation_gateway.stores.redis.waiters import Waiters


def test_the_keys_are_those_the_package_documents():
    keys = Keys("gw")
    assert (keys.prefix, keys.pending, keys.sessions, keys.events, keys.replicas) == (
        "gw",
        "gw:pending",
        "gw:sessions",
        "gw:events",
        "gw:replicas",
    )
    assert keys.record("que_1") == "gw:record:que_1"
    assert keys.changed("que_1") == ["gw:record:que_1", "gw:pending", "gw:sessions", "gw:events"]
    assert keys.replica("host-1-ab") == "gw:replica:host-1-ab"
    assert keys.waits("host-1-ab") == "gw:waits:host-1-ab"
    assert keys.orphaned("que_1") == keys.orphaned_prefix + "que_1" == "gw:orphaned:que_1"


@given(st.text(), st.text())
def test_a_callers_keys_hold_none_of_what_it_is_made_of(caller: str, other: str):
    keys = Keys("gw")
    fingerprint = hashed(caller)
    assert re.fullmatch(r"[0-9a-f]{32}", fingerprint)
    assert keys.orphans(caller) == f"gw:orphans:{fingerprint}"
    assert keys.held(caller) == f"gw:held:{fingerprint}"
    if other != caller:
        assert hashed(other) != fingerprint


def finished(request_id: str = "que_1") -> Record:
    form = build_form({"type": "object", "properties": {"a": {"type": "string"}}})
    now = time.time()
    asked = Record(
        request=QuestionRequest(id=request_id, sessionID="ses_1", questions=list(form.questions)),
        form=form,
        message="m",
        created_at=now,
        expires_at=now + 60,
    )
    return asked.finished("accepted", {"action": "accept", "content": {}})


async def test_a_finished_record_is_handed_to_its_waiters_and_wakes_them():
    waiters, done = Waiters(), finished()
    with waiters.waiting("que_1") as first, waiters.waiting("que_1") as second:
        assert "que_1" in waiters
        assert waiters.wants("que_1")
        waiters.hand(done)
        assert first.is_set()
        assert second.is_set()
        assert waiters.result("que_1") is done
        assert not waiters.wants("que_1")  # handed once: the stream's copy is not needed
    assert "que_1" not in waiters
    assert waiters.result("que_1") is None
    assert waiters.results == 0


async def test_a_record_nobody_waits_for_is_not_kept():
    waiters = Waiters()
    waiters.hand(finished())
    assert waiters.results == 0
    with waiters.waiting("que_2") as other:
        waiters.wake("que_1")
        assert not other.is_set()
        waiters.wake_all()
        assert other.is_set()


async def test_gone_returns_once_the_last_waiter_leaves():
    waiters = Waiters()
    await asyncio.wait_for(waiters.gone(), 1)  # nobody waits: at once
    leave = asyncio.Event()

    async def wait() -> None:
        with waiters.waiting("que_1"):
            await leave.wait()

    task = asyncio.create_task(wait())
    await asyncio.sleep(0)
    gone = asyncio.create_task(waiters.gone())
    await asyncio.sleep(0.01)
    assert not gone.done()
    leave.set()
    await asyncio.wait_for(gone, 1)
    await task
