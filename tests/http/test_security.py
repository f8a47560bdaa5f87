"""Two roles, two secrets: the tool token asks, the answerer's password answers, and neither opens the
other's door. Every route with no, wrong and right credentials, for both roles."""

import base64
import json
from urllib.parse import quote_from_bytes

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import form, pending, read_events, text_properties
from tests.raw_http import head, raw_request

TOKEN = "tool-secret-token"
USER, PASSWORD = "opencode", "answerer-secret"


def basic(user: str = USER, password: str = PASSWORD) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


TOOL_OK = {"Authorization": f"Bearer {TOKEN}"}
ANSWERER_OK = {"Authorization": basic()}
WRONG = {
    "none": {},
    "wrong bearer": {"Authorization": "Bearer nope"},
    "wrong password": {"Authorization": basic(password="nope")},
    "wrong user": {"Authorization": basic(user="someone")},
    "garbage": {"Authorization": "Basic !!!not-base64"},
}


@pytest.fixture
def secured(make_server):
    return make_server(tool_token=TOKEN, answerer_password=PASSWORD)


@pytest.fixture
async def http(secured):
    async with httpx.AsyncClient(base_url=secured.url, timeout=10) as client:
        yield client


async def a_pending_id(http: httpx.AsyncClient) -> str:
    created = await http.post("/elicitations", json=form(text_properties(1)), headers=TOOL_OK)
    assert created.status_code == 201
    return created.json()["id"]


TOOL_ROUTES = [
    ("POST", "/elicitations", form(text_properties(1))),
    ("GET", "/elicitations/{id}", None),
    ("DELETE", "/elicitations/{id}", None),
    ("POST", "/elicit?timeout=0.2", form(text_properties(1))),
]
ANSWERER_ROUTES = [
    ("GET", "/question", None),
    ("GET", "/question/", None),
    ("GET", "/question/{id}/form", None),
    ("POST", "/question/{id}/reply", {"answers": [["x"]]}),
    ("POST", "/question/{id}/reject", None),
]


@pytest.mark.parametrize(("method", "path", "body"), TOOL_ROUTES)
@pytest.mark.parametrize("credentials", ["none", "wrong bearer", "answerer password"])
async def test_tool_routes_refuse_anything_but_the_tool_token(http, method, path, body, credentials):
    headers = ANSWERER_OK if credentials == "answerer password" else WRONG[credentials]
    request_id = await a_pending_id(http)
    refused = await http.request(method, path.format(id=request_id), json=body, headers=headers)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert refused.json()["error"] == "unauthorized"
    assert [q["id"] for q in (await http.get("/question", headers=ANSWERER_OK)).json()] == [request_id]


@pytest.mark.parametrize(("method", "path", "body"), TOOL_ROUTES)
async def test_tool_routes_take_the_tool_token(http, method, path, body):
    request_id = await a_pending_id(http)
    allowed = await http.request(method, path.format(id=request_id), json=body, headers=TOOL_OK)
    assert allowed.status_code in (200, 201)


@pytest.mark.parametrize(("method", "path", "body"), [*ANSWERER_ROUTES, ("GET", "/event", None)])
@pytest.mark.parametrize("credentials", [*WRONG, "tool token"])
async def test_answerer_routes_refuse_anything_but_the_password(http, method, path, body, credentials):
    headers = TOOL_OK if credentials == "tool token" else WRONG[credentials]
    request_id = await a_pending_id(http)
    refused = await http.request(method, path.format(id=request_id), json=body, headers=headers)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Basic realm="Secure Area"'
    assert (await http.get(f"/elicitations/{request_id}", headers=TOOL_OK)).json()["status"] == "pending"


@pytest.mark.parametrize(("method", "path", "body"), ANSWERER_ROUTES)
async def test_answerer_routes_take_the_password(http, method, path, body):
    request_id = await a_pending_id(http)
    allowed = await http.request(method, path.format(id=request_id), json=body, headers=ANSWERER_OK)
    assert allowed.status_code == 200


async def test_event_streams_take_basic_auth_or_an_auth_token_query(http):
    async with read_events(http, headers=ANSWERER_OK) as events:
        request_id = await a_pending_id(http)
        assert (await events.next("question.asked")).properties["id"] == request_id
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    async with read_events(http, "/global/event", params={"auth_token": token}) as events:
        assert (await events.next("question.asked")).properties["id"] == request_id
    wrong = base64.b64encode(f"{USER}:nope".encode()).decode()
    refused = await http.get("/event", params={"auth_token": wrong})
    assert refused.status_code == 401


async def test_a_whole_round_trip_with_both_secrets(secured):
    """A tool and an answerer, each a client with only its own secret."""
    async with (
        httpx.AsyncClient(base_url=secured.url, timeout=10, headers=TOOL_OK) as tool,
        httpx.AsyncClient(base_url=secured.url, timeout=10, headers=ANSWERER_OK) as answerer,
    ):
        created = await tool.post("/elicitations", json=form(text_properties(1)))
        [request] = await pending(answerer)
        replied = await answerer.post(f"/question/{request['id']}/reply", json={"answers": [["hi"]]})
        assert replied.json() is True
        result = await tool.get(f"/elicitations/{created.json()['id']}")
        assert result.json()["result"] == {"action": "accept", "content": {"k0": "hi"}}


@pytest.mark.parametrize("path", ["/global/health", "/healthz", "/metrics", "/doc"])
async def test_operations_routes_stay_open_for_probes(http, path):
    assert (await http.get(path)).status_code == 200


async def test_without_secrets_everything_is_open(client):
    assert (await client.post("/elicitations", json=form(text_properties(1)))).status_code == 201
    assert (await client.get("/question")).status_code == 200


async def test_cors_allows_local_pages_and_configured_origins_only(make_server):
    server = make_server(cors_origins=["https://console.example"])
    async with httpx.AsyncClient(base_url=server.url) as http:
        for origin in ("http://localhost:3000", "http://127.0.0.1:5173", "https://console.example"):
            preflight = await http.options(
                "/question", headers={"Origin": origin, "Access-Control-Request-Method": "GET"}
            )
            assert preflight.status_code == 200, origin
            assert preflight.headers["access-control-allow-origin"] == origin
            assert preflight.headers["access-control-allow-credentials"] == "true"
        refused = await http.options(
            "/question", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"}
        )
        assert refused.status_code == 400
        assert "access-control-allow-origin" not in refused.headers
        plain = await http.get("/question", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in plain.headers


async def test_responses_vary_by_origin_and_refusals_still_reach_the_page(make_server, monkeypatch):
    """A browser's request gets CORS headers, even on a 401 (so the page can read it); one without an
    Origin skips CORS but still says the response depends on it."""
    monkeypatch.setenv("OPENCODE_SERVER_PASSWORD", "page-secret")
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as http:
        page = await http.get("/question", headers={"Origin": "http://localhost:3000"})
        assert page.status_code == 401
        assert page.headers["access-control-allow-origin"] == "http://localhost:3000"
        assert "Origin" in page.headers["vary"]
        tool = await http.post("/elicitations", json=form(text_properties(1)))
        assert tool.status_code == 201
        assert "access-control-allow-origin" not in tool.headers
        assert tool.headers.get_list("vary") == ["Origin"]


async def test_a_wildcard_origin_never_comes_with_credentials(make_server):
    server = make_server(cors_origins=["*"])
    async with httpx.AsyncClient(base_url=server.url) as http:
        preflight = await http.options(
            "/question", headers={"Origin": "https://any.example", "Access-Control-Request-Method": "GET"}
        )
        assert preflight.headers["access-control-allow-origin"] == "*"
        assert "access-control-allow-credentials" not in preflight.headers


# ---------------------------------------------------------------------------------------------------
# Malformed credentials: as wrong as a wrong secret, never a server error


def b64(raw: bytes) -> bytes:
    return base64.b64encode(raw)


MALFORMED_AUTHORIZATION: dict[str, bytes] = {
    "empty": b"",
    "only a space": b" ",
    "an empty scheme": b" " + b64(b"opencode:answerer-secret"),
    "a scheme alone": b"Basic",
    "a scheme and a space": b"Basic ",
    "not base64": b"Basic !!!not-base64",
    "base64 of no colon": b"Basic " + b64(b"opencodeanswerer-secret"),
    "base64 of a colon alone": b"Basic " + b64(b":"),
    "base64 of bytes that are not UTF-8": b"Basic " + b64(b"opencode:\xff\xfe"),
    "base64 of latin-1 credentials": b"Basic " + b64("opencode:answerer-sécret".encode("latin-1")),
    "non-ASCII in the header": "Basic ÿþ".encode("latin-1"),
    "non-ASCII scheme": "Bäsic ".encode("latin-1") + b64(b"opencode:answerer-secret"),
    "a right password with a wrong user in UTF-8": b"Basic " + b64("ópencode:answerer-secret".encode()),
    "another scheme": b"Digest " + b64(b"opencode:answerer-secret"),
    "bearer with the password": b"Bearer answerer-secret",
    "a NUL in the credentials": b"Basic " + b64(b"opencode\x00:answerer-secret"),
}
MALFORMED_AUTH_TOKEN: dict[str, str] = {
    "bytes that are not UTF-8": "%ff%fe",
    "non-ASCII": "%C3%A9%C3%A9",
    "not base64": "!!!",
    "base64 of no colon": b64(b"opencodeanswerer-secret").decode(),
    "base64 of bytes that are not UTF-8": b64(b"opencode:\xff")
    .decode()
    .replace("+", "%2B")
    .replace("/", "%2F"),
    "empty": "",
    "a NUL": "%00",
}


@pytest.mark.parametrize("case", MALFORMED_AUTHORIZATION)
@pytest.mark.parametrize("path", ["/question", "/elicitations"])
async def test_malformed_authorization_is_401(secured, case, path):
    """Sent byte by byte: httpx would not send every one of these."""
    headers = [(b"Host", b"127.0.0.1"), (b"Authorization", MALFORMED_AUTHORIZATION[case])]
    refused = raw_request(secured.port, head("GET", path, headers))
    assert refused.status == 401, refused
    assert json.loads(refused.body)["error"] == "unauthorized"


@pytest.mark.parametrize("case", MALFORMED_AUTH_TOKEN)
async def test_a_malformed_auth_token_is_401(secured, case):
    path = f"/event?auth_token={MALFORMED_AUTH_TOKEN[case]}"
    refused = raw_request(secured.port, head("GET", path, [(b"Host", b"127.0.0.1")]))
    assert refused.status == 401, refused
    assert json.loads(refused.body)["error"] == "unauthorized"


HEADER_BYTES = st.binary(max_size=80).filter(lambda value: not any(c in value for c in b"\r\n\0"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    authorization=st.one_of(
        HEADER_BYTES,
        st.builds(
            lambda scheme, raw: scheme + b64(raw),
            st.sampled_from([b"Basic ", b"Bearer ", b"basic  "]),
            st.binary(),
        ),
    ),
    token=st.binary(max_size=80),
)
def test_no_credentials_are_a_server_error(secured, authorization, token):
    """Anything in Authorization, any bytes in auth_token: 401, or the parser's 400 for bytes no header
    may hold; never a 500, on either side."""
    for path in ("/question", "/elicitations/que_none", f"/event?auth_token={quote_from_bytes(token)}"):
        headers = [(b"Host", b"127.0.0.1"), (b"Authorization", authorization)]
        if path.startswith("/event"):
            headers = headers[:1]
        answered = raw_request(secured.port, head("GET", path, headers))
        assert answered.status in (400, 401), (path, answered)
