"""A lean Server-Sent Events subscriber for load tests: an asyncio protocol, not a full HTTP client.

Thousands of subscribers live in one client process, so each must cost little: the protocol sends one
``GET``, skips the response head, and hands every ``data:`` line to a callback together with the
``time.monotonic_ns()`` of the read that completed it. It does not undo chunked encoding: chunk-size
lines are lines of their own and are skipped like every other line that is not ``data:``.
"""

import asyncio
import time
from collections.abc import Callable

OnData = Callable[[bytes, int], None]


class Subscriber(asyncio.Protocol):
    def __init__(self, host: str, port: int, path: str, on_data: OnData) -> None:
        self._request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n".encode()
        )
        self._on_data = on_data
        self._buffer = b""
        self._in_body = False
        self._transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.connected: asyncio.Future[None] = loop.create_future()
        """Resolves at the first ``data:`` line (``server.connected``): from then on nothing is missed."""
        self.closed: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  (uvloop's transports are not subclasses)
        self._transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        buffer = self._buffer + data
        if not self._in_body:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self._buffer = buffer
                return
            status = buffer[: buffer.find(b"\r\n")]
            if b" 200 " not in status:
                self._fail(ConnectionError(f"the stream answered {status.decode(errors='replace')!r}"))
                return
            self._in_body = True
            buffer = buffer[end + 4 :]
        lines = buffer.split(b"\n")
        self._buffer = lines.pop()
        for line in lines:
            if line.startswith(b"data: "):
                if not self.connected.done():
                    self.connected.set_result(None)
                self._on_data(line[6:].rstrip(b"\r"), now)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionError("the stream ended"))
        if not self.closed.done():
            self.closed.set_result(None)

    def _fail(self, error: Exception) -> None:
        if not self.connected.done():
            self.connected.set_exception(error)
        if self._transport is not None:
            self._transport.close()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def subscribe(host: str, port: int, path: str, on_data: OnData) -> Subscriber:
    """Open a stream and return once its ``server.connected`` arrived."""
    loop = asyncio.get_running_loop()
    _, subscriber = await loop.create_connection(lambda: Subscriber(host, port, path, on_data), host, port)
    await subscriber.connected
    return subscriber
