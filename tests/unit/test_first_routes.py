"""The innermost layer that serves a round trip's two requests past Starlette's router: what reaches
it goes to its endpoint with the scope the router would give, exceptions meet the same handlers, and
everything else goes on to the app."""

import asyncio
from typing import Any

import pytest
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router

from elicitation_gateway.server.app import create_app
from elicitation_gateway.server.middleware.first_routes import FIRST_PATHS, FirstRoutes
from elicitation_gateway.settings import Settings


class Refused(Exception):
    pass


class Unhandled(Exception):
    pass


def _scope(method: str, path: str) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 4096),
        "client": ("127.0.0.1", 5000),
    }


async def _refused(request: Request, error: Exception) -> Response:
    return JSONResponse({"refused": type(error).__name__}, 409)


async def _gone(request: Request, error: Exception) -> Response:
    return Response(status_code=499)


async def _teapot(request: Request, error: Exception) -> Response:
    return Response(status_code=418)


def _layer(endpoint: Any, **handlers: Any) -> tuple[FirstRoutes, list[dict[str, Any]], Router]:
    """The layer over routes of ``endpoint``, its inner app recording what reaches it."""
    passed: list[dict[str, Any]] = []

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        passed.append(scope)
        await Response("inner")(scope, receive, send)

    routes = [
        Route("/elicit", endpoint, methods=["POST"]),
        Route("/question/{requestID}/reply", endpoint, methods=["POST"]),
        Route("/elicitations", endpoint, methods=["POST"]),
    ]
    router = Router(routes)
    exception_handlers = {Refused: _refused, ClientDisconnect: _gone, Exception: _teapot, **handlers}
    return FirstRoutes(inner, routes, router, exception_handlers), passed, router


def _call(layer: FirstRoutes, method: str, path: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    scope = _scope(method, path)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(layer(scope, receive, send))
    return sent, scope


async def _echo(request: Request) -> Response:
    return JSONResponse({"id": request.path_params.get("requestID"), "body": (await request.body()).decode()})


def test_a_round_trips_requests_reach_their_endpoints_with_the_routers_scope():
    layer, passed, router = _layer(_echo)
    sent, scope = _call(layer, "POST", "/question/que_1/reply")
    assert passed == []
    assert sent[0]["status"] == 200
    assert sent[1]["body"] == b'{"id":"que_1","body":"{}"}'
    assert scope["path_params"] == {"requestID": "que_1"}
    assert scope["route"] is router.routes[1]
    assert scope["endpoint"] is _echo
    assert scope["router"] is router
    sent, _ = _call(layer, "POST", "/elicit")
    assert passed == []
    assert sent[0]["status"] == 200


def test_other_requests_go_on_to_the_app():
    layer, passed, _ = _layer(_echo)
    for method, path in [("GET", "/elicit"), ("POST", "/elicitations"), ("POST", "/question/que_1/reject")]:
        sent, _ = _call(layer, method, path)
        assert sent[1]["body"] == b"inner"
    assert [scope["path"] for scope in passed] == ["/elicit", "/elicitations", "/question/que_1/reject"]


def test_an_exception_meets_the_handler_of_its_nearest_class():
    class Nearer(Refused):
        pass

    async def refuse(request: Request) -> Response:
        raise Nearer

    layer, _, _ = _layer(refuse)
    sent, _ = _call(layer, "POST", "/elicit")
    assert sent[0]["status"] == 409
    assert sent[1]["body"] == b'{"refused":"Nearer"}'


def test_an_http_exception_meets_its_status_handler_first():
    async def missing(request: Request) -> Response:
        raise HTTPException(404)

    async def by_status(request: Request, error: Exception) -> Response:
        return Response(status_code=410)

    layer, _, _ = _layer(missing)
    layer.status_handlers[404] = by_status
    layer.handlers[HTTPException] = _refused
    sent, _ = _call(layer, "POST", "/elicit")
    assert sent[0]["status"] == 410


def test_the_server_errors_handler_is_left_to_the_outermost_layer():
    async def broken(request: Request) -> Response:
        raise Unhandled

    layer, _, _ = _layer(broken)
    with pytest.raises(Unhandled):
        _call(layer, "POST", "/elicit")


def test_a_handled_exception_once_the_response_started_is_starlettes_runtime_error():
    class Breaking(Response):
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            raise ClientDisconnect

    async def breaking(request: Request) -> Response:
        return Breaking()

    layer, _, _ = _layer(breaking)
    with pytest.raises(RuntimeError, match="response already started"):
        _call(layer, "POST", "/elicit")


def test_the_app_serves_the_round_trips_routes_from_this_layer_with_its_own_handlers():
    app = create_app(Settings())
    layers = app.user_middleware
    assert layers[-1].cls is FirstRoutes  # innermost: after every check of the request
    options = layers[-1].kwargs
    layer = FirstRoutes(app.router, **options)
    assert {route.path for route in layer.routes} == FIRST_PATHS
    assert Exception not in layer.handlers
    assert ClientDisconnect in layer.handlers
