"""A request's head as the HTTP layer meets it, over raw sockets: bounded in bytes, headers and URL
as it arrives (``431``, ``414``, then the connection closes), and held to RFC 9112's ``Host`` rules
(exactly one in HTTP/1.1; an absolute-form target's authority wins over it).

A client sending megabytes of headers, with no credentials and a foreign ``Host``, costs the server no
more memory than the limit, and nobody else notices.
"""

import json
import re
import socket
import threading
from pathlib import Path

import httpx
import pytest

from tests.helpers import form, text_properties
from tests.processes import GatewayProcess
from tests.raw_http import RawResponse, head, raw_request

MAX_HEADER_SIZE = 65_536
MAX_HEADERS = 100
MAX_URL_LENGTH = 8192
FLOOD_MB = 50
RSS_SLACK_MB = 40


def parse(received: bytes) -> RawResponse:
    """The first response in ``received``."""
    head_, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head_.decode("latin-1").split("\r\n")
    fields = (line.partition(":") for line in lines)
    headers = {name.strip().lower(): value.strip() for name, _, value in fields}
    length = int(headers.get("content-length", len(body)))
    return RawResponse(status=int(status_line.split(" ")[1]), headers=headers, body=body[:length])


def sent_while_reading(
    port: int, first: bytes, then: bytes = b"", repeat: int = 0, end: bytes = b""
) -> bytes:
    """Send ``first``, ``then`` ``repeat`` times and ``end`` from a thread, while this one reads until the
    server closes; what the server answered. The sender stops when the server no longer takes bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:

        def send() -> None:
            try:
                sock.sendall(first)
                for _ in range(repeat):
                    sock.sendall(then)
                sock.sendall(end)
            except OSError:
                pass  # refused and closed: the rest is not wanted

        sender = threading.Thread(target=send)
        sender.start()
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
        sender.join(60)
        assert not sender.is_alive()
    return received


def json_error(response: RawResponse) -> str:
    assert response.headers["content-type"] == "application/json", response
    return json.loads(response.body)["error"]


def exact_head(size: int, headers: int = 3) -> bytes:
    """A ``GET /livez`` head of exactly ``size`` bytes (the empty line included) with ``headers``
    headers, padded in its last one."""
    lines = [b"GET /livez HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    lines += [b"X-Pad-%d: x" % number for number in range(headers - 3)]
    padding = size - len(b"\r\n".join([*lines, b"X-Last: "]) + b"\r\n\r\n")
    assert padding >= 0
    return b"\r\n".join([*lines, b"X-Last: " + b"p" * padding]) + b"\r\n\r\n"


# ---------------------------------------------------------------------------------------------------
# Megabytes of headers, against a gateway process


def memory_mb(pid: int, field: str) -> float:
    found = re.search(rf"^{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.MULTILINE)
    assert found is not None
    return int(found.group(1)) / 1024


@pytest.fixture(scope="module")
def process(tmp_path_factory: pytest.TempPathFactory):
    gateway = GatewayProcess("heads", tmp_path_factory.mktemp("heads"), env={"GATEWAY_LOG_LEVEL": "warning"})
    gateway.start()
    yield gateway
    gateway.terminate()


FLOODS = {
    # 50 MB of tiny headers, as an attacker sent them: the header count is passed first.
    "many headers": (b"a: b\r\n" * 10_000, "more than 100 headers"),
    # One header value of 50 MB: bytes that never make a header the parser hands over.
    "one endless header": (b"v" * 60_000, "larger than 65536 bytes"),
}


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
@pytest.mark.parametrize("flood", FLOODS)
async def test_tens_of_megabytes_of_headers_are_431_and_never_held(process, flood):
    chunk, reason = FLOODS[flood]
    port = int(process.url.rsplit(":", 1)[1])
    async with httpx.AsyncClient(base_url=process.url, timeout=30) as other:
        assert (await other.get("/livez")).status_code == 200
        before = memory_mb(process.pid, "VmRSS")
        peak_before = memory_mb(process.pid, "VmHWM")
        start = b"GET /question HTTP/1.1\r\nHost: evil.example\r\nX-Flood: " if "endless" in flood else b""
        start = start or b"GET /question HTTP/1.1\r\nHost: evil.example\r\n"
        repeat = FLOOD_MB * 1_000_000 // len(chunk)
        refused = parse(sent_while_reading(port, start, chunk, repeat, end=b"\r\n\r\n"))
        assert refused.status == 431, refused
        assert json_error(refused) == "headers_too_large"
        assert reason in json.loads(refused.body)["message"]
        # The others go on being served, on a connection kept from before and on a new one.
        assert (await other.get("/livez")).status_code == 200
        async with httpx.AsyncClient(base_url=process.url, timeout=30) as fresh:
            assert (await fresh.get("/livez")).status_code == 200
        grown = memory_mb(process.pid, "VmRSS") - before
        peak = memory_mb(process.pid, "VmHWM") - max(before, peak_before)
    assert grown < RSS_SLACK_MB, f"RSS grew by {grown:.0f} MB"
    assert peak < RSS_SLACK_MB, f"the peak grew by {peak:.0f} MB"


def test_clients_are_served_while_one_floods(process):
    """A kept-alive client makes requests the whole time another sends 50 MB of headers."""
    port = int(process.url.rsplit(":", 1)[1])
    served: list[int] = []
    flooding = threading.Event()
    flooding.set()

    def others() -> None:
        with httpx.Client(base_url=process.url, timeout=30) as client:
            while flooding.is_set() or not served:
                served.append(client.get("/livez").status_code)

    other = threading.Thread(target=others)
    other.start()
    try:
        start = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        received = sent_while_reading(port, start, b"a: b\r\n" * 10_000, 800)
    finally:
        flooding.clear()
        other.join(60)
    assert parse(received).status == 431
    assert served
    assert set(served) == {200}


# ---------------------------------------------------------------------------------------------------
# Each limit, and just under it


def test_a_head_at_the_size_limit_is_served_and_one_byte_more_is_431(server):
    assert len(exact_head(MAX_HEADER_SIZE)) == MAX_HEADER_SIZE
    served = raw_request(server.port, exact_head(MAX_HEADER_SIZE))
    assert served.status == 200, served
    refused = raw_request(server.port, exact_head(MAX_HEADER_SIZE + 1))
    assert (refused.status, json_error(refused)) == (431, "headers_too_large")
    assert refused.headers["connection"] == "close"


def test_a_hundred_headers_are_served_and_one_more_is_431(server):
    served = raw_request(server.port, exact_head(2000, headers=MAX_HEADERS))
    assert served.status == 200, served
    refused = raw_request(server.port, exact_head(2000, headers=MAX_HEADERS + 1))
    assert (refused.status, json_error(refused)) == (431, "headers_too_large")
    assert "more than 100 headers" in json.loads(refused.body)["message"]


def url_of_length(length: int) -> str:
    url = "/livez?pad="
    return url + "u" * (length - len(url))


def test_a_url_at_the_limit_is_served_and_one_byte_more_is_414(server):
    host = [(b"Host", b"127.0.0.1")]
    served = raw_request(server.port, head("GET", url_of_length(MAX_URL_LENGTH), host))
    assert served.status == 200, served
    refused = raw_request(server.port, head("GET", url_of_length(MAX_URL_LENGTH + 1), host))
    assert (refused.status, json_error(refused)) == (414, "url_too_long")
    # The message says which limit, never the URL (it may hold credentials).
    assert "GATEWAY_MAX_URL_LENGTH" in json.loads(refused.body)["message"]
    assert "uuuu" not in json.loads(refused.body)["message"]


def test_a_request_line_that_never_ends_is_414_before_it_does(server):
    """A megabyte of request line, no line end: refused once past the URL's limit, without waiting
    for the header deadline."""
    received = sent_while_reading(server.port, b"GET /", b"a" * 10_000, 100)
    refused = parse(received)
    assert (refused.status, json_error(refused)) == (414, "url_too_long")


def test_a_refused_head_after_a_served_request_on_one_connection(server):
    """Pipelined in one write: the first request is answered, the second's oversized head is 431 (its
    head begins within a read, so it is counted as the parser hands its headers over)."""
    first = b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    second = b"GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (b"X-Pad: " + b"p" * 1000 + b"\r\n") * 80
    received = sent_while_reading(server.port, first + second + b"\r\n")
    answered, _, rest = received.partition(b"\r\n\r\n")
    assert answered.startswith(b"HTTP/1.1 200 "), received[:200]
    refused = parse(rest[rest.index(b"HTTP/1.1 ") :])
    assert (refused.status, json_error(refused)) == (431, "headers_too_large")


def test_the_limits_are_settings(make_server):
    small = make_server(max_header_size=4096, max_headers=10, max_url_length=256)
    assert raw_request(small.port, exact_head(4096, headers=10)).status == 200
    assert raw_request(small.port, exact_head(4097)).status == 431
    assert raw_request(small.port, exact_head(1000, headers=11)).status == 431
    assert raw_request(small.port, head("GET", url_of_length(256), [(b"Host", b"127.0.0.1")])).status == 200
    assert raw_request(small.port, head("GET", url_of_length(257), [(b"Host", b"127.0.0.1")])).status == 414


# ---------------------------------------------------------------------------------------------------
# Host (RFC 9112 §3.2)


async def test_an_http_1_1_request_without_host_is_400_and_changes_nothing(server, client):
    body = json.dumps(form(text_properties(1))).encode()
    headers = [(b"Content-Type", b"application/json"), (b"Content-Length", str(len(body)).encode())]
    refused = raw_request(server.port, head("POST", "/elicitations", headers) + body)
    assert (refused.status, json_error(refused)) == (400, "invalid_host")
    assert "Host" in json.loads(refused.body)["message"]
    assert (await client.get("/question")).json() == []


@pytest.mark.parametrize("version", ["1.1", "1.0"])
def test_more_than_one_host_is_400(server, version):
    hosts = [(b"Host", b"127.0.0.1"), (b"Host", b"evil.example")]
    refused = raw_request(server.port, head("GET", "/question", hosts, version=version))
    assert (refused.status, json_error(refused)) == (400, "invalid_host")


async def test_the_authority_of_an_absolute_form_target_is_the_host_judged(server, client):
    body = json.dumps(form(text_properties(1))).encode()
    headers = [
        (b"Host", b"localhost"),
        (b"Content-Type", b"application/json"),
        (b"Content-Length", str(len(body)).encode()),
    ]
    refused = raw_request(server.port, head("POST", "http://evil.example/elicitations", headers) + body)
    assert (refused.status, json_error(refused)) == (421, "host_not_allowed")
    assert "evil.example" in json.loads(refused.body)["message"]
    assert (await client.get("/question")).json() == []
    for target in ("http://user:secret@evil.example/question", "https://evil.example:443/question"):
        assert raw_request(server.port, head("GET", target, [(b"Host", b"127.0.0.1")])).status == 421
    # Without Host (HTTP/1.0) the target's authority is judged all the same.
    without_host = head("GET", "http://evil.example/question", [], version="1.0")
    assert raw_request(server.port, without_host).status == 421


def test_an_absolute_form_target_the_gateway_serves_wins_over_a_foreign_host(server):
    """RFC 9112 §3.2.2: the target's authority, not Host, is the request's host."""
    for target in (f"http://localhost:{server.port}/question", f"http://[::1]:{server.port}/question"):
        served = raw_request(server.port, head("GET", target, [(b"Host", b"evil.example")]))
        assert (served.status, json.loads(served.body)) == (200, []), target
