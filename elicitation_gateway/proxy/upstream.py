"""Connecting to the upstream MCP server.

No one era carries both kinds of question. A push-style ``ctx.elicit`` reaches a client only on a
2025-11-25 connection: the 2026-07-28 era has no server-initiated requests. An ``InputRequiredResult``
reaches it only on a 2026-07-28 connection: the ``mcp`` package's ``Resolve(Elicit(...))`` becomes a
plain ``elicitation/create`` on the older era, but a tool that returns the result itself (FastMCP 4's
guard tools, a bare ``InputRequiredResult`` from any ``mcp`` server) fails there.

So the proxy speaks 2025-11-25 to the upstream unless told otherwise, and falls back to negotiating
(``auto``) only when the upstream refuses the handshake's protocol version: an upstream that crashes or
never answers is started once, and said once. Under ``auto``, a request the upstream answered with an
``InputRequiredResult`` it could not send is made again on a second connection, in the 2026-07-28
era, opened the first time one is needed (:class:`NewerEra`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    Implementation,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from elicitation_gateway import __version__

Era = Literal["legacy", "modern", "auto"]
"""``legacy``: 2025-11-25 (push-style questions, and the ``mcp`` package's resolvers); ``modern``:
2026-07-28 (``InputRequiredResult`` only); ``auto``: legacy first, the upstream's choice if it refuses,
and a second, 2026-07-28 connection for what answers ``InputRequiredResult``."""

CLIENT_INFO = Implementation(
    name="elicitation-gateway-proxy", title="Elicitation Gateway proxy", version=__version__
)


@dataclass(frozen=True)
class Upstream:
    """Where the upstream is: a command to start (``command``) or a Streamable HTTP ``url``."""

    command: list[str] = field(default_factory=list)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] | None = None

    def describe(self) -> str:
        return self.url or " ".join(self.command)

    def transport(self, on_failure: Callable[[Exception], None] | None = None) -> Any:
        """The ``mcp`` client's transport for this upstream, made anew for each connection attempt.
        ``on_failure`` hears of each failed HTTP exchange with the upstream."""
        if self.url is not None:
            # No read timeout: a question's answer may be an hour away, and the upstream's stream is
            # silent while it waits for it (the SDK's default gives up after 300 s).
            http = httpx2.AsyncClient(
                headers=dict(self.headers),
                timeout=httpx2.Timeout(30.0, read=None),
                transport=_Watched(httpx2.AsyncHTTPTransport(), on_failure),
            )
            return streamable_http_client(self.url, http_client=http)
        # The child gets the proxy's whole environment (the SDK's default is a few variables): an
        # upstream configured with API keys in the client's "env" must still see them.
        environment = dict(os.environ if self.env is None else self.env)
        parameters = StdioServerParameters(command=self.command[0], args=self.command[1:], env=environment)
        from mcp.client.stdio import stdio_client

        return stdio_client(parameters)


class _Watched(httpx2.AsyncBaseTransport):
    """Tells of failed exchanges: the SDK's Streamable HTTP client leaves a request whose POST failed
    (the upstream down, its connection reset) waiting for ever, so the proxy ends such requests itself."""

    def __init__(
        self, inner: httpx2.AsyncBaseTransport, on_failure: Callable[[Exception], None] | None
    ) -> None:
        self.inner = inner
        self.on_failure = on_failure

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self.inner.handle_async_request(request)
        except httpx2.TransportError as error:
            if self.on_failure is not None:
                self.on_failure(error)
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()


class UpstreamFailed(Exception):
    """The upstream could not be started or reached, or refused the handshake."""


class ClientLeft(Exception):
    """The proxy's own client went away (closed its stdin) before the upstream was connected."""


DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds the upstream has to start and complete the MCP handshake."""


def version_refused(error: BaseException) -> bool:
    """Whether a failed handshake is the upstream refusing the protocol version (so the other era may
    work), rather than a failure (it crashed, is unreachable, or broke the protocol): the JSON-RPC
    unsupported-version error, ``initialize`` unknown to a server of the newer era only, or an
    ``initialize`` answered with a version the client does not speak."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if isinstance(error, MCPError):
        return error.code in (UNSUPPORTED_PROTOCOL_VERSION, METHOD_NOT_FOUND)
    # The SDK's own words for an initialize result in a version it does not speak.
    return isinstance(error, RuntimeError) and str(error).startswith("Unsupported protocol version")


INPUT_REQUIRED_ON_LEGACY = "only exists at MCP 2026-07-28"
"""FastMCP 4's words when a tool, prompt or resource returns an ``InputRequiredResult`` on a 2025-11-25
connection (a -32602 error)."""
INVALID_RESULT = "Handler returned an invalid result"
"""The ``mcp`` package's words (a -32603 error) for a result it cannot send in the connection's era: an
``InputRequiredResult`` on a 2025-11-25 connection among them."""
PUSH_ON_MODERN = (
    "elicitation via server-initiated requests is unavailable on 2026-07-28 connections",  # FastMCP 4
    "no back-channel for server-initiated requests",  # the mcp package
)
"""The words of an upstream whose push-style ``ctx.elicit`` failed on a 2026-07-28 connection."""


def input_required_refused(error: BaseException) -> bool:
    """Whether a request failed on a 2025-11-25 connection because the upstream answered it with an
    ``InputRequiredResult``, which only the 2026-07-28 era can carry. The ``mcp`` package's words say
    only that the result was invalid: they are taken to mean the same."""
    if not isinstance(error, MCPError):
        return False
    if error.code == INVALID_PARAMS:
        return "InputRequiredResult" in error.message and INPUT_REQUIRED_ON_LEGACY in error.message
    return error.code == INTERNAL_ERROR and error.message == INVALID_RESULT


def push_refused(text: str) -> bool:
    """Whether an upstream's error (or a tool's error result) is a push-style question that a
    2026-07-28 connection could not carry."""
    return any(words in text for words in PUSH_ON_MODERN)


@contextlib.asynccontextmanager
async def connect(
    upstream: Upstream, era: Era, on_failure: Callable[[Exception], None] | None = None, **options: Any
) -> AsyncIterator[Client]:
    """A connected ``Client`` for ``upstream``; ``options`` are ``Client``'s (callbacks)."""
    # "auto" probes server/discover and takes the newer era where the upstream offers it.
    modes = {"legacy": ["legacy"], "modern": ["auto"], "auto": ["legacy", "auto"]}[era]
    failure: BaseException | None = None
    for mode in modes:
        client = Client(
            upstream.transport(on_failure),
            mode=mode,  # type: ignore[arg-type]
            client_info=CLIENT_INFO,
            cache=None,  # every listing comes fresh from the upstream, as it would without the proxy
            **options,
        )
        try:
            await client.__aenter__()
        except Exception as error:
            failure = failure or error
            if version_refused(error):  # a server of the newer era only? Negotiate.
                continue
            break  # crashed, unreachable, or broken: starting it again would only say so twice
        if era == "modern" and client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            await client.__aexit__(None, None, None)
            raise UpstreamFailed(
                f"the upstream MCP server ({upstream.describe()}) speaks {client.protocol_version}, "
                "not the 2026-07-28 era that --upstream-era modern asks for"
            )
        try:
            yield client
        finally:
            with contextlib.suppress(Exception):
                await client.__aexit__(None, None, None)
        return
    raise UpstreamFailed(_failure(upstream, failure))


@contextlib.asynccontextmanager
async def held(
    upstream: Upstream,
    era: Era,
    on_failure: Callable[[str], None],
    *,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    client_gone: asyncio.Event | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """:func:`connect`, held open by a task of its own. The SDK's client ends a broken connection by
    cancelling the task that opened it: that must not be the task that serves the proxy's client.
    ``on_failure`` hears why, when the connection breaks while in use.

    Connecting ends with :class:`UpstreamFailed` after ``connect_timeout`` seconds (an upstream that
    never answers ``initialize``), and with :class:`ClientLeft` as soon as ``client_gone`` is set;
    either way the upstream is stopped first (a stdio child terminated, an HTTP connection closed)."""
    ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    release = asyncio.Event()

    def watched(error: Exception) -> None:
        on_failure(f"{type(error).__name__}: {error}")

    async def hold() -> None:
        try:
            async with connect(upstream, era, watched, **options) as client:
                ready.set_result(client)
                await release.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(
                    error if isinstance(error, UpstreamFailed) else UpstreamFailed(_failure(upstream, error))
                )
            elif not release.is_set():
                on_failure(_reason(error))
            if not isinstance(error, Exception):
                raise

    holder = asyncio.get_running_loop().create_task(hold())
    waits: set[asyncio.Future[Any]] = {ready}
    if client_gone is not None:
        waits.add(asyncio.ensure_future(client_gone.wait()))
    try:
        await asyncio.wait(waits, timeout=connect_timeout, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        await _stopped(holder)
        raise
    finally:
        for waiting in waits - {ready}:
            waiting.cancel()
    if not ready.done():
        await _stopped(holder)
        if ready.done() and not ready.cancelled():
            ready.exception()  # the cancelled attempt's own failure: not the one to report
        if client_gone is not None and client_gone.is_set():
            raise ClientLeft("the client closed the proxy's stdin while the upstream was connecting")
        raise UpstreamFailed(
            f"the upstream MCP server ({upstream.describe()}) did not answer the MCP handshake "
            f"(initialize) within {connect_timeout:g} s (--connect-timeout)"
        )
    client = ready.result()
    try:
        yield client
    finally:
        release.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(holder, 10)


class NewerEra:
    """The upstream's 2026-07-28 connection beside the 2025-11-25 one, opened by the first request that
    needs it and kept for later ones; a stdio upstream is started a second time for it. ``on_failure``
    hears why, when the connection breaks while in use. An upstream that does not offer 2026-07-28 is
    asked once: :meth:`client` then raises :class:`UpstreamFailed` at once."""

    def __init__(
        self,
        upstream: Upstream,
        on_failure: Callable[[str], None],
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        client_gone: asyncio.Event | None = None,
        **options: Any,
    ) -> None:
        self.upstream = upstream
        self.on_failure = on_failure
        self.connect_timeout = connect_timeout
        self.client_gone = client_gone
        self.options = options
        self.connected: Client | None = None
        self.refused: str | None = None
        self._lock = asyncio.Lock()
        self._stack = contextlib.AsyncExitStack()

    async def client(self) -> Client:
        async with self._lock:
            if self.connected is not None:
                return self.connected
            if self.refused is not None:
                raise UpstreamFailed(self.refused)
            connecting = held(
                self.upstream,
                "modern",
                self.on_failure,
                connect_timeout=self.connect_timeout,
                client_gone=self.client_gone,
                **self.options,
            )
            # In a context of its own, as the first connection is: the tasks that serve the connection
            # must not inherit the context of the request that happened to open it (its call).
            opening = asyncio.get_running_loop().create_task(
                self._stack.enter_async_context(connecting), context=contextvars.Context()
            )
            try:
                self.connected = await opening
            except (UpstreamFailed, ClientLeft) as error:
                self.refused = str(error)
                raise UpstreamFailed(self.refused) from error
            return self.connected

    async def aclose(self) -> None:
        """Closes the connection, if it was opened: a stdio upstream's second process is stopped."""
        await self._stack.aclose()


async def _stopped(holder: asyncio.Task[None]) -> None:
    """Cancels the connecting task and waits (boundedly) until its transport has stopped the upstream."""
    holder.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(holder, 10)


def _reason(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, asyncio.CancelledError):
        return "its connection ended"
    return f"{type(error).__name__}: {error}"


def _failure(upstream: Upstream, error: BaseException | None) -> str:
    what = _reason(error) if error is not None else "no answer"
    return f"cannot connect to the upstream MCP server ({upstream.describe()}): {what}"
