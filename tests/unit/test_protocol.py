"""The deadlines' protocol against the uvicorn it subclasses, and its read deadline's judgement.

The deadlines themselves are tested over real sockets in tests/http/test_slow_clients.py.
"""

import logging
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httptools
import pytest
import uvicorn
from packaging.requirements import Requirement
from packaging.version import Version
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from elicitation_gateway.server.protocol import OVERRIDDEN, DeadlineProtocol, check_uvicorn, deadline_protocol

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_installed_uvicorn_has_what_the_deadlines_hook_into():
    check_uvicorn()
    for name in OVERRIDDEN:  # each is also the subclass's own, calling uvicorn's
        assert name in vars(DeadlineProtocol)


@pytest.mark.parametrize("name", OVERRIDDEN)
def test_a_uvicorn_without_one_of_them_is_refused_loudly(monkeypatch, name):
    monkeypatch.delattr(HttpToolsProtocol, name)
    with pytest.raises(RuntimeError, match=name):
        deadline_protocol(10, 30)


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
