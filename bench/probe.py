"""An event-loop lag and garbage-collection probe, started inside a server process.

The probe sleeps ``interval`` seconds in a loop and records how late it wakes up: that is how long the
loop was busy with something else (a long callback, a garbage collection). Garbage-collection pauses
are timed separately through ``gc.callbacks``. Samples go to a JSON-lines file the benchmark reads
after each measured window; every timestamp is ``time.monotonic_ns()``, which on Linux is the same
clock in every process.
"""

import asyncio
import contextlib
import gc
import json
import os
import resource
import time
from pathlib import Path
from typing import Any, TextIO

import uvicorn

PROBE_FILE_ENV = "BENCH_PROBE_FILE"
INTERVAL = 0.01
FLUSH_EVERY = 0.5


def raise_open_file_limit() -> None:
    """Thousands of subscribers need thousands of sockets: lift the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class LoopProbe:
    def __init__(self, path: Path, interval: float = INTERVAL) -> None:
        self._path = path
        self._interval = interval
        self._lags: list[tuple[int, float]] = []
        self._gcs: list[tuple[int, int, float, int]] = []
        self._gc_started = 0
        self._task: asyncio.Task[None] | None = None
        self._file: TextIO | None = None

    def start(self, **facts: Any) -> None:
        """Start on the running loop; ``facts`` (loop and protocol classes) go to the file's first line."""
        loop = asyncio.get_running_loop()
        header = {"pid": os.getpid(), "loop": f"{type(loop).__module__}.{type(loop).__name__}", **facts}
        self._file = self._path.open("a", buffering=1)  # line-buffered: one write per flush
        self._file.write(json.dumps({"header": header}) + "\n")
        gc.callbacks.append(self._on_gc)
        self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        flushed = time.monotonic_ns()
        while True:
            before = time.monotonic_ns()
            await asyncio.sleep(self._interval)
            after = time.monotonic_ns()
            self._lags.append((after, max(0.0, (after - before) / 1e6 - self._interval * 1e3)))
            if after - flushed >= FLUSH_EVERY * 1e9:
                self._flush()
                flushed = after

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.monotonic_ns()
            return
        ended = time.monotonic_ns()
        self._gcs.append((ended, info["generation"], (ended - self._gc_started) / 1e6, info["collected"]))

    def _flush(self) -> None:
        record = {
            "lag": [[t, round(ms, 3)] for t, ms in self._lags],
            "gc": [[t, generation, round(ms, 3), collected] for t, generation, ms, collected in self._gcs],
        }
        self._lags, self._gcs = [], []
        assert self._file is not None
        self._file.write(json.dumps(record) + "\n")


def probed(server_class: type[uvicorn.Server]) -> type[uvicorn.Server]:
    """``server_class`` with a :class:`LoopProbe` started on its loop, when ``BENCH_PROBE_FILE`` is set."""

    class ProbedServer(server_class):  # type: ignore[misc, valid-type]
        async def startup(self, sockets: Any = None) -> None:
            path = os.environ.get(PROBE_FILE_ENV)
            if path:
                http = self.config.http_protocol_class
                LoopProbe(Path(path)).start(http=f"{http.__module__}.{http.__name__}")
            await super().startup(sockets)

    ProbedServer.__name__ = f"Probed{server_class.__name__}"
    return ProbedServer


def read_probe(
    path: Path,
) -> tuple[dict[str, Any], list[tuple[int, float]], list[tuple[int, int, float, int]]]:
    """``(header, lag samples, gc pauses)`` from a probe file (empty if the server never started)."""
    header: dict[str, Any] = {}
    lags: list[tuple[int, float]] = []
    gcs: list[tuple[int, int, float, int]] = []
    with contextlib.suppress(FileNotFoundError), path.open() as file:
        for line in file:
            if not line.endswith("\n"):
                break  # being written
            record = json.loads(line)
            if "header" in record:
                header = record["header"]
                continue
            lags.extend((t, ms) for t, ms in record["lag"])
            gcs.extend((t, generation, ms, collected) for t, generation, ms, collected in record["gc"])
    return header, lags, gcs
