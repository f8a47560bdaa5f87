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

Limits on what a request's head may hold, checked as its bytes arrive, before anything is routed:
llhttp and uvicorn keep every header of a head until it ends, with no bound of their own.

- its bytes (``GATEWAY_MAX_HEADER_SIZE``: the request line, the headers and the empty line) and its
  header count (``GATEWAY_MAX_HEADERS``): ``431``;
- its URL (``GATEWAY_MAX_URL_LENGTH``, which bounds the request line too: its method and version are
  short): ``414``.

The parser is fed no more of a head than its limit: memory per connection stays at the limit (plus
the one read in hand, 256 KiB at most) however much a client sends; the connection is then closed.

The ``Host`` rules of RFC 9112 (§3.2) that httptools leaves to the server, before the app's host check:
an HTTP/1.1 request without ``Host``, or any request with more than one, is ``400``; the authority of
an absolute-form target (``POST http://example.com/elicitations``) is the request's host, whatever
``Host`` says (§3.2.2), so that is what the app's host check judges.

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

import httptools
from starlette.types import Scope
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from elicitation_gateway.server.errors import error_body
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
    "data_received",
    "on_message_begin",
    "on_url",
    "on_header",
    "on_headers_complete",
    "on_body",
    "on_message_complete",
    "on_response_complete",
    "pause_writing",
    "resume_writing",
)

LINGER = 2.0
"""Seconds a refused client's further bytes are read and dropped before its connection is closed: closed
at once with bytes unread, the system would reset it, and the client might lose the refusal."""

REASONS = {400: b"Bad Request", 414: b"URI Too Long", 431: b"Request Header Fields Too Large"}


def check_uvicorn() -> None:
    """Raise if uvicorn's httptools protocol no longer has the methods the deadlines and limits hook
    into."""
    missing = [name for name in OVERRIDDEN if not callable(vars(HttpToolsProtocol).get(name))]
    if missing:
        raise RuntimeError(
            f"uvicorn's HttpToolsProtocol no longer defines {', '.join(missing)}: the deadlines and "
            "limits of elicitation_gateway/server/protocol.py need updating for this uvicorn"
        )


class DeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline, a read deadline, limits on a request's
    head and the Host rules (see the module)."""

    # Slots: keys added to the instance's dict would unshare it, 1.3 KB more a connection.
    __slots__ = (
        "_authority",
        "_connection",
        "_counting_raw",
        "_head_bytes",
        "_header_count",
        "_header_timer",
        "_hosts",
        "_in_head",
        "_refusal",
        "_refused",
        "_request_begun",
        "_send_timer",
        "_socket",
        "_target",
        "_unanswered",
        "_unsent",
        "_url_bytes",
    )

    header_timeout: float = 10
    send_timeout: float = 30
    max_header_size: int = 65_536
    max_headers: int = 100
    max_url_length: int = 8_192

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._connection = transport
        self._header_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._request_begun = False
        self._unsent = 0
        self._refusal: tuple[int, str, str] | None = None
        self._refused = False
        self._unanswered: tuple[int, str, str] | None = None
        self._awaiting_head()
        self._begin_head()
        self._socket = transport.get_extra_info("socket")  # the transport's wrapper: it holds no protocol
        super().connection_made(transport)
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._header_timer, self._send_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._send_timer = None
        super().connection_lost(exc)

    # -- the head's limits -------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        """Feeds the parser no more of a head than ``max_header_size``: the bytes of a head that began
        before this read are counted here, as they arrive (a head that begins within a read is
        counted by its URL and headers as the parser hands them over)."""
        if self._refused:
            return  # dropped: the connection closes once the refusal is written
        self._counting_raw = self._in_head
        if not self._in_head:
            super().data_received(data)
        elif len(data) <= self.max_header_size - self._head_bytes:  # all but every read
            self._head_bytes += len(data)
            super().data_received(data)
        else:
            self._feed_up_to_the_limit(memoryview(data))
        if self._refusal is not None and not self._refused:
            self._refuse(*self._refusal)

    def _feed_up_to_the_limit(self, view: memoryview) -> None:
        """A read longer than its head may still be: the parser is fed what the head may take; the rest
        is fed only if the head ended within it (the rest is then a body, or later requests)."""
        while view and self._refusal is None:
            if not self._in_head:
                self._counting_raw = False
                super().data_received(view)  # type: ignore[arg-type]  # httptools takes any buffer
                return
            self._counting_raw = True
            room = max(0, self.max_header_size - self._head_bytes)
            fed, view = view[:room], view[room:]
            self._head_bytes += len(fed)
            if fed:
                super().data_received(fed)  # type: ignore[arg-type]
            transport = self._connection
            if transport.is_closing() or transport.get_protocol() is not self:
                return  # uvicorn refused it (400), or it became a WebSocket
            # Over only if the head counted from the slice's start is still unfinished: a head that
            # began within the slice (after the request before it) is counted anew by the loop.
            if view and self._in_head and self._counting_raw and self._refusal is None:
                self._refuse_head_size()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._begin_head()
        if self._socket is not None:
            self.scope["extensions"] = {SEND_BUFFER: {"socket": self._socket}}
        self._request_begun = True
        if self._header_timer is None:  # a later request of a kept-alive connection
            self._arm_header_deadline()

    def on_url(self, url: bytes) -> None:
        if self._refusal is not None:
            return  # refused: nothing more of it is kept
        self._url_bytes += len(url)
        if self._url_bytes > self.max_url_length:
            self._refusal = (
                414,
                "url_too_long",
                f"the request's URL is longer than {self.max_url_length} bytes (GATEWAY_MAX_URL_LENGTH)",
            )
            return
        self._charge(len(url))
        if self._url_bytes == len(url):  # its first bytes: origin-form, a path, is all but every request
            if not url.startswith(b"/"):
                self._target = url  # kept to read its host
        elif self._target is not None:
            self._target += url
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._refusal is not None:
            return
        self._header_count += 1
        if self._header_count > self.max_headers:
            self._refusal = (
                431,
                "headers_too_large",
                f"the request has more than {self.max_headers} headers (GATEWAY_MAX_HEADERS)",
            )
            return
        self._charge(len(name) + len(value) + 4)  # ": " and CRLF
        if len(name) == 4 and name.lower() == b"host":
            self._hosts += 1
            authority = self._target_authority()
            if authority is not None:  # RFC 9112 §3.2.2: the target's authority wins over Host
                value = authority
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        self._request_begun = False
        self._in_head = False
        if self._refusal is None:
            self._refusal = self._host_refusal()
        if self._refusal is not None:
            return  # never routed: data_received answers once the parser returns
        if self._hosts == 0 and (authority := self._target_authority()) is not None:
            super().on_header(b"host", authority)  # HTTP/1.0 without Host: the target's host is judged
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._refusal is None:  # a refused request has no cycle to take its body
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refusal is None:
            super().on_message_complete()
        self._awaiting_head()

    def _awaiting_head(self) -> None:
        """What comes next on the connection is a request's head: it is counted from here."""
        self._in_head = True
        self._head_bytes = 0
        # Within the read that ended the last request, the next one's URL and headers are counted
        # as the parser hands them over: how many bytes of that read are theirs is not known.
        self._counting_raw = False

    def _begin_head(self) -> None:
        self._header_count = self._hosts = self._url_bytes = 0
        self._target: bytes | None = None
        self._authority: bytes | None = None

    def _charge(self, size: int) -> None:
        """Counts what the parser handed over of a head that began within the current read."""
        if not self._counting_raw:
            self._head_bytes += size
            if self._head_bytes > self.max_header_size and self._refusal is None:
                self._refuse_head_size()

    def _refuse_head_size(self) -> None:
        self._refusal = (
            431,
            "headers_too_large",
            f"the request's headers are larger than {self.max_header_size} bytes (GATEWAY_MAX_HEADER_SIZE)",
        )

    def _target_authority(self) -> bytes | None:
        """``host[:port]`` of an absolute-form target (``http://example.com/x``), None for any other
        (a path, ``*``)."""
        if self._target is None:
            return None
        if self._authority is None:
            try:
                parsed = httptools.parse_url(self._target)
            except httptools.HttpParserInvalidURLError:
                return None  # uvicorn refuses it (400) once the headers are read
            if parsed.schema is None or parsed.host is None:
                return None
            host = b"[" + parsed.host + b"]" if b":" in parsed.host else parsed.host
            self._authority = host + (b":%d" % parsed.port if parsed.port is not None else b"")
        return self._authority

    def _host_refusal(self) -> tuple[int, str, str] | None:
        """RFC 9112 §3.2: exactly one Host, or none in HTTP/1.0."""
        if self._hosts > 1:
            return 400, "invalid_host", "the request has more than one Host header"
        if self._hosts == 0 and self.parser.get_http_version() == "1.1":
            return 400, "invalid_host", "an HTTP/1.1 request must have a Host header"
        return None

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer ``status`` and close; nothing more of the connection is read into memory. Requests
        before it on the connection (pipelined) are answered first."""
        self._refused = True
        transport = self._connection
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        logger.info("refused a request from %s: %s", _address(transport), message)
        cycle = getattr(self, "cycle", None)
        if cycle is not None and not cycle.response_complete:  # requests before it are being answered
            self._unanswered = (status, code, message)
            return
        self._answer(status, code, message)

    def on_response_complete(self) -> None:
        """After the responses to the requests before a refused one (pipelined), its refusal."""
        super().on_response_complete()
        cycle = getattr(self, "cycle", None)
        if self._unanswered is not None and (cycle is None or cycle.response_complete):
            refusal, self._unanswered = self._unanswered, None
            if not self._connection.is_closing():
                self._answer(*refusal)

    def _answer(self, status: int, code: str, message: str) -> None:
        transport = self._connection
        body = error_body(code, message)
        transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, REASONS[status], len(body), body)
        )
        if transport.can_write_eof():
            transport.write_eof()  # the refusal, then the end: what the client still sends is dropped
            self._header_timer = asyncio.get_running_loop().call_later(LINGER, _reset, transport)
        else:
            transport.close()

    # -- deadlines ---------------------------------------------------------------------------------

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


def deadline_protocol(
    header_timeout: float,
    send_timeout: float,
    *,
    max_header_size: int = DeadlineProtocol.max_header_size,
    max_headers: int = DeadlineProtocol.max_headers,
    max_url_length: int = DeadlineProtocol.max_url_length,
) -> type[DeadlineProtocol]:
    """The protocol class for ``uvicorn.Config(http=...)``, with these deadlines and limits."""
    check_uvicorn()
    limits = {
        "header_timeout": header_timeout,
        "send_timeout": send_timeout,
        "max_header_size": max_header_size,
        "max_headers": max_headers,
        "max_url_length": max_url_length,
    }
    return type("DeadlineProtocol", (DeadlineProtocol,), {**limits, "__module__": __name__})


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
