"""The service's refusals as answers, in one table: for each exception the gateway raises when it cannot
do what it is asked, its HTTP status, code and message.

Routes let these exceptions go; the app's exception handlers (:func:`exception_handlers`) answer them
in the body each side reads: the tool side's ``{error, message}``, OpenCode's ``NotFoundError`` on the
answerer side, and a JSON-RPC error for an ``elicitation/create`` envelope sent to ``POST /elicit``
(:func:`in_envelope`). The ``/mcp`` endpoint takes the same messages for its tool errors, and the same
status for the streams it refuses.
"""

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_types.jsonrpc import INVALID_PARAMS
from starlette.requests import Request
from starlette.responses import Response

from elicitation_gateway.conversion.schema import SchemaError
from elicitation_gateway.gateway.errors import (
    AlreadyFinished,
    KeyReused,
    LimitExceeded,
    NotFound,
    ShuttingDown,
    TooLarge,
    TooManySubscribers,
)
from elicitation_gateway.people import UnknownRecipient
from elicitation_gateway.records import Status
from elicitation_gateway.server.bodies import ErrorBody, json_response
from elicitation_gateway.server.errors import jsonrpc_error, question_not_found
from elicitation_gateway.server.security import Role
from elicitation_gateway.stores.base import StoreUnavailable


@dataclass(frozen=True)
class Refused:
    """What a refusal says: ``status`` and ``code`` and ``message`` on the tool side's body."""

    status: int
    code: str
    message: str
    headers: Mapping[str, str] = field(default_factory=dict)
    finished: Status | None = None
    """How the elicitation already finished (a ``409``'s ``status``)."""
    jsonrpc: bool = False
    """A refused ask: in an ``elicitation/create`` envelope, a JSON-RPC error (``-32602``)."""


def _schema(error: SchemaError) -> Refused:
    status = 400 if error.code in ("invalid_schema", "invalid_timeout_choice") else 422
    return Refused(status, error.code, error.message, jsonrpc=True)


def _not_found(error: NotFound) -> Refused:
    message = f"no elicitation {error.request_id!r} (unknown, or finished too long ago)"
    return Refused(404, "not_found", message)


def _already_finished(error: AlreadyFinished) -> Refused:
    record = error.record
    message = f"elicitation {record.id} is already {record.status}"
    return Refused(409, "already_finished", message, finished=record.status)


REFUSALS: dict[type[Exception], Callable[[Any], Refused]] = {
    SchemaError: _schema,
    KeyReused: lambda error: Refused(422, "idempotency_key_reused", str(error), jsonrpc=True),
    LimitExceeded: lambda error: Refused(429, "too_many_pending", str(error), jsonrpc=True),
    TooLarge: lambda error: Refused(413, "question_too_large", str(error), jsonrpc=True),
    ShuttingDown: lambda error: Refused(503, "shutting_down", str(error), jsonrpc=True),
    UnknownRecipient: lambda error: Refused(400, "unknown_recipient", str(error), jsonrpc=True),
    StoreUnavailable: lambda error: Refused(503, "store_unavailable", str(error), {"Retry-After": "1"}),
    TooManySubscribers: lambda error: Refused(429, "too_many_subscribers", str(error)),
    NotFound: _not_found,
    AlreadyFinished: _already_finished,
}
"""Every refusal, by the exception that makes it."""

REFUSED = tuple(REFUSALS)


def refused(error: Exception) -> Refused:
    """What ``error`` (one of :data:`REFUSED`) says."""
    for kind in type(error).__mro__:
        if kind in REFUSALS:
            return REFUSALS[kind](error)
    raise TypeError(f"{type(error).__name__} is not a refusal")


_ENVELOPE = "jsonrpc_id"


def in_envelope(request: Request, rpc_id: Any) -> None:
    """``request`` came in a JSON-RPC envelope of id ``rpc_id``: a refused ask is answered in one."""
    setattr(request.state, _ENVELOPE, rpc_id)


def response(error: Exception, role: Role, request: Request | None = None) -> Response:
    """The answer to ``error`` on a route of ``role``, for ``request``."""
    said = refused(error)
    if isinstance(error, NotFound) and role == "answerer":
        return question_not_found(error.request_id, error.status)
    if said.jsonrpc and request is not None and hasattr(request.state, _ENVELOPE):
        return jsonrpc_error(getattr(request.state, _ENVELOPE), INVALID_PARAMS, said.message)
    body = ErrorBody(error=said.code, message=said.message, status=said.finished)
    return json_response(body, said.status, said.headers or None)


def exception_handlers(
    role_of: Callable[[str], Role],
) -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
    """Starlette's ``exception_handlers`` for every refusal; ``role_of`` tells a path's side."""

    async def refuse(request: Request, error: Exception) -> Response:
        return response(error, role_of(request.scope["path"]), request)

    return dict.fromkeys(REFUSED, refuse)
