"""The ASGI application: ``create_app(settings)``.

Served by ``elicitation-gateway``, or by any ASGI server:
``uvicorn --factory elicitation_gateway.server.app:create_app``.
"""

import asyncio
import contextlib
import functools
import logging
import signal
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from elicitation_gateway.encoding import JsonResponse
from elicitation_gateway.gateway import Gateway
from elicitation_gateway.people import PeopleFile
from elicitation_gateway.server.edge import Edge
from elicitation_gateway.server.errors import tool_error
from elicitation_gateway.server.logs import CLIENT_GONE, hide_access_queries
from elicitation_gateway.server.mcp_endpoint import McpEndpoint
from elicitation_gateway.server.middleware.browser_guard import BrowserGuard
from elicitation_gateway.server.middleware.first_routes import FirstRoutes
from elicitation_gateway.server.openapi import openapi_document
from elicitation_gateway.server.origins import OriginPolicy
from elicitation_gateway.server.protocol import route_of
from elicitation_gateway.server.refusals import exception_handlers
from elicitation_gateway.server.routes.links import link_secret
from elicitation_gateway.server.routes.table import ROUTES
from elicitation_gateway.server.tracing import tracing_middleware
from elicitation_gateway.settings import Settings
from elicitation_gateway.webhooks import Webhooks

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
    return tool_error(error.status_code, code, message, headers=error.headers)


async def _server_error(request: Request, error: Exception) -> JsonResponse:
    logger.exception("unexpected error on %s %s", request.method, request.url.path)
    return tool_error(500, "internal", "unexpected error; see the server log")


async def _client_gone(request: Request, error: Exception) -> Response:
    """A client that left before its request was read: nothing went wrong here, and nothing changed."""
    logger.info(CLIENT_GONE, route_of(request.scope))
    return Response(status_code=499)  # nginx's "client closed request": nobody is left to receive it


def _reread_on_sighup(people: PeopleFile) -> bool:
    """SIGHUP reads the people file again, where the app runs on the main thread's loop (a server in a
    thread of a test cannot take signals)."""
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, people.reload)
    except (RuntimeError, ValueError, AttributeError):  # not the main thread; no SIGHUP (Windows)
        return False
    return True


WEBHOOK_GRACE = 2.0
"""Seconds a stopping gateway gives the webhooks still queued (the shutdown's own events among them)."""


def _start_webhooks(settings: Settings, gateway: Gateway) -> Webhooks | None:
    if not settings.webhook_urls or settings.webhook_secret is None:
        return None
    webhooks = Webhooks(settings.webhook_urls, settings.webhook_secret.get_secret_value(), gateway.metrics)
    webhooks.start(gateway.store)
    return webhooks


def create_app(settings: Settings | None = None, gateway: Gateway | None = None) -> Starlette:
    settings = settings or Settings()
    gateway = gateway or Gateway(settings)
    hide_access_queries()  # whichever server serves the app, its access line never shows a credential
    mcp = McpEndpoint(gateway, settings)
    people = PeopleFile(settings.people) if settings.people else None  # a bad file stops the start
    origins = OriginPolicy(settings)  # the one answer to "which hosts, which origins, which CORS headers"
    bridge = None
    if settings.opencode_url:  # bridge mode: decided here, so that without it nothing changes
        from elicitation_gateway.server.bridge import Bridge
        from elicitation_gateway.server.middleware.dispatch import Dispatch

        bridge = Bridge(gateway, settings)
        # Hosts and origins before anything else, requests forwarded to OpenCode included (/gateway/mcp
        # guarded as /mcp); then the dispatch, and the rest of the edge for the gateway's requests.
        middleware = [
            Middleware(BrowserGuard, policy=origins, routes=bridge.routes),
            Middleware(Dispatch, bridge=bridge),
            Middleware(Edge, policy=origins, settings=settings, routes=ROUTES, people=people),
        ]
    else:  # every check of the edge in one layer, hosts and origins first
        middleware = [
            Middleware(Edge, policy=origins, settings=settings, routes=ROUTES, people=people, guarded=ROUTES)
        ]
    middleware[:0] = tracing_middleware()  # outermost; only with the `otel` extra and a tracer provider

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await gateway.start()
        webhooks = _start_webhooks(settings, gateway)
        rereading = people is not None and _reread_on_sighup(people)
        # The MCP server's sessions end after the gateway's questions, the bridge's upstream after both.
        async with bridge.running() if bridge else contextlib.nullcontext(), mcp.running():
            try:
                yield
            finally:
                if rereading:
                    asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
                await gateway.shutdown()
                if webhooks is not None:  # after the shutdown, whose question.rejected events go too
                    await webhooks.stop(grace=WEBHOOK_GRACE)

    handlers = {
        HTTPException: _http_error,
        **exception_handlers(ROUTES.role_of),  # the gateway's refusals (StoreUnavailable: 503)
        ClientDisconnect: _client_gone,
        Exception: _server_error,
    }
    app = Starlette(
        routes=ROUTES.routes(bridge.handlers if bridge else None),
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers=handlers,
    )
    # Innermost: a round trip's requests go to their endpoints from here, past the router.
    app.user_middleware.append(
        Middleware(FirstRoutes, routes=app.routes, router=app.router, exception_handlers=handlers)
    )
    app.state.gateway = gateway
    app.state.settings = settings
    app.state.people = people
    app.state.link_secret = link_secret(settings)
    gateway.people = people
    app.state.bridge = bridge
    app.state.mcp = mcp
    app.state.openapi_document = functools.partial(openapi_document, settings)
    return app
