"""The proxy's stdin: its client's messages, one JSON-RPC message a line.

Read on a daemon thread of its own, with plain ``os.read`` calls, for two reasons. The client may
close stdin at any moment, the upstream's handshake still under way included, and the proxy must hear
of it then to stop the upstream and exit (``ended``). And reading must never keep the proxy from
exiting: a read blocked in a worker thread (as the SDK's own stdin reader is) holds the event loop's
shutdown until the client writes or closes; a daemon thread holding no Python lock does not.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import AsyncIterator

_CHUNK = 65536
_QUEUED_LINES = 64  # the reader waits while this many lines are not yet taken: the client's back-pressure


class ClientInput:
    """The lines of ``fd`` as an async iterator (what ``stdio_server(stdin=...)`` reads), and ``ended``,
    set as soon as the client closes it, before the lines still queued are taken."""

    def __init__(self, fd: int = 0) -> None:
        self.ended = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str | None] = asyncio.Queue(_QUEUED_LINES)
        self._fd = fd
        self._finished = False
        threading.Thread(target=self._read, name="proxy-stdin", daemon=True).start()

    def _read(self) -> None:
        pending = b""
        try:
            while True:
                try:
                    chunk = os.read(self._fd, _CHUNK)
                except OSError:  # closed, or never opened (started with stdin closed)
                    chunk = b""
                if not chunk:
                    break
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self._put(line.decode("utf-8", errors="replace"))
            self._loop.call_soon_threadsafe(self.ended.set)
            if pending.strip():
                self._put(pending.decode("utf-8", errors="replace"))
            self._put(None)
        except (RuntimeError, concurrent.futures.CancelledError):
            return  # the event loop is closed or closing: the proxy is exiting

    def _put(self, line: str | None) -> None:
        asyncio.run_coroutine_threadsafe(self._lines.put(line), self._loop).result()

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        if self._finished:
            raise StopAsyncIteration
        line = await self._lines.get()
        if line is None:
            self._finished = True
            raise StopAsyncIteration
        return line
