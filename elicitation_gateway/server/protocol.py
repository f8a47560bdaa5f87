"""What the gateway's HTTP protocol does to a connection that needs no server's internals: the
connection's socket offered to the app (the ASGI extension ``SEND_BUFFER``) and its send buffer
limited, a connection reset, what is still unsent, the refusal of a request's head, and the words of
a log line about a request.

The protocol itself, built on uvicorn's, is :mod:`.uvicorn_internals`; its lines are logged here
(``elicitation_gateway.server.protocol``).
"""

import asyncio
import contextlib
import logging
import socket
import struct
import sys
from collections.abc import Mapping
from typing import Any

from starlette.types import Scope

from elicitation_gateway.server.errors import error_body

try:
    import fcntl
    import termios
except ImportError:  # Windows: the transport's own buffer alone
    fcntl = termios = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)
"""Where what happens to connections is logged: refusals, deadlines passed."""

SEND_BUFFER = "elicitation_gateway.send_buffer"
"""The ASGI extension holding the connection's socket (``{"socket": ...}``), for :func:`limit_send_buffer`."""

REASONS = {400: b"Bad Request", 414: b"URI Too Long", 431: b"Request Header Fields Too Large"}


def refusal(status: int, code: str, message: str) -> bytes:
    """The whole response refusing a request before it is routed: a JSON error body, then the
    connection closes."""
    body = error_body(code, message)
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (status, REASONS[status], len(body), body)
    )


def route_of(scope: Mapping[str, Any]) -> str:
    """``METHOD /path`` of a request, for a log line: the path as the client sent it, percent-encoded,
    so that no line break reaches the log to forge a line; never the query string, which may hold an
    ``auth_token``."""
    raw = scope.get("raw_path")
    path = raw.decode("ascii", "backslashreplace") if isinstance(raw, bytes) else ascii(scope.get("path"))
    return f"{scope.get('method')} {path}"


def limit_send_buffer(scope: Scope, nbytes: int) -> bool:
    """Have the kernel hold at most about ``nbytes`` written and not yet taken by this request's client
    (its socket's send buffer, for the rest of the connection); whether the server says how (the
    ``SEND_BUFFER`` extension). On Linux the kernel doubles what it is given, to count its own
    overhead: it is given half.
    """
    extension = scope.get("extensions", {}).get(SEND_BUFFER)
    if extension is None:
        return False
    given = nbytes // 2 if sys.platform.startswith("linux") else nbytes
    try:
        extension["socket"].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, given)
    except (OSError, AttributeError, ValueError):
        return False
    return True


def unsent(transport: asyncio.Transport) -> int:
    """Bytes written and not yet taken by the client: the transport's buffer and, where the system
    says (Linux), the socket's (which holds megabytes on a fast link, so only both show progress)."""
    count = transport.get_write_buffer_size()
    if termios is not None:
        with contextlib.suppress(OSError, AttributeError, ValueError, struct.error):
            fileno = transport.get_extra_info("socket").fileno()
            count += struct.unpack("i", fcntl.ioctl(fileno, termios.TIOCOUTQ, bytes(4)))[0]
    return count


def reset(transport: asyncio.Transport) -> None:
    """Close at once and drop what is unsent, in the kernel too: a client that reads nothing would
    otherwise keep the socket's send buffer (up to megabytes) until the system gives up on it."""
    linger_none = struct.pack("ii", 1, 0)
    with contextlib.suppress(OSError, AttributeError):
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_none)
    transport.abort()


def address(transport: asyncio.BaseTransport) -> str:
    """The client's ``host:port``, for a log line."""
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return "an unknown address"
