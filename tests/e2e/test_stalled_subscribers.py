"""Subscribers that connect and never read, with big questions pending, against the gateway as a process.

Each is owed about 3.6 MB of announcements. What the server holds for one, in its own memory and in the
kernel's send queue of its connection, stays within ``GATEWAY_SUBSCRIBER_BUFFER``; they are dropped after
``GATEWAY_SEND_TIMEOUT``; a subscriber that reads gets every event meanwhile, and one that stopped
reading and reconnects with its ``Last-Event-ID`` gets what it missed.
"""

import asyncio
import contextlib
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import Frame, form, read_events, text_properties, until
from tests.processes import GatewayProcess

STALLED = 60
BIG_QUESTIONS = 4
BIG = 900_000
ALLOWANCE = 256 * 1024  # GATEWAY_SUBSCRIBER_BUFFER's default
OVERHEAD = 48 * 1024
"""What an idle stream costs the process besides what it is sent (about 24 KB), with room to spare."""
MB = 1024 * 1024


def big_question(number: int) -> dict[str, Any]:
    description = f"{number} " + "x" * BIG
    return form({"type": "object", "properties": {"k": {"type": "string", "description": description}}})


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def send_queues(port: int) -> list[int]:
    """The kernel's send queue, in bytes, of each connection the server on ``port`` holds (Linux)."""
    queues = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, queue = fields[1], fields[3], fields[4]
                if int(local.rsplit(":", 1)[1], 16) == port and state == "01":  # established
                    queues.append(int(queue.split(":")[0], 16))
    return queues


def never_reading(port: int) -> socket.socket:
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", port))
    raw.sendall(b"GET /event HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    return raw


def answered(raw: socket.socket) -> bool:
    """Whether the server has begun its response on ``raw`` (or ended the connection), without reading
    any of it: a peek leaves every byte where it is."""
    try:
        raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)  # bytes, or b"" once the server closed it
    except BlockingIOError:
        return False
    except OSError:  # reset: the server had it, and has dropped it already
        return True
    return True


@contextlib.contextmanager
def closing_all(sockets: list[socket.socket]) -> Iterator[list[socket.socket]]:
    try:
        yield sockets
    finally:
        for raw in sockets:
            raw.close()


async def subscribers(client: httpx.AsyncClient) -> int:
    found = re.search(r"^gateway_sse_subscribers (\S+)$", (await client.get("/metrics")).text, re.MULTILINE)
    assert found
    return int(float(found.group(1)))


async def steady_rss(pid: int) -> int:
    """The process's RSS once it stopped growing (the server wrote what it will)."""
    last = -MB
    async with asyncio.timeout(60):  # a safety net only
        while True:
            await asyncio.sleep(0.5)
            now = rss(pid)
            if abs(now - last) < MB // 4:
                return now
            last = now


async def test_stalled_subscribers_hold_at_most_their_allowance_and_are_dropped(tmp_path):
    env = {"GATEWAY_SEND_TIMEOUT": "2", "GATEWAY_MAX_TEXT_LENGTH": "1000000", "GATEWAY_TIMEOUT": "600"}
    gateway = GatewayProcess("stalled", tmp_path, env=env).start()
    port = int(gateway.url.rsplit(":", 1)[1])
    try:
        async with gateway.client() as client, read_events(client) as reader:
            # One that reads the first question's event, then stops reading.
            laggard = socket.create_connection(("127.0.0.1", port))
            laggard.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            laggard.sendall(b"GET /event HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            await until(lambda: _count_is(client, 2), what="the laggard subscribed")
            first = (await client.post("/elicitations", json=form(text_properties(1)))).json()
            asked_first = await reader.next("question.asked")
            assert asked_first.properties["id"] == first["id"]
            seen = b""
            while asked_first.id.encode() not in seen:
                seen += await asyncio.to_thread(laggard.recv, 65536)

            for number in range(BIG_QUESTIONS):
                assert (await client.post("/elicitations", json=big_question(number))).status_code == 201
            for _ in range(BIG_QUESTIONS):
                await reader.next("question.asked", timeout=30)

            before = await steady_rss(gateway.pid)
            with closing_all([never_reading(port) for _ in range(STALLED)]) as stalled:
                # Each answered (its response began), whether or not the first ones are dropped already:
                # on a busy machine, opening them all may take longer than GATEWAY_SEND_TIMEOUT.
                await until(lambda: all(map(answered, stalled)), timeout=30, what="every stream answered")
                held = await steady_rss(gateway.pid)
                queues = sorted(send_queues(port))[-STALLED:]  # the stalled ones hold the most

                # Within the allowance, in the process and in the kernel, for each.
                assert held - before < STALLED * (ALLOWANCE + OVERHEAD), (
                    f"{(held - before) / STALLED / 1024:.0f} KiB more RSS per stalled subscriber"
                )
                assert max(queues) <= ALLOWANCE, f"{max(queues) / 1024:.0f} KiB in a kernel send queue"

                # Dropped: only the reading subscriber is left; it gets every event meanwhile.
                await until(lambda: _count_is(client, 1), timeout=60, what="the stalled ones dropped")
                pending = (await client.get("/question")).json()
                for request in pending:
                    rejected = await client.post(f"/question/{request['id']}/reject")
                    assert rejected.status_code == 200
                finished = {(await reader.next("question.rejected", timeout=30)).properties["requestID"]}
                while len(finished) < len(pending):
                    finished.add((await reader.next("question.rejected", timeout=30)).properties["requestID"])
                assert finished == {request["id"] for request in pending}
            laggard.close()

            # The laggard comes back with the last id it read and gets exactly what it missed.
            missed = [frame.id for frame in question_frames(reader.seen)]
            assert missed[0] == asked_first.id
            async with read_events(client, headers={"Last-Event-ID": asked_first.id}) as resumed:
                replayed: list[str] = []
                while len(replayed) < len(missed) - 1:
                    frame = await resumed.next(timeout=30)
                    if frame.type.startswith("question."):
                        replayed.append(frame.id)
            assert replayed == missed[1:]
    finally:
        gateway.terminate()


def question_frames(frames: list[Frame]) -> list[Frame]:
    return [frame for frame in frames if frame.type.startswith("question.")]


async def _count_is(client: httpx.AsyncClient, count: int) -> bool:
    return await subscribers(client) == count
