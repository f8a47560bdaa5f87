"""The ASGI application: ``create_app(settings)``.

Served by ``elicitation-gateway``, or by any ASGI server:
``uvicorn --factory elicitation_gateway.server.app:create_app``.
"""

import contextlib
import functools
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from elicitation_gateway.encoding import JsonResponse
from elicitation_gateway.gateway import Gateway
from elicitation_gateway.server.logs import CLIENT_GONE, hide_access_queries, route_of
from elicitation_gateway.server.mcp_endpoint import McpEndpoint
from elicitation_gateway.server.openapi import openapi_document
from elicitation_gateway.server.refusals import exception_handlers
from elicitation_gateway.server.routes.parsing import UrlTextCheck
from elicitation_gateway.server.routes.table import ROUTES
from elicitation_gateway.server.security import AccessControl, BrowserGuard
from elicitation_gateway.server.tracing import tracing_middleware
from elicitation_gateway.settings import Settings

logger = logging.getLogger(__name__)


OPENCODE_ONLY = frozenset(
    {"config", "provider", "session", "project", "path", "app", "agent", "command", "tui"}
)
"""First path segments an OpenCode client asks for that only a whole OpenCode server serves."""
ATTACH_HINT = (
    "; an OpenCode client (opencode attach) needs a whole OpenCode server: run the gateway in front of "
    "`opencode serve` with GATEWAY_OPENCODE_URL (docs/opencode-bridge.md)"
)


async def _http_error(request: Request, error: Exception) -> JsonResponse:
    assert isinstance(error, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
    message = f"{request.method} {request.url.path}: {error.detail}"
    if error.status_code == 404 and request.url.path.split("/")[1] in OPENCODE_ONLY:
        message += ATTACH_HINT
        logger.info(
            "%s %s asked of a gateway without an OpenCode server%s",
            request.method,
            request.url.path,
            ATTACH_HINT,
        )
    return JsonResponse(
        {"error": code, "message": message},
        status_code=error.status_code,
        headers=error.headers,
    )


async def _server_error(request: Request, error: Exception) -> JsonResponse:
    logger.exception("unexpected error on %s %s", request.method, request.url.path)
    return JsonResponse({"error": "internal", "message": "unexpected error; see the server log"}, 500)


async def _client_gone(request: Request, error: Exception) -> Response:
    """A client that left before its request was read: nothing went wrong here, and nothing changed."""
    logger.info(CLIENT_GONE, route_of(request.scope))
    return Response(status_code=499)  # nginx's "client closed request": nobody is left to receive it


def create_app(settings: Settings | None = None, gateway: Gateway | None = None) -> Starlette:
    settings = settings or Settings()
    gateway = gateway or Gateway(settings)
    hide_access_queries()  # whichever server serves the app, its access line never shows a credential
    mcp = McpEndpoint(gateway, settings)
    middleware = [
        Middleware(AccessControl, settings=settings, routes=ROUTES),
        Middleware(UrlTextCheck, routes=ROUTES),
    ]
    bridge = None
    if settings.opencode_url:  # bridge mode: decided here, so that without it nothing changes
        from elicitation_gateway.server.bridge import Bridge

        bridge = Bridge(gateway, settings)
        middleware.insert(0, bridge.middleware())
    # Hosts and origins before anything else (in bridge mode, before requests are forwarded to OpenCode).
    guarded = bridge.routes if bridge else ROUTES  # in bridge mode, /gateway/mcp is guarded as /mcp
    middleware.insert(0, Middleware(BrowserGuard, settings=settings, routes=guarded))
    middleware[:0] = tracing_middleware()  # outermost; only with the `otel` extra and a tracer provider

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.start()
        # The MCP server's sessions end after the gateway's questions, the bridge's upstream after both.
        async with bridge.running() if bridge else contextlib.nullcontext(), mcp.running():
            try:
                yield
            finally:
                await gateway.shutdown()

    app = Starlette(
        routes=ROUTES.routes(bridge.handlers if bridge else None),
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={
            HTTPException: _http_error,
            **exception_handlers(ROUTES.role_of),  # the gateway's refusals (StoreUnavailable: 503)
            ClientDisconnect: _client_gone,
            Exception: _server_error,
        },
    )
    app.state.gateway = gateway
    app.state.settings = settings
    app.state.bridge = bridge
    app.state.mcp = mcp
    app.state.openapi_document = functools.partial(openapi_document, settings)
    return app
