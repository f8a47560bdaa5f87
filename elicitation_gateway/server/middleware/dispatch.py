"""Bridge mode's outermost layer but the browser guard: who answers each request."""

from starlette.types import ASGIApp, Receive, Scope, Send

from elicitation_gateway.server.bridge import PREFIX, Bridge, owner
from elicitation_gateway.server.bridge.merged import OWN
from elicitation_gateway.server.bridge.upstream import pass_through
from elicitation_gateway.server.routes.table import Owner
from elicitation_gateway.stores.base import StoreUnavailable


class Dispatch:
    """The outermost ASGI layer in bridge mode: the gateway's requests go on into the app (its CORS,
    access control and routes), the rest to the upstream as they are."""

    def __init__(self, app: ASGIApp, bridge: Bridge) -> None:
        self.app = app
        self.bridge = bridge

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            # OpenCode's terminal (/pty/{id}/connect) is a WebSocket; httpx does not proxy those.
            await send({"type": "websocket.close", "code": 1011, "reason": "not proxied by the gateway"})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        match owner(scope["method"], path):
            case Owner.GATEWAY:
                await self.app(scope, receive, send)
            case Owner.PREFIXED:
                await self._own(scope, receive, send)
            case Owner.BY_ID:
                try:
                    mine = await self.bridge.gateway.knows(path.split("/")[2])
                except StoreUnavailable:
                    mine = True  # the gateway's route answers 503 and the client retries
                if mine:
                    await self.app(scope, receive, send)
                else:
                    await pass_through(self.bridge.upstream, scope, receive, send)
            case Owner.UPSTREAM:
                await pass_through(self.bridge.upstream, scope, receive, send)

    async def _own(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if path == PREFIX:  # the page's links are relative: it must be loaded as /gateway/
            query = scope.get("query_string", b"")
            location = PREFIX + "/" + ("?" + query.decode("latin-1") if query else "")
            await send(
                {
                    "type": "http.response.start",
                    "status": 308,
                    "headers": [(b"location", location.encode("latin-1")), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        inner = dict(scope)
        inner["path"] = path[len(PREFIX) :]
        raw_path = scope.get("raw_path")
        if raw_path is not None and raw_path.startswith(PREFIX.encode()):
            inner["raw_path"] = raw_path[len(PREFIX) :]
        inner[OWN] = True
        await self.app(inner, receive, send)
