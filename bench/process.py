"""Servers under test as child processes, and what ``/proc`` says about a process."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from bench.probe import PROBE_FILE_ENV, read_probe

REPOSITORY = Path(__file__).resolve().parents[1]
PACKAGE = "elicitation_gateway"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LISTENING = re.compile(r"listening on http://([^\s:]+):(\d+)")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far (``/proc/<pid>/stat`` fields 14 and 15)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` (``VmRSS`` in ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def peak_rss_bytes(pid: int) -> int:
    """The most resident memory ``pid`` has had (``VmHWM`` in ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


class ServerProcess:
    """A server started as ``python -m <module> --port 0``, with its log and probe file in a temp dir.

    ``app_dir`` is where the ``elicitation_gateway`` package is imported from (this repository by
    default), so another copy of the service can be measured with the same harness. Everything else,
    the baseline and the probe among them, comes from this harness, whatever ``app_dir`` holds.
    """

    def __init__(self, module: str, *, env: dict[str, str] | None = None, app_dir: Path = REPOSITORY) -> None:
        self.module = module
        self._workdir = Path(tempfile.mkdtemp(prefix="bench-"))
        self.log_path = self._workdir / "server.log"
        self.probe_path = self._workdir / "probe.jsonl"
        # The server runs in its own directory, which holds only a link to the package measured: it
        # comes first on the path, and the harness's own modules come from the repository after it.
        (self._workdir / PACKAGE).symlink_to(app_dir.resolve() / PACKAGE, target_is_directory=True)
        paths = [str(self._workdir), str(REPOSITORY), os.environ.get("PYTHONPATH", "")]
        self._env = {
            **os.environ,
            "GATEWAY_HOST": "127.0.0.1",
            **(env or {}),
            "PYTHONPATH": os.pathsep.join(path for path in paths if path),
            PROBE_FILE_ENV: str(self.probe_path),
        }
        self._process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def __enter__(self) -> Self:
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", self.module, "--port", "0"],
                cwd=self._workdir,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if (found := LISTENING.search(self.log_path.read_text(errors="replace"))) is not None:
                self.url = f"http://{found[1]}:{found[2]}"
                return self
            if self._process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.module} did not start:\n{self.log_path.read_text(errors='replace')}")

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
        if kind is None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        else:
            print(f"server log and probe kept in {self._workdir}", file=sys.stderr)

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    @property
    def host(self) -> str:
        return self.url.split("//")[1].rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return rss_bytes(self.pid)

    def peak_rss_bytes(self) -> int:
        return peak_rss_bytes(self.pid)

    def probe(self) -> tuple[dict, list[tuple[int, float]], list[tuple[int, int, float, int]]]:
        return read_probe(self.probe_path)

    def stop(self) -> None:
        """SIGTERM (the gateway finishes its questions), then SIGKILL if it lingers."""
        if self._process is None or self._process.poll() is not None:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
