"""The HTTP protocol the gateway is served with: uvicorn's httptools protocol, with deadlines for
clients that send or read too slowly to be anything but an attack or a dead link.

uvicorn times out only the wait between two requests of a kept-alive connection. A client that sends
half a request's headers, a byte now and then, holds its connection for good (slowloris); one that
stops reading holds its connection and everything written to it, even once uvicorn closes it (a
transport closes only when its buffer is written). Two deadlines end both:

- headers (``GATEWAY_HEADER_TIMEOUT``): from the connection's start, and from the first byte of each
  later request, to the end of that request's headers;
- reading (``GATEWAY_SEND_TIMEOUT``): while more than the transport's high-water mark waits to be
  written, the client must take some of it within each period.

Either aborts the connection (nothing more is written) with one INFO line; DEBUG for a connection
that sent nothing at all (a browser's unused preconnection), or whose response the app had already
ended unfinished (it logged why: see :mod:`..sse`).

Each request's scope also carries the connection's socket as the ASGI extension ``SEND_BUFFER``, for
:func:`limit_send_buffer`: an event stream bounds what the kernel may hold for a client that stops
reading (megabytes, once the system has grown the buffer for a fast link).

Only asyncio's protocol interface and httptools' parser callbacks are overridden, which uvicorn keeps
as long as it parses with httptools; :func:`check_uvicorn` says loudly when that changes.
"""

import asyncio
import contextlib
import logging
import socket
import struct
import sys

from starlette.types import Scope
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from elicitation_gateway.server.logs import route_of

try:
    import fcntl
    import termios
except ImportError:  # Windows: the transport's own buffer alone
    fcntl = termios = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

SEND_BUFFER = "elicitation_gateway.send_buffer"
"""The ASGI extension holding the connection's socket (``{"socket": ...}``), for :func:`limit_send_buffer`."""

OVERRIDDEN = (
    "connection_made",
    "connection_lost",
    "on_message_begin",
    "on_headers_complete",
    "pause_writing",
    "resume_writing",
)


def check_uvicorn() -> None:
    """Raise if uvicorn's httptools protocol no longer has the methods the deadlines hook into."""
    missing = [name for name in OVERRIDDEN if not callable(vars(HttpToolsProtocol).get(name))]
    if missing:
        raise RuntimeError(
            f"uvicorn's HttpToolsProtocol no longer defines {', '.join(missing)}: the header and read "
            "deadlines of elicitation_gateway/server/protocol.py need updating for this uvicorn"
        )


class DeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline and a read deadline (see the module)."""

    # Slots: keys added to the instance's dict would unshare it, 1.3 KB more a connection.
    __slots__ = ("_connection", "_header_timer", "_request_begun", "_send_timer", "_socket", "_unsent")

    header_timeout: float = 10
    send_timeout: float = 30

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._connection = transport
        self._header_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._request_begun = False
        self._unsent = 0
        self._socket = transport.get_extra_info("socket")  # the transport's wrapper: it holds no protocol
        super().connection_made(transport)
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._header_timer, self._send_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._send_timer = None
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._socket is not None:
            self.scope["extensions"] = {SEND_BUFFER: {"socket": self._socket}}
        self._request_begun = True
        if self._header_timer is None:  # a later request of a kept-alive connection
            self._arm_header_deadline()

    def on_headers_complete(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        self._request_begun = False
        super().on_headers_complete()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_timer is None:
            self._unsent = _unsent(self._connection)
            self._send_timer = asyncio.get_running_loop().call_later(self.send_timeout, self._reading_late)

    def resume_writing(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None
        super().resume_writing()

    def _arm_header_deadline(self) -> None:
        self._header_timer = asyncio.get_running_loop().call_later(self.header_timeout, self._headers_late)

    def _headers_late(self) -> None:
        self._header_timer = None
        transport = self._connection
        # Nothing sent at all is a browser's unused preconnection as often as not; worth no more than
        # DEBUG, as a connection being closed already.
        worth_noting = self._request_begun and not transport.is_closing()
        logger.log(
            logging.INFO if worth_noting else logging.DEBUG,
            "closed a connection from %s: no complete request headers within %g s",
            _address(transport),
            self.header_timeout,
        )
        _reset(transport)

    def _reading_late(self) -> None:
        self._send_timer = None
        transport = self._connection
        unsent = _unsent(transport)
        if 0 < unsent < self._unsent:  # it read some: slow, not gone
            self._unsent = unsent
            self._send_timer = asyncio.get_running_loop().call_later(self.send_timeout, self._reading_late)
            return
        if unsent == 0:
            return
        scope = getattr(self, "scope", None) or {}
        cycle = getattr(self, "cycle", None)
        ended_unfinished = transport.is_closing() and not getattr(cycle, "response_complete", True)
        logger.log(
            logging.DEBUG if ended_unfinished else logging.INFO,
            "dropped a client that read nothing for %g s: %s (from %s)",
            self.send_timeout,
            route_of(scope),
            _address(transport),
        )
        _reset(transport)


def deadline_protocol(header_timeout: float, send_timeout: float) -> type[DeadlineProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)``, with these deadlines."""
    check_uvicorn()
    return type(
        "DeadlineProtocol",
        (DeadlineProtocol,),
        {"header_timeout": header_timeout, "send_timeout": send_timeout, "__module__": __name__},
    )


def limit_send_buffer(scope: Scope, nbytes: int) -> bool:
    """Have the kernel hold at most about ``nbytes`` written and not yet taken by this request's client
    (its socket's send buffer, for the rest of the connection); whether the server says how (see the
    module). On Linux the kernel doubles what it is given, to count its own overhead: it is given half.
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


def _unsent(transport: asyncio.Transport) -> int:
    """Bytes written and not yet taken by the client: the transport's buffer and, where the system
    says (Linux), the socket's (which holds megabytes on a fast link, so only both show progress)."""
    unsent = transport.get_write_buffer_size()
    if termios is not None:
        with contextlib.suppress(OSError, AttributeError, ValueError, struct.error):
            fileno = transport.get_extra_info("socket").fileno()
            unsent += struct.unpack("i", fcntl.ioctl(fileno, termios.TIOCOUTQ, bytes(4)))[0]
    return unsent


def _reset(transport: asyncio.Transport) -> None:
    """Close at once and drop what is unsent, in the kernel too: a client that reads nothing would
    otherwise keep the socket's send buffer (up to megabytes) until the system gives up on it."""
    linger_none = struct.pack("ii", 1, 0)
    with contextlib.suppress(OSError, AttributeError):
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_none)
    transport.abort()


def _address(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return "an unknown address"
