"""What a web page can make a browser send, against a real gateway: foreign ``Host`` headers (DNS
rebinding), simple cross-site requests (forms, ``text/plain``, no CORS preflight), bodies that are not
JSON. Each refusal names what is wrong and changes nothing: the question stays listed, an open event
stream sees nothing, and the next event is the one a real answer makes."""

import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import RunningServer, settings_for_tests
from tests.helpers import EventReader, Frame, form, read_events, text_properties
from tests.raw_http import head, raw_request

EVIL = "https://evil.example"
FORM = form(text_properties(1))
REPLY = {"answers": [["from the page"]]}
MCP_CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "question", "arguments": {"questions": [{"question": "Deploy?", "header": "Deploy"}]}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


async def a_pending_id(client: httpx.AsyncClient) -> str:
    created = await client.post("/elicitations", json=FORM)
    assert created.status_code == 201, created.text
    return created.json()["id"]


async def next_question_event(events: EventReader) -> Frame:
    while (frame := await events.next()).type == "server.heartbeat":
        pass
    return frame


@contextlib.asynccontextmanager
async def nothing_changes(client: httpx.AsyncClient) -> AsyncIterator[str]:
    """A pending question, with an event stream open on it; after the block, the question is still
    the only one listed and still pending, and the first event since is the one a real reply makes."""
    request_id = await a_pending_id(client)
    async with read_events(client) as events:
        announced = await next_question_event(events)  # a new stream is told what is pending
        assert (announced.type, announced.properties["id"]) == ("question.asked", request_id)
        yield request_id
        assert [q["id"] for q in (await client.get("/question")).json()] == [request_id]
        assert (await client.get(f"/elicitations/{request_id}")).json()["status"] == "pending"
        assert (
            await client.post(f"/question/{request_id}/reply", json={"answers": [["real"]]})
        ).json() is True
        frame = await next_question_event(events)
        assert (frame.type, frame.properties.get("requestID")) == ("question.replied", request_id), frame


async def send(client: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """The response, read unless it is an event stream (which a refusal never is)."""
    async with client.stream(method, path, **kwargs) as response:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            await response.aread()
        return response


# ---------------------------------------------------------------------------------------------------
# Host


READS = [
    "/question",
    "/question/{id}/form",
    "/event",
    "/global/event",
    "/elicitations/{id}",
    "/",
    "/static/app.js",
    "/doc",
    "/livez",
    "/healthz",
    "/global/health",
    "/metrics",
    "/mcp",
]
WRITES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/question/{id}/reply", REPLY),
    ("POST", "/question/{id}/reject", None),
    ("POST", "/question/{id}/reject", {"action": "decline"}),
    ("POST", "/elicitations", FORM),
    ("POST", "/elicit?timeout=5", FORM),
    ("DELETE", "/elicitations/{id}", None),
    ("POST", "/mcp", MCP_CALL),
]
FOREIGN_HOSTS = [
    "evil.example",
    "evil.example:{port}",
    "rebound.example.",
    "localhost.evil.example:{port}",
    "127.0.0.1.evil.example",
    "gateway",
    "",
    "[::1",
    "a b",
]


@pytest.mark.parametrize(("method", "path", "body"), [*(("GET", path, None) for path in READS), *WRITES])
async def test_a_foreign_host_is_421_on_every_route_and_changes_nothing(server, client, method, path, body):
    async with nothing_changes(client) as request_id:
        for host in FOREIGN_HOSTS:
            host = host.format(port=server.port)
            headers = {**MCP_HEADERS, "Host": host}
            refused = await send(client, method, path.format(id=request_id), json=body, headers=headers)
            assert refused.status_code == 421, (host, refused.text)
            answer = refused.json()
            assert answer["error"] == "host_not_allowed"
            assert repr(host) in answer["message"]
            assert "GATEWAY_ALLOWED_HOSTS" in answer["message"]


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "LOCALHOST:{port}",
        "localhost.:{port}",
        "answers.localhost:{port}",
        "127.0.0.1",
        "127.0.0.1:{port}",
        "127.0.0.2:{port}",
        "[::1]:{port}",
        "10.20.30.40",
    ],
)
async def test_loopback_names_and_ip_addresses_are_served(server, client, host):
    host = host.format(port=server.port)
    async with nothing_changes(client):
        listed = await client.get("/question", headers={"Host": host})
        assert listed.status_code == 200
        assert (await client.get("/", headers={"Host": host})).status_code == 200
        mcp = await client.post(
            "/mcp", json={**MCP_CALL, "method": "tools/list"}, headers={**MCP_HEADERS, "Host": host}
        )
        assert mcp.status_code == 200, mcp.text


async def test_allowed_hosts_add_names_exactly_or_by_their_parent(make_server):
    server = make_server(allowed_hosts=["gateway.example.com", "*.corp.example"])
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        for host in (
            "gateway.example.com",
            "GATEWAY.example.com:443",
            "a.corp.example",
            "b.a.corp.example:8080",
        ):
            assert (await client.get("/question", headers={"Host": host})).status_code == 200, host
            created = await client.post("/elicitations", json=FORM, headers={"Host": host})
            assert created.status_code == 201, host
        for host in (
            "www.gateway.example.com",
            "corp.example",
            "gateway.example.com.evil.example",
            "evil.example",
        ):
            assert (await client.get("/question", headers={"Host": host})).status_code == 421, host


async def test_any_host_with_a_star_and_the_public_url_is_served(make_server):
    anything = make_server(allowed_hosts=["*"])
    async with httpx.AsyncClient(base_url=anything.url, timeout=10) as client:
        assert (await client.get("/question", headers={"Host": "whatever.example"})).status_code == 200
    public = make_server(public_url="https://gateway.example.com/answers")
    async with httpx.AsyncClient(base_url=public.url, timeout=10) as client:
        assert (await client.get("/question", headers={"Host": "gateway.example.com"})).status_code == 200
        assert (await client.get("/question", headers={"Host": "other.example.com"})).status_code == 421


def test_a_request_without_host_is_served(server):
    """HTTP/1.0 needs no Host: such a client is no browser, and no DNS rebinding concerns it."""
    listed = raw_request(server.port, head("GET", "/question", [], version="1.0"))
    assert (listed.status, json.loads(listed.body)) == (200, [])
    body = json.dumps(FORM).encode()
    headers = [(b"Content-Type", b"application/json"), (b"Content-Length", str(len(body)).encode())]
    created = raw_request(server.port, head("POST", "/elicitations", headers, version="1.0") + body)
    assert created.status == 201, created.body


# ---------------------------------------------------------------------------------------------------
# Pages on other origins


def as_text(body: dict[str, Any] | None) -> bytes:
    return json.dumps(body).encode() if body is not None else b""


def multipart(body: dict[str, Any] | None) -> bytes:
    """The JSON text as a form field's name, as a page's ``<form enctype="multipart/form-data">`` sends."""
    return b'--b\r\nContent-Disposition: form-data; name="' + as_text(body) + b'"\r\n\r\nx\r\n--b--\r\n'


TEXT = {"Content-Type": "text/plain;charset=UTF-8"}
URLENCODED = {"Content-Type": "application/x-www-form-urlencoded"}
MULTIPART = {"Content-Type": "multipart/form-data; boundary=b"}
JSON_TYPE = {"Content-Type": "application/json"}
ATTACKS = {
    "text/plain from another origin": ({**TEXT, "Origin": EVIL}, as_text),
    "a form from another origin": ({**URLENCODED, "Origin": EVIL}, as_text),
    "a multipart form from another origin": ({**MULTIPART, "Origin": EVIL}, multipart),
    "no body from another origin": ({"Origin": EVIL}, lambda body: b""),
    "JSON from another origin": ({**JSON_TYPE, "Origin": EVIL}, as_text),
    "a cross-site fetch": ({**TEXT, "Origin": EVIL, "Sec-Fetch-Site": "cross-site"}, as_text),
    "a cross-site page that hides its origin": ({**TEXT, "Sec-Fetch-Site": "cross-site"}, as_text),
    "a same-site page": (
        {**JSON_TYPE, "Origin": "https://a.example", "Sec-Fetch-Site": "same-site"},
        as_text,
    ),
    "a sandboxed frame": ({**TEXT, "Origin": "null"}, as_text),
    "a sandboxed frame, cross-site": (
        {**URLENCODED, "Origin": "null", "Sec-Fetch-Site": "cross-site"},
        as_text,
    ),
}


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
@pytest.mark.parametrize("attack", ATTACKS)
async def test_a_page_on_another_origin_changes_nothing(client, method, path, body, attack):
    headers, encode = ATTACKS[attack]
    async with nothing_changes(client) as request_id:
        refused = await send(
            client,
            method,
            path.format(id=request_id),
            content=encode(body),
            headers={**MCP_HEADERS, **headers},
        )
        assert refused.status_code == 403, refused.text
        answer = refused.json()
        assert answer["error"] == "cross_origin"
        assert repr(headers.get("Origin", "(none; Sec-Fetch-Site: cross-site)")) in answer["message"]
        assert "GATEWAY_CORS_ORIGINS" in answer["message"]
        assert "access-control-allow-origin" not in refused.headers


ALLOWED = {
    "the gateway's own page": lambda url: {"Origin": url, "Sec-Fetch-Site": "same-origin"},
    "its own page, in a browser without Sec-Fetch-Site": lambda url: {"Origin": url},
    "the person's own action": lambda url: {"Sec-Fetch-Site": "none"},
    "its own page with a no-referrer policy": lambda url: {"Origin": "null", "Sec-Fetch-Site": "same-origin"},
    "a local page": lambda url: {"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"},
    "a local page over https": lambda url: {
        "Origin": "https://127.0.0.1:8443",
        "Sec-Fetch-Site": "cross-site",
    },
    "an origin in GATEWAY_CORS_ORIGINS": lambda url: {
        "Origin": "https://console.example",
        "Sec-Fetch-Site": "cross-site",
    },
    "a tool": lambda url: {},
}


@pytest.fixture(scope="module")
def console_server() -> Any:
    server = RunningServer(settings_for_tests(cors_origins=["https://console.example"])).start()
    yield server
    server.stop()


@pytest.mark.parametrize("who", ALLOWED)
async def test_the_own_page_allowed_origins_and_tools_answer_ask_and_withdraw(console_server, who):
    headers = ALLOWED[who](console_server.url)
    async with httpx.AsyncClient(base_url=console_server.url, timeout=10, headers=headers) as client:
        try:
            first, second, third = [await a_pending_id(client) for _ in range(3)]
            assert (await client.post(f"/question/{first}/reply", json=REPLY)).json() is True
            assert (await client.post(f"/question/{second}/reject")).json() is True
            withdrawn = await client.delete(f"/elicitations/{third}")
            assert withdrawn.json()["status"] == "cancelled"
            listed = await client.post("/mcp", json={**MCP_CALL, "method": "tools/list"}, headers=MCP_HEADERS)
            assert listed.status_code == 200, listed.text
        finally:
            console_server.reset()


async def test_a_page_may_read_but_only_allowed_origins_see_the_answer(client):
    """Reads change nothing, and CORS keeps their answer from pages it does not allow; /mcp is checked
    on every method, as MCP's transport asks."""
    async with nothing_changes(client):
        read = await client.get("/question", headers={"Origin": EVIL, "Sec-Fetch-Site": "cross-site"})
        assert read.status_code == 200
        assert "access-control-allow-origin" not in read.headers
        local = await client.get("/question", headers={"Origin": "http://localhost:3000"})
        assert local.headers["access-control-allow-origin"] == "http://localhost:3000"
        mcp = await client.get("/mcp", headers={"Origin": EVIL, "Accept": "text/event-stream"})
        assert (mcp.status_code, mcp.json()["error"]) == (403, "cross_origin")


@pytest.mark.parametrize("path", ["/mcp", "/gateway/mcp"])
@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
async def test_in_bridge_mode_both_mcp_endpoints_refuse_other_origins_alike(make_server, path, method):
    """``/mcp`` is OpenCode's there and ``/gateway/mcp`` the gateway's: a page on another origin reaches
    neither, whatever the method; a tool reaches the gateway's."""
    with socket.socket() as probe:  # an upstream that is not there: nothing must be forwarded anyway
        probe.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{probe.getsockname()[1]}"
    bridged = make_server(opencode_url=nowhere)
    async with httpx.AsyncClient(base_url=bridged.url, timeout=10) as client:
        for attack in (
            {"Origin": EVIL},
            {"Origin": EVIL, "Sec-Fetch-Site": "cross-site"},
            {"Origin": "null"},
        ):
            body = json.dumps(MCP_CALL) if method == "POST" else None
            headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            refused = await client.request(method, path, content=body, headers={**headers, **attack})
            assert (refused.status_code, refused.json()["error"]) == (403, "cross_origin"), attack
        if path == "/gateway/mcp" and method == "POST":
            listed = await client.post(path, json={**MCP_CALL, "method": "tools/list"}, headers=MCP_HEADERS)
            assert listed.status_code == 200, listed.text


async def test_behind_a_proxy_the_public_name_is_the_pages_origin(make_server):
    server = make_server(allowed_hosts=["gateway.example.com"])
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        public = {"Host": "gateway.example.com"}
        request_id = await a_pending_id(client)
        page = {**public, "Origin": "https://gateway.example.com"}  # a browser without Sec-Fetch-Site
        assert (await client.post(f"/question/{request_id}/reply", json=REPLY, headers=page)).json() is True
        # A proxy on another port that passes the name without the port: Sec-Fetch-Site tells, Origin cannot.
        other_port = {**public, "Origin": "https://gateway.example.com:8443"}
        request_id = await a_pending_id(client)
        refused = await client.post(f"/question/{request_id}/reject", headers=other_port)
        assert refused.status_code == 403
        fetched = await client.post(
            f"/question/{request_id}/reject", headers={**other_port, "Sec-Fetch-Site": "same-origin"}
        )
        assert fetched.json() is True


async def test_the_public_urls_origin_is_the_gateways_own(make_server):
    """With a proxy that does not pass Host, GATEWAY_PUBLIC_URL still names the page's origin."""
    server = make_server(public_url="https://gateway.example.com:8443")
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        request_id = await a_pending_id(client)
        page = {"Origin": "https://gateway.example.com:8443"}
        assert (await client.post(f"/question/{request_id}/reject", headers=page)).json() is True
        request_id = await a_pending_id(client)
        other = {"Origin": "https://gateway.example.com"}
        assert (await client.post(f"/question/{request_id}/reject", headers=other)).status_code == 403


# ---------------------------------------------------------------------------------------------------
# JSON only


NOT_JSON = [
    None,
    "text/plain",
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=b",
    "text/json",
    "application/jsonx",
    "application/xml",
]


@pytest.mark.parametrize("content_type", NOT_JSON)
async def test_json_routes_refuse_other_bodies_with_415_in_each_sides_shape(client, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    given = f"Content-Type {content_type!r}" if content_type else "no Content-Type"
    async with nothing_changes(client) as request_id:
        for path, body in [("/elicitations", FORM), ("/elicit?timeout=5", FORM)]:
            refused = await client.post(path, content=json.dumps(body), headers=headers)
            assert refused.status_code == 415, refused.text
            assert refused.json()["error"] == "unsupported_media_type"
            assert given in refused.json()["message"]
        for path, body in [("reply", REPLY), ("reject", {"action": "decline"})]:
            refused = await client.post(
                f"/question/{request_id}/{path}", content=json.dumps(body), headers=headers
            )
            assert refused.status_code == 415, refused.text
            assert refused.json()["name"] == "BadRequest"
            assert refused.json()["data"]["kind"] == "Payload"
            assert given in refused.json()["data"]["message"]


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "APPLICATION/JSON;CHARSET=UTF-8",
        "application/vnd.elicitation+json",
        "application/merge-patch+json",
    ],
)
async def test_json_routes_take_every_json_type(client, server, content_type):
    headers = {"Content-Type": content_type}
    try:
        created = await client.post("/elicitations", content=json.dumps(FORM), headers=headers)
        assert created.status_code == 201
        request_id = created.json()["id"]
        replied = await client.post(
            f"/question/{request_id}/reply", content=json.dumps(REPLY), headers=headers
        )
        assert replied.json() is True
        rejected_id = await a_pending_id(client)
        declined = await client.post(
            f"/question/{rejected_id}/reject", content=json.dumps({"action": "decline"}), headers=headers
        )
        assert declined.json() is True
        waited = await client.post("/elicit?timeout=0.2", content=json.dumps(FORM), headers=headers)
        assert waited.json() == {"action": "cancel"}
    finally:
        server.reset()


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({}, b""),  # OpenCode's SDK, the terminal answerer
        ({"Content-Type": "text/plain;charset=UTF-8"}, b""),  # fetch(url, {method: "POST", body: ""})
        ({"Content-Type": "application/json"}, b""),
    ],
)
async def test_a_reject_without_a_body_needs_no_json_type(client, server, headers, body):
    request_id = await a_pending_id(client)
    try:
        rejected = await client.post(f"/question/{request_id}/reject", content=body, headers=headers)
        assert rejected.json() is True
        assert (await client.get(f"/elicitations/{request_id}")).json()["result"] == {"action": "cancel"}
    finally:
        server.reset()


def test_an_empty_chunked_reject_needs_no_json_type_and_a_chunked_body_does(server):
    """Whether a body is empty is read from the body, not from Content-Length."""
    chunked = [(b"Host", b"127.0.0.1"), (b"Content-Type", b"text/plain"), (b"Transfer-Encoding", b"chunked")]

    async def ask() -> str:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            return await a_pending_id(client)

    try:
        request_id = server.run(ask())
        sent = raw_request(
            server.port, head("POST", f"/question/{request_id}/reject", chunked) + b"0\r\n\r\n"
        )
        assert (sent.status, sent.body) == (200, b"true")
        request_id = server.run(ask())
        with_body = b"1\r\n{\r\n1\r\n}\r\n0\r\n\r\n"
        sent = raw_request(server.port, head("POST", f"/question/{request_id}/reject", chunked) + with_body)
        assert sent.status == 415
        assert json.loads(sent.body)["name"] == "BadRequest"
        assert [record.id for record in server.run(server.gateway.store.pending())] == [request_id]
    finally:
        server.reset()


# ---------------------------------------------------------------------------------------------------
# Anything in the headers a page or a client may send


ANY_BYTES = st.binary(max_size=60).filter(lambda value: not any(c in value for c in b"\r\n\0"))


def sometimes(*usual: bytes) -> st.SearchStrategy[bytes]:
    """Mostly what browsers send, so that each check is reached, and anything at all besides."""
    return st.one_of(st.sampled_from(usual), ANY_BYTES)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    host=sometimes(b"127.0.0.1", b"localhost:4096"),
    origin=sometimes(b"http://127.0.0.1", b"http://localhost:3000", b"null"),
    site=sometimes(b"same-origin", b"none", b"cross-site"),
    content_type=sometimes(b"application/json", b"text/plain"),
)
def test_no_host_origin_or_content_type_is_a_server_error(server, host, origin, site, content_type):
    body = json.dumps(REPLY).encode()
    headers = [
        (b"Host", host),
        (b"Origin", origin),
        (b"Sec-Fetch-Site", site),
        (b"Content-Type", content_type),
        (b"Content-Length", str(len(body)).encode()),
    ]
    answered = raw_request(server.port, head("POST", "/question/que_none/reply", headers) + body)
    # 400 from the HTTP parser for bytes no header may hold; else one of the gateway's refusals,
    # or its 404 for a question that is not there.
    assert answered.status in (400, 403, 404, 415, 421), answered
