"""Finishing (:mod:`elicitation_gateway.gateway.finishing`): what finishing a question changes here,
once, whoever finishes it."""

import logging

from elicitation_gateway.budget import PendingBytes, charge
from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.gateway.finishing import Finishing
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.stores.memory import MemoryStore


def record_of(request_id: str) -> Record:
    form = build_form({"type": "object", "properties": {"name": {"type": "string"}}}, "Who?")
    request = QuestionRequest.new(request_id, "ses_1", list(form.questions), None)
    return Record.new(request, form, "Who?", None, 0, 60, "cancel")


async def test_a_finish_frees_its_charge_and_timer_counts_and_logs_once(caplog):
    caplog.set_level(logging.INFO, logger="elicitation_gateway.gateway")
    store, metrics, budget, forgotten = MemoryStore(), Metrics(), PendingBytes(), []
    finishing = Finishing(store, metrics, budget, forget=forgotten.append, notifier=lambda: None)
    record = record_of("que_1")
    await store.add(record)
    budget.add(record.id, "ses_1", charge(record))
    assert budget.total > 0
    done = await finishing.finish("que_1", "answered", {"action": "accept", "content": {}}, reason="answered")
    assert done is not None
    assert done.status == "answered"
    assert budget.total == 0
    assert forgotten == ["que_1"]
    assert 'gateway_elicitations_finished_total{outcome="answered"} 1.0' in metrics.exposition().decode()
    [line] = [r for r in caplog.records if "que_1" in r.getMessage()]
    assert line.name == "elicitation_gateway.gateway"  # the log's logger name, as before the split
    assert "answered (answered)" in line.getMessage()
    again = await finishing.finish("que_1", "cancelled", {"action": "cancel"}, reason="withdrawn")
    assert again is None
    assert forgotten == ["que_1"]


async def test_an_ask_undone_is_finished_cancelled():
    store, forgotten = MemoryStore(), []
    finishing = Finishing(store, Metrics(), PendingBytes(), forget=forgotten.append, notifier=lambda: None)
    record = record_of("que_2")
    await store.add(record)
    await finishing.retract(record, "its ask failed")
    assert (await store.get("que_2")).status == "cancelled"
    assert forgotten == ["que_2"]


def test_a_new_record_is_the_record_validation_would_make_of_the_same_parts():
    """``Record.new`` gives every field itself (no default looked up): they must be the model's."""
    made = record_of("que_1")
    validated = Record(
        request=made.request,
        form=made.form,
        message="Who?",
        directory=None,
        created_at=0,
        expires_at=60,
        on_timeout="cancel",
    )
    assert dict(made) == dict(validated)


def test_a_finished_record_keeps_what_the_tool_and_listings_read_and_drops_the_questions():
    """As the record read back from a store (validated) is finished too, both shapes are checked."""
    made = Record.new(
        QuestionRequest.new("que_1", "ses_1", list(record_of("que_1").form.questions), None, ["ana"]),
        record_of("que_1").form,
        "Who?",
        "/work",
        10.0,
        70.0,
        "default",
        asker="deploy-tool",
    )
    for record in (made, Record.model_validate_json(made.model_dump_json())):
        done = record.finished("answered", {"action": "accept", "content": {"name": "Ana"}})
        unchanged = {"message", "asker", "directory", "created_at", "expires_at", "on_timeout", "escalate"}
        assert {name: getattr(done, name) for name in unchanged} == {
            name: getattr(record, name) for name in unchanged
        }
        assert (done.status, done.result) == ("answered", {"action": "accept", "content": {"name": "Ana"}})
        assert done.finished_at is not None
        assert done.finished_at >= 10.0
        assert done.request.wire() == {"id": "que_1", "sessionID": "ses_1", "questions": [], "to": ["ana"]}
        assert done.form.questions == ()
        assert done.form.fields == ()
        assert done.model_fields_set >= record.model_fields_set | {"status", "result", "finished_at"}
        assert record.status == "pending"  # the pending record is left as it was
        assert Record.model_validate_json(done.model_dump_json()) == done  # kept by a store as it is
