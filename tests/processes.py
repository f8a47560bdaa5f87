"""Gateways as real processes: ``python -m elicitation_gateway --port 0``, as a deployment runs them."""

import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
LISTENING = re.compile(rb"listening on (http://[^\s\"]+)")


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


def die_with_parent() -> None:
    """For ``preexec_fn``: the child gets SIGTERM if the test process dies without stopping it (Linux)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


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
                preexec_fn=die_with_parent,
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
        """Gone without a word, as a crashed or evicted process is."""
        if self.running:
            assert self.process is not None
            self.process.kill()
            self.process.wait(10)

    def terminate(self) -> int:
        """SIGTERM, as a rolling update stops it; returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(15)

    def log(self) -> str:
        return self.output.read_text(errors="replace")[-3000:]

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=10)
