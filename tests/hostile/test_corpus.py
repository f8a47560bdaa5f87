"""A corpus of hostile requests against a real gateway process, each class on each side.

Every one gets a 4xx whose body names what is wrong; meanwhile an answerer's event stream stays open and
sees nothing asked, ``GET /question`` lists exactly what it did, a normal round trip succeeds right
after, and ``/livez`` answers within 100 ms throughout (:func:`tests.hostile.conftest.watching`).
"""

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.helpers import form
from tests.hostile.conftest import watching

SURROGATE = "\\ud800"
"""As a JSON escape: valid JSON, a ``str`` Python cannot encode."""


def raw(text: str) -> bytes:
    """A JSON body written by hand, so that escapes such as ``\\ud800`` reach the gateway as sent."""
    return text.encode()


def schema_json(prop: str, key: str = "x", extra: str = "") -> str:
    return f'{{"type": "object", "properties": {{"{key}": {prop}}}{extra}}}'


def ask_json(prop: str, *, key: str = "x", message: str = "Please answer", extra: str = "") -> bytes:
    return raw(
        f'{{"mode": "form", "message": "{message}", "requestedSchema": {schema_json(prop, key, extra)}}}'
    )


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_property(depth: int) -> dict[str, Any]:
    prop: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        prop = {"anyOf": [prop, {"type": "null"}]}
    return prop


@dataclass
class Case:
    name: str
    method: str
    path: str
    body: bytes | None = None
    status: int = 400
    mention: str = ""
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})

    def __str__(self) -> str:
        return self.name


TOOL_SIDE = [
    # Text that is not valid Unicode, in every place a tool writes text.
    Case(
        "surrogate in message",
        "POST",
        "/elicitations",
        ask_json('{"type": "string"}', message=f"x{SURROGATE}y"),
        mention="message is not valid Unicode",
    ),
    Case(
        "surrogate in title",
        "POST",
        "/elicitations",
        ask_json(f'{{"type": "string", "title": "T{SURROGATE}"}}'),
        mention="requestedSchema.properties.x.title",
    ),
    Case(
        "surrogate in description",
        "POST",
        "/elicitations",
        ask_json(f'{{"type": "string", "description": "{SURROGATE}"}}'),
        mention="requestedSchema.properties.x.description",
    ),
    Case(
        "surrogate in an enum value",
        "POST",
        "/elicitations",
        ask_json(f'{{"type": "string", "enum": ["a", "b", "c{SURROGATE}"]}}'),
        mention="requestedSchema.properties.x.enum[2]",
    ),
    Case(
        "surrogate in enumNames",
        "POST",
        "/elicitations",
        ask_json(f'{{"type": "string", "enum": ["a"], "enumNames": ["{SURROGATE}"]}}'),
        mention="requestedSchema.properties.x.enumNames[0]",
    ),
    Case(
        "surrogate in a property key",
        "POST",
        "/elicitations",
        ask_json('{"type": "string"}', key=f"k{SURROGATE}"),
        mention="requestedSchema.properties has a key that is not valid Unicode",
    ),
    Case(
        "surrogate in a default",
        "POST",
        "/elicitations",
        ask_json(f'{{"type": "string", "default": "{SURROGATE}"}}'),
        mention="requestedSchema.properties.x.default",
    ),
    Case(
        "surrogate in a const",
        "POST",
        "/elicitations",
        ask_json(f'{{"type": "string", "oneOf": [{{"const": "{SURROGATE}", "title": "A"}}]}}'),
        mention="requestedSchema.properties.x.oneOf[0].const",
    ),
    Case(
        "surrogate in an option description",
        "POST",
        "/elicitations",
        ask_json(f'{{"type": "string", "enum": ["a"], "x-option-descriptions": {{"a": "{SURROGATE}"}}}}'),
        mention="requestedSchema.properties.x.x-option-descriptions.a",
    ),
    Case(
        "surrogate in a key nobody reads",
        "POST",
        "/elicitations",
        ask_json('{"type": "string"}', extra=f', "x-vendor": "{SURROGATE}"'),
        mention="requestedSchema.x-vendor",
    ),
    Case(
        "surrogate to POST /elicit",
        "POST",
        "/elicit",
        ask_json('{"type": "string"}', message=f"{SURROGATE}"),
        mention="message is not valid Unicode",
    ),
    Case(
        "low surrogate alone",
        "POST",
        "/elicitations",
        ask_json('{"type": "string"}', message="\\udfff"),
        mention="message",
    ),
    Case(
        "bytes that are not UTF-8",
        "POST",
        "/elicitations",
        b'{"mode": "form", "message": "\xff\xfe", "requestedSchema": '
        + schema_json('{"type": "string"}').encode()
        + b"}",
        mention="not valid UTF-8",
    ),
    Case(
        "a surrogate encoded as UTF-8 bytes",
        "POST",
        "/elicitations",
        b'{"mode": "form", "message": "\xed\xa0\x80", "requestedSchema": '
        + schema_json('{"type": "string"}').encode()
        + b"}",
        mention="not valid UTF-8",
    ),
    Case(
        "query sessionID not UTF-8",
        "POST",
        "/elicitations?sessionID=ses%ed%a0%80",
        ask_json('{"type": "string"}'),
        mention="sessionID",
    ),
    Case(
        "query directory not UTF-8",
        "POST",
        "/elicitations?directory=%ff%fe",
        ask_json('{"type": "string"}'),
        mention="directory",
    ),
    Case("path not UTF-8", "GET", "/elicitations/que_%ff", None, mention="path"),
    # Patterns a safe engine cannot run in linear time, or at all.
    Case(
        "backreference",
        "POST",
        "/elicitations",
        ask_json('{"type": "string", "pattern": "(a)\\\\1"}'),
        mention="requestedSchema.properties.x.pattern uses a backreference",
    ),
    Case(
        "lookahead",
        "POST",
        "/elicitations",
        ask_json('{"type": "string", "pattern": "a(?=b)"}'),
        mention="requestedSchema.properties.x.pattern uses lookaround",
    ),
    Case(
        "lookbehind",
        "POST",
        "/elicitations",
        ask_json('{"type": "string", "pattern": "(?<!a)b"}'),
        mention="lookaround",
    ),
    Case(
        "a pattern too large to match quickly",
        "POST",
        "/elicitations",
        ask_json('{"type": "string", "pattern": "(.*){1000}"}'),
        mention="too large",
    ),
    Case(
        "a pattern that does not compile",
        "POST",
        "/elicitations",
        ask_json('{"type": "string", "pattern": "(("}'),
        mention="pattern",
    ),
    # Contradictory constraints: questions no answer can satisfy.
    Case(
        "minimum above maximum",
        "POST",
        "/elicitations",
        ask_json('{"type": "number", "minimum": 5, "maximum": 1}'),
        mention="requestedSchema.properties.x: no answer can satisfy it",
    ),
    Case(
        "exclusive bounds that meet",
        "POST",
        "/elicitations",
        ask_json('{"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1}'),
        mention="no answer can satisfy",
    ),
    Case(
        "an integer range without an integer",
        "POST",
        "/elicitations",
        ask_json('{"type": "integer", "minimum": 1.1, "maximum": 1.9}'),
        mention="no whole number",
    ),
    Case(
        "more selections than options",
        "POST",
        "/elicitations",
        ask_json('{"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 3}'),
        mention="no answer can satisfy",
    ),
    Case(
        "a date of 50 characters",
        "POST",
        "/elicitations",
        ask_json('{"type": "string", "format": "date", "minLength": 50}'),
        mention="no answer can satisfy",
    ),
    Case(
        "minLength above maxLength",
        "POST",
        "/elicitations",
        ask_json('{"type": "string", "minLength": 5, "maxLength": 2}'),
        mention="minLength",
    ),
    Case(
        "required names no property",
        "POST",
        "/elicitations",
        ask_json('{"type": "string"}', extra=', "required": ["x", "y"]'),
        mention="requestedSchema.required names 'y'",
    ),
    # Bodies too deep or too big.
    Case("a body nested 100,000 deep", "POST", "/elicitations", raw(nested(100_000)), mention="nests"),
    Case(
        "a property nested 40 deep",
        "POST",
        "/elicitations",
        json.dumps(form({"type": "object", "properties": {"x": deep_property(40)}})).encode(),
        mention="nests deeper than a property schema needs",
    ),
    Case(
        "a body over the size limit",
        "POST",
        "/elicitations",
        b" " * (1_048_576 + 1),
        status=413,
        mention="larger than the limit",
    ),
    Case(
        "too many options",
        "POST",
        "/elicitations",
        json.dumps(
            form({"type": "object", "properties": {"x": {"enum": [str(i) for i in range(201)]}}})
        ).encode(),
        status=422,
        mention="offers 201 options",
    ),
    Case(
        "too many questions",
        "POST",
        "/elicitations",
        json.dumps(
            form({"type": "object", "properties": {f"k{i}": {"type": "string"} for i in range(51)}})
        ).encode(),
        status=422,
        mention="51 properties",
    ),
    Case(
        "text too long",
        "POST",
        "/elicitations",
        json.dumps(
            form({"type": "object", "properties": {"x": {"type": "string", "description": "d" * 10_001}}})
        ).encode(),
        status=422,
        mention="10001 characters",
    ),
    Case(
        "NaN as a bound",
        "POST",
        "/elicitations",
        ask_json('{"type": "number", "minimum": NaN}'),
        mention="not valid JSON",
    ),
    Case(
        "a secret",
        "POST",
        "/elicitations",
        ask_json('{"type": "string"}', key="password"),
        status=422,
        mention="looks like it asks for a password",
    ),
]

ANSWERABLE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pick": {"type": "string", "enum": ["a", "b"]},
        "count": {"type": "integer", "minimum": 1, "maximum": 9},
        "code": {"type": "string", "pattern": "^(a+)+$"},
        "note": {"type": "string"},
    },
}
"""The pending question the answerer side's hostile replies are sent to."""


def reply(answers: str) -> bytes:
    return raw(f'{{"answers": {answers}}}')


ANSWERER_SIDE = [
    Case(
        "surrogate in an answer",
        "POST",
        "/question/{id}/reply",
        reply(f'[["a"], ["1"], ["aa"], ["{SURROGATE}"]]'),
        mention="answers[3][0]",
    ),
    Case(
        "bytes that are not UTF-8 in an answer",
        "POST",
        "/question/{id}/reply",
        b'{"answers": [["a"], ["1"], ["aa"], ["\xc3"]]}',
        mention="not valid UTF-8",
    ),
    Case(
        "a 10,000-digit number",
        "POST",
        "/question/{id}/reply",
        reply(json.dumps([["a"], ["1" * 9_999 + "x"], ["aa"], ["n"]])),
        mention="Count:",
    ),
    Case(
        "an answer that backtracks in re",
        "POST",
        "/question/{id}/reply",
        reply(json.dumps([["a"], ["1"], ["a" * 9_999 + "!"], ["n"]])),
        mention="does not match the pattern",
    ),
    Case(
        "an answer over the length limit",
        "POST",
        "/question/{id}/reply",
        reply(json.dumps([["a"], ["1"], ["aa"], ["n" * 10_001]])),
        mention="longer than",
    ),
    Case("answers that are not lists", "POST", "/question/{id}/reply", reply('"a"'), mention="answers"),
    Case("answers nested deep", "POST", "/question/{id}/reply", reply(nested(50_000)), mention="nests"),
    Case(
        "too many answers",
        "POST",
        "/question/{id}/reply",
        reply(json.dumps([["a"]] * 5)),
        mention="5 answers",
    ),
    Case(
        "a reply that is not JSON",
        "POST",
        "/question/{id}/reply",
        b'{"answers": [[',
        mention="not valid JSON",
    ),
    Case(
        "surrogate in a reject",
        "POST",
        "/question/{id}/reject",
        raw(f'{{"action": "{SURROGATE}"}}'),
        mention="action",
    ),
    Case("a request id not UTF-8", "POST", "/question/que_%ed%a0%80/reply", reply('[["a"]]'), mention="path"),
    Case("a listing's directory not UTF-8", "GET", "/question?directory=%ff", None, mention="directory"),
    Case(
        "an event stream's directory not UTF-8",
        "GET",
        "/event?directory=%ed%a0%80",
        None,
        mention="directory",
    ),
    Case("the form of a request id not UTF-8", "GET", "/question/que%ff/form", None, mention="path"),
]


async def send(client: httpx.AsyncClient, case: Case, pending_id: str) -> httpx.Response:
    return await client.request(
        case.method, case.path.replace("{id}", pending_id), content=case.body, headers=case.headers
    )


def assert_refused(response: httpx.Response, case: Case) -> None:
    assert response.status_code == case.status, response.text[:500]
    body = response.json()
    message = body.get("message") or body.get("data", {}).get("message") or ""
    assert case.mention in message, message


@pytest.mark.parametrize("case", TOOL_SIDE, ids=str)
async def test_hostile_asks_are_refused_and_harm_nobody(gateway, probe, case):
    async with watching(gateway, probe) as watch:
        assert_refused(await send(watch.client, case, watch.pending_id), case)


@pytest.mark.parametrize("case", ANSWERER_SIDE, ids=str)
async def test_hostile_replies_are_refused_and_harm_nobody(gateway, probe, case):
    async with watching(gateway, probe, ANSWERABLE) as watch:
        assert_refused(await send(watch.client, case, watch.pending_id), case)


async def test_a_jsonrpc_envelope_with_a_lone_surrogate_is_an_error_naming_its_request(gateway, probe):
    body = raw(
        '{"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": '
        f'{{"message": "{SURROGATE}", "requestedSchema": {schema_json(chr(123) + chr(125))}}}}}'
    )
    async with watching(gateway, probe) as watch:
        response = await watch.client.post(
            "/elicit", content=body, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 200
        answer = response.json()
        assert answer["id"] == 7
        assert answer["error"]["code"] == -32602
        assert "params.message is not valid Unicode" in answer["error"]["message"]


async def test_an_mcp_call_with_a_lone_surrogate_is_refused(gateway, probe):
    body = raw(
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "question", "arguments": '
        f'{{"questions": [{{"question": "Q{SURROGATE}", "header": "H"}}]}}}}}}'
    )
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    async with watching(gateway, probe) as watch:
        response = await watch.client.post("/mcp", content=body, headers=headers)
        assert 200 <= response.status_code < 500, response.text
        assert "error" in response.text.lower()


async def test_a_pattern_that_backtracks_in_re_is_asked_and_answered_in_linear_time(gateway, probe):
    """``^(a+)+$`` is a fine pattern for RE2: it is asked, a hostile answer is refused at once, a good one
    accepted."""
    async with watching(gateway, probe) as watch:
        schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}}
        created = await watch.client.post("/elicitations", json=form(schema))
        assert created.status_code == 201, created.text
        request_id = created.json()["id"]
        for _ in range(20):
            refused = await watch.client.post(
                f"/question/{request_id}/reply", json={"answers": [["a" * 9_000 + "!"]]}
            )
            assert refused.status_code == 400
        answered = await watch.client.post(f"/question/{request_id}/reply", json={"answers": [["aaaa"]]})
        assert answered.status_code == 200
        result = (await watch.client.get(f"/elicitations/{request_id}")).json()
        assert result["result"] == {"action": "accept", "content": {"code": "aaaa"}}
        await watch.events.next("question.asked")
        await watch.events.next("question.replied")
