"""Slow clients as operators meet them: the gateway run as a process, and behind deploy/nginx.conf.

(Over a test server's real sockets, every case: tests/http/test_slow_clients.py.)
"""

import asyncio
import contextlib
import signal
import socket
import time

import httpx

from elicitation_gateway.settings import Settings
from tests.e2e import test_deploy
from tests.e2e.test_cli import gateway_process
from tests.e2e.test_deploy import nginx_directive

proxy = test_deploy.proxy  # nginx with deploy/nginx.conf in front of the test gateway (a fixture)

HALF_A_REQUEST = b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def closed_by_the_server(raw: socket.socket, within: float) -> bytes:
    """Wait for the other end to close ``raw`` (reading what it sent before); fail after ``within`` s."""
    raw.settimeout(within)
    received = b""
    with contextlib.suppress(ConnectionError):
        while chunk := raw.recv(65536):
            received += chunk
    return received


async def test_the_service_closes_a_connection_whose_headers_never_end():
    with gateway_process("--port", "0", env={"GATEWAY_HEADER_TIMEOUT": "1"}) as (process, url):
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as raw:
            raw.sendall(HALF_A_REQUEST)
            assert await asyncio.to_thread(closed_by_the_server, raw, 10) == b""
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/livez")).status_code == 200
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=15)
    assert "INFO elicitation_gateway.server.protocol: closed a connection from 127.0.0.1:" in output
    assert "no complete request headers within 1 s" in output
    assert " ERROR " not in output
    assert "Traceback" not in output


def test_the_proxy_keeps_the_gateways_deadlines_for_slow_clients():
    settings = Settings()
    assert int(nginx_directive("client_header_timeout").rstrip("s")) <= settings.header_timeout
    assert int(nginx_directive("client_body_timeout").rstrip("s")) <= settings.header_timeout
    assert int(nginx_directive("send_timeout").rstrip("s")) <= settings.send_timeout
    assert nginx_directive("reset_timedout_connection") == "on"


async def test_behind_nginx_half_sent_headers_are_cut_by_nginx_while_requests_pass(proxy):
    host, port = proxy.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as raw:
        raw.sendall(HALF_A_REQUEST)
        started = time.monotonic()
        closing = asyncio.create_task(asyncio.to_thread(closed_by_the_server, raw, 30))
        async with httpx.AsyncClient(base_url=proxy, timeout=10) as client:
            while not closing.done():
                assert (await client.get("/livez")).status_code == 200
                await asyncio.sleep(0.5)
        await closing  # nginx answers 408, or nothing at all, and closes
    header_timeout = int(nginx_directive("client_header_timeout").rstrip("s"))
    assert time.monotonic() - started >= header_timeout - 1  # by nginx's deadline, not sooner
