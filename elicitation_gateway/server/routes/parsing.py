"""Reading what clients send: bounded JSON bodies, MCP form params, query options, replies."""

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any

from mcp.types import ElicitRequestFormParams
from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, JSONRPCRequest
from pydantic import ValidationError
from starlette.requests import ClientDisconnect, Request

from elicitation_gateway import encoding
from elicitation_gateway.conversion.schema import build_form
from elicitation_gateway.escalation import Step, parsed_escalate
from elicitation_gateway.gateway import AskOptions, Caller, printable_id, valid_session_id
from elicitation_gateway.models import QuestionTool
from elicitation_gateway.people import Viewer, parsed_to
from elicitation_gateway.server.bodies import QuestionReply
from elicitation_gateway.server.errors import PayloadError, ToolError


class BodyTooLarge(Exception):
    pass


class InvalidJson(Exception):
    """A body that is not JSON the gateway can read; ``code`` goes on the wire."""

    def __init__(self, raw: bytes, reason: str, code: str = "invalid_json", document: Any = None) -> None:
        super().__init__(reason)
        self.raw = raw
        self.reason = reason
        self.code = code
        self.document = document
        """The parsed body when only its text was refused (a JSON-RPC error can then name its request)."""


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refusing (without reading on) anything over ``limit`` bytes; raises
    :class:`~starlette.requests.ClientDisconnect` when the client leaves first.

    Read from ``request.receive`` as ``request.stream()`` reads it, without the async generator (and
    the loop's bookkeeping of it) that a body of one message, every tool's and answerer's, would cost."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    receive = request.receive
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect


def parse_json(raw: bytes) -> Any:
    """The body's JSON: UTF-8, every string valid Unicode (:mod:`elicitation_gateway.encoding`)."""
    if not raw.strip():
        raise InvalidJson(raw, "the body is empty")
    try:
        return encoding.parse_json(raw)
    except encoding.InvalidText as error:
        raise InvalidJson(raw, error.message, "invalid_text", error.document) from None
    except RecursionError:
        reason = (
            "the body nests arrays or objects deeper than the gateway reads (about 1,000 levels; an "
            "elicitation needs a handful)"
        )
        raise InvalidJson(raw, reason, "too_deep") from None
    except ValueError as error:
        raise InvalidJson(raw, f"the body is not valid JSON ({error})") from None


class JsonRpcError(Exception):
    def __init__(self, request_id: Any, code: int, message: str) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.code = code
        self.message = message


def unwrap_jsonrpc(body: Any) -> tuple[bool, Any, Any]:
    """``(is_jsonrpc, id, params)``: a JSON-RPC ``elicitation/create`` request gives up its params."""
    if not (isinstance(body, dict) and "jsonrpc" in body):
        return False, None, body
    raw_id = body.get("id")
    request_id = raw_id if isinstance(raw_id, int | str) and not isinstance(raw_id, bool) else None
    try:
        request = JSONRPCRequest.model_validate({**body, "params": None})
    except ValidationError:
        problem = 'not a JSON-RPC 2.0 request: it needs "jsonrpc": "2.0", an "id" and a "method"'
        raise JsonRpcError(request_id, INVALID_REQUEST, problem) from None
    if request.method != "elicitation/create":
        problem = f"method {request.method!r} is not supported: only elicitation/create is"
        raise JsonRpcError(request.id, METHOD_NOT_FOUND, problem)
    params = body.get("params")
    if not isinstance(params, dict):
        problem = "params must be an object: the MCP elicitation params (message, requestedSchema)"
        raise JsonRpcError(request.id, INVALID_PARAMS, problem)
    return True, request.id, params


def parse_form_params(body: Any) -> tuple[str, dict[str, Any]]:
    """MCP ``ElicitRequestFormParams``: return ``(message, requestedSchema)`` or raise ToolError."""
    if not isinstance(body, dict):
        raise ToolError(400, "invalid_params", "the body must be a JSON object of MCP elicitation params")
    mode = body.get("mode", "form")
    if mode == "url":
        raise ToolError(
            400,
            "unsupported_mode",
            "mode 'url' is not supported: the gateway asks form elicitations only",
        )
    if mode != "form":
        raise ToolError(400, "invalid_params", f"mode must be 'form' (or absent), not {mode!r}")
    if "requestedSchema" in body and not isinstance(body["requestedSchema"], dict):
        build_form(body["requestedSchema"])  # raises SchemaError naming what is wrong
    try:
        params = ElicitRequestFormParams.model_validate(body)
    except ValidationError as error:
        raise ToolError(400, "invalid_params", _describe(error)) from None
    return params.message, params.requested_schema


def viewer_of(request: Request) -> Viewer | None:
    """Who looks, on a gateway with people: the person signed in (:class:`.AccessControl` says), or the
    shared login; ``None`` without people, where everyone sees everything."""
    people = getattr(request.app.state, "people", None)
    if people is None:
        return None
    return Viewer(request.scope.get("state", {}).get("person"), people.current)


VIA_HEADER = "X-Gateway-Via"
"""The header the gateway's own answerers send on a reply or rejection: ``page``, ``terminal``; a
program may send ``api``, ``opencode`` or ``webhook`` (answering from a webhook's event). Any other value
is ignored."""
VIAS_SENT = ("page", "terminal", "opencode", "api", "webhook")


def via_of(request: Request, usual: str) -> str:
    """The way a reply or rejection came, for the audit trail: as :data:`VIA_HEADER` says, else ``usual``
    (the route's)."""
    sent = request.headers.get(VIA_HEADER, "").strip().lower()
    return sent if sent in VIAS_SENT else usual


def parse_to(params: Any) -> tuple[str, ...]:
    """The ask's ``"to"``, beside ``message`` and ``requestedSchema``."""
    try:
        return parsed_to(params.get("to") if isinstance(params, dict) else None)
    except ValueError as error:
        raise ToolError(400, "invalid_to", str(error)) from None


def parse_escalate(params: Any) -> tuple[Step, ...]:
    """The ask's ``"escalate"``, beside ``to``: whom it also reaches while nobody answers."""
    try:
        return parsed_escalate(params.get("escalate") if isinstance(params, dict) else None)
    except ValueError as error:
        raise ToolError(400, "invalid_escalate", str(error)) from None


def query_values(request: Request) -> Mapping[str, str]:
    """The query's last value of each name, as ``request.query_params`` reads it. A query without
    escapes (``%``, ``+``: a tool's usual ids and numbers) is split here, where Starlette would build a
    multi-dict through ``parse_qsl``: the same pairs, each name's last value kept."""
    raw: bytes = request.scope["query_string"]
    if b"%" in raw or b"+" in raw:
        return request.query_params
    values: dict[str, str] = {}
    for pair in raw.decode("latin-1").split("&"):
        if pair:
            name, _, value = pair.partition("=")
            values[name] = value
    return values


def parse_options(request: Request, params: Any = None) -> AskOptions:
    """The ask's options from the query, and ``to`` and ``escalate`` from its ``params``."""
    query = query_values(request)
    session_id = query.get("sessionID")
    if session_id is not None and not valid_session_id(session_id):
        raise ToolError(400, "invalid_session", "sessionID must start with 'ses' and hold no spaces")
    message_id, call_id = query.get("messageID"), query.get("callID")
    for name, value in (("messageID", message_id), ("callID", call_id)):
        if value is not None and not printable_id(value):
            raise ToolError(400, "invalid_tool", f"{name} must be a short id without spaces")
    tool = QuestionTool(messageID=message_id or "", callID=call_id or "") if message_id or call_id else None
    on_timeout = query.get("onTimeout", "cancel")
    if on_timeout not in ("cancel", "default"):
        raise ToolError(
            400, "invalid_timeout_choice", f'onTimeout must be "cancel" or "default", not {on_timeout!r}'
        )
    asker = query.get("asker") or None
    if asker is not None and len(asker) > MAX_ASKER_LENGTH:
        raise ToolError(
            400, "invalid_asker", f"asker is {len(asker)} characters long; at most {MAX_ASKER_LENGTH}"
        )
    return AskOptions(
        asker=asker,
        session_id=session_id,
        directory=query.get("directory"),
        tool=tool,
        timeout=parse_seconds(query.get("timeout"), "timeout"),
        on_timeout=on_timeout,
        to=parse_to(params),
        escalate=parse_escalate(params),
    )


MAX_ASKER_LENGTH = 256
"""Characters of ``?asker=``: a name and a tool's, not a message."""


def parse_seconds(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ToolError(400, f"invalid_{name}", f"{name} must be a positive number of seconds, not {value!r}")
    return seconds


def parse_answers(body: Any, max_text_length: int | None = None) -> list[list[str]]:
    if isinstance(body, dict) and "action" in body and "answers" not in body:
        # A decline posted to /reply, the likely slip: say where it goes.
        raise PayloadError(
            '/reply takes "answers"; to decline, POST /question/{id}/reject with {"action": "decline"}'
        )
    if not isinstance(body, dict) or "answers" not in body:
        raise PayloadError('the body must be a JSON object with "answers": a list of lists of strings')
    try:
        answers = QuestionReply.model_validate(body).answers
    except ValidationError:
        raise PayloadError('"answers" must be a list of lists of strings, one list per question') from None
    if max_text_length is not None:
        for index, answer in enumerate(answers):
            if any(len(item) > max_text_length for item in answer):
                raise PayloadError(f"answer {index} is longer than {max_text_length} characters")
    return answers


IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")
"""Printable ASCII without spaces, as the IETF draft's examples and common APIs take it."""


def idempotency_caller(request: Request, body: bytes) -> Caller | None:
    """The caller of a ``POST /elicit`` with an ``Idempotency-Key``: the key under the request's
    credentials; the digest is the request's own (its query and body). None without the header."""
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    key = key.strip().strip('"')  # a quoted string in the IETF draft, a bare token in practice
    if not IDEMPOTENCY_KEY.fullmatch(key):
        raise ToolError(
            400, "invalid_idempotency_key", "Idempotency-Key must be 1 to 255 printable ASCII characters"
        )
    credentials = request.headers.get("authorization", "")
    identity = hashlib.sha256(f"elicit\n{credentials}\n{key}".encode()).hexdigest()
    digest = hashlib.sha256(request.url.query.encode() + b"\n" + body).hexdigest()
    return Caller(identity, digest, exclusive=True, proven=True)


def directory_of(request: Request) -> str | None:
    return request.query_params.get("directory") or request.headers.get("x-opencode-directory")


def _describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "body"
        problems.append(f"{where}: {item['msg']}")
    return "invalid elicitation params: " + "; ".join(problems)
