"""Answering (:mod:`elicitation_gateway.gateway.answering`): the listing by directory, owed finishes
made first, a question past its expiry expired when asked for, replies typed, rejections, and a
question someone else finished first not found, saying how it finished."""

import json
import time

import pytest

from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.gateway.answering import Answering
from elicitation_gateway.gateway.errors import NotFound
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.stores.memory import MemoryStore

SCHEMA = {"type": "object", "properties": {"hours": {"type": "integer", "minimum": 0}}}


def record_of(request_id: str, directory: str | None = None, lasts: float = 60) -> Record:
    form = build_form(SCHEMA, "How long?")
    request = QuestionRequest.new(request_id, "ses_1", list(form.questions), None)
    now = time.time()
    return Record.new(request, form, "How long?", directory, now, now + lasts, "cancel")


class Parts:
    def __init__(self) -> None:
        self.store = MemoryStore()
        self.done: list[str] = []
        self.answering = Answering(
            self.store, finish=self.finish, expire_now=self.expire_now, owed_first=self.owed_first
        )

    async def finish(self, request_id, status, result, *, reason, answers=None, via=None):
        self.done.append(f"{request_id} {status} ({reason})")
        return await self.store.finish(request_id, status, result, answers)

    async def expire_now(self, request_id: str) -> None:
        await self.finish(request_id, "expired", {"action": "cancel"}, reason="timed out")

    async def owed_first(self) -> None:
        self.done.append("owed first")


async def test_the_listing_is_each_pending_requests_json_by_directory():
    parts = Parts()
    await parts.store.add(record_of("que_1", "/srv/a"))
    await parts.store.add(record_of("que_2", "/srv/b"))
    await parts.store.add(record_of("que_3"))  # no directory: every answerer sees it
    listed = [json.loads(item)["id"] for item in await parts.answering.pending_listing("/srv/a/")]
    assert listed == ["que_1", "que_3"]
    assert parts.done == ["owed first"]
    whole = json.loads(await parts.answering.pending_json())
    assert [request["id"] for request in whole] == ["que_1", "que_2", "que_3"]


async def test_a_reply_is_typed_and_a_second_one_finds_it_answered():
    parts = Parts()
    await parts.store.add(record_of("que_1"))
    finished = await parts.answering.reply("que_1", [["12"]])
    assert finished.result == {"action": "accept", "content": {"hours": 12}}
    with pytest.raises(NotFound) as missing:
        await parts.answering.reply("que_1", [["13"]])
    assert missing.value.status == "answered"


async def test_a_question_past_its_expiry_is_expired_when_asked_for():
    parts = Parts()
    await parts.store.add(record_of("que_1", lasts=-1))
    with pytest.raises(NotFound) as missing:
        await parts.answering.reject("que_1", "decline")
    assert missing.value.status == "expired"
    assert parts.done == ["owed first", "que_1 expired (timed out)"]


async def test_a_rejection_declines_or_cancels():
    parts = Parts()
    await parts.store.add(record_of("que_1"))
    await parts.store.add(record_of("que_2"))
    assert (await parts.answering.reject("que_1", "decline")).status == "declined"
    assert (await parts.answering.reject("que_2")).status == "cancelled"
    with pytest.raises(NotFound) as missing:
        await parts.answering.pending_record("que_none")
    assert missing.value.status is None


async def test_a_way_to_answer_that_is_none_is_refused_before_anything_is_finished():
    parts = Parts()
    await parts.store.add(record_of("que_1"))
    with pytest.raises(ValueError, match="not a way to answer"):
        await parts.answering.reply("que_1", [["12"]], via="carrier pigeon")
    with pytest.raises(ValueError, match="not a way to answer"):
        await parts.answering.reject("que_1", via="")
    assert (await parts.store.get("que_1")).pending
    assert (await parts.answering.reply("que_1", [["12"]], via="link")).status == "answered"
