"""Error bodies on the wire: the tool side's ``{error, message}``, OpenCode's shapes on the answerer
side, and JSON-RPC errors for ``elicitation/create`` envelopes."""

from collections.abc import Iterable
from typing import Any, Literal

from mcp_types.jsonrpc import INVALID_PARAMS
from starlette.responses import JSONResponse


class ToolError(Exception):
    """A tool's request the gateway refuses; nothing was asked."""

    def __init__(self, status: int, code: str, message: str, jsonrpc_code: int = INVALID_PARAMS) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.jsonrpc_code = jsonrpc_code

    def response(self, **extra: Any) -> JSONResponse:
        return tool_error(self.status, self.code, self.message, **extra)


class PayloadError(Exception):
    """An answerer's request the gateway refuses (OpenCode's ``BadRequest``)."""

    def __init__(self, message: str, kind: Literal["Params", "Payload"] = "Payload", status: int = 400):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status = status

    def response(self) -> JSONResponse:
        return bad_request(self.message, self.kind, status=self.status)


def tool_error(http_status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, **extra}, status_code=http_status)


def bad_request(
    message: str,
    kind: Literal["Params", "Payload"],
    issues: Iterable[dict[str, Any]] | None = None,
    status: int = 400,
) -> JSONResponse:
    data: dict[str, Any] = {"message": message, "kind": kind}
    if issues is not None:
        data["issues"] = list(issues)
    return JSONResponse({"name": "BadRequest", "data": data}, status_code=status)


def question_not_found(request_id: str) -> JSONResponse:
    return JSONResponse(
        {
            "_tag": "QuestionNotFoundError",
            "requestID": request_id,
            "message": f"Question request not found: {request_id}",
        },
        status_code=404,
    )


def jsonrpc_error(request_id: Any, code: int, message: str) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})
