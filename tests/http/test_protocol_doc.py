"""docs/protocol.md against a running gateway.

- Every route the page names (`` `GET /question/{id}/form` ``) answers a well-formed call.
- Every route the app serves, and every operation of its OpenAPI document (``GET /doc``), is named
  on the page: a new route without documentation fails here.
- Every error body the page shows in a table (a status cell and a JSON cell in one row) is
  triggered for real, and the response has that status, the same keys at every level, and the same
  values wherever the page gives one (``…`` stands for any text).
"""

import asyncio
import contextlib
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Mount, Route

from elicitation_gateway.stores.base import StoreUnavailable
from tests.conftest import RunningServer
from tests.helpers import until
from tests.raw_http import head, raw_request

PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
TEXT = PROTOCOL.read_text(encoding="utf-8")

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
NAMED_ROUTE = re.compile(r"`(" + "|".join(METHODS) + r") (/[^`\s?]*)[^`]*`")
FORM = {
    "message": "Deploy?",
    "requestedSchema": {"type": "object", "properties": {"go": {"type": "boolean", "title": "Deploy now"}}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
JSON_TYPE = {"Content-Type": "application/json"}


def template(path: str) -> str:
    """``/question/{requestID}/form`` and ``/question/{id}/form`` are the same route."""
    return re.sub(r"\{[^}/]*\}", "{}", path)


def named_routes() -> dict[tuple[str, str], str]:
    """``{(method, template): path as written}`` for every route the page names."""
    return {(method, template(path)): path for method, path in NAMED_ROUTE.findall(TEXT)}


# ---------------------------------------------------------------------------------------------------
# Routes


async def pending_id(client: httpx.AsyncClient) -> str:
    created = await client.post("/elicitations", json=FORM)
    assert created.status_code == 201, created.text
    return created.json()["id"]


def well_formed(method: str, path: str) -> dict[str, Any]:
    """The parts of a well-formed call besides method and URL; a plain request for routes not listed."""
    calls: dict[tuple[str, str], dict[str, Any]] = {
        ("POST", "/elicit"): {"json": FORM, "params": {"timeout": "0.2"}},
        ("POST", "/elicitations"): {"json": FORM},
        ("POST", "/question/{}/reply"): {"json": {"answers": [["Yes"]]}},
        ("POST", "/question/{}/reject"): {"json": {"action": "decline"}},
        ("POST", "/mcp"): {
            "json": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            "headers": MCP_HEADERS,
        },
    }
    return calls.get((method, template(path)), {})


async def fill(client: httpx.AsyncClient, path: str) -> str:
    """The path with its parameters filled in: a pending question's id, or one of the page's files."""
    if path.startswith("/static/"):
        return template(path).replace("{}", "app.js")
    if "{" in path:
        return template(path).replace("{}", await pending_id(client))
    return path


ANSWERED_ELSEWHERE = ("/link/",)
"""Routes a well-formed call of needs more than this server has: a one-tap link needs people and a
token, and tests/http/test_links.py calls both of its routes well-formed."""


@pytest.mark.parametrize(
    ("method", "path"),
    sorted(route for route in named_routes() if not route[1].startswith(ANSWERED_ELSEWHERE)),
    ids=lambda part: part,
)
async def test_every_named_route_answers_a_well_formed_call(client, method, path):
    written = named_routes()[(method, path)]
    url = await fill(client, written)
    request = client.build_request(method, url, **well_formed(method, written))
    response = await client.send(request, stream=True)  # event streams stay open: read the status only
    try:
        assert response.status_code not in (404, 405), f"{method} {url}: {response.status_code}"
        assert 200 <= response.status_code < 300, f"{method} {url}: {response.status_code}"
    finally:
        await response.aclose()


def test_the_page_names_the_routes_of_both_sides_and_the_extension():
    named = named_routes()
    for route in [
        ("POST", "/elicit"),
        ("POST", "/elicitations"),
        ("GET", "/elicitations/{}"),
        ("DELETE", "/elicitations/{}"),
        ("GET", "/question"),
        ("POST", "/question/{}/reply"),
        ("POST", "/question/{}/reject"),
        ("GET", "/question/{}/form"),
        ("GET", "/event"),
        ("GET", "/global/event"),
    ]:
        assert route in named, f"docs/protocol.md does not name {' '.join(route)}"


async def test_every_operation_of_the_api_document_is_named(client):
    document = (await client.get("/doc")).json()
    named = named_routes()
    missing = [
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        for method in operations
        if method.upper() in METHODS and (method.upper(), template(path)) not in named
    ]
    assert not missing, "routes of GET /doc that docs/protocol.md does not name: " + ", ".join(missing)


def test_every_route_the_app_serves_is_named(server: RunningServer):
    named = named_routes()
    named_paths = {path for _, path in named}
    missing = []
    for route in server.app.routes:
        if isinstance(route, Mount):
            if template(route.path + "/{}") not in named_paths:
                missing.append(f"{route.path}/…")
        elif isinstance(route, Route) and route.methods:
            missing += [
                f"{method} {route.path}"
                for method in sorted(route.methods - {"HEAD"})
                if (method, template(route.path)) not in named
            ]
        elif template(getattr(route, "path", "")) not in named_paths:
            missing.append(getattr(route, "path", repr(route)))
    assert not missing, "routes the app serves that docs/protocol.md does not name: " + ", ".join(missing)


async def test_operation_ids_are_the_documented_ones(client):
    document = (await client.get("/doc")).json()
    rows = [cells(line) for line in TEXT.splitlines() if line.startswith("| `")]
    checked = 0
    for row in rows:
        route = NAMED_ROUTE.match(row[0])
        operation = re.fullmatch(r"`([a-z]+\.[a-z.]+)`", row[1]) if len(row) > 1 else None
        if not (route and operation):
            continue
        method, path = route.groups()
        paths = {template(p): operations for p, operations in document["paths"].items()}
        found = paths.get(template(path), {}).get(method.lower(), {}).get("operationId")
        assert found == operation.group(1), f"{method} {path}: GET /doc says {found!r}"
        checked += 1
    assert checked >= 6, "the answerer side's table of operation ids is gone"


async def test_mcp_refuses_what_the_page_says_it_refuses(client):
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    wrong_type = await client.post(
        "/mcp", content=json.dumps(call), headers={**MCP_HEADERS, "Content-Type": "text/plain"}
    )
    assert (wrong_type.status_code, wrong_type.text) == (400, "Invalid Content-Type header")
    foreign_host = await client.post("/mcp", json=call, headers={**MCP_HEADERS, "Host": "evil.example"})
    assert (foreign_host.status_code, foreign_host.json()["error"]) == (421, "host_not_allowed")
    foreign_origin = await client.post(
        "/mcp", json=call, headers={**MCP_HEADERS, "Origin": "http://evil.example"}
    )
    assert (foreign_origin.status_code, foreign_origin.json()["error"]) == (403, "cross_origin")


# ---------------------------------------------------------------------------------------------------
# Error bodies


def cells(line: str) -> list[str]:
    """A table row's cells; ``\\|`` inside a cell is not a separator."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def shape_of(body: dict[str, Any]) -> tuple[Any, ...] | None:
    """What identifies an error body, or None for a body that is not one."""
    if "jsonrpc" in body:
        return ("jsonrpc", body["error"]["code"]) if "error" in body else None
    if "error" in body:
        return ("tool", body["error"])
    if "_tag" in body:
        return ("tag", body["_tag"])
    if body.get("name") == "BadRequest":
        return ("BadRequest", body["data"]["kind"], "issues" in body["data"])
    if body.get("healthy") is False:
        return ("health",)
    if body.get("status") == "unavailable":
        return ("healthz",)
    return None


def documented_errors() -> dict[tuple[Any, ...], dict[str, Any]]:
    """``{(status, *shape): body}`` for every table row with a status cell and a JSON error body."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for line in TEXT.splitlines():
        if not line.startswith("|"):
            continue
        row = cells(line)
        statuses = [int(cell[1:4]) for cell in row if re.fullmatch(r"`\d{3}`", cell)]
        for cell in row:
            if not (cell.startswith("`{") and cell.endswith("}`")):
                continue
            try:
                body = json.loads(cell[1:-1])
            except json.JSONDecodeError:
                continue
            if statuses and isinstance(body, dict) and (shape := shape_of(body)) is not None:
                found.setdefault((statuses[0], *shape), body)
    return found


def assert_same_shape(actual: Any, documented: Any, where: str = "body") -> None:
    if isinstance(documented, dict):
        assert isinstance(actual, dict), f"{where}: {actual!r} is not an object"
        assert set(actual) == set(documented), f"{where}: keys {sorted(actual)} != {sorted(documented)}"
        for key, value in documented.items():
            assert_same_shape(actual[key], value, f"{where}.{key}")
    elif isinstance(documented, list):
        assert isinstance(actual, list), f"{where}: {actual!r} is not a list"
        if documented:
            assert actual, f"{where}: empty, the page shows entries"
            for index, item in enumerate(actual):
                assert_same_shape(item, documented[0], f"{where}[{index}]")
    elif isinstance(documented, str) and "…" in documented:
        assert isinstance(actual, str), f"{where}: {actual!r} is not text"
    else:
        assert actual == documented, f"{where}: {actual!r}, the page says {documented!r}"


Make = Callable[..., RunningServer]
Trigger = Callable[[Make], Awaitable[list[httpx.Response]]]


def client_of(server: RunningServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=10)


def one_server(
    calls: Callable[[httpx.AsyncClient], Awaitable[list[httpx.Response]]], **settings: Any
) -> Trigger:
    async def trigger(make: Make) -> list[httpx.Response]:
        async with client_of(make(**settings)) as client:
            return await calls(client)

    return trigger


def post(path: str, **kwargs: Any) -> Trigger:
    async def calls(client: httpx.AsyncClient) -> list[httpx.Response]:
        return [await client.post(path, **kwargs)]

    return one_server(calls)


def form_with(properties: dict[str, Any], message: str = "Questions") -> dict[str, Any]:
    return {"message": message, "requestedSchema": {"type": "object", "properties": properties}}


async def _listed(client: httpx.AsyncClient) -> bool:
    return bool((await client.get("/question")).json())


async def _key_held(client: httpx.AsyncClient, again: dict[str, Any]) -> list[httpx.Response]:
    """A POST /elicit that waits with an Idempotency-Key, and another with the same key and ``again``."""
    key = {"Idempotency-Key": "held-key"}
    first = asyncio.create_task(client.post("/elicit", json=FORM, headers=key, timeout=30))
    await until(lambda: _listed(client), what="the first request's question")
    second = await client.post("/elicit", json=again, headers=key)
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    return [second]


async def _already_finished(client: httpx.AsyncClient) -> list[httpx.Response]:
    request_id = await pending_id(client)
    assert (await client.post(f"/question/{request_id}/reply", json={"answers": [["Yes"]]})).json() is True
    return [await client.delete(f"/elicitations/{request_id}")]


async def _not_found(client: httpx.AsyncClient) -> list[httpx.Response]:
    return [await client.get("/elicitations/que_unknown"), await client.get("/no/such/route")]


async def _too_many_pending(client: httpx.AsyncClient) -> list[httpx.Response]:
    await pending_id(client)
    return [await client.post("/elicitations", json=FORM)]


async def _too_many_subscribers(client: httpx.AsyncClient) -> list[httpx.Response]:
    async with client.stream("GET", "/event") as first:
        assert first.status_code == 200
        return [await client.get("/event"), await client.get("/global/event")]


async def _shutting_down(make: Make) -> list[httpx.Response]:
    server = make()
    server.call(lambda: asyncio.ensure_future(server.gateway.shutdown()))
    await until(lambda: bool(server.gateway.closing), what="the gateway closing")
    async with client_of(server) as client:
        return [await client.post("/elicitations", json=FORM)]


async def _unauthorized(make: Make) -> list[httpx.Response]:
    async with client_of(make(tool_token="tool-secret", answerer_password="answerer-secret")) as client:
        tool, answerer = await client.post("/elicit", json=FORM), await client.get("/question")
    assert tool.headers["www-authenticate"] == "Bearer"
    assert answerer.headers["www-authenticate"] == 'Basic realm="Secure Area"'
    return [tool, answerer]


async def _internal(make: Make) -> list[httpx.Response]:
    server = make()

    async def broken(directory: str | None = None) -> list[str]:
        raise RuntimeError("a failure the gateway did not expect")

    server.gateway.pending_listing = broken  # type: ignore[method-assign]
    async with client_of(server) as client:
        return [await client.get("/question")]


async def _store_unavailable(make: Make) -> list[httpx.Response]:
    server = make()

    async def unreachable(*args: Any) -> Any:
        raise StoreUnavailable("the question store is unreachable")

    server.gateway.store.pending = unreachable  # type: ignore[method-assign]
    server.gateway.store.count_pending = unreachable  # type: ignore[method-assign]
    async with client_of(server) as client:
        responses = [await client.get("/question"), await client.post("/elicitations", json=FORM)]
    assert all(response.headers.get("retry-after") == "1" for response in responses)
    return responses


def store_down(path: str) -> Trigger:
    async def trigger(make: Make) -> list[httpx.Response]:
        server = make()

        async def unhealthy() -> bool:
            return False

        async def problem() -> str:
            return "the question store is unreachable"

        server.gateway.store.healthy = unhealthy  # type: ignore[method-assign]
        server.gateway.store.problem = problem  # type: ignore[method-assign]
        async with client_of(server) as client:
            return [await client.get(path)]

    return trigger


async def _foreign_host(client: httpx.AsyncClient) -> list[httpx.Response]:
    return [
        await client.get("/question", headers={"Host": "rebound.example"}),
        await client.post("/elicitations", json=FORM, headers={"Host": "rebound.example:4096"}),
    ]


async def _gets(client: httpx.AsyncClient, path: str) -> list[httpx.Response]:
    return [await client.get(path)]


async def _head_too_large(client: httpx.AsyncClient) -> list[httpx.Response]:
    many = [(f"x-h{number}", "v") for number in range(100)]
    return [
        await client.get("/livez", headers=many),
        await client.get("/livez", headers={"x-big": "v" * 70_000}),
    ]


async def _no_host(client: httpx.AsyncClient) -> list[httpx.Response]:
    """Over a raw socket: httpx sends exactly one Host, always."""
    responses = []
    for hosts in ([], [(b"Host", b"127.0.0.1"), (b"Host", b"localhost")]):
        port = client.base_url.port
        assert port is not None
        raw = await asyncio.to_thread(raw_request, port, head("GET", "/question", hosts))
        request = httpx.Request("GET", client.base_url.join("/question"))
        responses.append(httpx.Response(raw.status, headers=raw.headers, content=raw.body, request=request))
    return responses


async def _cross_origin(client: httpx.AsyncClient) -> list[httpx.Response]:
    request_id = await pending_id(client)
    page = {"Origin": "https://evil.example", "Content-Type": "text/plain"}
    return [
        await client.post(f"/question/{request_id}/reply", content=b'{"answers": [["x"]]}', headers=page),
        await client.post(f"/question/{request_id}/reject", headers={"Sec-Fetch-Site": "cross-site"}),
        await client.post("/elicitations", json=FORM, headers={"Origin": "null"}),
    ]


async def _unsupported_reply(client: httpx.AsyncClient) -> list[httpx.Response]:
    request_id = await pending_id(client)
    form_body = {"Content-Type": "application/x-www-form-urlencoded"}
    return [
        await client.post(f"/question/{request_id}/reply", content=b'{"answers": [["x"]]}'),
        await client.post(f"/question/{request_id}/reject", content=b"action=decline", headers=form_body),
    ]


async def _answers_do_not_fit(client: httpx.AsyncClient) -> list[httpx.Response]:
    created = await client.post("/elicitations", json=form_with({"hours": {"type": "integer"}}))
    request_id = created.json()["id"]
    return [await client.post(f"/question/{request_id}/reply", json={"answers": [["lots"]]})]


async def _malformed_reply(client: httpx.AsyncClient) -> list[httpx.Response]:
    request_id = await pending_id(client)
    return [
        await client.post(f"/question/{request_id}/reply", content=b"{", headers=JSON_TYPE),
        await client.post(f"/question/{request_id}/reject", json={"action": "accept"}),
    ]


async def _too_large_reply(client: httpx.AsyncClient) -> list[httpx.Response]:
    return [await client.post("/question/que_unknown/reply", content=b" " * 2048, headers=JSON_TYPE)]


async def _question_not_found(client: httpx.AsyncClient) -> list[httpx.Response]:
    return [
        await client.get("/question/que_unknown/form"),
        await client.post("/question/que_unknown/reply", json={"answers": []}),
        await client.post("/question/que_unknown/reject"),
    ]


async def _bad_request_id(client: httpx.AsyncClient) -> list[httpx.Response]:
    return [await client.get("/question/xyz/form"), await client.post("/question/xyz/reject")]


def get(path: str) -> Trigger:
    async def calls(client: httpx.AsyncClient) -> list[httpx.Response]:
        return [await client.get(path)]

    return one_server(calls)


JSONRPC = {"jsonrpc": "2.0", "id": 7}

TRIGGERS: dict[tuple[Any, ...], Trigger] = {
    # The tool side
    (400, "tool", "invalid_json"): post("/elicit", content=b"{nope", headers=JSON_TYPE),
    (400, "tool", "invalid_text"): post(
        "/elicit", content=b'{"message": "\\ud800", "requestedSchema": {}}', headers=JSON_TYPE
    ),
    (400, "tool", "too_deep"): post("/elicit", content=b"[" * 100_000 + b"]" * 100_000, headers=JSON_TYPE),
    (400, "tool", "invalid_params"): post("/elicit", json=[1]),
    (400, "tool", "unsupported_mode"): post(
        "/elicit", json={"mode": "url", "message": "m", "url": "https://example.com", "elicitationId": "e"}
    ),
    (400, "tool", "invalid_schema"): post("/elicit", json=form_with({"a": {"type": "object"}})),
    (400, "tool", "invalid_request"): post("/elicitations", json={**JSONRPC, "method": "tools/list"}),
    (400, "tool", "invalid_session"): post("/elicit", json=FORM, params={"sessionID": "abc"}),
    (400, "tool", "invalid_tool"): post("/elicit", json=FORM, params={"messageID": "a b"}),
    (400, "tool", "invalid_timeout"): post("/elicit", json=FORM, params={"timeout": "-1"}),
    (400, "tool", "invalid_timeout_choice"): post("/elicit", json=FORM, params={"onTimeout": "later"}),
    (400, "tool", "invalid_wait"): get("/elicitations/que_unknown?wait=soon"),
    (404, "tool", "not_found"): one_server(_not_found),
    (405, "tool", "method_not_allowed"): get("/elicit"),
    (409, "tool", "already_finished"): one_server(_already_finished),
    (400, "tool", "invalid_idempotency_key"): post("/elicit", json=FORM, headers={"Idempotency-Key": "a b"}),
    (422, "tool", "idempotency_key_reused"): one_server(
        lambda client: _key_held(client, form_with({}, "Other"))
    ),
    (413, "tool", "body_too_large"): one_server(
        lambda client: asyncio.gather(client.post("/elicitations", content=b" " * 2048, headers=JSON_TYPE)),
        max_body_size=1024,
    ),
    (413, "tool", "question_too_large"): one_server(
        lambda client: asyncio.gather(
            client.post(
                "/elicitations",
                json=form_with({f"q{i}": {"enum": [f"{i}-{j:0>60}" for j in range(200)]} for i in range(20)}),
            )
        ),
        max_pending_bytes=1024 * 1024,
    ),
    (422, "tool", "too_many_questions"): post(
        "/elicit", json=form_with({f"q{index}": {"type": "string"} for index in range(51)})
    ),
    (422, "tool", "too_many_options"): post(
        "/elicit", json=form_with({"pick": {"type": "string", "enum": [str(n) for n in range(201)]}})
    ),
    (422, "tool", "text_too_long"): post("/elicit", json=form_with({"a": {"type": "string"}}, "x" * 10_001)),
    (422, "tool", "sensitive_question"): post("/elicit", json=form_with({"password": {"type": "string"}})),
    (429, "tool", "too_many_pending"): one_server(_too_many_pending, max_pending=1),
    (429, "tool", "too_many_subscribers"): one_server(_too_many_subscribers, max_subscribers=1),
    (503, "tool", "shutting_down"): _shutting_down,
    # Every route
    (401, "tool", "unauthorized"): _unauthorized,
    (500, "tool", "internal"): _internal,
    (503, "tool", "store_unavailable"): _store_unavailable,
    (421, "tool", "host_not_allowed"): one_server(_foreign_host),
    (400, "tool", "invalid_host"): one_server(_no_host),
    (414, "tool", "url_too_long"): one_server(lambda client: _gets(client, "/livez?pad=" + "p" * 8200)),
    (431, "tool", "headers_too_large"): one_server(_head_too_large),
    (403, "tool", "cross_origin"): one_server(_cross_origin),
    (415, "tool", "unsupported_media_type"): post(
        "/elicit", content=json.dumps(FORM), headers={"Content-Type": "text/plain"}
    ),
    (503, "health"): store_down("/global/health"),
    (503, "healthz"): store_down("/healthz"),
    # JSON-RPC
    (200, "jsonrpc", -32700): post("/elicit", content=b'{"jsonrpc": "2.0", nope', headers=JSON_TYPE),
    (200, "jsonrpc", -32600): post("/elicit", json={"jsonrpc": "2.0", "method": "elicitation/create"}),
    (200, "jsonrpc", -32601): post("/elicit", json={**JSONRPC, "method": "tools/list"}),
    (200, "jsonrpc", -32602): post("/elicit", json={**JSONRPC, "method": "elicitation/create", "params": 3}),
    # The answerer side
    (400, "BadRequest", "Params", False): one_server(_bad_request_id),
    (400, "BadRequest", "Payload", False): one_server(_malformed_reply),
    (400, "BadRequest", "Payload", True): one_server(_answers_do_not_fit),
    (413, "BadRequest", "Payload", False): one_server(_too_large_reply, max_body_size=1024),
    (415, "BadRequest", "Payload", False): one_server(_unsupported_reply),
    (404, "tag", "QuestionNotFoundError"): one_server(_question_not_found),
}


def test_every_trigger_is_of_an_error_the_page_shows():
    undocumented = sorted(map(str, set(TRIGGERS) - set(documented_errors())))
    assert not undocumented, "errors this test triggers that docs/protocol.md does not show: " + ", ".join(
        undocumented
    )


@pytest.mark.parametrize("key", sorted(documented_errors(), key=str), ids=str)
async def test_every_error_body_the_page_shows(make_server, key):
    documented = documented_errors()[key]
    assert key in TRIGGERS, f"docs/protocol.md shows {key}, and this test does not know how to cause it"
    responses = await TRIGGERS[key](make_server)
    assert responses
    for response in responses:
        where = f"{response.request.method} {response.request.url.path}"
        assert response.status_code == key[0], f"{where}: {response.status_code} {response.text}"
        assert_same_shape(response.json(), documented, where)


async def test_the_errors_section_tells_each_shape_apart_as_printed(client: httpx.AsyncClient):
    """The ``reason`` function of the page's Errors section, run as printed on one body of each shape."""
    section = TEXT[TEXT.index("\n## Errors\n") :]
    (snippet,) = re.findall(r"^```python\n(.*?)^```", section.split("\n## ", 2)[1], re.MULTILINE | re.DOTALL)
    namespace: dict[str, Any] = {}
    exec(snippet, namespace)  # the page's own example
    reason = namespace["reason"]

    schema_error = await client.post("/elicit", json={"message": "m", "requestedSchema": {"type": "object"}})
    assert schema_error.status_code == 400
    assert reason(schema_error.json()).startswith("invalid_schema: ")
    request_id = await pending_id(client)
    misfit = await client.post(f"/question/{request_id}/reply", json={"answers": [["perhaps"]]})
    assert misfit.status_code == 400
    assert reason(misfit.json()) == misfit.json()["data"]["message"]
    await client.post(f"/question/{request_id}/reject", json={"action": "decline"})
    late = await client.post(f"/question/{request_id}/reply", json={"answers": [["yes"]]})
    assert late.status_code == 404
    assert reason(late.json()) == f"Question request not found: {request_id} (it was declined)"
