"""The one origin policy: which hosts the gateway serves, which web pages are its own or allowed, and
which CORS headers a browser is given. :class:`OriginPolicy` is built once from the settings by the
app factory, and every check that asks one of these questions asks it.

- Hosts: ``localhost``, names under ``.localhost`` and IP addresses always (a page that DNS rebinding
  points at the gateway always sends its own domain name), and ``GATEWAY_ALLOWED_HOSTS`` and the host
  of ``GATEWAY_PUBLIC_URL``.
- Origins allowed to read (CORS) and to change anything: local pages on any port (``localhost``,
  ``127.0.0.1``, ``[::1]``), and ``GATEWAY_CORS_ORIGINS`` (``*``: any, then without credentials).
  A page is also the gateway's own when its origin is the request's ``Host``, or the origin of
  ``GATEWAY_PUBLIC_URL``.

Hosts and origins are read with :func:`urllib.parse.urlsplit`, then checked explicitly: ASCII only (a
browser sends a Unicode name as its IDNA ``xn--`` form), no user, path, query or fragment, a port of
digits (any number of them, as written), brackets only around an IPv6 address. Names compare
without case and, for an origin, without its scheme's default port; the origins of
``GATEWAY_CORS_ORIGINS`` and the local pages are taken exactly as browsers write them (lower case).
"""

import ipaddress
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from starlette.datastructures import Headers

from elicitation_gateway.settings import Settings

NAME_CHARACTERS: Final = frozenset(string.ascii_letters + string.digits + "_.-")
"""What a host name is made of (``_`` too: some internal names have one)."""
ADDRESS_CHARACTERS: Final = frozenset(string.hexdigits + ":.")
"""What an IPv6 address in brackets is made of."""
DEFAULT_PORTS: Final = {"http": "80", "https": "443"}
LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "[::1]"})
"""The hosts of local pages, allowed on any port."""

HOSTS_REMEMBERED = 256
"""``Host`` values whose verdict is kept; past that many (made-up ones) the memory starts afresh."""

CORS_METHODS: Final = ("GET", "POST", "DELETE")
CORS_HEADERS: Final = ("Authorization", "Content-Type", "Last-Event-ID", "x-opencode-directory")
SAFELISTED_HEADERS: Final = frozenset({"Accept", "Accept-Language", "Content-Language", "Content-Type"})
"""Request headers every preflight allows, as the Fetch standard lists them."""
CORS_EXPOSED: Final = ("Location",)
CORS_MAX_AGE: Final = 600
PREFLIGHT_VARY: Final = (
    "Origin, Access-Control-Request-Method, Access-Control-Request-Headers, "
    "Access-Control-Request-Private-Network"
)


@dataclass(frozen=True)
class Authority:
    """``host[:port]`` as a ``Host`` header or an origin gives it."""

    host: str
    """Lower-case; an IPv6 address in its brackets; a final dot kept."""
    port: str | None
    """The digits after ``:`` (``""`` for a bare ``:``), None without one."""

    def __str__(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"


def parse_authority(text: str) -> Authority | None:
    """``text`` as ``host[:port]``: a name of letters, digits, ``_``, ``.`` and ``-``, or an IPv6
    address in brackets, and a port of digits; None for anything else (a user, a path, non-ASCII)."""
    if not text.isascii() or "@" in text:
        return None
    try:
        parts = urlsplit("//" + text)
        hostname = parts.hostname
    except ValueError:  # brackets that do not hold an IPv6 address
        return None
    if parts.netloc != text or not hostname:  # a path, a query, characters urlsplit drops
        return None
    bracketed = text.startswith("[")
    host = f"[{hostname}]" if bracketed else hostname
    allowed = ADDRESS_CHARACTERS if bracketed else NAME_CHARACTERS
    if not set(hostname) <= allowed:
        return None
    rest = text[len(host) :]
    if not rest:
        return Authority(host, None)
    port = rest[1:]
    if rest[0] != ":" or not (port == "" or port.isdigit()):
        return None
    return Authority(host, port)


def host_name(host: str) -> str | None:
    """The name a ``Host`` header gives, lower-case, without its port or final dot; None if it is
    not a host name at all."""
    authority = parse_authority(host)
    return None if authority is None else authority.host.removesuffix(".")


def is_ip_literal(name: str) -> bool:
    try:
        if name.startswith("[") and name.endswith("]"):
            return ipaddress.ip_address(name[1:-1]).version == 6
        return ipaddress.ip_address(name).version == 4
    except ValueError:
        return False


@dataclass(frozen=True)
class Origin:
    """An ``http`` or ``https`` origin: ``scheme://host[:port]``."""

    scheme: str
    """Lower-case."""
    authority: Authority

    @classmethod
    def parse(cls, text: str) -> "Origin | None":
        """None for ``null``, other schemes, and anything with a user, path, query or fragment."""
        scheme, separator, rest = text.partition("://")
        scheme = scheme.lower()
        if not separator or scheme not in DEFAULT_PORTS:
            return None
        authority = parse_authority(rest)
        return None if authority is None else cls(scheme, authority)

    def site(self) -> str:
        """``host[:port]`` without the scheme's default port, as a ``Host`` header names it."""
        if self.authority.port == DEFAULT_PORTS[self.scheme]:
            return self.authority.host
        return str(self.authority)

    def key(self) -> str:
        """``scheme://host[:port]`` lower-case and without a default port, for comparing origins."""
        return f"{self.scheme}://{self.site()}"

    def same_site_as(self, host: str) -> bool:
        """Whether this ``Host`` header names this origin's host and port."""
        authority = parse_authority(host)
        if authority is None:
            return False
        default = DEFAULT_PORTS[self.scheme]
        named = authority.host if authority.port == default else str(authority)
        return named == self.site()

    def is_local(self, text: str) -> bool:
        """A local page's origin (``text``, as parsed), on any port, written as browsers write it."""
        return (
            self.authority.host in LOCAL_HOSTS
            and self.authority.port != ""
            and text == f"{self.scheme}://{self.authority}"
        )


def origin_key(origin: str) -> str | None:
    """``scheme://host[:port]`` lower-case and without a default port; None if not an origin."""
    parsed = Origin.parse(origin)
    return None if parsed is None else parsed.key()


def same_origin(origin: str, host: str) -> bool:
    """Whether a page on ``origin`` is served by this ``Host``: the same name and port."""
    parsed = Origin.parse(origin)
    return parsed is not None and parsed.same_site_as(host)


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


class OriginPolicy:
    """Which hosts are served, which pages may change anything, and the CORS headers: one object,
    built from the settings once."""

    def __init__(self, settings: Settings) -> None:
        # The public URL is the gateway's own address: its host is served, a page from it is its own.
        public = settings.public_url
        public_host = urlsplit(public).hostname if public else None
        self.hosts = AllowedHosts([*settings.allowed_hosts, *([public_host] if public_host else [])])
        self.own_origin = origin_key("/".join(public.split("/")[:3])) if public else None
        self._served: dict[str, bool] = {}
        self.cors_origins = frozenset(settings.cors_origins)
        self.any_origin = "*" in self.cors_origins
        self.credentials = not self.any_origin  # "*" never with credentials
        self.allowed_request_headers = frozenset(
            name.lower() for name in SAFELISTED_HEADERS.union(CORS_HEADERS)
        )
        self.simple_headers = self._simple_headers()
        self.preflight_headers = self._preflight_headers()

    # -- hosts and origins -------------------------------------------------------------------------

    def serves(self, host: str) -> bool:
        """Whether a request naming this ``Host`` is the gateway's to answer. Remembered per ``Host``
        value: nearly every request names one of a few."""
        served = self._served.get(host)
        if served is None:
            if len(self._served) >= HOSTS_REMEMBERED:
                self._served.clear()
            name = host_name(host)
            served = self._served[host] = name is not None and name in self.hosts
        return served

    def allows(self, origin: str) -> bool:
        """Whether a page on ``origin`` may read the gateway's answers (CORS) and change anything."""
        if self.any_origin or origin in self.cors_origins:
            return True
        parsed = Origin.parse(origin)
        return parsed is not None and parsed.is_local(origin)

    def foreign_origin(self, headers: Headers) -> str | None:
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
        if self.allows(origin):
            return None
        return origin

    # -- CORS ----------------------------------------------------------------------------------------

    def _simple_headers(self) -> dict[str, str]:
        headers = {}
        if self.any_origin:
            headers["Access-Control-Allow-Origin"] = "*"
        if self.credentials:
            headers["Access-Control-Allow-Credentials"] = "true"
        headers["Access-Control-Expose-Headers"] = ", ".join(CORS_EXPOSED)
        return headers

    def _preflight_headers(self) -> dict[str, str]:
        headers = {"Vary": PREFLIGHT_VARY}
        if not self.credentials:  # any origin, without credentials: "*" needs no Origin echoed
            headers["Access-Control-Allow-Origin"] = "*"
        headers["Access-Control-Allow-Methods"] = ", ".join(CORS_METHODS)
        headers["Access-Control-Max-Age"] = str(CORS_MAX_AGE)
        headers["Access-Control-Allow-Headers"] = ", ".join(sorted(SAFELISTED_HEADERS.union(CORS_HEADERS)))
        if self.credentials:
            headers["Access-Control-Allow-Credentials"] = "true"
        return headers

    def preflight(self, headers: Headers) -> tuple[list[str], dict[str, str]]:
        """A preflight's verdict: what it asks that is refused (``origin``, ``method``, ``headers``,
        ``private-network``; none: allowed), and the headers of its answer either way."""
        origin = headers["origin"]
        answer = dict(self.preflight_headers)
        refused = []
        if self.allows(origin):
            if self.credentials:
                answer["Access-Control-Allow-Origin"] = origin
        else:
            refused.append("origin")
        if headers["access-control-request-method"] not in CORS_METHODS:
            refused.append("method")
        requested = headers.get("access-control-request-headers")
        if requested is not None and any(
            name.lower().strip() not in self.allowed_request_headers for name in requested.split(",")
        ):
            refused.append("headers")
        if headers.get("access-control-request-private-network") is not None:
            refused.append("private-network")
        return refused, answer

    def echoes(self, origin: str) -> bool:
        """Whether a response to a page on ``origin`` names it in ``Access-Control-Allow-Origin`` (with
        ``*`` allowed, it says ``*`` instead)."""
        return not self.any_origin and self.allows(origin)
