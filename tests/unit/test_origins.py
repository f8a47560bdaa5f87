"""The origin policy (:mod:`elicitation_gateway.server.origins`) against what it replaced: the regular
expressions that read hosts and origins before, and Starlette's ``CORSMiddleware`` configured as the
gateway configured it. Each generated host, origin and preflight must get the same verdict and the
same response, byte for byte, but where the policy is stricter on purpose (named in each test)."""

import asyncio
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from starlette.middleware.cors import CORSMiddleware

from elicitation_gateway.encoding import dumps, to_utf8
from elicitation_gateway.server.errors import error_body, send_error
from elicitation_gateway.server.middleware.cors import Cors
from elicitation_gateway.server.origins import (
    OriginPolicy,
    host_name,
    is_ip_literal,
    origin_key,
    parse_authority,
    same_origin,
)
from elicitation_gateway.settings import Settings

# ---------------------------------------------------------------------------------------------------
# What the policy replaced, kept as the reference

FORMER_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::[0-9]*)?")
FORMER_ORIGIN = re.compile(r"(https?)://([^/?#\s@]+)", re.IGNORECASE)
FORMER_LOCAL = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]+)?"
FORMER_DEFAULT_PORTS = {"http": ":80", "https": ":443"}


def former_host_name(host: str) -> str | None:
    match = FORMER_HOST.fullmatch(host)
    return None if match is None else match.group(1).lower().removesuffix(".")


def former_origin_key(origin: str) -> str | None:
    match = FORMER_ORIGIN.fullmatch(origin)
    if match is None:
        return None
    scheme = match.group(1).lower()
    return f"{scheme}://{match.group(2).lower().removesuffix(FORMER_DEFAULT_PORTS[scheme])}"


def former_same_origin(origin: str, host: str) -> bool:
    match = FORMER_ORIGIN.fullmatch(origin)
    if match is None:
        return False
    default_port = FORMER_DEFAULT_PORTS[match.group(1).lower()]
    return match.group(2).lower().removesuffix(default_port) == host.lower().removesuffix(default_port)


def former_cors(app: Any, cors_origins: list[str]) -> CORSMiddleware:
    wildcard = "*" in cors_origins
    return CORSMiddleware(
        app,
        allow_origins=cors_origins,
        allow_origin_regex=FORMER_LOCAL,
        allow_credentials=not wildcard,
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["Authorization", "Content-Type", "Last-Event-ID", "x-opencode-directory"],
        expose_headers=["Location"],
        max_age=600,
    )


def bracketed_but_no_ipv6(name: str | None) -> bool:
    """Brackets around what is not an IPv6 address: ``urlsplit`` refuses them, as browsers do."""
    return name is not None and name.startswith("[") and not is_ip_literal(name)


# ---------------------------------------------------------------------------------------------------
# Hosts and origins as text

HOST_PARTS = st.sampled_from(
    [
        "localhost",
        "LocalHost",
        "127.0.0.1",
        "gw.example",
        "a_b",
        "xn--bcher-kva.example",
        "[::1]",
        "[FE80::1]",
        "[1:2]",
        "[127.0.0.1]",
        "[",
        "]",
        ".",
        ":",
        ":80",
        ":443",
        ":4096",
        ":99999",
        ":",
        "@",
        "/",
        "?",
        "#",
        " ",
        "\t",
        "é",
        "\u212a",  # KELVIN SIGN, whose lower case is "k"
        "%41",
        "\\",
    ]
)
HOSTS = st.one_of(st.lists(HOST_PARTS, max_size=4).map("".join), st.text(max_size=12))
SCHEMES = st.sampled_from(["http", "https", "HTTP", "Https", "ftp", "http\u017f", ""])
ORIGINS = st.one_of(
    st.tuples(SCHEMES, st.sampled_from(["://", ":/", "//"]), HOSTS).map("".join),
    st.sampled_from(["null", "", "http://", "https://gw.example/", "http://u@localhost"]),
)


@given(HOSTS)
@example("[1:2]:80")
@example("localhost:99999")
@example("LOCALHOST.:")
def test_a_host_header_reads_as_before(host):
    """The same name for every ``Host``, but brackets around what is not an IPv6 address: no name."""
    former = former_host_name(host)
    if bracketed_but_no_ipv6(former):
        assert host_name(host) is None
    else:
        assert host_name(host) == former


@given(ORIGINS)
@example("HTTPS://GW.Example:443")
@example("http://a:b:c")
@example("http://gw.example:")
@example("http://\u212a.example")
def test_an_origin_compares_as_before(origin):
    """The same key for every origin whose host is a host name or an IPv6 address in brackets; any
    other (non-ASCII, ``a:b:c``, a scheme that is only alike without case) is no origin now."""
    try:
        former = former_origin_key(origin)
    except KeyError:  # "httpſ" matched "https" without case, then had no default port: a crash before
        former = None
    match = FORMER_ORIGIN.fullmatch(origin)
    authority = match.group(2) if match else ""
    if former is not None and (
        former_host_name(authority) is None or bracketed_but_no_ipv6(former_host_name(authority))
    ):
        assert origin_key(origin) is None
    else:
        assert origin_key(origin) == former


@given(ORIGINS, HOSTS)
@example("http://gw.example:80", "gw.example")
@example("https://gw.example", "GW.example:443")
@example("http://gw.example.", "gw.example")
@example("http://\u212a.example", "k.example")
def test_same_origin_as_before_for_every_host_served(origin, host):
    """Compared only for ``Host`` values that name a host (any other is ``421`` first); an origin that
    is not ASCII is never the host's now (the Kelvin sign's lower case was ``k`` before)."""
    if host_name(host) is None:
        return
    try:
        former = former_same_origin(origin, host)
    except KeyError:
        former = False
    if not origin.isascii():
        assert same_origin(origin, host) is False
    else:
        assert same_origin(origin, host) is former


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("localhost", "localhost", None),
        ("LocalHost:4096", "localhost", "4096"),
        ("localhost:", "localhost", ""),
        ("localhost.:80", "localhost.", "80"),
        ("[FE80::1]:80", "[fe80::1]", "80"),
    ],
)
def test_an_authority_keeps_its_port_as_written(text, host, port):
    authority = parse_authority(text)
    assert authority is not None
    assert (authority.host, authority.port) == (host, port)


# ---------------------------------------------------------------------------------------------------
# Which origins are allowed, and the CORS headers

CORS_SETTINGS = [[], ["https://console.example"], ["*"], ["https://Console.example", "*"]]
ALLOWED_LIKE = st.sampled_from(
    [
        "http://localhost:3000",
        "http://localhost",
        "https://127.0.0.1:8443",
        "http://[::1]:4096",
        "http://LOCALHOST:3000",
        "HTTP://localhost:3000",
        "http://localhost:",
        "http://localhost.:3000",
        "http://127.0.0.2:3000",
        "https://console.example",
        "https://Console.example",
        "https://console.example:443",
        "https://evil.example",
        "null",
    ]
)
PREFLIGHT_HEADERS = st.lists(
    st.sampled_from(
        ["Content-Type", "authorization", " Last-Event-ID", "X-OpenCode-Directory", "X-Other", ""]
    ),
    max_size=3,
).map(",".join)


@settings(max_examples=300)
@given(st.sampled_from(CORS_SETTINGS), st.one_of(ALLOWED_LIKE, ORIGINS))
def test_the_allowed_origins_are_those_cors_allowed(cors_origins, origin):
    policy = OriginPolicy(Settings(cors_origins=cors_origins))
    assert policy.allows(origin) is former_cors(None, cors_origins).is_allowed_origin(origin)


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An app that answers with a header of its own and a ``Vary`` that CORS must extend."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"vary", b"Accept-Encoding")],
        }
    )
    await send({"type": "http.response.body", "body": b"{}"})


def _respond(app: Any, method: str, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": "/question", "headers": headers, "query_string": b""}
    asyncio.run(app(scope, receive, send))
    return sent


@settings(max_examples=300, deadline=None)
@given(
    cors_origins=st.sampled_from(CORS_SETTINGS),
    method=st.sampled_from(["GET", "POST", "DELETE", "OPTIONS", "PUT"]),
    origin=st.one_of(ALLOWED_LIKE, ORIGINS.filter(str.isascii)),
    requested_method=st.one_of(st.none(), st.sampled_from(["GET", "POST", "DELETE", "PATCH", "get"])),
    requested_headers=st.one_of(st.none(), PREFLIGHT_HEADERS),
    private_network=st.booleans(),
)
def test_every_cors_response_is_the_one_starlette_gave(
    cors_origins, method, origin, requested_method, requested_headers, private_network
):
    """Preflights (allowed or not) and simple responses: the same status, headers in the same order,
    and the same body as Starlette's ``CORSMiddleware`` configured as the gateway had it."""
    headers = [(b"origin", origin.encode())]
    if requested_method is not None:
        headers.append((b"access-control-request-method", requested_method.encode()))
    if requested_headers is not None:
        headers.append((b"access-control-request-headers", requested_headers.encode()))
    if private_network:
        headers.append((b"access-control-request-private-network", b"true"))
    policy = OriginPolicy(Settings(cors_origins=cors_origins))
    assert _respond(Cors(_app, policy), method, headers) == _respond(
        former_cors(_app, cors_origins), method, headers
    )


def test_a_request_without_an_origin_gets_vary_origin_after_its_own_headers():
    sent = _respond(Cors(_app, OriginPolicy(Settings())), "GET", [(b"host", b"127.0.0.1")])
    assert sent[0]["headers"] == [
        (b"content-type", b"application/json"),
        (b"vary", b"Accept-Encoding"),
        (b"vary", b"Origin"),
    ]


# ---------------------------------------------------------------------------------------------------
# The one writer of error bodies

ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)


@given(ANY_TEXT, ANY_TEXT)
@example("unauthorized", "a lone \ud800 surrogate")
def test_an_error_body_is_the_bytes_it_was(code, message):
    """What the middleware and the HTTP protocol wrote by hand before, lone surrogates included."""
    assert error_body(code, message) == to_utf8(dumps({"error": code, "message": message}))


def test_a_refusal_sent_by_a_layer_is_the_response_it_was():
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(send_error(send, 401, "unauthorized", "né", [(b"www-authenticate", b"Bearer")]))
    body = '{"error":"unauthorized","message":"né"}'.encode()
    assert sent == [
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b"Bearer"),
            ],
        },
        {"type": "http.response.body", "body": body},
    ]
