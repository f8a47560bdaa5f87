"""Credentials and body types, where the route table says they apply."""

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicitation_gateway.people import PeopleFile
from elicitation_gateway.server.errors import bad_request, send_error, tool_error
from elicitation_gateway.server.security import (
    BASIC_REALM,
    SHOWN,
    Role,
    RouteRules,
    answerer_allowed,
    basic_credentials,
    is_json,
    tool_allowed,
)
from elicitation_gateway.settings import Settings

BASIC_CHALLENGE = BASIC_REALM.encode()


class AccessRules:
    """The tool token on the tool side; on the answerer side a person's login (``GATEWAY_PEOPLE``) or
    the shared password (``401``); and a JSON ``Content-Type`` on the routes that take JSON (``415``).
    A preflight (``OPTIONS``) passes: CORS has answered it.

    Who signed in is left in the request's state as ``person``: their name, or ``None`` for the shared
    login."""

    def __init__(self, settings: Settings, routes: RouteRules, people: PeopleFile | None = None) -> None:
        self.routes = routes
        self.tool_token = settings.tool_token.get_secret_value() if settings.tool_token else None
        self.username = settings.answerer_username
        self.password = settings.answerer_password.get_secret_value() if settings.answerer_password else None
        self.people = people

    async def admitted(
        self, scope: Scope, receive: Receive, send: Send, authorization: str, content_type: str
    ) -> Receive | None:
        """The ``receive`` the route reads its body from, or ``None`` once a refusal is sent.
        ``authorization`` and ``content_type``: the request's first such headers (``""`` without)."""
        method, path = scope["method"], scope["path"]
        if method == "OPTIONS":
            return receive
        role = self.routes.role_of(path)
        if (
            role == "tool"
            and self.tool_token is not None
            and not tool_allowed(authorization, self.tool_token)
        ):
            message = "this route needs the tool token: Authorization: Bearer <token>"
            await send_error(send, 401, "unauthorized", message, [(b"www-authenticate", b"Bearer")])
            return None
        if role == "answerer" and (self.password is not None or self.people is not None):
            signed_in, person = await self._answerer(scope, authorization)
            if not signed_in:
                message = "this route needs the answerer's HTTP Basic credentials"
                await send_error(send, 401, "unauthorized", message, [(b"www-authenticate", BASIC_CHALLENGE)])
                return None
            scope.setdefault("state", {})["person"] = person
        rule = self.routes.body_rule(method, path)
        if rule is not None and not is_json(content_type):
            receive, empty = await _peek_empty(receive) if rule == "json_or_empty" else (receive, False)
            if not empty:
                await _unsupported(role, content_type)(scope, receive, send)
                return None
        return receive

    async def _answerer(self, scope: Scope, authorization: str) -> tuple[bool, str | None]:
        """Whether the credentials open the answerer side, and whose they are (``None``: shared)."""
        given = basic_credentials(scope, authorization)
        if self.people is not None and given is not None:
            people = self.people.current
            person = people.login_at_once(*given)
            if person is None and given[0] in people.persons:
                person = await people.login(*given)
            if person is not None:
                return True, person.name
        if self.password is not None and answerer_allowed(given, self.username, self.password):
            return True, None
        return False, None


class AccessControl:
    """:class:`AccessRules` as an ASGI layer of its own (the app's edge,
    :class:`~elicitation_gateway.server.edge.Edge`, applies them in its one pass)."""

    def __init__(
        self, app: ASGIApp, settings: Settings, routes: RouteRules, people: PeopleFile | None = None
    ) -> None:
        self.app = app
        self.rules = AccessRules(settings, routes, people)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        admitted = await self.rules.admitted(
            scope, receive, send, headers.get("authorization", ""), _content_type(scope)
        )
        if admitted is not None:
            await self.app(scope, admitted, send)


def _content_type(scope: Scope) -> str:
    """The request's first ``Content-Type``, as ``Headers.get`` reads it; ``""`` without one."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.decode("latin-1")
    return ""


async def _peek_empty(receive: Receive) -> tuple[Receive, bool]:
    """Whether the body is empty, reading no further than its first bytes; and a ``receive`` that
    gives the route what was read."""
    read: list[Message] = []
    empty = True
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            break
        if message.get("body"):
            empty = False
            break
        if not message.get("more_body", False):
            break

    async def replay() -> Message:
        return read.pop(0) if read else await receive()

    return replay, empty


def _unsupported(role: Role, content_type: str) -> ASGIApp:
    """``415`` in the shape of the route's other refusals: OpenCode's on the answerer side."""
    given = f"Content-Type {content_type[:SHOWN]!r}" if content_type else "no Content-Type"
    message = f"the body must be JSON, sent with Content-Type: application/json ({given} was sent)"
    if role == "answerer":
        return bad_request(message, "Payload", status=415)
    return tool_error(415, "unsupported_media_type", message)
