"""A request's URL as text: UTF-8 once percent-decoded, before any route reads it."""

from starlette.types import ASGIApp, Receive, Scope, Send

from elicitation_gateway import encoding
from elicitation_gateway.server.errors import bad_request, tool_error
from elicitation_gateway.server.security import RouteRules


async def url_refused(routes: RouteRules, scope: Scope, receive: Receive, send: Send) -> bool:
    """Whether the request's path or a query parameter is not UTF-8 once percent-decoded: a 400
    naming it sent, before any route reads it (Starlette would hand routes replacement characters)."""
    try:
        encoding.check_url_text(scope.get("raw_path") or b"", scope.get("query_string", b""))
    except encoding.InvalidText as error:
        if routes.role_of(scope["path"]) == "tool":
            response = tool_error(400, "invalid_text", error.message)
        else:
            response = bad_request(error.message, "Params")
        await response(scope, receive, send)
        return True
    return False


class UrlTextCheck:
    """:func:`url_refused` as an ASGI layer of its own (the app's edge,
    :class:`~elicitation_gateway.server.edge.Edge`, applies it in its one pass)."""

    def __init__(self, app: ASGIApp, routes: RouteRules) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and await url_refused(self.routes, scope, receive, send):
            return
        await self.app(scope, receive, send)
