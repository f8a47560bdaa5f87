"""Everything the gateway assumes of uvicorn beyond its public surface (``uvicorn.Config``,
``uvicorn.Server``, its logger names), in one place, each assumption checked at start-up.

uvicorn documents how to run it, not its insides; the gateway reaches into four of them:

- its HTTP protocol (``HttpToolsProtocol``, a private module), subclassed as :class:`DeadlineProtocol`:
  deadlines for slow clients, limits on a request's head, RFC 9112's ``Host`` rules, the
  connection's socket offered to the app (see below), and each response's head written with the
  first chunk of its body, one write where uvicorn makes two (:class:`HeadWithBody`);
- its log records: the ERROR it logs when an app ends a response unfinished, left out when the app
  did so on purpose (:class:`DeliberateEnds`), and the shape of its access records, which the log
  format reads and from which the query string is removed (:func:`access_parts`);
- what it does when an app returns before its response's last chunk: it closes the connection,
  which is how an event stream drops a client that stopped reading (:func:`end_unfinished_on_purpose`);
- its server's signal handling and start-up, where the gateway finishes questions before stopping
  and says where it listens (:class:`StoppableServer`).

``ASSUMPTIONS`` names each thing relied on; :func:`check_uvicorn` verifies every one against the
installed uvicorn, its methods by their signatures and the rest by serving requests on one of its
protocols over a recorded transport and starting one of its servers on a loopback socket, and
raises :class:`UvicornMismatch` naming the first that does not hold. ``elicitation-gateway serve``
exits with that message before it starts; pyproject.toml allows only the uvicorn minor these were
checked against.

The protocol's limits and deadlines
-----------------------------------

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
:func:`~.protocol.limit_send_buffer`. Lines about connections are logged as
``elicitation_gateway.server.protocol``.
"""

import asyncio
import concurrent.futures
import functools
import inspect
import logging
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import FrameType
from typing import Any

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from elicitation_gateway.server.protocol import (
    SEND_BUFFER,
    address,
    logger,
    refusal,
    reset,
    route_of,
    unsent,
)

ERROR_LOGGER = "uvicorn.error"
ACCESS_LOGGER = "uvicorn.access"


@dataclass(frozen=True)
class Assumption:
    """One thing the gateway relies on that uvicorn does not promise."""

    name: str
    what: str


HOOKS = {
    "connection_made": ("transport",),
    "connection_lost": ("exc",),
    "data_received": ("data",),
    "on_message_begin": (),
    "on_url": ("url",),
    "on_header": ("name", "value"),
    "on_headers_complete": (),
    "on_body": ("body",),
    "on_message_complete": (),
    "on_response_complete": (),
    "pause_writing": (),
    "resume_writing": (),
}
"""The methods of uvicorn's protocol that :class:`DeadlineProtocol` overrides, each calling uvicorn's,
with their parameters after ``self``."""

OVERRIDDEN = tuple(HOOKS)

ASSUMPTIONS = (
    Assumption(
        "hooks",
        "HttpToolsProtocol defines "
        + ", ".join(f"{name}({', '.join(params)})" for name, params in HOOKS.items()),
    ),
    Assumption(
        "constructor",
        "uvicorn makes the protocol class given as Config(http=...) itself, as cls(config=, server_state=, "
        "app_state=): a subclass needs no constructor of its own",
    ),
    Assumption(
        "loggers",
        f"the protocol logs through its `logger` ({ERROR_LOGGER}) and, while `access_log` is true, "
        f"its `access_logger` ({ACCESS_LOGGER}), both handed to each request's cycle",
    ),
    Assumption(
        "parser",
        "the protocol's `parser` is its httptools parser: get_http_version() says the request's "
        "version when its headers end",
    ),
    Assumption(
        "scope",
        "on_message_begin makes `scope`, the very dict the request's app is given",
    ),
    Assumption(
        "headers",
        "the headers on_header is given, and those given before uvicorn's on_headers_complete runs, "
        "are the app's scope['headers']",
    ),
    Assumption(
        "cycle",
        "the protocol's `cycle` is the request being answered; its `response_complete` is false until "
        "the response's last chunk is sent, true from then on",
    ),
    Assumption(
        "response_complete",
        "on_response_complete is called once each response's last chunk is sent",
    ),
    Assumption(
        "cycle_transport",
        "the cycle made by on_headers_complete writes its response through its `transport` attribute, "
        "the head in one write, then each chunk of the body",
    ),
    Assumption(
        "access_record",
        f"{ACCESS_LOGGER} logs each response as one INFO record whose arguments are (client, method, "
        "path with its query string, HTTP version, status)",
    ),
    Assumption(
        "flow",
        "an app's send waits while the transport has paused the protocol's writing (pause_writing), "
        "until resume_writing: an event stream holds at most the high-water mark unsent",
    ),
    Assumption(
        "unfinished_closes",
        "when an app returns before its response's last chunk, uvicorn closes the connection",
    ),
    Assumption(
        "unfinished_logged",
        f"... and logs it as one ERROR record on {ERROR_LOGGER} without arguments or exception, in the "
        "request's own task",
    ),
    Assumption(
        "bad_request",
        "a request httptools cannot parse is answered 400 and its transport closed within data_received",
    ),
    Assumption(
        "server",
        "uvicorn.Server's signal handler is its handle_exit(sig, frame), which sets `should_exit` (false "
        "until then) to stop in order; startup(sockets) serves them, its asyncio servers then in `servers`",
    ),
)
"""Each thing relied on, by name, in the order :func:`check_uvicorn` verifies them."""

_BY_NAME = {assumption.name: assumption for assumption in ASSUMPTIONS}


class UvicornMismatch(RuntimeError):
    """The installed uvicorn no longer does what one of ``ASSUMPTIONS`` says."""

    def __init__(self, name: str, detail: str) -> None:
        self.assumption = _BY_NAME[name]
        super().__init__(
            f"uvicorn {uvicorn.__version__} does not do what the gateway relies on ({name}: "
            f"{self.assumption.what}): {detail}. elicitation_gateway/server/uvicorn_internals.py needs "
            "updating for this uvicorn, or install the uvicorn pyproject.toml asks for"
        )


# ---------------------------------------------------------------------------------------------------
# Responses ended unfinished on purpose


_unfinished_on_purpose: ContextVar[bool] = ContextVar("unfinished_on_purpose", default=False)


def end_unfinished_on_purpose() -> None:
    """Say that the response being served ends without its last chunk on purpose, and has logged why:
    when the app returns, uvicorn closes the connection (the client sees the response cut off), and
    its ERROR line for it is left out. Only the request's own task sees the mark."""
    _unfinished_on_purpose.set(True)


def is_unfinished_line(record: logging.LogRecord) -> bool:
    """Whether ``record`` has the shape of uvicorn's line for a response ended unfinished: an ERROR
    without arguments or exception (an app's exception comes with one)."""
    return record.levelno == logging.ERROR and not record.args and record.exc_info is None


class DeliberateEnds(logging.Filter):
    """On ``uvicorn.error``: leaves out uvicorn's line for a response that said it ends unfinished on
    purpose (uvicorn logs it in the request's task, which set the mark). Every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_unfinished_on_purpose.get() and is_unfinished_line(record))


# ---------------------------------------------------------------------------------------------------
# Access records

ACCESS_PARTS = ("client", "method", "path", "http_version", "status")
"""The arguments of uvicorn's access record, in order: it logs ``'%s - "%s %s HTTP/%s" %d'``."""


def access_parts(record: logging.LogRecord) -> dict[str, Any] | None:
    """The parts of one of uvicorn's access records by name (the path with its query string), or None
    for a record of another shape."""
    args = record.args
    if not isinstance(args, tuple) or len(args) != len(ACCESS_PARTS) or not isinstance(args[2], str):
        return None
    return dict(zip(ACCESS_PARTS, args, strict=True))


def set_access_path(record: logging.LogRecord, path: str) -> None:
    """Have an access record (one :func:`access_parts` reads) name ``path`` instead."""
    assert isinstance(record.args, tuple)
    record.args = (*record.args[:2], path, *record.args[3:])


# ---------------------------------------------------------------------------------------------------
# The protocol

LINGER = 2.0
"""Seconds a refused client's further bytes are read and dropped before its connection is closed: closed
at once with bytes unread, the system would reset it, and the client might lose the refusal."""


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
        if not self._counting_raw:  # _charge, inline: a head's most frequent call
            self._head_bytes += len(name) + len(value) + 4  # ": " and CRLF
            if self._head_bytes > self.max_header_size:
                self._refuse_head_size()
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
        cycle = getattr(self, "cycle", None)
        if cycle is not None and cycle.transport is self._connection:  # not an upgrade's
            cycle.transport = HeadWithBody(self._connection, cycle)

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
        logger.info("refused a request from %s: %s", address(transport), message)
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
        transport.write(refusal(status, code, message))
        if transport.can_write_eof():
            transport.write_eof()  # the refusal, then the end: what the client still sends is dropped
            self._header_timer = asyncio.get_running_loop().call_later(LINGER, reset, transport)
        else:
            transport.close()

    # -- deadlines ---------------------------------------------------------------------------------

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_timer is None:
            self._unsent = unsent(self._connection)
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
            address(transport),
            self.header_timeout,
        )
        reset(transport)

    def _reading_late(self) -> None:
        self._send_timer = None
        transport = self._connection
        left = unsent(transport)
        if 0 < left < self._unsent:  # it read some: slow, not gone
            self._unsent = left
            self._send_timer = asyncio.get_running_loop().call_later(self.send_timeout, self._reading_late)
            return
        if left == 0:
            return
        scope = getattr(self, "scope", None) or {}
        cycle = getattr(self, "cycle", None)
        ended_unfinished = transport.is_closing() and not getattr(cycle, "response_complete", True)
        logger.log(
            logging.DEBUG if ended_unfinished else logging.INFO,
            "dropped a client that read nothing for %g s: %s (from %s)",
            self.send_timeout,
            route_of(scope),
            address(transport),
        )
        reset(transport)


class HeadWithBody:
    """A request's view of its connection's transport that writes the response's head with the first
    chunk of its body: one write (one system call, one segment) where uvicorn makes two. The head is
    held until the body's first chunk, and no longer than the current step of the loop: a response whose
    body comes later (an event stream) has its head sent at the end of the step, as before.

    Only the first write of each request is held: once it is out, the request's ``cycle`` is handed the
    connection's transport back, and everything else it writes goes straight to it."""

    __slots__ = ("_cycle", "_held", "_transport")

    JOINED = 65_536
    """A body chunk up to this size is copied after the head into one write; a longer one is written
    after it (a copy of a large chunk costs more than the second write)."""

    def __init__(self, transport: asyncio.Transport, cycle: Any) -> None:
        self._transport = transport
        self._cycle = cycle
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._done()
            if len(data) <= self.JOINED:
                self._transport.write(held + data)
            else:
                self._transport.write(held)
                self._transport.write(data)
        elif self._cycle is not None:
            self._held = bytes(data)
            asyncio.get_running_loop().call_soon(self.flush)
        else:
            self._transport.write(data)

    def flush(self) -> None:
        """Write the held head, if any (at the end of the step that wrote it, or before a close)."""
        held = self._held
        if held is not None:
            self._done()
            if not self._transport.is_closing():
                self._transport.write(held)

    def _done(self) -> None:
        self._held = None
        if self._cycle is not None:
            self._cycle.transport = self._transport
            self._cycle = None

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


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


# ---------------------------------------------------------------------------------------------------
# The start-up check


def check_uvicorn(protocol_class: type | None = None, server_class: type | None = None) -> None:
    """Verify every one of ``ASSUMPTIONS`` against uvicorn's protocol and server classes, or those
    given instead (uvicorn's own are checked once a process); raise :class:`UvicornMismatch` naming the
    first that does not hold."""
    if protocol_class is None and server_class is None:
        _check_installed()
        return
    protocol_class = protocol_class or HttpToolsProtocol
    server_class = server_class or uvicorn.Server
    _check_hooks(protocol_class)
    _check_constructor(protocol_class)
    _check_server_methods(server_class)

    async def both() -> None:
        await _probe(protocol_class)
        await _probe_server(server_class)

    # Served on a loop of its own, in a thread of its own: the caller may be running a loop.
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="uvicorn-check") as pool:
        pool.submit(asyncio.run, both()).result(timeout=10)


@functools.cache
def _check_installed() -> None:
    check_uvicorn(HttpToolsProtocol, uvicorn.Server)


def _check_hooks(protocol_class: type) -> None:
    for name, params in HOOKS.items():
        method = inspect.getattr_static(protocol_class, name, None)
        owner = next((cls for cls in protocol_class.__mro__ if name in vars(cls)), object)
        if not callable(method) or owner in (asyncio.Protocol, asyncio.BaseProtocol, object):
            raise UvicornMismatch("hooks", f"{protocol_class.__name__} defines no {name}")
        found = tuple(inspect.signature(method).parameters)[1:]
        if found != params:
            raise UvicornMismatch("hooks", f"{name} takes ({', '.join(found)}), not ({', '.join(params)})")


def _check_constructor(protocol_class: type) -> None:
    params = inspect.signature(protocol_class.__init__).parameters
    missing = [name for name in ("config", "server_state", "app_state") if name not in params]
    if missing:
        raise UvicornMismatch("constructor", f"its __init__ takes no {', '.join(missing)}")


SERVER_METHODS = {"handle_exit": ("sig", "frame"), "startup": ("sockets",)}
"""The methods of uvicorn's Server that :class:`StoppableServer` overrides, with their parameters."""


def _check_server_methods(server_class: type) -> None:
    """By what each may be called with: sse-starlette (under the ``mcp`` SDK) puts a wrapper of its
    own, taking any arguments, in place of uvicorn's handle_exit."""
    for name, params in SERVER_METHODS.items():
        method = inspect.getattr_static(server_class, name, None)
        if not callable(method):
            raise UvicornMismatch("server", f"{server_class.__name__} defines no {name}")
        try:
            inspect.signature(method).bind(None, *params)
        except TypeError:
            found = tuple(inspect.signature(method).parameters)[1:]
            raise UvicornMismatch(
                "server", f"{name} takes ({', '.join(found)}), not ({', '.join(params)})"
            ) from None


@contextmanager
def _stage(name: str) -> Iterator[None]:
    """What fails within is reported as the assumption ``name``."""
    try:
        yield
    except UvicornMismatch:
        raise
    except Exception as error:
        raise UvicornMismatch(name, f"{type(error).__name__}: {error}") from error


class _Recorded(asyncio.Transport):
    """A transport that keeps what is written to it and whether it was closed; no socket."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.writes = 0
        self.closed = False
        self.protocol: Any = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5000) if name in ("peername", "sockname") else default

    def write(self, data: Any) -> None:
        self.written += bytes(data)
        self.writes += 1

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def set_protocol(self, protocol: Any) -> None:
        self.protocol = protocol

    def get_protocol(self) -> Any:
        return self.protocol

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _Kept(logging.Handler):
    """Keeps each record, and whether :class:`DeliberateEnds` let it through where it was logged."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[tuple[logging.LogRecord, bool]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record, DeliberateEnds().filter(record)))


def _private_logger(name: str, handler: logging.Handler) -> logging.Logger:
    """A logger of that name outside logging's hierarchy: what the probe logs reaches no real handler."""
    made = logging.Logger(name, logging.DEBUG)
    made.addHandler(handler)
    return made


async def _settle(done: Callable[[], bool]) -> bool:
    """Let the loop run until ``done()`` (a request's task is a few steps of it)."""
    for _ in range(200):
        if done():
            return True
        await asyncio.sleep(0)
    return done()


MARK = "elicitation_gateway.uvicorn_check"


async def _probe(base: type) -> None:
    """Serve a request answered whole, then one ended unfinished, on a protocol made from ``base``
    the way :class:`DeadlineProtocol` is, then one it cannot parse; check what each assumption says."""
    seen: dict[str, Any] = {"completed": 0}

    class Probe(base):  # type: ignore[valid-type, misc]
        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.scope["extensions"] = {MARK: {}}

        def on_header(self, name: bytes, value: bytes) -> None:
            super().on_header(name, b"given" if name.lower() == b"x-probe" else value)

        def on_headers_complete(self) -> None:
            seen["version"] = self.parser.get_http_version()
            super().on_header(b"x-added", b"added")
            super().on_headers_complete()
            self.cycle.transport = HeadWithBody(self.cycle.transport, self.cycle)

        def on_response_complete(self) -> None:
            seen["completed"] += 1
            super().on_response_complete()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/whole":
            seen["extensions"] = scope.get("extensions")
            seen["headers"] = list(scope["headers"])
            try:
                await send(
                    {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
                )
                seen["complete_before"] = protocol.cycle.response_complete
                await send({"type": "http.response.body", "body": b"ok", "more_body": False})
                seen["complete_after"] = protocol.cycle.response_complete
            except Exception as error:
                seen["failed"] = f"{type(error).__name__}: {error}"
                raise
        elif scope["path"] == "/paced":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
            protocol.pause_writing()  # as the transport does past its high-water mark
            seen["paused"] = True
            await send({"type": "http.response.body", "body": b"o", "more_body": True})
            seen["sent_once_resumed"] = seen.get("resumed", False)
            await send({"type": "http.response.body", "body": b"k", "more_body": False})
        else:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"x", "more_body": True})
            end_unfinished_on_purpose()
            seen["returned"] = True

    config = uvicorn.Config(app, http=Probe, log_config=None, log_level=None, lifespan="off")
    errors, accesses = _Kept(), _Kept()
    with _stage("constructor"):
        protocol = Probe(config=config, server_state=ServerState(), app_state={})
    with _stage("loggers"):
        if protocol.logger is not logging.getLogger(ERROR_LOGGER):
            raise UvicornMismatch("loggers", f"it logs through {protocol.logger.name!r}")
        if protocol.access_logger is not logging.getLogger(ACCESS_LOGGER):
            raise UvicornMismatch("loggers", f"its access lines go to {protocol.access_logger.name!r}")
        protocol.logger = _private_logger(ERROR_LOGGER, errors)
        protocol.access_logger = _private_logger(ACCESS_LOGGER, accesses)
        protocol.access_log = True

    transport = _Recorded()
    transport.protocol = protocol
    try:
        with _stage("scope"):
            protocol.connection_made(transport)
            protocol.data_received(b"GET /whole?q=1 HTTP/1.1\r\nHost: probe\r\nX-Probe: sent\r\n\r\n")
            await _settle(lambda: "complete_after" in seen or transport.closed)
        with _stage("parser"):
            if seen.get("version") != "1.1":
                raise UvicornMismatch("parser", f"an HTTP/1.1 request's version read {seen.get('version')!r}")
        if "headers" not in seen:
            raise UvicornMismatch(
                "scope", f"the request never reached the app (it wrote {transport.written[:40]!r})"
            )
        if not isinstance(seen.get("extensions"), dict) or MARK not in seen["extensions"]:
            raise UvicornMismatch("scope", "the app's scope is not the one on_message_begin made")
        headers = seen["headers"]
        if (b"x-probe", b"given") not in headers or (b"x-added", b"added") not in headers:
            raise UvicornMismatch("headers", f"the app was given {headers!r}")
        if "failed" in seen:
            raise UvicornMismatch("cycle", f"answering a request failed: {seen['failed']}")
        if (seen.get("complete_before"), seen.get("complete_after")) != (False, True):
            raise UvicornMismatch(
                "cycle",
                f"response_complete was {seen.get('complete_before')!r} before the last chunk and "
                f"{seen.get('complete_after')!r} after",
            )
        await _settle(lambda: seen["completed"] > 0)
        if seen["completed"] != 1:
            raise UvicornMismatch("response_complete", f"it was called {seen['completed']} times")
        if (
            transport.writes != 1
            or not transport.written.startswith(b"HTTP/1.1 200 ")
            or not (transport.written.endswith(b"\r\n\r\nok"))
        ):
            raise UvicornMismatch(
                "cycle_transport", f"it wrote {transport.written[:40]!r} in {transport.writes} writes"
            )
        with _stage("access_record"):
            shapes = [access_parts(record) for record, _ in accesses.records]
            expected = {"method": "GET", "path": "/whole?q=1", "http_version": "1.1", "status": 200}
            if len(shapes) != 1 or shapes[0] is None or {k: shapes[0][k] for k in expected} != expected:
                raise UvicornMismatch(
                    "access_record", f"it logged {[(r.msg, r.args) for r, _ in accesses.records]!r}"
                )
            if accesses.records[0][0].levelno != logging.INFO:
                raise UvicornMismatch("access_record", f"at {accesses.records[0][0].levelname}")
        if errors.records:
            raise UvicornMismatch("unfinished_logged", f"it logged {errors.records[0][0].getMessage()!r}")

        with _stage("flow"):
            protocol.data_received(b"GET /paced HTTP/1.1\r\nHost: probe\r\n\r\n")
            await _settle(lambda: "paused" in seen)
            await _settle(lambda: "sent_once_resumed" in seen)  # time to send, were it not held
            seen["resumed"] = True
            protocol.resume_writing()
            await _settle(lambda: "sent_once_resumed" in seen)
        if seen.get("sent_once_resumed") is not True:
            held = "went through while writing was paused" if "sent_once_resumed" in seen else "never went"
            raise UvicornMismatch("flow", f"a send {held}")

        with _stage("unfinished_closes"):
            protocol.data_received(b"GET /unfinished HTTP/1.1\r\nHost: probe\r\n\r\n")
            await _settle(lambda: transport.closed)
            await _settle(lambda: bool(errors.records))  # in case it logs after closing
        if not seen.get("returned") or not transport.closed:
            raise UvicornMismatch("unfinished_closes", "the connection stayed open")
        logged = [(record, passed) for record, passed in errors.records if record.levelno >= logging.WARNING]
        if len(logged) != 1 or not is_unfinished_line(logged[0][0]) or logged[0][1]:
            shown = ", ".join(repr((r.levelname, r.msg, r.args)) for r, _ in logged)
            raise UvicornMismatch("unfinished_logged", f"it logged {shown or 'nothing'}")
    finally:
        protocol.connection_lost(None)

    refused = _Recorded()
    with _stage("bad_request"):
        other = Probe(config=config, server_state=ServerState(), app_state={})
        other.logger = _private_logger(ERROR_LOGGER, logging.NullHandler())
        refused.protocol = other
        other.connection_made(refused)
        other.data_received(b"GET /\x01 HTTP/1.1\r\n\r\n")
        closed_within = refused.closed
        other.connection_lost(None)
    if not refused.written.startswith(b"HTTP/1.1 400 ") or not closed_within:
        raise UvicornMismatch("bad_request", f"it wrote {refused.written[:40]!r} and left it open")


async def _probe_server(server_class: type) -> None:
    """Start a server of ``server_class`` on a loopback socket (without an app's lifespan), see it
    serve that socket, and close it. It is not signalled: sse-starlette's wrapper of handle_exit would
    also end every stream of the process (tests/unit/test_uvicorn_internals.py signals one)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    config = uvicorn.Config(app, log_config=None, log_level=None, lifespan="off")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server: Any = None
    try:
        with _stage("server"):
            listener.bind(("127.0.0.1", 0))
            config.load()
            server = server_class(config)
            if getattr(server, "should_exit", None) is not False:
                found = getattr(server, "should_exit", "missing")
                raise UvicornMismatch("server", f"a new server's should_exit is {found!r}")
            server.lifespan = config.lifespan_class(config)  # as uvicorn's serve makes it
            await server.startup(sockets=[listener])
            served = [bound.getsockname() for each in server.servers for bound in each.sockets]
            if listener.getsockname() not in served:
                raise UvicornMismatch("server", f"its servers listen on {served!r}")
    finally:
        for each in getattr(server, "servers", None) or []:
            each.close()
        listener.close()


# ---------------------------------------------------------------------------------------------------
# The server


class StoppableServer(uvicorn.Server):
    """uvicorn's Server, with the moments the gateway acts on as methods of its own (see ``server`` in
    ``ASSUMPTIONS``):

    - :meth:`on_stop_signal` when SIGINT or SIGTERM arrives (by default, :meth:`stop`);
    - :meth:`stop`: stop as uvicorn does on that signal (in order; at once, a second time);
    - :attr:`stopping`: whether it is stopping;
    - :meth:`on_starting`, on the server's loop, then :meth:`on_listening` with the addresses served.
    """

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.on_stop_signal(sig, frame)

    def on_stop_signal(self, sig: int, frame: FrameType | None) -> None:
        self.stop(sig, frame)

    def stop(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)

    @property
    def stopping(self) -> bool:
        return self.should_exit

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.on_starting()
        await super().startup(sockets)
        self.on_listening([bound.getsockname() for each in self.servers for bound in each.sockets])

    def on_starting(self) -> None:
        pass

    def on_listening(self, addresses: list[Any]) -> None:
        pass
