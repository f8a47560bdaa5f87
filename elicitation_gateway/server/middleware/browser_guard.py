"""The hosts the gateway serves and the origins a browser's change may come from."""

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from elicitation_gateway.server.errors import send_error
from elicitation_gateway.server.origins import OriginPolicy
from elicitation_gateway.server.security import SHOWN, RouteRules


async def guard_refused(
    policy: OriginPolicy, routes: RouteRules, scope: Scope, send: Send, host: str | None, browser: bool
) -> bool:
    """Whether the request was refused here, its refusal sent: a ``Host`` the gateway does not serve
    (421), or a browser's request from an origin that may not make it (403). ``host``: the request's
    first ``Host``; ``browser``: whether it has an ``Origin`` or a ``Sec-Fetch-Site``."""
    if host is not None and not policy.serves(host):
        await send_error(send, 421, "host_not_allowed", _foreign_host(host))
        return True
    method = scope["method"]
    # A request with neither Origin nor Sec-Fetch-Site comes from no browser: no origin to judge.
    if browser and method != "OPTIONS" and routes.origin_checked(method, scope["path"]):
        foreign = policy.foreign_origin(Headers(scope=scope))
        if foreign is not None:
            await send_error(send, 403, "cross_origin", _cross_origin(foreign))
            return True
    return False


class BrowserGuard:
    """The hosts the gateway serves (421 otherwise) and the origins a browser's change may come from
    (403 otherwise), for every request: the layer of its own in bridge mode, outermost but tracing, so
    that the requests it forwards to OpenCode are checked too (without the bridge,
    :class:`~elicitation_gateway.server.edge.Edge` makes the same checks)."""

    def __init__(self, app: ASGIApp, policy: OriginPolicy, routes: RouteRules) -> None:
        self.app = app
        self.policy = policy
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = None
        browser = False  # whether the request says where it comes from, as browsers' requests do
        for name, value in scope["headers"]:
            if name == b"host":
                if host is None:
                    host = value.decode("latin-1")
            elif name == b"origin" or name == b"sec-fetch-site":
                browser = True
        if await guard_refused(self.policy, self.routes, scope, send, host, browser):
            return
        await self.app(scope, receive, send)


def _foreign_host(host: str) -> str:
    return (
        f"this gateway does not serve the host {host[:SHOWN]!r}: it answers to localhost, IP addresses "
        "and the names in GATEWAY_ALLOWED_HOSTS (set it to the name clients use, e.g. behind a proxy)"
    )


def _cross_origin(origin: str) -> str:
    return (
        f"a page on {origin[:SHOWN]!r} may not change anything here: only the gateway's own page, local "
        "pages (localhost, 127.0.0.1, [::1]) and the origins in GATEWAY_CORS_ORIGINS may"
    )
