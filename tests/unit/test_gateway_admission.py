"""Admission (:mod:`elicitation_gateway.gateway.admission`): event streams up to their limit, questions
up to the pending counts and the memory budget, each charged what it holds."""

from typing import Any

import pytest

from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.gateway.admission import Admission
from elicitation_gateway.gateway.errors import LimitExceeded, TooLarge, TooManySubscribers
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.stores.memory import MemoryStore
from tests.conftest import settings_for_tests

DEFAULT = "ses_default"


def record_of(request_id: str, session: str = "ses_1", words: int = 1) -> Record:
    schema = {"type": "object", "properties": {"name": {"type": "string", "title": "word " * words}}}
    form = build_form(schema, "Who?")
    request = QuestionRequest.new(request_id, session, list(form.questions), None)
    return Record.new(request, form, "Who?", None, 0, 60, "cancel")


def admission_with(**settings: Any) -> tuple[Admission, MemoryStore]:
    store = MemoryStore()
    return Admission(settings_for_tests(**settings), store, Metrics(), lambda: DEFAULT), store


async def test_streams_and_mcp_streams_share_one_limit():
    admission, _ = admission_with(max_subscribers=2)
    first = await admission.subscribe()
    admission.admit_mcp_stream()
    with pytest.raises(TooManySubscribers):
        await admission.subscribe()
    with pytest.raises(TooManySubscribers):
        admission.admit_mcp_stream()
    assert (admission.subscribers, admission.mcp_streams) == (1, 1)
    admission.unsubscribe(first)
    admission.release_mcp_stream()
    assert (admission.subscribers, admission.mcp_streams) == (0, 0)
    admission.unsubscribe(await admission.subscribe())


async def test_pending_counts_in_all_and_per_session():
    admission, store = admission_with(max_pending=3, max_pending_per_session=2)
    await store.add(record_of("que_1", "ses_a"))
    await store.add(record_of("que_2", "ses_a"))
    await admission.check_count("ses_b")
    with pytest.raises(LimitExceeded, match="session ses_a has 2 questions pending"):
        await admission.check_count("ses_a")
    await store.add(record_of("que_3", "ses_b"))
    with pytest.raises(LimitExceeded, match="GATEWAY_MAX_PENDING\\)"):
        await admission.check_count("ses_c")


MIB = 1024 * 1024
WORDS = 15000  # about 0.45 MiB a question


async def test_a_charge_past_the_budget_is_refused_and_charges_nothing():
    admission, _ = admission_with(max_pending_bytes=3 * MIB, max_pending_bytes_per_session=MIB)
    admission.charge(record_of("que_1", words=WORDS))
    admission.charge(record_of("que_2", words=WORDS))
    in_session = admission.pending_bytes.total
    with pytest.raises(LimitExceeded, match="over a session's budget"):
        admission.charge(record_of("que_3", words=WORDS))
    assert admission.pending_bytes.total == in_session
    # The default session (its tool named none) has no budget of its own: only the gateway's.
    assert admission.budget_session(record_of("que_d", DEFAULT)) is None
    refusal = None
    for number in range(1, 10):
        try:
            admission.charge(record_of(f"que_d{number}", DEFAULT, words=WORDS))
        except LimitExceeded as error:
            refusal = error
            break
    assert "over the gateway's budget" in str(refusal)
    assert number > 2  # past the session's budget, within the gateway's
    assert in_session < admission.pending_bytes.total <= 3 * MIB
    before = admission.pending_bytes.total
    admission.discharge("que_1")
    assert admission.pending_bytes.total < before


async def test_a_question_larger_than_a_session_may_hold_is_too_large():
    admission, _ = admission_with(max_pending_bytes_per_session=MIB)
    with pytest.raises(TooLarge, match="GATEWAY_MAX_PENDING_BYTES_PER_SESSION"):
        admission.charge(record_of("que_1", words=3 * WORDS))
    assert admission.pending_bytes.total == 0
    admission.carry(record_of("que_2", words=3 * WORDS))  # asked before: carried, unchecked
    assert admission.pending_bytes.total > MIB
