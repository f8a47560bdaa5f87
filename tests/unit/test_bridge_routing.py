"""The OpenCode bridge's pure parts: who answers which request, which headers cross, the setting, and
that without the setting nothing of the bridge is in the app."""

import httpx
import pytest
from pydantic import ValidationError

from elicitation_gateway.server.app import create_app
from elicitation_gateway.server.bridge import BridgedRoutes, Owner, owner
from elicitation_gateway.server.bridge.upstream import Upstream, forwarded_headers, returned_headers
from elicitation_gateway.server.middleware.browser_guard import BrowserGuard
from elicitation_gateway.server.middleware.dispatch import Dispatch
from elicitation_gateway.settings import Settings


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        # The tool side and the gateway's operations: OpenCode has none of these.
        ("POST", "/elicit", Owner.GATEWAY),
        ("POST", "/elicitations", Owner.GATEWAY),
        ("GET", "/elicitations/que_1", Owner.GATEWAY),
        ("GET", "/healthz", Owner.GATEWAY),
        ("GET", "/metrics", Owner.GATEWAY),
        # Merged: both sides' events and questions.
        ("GET", "/event", Owner.GATEWAY),
        ("GET", "/global/event", Owner.GATEWAY),
        ("GET", "/question", Owner.GATEWAY),
        ("GET", "/question/", Owner.GATEWAY),
        # Answers go to whichever side asked.
        ("POST", "/question/que_1/reply", Owner.BY_ID),
        ("POST", "/question/que_1/reject", Owner.BY_ID),
        ("OPTIONS", "/question/que_1/reply", Owner.GATEWAY),
        ("GET", "/question/que_1/form", Owner.GATEWAY),
        # The gateway's own routes, where both sides have one.
        ("GET", "/gateway", Owner.PREFIXED),
        ("GET", "/gateway/", Owner.PREFIXED),
        ("POST", "/gateway/mcp", Owner.PREFIXED),
        ("GET", "/gateway/doc", Owner.PREFIXED),
        # Everything else is OpenCode's, shared names included.
        ("GET", "/", Owner.UPSTREAM),
        ("GET", "/doc", Owner.UPSTREAM),
        ("POST", "/mcp", Owner.UPSTREAM),
        ("GET", "/global/health", Owner.UPSTREAM),
        ("GET", "/provider", Owner.UPSTREAM),
        ("GET", "/session/ses_1/message", Owner.UPSTREAM),
        ("GET", "/api/event", Owner.UPSTREAM),
        ("GET", "/gateways", Owner.UPSTREAM),
        ("GET", "/question/que_1", Owner.UPSTREAM),
        ("POST", "/question/que_1/reply/extra", Owner.UPSTREAM),
        ("GET", "/static/app.js", Owner.UPSTREAM),
    ],
)
def test_owner(method: str, path: str, expected: Owner):
    assert owner(method, path) is expected


@pytest.mark.parametrize(
    ("method", "path", "checked"),
    [
        ("GET", "/gateway/mcp", True),  # as /mcp: every method
        ("GET", "/gateway/mcp/x", True),
        ("GET", "/mcp", True),
        ("GET", "/gateway/question", False),  # reads elsewhere are answered, CORS keeps them
        ("POST", "/gateway/elicitations", True),
        ("GET", "/gatewaymcp", False),
    ],
)
def test_the_browser_guard_judges_a_prefixed_path_as_the_route_it_reaches(method, path, checked):
    assert BridgedRoutes().origin_checked(method, path) is checked


def test_a_prefixed_path_has_the_role_and_body_of_the_route_it_reaches():
    routes = BridgedRoutes()
    assert routes.role_of("/gateway/elicitations/que_1") == "tool"
    assert routes.role_of("/gateway/mcp") == "tool"
    assert routes.body_rule("POST", "/gateway/elicit") == "json"


def test_request_headers_cross_as_sent_but_hop_by_hop_ones():
    sent = [
        (b"host", b"127.0.0.1:4097"),
        (b"authorization", b"Basic b3BlbmNvZGU6eA=="),
        (b"x-opencode-directory", b"/srv/project"),
        (b"connection", b"keep-alive"),
        (b"transfer-encoding", b"chunked"),
        (b"cookie", b"a=1"),
        (b"cookie", b"b=2"),
    ]
    forwarded = forwarded_headers(sent)
    assert forwarded.multi_items() == [
        ("authorization", "Basic b3BlbmNvZGU6eA=="),
        ("x-opencode-directory", "/srv/project"),
        ("cookie", "a=1"),
        ("cookie", "b=2"),
    ]
    assert "last-event-id" not in forwarded_headers([(b"last-event-id", b"evt_1")], drop=[b"last-event-id"])


def test_response_headers_cross_but_those_uvicorn_writes_itself():
    headers = httpx.Headers(
        [
            ("Content-Type", "application/json"),
            ("Date", "Thu, 03 Dec 2026 07:35:06 GMT"),
            ("Transfer-Encoding", "chunked"),
            ("Vary", "Origin"),
            ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"),
        ]
    )
    assert returned_headers(headers) == [
        (b"content-type", b"application/json"),
        (b"vary", b"Origin"),
        (b"set-cookie", b"a=1"),
        (b"set-cookie", b"b=2"),
    ]


def test_paths_and_queries_reach_the_upstream_as_the_client_encoded_them():
    upstream = Upstream("http://127.0.0.1:4096", timeout=5)
    url = upstream.url_for(b"/api/fs/read/a%20b/%2F", b"directory=%2Ftmp&x=1")
    assert url.raw_path == b"/api/fs/read/a%20b/%2F?directory=%2Ftmp&x=1"
    assert str(url).startswith("http://127.0.0.1:4096/")
    behind_a_prefix = Upstream("http://host:4096/opencode/", timeout=5)
    assert behind_a_prefix.url_for(b"/config").raw_path == b"/opencode/config"


def test_only_http_urls_are_upstreams():
    assert Settings(opencode_url="http://127.0.0.1:4096/").opencode_url == "http://127.0.0.1:4096"
    assert Settings(opencode_url="").opencode_url is None
    assert Settings().opencode_url is None
    for wrong in ("127.0.0.1:4096", "ftp://host", "http://", "http://host:4096 x"):
        with pytest.raises(ValidationError, match="opencode_url"):
            Settings(opencode_url=wrong)


def test_without_the_setting_nothing_of_the_bridge_is_in_the_app():
    plain = create_app(Settings())
    assert plain.state.bridge is None
    assert all(middleware.cls is not Dispatch for middleware in plain.user_middleware)
    bridged = create_app(Settings(opencode_url="http://127.0.0.1:4096"))
    assert bridged.state.bridge is not None
    # Outermost but the host and origin checks, which guard what it forwards too: before CORS and access
    # control.
    assert [middleware.cls for middleware in bridged.user_middleware[:2]] == [BrowserGuard, Dispatch]
    # Bridge mode adds the merged routes in front and takes nothing away.
    plain_routes = [getattr(route, "path", None) for route in plain.routes]
    bridged_routes = [getattr(route, "path", None) for route in bridged.routes]
    assert bridged_routes[-len(plain_routes) :] == plain_routes
