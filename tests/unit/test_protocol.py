"""The deadlines' protocol against the uvicorn it subclasses, and its read deadline's judgement.

The deadlines themselves are tested over real sockets in tests/http/test_slow_clients.py.
"""

import asyncio
import logging
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httptools
import pytest
import uvicorn
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement
from packaging.version import Version
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from elicitation_gateway.server.uvicorn_internals import (
    OVERRIDDEN,
    DeadlineProtocol,
    HeadWithBody,
    _Recorded,
    check_uvicorn,
    deadline_protocol,
)

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_installed_uvicorn_has_what_the_deadlines_hook_into():
    check_uvicorn()
    for name in OVERRIDDEN:  # each is also the subclass's own, calling uvicorn's
        assert name in vars(DeadlineProtocol)


def test_each_server_gets_a_protocol_class_of_its_own():
    first, second = deadline_protocol(1, 2), deadline_protocol(3, 4)
    assert issubclass(first, HttpToolsProtocol)
    assert (first.header_timeout, first.send_timeout) == (1, 2)
    assert (second.header_timeout, second.send_timeout) == (3, 4)
    assert first is not second


class Transport:
    """What the read deadline asks of a transport; no socket, so only the buffer counts."""

    def __init__(self, unsent: int, closing: bool = False) -> None:
        self.unsent = unsent
        self.closing = closing
        self.aborted = False

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5000) if name == "peername" else None

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.aborted = True


def waiting(transport: Transport, unsent_before: int, response_complete: bool = False) -> DeadlineProtocol:
    """A connection whose read deadline just passed, ``unsent_before`` bytes unread when it was set."""
    protocol = DeadlineProtocol.__new__(DeadlineProtocol)  # its state alone: no uvicorn server behind it
    protocol._connection = transport  # type: ignore[assignment]
    protocol._unsent = unsent_before
    protocol.scope = {
        "method": "GET",
        "path": "/event",
        "raw_path": b"/event",
        "query_string": b"auth_token=x",
    }  # type: ignore[typeddict-item]
    protocol.cycle = SimpleNamespace(response_complete=response_complete)  # type: ignore[assignment]
    return protocol


async def test_a_client_that_read_some_gets_another_period():
    transport = Transport(unsent=60_000)
    protocol = waiting(transport, unsent_before=100_000)
    protocol._reading_late()
    assert not transport.aborted
    assert protocol._send_timer is not None
    assert protocol._unsent == 60_000  # the next period must show progress from here
    protocol._send_timer.cancel()


async def test_a_client_that_read_nothing_is_dropped_with_one_info_line(caplog):
    caplog.set_level(logging.DEBUG, logger="elicitation_gateway.server.protocol")
    transport = Transport(unsent=100_000)
    protocol = waiting(transport, unsent_before=100_000)
    protocol._reading_late()
    assert transport.aborted
    assert protocol._send_timer is None
    [line] = caplog.records
    assert line.levelno == logging.INFO
    assert "GET /event" in line.getMessage()
    assert "auth_token" not in line.getMessage()
    assert "127.0.0.1:5000" in line.getMessage()


@pytest.mark.parametrize(
    ("closing", "response_complete", "level"),
    [
        (False, False, logging.INFO),  # the response is still being written
        (True, True, logging.INFO),  # uvicorn closes after a whole response the client never read
        (True, False, logging.DEBUG),  # the app ended the response unfinished, and said why
    ],
)
async def test_the_line_is_info_unless_the_app_already_said_why(caplog, closing, response_complete, level):
    caplog.set_level(logging.DEBUG, logger="elicitation_gateway.server.protocol")
    transport = Transport(unsent=100_000, closing=closing)
    waiting(transport, unsent_before=100_000, response_complete=response_complete)._reading_late()
    assert transport.aborted
    assert [record.levelno for record in caplog.records] == [level]


async def test_a_buffer_written_out_meanwhile_ends_the_watch():
    transport = Transport(unsent=0)
    protocol = waiting(transport, unsent_before=100_000)
    protocol._reading_late()
    assert not transport.aborted
    assert protocol._send_timer is None


# ---------------------------------------------------------------------------------------------------
# What the limits assume of uvicorn, beyond the methods check_uvicorn finds


HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


def holding(transport: _Recorded) -> tuple[HeadWithBody, SimpleNamespace]:
    """A request's writer, and its cycle (uvicorn's writes through ``cycle.transport``)."""
    cycle = SimpleNamespace()
    cycle.transport = HeadWithBody(transport, cycle)
    return cycle.transport, cycle


async def test_a_head_goes_out_with_the_first_chunk_of_its_body_in_one_write():
    transport = _Recorded()
    writer, cycle = holding(transport)
    writer.write(HEAD)
    assert transport.writes == 0
    writer.write(b"ok")
    assert (transport.written, transport.writes) == (HEAD + b"ok", 1)
    assert cycle.transport is transport  # everything after the first chunk goes straight through
    writer.write(b"more")  # and so does a write through a writer kept from before
    assert (transport.written, transport.writes) == (HEAD + b"okmore", 2)
    await asyncio.sleep(0)  # the step's end finds nothing held
    assert transport.writes == 2


async def test_a_head_whose_body_comes_later_goes_out_at_the_end_of_the_step():
    transport = _Recorded()
    writer, cycle = holding(transport)
    writer.write(HEAD)
    await asyncio.sleep(0)
    assert (transport.written, transport.writes) == (HEAD, 1)
    assert cycle.transport is transport
    cycle.transport.write(b"event")
    assert (transport.written, transport.writes) == (HEAD + b"event", 2)


async def test_a_large_first_chunk_is_written_after_the_head_not_copied_onto_it():
    transport = _Recorded()
    writer, _ = holding(transport)
    writer.write(HEAD)
    body = bytes(HeadWithBody.JOINED + 1)
    writer.write(body)
    assert (transport.written, transport.writes) == (HEAD + body, 2)


async def test_a_close_writes_the_held_head_first_and_a_closed_transport_gets_nothing():
    transport = _Recorded()
    writer, _ = holding(transport)
    writer.write(HEAD)
    writer.close()
    assert (transport.written, transport.closed) == (HEAD, True)

    gone = _Recorded()
    writer, _ = holding(gone)
    writer.write(HEAD)
    gone.close()  # the connection was lost within the step
    await asyncio.sleep(0)
    assert gone.writes == 0
    assert writer.is_closing()  # the rest of the transport's surface is the transport's own


def test_uvicorn_is_pinned_below_its_next_minor():
    """A new minor may move what the protocol hooks into: it must be tried before it is allowed."""
    requirement = next(
        Requirement(line)
        for line in tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
        if Requirement(line).name == "uvicorn"
    )
    installed = Version(uvicorn.__version__)
    assert installed in requirement.specifier
    assert f"{installed.major}.{installed.minor + 1}" not in requirement.specifier


async def test_uvicorn_parses_with_an_httptools_parser_of_its_own():
    """The Host rule asks uvicorn's parser the request's HTTP version."""
    protocol_class = deadline_protocol(10, 30)
    config = uvicorn.Config(lambda scope, receive, send: None, http=protocol_class)
    protocol = protocol_class(config=config, server_state=ServerState(), app_state={})
    assert isinstance(protocol.parser, httptools.HttpRequestParser)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []

    def on_message_begin(self) -> None:
        self.calls.append(("begin", b""))

    def on_url(self, url: bytes) -> None:
        self.calls.append(("url", url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self.calls.append(("header", name + b": " + value))

    def on_headers_complete(self) -> None:
        self.calls.append(("complete", b""))


def test_httptools_hands_over_the_whole_url_before_the_first_header():
    """The Host rewrite reads an absolute-form target's authority when its first header comes; the
    URL arrives in pieces, one per read."""
    recorder = Recorder()
    parser = httptools.HttpRequestParser(recorder)
    for piece in (b"GET http://exa", b"mple.com/x HTTP/1.1\r\nHo", b"st: a\r\n\r\n"):
        parser.feed_data(piece)
    kinds = [kind for kind, _ in recorder.calls]
    assert kinds == ["begin", "url", "url", "header", "complete"]
    assert b"".join(value for kind, value in recorder.calls if kind == "url") == b"http://example.com/x"
    assert parser.get_http_version() == "1.1"


# ---------------------------------------------------------------------------------------------------
# The head's limit, whatever the reads a stream of requests arrives in


LIMIT = 4096
READ = 2 * LIMIT
"""The largest read in these tests (the system's are 256 KiB, beyond the 64 KiB limit): a head that
begins within a read may pass the limit by the part of its last header that read holds, so by less
than one read."""


class Recorded(asyncio.Transport):
    """A transport that keeps what is written to it; no socket."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.protocol: Any = None
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5000) if name in ("peername", "sockname") else default

    def get_protocol(self) -> Any:
        return self.protocol

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.closing = True

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def a_connection(**limits: Any) -> tuple[Any, Recorded, list[str]]:
    """The protocol on a recorded transport; each request it routes is answered at once (its path
    noted), as an app that answers without reading the body would."""
    served: list[str] = []

    class Answering(deadline_protocol(10, 30, **limits)):  # type: ignore[misc]
        def _start_asgi_task(self, cycle: Any, app: Any) -> None:
            served.append(cycle.scope["path"])
            cycle.response_complete = True

    config = uvicorn.Config(lambda scope, receive, send: None, http=Answering, log_level="warning")
    protocol = Answering(config=config, server_state=ServerState(), app_state={})
    transport = Recorded()
    transport.protocol = protocol
    protocol.connection_made(transport)
    return protocol, transport, served


def request(number: int, head_size: int, body_size: int) -> bytes:
    """``POST /r<number>`` whose head is ``head_size`` bytes (the empty line included), padded in one
    header, with a body of ``body_size`` bytes."""
    start = b"POST /r%d HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\nX-Pad: " % (number, body_size)
    padding = head_size - len(start) - len(b"\r\n\r\n")
    return start + b"p" * padding + b"\r\n\r\n" + b"b" * body_size


REQUESTS = st.lists(
    st.tuples(
        st.one_of(st.integers(80, LIMIT + 2 * READ), st.integers(LIMIT - 40, LIMIT + 40)),
        st.one_of(st.just(0), st.integers(0, 2 * READ)),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=400, deadline=None)
@given(
    requests=REQUESTS,
    reads=st.lists(st.one_of(st.integers(1, 300), st.integers(1, READ)), min_size=1, max_size=40),
)
async def test_heads_within_the_limit_are_served_and_those_past_it_refused_however_they_are_read(
    requests, reads
):
    protocol, transport, served = a_connection(max_header_size=LIMIT)
    stream = b"".join(request(number, head, body) for number, (head, body) in enumerate(requests))
    position = 0
    while position < len(stream) and not transport.closing:
        size = reads[position % len(reads)]
        protocol.data_received(stream[position : position + size])
        position += size
    try:
        refused_at = len(served)
        heads = [head for head, _ in requests]
        # Every head within the limit before the first refused one was served, in order...
        assert served == [f"/r{number}" for number in range(refused_at)]
        assert all(head <= LIMIT + max(reads) for head in heads[:refused_at])
        if refused_at < len(requests):
            # ...and the one refused was past the limit (never one within it), answered 431.
            assert heads[refused_at] > LIMIT
            assert transport.written.startswith(b"HTTP/1.1 431 ")
        else:
            assert transport.written == b""
    finally:
        if protocol._header_timer is not None:
            protocol._header_timer.cancel()
