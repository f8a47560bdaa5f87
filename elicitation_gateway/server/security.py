"""Who may do what: tools ask, answerers answer, neither's secret opens the other's door, and no web
page but the gateway's own (and those the operator allows) steers it.

- Every request names a host the gateway serves (:class:`.origins.AllowedHosts`): ``localhost``, names under
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

The rules are here; the hosts and origins are :mod:`.origins`' (one ``OriginPolicy``), and the layers
that apply them are in :mod:`.middleware`, each check a function there, applied in one pass by
:mod:`.edge`.
"""

import base64
import hmac
import ipaddress
import logging
import re
from typing import Literal, Protocol
from urllib.parse import parse_qs

from starlette.types import Scope

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
    if content_type == "application/json":  # what nearly every client sends
        return True
    return JSON_MEDIA_TYPE.fullmatch(content_type.split(";", 1)[0].strip()) is not None


def same_secret(given: str, expected: str) -> bool:
    """Compare in constant time, so a wrong guess says nothing about how close it was."""
    return hmac.compare_digest(given.encode(), expected.encode())


SHOWN = 200
"""Characters of a refused ``Host``, ``Origin`` or ``Content-Type`` a refusal repeats."""


def tool_allowed(authorization: str, token: str) -> bool:
    """``Authorization: Bearer <token>``; ``authorization``: the request's first such header (``""``
    without one)."""
    scheme, _, given = authorization.partition(" ")
    return scheme.lower() == "bearer" and same_secret(given.strip(), token)


def basic_credentials(scope: Scope, authorization: str) -> tuple[str, str] | None:
    """The username and password of HTTP Basic (``authorization``: the request's first
    ``Authorization``, ``""`` without one), or of the same base64 in ``?auth_token=``; ``None`` when
    there are none, or they are malformed (which is as wrong as a bad secret)."""
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() != "basic":
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        encoded = (query.get("auth_token") or [""])[0]
    try:
        decoded = base64.b64decode(encoded.strip().encode("ascii"), validate=True).decode()
    except ValueError:  # not ASCII, not base64, not UTF-8
        return None
    username, separator, password = decoded.partition(":")
    return (username, password) if separator else None


def answerer_allowed(given: tuple[str, str] | None, username: str, password: str) -> bool:
    """Whether ``given`` are the shared answerer's credentials."""
    given_username, given_password = given or ("", "")
    # Both compared, always: the time taken does not tell which one was wrong.
    user_ok = same_secret(given_username, username)
    password_ok = same_secret(given_password, password)
    return given is not None and user_ok and password_ok


def warn_if_exposed(settings: Settings) -> None:
    """Listening beyond loopback without secrets lets anyone on the network ask or answer."""
    if is_loopback(settings.host):
        return
    open_sides = []
    if settings.tool_token is None:
        open_sides.append("tool side (set GATEWAY_TOOL_TOKEN)")
    if settings.answerer_password is None and settings.people is None:
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
