"""CORS: what web pages on other origins may read, as the origin policy says (as OpenCode allows them:
local pages on any port, and ``GATEWAY_CORS_ORIGINS``)."""

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicitation_gateway.server.errors import preflight_refused
from elicitation_gateway.server.origins import OriginPolicy

VARY_ORIGIN = (b"vary", b"Origin")


def varying(send: Send) -> Send:
    """``send`` with ``Vary: Origin`` added to the response's head: every response depends on the
    Origin it was asked with, so caches must keep them apart. For a request without an ``Origin``."""

    async def varying_send(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), VARY_ORIGIN]
        await send(message)

    return varying_send


async def answered_preflight(policy: OriginPolicy, scope: Scope, receive: Receive, send: Send) -> bool:
    """For a request with an ``Origin``: whether it was a preflight, answered here (allowed, or
    ``400``)."""
    if scope["method"] != "OPTIONS":
        return False
    headers = Headers(scope=scope)
    if "access-control-request-method" not in headers:
        return False
    refused, answer = policy.preflight(headers)
    if refused:
        await preflight_refused(refused, answer)(scope, receive, send)
    else:
        await PlainTextResponse("OK", headers=answer)(scope, receive, send)
    return True


def allowing(policy: OriginPolicy, scope: Scope, send: Send) -> Send:
    """``send`` with the CORS headers the request's ``Origin`` is allowed, and ``Vary: Origin``, added
    to the response's head. For a request with an ``Origin`` that is not a preflight."""
    origin = Headers(scope=scope)["origin"]

    async def allowed(message: Message) -> None:
        if message["type"] == "http.response.start":
            message.setdefault("headers", [])
            returned = MutableHeaders(scope=message)
            returned.update(policy.simple_headers)
            if policy.echoes(origin):
                returned["Access-Control-Allow-Origin"] = origin
            returned["Vary"] = ", ".join([*returned.getlist("Vary"), "Origin"])
        await send(message)

    return allowed


class Cors:
    """A browser's preflight answered here; every other response gets the CORS headers its origin is
    allowed, and ``Vary: Origin``. A request without an ``Origin`` (every tool and answerer but a
    browser) skips the CORS machinery. The app's edge (:class:`~elicitation_gateway.server.edge.Edge`)
    does the same with these functions; this layer is them alone."""

    def __init__(self, app: ASGIApp, policy: OriginPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, _ in scope["headers"]:
            if name == b"origin":
                break
        else:  # no Origin
            await self.app(scope, receive, varying(send))
            return
        if await answered_preflight(self.policy, scope, receive, send):
            return
        await self.app(scope, receive, allowing(self.policy, scope, send))
