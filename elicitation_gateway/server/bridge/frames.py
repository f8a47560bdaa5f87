"""Cutting the OpenCode server's event stream into whole Server-Sent Events frames.

The bridge merges its own ``question.*`` frames into the upstream's stream. A frame may arrive from
the upstream in several reads, and several frames in one read, so bytes are never forwarded as they
come: they are cut at the blank line that ends each frame, and only whole frames are merged. SSE
allows CRLF, LF or CR line ends; frames leave here with LF, as the gateway's own do.
"""

MAX_FRAME = 16 * 1024 * 1024
"""A frame larger than this (16 MiB) ends the stream: no event of OpenCode's comes near it."""


class FrameTooLarge(ValueError):
    """The upstream sent more than ``MAX_FRAME`` bytes without ending a frame."""


class FrameSplitter:
    """Feed it bytes as they arrive; it returns the frames they complete, each ending in ``\\n\\n``.

    Blank lines between frames are dropped (they dispatch nothing); comment frames (``: ping``) are
    frames like any other. A partial frame at the end of the stream is never returned: a client
    would not dispatch it either.
    """

    __slots__ = ("_buffer", "_limit", "_scanned", "_skip_lf")

    def __init__(self, limit: int = MAX_FRAME) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes at the buffer's end already searched for a frame's end
        self._skip_lf = False  # the last read ended with a CR, taken as a line end: drop the LF of a CRLF
        self._limit = limit

    def feed(self, data: bytes) -> list[bytes]:
        if self._skip_lf and data.startswith(b"\n"):
            data = data[1:]
        self._skip_lf = data.endswith(b"\r")
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        start = 0
        search_from = max(self._scanned - 1, 0)  # one back: a frame's "\n\n" may span two reads
        while (end := buffer.find(b"\n\n", search_from)) >= 0:
            frame = bytes(buffer[start : end + 2]).lstrip(b"\n")  # blank lines before a frame
            if frame:
                frames.append(frame)
            start = search_from = end + 2
        if start:
            del buffer[:start]
        self._scanned = len(buffer)
        if len(buffer) > self._limit:
            raise FrameTooLarge(f"an upstream event frame exceeds {self._limit} bytes")
        return frames
