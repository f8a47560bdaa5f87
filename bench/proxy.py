"""The proxy's passthrough: calls of a tool that asks nobody, made by a real ``mcp`` client straight to
the upstream MCP server (the bare baseline) and through ``elicitation-gateway proxy``, so that the
difference is what the proxy costs a call, in time and in CPU of every process involved.

The upstream is the proxy's test server (``tests.proxy.upstream``), started over stdio by whoever
connects to it (the client directly, or the proxy), or once over Streamable HTTP for both. The client
runs in the benchmark's own process; the proxy's ``--gateway`` is a closed port, since nobody is asked.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from bench.process import PACKAGE, REPOSITORY, cpu_seconds
from bench.scenarios import Options, median_of, progress, spread_ms

UPSTREAM = ["-m", "tests.proxy.upstream"]
NOBODY_ASKED = "http://127.0.0.1:9"
"""The proxy's gateway: the discard port, never reached, since the tool measured asks nobody."""
TOOL, ARGUMENTS = "quote", {"part": "hose", "quantity": 2}
ERAS = {"legacy": "legacy", "modern": "2026-07-28"}
"""The client's protocol era towards the proxy (or the bare upstream): ``mode`` of ``mcp.client.Client``.
The proxy itself speaks its default (``--upstream-era auto``: 2025-11-25) to the upstream."""
TRANSPORTS = ("stdio", "http")
PATHS = ("direct", "proxy")


def children(pid: int) -> set[int]:
    """The processes ``pid`` started that are still running."""
    found: set[int] = set()
    for tasks in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found.update(int(child) for child in tasks.read_text().split())
    return found


@dataclass
class Endpoint:
    """A connected client and the processes that serve its calls, by role."""

    client: Client
    processes: dict[str, int]

    def cpu(self) -> dict[str, float]:
        return {role: cpu_seconds(pid) for role, pid in self.processes.items()}

    def commands(self) -> dict[str, str]:
        """Each process's command line, without the interpreter: which process each figure is of."""
        lines = {
            role: Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            for role, pid in self.processes.items()
        }
        return {
            role: " ".join(part.decode(errors="replace") for part in line[1:]).strip()
            for role, line in lines.items()
        }


class Workplace:
    """Where the servers run: a temporary directory holding a link to the measured package (``--app-dir``)
    ahead of this repository on the path, as :class:`bench.process.ServerProcess` does; their stderr
    goes to a log there."""

    def __init__(self, app_dir: Path) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
        (self.directory / PACKAGE).symlink_to(app_dir.resolve() / PACKAGE, target_is_directory=True)
        paths = [str(self.directory), str(REPOSITORY), os.environ.get("PYTHONPATH", "")]
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("GATEWAY_")}
        self.env["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
        self.log_path = self.directory / "servers.log"
        self.log: IO[str] = self.log_path.open("a", encoding="utf-8")

    def parameters(self, *args: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable, args=list(args), env=self.env, cwd=self.directory
        )

    def close(self, failed: bool) -> None:
        self.log.close()
        if failed:
            print(f"proxy bench: server logs kept in {self.directory}", file=sys.stderr)
        else:
            shutil.rmtree(self.directory, ignore_errors=True)


class HttpUpstream:
    """The test upstream over Streamable HTTP at ``/mcp``, in a process of its own."""

    def __init__(self, place: Workplace) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.process = subprocess.Popen(
            [sys.executable, *UPSTREAM, "--http", str(port)],
            cwd=place.directory,
            env=place.env,
            stdin=subprocess.DEVNULL,
            stdout=place.log,
            stderr=place.log,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the HTTP upstream did not start (log: {place.log_path})")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.asynccontextmanager
async def connected(
    place: Workplace, path: str, era: str, http: HttpUpstream | None
) -> AsyncIterator[Endpoint]:
    """A client on ``path`` (``direct`` to the upstream, or through the ``proxy``), with its processes."""
    me = os.getpid()
    before = children(me)
    if path == "direct" and http is not None:
        transport: Any = streamable_http_client(http.url)
    elif path == "direct":
        transport = stdio_client(place.parameters(*UPSTREAM), errlog=place.log)
    else:
        upstream = ["--upstream", http.url] if http is not None else ["--", sys.executable, *UPSTREAM]
        proxy = ["-m", PACKAGE, "proxy", "--gateway", NOBODY_ASKED, *upstream]
        transport = stdio_client(place.parameters(*proxy), errlog=place.log)
    async with Client(transport, mode=ERAS[era]) as client:  # type: ignore[arg-type]
        # As a client does before calling (the 2026-07-28 era insists on it). Its answer also means the
        # proxy has started its upstream: a 2026-07-28 client connects without any exchange.
        await client.list_tools()
        processes = {"client": me}
        if path == "proxy" or http is None:
            (started,) = children(me) - before
            processes[path if path == "proxy" else "upstream"] = started
        if path == "proxy" and http is None:
            (processes["upstream"],) = children(processes["proxy"])
        if http is not None:
            processes["upstream"] = http.process.pid
        yield Endpoint(client, processes)


async def calls(endpoint: Endpoint, in_flight: int, warmup: float, duration: float) -> dict[str, Any]:
    """``in_flight`` callers, each calling the tool again as soon as its call returns, for ``warmup``
    seconds and then the measured ``duration``: the calls that end in it, and the CPU each process used."""
    start = time.monotonic() + warmup
    end = start + duration
    latency: list[int] = []
    errors = 0
    cpu: dict[str, dict[str, float]] = {}

    async def caller() -> None:
        nonlocal errors
        while time.monotonic() < end:
            began = time.perf_counter_ns()
            try:
                result = await endpoint.client.call_tool(TOOL, ARGUMENTS)
                failed = result.is_error or result.structured_content != {"total": 25.0, "currency": "EUR"}
            except Exception:
                failed = True
            took, ended = time.perf_counter_ns() - began, time.monotonic()
            if start <= ended < end:
                errors += failed
                if not failed:
                    latency.append(took)

    async def meter() -> None:
        await anyio.sleep(max(0.0, start - time.monotonic()))
        cpu["before"] = endpoint.cpu()
        await anyio.sleep(max(0.0, end - time.monotonic()))
        cpu["after"] = endpoint.cpu()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(meter)
        for _ in range(in_flight):
            tasks.start_soon(caller)
    completed = len(latency)
    used = {role: cpu["after"][role] - cpu["before"][role] for role in endpoint.processes}
    per_call = {
        role: round(seconds / completed * 1e6, 1) if completed else None for role, seconds in used.items()
    }
    per_call["total"] = round(sum(used.values()) / completed * 1e6, 1) if completed else None
    return {
        "per_s": round(completed / duration, 1),
        "completed": completed,
        "errors": errors,
        "latency_ms": spread_ms(latency),
        "cpu_us_per_call": per_call,
        "cpu_busy": {role: round(seconds / duration, 3) for role, seconds in used.items()},
        "processes": endpoint.commands(),
    }


def overhead(direct: dict[str, Any], proxy: dict[str, Any]) -> dict[str, float | None]:
    """What the proxy adds to a call: ``proxy`` less ``direct``, in µs of latency and of CPU."""

    def more(key: str, of: dict[str, Any], mine: dict[str, Any], scale: float = 1.0) -> float | None:
        if of.get(key) is None or mine.get(key) is None:
            return None
        return round((mine[key] - of[key]) * scale, 1)

    ratio = proxy["per_s"] / direct["per_s"] if direct["per_s"] else None
    return {
        "latency_p50_us": more("p50", direct["latency_ms"], proxy["latency_ms"], 1000),
        "latency_p99_us": more("p99", direct["latency_ms"], proxy["latency_ms"], 1000),
        "cpu_us_per_call": more("total", direct["cpu_us_per_call"], proxy["cpu_us_per_call"]),
        "per_s_ratio": None if ratio is None else round(ratio, 3),
    }


def passthrough(options: Options) -> dict[str, Any]:
    """For each transport and era, the bare upstream and the proxy connected side by side, and at each
    number of calls in flight, ``options.runs`` times, the one measured right after the other, so that
    both see the same load of the machine. Rows hold the medians and every run."""
    each_run: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    place = Workplace(options.app_dir)
    failed = True
    try:
        for transport in options.proxy_transports:
            with _http_upstream(place, transport) as http:
                for era in options.proxy_eras:
                    anyio.run(_measure_pair, options, place, transport, era, http, each_run)
        failed = False
    finally:
        place.close(failed)
    rows = []
    for (transport, era, in_flight), runs in each_run.items():
        medians = {path: median_of([measured[path] for measured in runs]) for path in PATHS}
        rows.append(
            {
                "transport": transport,
                "era": era,
                "in_flight": in_flight,
                **medians,
                "overhead": overhead(medians["direct"], medians["proxy"]),
                "each_run": runs,
            }
        )
    return {"tool": TOOL, "python": sys.executable, "rows": rows}


@contextlib.contextmanager
def _http_upstream(place: Workplace, transport: str) -> Iterator[HttpUpstream | None]:
    if transport != "http":
        yield None
        return
    http = HttpUpstream(place)
    try:
        yield http
    finally:
        http.stop()


async def _measure_pair(
    options: Options,
    place: Workplace,
    transport: str,
    era: str,
    http: HttpUpstream | None,
    each_run: dict[tuple[str, str, int], list[dict[str, Any]]],
) -> None:
    async with (
        connected(place, "direct", era, http) as direct,
        connected(place, "proxy", era, http) as proxy,
    ):
        for run in range(1, options.runs + 1):
            for in_flight in options.proxy_in_flight:
                measured: dict[str, Any] = {}
                for path, endpoint in (("direct", direct), ("proxy", proxy)):
                    what = f"{path}, {transport}, {era}, {in_flight} in flight{options.run_label(run)}"
                    progress(f"proxy: {what}")
                    measured[path] = await calls(endpoint, in_flight, options.warmup, options.duration)
                measured["overhead"] = overhead(measured["direct"], measured["proxy"])
                each_run.setdefault((transport, era, in_flight), []).append(measured)
