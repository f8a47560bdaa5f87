"""Following the store (:mod:`elicitation_gateway.gateway.following`): what a durable store's last
process left is resumed at start, and another replica's questions are timed and charged here."""

import time

from elicitation_gateway import events
from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.gateway.admission import Admission
from elicitation_gateway.gateway.expiry import Expiry
from elicitation_gateway.gateway.following import Following
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.stores.memory import MemoryStore
from elicitation_gateway.stores.tool_liveness import ProcessToolLiveness
from tests.conftest import settings_for_tests


def record_of(request_id: str) -> Record:
    form = build_form({"type": "object", "properties": {"name": {"type": "string"}}}, "Who?")
    request = QuestionRequest.new(request_id, "ses_1", list(form.questions), None)
    now = time.time()
    return Record.new(request, form, "Who?", None, now, now + 60, "cancel")


class LeftWaiting(ProcessToolLiveness):
    async def abandoned(self) -> list[str]:
        return ["que_gone"]


class Left(MemoryStore):
    """A store as a process found it at restart: one question's tool waited on the last process."""

    def __init__(self) -> None:
        super().__init__()
        self.tool_liveness = LeftWaiting()


def following_with(store: MemoryStore) -> tuple[Following, Expiry, Admission, list[str]]:
    finished: list[str] = []

    async def finish(request_id, status, result, *, reason):
        finished.append(f"{request_id} {status} ({reason})")
        return await store.finish(request_id, status, result)

    expiry = Expiry(store, finish=finish, owe=lambda *_: None, spawn=lambda work: work.close())
    admission = Admission(settings_for_tests(), store, Metrics(), lambda: "ses_default")
    following = Following(store, expiry, admission, finish=finish, owe=lambda *_: None, closing=lambda: False)
    return following, expiry, admission, finished


async def test_at_restart_the_abandoned_are_withdrawn_and_the_others_timed_and_charged():
    store = Left()
    await store.add(record_of("que_gone"))
    await store.add(record_of("que_kept"))
    following, expiry, admission, finished = following_with(store)
    await following.start()
    assert finished == ["que_gone cancelled (tool gone at restart)"]
    assert "que_kept" in expiry
    assert "que_gone" not in expiry
    assert admission.pending_bytes.total > 0
    expiry.clear()


async def test_another_replicas_question_is_adopted_and_forgotten_once_finished():
    store = MemoryStore()
    following, expiry, admission, _ = following_with(store)
    record = record_of("que_1")
    await store.add(record)
    await following.adopt(record.asked_event())
    assert "que_1" in expiry
    assert admission.pending_bytes.total > 0
    finished = await store.finish("que_1", "cancelled", {"action": "cancel"})
    await following.adopt(finished.finished_event(None))
    assert "que_1" not in expiry
    assert admission.pending_bytes.total == 0
    assert finished.finished_event(None).type == events.REJECTED
