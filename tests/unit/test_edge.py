"""The app's edge (:mod:`elicitation_gateway.server.edge`): one layer giving every request the answer
the layers it replaced gave, stacked as they were (host and origin guard, CORS, access control, URL
text), byte for byte, and what reaches the app the same."""

import asyncio
import base64
import itertools
from typing import Any

from starlette.applications import Starlette

from elicitation_gateway.server.app import create_app
from elicitation_gateway.server.edge import Edge, RequestHead
from elicitation_gateway.server.middleware.access_control import AccessControl
from elicitation_gateway.server.middleware.browser_guard import BrowserGuard
from elicitation_gateway.server.middleware.cors import Cors
from elicitation_gateway.server.middleware.first_routes import FirstRoutes
from elicitation_gateway.server.middleware.url_text import UrlTextCheck
from elicitation_gateway.server.origins import OriginPolicy
from elicitation_gateway.server.routes.table import ROUTES
from tests.conftest import settings_for_tests

TOKEN = "tool-secret"
PASSWORD = "answer-secret"
BASIC = b"Basic " + base64.b64encode(b"opencode:" + PASSWORD.encode())


def _run(layer: Any, method: str, path: str, headers: list[tuple[bytes, bytes]], query: bytes = b"") -> Any:
    sent: list[dict[str, Any]] = []
    reached: list[tuple[str, str, bytes]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = (await receive()).get("body", b"")
        reached.append((scope["method"], scope["path"], body))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-app", b"1")]})
        await send({"type": "http.response.body", "body": b"ok"})

    messages = [{"type": "http.request", "body": b'{"a": 1}', "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode("latin-1"),
        "query_string": query,
        "headers": headers,
    }
    asyncio.run(layer(app)(scope, receive, send))
    return sent, reached, scope.get("state")


def _layers(settings: Any) -> tuple[Any, Any]:
    policy = OriginPolicy(settings)

    def stacked(app: Any) -> Any:
        inner = UrlTextCheck(app, ROUTES)
        return BrowserGuard(Cors(AccessControl(inner, settings, ROUTES), policy), policy, ROUTES)

    def edge(app: Any) -> Any:
        return Edge(app, policy, settings, ROUTES, guarded=ROUTES)

    return stacked, edge


HOSTS = [[(b"host", b"127.0.0.1:4096")], [(b"host", b"evil.example")], []]
ORIGINS = [
    [],
    [(b"origin", b"http://localhost:3000")],
    [(b"origin", b"https://evil.example")],
    [(b"sec-fetch-site", b"cross-site")],
]
CREDENTIALS = [
    [],
    [(b"authorization", b"Bearer " + TOKEN.encode())],
    [(b"authorization", BASIC)],
    [(b"authorization", b"Bearer wrong"), (b"authorization", b"Bearer " + TOKEN.encode())],
]
TYPES = [[(b"content-type", b"application/json")], [(b"content-type", b"text/plain")], []]
REQUESTS = [
    ("POST", "/elicit", b""),
    ("POST", "/question/que_1/reply", b""),
    ("GET", "/question", b""),
    ("GET", "/event", b"directory=%ff"),
    ("GET", "/livez", b""),
    ("POST", "/el%ffcit", b""),
    ("OPTIONS", "/elicit", b""),
]


def test_every_request_gets_the_answer_the_stacked_layers_gave():
    for settings in (
        settings_for_tests(),
        settings_for_tests(tool_token=TOKEN, answerer_password=PASSWORD, cors_origins=["https://ok.example"]),
    ):
        stacked, edge = _layers(settings)
        for (method, path, query), host, origin, credentials, kind in itertools.product(
            REQUESTS, HOSTS, ORIGINS, CREDENTIALS, TYPES
        ):
            headers = [*host, *origin, *credentials, *kind]
            if method == "OPTIONS" and origin:
                headers.append((b"access-control-request-method", b"POST"))
            before = _run(stacked, method, path, headers, query)
            after = _run(edge, method, path, headers, query)
            assert after == before, (method, path, query, headers)


def test_a_request_head_is_read_once_with_each_headers_first_value():
    head = RequestHead(
        {
            "headers": [
                (b"authorization", b"Bearer a"),
                (b"host", b"h1"),
                (b"content-type", b"application/json"),
                (b"host", b"h2"),
                (b"authorization", b"Bearer b"),
                (b"content-type", b"text/plain"),
            ]
        }
    )
    assert (head.host, head.authorization, head.content_type) == ("h1", "Bearer a", "application/json")
    assert not head.origin
    assert not head.browser
    browser = RequestHead({"headers": [(b"sec-fetch-site", b"same-origin")]})
    assert (browser.host, browser.authorization, browser.content_type) == (None, "", "")
    assert browser.browser
    assert not browser.origin
    assert RequestHead({"headers": [(b"origin", b"http://localhost")]}).origin


def test_without_the_bridge_the_edge_is_one_layer_before_the_round_trips_routes():
    app: Starlette = create_app(settings_for_tests())
    assert [middleware.cls for middleware in app.user_middleware] == [Edge, FirstRoutes]
    assert app.user_middleware[0].kwargs["guarded"] is ROUTES
