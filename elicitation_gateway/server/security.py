"""Who may do what: tools ask, answerers answer, and neither's secret opens the other's door.

- Tool side (``/elicit``, ``/elicitations``, ``/mcp``): ``Authorization: Bearer <GATEWAY_TOOL_TOKEN>``
  when that setting is set.
- Answerer side (everything else but health, metrics and the API document): HTTP Basic with
  ``OPENCODE_SERVER_USERNAME`` / ``OPENCODE_SERVER_PASSWORD`` when the password is set, as the OpenCode
  server does it, or ``?auth_token=<base64 user:pass>`` for browsers' EventSource, which cannot send
  headers.

Web pages on other origins may call it as OpenCode allows them (CORS): local pages on any port, and
``GATEWAY_CORS_ORIGINS``.

Written as plain ASGI middleware, one pass over the request for both: Starlette's
``BaseHTTPMiddleware`` misbehaves with streams, and a request without an ``Origin`` (every tool and
answerer but a browser) skips the CORS machinery.
"""

import base64
import binascii
import hmac
import ipaddress
import json
import logging
from typing import Literal
from urllib.parse import parse_qs

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from elicitation_gateway.settings import Settings

logger = logging.getLogger(__name__)

Role = Literal["tool", "answerer", "public"]

PUBLIC_PATHS = frozenset({"/global/health", "/healthz", "/livez", "/metrics", "/doc", "/readyz"})
BASIC_REALM = 'Basic realm="Secure Area"'


def role_of(path: str) -> Role:
    if path in PUBLIC_PATHS:
        return "public"
    if path in ("/elicit", "/elicitations", "/mcp") or path.startswith(("/elicitations/", "/mcp/")):
        return "tool"
    return "answerer"


def same_secret(given: str, expected: str) -> bool:
    """Compare in constant time, so a wrong guess says nothing about how close it was."""
    return hmac.compare_digest(given.encode(), expected.encode())


LOCAL_ORIGINS = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]+)?"
VARY_ORIGIN = (b"vary", b"Origin")


class AccessControl:
    """Credentials checked where a side has them; for a browser's request, CORS around that."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.tool_token = settings.tool_token.get_secret_value() if settings.tool_token else None
        self.username = settings.answerer_username
        self.password = settings.answerer_password.get_secret_value() if settings.answerer_password else None
        wildcard = "*" in settings.cors_origins
        self.cors = CORSMiddleware(
            self._checked,
            allow_origins=settings.cors_origins,
            allow_origin_regex=LOCAL_ORIGINS,
            allow_credentials=not wildcard,  # "*" never with credentials
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID", "x-opencode-directory"],
            expose_headers=["Location"],
            max_age=600,
        )

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
        if scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        role = role_of(scope["path"])
        if role == "tool" and self.tool_token is not None and not self._tool_allowed(scope):
            await _refuse(send, "Bearer", "this route needs the tool token: Authorization: Bearer <token>")
            return
        if role == "answerer" and self.password is not None and not self._answerer_allowed(scope):
            await _refuse(send, BASIC_REALM, "this route needs the answerer's HTTP Basic credentials")
            return
        await self.app(scope, receive, send)

    def _tool_allowed(self, scope: Scope) -> bool:
        scheme, _, token = Headers(scope=scope).get("authorization", "").partition(" ")
        assert self.tool_token is not None
        return scheme.lower() == "bearer" and same_secret(token.strip(), self.tool_token)

    def _answerer_allowed(self, scope: Scope) -> bool:
        scheme, _, encoded = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            encoded = (query.get("auth_token") or [""])[0]
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return False
        username, separator, password = decoded.partition(":")
        assert self.password is not None
        # Both compared, always: the time taken does not tell which one was wrong.
        user_ok = same_secret(username, self.username)
        password_ok = same_secret(password, self.password)
        return bool(separator) and user_ok and password_ok


async def _refuse(send: Send, challenge: str, message: str) -> None:
    body = json.dumps({"error": "unauthorized", "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", challenge.encode()),
            ],
        }
    )
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
