"""CORS: what web pages on other origins may read, as the origin policy says (as OpenCode allows them:
local pages on any port, and ``GATEWAY_CORS_ORIGINS``)."""

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicitation_gateway.server.errors import preflight_refused
from elicitation_gateway.server.origins import OriginPolicy

VARY_ORIGIN = (b"vary", b"Origin")


class Cors:
    """A browser's preflight answered here; every other response gets the CORS headers its origin is
    allowed, and ``Vary: Origin``. A request without an ``Origin`` (every tool and answerer but a
    browser) skips the CORS machinery."""

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

            async def varying(message: Message) -> None:
                """Every response depends on the Origin it was asked with: caches must keep them apart."""
                if message["type"] == "http.response.start":
                    message["headers"] = [*message.get("headers", ()), VARY_ORIGIN]
                await send(message)

            await self.app(scope, receive, varying)
            return
        headers = Headers(scope=scope)
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            refused, answer = self.policy.preflight(headers)
            if refused:
                await preflight_refused(refused, answer)(scope, receive, send)
            else:
                await PlainTextResponse("OK", headers=answer)(scope, receive, send)
            return
        origin = headers["origin"]
        policy = self.policy

        async def allowed(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                returned = MutableHeaders(scope=message)
                returned.update(policy.simple_headers)
                if policy.echoes(origin):
                    returned["Access-Control-Allow-Origin"] = origin
                returned["Vary"] = ", ".join([*returned.getlist("Vary"), "Origin"])
            await send(message)

        await self.app(scope, receive, allowed)
