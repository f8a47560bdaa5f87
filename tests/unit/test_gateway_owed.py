"""Owed finishes (:mod:`elicitation_gateway.gateway.owed`): made once the store takes them, in the
background or first thing, oldest first, each told as settled once."""

import asyncio
from typing import Any

import pytest

from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.gateway import owed as owed_module
from elicitation_gateway.gateway.expiry import EXPIRY
from elicitation_gateway.gateway.owed import Owed
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.stores.base import StoreUnavailable
from tests.helpers import until


class Store:
    """What the owed finishes reach: a store that is down until it is not."""

    def __init__(self) -> None:
        self.down = True
        self.made: list[tuple[str, str]] = []

    def reached(self, what: str, request_id: str) -> None:
        if self.down:
            raise StoreUnavailable("down")
        self.made.append((what, request_id))


def owed_with(store: Store, settled: list[str], closing: bool = False) -> Owed:
    async def finish(request_id: str, status: str, result: dict[str, Any], *, reason: str) -> None:
        store.reached(f"{status}: {reason}", request_id)

    async def expire_now(request_id: str) -> None:
        store.reached("expired", request_id)

    async def retract(record: Record, reason: str) -> None:
        store.reached(f"retracted: {reason}", record.id)

    return Owed(
        finish=finish, expire_now=expire_now, retract=retract, settled=settled.append, closing=lambda: closing
    )


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(owed_module, "STORE_RETRY", 0.01)


async def test_owed_finishes_are_made_once_the_store_is_back_oldest_first():
    store, settled = Store(), []
    owed = owed_with(store, settled)
    owed.owe("que_1", "withdrawn")
    owed.owe("que_2", EXPIRY)
    owed.owe("que_1", "shutdown")  # the first reason holds
    assert "que_1" in owed
    assert len(owed) == 2
    await asyncio.sleep(0.05)
    assert store.made == []
    assert settled == []
    store.down = False
    await until(lambda: not owed, what="every owed finish made")
    assert store.made == [("cancelled: withdrawn", "que_1"), ("expired", "que_2")]
    assert settled == ["que_1", "que_2"]
    assert "que_1" not in owed


async def test_an_ask_the_store_may_have_kept_is_undone():
    store, settled = Store(), []
    owed = owed_with(store, settled)
    form = build_form({"type": "object", "properties": {"name": {"type": "string"}}}, "Who?")
    request = QuestionRequest.new("que_3", "ses_1", list(form.questions), None)
    record = Record.new(request, form, "Who?", None, 0, 60, "cancel")
    owed.owe_retraction(record, "its ask failed")
    store.down = False
    await owed.settle_now()
    assert store.made == [("retracted: its ask failed", "que_3")]
    assert settled == ["que_3"]
    assert not owed.retractions


async def test_first_makes_them_now_and_says_nothing_while_the_store_is_down():
    store, settled = Store(), []
    owed = owed_with(store, settled, closing=True)  # no retries in the background
    owed.owe("que_1", "withdrawn")
    await owed.first()  # the store is down: nothing raised, still owed
    assert "que_1" in owed
    with pytest.raises(StoreUnavailable):
        await owed.settle_now()
    store.down = False
    await owed.first()
    assert settled == ["que_1"]
    assert not owed
    owed.stop()
