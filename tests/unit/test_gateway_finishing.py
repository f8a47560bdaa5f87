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
