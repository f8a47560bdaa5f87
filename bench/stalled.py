"""Stalled subscribers: event streams that connect and never read, with big questions pending.

Each stalled ``GET /event`` is owed the announcement of every pending question (here about 20 MB):
what it costs the server is what the server holds for it until it is dropped, in the process (RSS)
and in the kernel (the socket's send queue). Meanwhile ``/livez`` is timed from a process of its own
(``tests/stall_probe.py``), and the loop-lag probe says how long the loop was held.
"""

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from typing import Any

import aiohttp
import httpx

from bench import loads
from bench.process import REPOSITORY, ServerProcess
from bench.scenarios import GATEWAY, Options, loop_lag, progress, with_each_run

SESSIONS = 4
MB = 1024 * 1024


def stalled_subscribers(options: Options) -> dict[str, Any]:
    """``options.runs`` measurements, each on a fresh gateway whose ``GATEWAY_SEND_TIMEOUT`` is
    ``options.stalled_send_timeout`` (30 s, the default, unless quick)."""
    each_run = []
    for run in range(1, options.runs + 1):
        count, questions = options.stalled_subscribers, options.stalled_questions
        progress(f"stalled subscribers: {count}, {questions} big questions pending{options.run_label(run)}")
        env = {
            "GATEWAY_LOG_LEVEL": options.log_level,
            "GATEWAY_STORE": options.store,
            "GATEWAY_TIMEOUT": "3600",
            "GATEWAY_SEND_TIMEOUT": str(options.stalled_send_timeout),
        }
        with ServerProcess(GATEWAY, env=env, app_dir=options.app_dir) as server:
            each_run.append(stalled(server, count, questions, options.stalled_send_timeout))
    return with_each_run(each_run)


def stalled_subscriber(host: str, port: int) -> socket.socket:
    """``GET /event`` on a socket with a small receive buffer that is never read."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect((host, port))
    raw.sendall(f"GET /event HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n".encode())
    return raw


def send_queues(port: int) -> list[int]:
    """The send queue, in bytes, of each of the server's established connections on ``port``."""
    listed = subprocess.run(
        ["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [int(line.split()[1]) for line in listed.splitlines() if line.split()]


def subscriber_count(server: ServerProcess) -> int:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith("gateway_sse_subscribers "):
            return int(float(line.split()[1]))
    return 0


async def ask_big_questions(server: ServerProcess, count: int) -> int:
    async with aiohttp.ClientSession(server.url, timeout=aiohttp.ClientTimeout(total=300)) as http:

        async def ask(number: int) -> int:
            body = loads.big_ask(f"stalled{number}")
            params = {"sessionID": f"ses_stall{number % SESSIONS}"}
            async with http.post(
                "/elicitations", data=body, headers=loads.JSON_HEADERS, params=params
            ) as reply:
                await reply.read()
                return reply.status

        statuses = [await ask(number) for number in range(count)]
    return statuses.count(201)


class LivezProbe:
    """``tests/stall_probe.py`` in a process of its own: ``/livez`` every 10 ms until ``stop()``, which
    returns each answer's latency in milliseconds (less the time the server's loop and the probe waited
    for a CPU: see the probe). Made once its connection answered: its first request
    also connects, and a connection made among hundreds may wait a second for its SYN to be sent again,
    which says nothing of the server."""

    def __init__(self, url: str, pid: int) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.stall_probe", url, str(pid)],
            cwd=REPOSITORY,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        self._process.stdout.readline()  # the first answer, connection included: not counted

    def stop(self) -> list[float]:
        printed, _ = self._process.communicate("", timeout=30)
        if self._process.returncode != 0:
            raise RuntimeError(f"the /livez probe failed (exit {self._process.returncode})")
        return [float(line) for line in printed.split() if not line.startswith("status")]


def spread(latencies: list[float]) -> dict[str, float | None]:
    ordered = sorted(latencies)
    return {
        "p99_ms": ordered[int(len(ordered) * 0.99)] if ordered else None,
        "max_ms": ordered[-1] if ordered else None,
    }


def stalled(server: ServerProcess, subscribers: int, questions: int, send_timeout: float) -> dict[str, Any]:
    """``subscribers`` streams that never read, opened at once with ``questions`` big ones pending (20:
    as many as the default per-session byte budget lets 4 sessions hold); ``/livez`` and the loop's lag
    while they connect and while they are dropped."""
    asked = asyncio.run(ask_big_questions(server, questions))
    with httpx.Client(base_url=server.url, timeout=30) as http:
        frame_bytes = len(http.get("/question").content)
    time.sleep(1.0)
    rss_before = server.rss_bytes()
    sockets: list[socket.socket] = []
    probe = LivezProbe(server.url, server.pid)
    try:
        began = time.monotonic_ns()
        for _ in range(subscribers):
            sockets.append(stalled_subscriber(server.host, server.port))
        # Until the server wrote what it will to each, and no more: its RSS stops growing.
        deadline = time.monotonic() + max(10.0, send_timeout / 2)
        last, steady = -1, 0
        while time.monotonic() < deadline and steady < 3:
            time.sleep(0.5)
            rss = server.rss_bytes()
            steady = steady + 1 if abs(rss - last) < MB else 0
            last = rss
        connected = time.monotonic_ns()
        connecting = probe.stop()
        rss_held = server.rss_bytes()
        queues = [queue for queue in send_queues(server.port) if queue > 0]
        held_subscribers = subscriber_count(server)
        # Until the server dropped them (or gave up waiting: four send timeouts).
        probe = LivezProbe(server.url, server.pid)
        deadline = time.monotonic() + 4 * send_timeout + 10
        while time.monotonic() < deadline and subscriber_count(server) > 0:
            time.sleep(0.5)
        dropped = time.monotonic_ns()
        left = subscriber_count(server)
        time.sleep(1.0)
        rss_after = server.rss_bytes()
    finally:
        for raw in sockets:
            with contextlib.suppress(OSError):
                raw.close()
        dropping = probe.stop()
    return {
        "subscribers": subscribers,
        "big_questions": asked,
        "backlog_mb": round(frame_bytes / MB, 1),
        "rss_before_mb": round(rss_before / MB, 1),
        "rss_held_mb": round(rss_held / MB, 1),
        "rss_per_subscriber_kb": round((rss_held - rss_before) / subscribers / 1024, 1),
        "kernel_send_queue_per_subscriber_kb": round(sum(queues) / subscribers / 1024, 1),
        "subscribers_held": held_subscribers,
        "seconds_until_dropped": round((dropped - began) / 1e9, 1) if left == 0 else None,
        "rss_after_drop_mb": round(rss_after / MB, 1),
        "livez_connecting": spread(connecting),
        "livez_dropping": spread(dropping),
        "loop_lag": loop_lag(server, began, connected),
        "loop_lag_dropping": loop_lag(server, connected, dropped),
    }
