"""HTTP/1.x requests written byte by byte, for what httpx will not send: no ``Host`` at all, bytes
that are not ASCII in a header, a chunked body that is empty."""

import socket
from dataclasses import dataclass


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def raw_request(port: int, request: bytes, timeout: float = 10) -> RawResponse:
    """Send ``request`` as it is (it should ask for ``Connection: close`` or be HTTP/1.0) and read the
    response until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return RawResponse(status=int(status_line.split(" ")[1]), headers=headers, body=body)


def head(method: str, target: str, headers: list[tuple[bytes, bytes]], version: str = "1.1") -> bytes:
    """A request head: ``method target HTTP/version``, the headers as given, and ``Connection: close``."""
    lines = [f"{method} {target} HTTP/{version}".encode("latin-1")]
    lines += [name + b": " + value for name, value in headers]
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"
