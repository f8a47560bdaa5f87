"""Who may do what: tools ask, answerers answer, neither's secret opens the other's door, and no web
page but the gateway's own (and those the operator allows) steers it.

- Every request names a host the gateway serves (:class:`AllowedHosts`): ``localhost``, names under
  ``.localhost``, IP addresses, and ``GATEWAY_ALLOWED_HOSTS``; any other ``Host`` is ``421``. A page
  that DNS rebinding points at the gateway always sends its own domain name there.
- A browser's request that changes something (``POST``, ``PUT``, ``PATCH``, ``DELETE``; on ``/mcp``
  every request, as MCP requires) comes from the gateway's own page or an allowed origin, by
  ``Sec-Fetch-Site`` or else ``Origin``; any other is ``403``. Forms and ``text/plain`` posts need no
  CORS preflight, so CORS alone would not stop them.
- Tool side (``/elicit``, ``/elicitations``, ``/mcp``): ``Authorization: Bearer <GATEWAY_TOOL_TOKEN>``
  when that setting is set.
- Answerer side (everything else but health, metrics and the API document): HTTP Basic with
  ``OPENCODE_SERVER_USERNAME`` / ``OPENCODE_SERVER_PASSWORD`` when the password is set, as the OpenCode
  server does it, or ``?auth_token=<base64 user:pass>`` for browsers' EventSource, which cannot send
  headers. Anything malformed there is a ``401``, like a wrong secret.
- The routes that take JSON take only a JSON ``Content-Type``: ``415``.

Which route is whose, and which takes JSON, is the route table's to say (:mod:`.routes.table`): each
check asks it (:class:`RouteRules`).

Web pages on other origins may read as OpenCode allows them (CORS): local pages on any port, and
``GATEWAY_CORS_ORIGINS``.

Written as plain ASGI middleware, one pass over the request for all of it: Starlette's
``BaseHTTPMiddleware`` misbehaves with streams, and a request without an ``Origin`` (every tool and
answerer but a browser) skips the CORS machinery.
"""

import base64
import hmac
import ipaddress
import logging
import re
from collections.abc import Iterable
from typing import Literal, Protocol
from urllib.parse import parse_qs, urlsplit

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicitation_gateway.encoding import dumps, to_utf8
from elicitation_gateway.server.errors import bad_request, tool_error
from elicitation_gateway.settings import Settings

logger = logging.getLogger(__name__)

Role = Literal["tool", "answerer", "public"]
BodyRule = Literal["json", "json_or_empty"]

BASIC_REALM = 'Basic realm="Secure Area"'
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class RouteRules(Protocol):
    """What the checks ask of a request's route: the route table (:class:`.routes.table.RouteTable`)."""

    def role_of(self, path: str) -> Role:
        """Whose credentials open ``path``."""
        ...

    def body_rule(self, method: str, path: str) -> BodyRule | None:
        """Whether the route takes a JSON body only (any other type is ``415``), or JSON or nothing."""
        ...

    def origin_checked(self, method: str, path: str) -> bool:
        """Whether a browser's request must come from an allowed origin."""
        ...


JSON_MEDIA_TYPE = re.compile(r"application/(?:[^\s/;+]+\+)?json", re.IGNORECASE)


def is_json(content_type: str) -> bool:
    """``application/json`` or ``application/<anything>+json``, with any parameters (a charset)."""
    return JSON_MEDIA_TYPE.fullmatch(content_type.split(";", 1)[0].strip()) is not None


def same_secret(given: str, expected: str) -> bool:
    """Compare in constant time, so a wrong guess says nothing about how close it was."""
    return hmac.compare_digest(given.encode(), expected.encode())


# ---------------------------------------------------------------------------------------------------
# Hosts and origins

HOST_HEADER = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::[0-9]*)?")


def host_name(host: str) -> str | None:
    """The name a ``Host`` header gives, lower-case, without its port or final dot; None if it is
    not a host name at all."""
    match = HOST_HEADER.fullmatch(host)
    if match is None:
        return None
    return match.group(1).lower().removesuffix(".")


def is_ip_literal(name: str) -> bool:
    try:
        if name.startswith("[") and name.endswith("]"):
            return ipaddress.ip_address(name[1:-1]).version == 6
        return ipaddress.ip_address(name).version == 4
    except ValueError:
        return False


class AllowedHosts:
    """The hosts the gateway answers to: loopback names and IP addresses always (a DNS-rebinding page
    always uses a domain name), and the operator's names (exact, ``*.example.com`` or ``*``)."""

    def __init__(self, names: Iterable[str]) -> None:
        names = [name.lower().removesuffix(".") for name in names]
        self.any = "*" in names
        self.exact = frozenset(name for name in names if not name.startswith("*"))
        self.suffixes = tuple(name[1:] for name in names if name.startswith("*."))

    def __contains__(self, name: str) -> bool:
        """``name`` as :func:`host_name` gives it."""
        if name == "localhost" or name.endswith(".localhost") or is_ip_literal(name):
            return True
        return bool(name) and (self.any or name in self.exact or name.endswith(self.suffixes))


ORIGIN = re.compile(r"(https?)://([^/?#\s@]+)", re.IGNORECASE)
DEFAULT_PORTS = {"http": ":80", "https": ":443"}


def same_origin(origin: str, host: str) -> bool:
    """Whether a page on ``origin`` is served by this ``Host``: the same name and port."""
    match = ORIGIN.fullmatch(origin)
    if match is None:
        return False
    default_port = DEFAULT_PORTS[match.group(1).lower()]
    return match.group(2).lower().removesuffix(default_port) == host.lower().removesuffix(default_port)


def origin_key(origin: str) -> str | None:
    """``scheme://host[:port]`` lower-case and without a default port, for comparing origins."""
    match = ORIGIN.fullmatch(origin)
    if match is None:
        return None
    scheme = match.group(1).lower()
    return f"{scheme}://{match.group(2).lower().removesuffix(DEFAULT_PORTS[scheme])}"


LOCAL_ORIGINS = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]+)?"
VARY_ORIGIN = (b"vary", b"Origin")
SHOWN = 200
"""Characters of a refused ``Host`` or ``Origin`` a refusal repeats."""
HOSTS_REMEMBERED = 256
"""``Host`` values whose verdict is kept; past that many (made-up ones) the memory starts afresh."""


# ---------------------------------------------------------------------------------------------------
# The middleware


class BrowserGuard:
    """The hosts the gateway serves (421 otherwise) and the origins a browser's change may come from
    (403 otherwise), for every request. The outermost layer but tracing: in bridge mode the requests it
    forwards to OpenCode are checked too."""

    def __init__(self, app: ASGIApp, settings: Settings, routes: RouteRules) -> None:
        self.app = app
        self.routes = routes
        # The public URL is the gateway's own address: its host is served, a page from it is its own.
        public = settings.public_url
        public_host = urlsplit(public).hostname if public else None
        self.hosts = AllowedHosts([*settings.allowed_hosts, *([public_host] if public_host else [])])
        self.own_origin = origin_key("/".join(public.split("/")[:3])) if public else None
        self._served: dict[str, bool] = {}
        self._cors_origins = cors_middleware(app, settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.decode("latin-1")
                break
        if host is not None and not self._serves(host):
            await _refuse(send, 421, "host_not_allowed", _foreign_host(host))
            return
        method = scope["method"]
        if method != "OPTIONS" and self.routes.origin_checked(method, scope["path"]):
            foreign = self._foreign_origin(Headers(scope=scope))
            if foreign is not None:
                await _refuse(send, 403, "cross_origin", _cross_origin(foreign))
                return
        await self.app(scope, receive, send)

    def _serves(self, host: str) -> bool:
        """Remembered per ``Host`` value: nearly every request names one of a few."""
        served = self._served.get(host)
        if served is None:
            if len(self._served) >= HOSTS_REMEMBERED:
                self._served.clear()
            name = host_name(host)
            served = self._served[host] = name is not None and name in self.hosts
        return served

    def _foreign_origin(self, headers: Headers) -> str | None:
        """The origin a browser's request comes from when that is not one allowed to change anything
        here; None for the gateway's own pages, allowed origins, and clients that are not browsers."""
        site = headers.get("sec-fetch-site")
        origin = headers.get("origin")
        if site is None and origin is None:  # tools, curl, SDKs: not a browser
            return None
        if site in ("same-origin", "none"):  # "none": the person's own action (typed, bookmarked)
            return None
        if origin is None:
            return f"(none; Sec-Fetch-Site: {site})"
        if origin == "null":  # sandboxed frames, files, privacy-stripped requests: nobody to allow
            return origin
        if site is None and same_origin(origin, headers.get("host", "")):
            return None
        if self.own_origin is not None and origin_key(origin) == self.own_origin:
            return None
        if self._cors_origins.is_allowed_origin(origin):
            return None
        return origin


def cors_middleware(app: ASGIApp, settings: Settings) -> CORSMiddleware:
    """What web pages on other origins may call, as OpenCode allows them: local pages on any port, and
    ``GATEWAY_CORS_ORIGINS``."""
    wildcard = "*" in settings.cors_origins
    return CORSMiddleware(
        app,
        allow_origins=settings.cors_origins,
        allow_origin_regex=LOCAL_ORIGINS,
        allow_credentials=not wildcard,  # "*" never with credentials
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["Authorization", "Content-Type", "Last-Event-ID", "x-opencode-directory"],
        expose_headers=["Location"],
        max_age=600,
    )


class AccessControl:
    """Credentials and body type checked where they apply; for a browser's request, CORS around that
    (:class:`BrowserGuard` has already checked its host and origin)."""

    def __init__(self, app: ASGIApp, settings: Settings, routes: RouteRules) -> None:
        self.app = app
        self.routes = routes
        self.tool_token = settings.tool_token.get_secret_value() if settings.tool_token else None
        self.username = settings.answerer_username
        self.password = settings.answerer_password.get_secret_value() if settings.answerer_password else None
        self.cors = cors_middleware(self._checked, settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if any(name == b"origin" for name, _ in scope["headers"]):
            await self.cors(scope, receive, send)
            return

        async def varying(message: Message) -> None:
            """Every response depends on the Origin it was asked with: caches must keep them apart."""
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), VARY_ORIGIN]
            await send(message)

        await self._checked(scope, receive, varying)

    async def _checked(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope["method"], scope["path"]
        if method == "OPTIONS":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        role = self.routes.role_of(path)
        if role == "tool" and self.tool_token is not None and not self._tool_allowed(headers):
            message = "this route needs the tool token: Authorization: Bearer <token>"
            await _refuse(send, 401, "unauthorized", message, challenge="Bearer")
            return
        if role == "answerer" and self.password is not None and not self._answerer_allowed(scope, headers):
            message = "this route needs the answerer's HTTP Basic credentials"
            await _refuse(send, 401, "unauthorized", message, challenge=BASIC_REALM)
            return
        rule = self.routes.body_rule(method, path)
        if rule is not None and not is_json(content_type := headers.get("content-type", "")):
            receive, empty = await _peek_empty(receive) if rule == "json_or_empty" else (receive, False)
            if not empty:
                await _unsupported(role, content_type)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _tool_allowed(self, headers: Headers) -> bool:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        assert self.tool_token is not None
        return scheme.lower() == "bearer" and same_secret(token.strip(), self.tool_token)

    def _answerer_allowed(self, scope: Scope, headers: Headers) -> bool:
        scheme, _, encoded = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            encoded = (query.get("auth_token") or [""])[0]
        try:
            decoded = base64.b64decode(encoded.strip().encode("ascii"), validate=True).decode()
        except ValueError:  # not ASCII, not base64, not UTF-8: malformed is as wrong as a bad secret
            return False
        username, separator, password = decoded.partition(":")
        assert self.password is not None
        # Both compared, always: the time taken does not tell which one was wrong.
        user_ok = same_secret(username, self.username)
        password_ok = same_secret(password, self.password)
        return bool(separator) and user_ok and password_ok


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


async def _refuse(send: Send, status: int, code: str, message: str, challenge: str | None = None) -> None:
    body = to_utf8(dumps({"error": code, "message": message}))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if challenge is not None:
        headers.append((b"www-authenticate", challenge.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def warn_if_exposed(settings: Settings) -> None:
    """Listening beyond loopback without secrets lets anyone on the network ask or answer."""
    if is_loopback(settings.host):
        return
    open_sides = []
    if settings.tool_token is None:
        open_sides.append("tool side (set GATEWAY_TOOL_TOKEN)")
    if settings.answerer_password is None:
        open_sides.append("answerer side (set OPENCODE_SERVER_PASSWORD)")
    if open_sides:
        logger.warning(
            "listening on %s without authentication on the %s: anyone who can reach it can use it",
            settings.host,
            " and the ".join(open_sides),
        )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
