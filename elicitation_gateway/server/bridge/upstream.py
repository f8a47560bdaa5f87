"""The user's running ``opencode serve``, seen through one pooled httpx client.

Everything here forwards requests as they came: method, raw path and query, headers (the client's
``Authorization`` too: ``OPENCODE_SERVER_PASSWORD`` is the upstream's), and the body, streamed. Only
the headers that belong to one connection (hop-by-hop) are left out each way.
"""

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable

import httpx
from starlette.types import Receive, Scope, Send

from elicitation_gateway.server.errors import send_error

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5.0
"""Seconds to open a connection to the upstream; it runs on the same machine or network."""

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
REQUEST_DROPPED = HOP_BY_HOP | {b"host", b"expect"}
"""``Host`` names the gateway (httpx sets the upstream's); uvicorn has already answered ``Expect``."""
RESPONSE_DROPPED = HOP_BY_HOP | {b"date", b"server"}
"""uvicorn writes its own ``Date`` and ``Server``: the upstream's would make them appear twice."""
HTTPX_DEFAULTS = (b"accept", b"accept-encoding", b"user-agent")
"""httpx adds these when a request has none: a forwarded request must carry only what the client sent."""


class UpstreamError(Exception):
    """The upstream could not answer: down (502) or too slow (504)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    async def send(self, send: Send) -> None:
        await send_error(send, self.status, self.code, self.message)


class ClientGone(Exception):
    """The client went away while its request body was being forwarded."""


def forwarded_headers(headers: Iterable[tuple[bytes, bytes]], *, drop: Iterable[bytes] = ()) -> httpx.Headers:
    """The client's request headers for the upstream, as sent (names, order, repeats), minus hop-by-hop."""
    dropped = REQUEST_DROPPED.union(drop)
    return httpx.Headers([(name, value) for name, value in headers if name.lower() not in dropped])


def returned_headers(headers: httpx.Headers) -> list[tuple[bytes, bytes]]:
    """The upstream's response headers for the client, minus hop-by-hop and what uvicorn adds."""
    return [(name.lower(), value) for name, value in headers.raw if name.lower() not in RESPONSE_DROPPED]


def has_body(scope: Scope) -> bool:
    return any(name in (b"content-length", b"transfer-encoding") for name, _ in scope["headers"])


async def request_body(receive: Receive) -> AsyncIterator[bytes]:
    """The client's body as it arrives, never held whole."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        if chunk := message.get("body", b""):
            yield chunk
        if not message.get("more_body", False):
            return


class Upstream:
    """One OpenCode server: where requests go, how long they may take, and whether it answers."""

    def __init__(self, url: str, *, timeout: float, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.url = httpx.URL(url)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            # Created on the serving loop (httpx binds its pool to the loop that first uses it).
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(None, connect=self.connect_timeout, pool=self.timeout),
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
                follow_redirects=False,
                trust_env=False,  # a loopback upstream must not go through $HTTP_PROXY
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def url_for(self, raw_path: bytes, query: bytes = b"") -> httpx.URL:
        """The upstream URL of a client's raw path and query, exactly as the client encoded them."""
        base = self.url.raw_path.split(b"?")[0].rstrip(b"/")
        return self.url.copy_with(raw_path=base + raw_path + (b"?" + query if query else b""))

    def build(
        self,
        method: str,
        url: httpx.URL,
        headers: httpx.Headers,
        *,
        content: AsyncIterator[bytes] | bytes | None = None,
        read_timeout: float | None = None,
    ) -> httpx.Request:
        timeout = httpx.Timeout(read_timeout, connect=self.connect_timeout, pool=self.timeout)
        request = self.client.build_request(method, url, headers=headers, content=content, timeout=timeout)
        for name in HTTPX_DEFAULTS:
            if name.decode() not in headers:
                request.headers.pop(name.decode(), None)
        return request

    async def send(self, request: httpx.Request, *, within: float | None) -> httpx.Response:
        """Send and wait for the response's head (the body is streamed); raises :class:`UpstreamError`.

        ``within`` bounds the wait for the head, not the body: a long answer or an event stream is
        never cut, a server that says nothing for ``within`` seconds is a 504.
        """
        try:
            async with asyncio.timeout(within):
                return await self.client.send(request, stream=True)
        except TimeoutError:
            raise UpstreamError(
                504, "upstream_timeout", f"the OpenCode server at {self} did not answer within {within:g} s"
            ) from None
        except httpx.TimeoutException as error:
            raise UpstreamError(
                504, "upstream_timeout", f"the OpenCode server at {self} did not answer in time ({error!r})"
            ) from None
        except httpx.TransportError as error:
            raise UpstreamError(
                502, "upstream_unavailable", f"the OpenCode server at {self} is unreachable: {_reason(error)}"
            ) from None

    async def fetch(self, request: httpx.Request, *, within: float) -> httpx.Response:
        """Send and read the whole answer (a small one: JSON), all within ``within`` seconds."""
        response = await self.send(request, within=within)
        try:
            async with asyncio.timeout(within):
                await response.aread()
        except (TimeoutError, httpx.HTTPError) as error:
            raise UpstreamError(
                502, "upstream_unavailable", f"the OpenCode server at {self} broke off: {_reason(error)}"
            ) from None
        finally:
            await response.aclose()
        return response

    def __str__(self) -> str:
        return str(self.url).rstrip("/")


def _reason(error: BaseException) -> str:
    return str(error) or type(error).__name__


async def pass_through(upstream: Upstream, scope: Scope, receive: Receive, send: Send) -> None:
    """Forward one request and stream its response back, both ways as they come.

    Before the upstream answers: 502 or 504 with a JSON body. After, the upstream's status, headers
    and body as they are; if the upstream breaks off mid-body, the client's connection is closed
    rather than the body ended, so the client sees it incomplete.
    """
    method = scope["method"]
    path = scope.get("raw_path") or scope["path"].encode()
    url = upstream.url_for(path, scope.get("query_string", b""))
    content = request_body(receive) if has_body(scope) else None
    request = upstream.build(method, url, forwarded_headers(scope["headers"]), content=content)
    within = None if waits_on_a_model(method, scope["path"]) else upstream.timeout
    try:
        response = await upstream.send(request, within=within)
    except UpstreamError as error:
        logger.warning("%s %s: %s", method, scope["path"], error.message)
        await error.send(send)
        return
    except ClientGone:
        return
    try:
        await _stream_back(response, receive, send)
    finally:
        await response.aclose()


def waits_on_a_model(method: str, path: str) -> bool:
    """A prompt (``POST /session/{id}/message``, ``/command``, ...) answers when the model's turn is
    over, which takes as long as it takes: no time limit on those."""
    return method == "POST" and path.startswith(("/session/", "/api/session/"))


async def _stream_back(response: httpx.Response, receive: Receive, send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": response.status_code,
            "headers": returned_headers(response.headers),
        }
    )
    writer = asyncio.current_task()
    assert writer is not None
    gone = asyncio.Event()

    async def watch() -> None:
        """An idle stream (an event stream between events) must end when its client leaves."""
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()
        writer.cancel()

    watcher = asyncio.create_task(watch())
    try:
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except asyncio.CancelledError:
        if not gone.is_set() or writer.uncancel():
            raise
    except httpx.HTTPError as error:
        # Ending without the closing chunk makes uvicorn close the socket: the client sees a cut body
        # (``unfinished_closes`` in uvicorn_internals.ASSUMPTIONS, checked at start-up).
        logger.warning("the OpenCode server broke off a response: %s", _reason(error))
    finally:
        watcher.cancel()
