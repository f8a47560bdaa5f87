"""The tool side: ``POST /elicit`` (ask and wait) and the asynchronous ``/elicitations`` form."""

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from mcp_types.jsonrpc import INVALID_PARAMS, PARSE_ERROR
from starlette.requests import Request
from starlette.responses import Response

from elicitation_gateway.conversion.schema import SchemaError
from elicitation_gateway.encoding import JsonResponse
from elicitation_gateway.gateway import Caller, Gateway
from elicitation_gateway.records import Record
from elicitation_gateway.server.bodies import (
    AnsweredResult,
    ElicitationStatus,
    JSONRPCElicitResponse,
    json_response,
)
from elicitation_gateway.server.errors import ToolError, jsonrpc_error, tool_error
from elicitation_gateway.server.refusals import in_envelope
from elicitation_gateway.server.routes.parsing import (
    BodyTooLarge,
    InvalidJson,
    JsonRpcError,
    idempotency_caller,
    parse_form_params,
    parse_json,
    parse_options,
    parse_seconds,
    read_body,
    unwrap_jsonrpc,
)

T = TypeVar("T")


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


async def elicit(request: Request) -> Response:
    """Ask and wait for the result. A client that goes away withdraws its question, unless it sent an
    ``Idempotency-Key``: then the question waits ``GATEWAY_REATTACH_WINDOW`` for the request to be sent
    again (the same key, credentials and body), which attaches to it."""
    gateway = _gateway(request)
    try:
        raw = await read_body(request, gateway.settings.max_body_size)
        body = parse_json(raw)
    except InvalidJson as error:
        if b'"jsonrpc"' in error.raw:
            return _jsonrpc_refusal(error)
        return tool_error(400, error.code, error.reason)
    except BodyTooLarge:
        return _too_large(gateway)

    try:
        is_rpc, rpc_id, params = unwrap_jsonrpc(body)
    except JsonRpcError as error:
        return jsonrpc_error(error.request_id, error.code, error.message)

    if is_rpc:
        in_envelope(request, rpc_id)  # a refused ask is a JSON-RPC error
    try:
        caller = idempotency_caller(request, raw)
        record = await _ask(request, gateway, params, caller)
    except ToolError as error:
        if is_rpc:
            return jsonrpc_error(rpc_id, error.jsonrpc_code, error.message)
        return error.response()

    # Waits through a store outage; the tool going away (the wait cancelled) withdraws the question, or
    # with an Idempotency-Key keeps it for the request sent again.
    final = await _until_disconnect(request, gateway.final_result(record, caller=caller))
    if final is None:  # the tool went away: nobody is left to answer
        return Response(status_code=499)
    result = AnsweredResult.model_validate(final)
    if is_rpc:
        return json_response(JSONRPCElicitResponse(jsonrpc="2.0", id=rpc_id, result=result))
    return json_response(result)


async def create(request: Request) -> Response:
    gateway = _gateway(request)
    try:
        body = parse_json(await read_body(request, gateway.settings.max_body_size))
        _, _, params = unwrap_jsonrpc(body)
        record = await _ask(request, gateway, params)
    except InvalidJson as error:
        return tool_error(400, error.code, error.reason)
    except JsonRpcError as error:
        return tool_error(400, "invalid_request", error.message)
    except BodyTooLarge:
        return _too_large(gateway)
    except ToolError as error:
        return error.response()
    location = f"/elicitations/{record.id}"
    return json_response(_status_body(record), 201, {"Location": location})


async def read(request: Request) -> Response:
    gateway = _gateway(request)
    request_id = request.path_params["id"]
    try:
        wait = parse_seconds(request.query_params.get("wait"), "wait")
    except ToolError as error:
        return error.response()
    if wait:
        record = await _until_disconnect(request, gateway.result(request_id, wait))
        if record is None:
            return Response(status_code=499)
    else:
        record = await gateway.result(request_id)
    return json_response(_status_body(record))


async def withdraw(request: Request) -> Response:
    record = await _gateway(request).withdraw(request.path_params["id"])
    return json_response(_status_body(record))


async def _ask(request: Request, gateway: Gateway, params: Any, caller: Caller | None = None) -> Record:
    """Parse (a ToolError for what cannot be asked) and ask (or attach, for a ``caller`` coming back);
    the gateway's refusals are answered by :mod:`..refusals`. Nothing refused is stored."""
    options = parse_options(request, params)
    message, schema = _form_params(params)
    return await gateway.ask_or_attach(message, schema, options, caller)


def _form_params(params: Any) -> tuple[str, dict[str, Any]]:
    try:
        return parse_form_params(params)
    except SchemaError as error:
        raise ToolError(400, error.code, error.message) from None


async def _until_disconnect(request: Request, work: Awaitable[T]) -> T | None:
    """Run ``work`` in the request's own task unless the client disconnects first (then None).

    One task watches for the disconnect and cancels the request's, which ``work`` sees as its
    cancellation: a task of its own for ``work`` and ``asyncio.wait`` on both would cost a task, a
    future and their callbacks more for every held request."""
    current = asyncio.current_task()
    assert current is not None
    gone = False

    async def disconnected() -> None:
        nonlocal gone
        while (await request.receive())["type"] != "http.disconnect":
            pass
        gone = True
        current.cancel()

    watcher = asyncio.ensure_future(disconnected())
    try:
        result = await work
    except asyncio.CancelledError:
        if gone and current.uncancel() == 0:  # cancelled by the watcher alone: the client left
            return None
        raise
    finally:
        watcher.cancel()
    if gone:  # the client left as ``work`` ended, and ``work`` did not let the cancellation through
        current.uncancel()
        return None
    return result


def _status_body(record: Record) -> ElicitationStatus:
    return ElicitationStatus(id=record.id, status=record.status, result=record.result)


def _jsonrpc_refusal(error: InvalidJson) -> Response:
    """A JSON-RPC request whose JSON parsed but whose text was refused names its id; others cannot."""
    document = error.document
    if isinstance(document, dict) and "jsonrpc" in document:
        with contextlib.suppress(JsonRpcError):
            _, rpc_id, _ = unwrap_jsonrpc(document)
            return jsonrpc_error(rpc_id, INVALID_PARAMS, error.reason)
    return jsonrpc_error(None, PARSE_ERROR, error.reason)


def _too_large(gateway: Gateway) -> JsonResponse:
    limit = gateway.settings.max_body_size
    return tool_error(413, "body_too_large", f"the body is larger than the limit of {limit} bytes")
