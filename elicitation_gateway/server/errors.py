"""Error bodies on the wire: the tool side's ``{error, message}``, OpenCode's shapes on the answerer
side, and JSON-RPC errors for ``elicitation/create`` envelopes; each built from its model in
:mod:`.bodies` (or the MCP SDK's, for JSON-RPC)."""

from collections.abc import Iterable
from typing import Any, Literal

from mcp_types.jsonrpc import INVALID_PARAMS, ErrorData, JSONRPCError

from elicitation_gateway.conversion.answers import Issue
from elicitation_gateway.encoding import JsonResponse
from elicitation_gateway.records import Status
from elicitation_gateway.server.bodies import (
    BadRequest,
    BadRequestData,
    ErrorBody,
    QuestionNotFoundError,
    json_response,
)


class ToolError(Exception):
    """A tool's request the gateway refuses; nothing was asked."""

    def __init__(self, status: int, code: str, message: str, jsonrpc_code: int = INVALID_PARAMS) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.jsonrpc_code = jsonrpc_code

    def response(self) -> JsonResponse:
        return tool_error(self.status, self.code, self.message)


class PayloadError(Exception):
    """An answerer's request the gateway refuses (OpenCode's ``BadRequest``)."""

    def __init__(self, message: str, kind: Literal["Params", "Payload"] = "Payload", status: int = 400):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status = status

    def response(self) -> JsonResponse:
        return bad_request(self.message, self.kind, status=self.status)


def tool_error(http_status: int, code: str, message: str, status: Status | None = None) -> JsonResponse:
    """``status``: how an elicitation already finished, for a 409."""
    return json_response(ErrorBody(error=code, message=message, status=status), http_status)


def bad_request(
    message: str,
    kind: Literal["Params", "Payload"],
    issues: Iterable[Issue] | None = None,
    status: int = 400,
) -> JsonResponse:
    data = BadRequestData(message=message, kind=kind, issues=None if issues is None else list(issues))
    return json_response(BadRequest(data=data), status)


FINISHED_AS: dict[Status, str] = {
    "answered": "it was already answered",
    "declined": "it was declined",
    "cancelled": "it was dismissed, or its tool stopped waiting",
    "expired": "it expired",
}
"""What a 404 says happened to a question that was asked and has finished."""


def question_not_found(request_id: str, status: Status | None = None) -> JsonResponse:
    """OpenCode's 404 (its status and ``_tag`` are what clients act on), with a message that says
    what became of a question that is no longer pending."""
    message = f"Question request not found: {request_id}"
    if status in FINISHED_AS:
        message += f" ({FINISHED_AS[status]})"
    return json_response(QuestionNotFoundError(requestID=request_id, message=message), 404)


def jsonrpc_error(request_id: Any, code: int, message: str) -> JsonResponse:
    """Not ``json_response``: JSON-RPC wants ``"id": null`` when the id is unknown, and no ``data``."""
    body = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
    return JsonResponse(body.model_dump(mode="json", exclude={"error": {"data"}}))
