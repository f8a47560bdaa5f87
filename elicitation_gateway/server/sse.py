"""The response that holds an event stream open: cheap enough to hold by the thousand.

Frames are encoded once per event (:func:`~elicitation_gateway.encoding.sse_frame`, see
:mod:`..events`); this is only the response around them. It is not sse-starlette's
``EventSourceResponse`` (which the ``mcp`` SDK uses for ``/mcp``, compared in ``bench/``): that runs a
task group of several tasks, cancel scopes and a lock per stream and per frame: 46 KB per idle stream
and about half of the CPU of each delivery (bench/FINDINGS.md). Here each open stream is the request's
own task, writing frames as they come, and one small task that notices the client going away, writes a
heartbeat every ``interval`` seconds, and drops a client that stopped reading for ``send_timeout``
seconds: 24 KB per idle stream, one ``send`` per frame.

What a client that stops reading can hold is bounded in bytes, whatever the frames hold (a pending
question's announcement can be a megabyte): a frame bigger than ``PIECE`` is written a piece at a time,
each only once the transport has taken the one before (uvicorn waits for it below its high-water mark,
64 KiB), so the process holds at most ``PROCESS_SHARE`` for it; and the kernel's send buffer of the
connection is limited to the rest of the stream's ``buffer`` (``GATEWAY_SUBSCRIBER_BUFFER``), where
the system would otherwise let it grow to megabytes. Frames are shared by every stream (encoded once),
never copied whole for one.
"""

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Mapping

from starlette.types import Receive, Scope, Send

from elicitation_gateway.server.protocol import limit_send_buffer, route_of
from elicitation_gateway.server.uvicorn_internals import end_unfinished_on_purpose

logger = logging.getLogger(__name__)

PIECE = 16 * 1024
"""The most one ``send`` writes of a frame."""
HIGH_WATER = 64 * 1024
"""The transport's high-water mark (asyncio's and uvloop's default): uvicorn waits below it to write
(``flow`` in :data:`~.uvicorn_internals.ASSUMPTIONS`, checked at start-up)."""
PROCESS_SHARE = HIGH_WATER + PIECE
"""The most a stream's transport holds unsent in the process."""
KERNEL_LEAST = 32 * 1024
"""The least the kernel's send buffer is limited to, whatever the stream's ``buffer``."""


def pieces(frame: bytes) -> Iterator[bytes]:
    """``frame`` in pieces of at most ``PIECE`` bytes, each made only when it is asked for (a list of
    them would be a copy of the whole frame for each stream)."""
    for start in range(0, len(frame), PIECE):
        yield frame[start : start + PIECE]


def backlog_chunks(frames: Iterable[bytes | None]) -> Iterator[tuple[bytes, int]]:
    """Frames (``None``: one not shown) joined into writes of about ``PIECE`` bytes, a bigger frame
    alone as it is, each with how many frames it holds: a stream's backlog in few writes, and never one
    object as big as the backlog."""
    chunk: list[bytes] = []
    size = 0
    for frame in frames:
        if frame is None:
            continue
        if chunk and size + len(frame) > PIECE:
            yield b"".join(chunk), len(chunk)
            chunk, size = [], 0
        chunk.append(frame)
        size += len(frame)
    if chunk:
        yield b"".join(chunk), len(chunk)


class EventStreamResponse:
    media_type = b"text/event-stream; charset=utf-8"

    def __init__(
        self,
        frames: AsyncGenerator[bytes, None],
        *,
        heartbeat: Callable[[], bytes],
        interval: float,
        send_timeout: float,
        on_disconnect: Callable[[], None],
        on_close: Callable[[], None],
        headers: Mapping[str, str],
        buffer: int | None = None,
    ) -> None:
        self._frames = frames
        self._heartbeat = heartbeat
        self._interval = interval
        self._send_timeout = send_timeout
        self._on_disconnect = on_disconnect
        self._on_close = on_close
        self._buffer = buffer
        self._headers = [(b"content-type", self.media_type)] + [
            (name.lower().encode(), value.encode()) for name, value in headers.items()
        ]
        self._sending_since: float | None = None
        self._stalled = False
        self._gone = False  # the client left (or its connection was reset)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._respond(scope, receive, send)
        finally:
            self._on_close()

    async def _respond(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._buffer is not None:
            limit_send_buffer(scope, max(self._buffer - PROCESS_SHARE, KERNEL_LEAST))
        await send({"type": "http.response.start", "status": 200, "headers": self._headers})
        if scope.get("method") == "HEAD":
            await self._frames.aclose()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        writer = asyncio.current_task()
        assert writer is not None
        watcher = asyncio.create_task(self._watch(receive, send, writer))
        try:
            async for frame in self._frames:
                if self._gone:  # writes to a closed connection do nothing: stop making them
                    break
                await self._send(send, frame)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not self._stalled or writer.uncancel():
                raise
            # Dropped for stalling: ended without the closing chunk on purpose, so the server closes
            # the connection (and its read deadline resets it, if the client still takes nothing).
            logger.info(
                "dropped a subscriber that left one write unread for %g s: %s",
                self._send_timeout,
                route_of(scope),
            )
            end_unfinished_on_purpose()
        finally:
            watcher.cancel()
            await self._frames.aclose()

    async def _send(self, send: Send, frame: bytes) -> None:
        """Write ``frame``, a piece at a time when it is big, letting other tasks run between pieces;
        ``_sending_since`` is set from the first piece to the last, so no heartbeat comes between them."""
        if len(frame) <= PIECE:
            self._sending_since = time.monotonic()
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        else:
            for piece in pieces(frame):
                if self._gone:
                    break
                self._sending_since = time.monotonic()  # each write may wait ``send_timeout``
                await send({"type": "http.response.body", "body": piece, "more_body": True})
                await asyncio.sleep(0)  # a big frame to many streams must not hold the loop
        self._sending_since = None

    async def _watch(self, receive: Receive, send: Send, writer: asyncio.Task[None]) -> None:
        """End the stream when the client leaves; beat every ``interval``; drop a client that stopped
        reading for ``send_timeout``."""
        tick = min(self._interval, self._send_timeout)
        next_beat = time.monotonic() + self._interval
        while True:
            try:
                async with asyncio.timeout(tick):  # unlike wait_for, no task of its own
                    message = await receive()
            except TimeoutError:
                now, since = time.monotonic(), self._sending_since
                if since is not None and now - since > self._send_timeout:
                    self._stalled = True
                    writer.cancel()
                    return
                if since is None and now >= next_beat:
                    next_beat = now + self._interval
                    try:
                        async with asyncio.timeout(self._send_timeout):
                            await self._send(send, self._heartbeat())
                    except TimeoutError:
                        self._stalled = True
                        writer.cancel()
                        return
                continue
            if message["type"] == "http.disconnect":
                self._gone = True
                self._on_disconnect()
                return
