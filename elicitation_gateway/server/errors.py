"""Error bodies on the wire: the tool side's ``{error, message}``, OpenCode's shapes on the answerer
side, and JSON-RPC errors for ``elicitation/create`` envelopes; each built from its model in
:mod:`.bodies` (or the MCP SDK's, for JSON-RPC).

The one writer of error bodies: routes and exception handlers return its responses, the layers that
speak ASGI themselves (the middleware, the bridge's pass-through) send with :func:`send_error`, and
the HTTP protocol's refusals, written before any ASGI app runs, take :func:`error_body`'s bytes.
"""

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from mcp_types.jsonrpc import INVALID_PARAMS, ErrorData, JSONRPCError
from starlette.responses import PlainTextResponse
from starlette.types import Send

from elicitation_gateway.conversion.answers import Issue
from elicitation_gateway.encoding import JsonResponse, json_bytes
from elicitation_gateway.records import Status
from elicitation_gateway.server.bodies import (
    BadRequest,
    BadRequestData,
    ErrorBody,
    QuestionNotFoundError,
    json_response,
    wire,
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


def tool_error(
    http_status: int,
    code: str,
    message: str,
    status: Status | None = None,
    headers: Mapping[str, str] | None = None,
) -> JsonResponse:
    """The gateway's own ``{error, message}``; ``status``: how an elicitation already finished, for a 409."""
    return json_response(ErrorBody(error=code, message=message, status=status), http_status, headers)


def error_body(code: str, message: str) -> bytes:
    """The bytes of :func:`tool_error`'s body."""
    return json_bytes(wire(ErrorBody(error=code, message=message)))


async def send_error(
    send: Send, http_status: int, code: str, message: str, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    """:func:`tool_error`'s body sent on ``send`` as a whole response, with ``headers`` after its type
    and length."""
    body = error_body(code, message)
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": http_status, "headers": head})
    await send({"type": "http.response.body", "body": body})


def preflight_refused(refused: Iterable[str], headers: Mapping[str, str]) -> PlainTextResponse:
    """A CORS preflight that asks what is not allowed (``origin``, ``method``...): text, as browsers
    show it in their console, with the preflight's headers."""
    return PlainTextResponse("Disallowed CORS " + ", ".join(refused), status_code=400, headers=headers)


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
