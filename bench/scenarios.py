"""The measurements: round trips and the baseline, fan-out, capacity, big asks. Each returns plain JSON
data."""

import asyncio
import contextlib
import itertools
import math
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from bench import loads, report, sse
from bench.process import REPOSITORY, ServerProcess, cpu_seconds

GATEWAY = "bench.server_with_probe"
STARTED = time.monotonic()
BASELINE = "bench.baseline"
MS = 1e6


Shared = dict[str, ServerProcess]
"""Servers started once for every section, by module (the quick run's way of saving time)."""


def store_from_environment() -> str:
    """The store the gateway is started with: ``GATEWAY_STORE`` as the gateway itself reads it."""
    return os.environ.get("GATEWAY_STORE", "memory")


@dataclass(frozen=True)
class Options:
    concurrency: Sequence[int] = (1, 32, 128)
    subscribers: Sequence[int] = (1000, 5000)
    pending: int = 10_000
    duration: float = 8.0
    warmup: float = 2.0
    fan_out_questions: int = 40
    reply_samples: int = 200
    clients: int = 2
    log_level: str = "info"
    priority: int = 0
    app_dir: Path = REPOSITORY
    profile_dir: Path | None = None
    runs: int = 1
    big_asks: int = 60
    store: str = field(default_factory=store_from_environment)
    proxy_in_flight: Sequence[int] = (1, 8)
    proxy_eras: Sequence[str] = ("legacy", "modern")
    proxy_transports: Sequence[str] = ("stdio", "http")
    stalled_subscribers: int = 400
    stalled_questions: int = 20
    stalled_send_timeout: float = 30.0
    held: int = 1000

    def serving(self, module: str, shared: "Shared") -> contextlib.AbstractContextManager[ServerProcess]:
        """A fresh server for a section (so its memory is its own), or the one the quick run shares."""
        if module in shared:
            return contextlib.nullcontext(shared[module])
        return self.server(module)

    def server(self, module: str) -> ServerProcess:
        room = str(max(20_000, 2 * self.pending))  # the capacity run keeps them all in one session
        env = {
            "GATEWAY_LOG_LEVEL": self.log_level,
            "GATEWAY_TIMEOUT": "3600",
            "GATEWAY_MAX_PENDING": room,
            "GATEWAY_MAX_PENDING_PER_SESSION": room,
            "GATEWAY_STORE": self.store,
        }
        return ServerProcess(module, env=env, app_dir=self.app_dir)

    def run_label(self, run: int) -> str:
        """`` (run 2/3)`` when measurements are repeated, so progress lines and profiles tell runs apart."""
        return f" (run {run}/{self.runs})" if self.runs > 1 else ""


# -------------------------------------------------------------------------------------------------
# Small statistics


def progress(message: str) -> None:
    """A line on stderr, so that a long run shows where it is."""
    print(f"[{time.monotonic() - STARTED:6.1f} s] {message}", file=sys.stderr, flush=True)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100); None without values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


def spread_ms(values_ns: Sequence[float]) -> dict[str, float | None]:
    def ms(value: float | None) -> float | None:
        return None if value is None else round(value / MS, 3)

    return {
        "p50": ms(percentile(values_ns, 50)),
        "p99": ms(percentile(values_ns, 99)),
        "max": ms(max(values_ns, default=None)),
        "count": len(values_ns),
    }


def loop_lag(server: ServerProcess, start: int, end: int) -> dict[str, Any]:
    """What the server's probe saw between ``start`` and ``end`` (monotonic ns)."""
    sleep_until(end + 600_000_000)  # the probe writes twice a second
    _, lags, gcs = server.probe()
    # A sample (or pause) is in the window when the stretch it measured, ``t - ms .. t``, overlaps it.
    window = [ms for t, ms in lags if t >= start and t - ms * MS <= end]
    pauses = [(generation, ms) for t, generation, ms, _ in gcs if t >= start and t - ms * MS <= end]
    return {
        "p50_ms": percentile(window, 50),
        "p99_ms": percentile(window, 99),
        "max_ms": max(window, default=None),
        "gc_max_ms": max((ms for _, ms in pauses), default=0.0),
        "gc_full": sum(1 for generation, _ in pauses if generation == 2),
        "gc_total_ms": round(sum(ms for _, ms in pauses), 3),
    }


SUMMED = frozenset({"errors", "replies_refused", "streams_ended_early"})
"""Failure counts: added up over the runs rather than taking the median, so a failure in any run shows."""


def median_of(samples: Sequence[Any], key: str = "") -> Any:
    """The runs of one measurement folded into one: the median of every number (failure counts summed),
    nested dictionaries folded key by key, anything else as the first run has it."""
    first = samples[0]
    if isinstance(first, dict):
        folded = [sample if isinstance(sample, dict) else {} for sample in samples]
        return {name: median_of([sample.get(name) for sample in folded], name) for name in first}
    numbers = [value for value in samples if isinstance(value, int | float) and not isinstance(value, bool)]
    if not numbers:
        return first
    if key in SUMMED:
        return sum(numbers)
    middle = statistics.median(numbers)
    if all(isinstance(value, int) for value in numbers) and float(middle).is_integer():
        return int(middle)
    return round(middle, 3)


def with_each_run(each_run: list[dict[str, Any]]) -> dict[str, Any]:
    """The medians, with every run kept beside them under ``each_run``."""
    return {**median_of(each_run), "each_run": each_run}


def server_facts(server: ServerProcess) -> dict[str, Any]:
    header, _, _ = server.probe()
    return {"loop": header.get("loop"), "http": header.get("http")}


# -------------------------------------------------------------------------------------------------
# Client processes


class Clients:
    """Client processes, each with a pipe to the benchmark."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(["bench.loads"])  # each client starts without importing
        self._processes: list[BaseProcess] = []

    def start(self, target: Callable[..., None], *args: Any) -> Connection:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=target, args=(child, *args), daemon=True)
        process.start()
        child.close()
        self._processes.append(process)
        return parent

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(process.pid) for process in self._processes if process.pid is not None)

    def stop(self) -> None:
        for process in self._processes:
            process.join(5)
            if process.is_alive():
                process.terminate()
                process.join()


def receive(conn: Connection, timeout: float) -> Any:
    if not conn.poll(timeout):
        raise TimeoutError(f"no word from a client process in {timeout} s")
    message = conn.recv()
    if isinstance(message, tuple) and message[0] == "error":
        raise RuntimeError(message[1])
    return message


def expect_ready(conns: Sequence[Connection], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for conn in conns:
        message = receive(conn, max(0.1, deadline - time.monotonic()))
        if message != loads.READY:
            raise RuntimeError(f"a client process sent {message!r} instead of ready")


def shares(total: int, parts: int) -> list[int]:
    """``total`` split over at most ``parts`` processes, as evenly as it goes."""
    parts = max(1, min(parts, total))
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def sleep_until(deadline_ns: int) -> None:
    time.sleep(max(0.0, (deadline_ns - time.monotonic_ns()) / 1e9))


class Profiler:
    """py-spy recording the server for one window, when ``--profile`` asks for it."""

    def __init__(self, options: Options, server: ServerProcess, name: str, seconds: float) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        if options.profile_dir is None:
            return
        executable = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        options.profile_dir.mkdir(parents=True, exist_ok=True)
        output = options.profile_dir / f"{name}.txt"
        command = [executable, "record", "--pid", str(server.pid), "--rate", "250", "--format", "raw"]
        command += ["--duration", str(max(1, round(seconds))), "--output", str(output), "--nonblocking"]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait(self) -> None:
        if self._process is not None:
            self._process.wait(60)


# -------------------------------------------------------------------------------------------------
# 1 and 2: round trips and the baseline


def load_name(server: ServerProcess, tool: bool) -> str:
    """What a posting load measures: the gateway's round trips, the baseline's, or its bare request."""
    if server.module != BASELINE:
        return "round-trips"
    return "baseline-round-trips" if tool else "baseline"


def posting(
    options: Options, server: ServerProcess, concurrency: int, *, tool: bool, run: int = 1
) -> dict[str, Any]:
    """``concurrency`` clients POSTing in a loop: tools (``POST /elicit``, with an answerer replying on
    ``/event``) through the gateway or the baseline, or the baseline's trivial JSON POST; the same client
    code every way."""
    name = load_name(server, tool)
    progress(f"{name}: {concurrency} at once{options.run_label(run)}")
    clients = Clients()
    try:
        answerer = clients.start(loads.answerer_main, server.host, server.port) if tool else None
        url = f"{server.url}/elicit" if tool else f"{server.url}/echo"
        posters = [
            clients.start(loads.posters_main, url, share, tool)
            for share in shares(concurrency, options.clients)
        ]
        everyone = [*posters, *([answerer] if answerer else [])]
        expect_ready(everyone, 60)
        start = time.monotonic_ns() + int(options.warmup * 1e9)
        end = start + int(options.duration * 1e9)
        for conn in everyone:
            conn.send((start, end))
        sleep_until(start)
        server_cpu, clients_cpu = server.cpu_seconds(), clients.cpu_seconds()
        profile = f"{name}-c{concurrency}{f'-run{run}' if options.runs > 1 else ''}"
        profiler = Profiler(options, server, profile, options.duration)
        sleep_until(end)
        server_cpu, clients_cpu = server.cpu_seconds() - server_cpu, clients.cpu_seconds() - clients_cpu
        results = [receive(conn, 90) for conn in posters]
        for conn in posters:  # their CPU time is read: they may exit
            conn.send(loads.STOP)
        answered: dict[str, Any] = {}
        if answerer is not None:
            answerer.send(loads.STOP)
            answered = receive(answerer, 30)
        profiler.wait()
    finally:
        clients.stop()

    completed = sum(result["completed"] for result in results)
    latency = [ns for result in results for ns in result["latency"]]
    measured: dict[str, Any] = {
        "concurrency": concurrency,
        "per_s": round(completed / options.duration, 1),
        "completed": completed,
        "errors": sum(result["errors"] for result in results),
        "latency_ms": spread_ms(latency),
        "server_cpu_us_per_op": round(server_cpu / completed * 1e6, 1) if completed else None,
        "server_cpu_busy": round(server_cpu / options.duration, 3),
        "clients_cpu_busy": round(clients_cpu / options.duration, 3),
        "rss_mb": round(server.rss_bytes() / 2**20, 1),
        "loop_lag": loop_lag(server, start, end),
    }
    if tool:
        measured["post_to_asked_ms"] = spread_ms(answered.get("post_to_asked", []))
        measured["reply_to_result_ms"] = spread_ms([ns for r in results for ns in r["reply_to_result"]])
        measured["replies_refused"] = answered.get("refused", 0)
    return measured


def compared(gateway: dict[str, Any], baseline: dict[str, Any]) -> dict[str, float | None]:
    """The gateway's round trip against the baseline's bare request.

    ``ratio``: elicitations/s over half the baseline's requests/s (a round trip is two requests);
    ``cpu_ratio``: the same by server CPU time; ``cpu_per_request``: CPU of a round trip in bare requests.
    """
    ratio = gateway["per_s"] / (baseline["per_s"] / 2) if baseline["per_s"] else None
    cpu_ratio = cpu_per_request = None
    if gateway["server_cpu_us_per_op"] and baseline["server_cpu_us_per_op"]:
        cpu_ratio = 2 * baseline["server_cpu_us_per_op"] / gateway["server_cpu_us_per_op"]
        cpu_per_request = gateway["server_cpu_us_per_op"] / baseline["server_cpu_us_per_op"]
    return {
        "ratio": None if ratio is None else round(ratio, 3),
        "cpu_ratio": None if cpu_ratio is None else round(cpu_ratio, 3),
        "cpu_per_request": None if cpu_per_request is None else round(cpu_per_request, 3),
    }


def round_trips(options: Options, shared: Shared) -> dict[str, Any]:
    """At each concurrency, ``options.runs`` times: the baseline's bare request, its bare round trip, and
    the gateway's round trip, back to back, so that each comparison is taken under the same load of the
    machine. The rows hold the medians (and the ratios of those medians) and every run."""
    each_run: dict[int, list[dict[str, Any]]] = {concurrency: [] for concurrency in options.concurrency}
    with contextlib.ExitStack() as stack:
        baseline = stack.enter_context(options.serving(BASELINE, shared))
        gateway = stack.enter_context(options.serving(GATEWAY, shared))
        for run in range(1, options.runs + 1):
            for concurrency in options.concurrency:
                measured: dict[str, Any] = {
                    "baseline": posting(options, baseline, concurrency, tool=False, run=run),
                    "baseline_round_trip": posting(options, baseline, concurrency, tool=True, run=run),
                    "gateway": posting(options, gateway, concurrency, tool=True, run=run),
                }
                measured.update(compared(measured["gateway"], measured["baseline"]))
                each_run[concurrency].append(measured)
        facts = server_facts(gateway)
    rows = []
    for concurrency, runs in each_run.items():
        kinds = ("gateway", "baseline", "baseline_round_trip")
        medians = {kind: median_of([run[kind] for run in runs]) for kind in kinds}
        rows.append(
            {
                "concurrency": concurrency,
                **medians,
                **compared(medians["gateway"], medians["baseline"]),
                "each_run": runs,
            }
        )
    return {"server": facts, "runs": rows}


# -------------------------------------------------------------------------------------------------
# 3: fan-out


def warm_up(http: httpx.Client) -> None:
    """One question asked and dismissed, so that lazy imports and first-use caches are behind us."""
    created = http.post("/elicitations", json=loads.ELICITATION)
    created.raise_for_status()
    http.post(f"/question/{created.json()['id']}/reject").raise_for_status()


def fan_out(options: Options, subscribers: int, shared: Shared) -> dict[str, Any]:
    """The gateway's fan-out to ``subscribers`` streams, beside the baseline's bare StreamingResponse,
    ``options.runs`` times, each on fresh servers (memory per subscriber is measured from the start)."""
    each_run = []
    for run in range(1, options.runs + 1):
        with options.serving(GATEWAY, shared) as gateway:
            measured = fanning_out(options, gateway, subscribers, run)
        with options.serving(BASELINE, shared) as baseline:
            measured["baseline"] = fanning_out(options, baseline, subscribers, run)
        each_run.append(measured)
    return with_each_run(each_run)


def fanning_out(options: Options, server: ServerProcess, subscribers: int, run: int = 1) -> dict[str, Any]:
    """``subscribers`` idle streams; questions asked one at a time; how long until all have each."""
    progress(f"fan-out: {subscribers} subscribers ({server.module}){options.run_label(run)}")
    with httpx.Client(base_url=server.url, timeout=30) as http:
        warm_up(http)
        time.sleep(0.5)
        rss_before = server.rss_bytes()
        clients = Clients()
        try:
            began = time.monotonic_ns()
            conns = [
                clients.start(loads.subscribers_main, server.host, server.port, share)
                for share in shares(subscribers, options.clients)
            ]
            expect_ready(conns, 180)
            connected_s = (time.monotonic_ns() - began) / 1e9
            time.sleep(1.0)
            rss_idle = server.rss_bytes()
            connect_lag = loop_lag(server, began, time.monotonic_ns())

            start = time.monotonic_ns()
            cpu = server.cpu_seconds()
            name = f"fan-out-{subscribers}{'-baseline' if server.module == BASELINE else ''}"
            name += f"-run{run}" if options.runs > 1 else ""
            profiler = Profiler(options, server, name, options.fan_out_questions * 0.2)
            everyone: list[int] = []
            per_subscriber: list[int] = []
            asked_ids: list[str] = []
            for _ in range(options.fan_out_questions):
                asked = time.monotonic_ns()
                created = http.post(f"/elicitations?callID=t{asked}", json=loads.ELICITATION)
                created.raise_for_status()
                asked_ids.append(created.json()["id"])
                delays: list[int] = []
                for conn in conns:
                    kind, tag, arrivals = receive(conn, 60)
                    if (kind, tag) != ("delivered", asked):
                        raise RuntimeError(f"expected the delivery of question t{asked}, got {kind} t{tag}")
                    delays.extend(arrivals)
                everyone.append(max(delays))
                per_subscriber.extend(delays)
                time.sleep(0.1)
            end = time.monotonic_ns()
            cpu = server.cpu_seconds() - cpu
            profiler.wait()
            ended = 0
            for conn in conns:
                conn.send(loads.STOP)
            for conn in conns:
                _, count = receive(conn, 30)
                ended += count
        finally:
            clients.stop()
        for request_id in asked_ids:
            http.post(f"/question/{request_id}/reject").raise_for_status()
        deliveries = subscribers * options.fan_out_questions
        return {
            "subscribers": subscribers,
            "questions": options.fan_out_questions,
            "all_received_ms": spread_ms(everyone),
            "per_subscriber_ms": spread_ms(per_subscriber),
            "connect_s": round(connected_s, 2),
            "rss_before_mb": round(rss_before / 2**20, 1),
            "rss_idle_mb": round(rss_idle / 2**20, 1),
            "kb_per_idle_subscriber": round((rss_idle - rss_before) / subscribers / 1024, 1),
            "server_cpu_us_per_delivery": round(cpu / deliveries * 1e6, 2),
            "streams_ended_early": ended,
            "loop_lag_connecting": connect_lag,
            "loop_lag": loop_lag(server, start, end),
        }


# -------------------------------------------------------------------------------------------------
# 4: capacity


def capacity(options: Options, shared: Shared) -> dict[str, Any]:
    """``options.runs`` capacity measurements, each on a fresh gateway (or the quick run's shared one)."""
    each_run = []
    for run in range(1, options.runs + 1):
        progress(f"capacity: {options.pending} pending{options.run_label(run)}")
        with options.serving(GATEWAY, shared) as server:
            with httpx.Client(base_url=server.url, timeout=30) as http:
                warm_up(http)
            # A shared server, or a store that outlives the server, would hand these to the next run.
            withdraw = GATEWAY in shared or report.store_kind(options.store) != "memory"
            each_run.append(asyncio.run(_capacity(options, server, withdraw=withdraw)))
    return with_each_run(each_run)


async def _capacity(options: Options, server: ServerProcess, *, withdraw: bool) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=loads.KEEPALIVE)
    async with aiohttp.ClientSession(server.url, connector=connector) as http:
        asked = itertools.count()

        async def create() -> str:
            # Each question its own message, as real ones are: nothing is shared between records.
            body = {**loads.ELICITATION, "message": f"Benchmark question {next(asked)}"}
            async with http.post("/elicitations", json=body) as response:
                if response.status != 201:
                    raise RuntimeError(f"POST /elicitations: {response.status} {await response.text()}")
                return (await response.json())["id"]

        async def timed_reply(request_id: str) -> int:
            answers = {"answers": [["SY215C"], ["1200"], ["done"]]}
            sent = time.monotonic_ns()
            async with http.post(f"/question/{request_id}/reply", json=answers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"reply: {response.status} {await response.text()}")
            return time.monotonic_ns() - sent

        async def replies() -> list[int]:
            return [await timed_reply(await create()) for _ in range(options.reply_samples)]

        await asyncio.sleep(0.5)
        rss_before = server.rss_bytes()
        phases: dict[str, tuple[int, int]] = {}

        began = time.monotonic_ns()
        with_one = await replies()
        phases["reply, 1 pending"] = (began, time.monotonic_ns())

        began = time.monotonic_ns()
        gate = asyncio.Semaphore(32)

        async def create_gated() -> str:
            async with gate:
                return await create()

        pending_ids = await asyncio.gather(*(create_gated() for _ in range(options.pending)))
        created = time.monotonic_ns()
        phases["create"] = (began, created)
        await asyncio.sleep(1.0)
        rss_pending = server.rss_bytes()

        began = time.monotonic_ns()
        listing: list[int] = []
        size = 0
        for _ in range(5):
            sent = time.monotonic_ns()
            async with http.get("/question") as response:
                body = await response.read()
            listing.append(time.monotonic_ns() - sent)
            size = len(body)
        phases["list"] = (began, time.monotonic_ns())

        began = time.monotonic_ns()
        with_many = await replies()
        phases[f"reply, {options.pending} pending"] = (began, time.monotonic_ns())

        began = time.monotonic_ns()
        backlog_ns = await _backlog_time(server, options.pending)
        phases["subscribe with backlog"] = (began, time.monotonic_ns())

        async def reject(request_id: str) -> None:
            async with gate, http.post(f"/question/{request_id}/reject") as response:
                if response.status != 200:
                    raise RuntimeError(f"reject: {response.status} {await response.text()}")

        if withdraw:
            await asyncio.gather(*(reject(request_id) for request_id in pending_ids))

    lags = {phase: loop_lag(server, start, end) for phase, (start, end) in phases.items()}
    one_p50 = percentile(with_one, 50) or 1
    return {
        "pending": options.pending,
        "rss_before_mb": round(rss_before / 2**20, 1),
        "rss_pending_mb": round(rss_pending / 2**20, 1),
        "rss_increase_mb": round((rss_pending - rss_before) / 2**20, 1),
        "kb_per_pending": round((rss_pending - rss_before) / options.pending / 1024, 2),
        "create_per_s": round(options.pending / ((created - phases["create"][0]) / 1e9), 1),
        "list_ms": spread_ms(listing),
        "list_bytes": size,
        "reply_one_pending_ms": spread_ms(with_one),
        "reply_many_pending_ms": spread_ms(with_many),
        "reply_slowdown": round((percentile(with_many, 50) or 0) / one_p50, 2),
        "subscribe_backlog_ms": round(backlog_ns / MS, 1),
        "loop_lag": lags,
    }


async def _backlog_time(server: ServerProcess, pending: int) -> int:
    """A new subscriber gets a ``question.asked`` for every pending question: time to the last one."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    seen = [0]

    def on_data(line: bytes, received: int) -> None:
        if loads.ASKED in line:
            seen[0] += 1
            if seen[0] == pending and not done.done():
                done.set_result(received)

    began = time.monotonic_ns()
    subscriber = await sse.subscribe(server.host, server.port, "/event", on_data)
    try:
        return await asyncio.wait_for(done, 120) - began
    finally:
        subscriber.close()


# -------------------------------------------------------------------------------------------------
# Big asks


BIG_ASK_SESSIONS = 4
BIG_ASKS_AT_ONCE = 8


def big_asks(options: Options, shared: Shared) -> dict[str, Any]:
    """``options.runs`` measurements of many asks near the body limit, each on a fresh gateway."""
    each_run = []
    for run in range(1, options.runs + 1):
        progress(f"big asks: {options.big_asks} of about 0.8 MB{options.run_label(run)}")
        with options.serving(GATEWAY, shared) as server:
            with httpx.Client(base_url=server.url, timeout=30) as http:
                warm_up(http)
            each_run.append(asyncio.run(_big_asks(options, server)))
    return with_each_run(each_run)


async def _big_asks(options: Options, server: ServerProcess) -> dict[str, Any]:
    """Asks of 50 questions x 200 options, 8 at a time in 4 sessions: what is taken, what memory it
    costs at its peak and once every question is rejected, and the longest the loop was held."""
    bodies = [loads.big_ask(str(number)) for number in range(options.big_asks)]
    statuses: list[int] = []
    gate = asyncio.Semaphore(BIG_ASKS_AT_ONCE)
    async with aiohttp.ClientSession(server.url, timeout=aiohttp.ClientTimeout(total=300)) as http:

        async def ask(number: int) -> None:
            session = {"sessionID": f"ses_big{number % BIG_ASK_SESSIONS}"}
            async with (
                gate,
                http.post(
                    "/elicitations", data=bodies[number], headers=loads.JSON_HEADERS, params=session
                ) as response,
            ):
                await response.read()
                statuses.append(response.status)

        await asyncio.sleep(0.5)
        rss_before = server.rss_bytes()
        cpu = server.cpu_seconds()
        began = time.monotonic_ns()
        await asyncio.gather(*(ask(number) for number in range(options.big_asks)))
        ended = time.monotonic_ns()
        cpu = server.cpu_seconds() - cpu
        rss_pending, rss_peak = server.rss_bytes(), server.peak_rss_bytes()
        lag = loop_lag(server, began, ended)

        async with http.get("/question") as response:
            pending_ids = [request["id"] for request in await response.json()]
        for request_id in pending_ids:
            async with http.post(f"/question/{request_id}/reject") as response:
                await response.read()
        await asyncio.sleep(1.0)
        rss_after = server.rss_bytes()
    mb = 1024 * 1024
    return {
        "asks": options.big_asks,
        "body_bytes": len(bodies[0]),
        "accepted": statuses.count(201),
        "refused_full": statuses.count(429),
        "errors": sum(1 for status in statuses if status not in (201, 429)),
        "seconds": round((ended - began) / 1e9, 3),
        "server_cpu_ms_per_ask": round(cpu * 1000 / max(1, options.big_asks), 1),
        "rss_before_mb": round(rss_before / mb, 1),
        "rss_pending_mb": round(rss_pending / mb, 1),
        "rss_peak_mb": round(rss_peak / mb, 1),
        "rss_after_reject_mb": round(rss_after / mb, 1),
        "loop_lag": lag,
    }
