"""Slow and vanishing clients over real sockets: half-sent headers, bodies cut short, readers that stop.

Each is ended by the server (``GATEWAY_HEADER_TIMEOUT``, ``GATEWAY_SEND_TIMEOUT``) with one INFO line
naming the route (never its query string), never an ERROR, and nobody else notices.
"""

import asyncio
import contextlib
import json
import logging
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers import form, text_properties, until

HALF_A_REQUEST = b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n"
"""A request line and one header, and never the empty line that ends the headers."""
TOKEN = "c2VjcmV0OnRva2Vu"  # sent in query strings: it must never reach the log


class Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def logged_by_uvicorn() -> Iterator[list[logging.LogRecord]]:
    """What uvicorn's own loggers write: they stop at ``uvicorn``, short of the root where caplog
    listens. Entered after the server is made (making one configures these loggers again)."""
    handler = Collected()
    logging.getLogger("uvicorn").addHandler(handler)
    try:
        yield handler.records
    finally:
        logging.getLogger("uvicorn").removeHandler(handler)


def assert_no_error(caplog: pytest.LogCaptureFixture, uvicorn_records: list[logging.LogRecord]) -> None:
    for record in [*caplog.records, *uvicorn_records]:
        assert record.levelno < logging.ERROR, f"{record.name}: {record.getMessage()}"
        assert record.exc_info is None, f"a traceback from {record.name}: {record.getMessage()}"


def assert_names_route(record: logging.LogRecord, route: str) -> None:
    """The line names the method and path, and nothing of the query string."""
    assert route in record.getMessage()
    assert "auth_token" not in record.getMessage()
    assert TOKEN not in record.getMessage()


def lines(caplog: pytest.LogCaptureFixture, text: str, level: int | None = None) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage() and (level is None or r.levelno == level)]


def connected(port: int, first: bytes) -> socket.socket:
    """A connection that has sent ``first``: connected and written before the server accepts it, so
    its header deadline never starts before these bytes are there, however busy this process is."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(first)
    sock.setblocking(False)
    return sock


async def held_open(sock: socket.socket, trickle: bool) -> bytes:
    """Holds a :func:`connected` socket open, sending a byte every 0.2 s (``trickle``) or nothing,
    until the server ends it; returns what the server sent before."""
    received = b""
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        while True:
            try:
                async with asyncio.timeout(0.2):
                    chunk = await reader.read(65536)
            except TimeoutError:
                if trickle:
                    writer.write(b"x")  # more of a header name, never its end
                continue
            if not chunk:
                return received
            received += chunk
    except ConnectionError:
        return received
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def read_response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One response with a ``Content-Length``: its head and its body."""
    head = await reader.readuntil(b"\r\n\r\n")
    found = re.search(rb"\r\ncontent-length: *(\d+)", head, re.IGNORECASE)
    assert found, head
    return head, await reader.readexactly(int(found.group(1)))


# ---------------------------------------------------------------------------------------------------
# Headers that never end


async def test_connections_that_never_finish_their_headers_are_closed_while_others_are_served(
    make_server, caplog
):
    caplog.set_level(logging.DEBUG, logger="elicitation_gateway.server.protocol")
    server = make_server(header_timeout=1)
    kinds = [(HALF_A_REQUEST, True)] * 100 + [(HALF_A_REQUEST, False)] * 100 + [(b"", False)] * 100
    with logged_by_uvicorn() as uvicorn_records, contextlib.ExitStack() as closing:
        sockets = [(connected(server.port, first), trickle) for first, trickle in kinds]
        for sock, _ in sockets:  # even if the test fails before the tasks have them
            closing.callback(sock.close)
        held = [asyncio.create_task(held_open(sock, trickle)) for sock, trickle in sockets]
        served = 0
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as kept_alive:
            async with asyncio.timeout(30):
                while not all(task.done() for task in held):
                    assert (await kept_alive.get("/livez")).status_code == 200
                    if served % 5 == 0:  # and on a connection of its own
                        async with httpx.AsyncClient(base_url=server.url, timeout=10) as fresh:
                            assert (await fresh.get("/livez")).status_code == 200
                    served += 1
                    await asyncio.sleep(0.05)
            received = await asyncio.gather(*held)
            assert (await kept_alive.get("/livez")).status_code == 200

    assert received == [b""] * len(kinds)  # cut without a response
    assert served > 1
    # One line each: INFO for a request begun, DEBUG for a connection that sent nothing.
    closed = "no complete request headers within 1 s"
    assert len(lines(caplog, closed, logging.INFO)) == 200
    assert len(lines(caplog, closed, logging.DEBUG)) == 100
    assert_no_error(caplog, uvicorn_records)


async def test_a_kept_alive_connection_that_stalls_in_its_next_request_is_closed(make_server, caplog):
    caplog.set_level(logging.INFO, logger="elicitation_gateway.server.protocol")
    server = make_server(header_timeout=1)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(HALF_A_REQUEST + b"\r\n")
        head, _ = await read_response(reader)
        assert head.startswith(b"HTTP/1.1 200")
        writer.write(HALF_A_REQUEST)  # the next request, half sent: uvicorn's keep-alive timer is off
        async with asyncio.timeout(10):
            with contextlib.suppress(ConnectionError):
                assert await reader.read() == b""
    finally:
        writer.close()
    assert len(lines(caplog, "no complete request headers", logging.INFO)) == 1


async def test_slow_but_steady_requests_within_the_deadline_are_served(make_server):
    """Three requests on one connection, each sent in pieces over about 1.2 s: together longer than
    the 3 s deadline, each well within it."""
    server = make_server(header_timeout=3)
    request = HALF_A_REQUEST + b"User-Agent: a slow but steady client\r\n\r\n"
    pieces = [request[start : start + 8] for start in range(0, len(request), 8)]
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        for _ in range(3):
            for piece in pieces:
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(1.2 / len(pieces))
            head, body = await read_response(reader)
            assert head.startswith(b"HTTP/1.1 200"), head
            assert json.loads(body)["status"] == "ok"
    finally:
        writer.close()


# ---------------------------------------------------------------------------------------------------
# Bodies cut short


MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def body_for(route: str) -> dict[str, Any]:
    if route == "/mcp":
        return {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "question", "arguments": {}},
        }
    if route.endswith("/reply"):
        return {"answers": [["yes"]]}
    return form(text_properties(1))


@pytest.mark.parametrize("route", ["/elicit", "/elicitations", "/question/{id}/reply", "/mcp"])
async def test_a_client_that_leaves_mid_body_is_one_info_line_and_changes_nothing(
    server, client, caplog, route
):
    caplog.set_level(logging.INFO)
    asked = None
    if "{id}" in route:
        asked = (await client.post("/elicitations", json=form(text_properties(1)))).json()["id"]
    path = route.format(id=asked)
    body = json.dumps(body_for(route)).encode()
    before = (await client.get("/question")).json()

    with logged_by_uvicorn() as uvicorn_records:
        _, writer = await asyncio.open_connection("127.0.0.1", server.port)
        head = (
            f"POST {path}?auth_token={TOKEN} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Accept: {MCP_HEADERS['Accept']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        writer.write(head.encode() + body[: len(body) // 2])
        await writer.drain()
        await until(lambda: len(server.server.server_state.tasks) > 0, what="the request being read")
        writer.close()  # half the body sent
        await until(lambda: bool(lines(caplog, "client disconnected")), what="the line about the client")
        await asyncio.sleep(0.2)  # room for any other line about it (there must be none)

    [line] = lines(caplog, "client disconnected")
    assert line.levelno == logging.INFO
    assert_names_route(line, f"POST {path}")
    assert_no_error(caplog, uvicorn_records)

    # Nothing changed: no question asked, the question not answered; the next request works.
    assert (await client.get("/question")).json() == before
    if asked:
        replied = await client.post(f"/question/{asked}/reply", json={"answers": [["yes"]]})
        assert replied.status_code == 200, replied.text
        assert (await client.get("/question")).json() == []
    elif route == "/mcp":
        assert (await client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)).status_code == 200
    else:
        assert (await client.post("/elicitations", json=form(text_properties(1)))).status_code == 201


async def test_a_line_break_in_the_path_cannot_forge_a_log_line(server, client, caplog):
    caplog.set_level(logging.INFO)
    path = "/question/que%0A2026-01-01%20ERROR%20forged/reply"
    body = json.dumps({"answers": [["yes"]]}).encode()
    _, writer = await asyncio.open_connection("127.0.0.1", server.port)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    writer.write(head.encode() + body[:5])
    await writer.drain()
    await until(lambda: len(server.server.server_state.tasks) > 0, what="the request being read")
    writer.close()
    await until(lambda: bool(lines(caplog, "client disconnected")), what="the line about the client")
    [line] = lines(caplog, "client disconnected")
    assert line.getMessage().endswith(f"POST {path}")
    assert "\n" not in logging.Formatter().format(line)


# ---------------------------------------------------------------------------------------------------
# Readers that stop


def subscriber_that_never_reads(port: int) -> socket.socket:
    """``GET /event`` on a socket with a tiny receive buffer that is never read."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    raw.connect(("127.0.0.1", port))
    raw.sendall(f"GET /event?auth_token={TOKEN} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return raw


def big_question(size: int = 200_000) -> dict[str, Any]:
    return form({"type": "object", "properties": {"k": {"type": "string", "description": "x" * size}}})


async def publish_until_dropped(server, caplog: pytest.LogCaptureFixture) -> None:
    """Ask big questions, each an event for the subscriber, until a line says it was dropped."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        for _ in range(200):
            if lines(caplog, "dropped a", logging.INFO):
                return
            assert (await client.post("/elicitations", json=big_question())).status_code == 201
            await asyncio.sleep(0.05)
    raise AssertionError("the subscriber that never reads was never dropped")


async def test_a_subscriber_that_never_reads_is_dropped_with_one_info_line_and_freed(make_server, caplog):
    caplog.set_level(logging.DEBUG, logger="elicitation_gateway")
    server = make_server(send_timeout=1, max_text_length=1_000_000)
    connections = server.server.server_state.connections
    with logged_by_uvicorn() as uvicorn_records:
        raw = subscriber_that_never_reads(server.port)
        try:
            await until(lambda: server.gateway.subscribers == 1, what="the subscription")
            await publish_until_dropped(server, caplog)
            # Its connection is gone, and what was written to it with it, though it never read.
            await until(lambda: not (connections or server.gateway.subscribers), what="the connection freed")
        finally:
            raw.close()

    [dropped] = lines(caplog, "dropped a", logging.INFO)
    assert_names_route(dropped, "GET /event")
    assert_no_error(caplog, uvicorn_records)


async def test_a_subscriber_dropped_by_its_stream_logs_one_info_line_and_no_uvicorn_error(
    make_server, caplog
):
    """The event stream drops a client one of whose writes waits ``GATEWAY_SEND_TIMEOUT``; here the
    connection's own read deadline is later, so the stream is first: it ends its response unfinished,
    which uvicorn would log at ERROR, and the connection then closes without another INFO line."""
    caplog.set_level(logging.DEBUG, logger="elicitation_gateway")
    server = make_server(send_timeout=1, max_text_length=1_000_000)
    server.server.config.http_protocol_class.send_timeout = 4  # this server's own protocol class
    connections = server.server.server_state.connections
    with logged_by_uvicorn() as uvicorn_records:
        raw = subscriber_that_never_reads(server.port)
        try:
            await until(lambda: server.gateway.subscribers == 1, what="the subscription")
            await publish_until_dropped(server, caplog)
            await until(lambda: not connections, timeout=10, what="the connection freed")
        finally:
            raw.close()

    [dropped] = lines(caplog, "dropped a", logging.INFO)
    assert dropped.name == "elicitation_gateway.server.sse"
    assert_names_route(dropped, "GET /event")
    assert lines(caplog, "dropped a client that read nothing", logging.DEBUG)
    assert_no_error(caplog, uvicorn_records)


async def test_a_client_that_never_reads_a_big_response_is_dropped_and_freed(make_server, caplog):
    caplog.set_level(logging.INFO, logger="elicitation_gateway.server.protocol")
    server = make_server(send_timeout=1, max_text_length=1_000_000)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        for _ in range(8):  # GET /question: about 7 MB
            assert (await client.post("/elicitations", json=big_question(900_000))).status_code == 201
    connections = server.server.server_state.connections
    with logged_by_uvicorn() as uvicorn_records:
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        try:
            raw.connect(("127.0.0.1", server.port))
            raw.sendall(b"GET /question HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            await until(lambda: bool(lines(caplog, "dropped a", logging.INFO)), timeout=10, what="the drop")
            await until(lambda: not connections, what="the connection freed")
        finally:
            raw.close()
    [dropped] = lines(caplog, "dropped a", logging.INFO)
    assert_names_route(dropped, "GET /question")
    assert_no_error(caplog, uvicorn_records)


async def test_a_slow_reader_that_keeps_reading_gets_the_whole_response(make_server):
    """About 4.5 MB read at about 1 MB/s: several read deadlines long, progress in each."""
    server = make_server(send_timeout=1, max_text_length=1_000_000)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        for _ in range(5):
            assert (await client.post("/elicitations", json=big_question(900_000))).status_code == 201
        expected = (await client.get("/question")).content

    def read_slowly() -> bytes:
        with socket.create_connection(("127.0.0.1", server.port)) as raw:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            raw.sendall(b"GET /question HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            received = bytearray()
            pause = threading.Event()
            while chunk := raw.recv(65536):
                received += chunk
                pause.wait(0.05)
            return bytes(received)

    received = await asyncio.to_thread(read_slowly)
    assert received.startswith(b"HTTP/1.1 200")
    assert body_of(received) == expected


def body_of(response: bytes) -> bytes:
    """The body of a whole HTTP/1.1 response, chunked or not."""
    head, _, body = response.partition(b"\r\n\r\n")
    if b"\r\ntransfer-encoding: chunked" not in head.lower():
        return body
    whole = bytearray()
    while True:
        size, _, body = body.partition(b"\r\n")
        if int(size, 16) == 0:
            return bytes(whole)
        whole += body[: int(size, 16)]
        body = body[int(size, 16) + 2 :]
