"""Processes the tests start, and gateways as real processes (``python -m elicitation_gateway --port 0``,
as a deployment runs them).

Every process a test starts goes through one mechanism, so that none outlives its test, even one that
fails: ``preexec_fn=child_setup`` (it dies with the test process, and takes SIGINT as from a terminal),
and ``reaped(...)`` / ``areaped(...)`` (or a fixture's finalizer calling ``reap`` / ``areap``), which
kill it if it still runs, wait for it and close its pipes.
"""

import asyncio
import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx

ROOT = Path(__file__).resolve().parents[1]
LISTENING = re.compile(rb"listening on (http://[^\s\"]+)")
P = TypeVar("P", bound="subprocess.Popen[Any]")


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 20) -> None:
    """Until ``process`` accepts connections on ``port``; failing at once if it exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert process.poll() is None, f"{what} exited"
            assert time.monotonic() < deadline, f"{what} did not start within {timeout} s"
            time.sleep(0.05)


def child_setup() -> None:
    """For ``preexec_fn`` of every process a test starts: it gets SIGTERM if the test process dies
    without stopping it (Linux), and SIGINT does what it does from a terminal. A test run started in
    the background (``make test &`` from a script, some CI runners) has SIGINT ignored, and every
    child would inherit that: a Python child would never see KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def reap(process: "subprocess.Popen[Any]", timeout: float = 10) -> None:
    """Kill ``process`` unless it has exited, wait for it, and close its pipes."""
    if process.poll() is None:
        process.kill()
    process.wait(timeout)
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def stop(process: "subprocess.Popen[Any]", timeout: float = 10) -> None:
    """SIGTERM, as an operator stops it (a server stops its own children); killed if it has not exited
    within ``timeout``; reaped."""
    try:
        if process.poll() is None:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout)
    finally:
        reap(process)


@contextlib.contextmanager
def reaped(process: P) -> Iterator[P]:
    """``process`` for the block; reaped when it ends, however it ends."""
    try:
        yield process
    finally:
        reap(process)


async def areap(process: asyncio.subprocess.Process, timeout: float = 10) -> None:
    """Kill an asyncio ``process`` unless it has exited, and wait until it and its pipes are done
    (its transport closed: no "unclosed transport" warning in a later test)."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    async with asyncio.timeout(timeout):
        await process.communicate()


@contextlib.asynccontextmanager
async def areaped(process: asyncio.subprocess.Process) -> AsyncIterator[asyncio.subprocess.Process]:
    """An asyncio ``process`` for the block; reaped when it ends, however it ends."""
    try:
        yield process
    finally:
        await areap(process)


async def start_process(*command: str, **options: Any) -> asyncio.subprocess.Process:
    """``asyncio.create_subprocess_exec`` with ``child_setup``; reap it (``areaped``, ``areap``)."""
    return await asyncio.create_subprocess_exec(*command, preexec_fn=child_setup, **options)


class GatewayProcess:
    """One gateway process with ``args`` and ``env`` (``GATEWAY_*`` of the test's own environment are
    left out); ``start()`` again after a kill gives a new process on a new port."""

    def __init__(
        self, name: str, directory: Path, args: list[str] | None = None, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.directory = directory
        self.args = args or []
        self.env = env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self._starts = 0

    def launch(self) -> None:
        self._starts += 1
        self.output = self.directory / f"{self.name}-{self._starts}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OPENCODE_"))}
        env.update({"GATEWAY_SHUTDOWN_GRACE": "3", "GATEWAY_DIRECTORY": "/srv/gateway-tests", **self.env})
        with self.output.open("wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "elicitation_gateway", "--port", "0", *self.args],
                cwd=ROOT,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                preexec_fn=child_setup,
            )

    def wait_until_listening(self) -> "GatewayProcess":
        assert self.process is not None
        deadline = time.monotonic() + 30
        while not (found := LISTENING.search(self.output.read_bytes())):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gateway {self.name} did not start:\n{self.log()}")
            time.sleep(0.05)
        self.url = found.group(1).decode()
        return self

    def start(self) -> "GatewayProcess":
        self.launch()
        return self.wait_until_listening()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        """Gone without a word, as a crashed or evicted process is (also what ends it after a test)."""
        if self.process is not None:
            reap(self.process)

    def terminate(self) -> int:
        """SIGTERM, as a rolling update stops it; returns the exit code (killed if it does not stop)."""
        assert self.process is not None
        try:
            self.process.send_signal(signal.SIGTERM)
            return self.process.wait(15)
        finally:
            reap(self.process)

    def __enter__(self) -> "GatewayProcess":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()

    def log(self) -> str:
        return self.output.read_text(errors="replace")[-3000:]

    def logged(self, text: str) -> bool:
        """Whether the process has printed ``text``: what a test waits for rather than for a time."""
        return text in self.output.read_text(errors="replace")

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=10)
