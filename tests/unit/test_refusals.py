"""The gateway's refusals, answered from one table (:mod:`elicitation_gateway.server.refusals`): each
exception's status, code, message, headers and body, on each side and in a JSON-RPC envelope."""

import asyncio
import json

import pytest
from starlette.requests import Request

from elicitation_gateway.conversion.schema import SchemaError, build_form
from elicitation_gateway.gateway import (
    AlreadyFinished,
    KeyReused,
    LimitExceeded,
    NotFound,
    ShuttingDown,
    TooLarge,
    TooManySubscribers,
)
from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.records import Record
from elicitation_gateway.server.refusals import REFUSED, exception_handlers, in_envelope, refused, response
from elicitation_gateway.stores.base import StoreUnavailable


def request_to(path: str) -> Request:
    return Request({"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""})


def body(answer) -> object:
    return json.loads(answer.body)


def finished_record(status: str) -> Record:
    form = build_form({"type": "object", "properties": {"a": {"type": "string"}}}, "Name?")
    request = QuestionRequest.new("que_1", "ses_1", list(form.questions), None)
    record = Record.new(request, form, "Name?", None, 0, 60, "cancel")
    return record.model_copy(update={"status": status, "result": {"action": "cancel"}})


TOOL_SIDE = [
    (SchemaError("no properties"), 400, "invalid_schema"),
    (SchemaError("bad default", code="invalid_timeout_choice"), 400, "invalid_timeout_choice"),
    (SchemaError("secret", code="sensitive_question"), 422, "sensitive_question"),
    (KeyReused("used with another body"), 422, "idempotency_key_reused"),
    (LimitExceeded("100 questions are pending"), 429, "too_many_pending"),
    (TooLarge("too big"), 413, "question_too_large"),
    (ShuttingDown("the gateway is shutting down"), 503, "shutting_down"),
    (StoreUnavailable("the store is unreachable"), 503, "store_unavailable"),
    (TooManySubscribers(3), 429, "too_many_subscribers"),
]


@pytest.mark.parametrize(("error", "status", "code"), TOOL_SIDE)
def test_a_refusal_is_its_status_code_and_message(error, status, code):
    answer = response(error, "tool")
    assert answer.status_code == status
    assert body(answer) == {"error": code, "message": str(error)}


def test_a_store_outage_says_when_to_try_again():
    answer = response(StoreUnavailable("down"), "answerer")
    assert answer.headers["retry-after"] == "1"
    assert "retry-after" not in response(LimitExceeded("full"), "tool").headers


def test_not_found_on_the_tool_side_names_the_elicitation():
    answer = response(NotFound("que_9"), "tool")
    assert answer.status_code == 404
    assert body(answer) == {
        "error": "not_found",
        "message": "no elicitation 'que_9' (unknown, or finished too long ago)",
    }


def test_not_found_on_the_answerer_side_is_opencodes_and_says_how_it_finished():
    answer = response(NotFound("que_9", "expired"), "answerer")
    assert answer.status_code == 404
    assert body(answer) == {
        "_tag": "QuestionNotFoundError",
        "requestID": "que_9",
        "message": "Question request not found: que_9 (it expired)",
    }


def test_already_finished_says_how():
    answer = response(AlreadyFinished(finished_record("answered")), "tool")
    assert answer.status_code == 409
    assert body(answer) == {
        "error": "already_finished",
        "message": "elicitation que_1 is already answered",
        "status": "answered",
    }


def test_a_refused_ask_in_an_envelope_is_a_jsonrpc_error_and_others_are_not():
    request = request_to("/elicit")
    in_envelope(request, 7)
    answer = response(LimitExceeded("full"), "tool", request)
    assert answer.status_code == 200
    assert body(answer) == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "full"}}
    assert body(response(StoreUnavailable("down"), "tool", request))["error"] == "store_unavailable"
    plain = response(LimitExceeded("full"), "tool", request_to("/elicit"))
    assert plain.status_code == 429


def test_every_refusal_has_a_handler_that_asks_the_side_of_its_path():
    sides: list[str] = []

    def role_of(path: str):
        sides.append(path)
        return "answerer" if path.startswith("/question") else "tool"

    handlers = exception_handlers(role_of)
    assert set(handlers) == set(REFUSED)

    answer = asyncio.run(handlers[NotFound](request_to("/question/que_1/reply"), NotFound("que_1")))
    assert body(answer)["_tag"] == "QuestionNotFoundError"
    answer = asyncio.run(handlers[NotFound](request_to("/elicitations/que_1"), NotFound("que_1")))
    assert body(answer)["error"] == "not_found"
    assert sides == ["/question/que_1/reply", "/elicitations/que_1"]


def test_what_is_not_a_refusal_has_no_answer():
    with pytest.raises(TypeError):
        refused(ValueError("no"))
