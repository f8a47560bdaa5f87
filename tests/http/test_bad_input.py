"""Bad input on the tool side: every refusal is a clear 4xx ``{"error", "message"}`` naming the
offending part (or, for JSON-RPC envelopes, HTTP 200 with a JSON-RPC error), nothing is asked, the
store is unchanged, and the service goes on serving."""

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR

from tests.helpers import ask, form, read_events, text_properties

NOTE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"note": {"type": "string", "title": "Note"}}}
VALID = form(NOTE_SCHEMA, "Anything to add?")
PATHS = ["/elicit", "/elicitations"]


@contextlib.asynccontextmanager
async def leaves_no_trace(server, client: httpx.AsyncClient) -> AsyncIterator[None]:
    """With one question already pending, run the body; then check that nothing was asked, the store
    and GET /question are as before, and a valid elicitation still goes round."""
    async with read_events(client) as events:
        created = await client.post("/elicitations", json=VALID)
        assert created.status_code == 201
        existing = created.json()["id"]
        assert (await events.next("question.asked")).properties["id"] == existing
        listed = (await client.get("/question")).json()
        assert [request["id"] for request in listed] == [existing]

        yield

        await events.no_frame(within=0.1, type="question.asked")
        assert (await client.get("/question")).json() == listed
        assert [record.id for record in await server.gateway.store.pending()] == [existing]

        tool = ask(client, VALID)
        asked = await events.next("question.asked")  # the next question asked is the valid one
        assert asked.properties["id"] != existing
        reply = await client.post(f"/question/{asked.properties['id']}/reply", json={"answers": [["fine"]]})
        assert reply.status_code == 200
        assert (await tool).json() == {"action": "accept", "content": {"note": "fine"}}


def assert_tool_error(response: httpx.Response, status: int, mention: str) -> dict[str, Any]:
    """A ``status`` response with ``{"error": code, "message": ...}`` whose message names ``mention``."""
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body.get("error"), str)
    assert body["error"]
    assert isinstance(body.get("message"), str)
    assert mention in body["message"], body["message"]
    return body


def assert_jsonrpc_error(response: httpx.Response, code: int, rpc_id: Any, mention: str = "") -> str:
    """HTTP 200 with a JSON-RPC error response of ``code`` for ``rpc_id``; return its message."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "id" in body
    assert body["id"] == rpc_id
    assert "result" not in body
    assert body["error"]["code"] == code
    message = body["error"]["message"]
    assert isinstance(message, str)
    assert message
    assert mention in message, message
    return message


def schema_with(prop: Any) -> dict[str, Any]:
    return form({"type": "object", "properties": {"color": prop}})


# (id, body: bytes as sent or a value sent as JSON, expected status, what the message must name)
BAD_BODIES: list[tuple[str, Any, int, str]] = [
    ("not-json", b'{"mode": "form", "message": ', 400, "JSON"),
    ("empty-body", b"", 400, "empty"),
    ("json-list", [VALID], 400, "object"),
    ("json-string", "please ask", 400, "object"),
    ("json-number", 42, 400, "object"),
    ("missing-message", {"mode": "form", "requestedSchema": NOTE_SCHEMA}, 400, "message"),
    ("message-not-string", {"message": 5, "requestedSchema": NOTE_SCHEMA}, 400, "message"),
    ("missing-requestedSchema", {"mode": "form", "message": "hi"}, 400, "requestedSchema"),
    ("mode-url", {"mode": "url", "message": "hi", "requestedSchema": NOTE_SCHEMA}, 400, "url"),
    (
        "mode-url-params",
        {"mode": "url", "message": "Sign in", "url": "https://example.com/auth", "elicitationId": "e1"},
        400,
        "url",
    ),
    ("mode-unknown", {"mode": "dialog", "message": "hi", "requestedSchema": NOTE_SCHEMA}, 400, "mode"),
    ("schema-string", form("a schema"), 400, "requestedSchema"),
    ("schema-list", {"message": "hi", "requestedSchema": [NOTE_SCHEMA]}, 400, "requestedSchema"),
    ("schema-empty-object", form({}), 400, "properties"),
    ("schema-type-string", form({"type": "string"}), 400, "requestedSchema"),
    (
        "properties-empty-required",
        form({"type": "object", "properties": {}, "required": ["c"]}),
        400,
        "required",
    ),
    ("properties-list", form({"type": "object", "properties": [{"type": "string"}]}), 400, "properties"),
    ("property-not-object", schema_with("string"), 400, "properties.color"),
    ("enum-empty", schema_with({"type": "string", "enum": []}), 400, "properties.color.enum"),
    ("enum-numbers", schema_with({"enum": [1, 2]}), 400, "properties.color.enum"),
    ("enum-null", schema_with({"type": "string", "enum": ["red", None]}), 400, "properties.color.enum"),
    (
        "items-enum-empty",
        schema_with({"type": "array", "items": {"type": "string", "enum": []}}),
        400,
        "properties.color.items.enum",
    ),
    ("too-many-questions", form(text_properties(51)), 422, "51"),
]


def envelope(rpc_id: Any = 5, **overrides: Any) -> dict[str, Any]:
    """A JSON-RPC ``elicitation/create`` request; an override of ``...`` leaves that member out."""
    body = {"jsonrpc": "2.0", "id": rpc_id, "method": "elicitation/create", "params": VALID}
    body.update(overrides)
    return {key: value for key, value in body.items() if value is not ...}


def _send(client: httpx.AsyncClient, path: str, body: Any, **query: Any):
    if isinstance(body, bytes):
        return client.post(path, content=body, params=query, headers={"content-type": "application/json"})
    return client.post(path, json=body, params=query)


@pytest.mark.parametrize(
    ("body", "status", "mention"), [case[1:] for case in BAD_BODIES], ids=[case[0] for case in BAD_BODIES]
)
async def test_bad_body_is_refused_cleanly(server, client, body, status, mention):
    """Each malformed body is a 400/422 naming the offending part on /elicit and /elicitations alike,
    and as JSON-RPC params a -32602 with the request's id and the same message; nothing is asked."""
    async with leaves_no_trace(server, client):
        responses = [await _send(client, path, body) for path in PATHS]
        rpc = (
            await _send(client, "/elicit", envelope("call-9", params=body))
            if isinstance(body, dict)
            else None
        )
    messages = {assert_tool_error(response, status, mention)["message"] for response in responses}
    assert len(messages) == 1
    if rpc is not None:
        assert assert_jsonrpc_error(rpc, INVALID_PARAMS, "call-9", mention) in messages


async def test_hard_question_limit_is_configurable(make_server):
    """``max_questions`` is the hard limit: 4 questions against a limit of 3 is a 422 on both paths,
    while 3 questions are asked."""
    server = make_server(max_questions=3)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        async with leaves_no_trace(server, client):
            responses = [await client.post(path, json=form(text_properties(4))) for path in PATHS]
        for response in responses:
            body = assert_tool_error(response, 422, "4")
            assert "3" in body["message"]
        created = await client.post("/elicitations", json=form(text_properties(3)))
        assert created.status_code == 201


async def test_fifty_questions_are_within_the_default_limit(client):
    """50 questions is the default hard limit itself, so it is asked (only 51 is refused)."""
    created = await client.post("/elicitations", json=form(text_properties(50)))
    assert created.status_code == 201
    [request] = (await client.get("/question")).json()
    assert len(request["questions"]) == 50


def _big_form(size: int) -> bytes:
    """A valid elicitation whose JSON is at least ``size`` bytes (a long message)."""
    return json.dumps(form(NOTE_SCHEMA, "x" * size)).encode()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_body_over_configured_limit_is_413(make_server, chunked):
    """A 10 KB body against ``max_body_size=4096`` is a 413 naming the limit, declared or streamed."""
    server = make_server(max_body_size=4096)
    raw = _big_form(10_000)

    async def stream() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), 1000):
            yield raw[start : start + 1000]

    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        async with leaves_no_trace(server, client):
            responses = [
                await client.post(
                    path, content=stream() if chunked else raw, headers={"content-type": "application/json"}
                )
                for path in PATHS
            ]
        for response in responses:
            assert_tool_error(response, 413, "4096")


async def test_two_megabyte_body_is_413_on_default_settings(server, client):
    """The default body limit (1 MiB) refuses a 2 MB body with 413."""
    async with leaves_no_trace(server, client):
        responses = [await _send(client, path, _big_form(2_000_000)) for path in PATHS]
    for response in responses:
        assert_tool_error(response, 413, "bytes")


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf", "-inf", ""])
async def test_timeout_or_wait_that_is_not_a_positive_number_is_400(server, client, value):
    """``?timeout=`` (on /elicit, /elicitations, and as JSON-RPC -32602) and ``?wait=`` must be positive
    numbers of seconds; the question a refused ``wait`` asked about stays pending."""
    async with leaves_no_trace(server, client):
        timeouts = [await client.post(path, json=VALID, params={"timeout": value}) for path in PATHS]
        rpc = await _send(client, "/elicit", envelope(11), timeout=value)
        [request] = (await client.get("/question")).json()
        wait = await client.get(f"/elicitations/{request['id']}", params={"wait": value})
    for response in timeouts:
        assert_tool_error(response, 400, "timeout")
    assert_jsonrpc_error(rpc, INVALID_PARAMS, 11, "timeout")
    assert_tool_error(wait, 400, "wait")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("sessionID", "abc123"),
        ("sessionID", "ses 1"),
        ("sessionID", "ses\t1"),
        ("sessionID", ""),
        ("sessionID", "ses_" + "x" * 300),
        ("messageID", "msg 1"),
        ("callID", "call\n1"),
        ("messageID", "msg\r\nX-Injected: 1"),
        ("sessionID", "ses_1\r\n"),
    ],
    ids=[
        "session-no-prefix",
        "session-space",
        "session-tab",
        "session-empty",
        "session-too-long",
        "message-space",
        "call-newline",
        "message-crlf",
        "session-crlf",
    ],
)
async def test_bad_ids_in_query_are_400(server, client, name, value):
    """A sessionID that does not start with ``ses`` or holds spaces, and messageID/callID with spaces,
    are refused naming the parameter (as JSON-RPC: -32602)."""
    async with leaves_no_trace(server, client):
        responses = [await client.post(path, json=VALID, params={name: value}) for path in PATHS]
        rpc = await _send(client, "/elicit", envelope(12), **{name: value})
    for response in responses:
        assert_tool_error(response, 400, name)
    assert_jsonrpc_error(rpc, INVALID_PARAMS, 12, name)


# ---------------------------------------------------------------------------------------------------
# JSON-RPC envelopes on POST /elicit


async def test_jsonrpc_unparsable_is_parse_error_with_null_id(server, client):
    """Unparsable JSON that mentions ``"jsonrpc"`` is a JSON-RPC -32700 with ``id: null``."""
    async with leaves_no_trace(server, client):
        response = await _send(
            client, "/elicit", b'{"jsonrpc": "2.0", "id": 5, "method": "elicitation/create", '
        )
    assert_jsonrpc_error(response, PARSE_ERROR, None)


@pytest.mark.parametrize(
    ("body", "rpc_id"),
    [
        (envelope(jsonrpc="1.0"), 5),
        (envelope(jsonrpc=2), 5),
        (envelope(method=...), 5),
        (envelope(method=7), 5),
        (envelope(rpc_id="abc", method=...), "abc"),
        (envelope(rpc_id=...), None),
    ],
    ids=["version-1.0", "version-number", "no-method", "method-number", "string-id-no-method", "no-id"],
)
async def test_jsonrpc_invalid_request(server, client, body, rpc_id):
    """An envelope that is not a JSON-RPC 2.0 request is -32600 (with its id where it has one)."""
    async with leaves_no_trace(server, client):
        response = await _send(client, "/elicit", body)
    assert_jsonrpc_error(response, INVALID_REQUEST, rpc_id)


@pytest.mark.parametrize("method", ["tools/call", "elicitation/complete", "elicitation"])
async def test_jsonrpc_other_method_is_method_not_found(server, client, method):
    """A method other than ``elicitation/create`` is -32601 with the request's id, naming the method."""
    async with leaves_no_trace(server, client):
        responses = {
            rpc_id: await _send(client, "/elicit", envelope(rpc_id, method=method)) for rpc_id in (5, "r5")
        }
    for rpc_id, response in responses.items():
        assert_jsonrpc_error(response, METHOD_NOT_FOUND, rpc_id, method)


@pytest.mark.parametrize("params", [..., None, [VALID]], ids=["absent", "null", "list"])
async def test_jsonrpc_missing_or_non_object_params_is_invalid_params(server, client, params):
    """Absent, null or non-object (by-position) params are -32602 with the same id, naming params."""
    async with leaves_no_trace(server, client):
        responses = {
            rpc_id: await _send(client, "/elicit", envelope(rpc_id, params=params)) for rpc_id in (5, "r5")
        }
    for rpc_id, response in responses.items():
        assert_jsonrpc_error(response, INVALID_PARAMS, rpc_id, "params")


async def test_an_opencode_client_without_the_bridge_is_told_how_to_attach(client, caplog):
    """``opencode attach`` against a gateway that has no OpenCode server behind it asks for
    ``/config/providers`` first: the 404 says what to run instead, and so does the log."""
    with caplog.at_level("INFO", logger="elicitation_gateway.server.app"):
        response = await client.get("/config/providers")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert "GATEWAY_OPENCODE_URL" in response.json()["message"]
    assert any("GATEWAY_OPENCODE_URL" in record.getMessage() for record in caplog.records)
    other = await client.get("/nothing-here")
    assert other.status_code == 404
    assert "GATEWAY_OPENCODE_URL" not in other.json()["message"]
