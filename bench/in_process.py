"""``python -m bench.in_process``: the application's own CPU per round trip, without sockets or uvicorn.

The socket benchmark (``python -m bench``) measures what a deployment costs, but on a busy machine a
single run's ratio moves by ±15 %, and it cannot tell the application's work from the HTTP server's
and the kernel's, which the gateway and the bare app share. This drives both ASGI apps directly, in
one process, on the loop the service runs on (uvloop): ``tools`` tools each hold a ``POST /elicit``
of the benchmark's 3-question schema, one answerer reads ``GET /event`` and replies to every
``question.asked``, and the process's CPU time is divided by the round trips. The best of
``repeat`` passes is reported, and Python's count of calls per round trip, which does not move with
the machine's load at all. Each app collects garbage as it is served in the socket bench: the gateway
as its server sets it once started, the bare app with Python's defaults.

``--profile N`` prints the N functions with the most cumulative time (cProfile) for the gateway.
"""

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.loads import ELICITATION

BODY = json.dumps(ELICITATION).encode()
ANSWERS = json.dumps({"answers": [["SY215C"], ["1200"], ["a note"]]}).encode()
JSON = [(b"content-type", b"application/json")]
ASKED = b'"question.asked"'

App = Callable[..., Any]


@dataclass(frozen=True)
class Measure:
    app: str
    """Where the app measured was imported from."""
    cpu_us: float
    """Best pass: process CPU per round trip, µs."""
    calls: float
    """Python calls (functions and built-ins) per round trip, under cProfile."""


HARNESS = Path(__file__).resolve().parent.parent
"""This checkout: its ``bench`` runs the measure, whichever gateway is measured."""
TOOL_TIMEOUT = 20
"""``?timeout=`` of each ``POST /elicit``, as the socket bench's tools send it: a reply lost to a bug
ends its round trip (refused, below) instead of holding the run for the gateway's 300 s."""
RUN_SECONDS = 600
"""The most one app's measure may take, however slow the machine: a stall fails the run."""


async def _call(
    app: App,
    method: str,
    path: str,
    body: bytes = b"",
    query: bytes = b"",
    on_body: Callable[[bytes], None] | None = None,
) -> tuple[int, bytes]:
    """One request through the ASGI app: its status and body, or its status and each chunk to
    ``on_body`` (a stream)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:4096"), *(JSON if body else [])],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 4096),
        "state": {},
    }
    sent = False
    done = asyncio.Event()
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # the client stays until the response is over
        return {"type": "http.disconnect"}

    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            if on_body is not None:
                on_body(chunk)
            else:
                chunks.append(chunk)

    try:
        await app(scope, receive, send)
    finally:
        done.set()
    return status, b"".join(chunks)


async def _started(app: App) -> asyncio.Task[None]:
    """The app's lifespan, started: its task (kept, so that it runs to the end of the measure)."""
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outcome: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def send(message: dict[str, Any]) -> None:
        if message["type"].startswith("lifespan.startup.") and not outcome.done():
            outcome.set_result(message.get("message") or message["type"])

    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    lifespan = asyncio.ensure_future(app(scope, messages.get, send))
    await messages.put({"type": "lifespan.startup"})
    await asyncio.wait([outcome, lifespan], return_when=asyncio.FIRST_COMPLETED)
    if lifespan.done():  # it raised, or ended without starting
        lifespan.result()
        raise RuntimeError("the app's lifespan ended before it started")
    if (said := outcome.result()) != "lifespan.startup.complete":
        raise RuntimeError(f"the app did not start: {said}")
    return lifespan


async def _measure(app: App, tools: int, round_trips: int, repeat: int, profile: int) -> tuple[float, float]:
    """The best pass's CPU per round trip (µs), and the calls per round trip."""
    lifespan = await _started(app)
    loop = asyncio.get_running_loop()
    replies: set[asyncio.Task[None]] = set()
    failures: list[str] = []

    async def reply(request_id: str) -> None:
        status, body = await _call(app, "POST", f"/question/{request_id}/reply", ANSWERS)
        if status != 200:
            failures.append(f"a reply got {status}: {body[:200]!r}")

    def on_frame(chunk: bytes) -> None:
        for line in chunk.split(b"\n"):
            if line.startswith(b"data:") and ASKED in line:
                task = loop.create_task(reply(json.loads(line[5:])["properties"]["id"]))
                replies.add(task)
                task.add_done_callback(replies.discard)

    stream = loop.create_task(_call(app, "GET", "/event", on_body=on_frame))
    await asyncio.sleep(0.05)  # the stream is open before the first ask
    left = 0

    async def tool() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            query = f"callID=t{time.monotonic_ns()}&timeout={TOOL_TIMEOUT}".encode()
            status, result = await _call(app, "POST", "/elicit", BODY, query)
            if status != 200 or b'"accept"' not in result:
                failures.append(f"a round trip got {status}: {result[:200]!r}")
            if failures or stream.done():
                raise RuntimeError(failures[0] if failures else "the answerer's stream ended")

    async def run(count: int) -> None:
        nonlocal left
        left = count
        await asyncio.gather(*(tool() for _ in range(tools)))

    async with asyncio.timeout(RUN_SECONDS):
        await run(max(200, round_trips // 5))  # warm: caches filled, code paths taken once
        best = float("inf")
        for _ in range(repeat):
            started = time.process_time()
            await run(round_trips)
            best = min(best, (time.process_time() - started) / round_trips)
        profiler = cProfile.Profile()
        profiler.enable()
        await run(round_trips)
        profiler.disable()
    stats = pstats.Stats(profiler)
    calls = sum(entry[1] for entry in stats.stats.values())  # type: ignore[attr-defined]
    if profile:
        stats.sort_stats("cumulative").print_stats(profile)
    stream.cancel()
    lifespan.cancel()
    return best * 1e6, calls / round_trips


def _in_child(which: str, options: argparse.Namespace) -> Measure:
    """Each app in a process of its own: neither's imports or garbage weigh on the other's figures. The
    child runs this checkout's ``bench`` (its working folder); the gateway it imports from
    ``--app-dir``, when given. It inherits the environment, ``GATEWAY_*`` settings included, as the
    socket bench's gateway does."""
    command = [sys.executable, "-m", "bench.in_process", "--one", which, "--tools", str(options.tools)]
    command += ["--round-trips", str(options.round_trips), "--repeat", str(options.repeat)]
    command += ["--profile", str(options.profile if which == "gateway" else 0)]
    if options.app_dir is not None:
        command += ["--app-dir", str(options.app_dir)]
    child = subprocess.Popen(
        command,
        cwd=HARNESS,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=RUN_SECONDS + 60)
    finally:
        if child.poll() is None:  # this process interrupted or timed out: the child goes too
            child.kill()
            child.wait()
    if child.returncode != 0:
        raise RuntimeError(f"{which} failed:\n{err[-2000:]}")
    *shown, last = out.rstrip("\n").split("\n")
    if shown:
        print("\n".join(shown))
    figures = json.loads(last)
    return Measure(figures["app"], figures["cpu_us"], figures["calls"])


def _collect_as_served() -> None:
    """The garbage collection the service runs with (:func:`.runner.serve` sets it once started); a
    checkout from before it had a function of its own made the same three calls in ``serve``."""
    from elicitation_gateway.server import runner

    settle = getattr(runner, "settle_garbage_collection", None)
    if settle is not None:
        settle()
    else:
        gc.collect()
        gc.freeze()
        gc.set_threshold(50_000, 20, 100)


def _one(which: str, options: argparse.Namespace) -> None:
    import logging

    import uvloop

    if which == "gateway":
        if options.app_dir is not None:  # before the gateway is first imported
            sys.path.insert(0, str(options.app_dir))
        from elicitation_gateway.server.app import create_app
        from elicitation_gateway.server.logs import configure_logging
        from elicitation_gateway.settings import Settings

        settings = Settings()
        shown, sys.stderr = sys.stderr, open(os.devnull, "w")  # noqa: SIM115  (its lines written, to nowhere)
        try:
            configure_logging(settings)
        finally:
            sys.stderr = shown
        app: App = create_app(settings)
        origin = sys.modules["elicitation_gateway"].__file__
        _collect_as_served()
    else:
        from bench.baseline import app as bare

        logging.disable(logging.CRITICAL)
        app, origin = bare, sys.modules["bench.baseline"].__file__
    measured = _measure(app, options.tools, options.round_trips, options.repeat, options.profile)
    cpu_us, calls = uvloop.run(measured)
    app_dir = str(Path(origin or "").resolve().parent.parent)
    print(json.dumps({"app": app_dir, "cpu_us": cpu_us, "calls": calls}), flush=True)
    os._exit(0)  # nothing left worth waiting for (the stores are in memory)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.in_process",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tools", type=int, default=32, help="tools asking at once (32)")
    parser.add_argument("--round-trips", type=int, default=3000, help="round trips per pass (3000)")
    parser.add_argument("--repeat", type=int, default=5, help="passes; the best is reported (5)")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print the gateway's N costliest functions"
    )
    parser.add_argument("--app-dir", type=Path, help="import the gateway from this checkout (this one's)")
    parser.add_argument(
        "--quick", action="store_true", help="tiny counts: proves the harness, measures nothing"
    )
    parser.add_argument("--one", choices=("gateway", "bare"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.round_trips, args.repeat = 50, 1
    if args.app_dir is not None:
        args.app_dir = args.app_dir.resolve()
        if not (args.app_dir / "elicitation_gateway" / "__init__.py").is_file():
            parser.error(f"--app-dir {args.app_dir} holds no elicitation_gateway package")
    if args.one:
        _one(args.one, args)
        return 0
    gateway = _in_child("gateway", args)
    if args.app_dir is not None and gateway.app != str(args.app_dir):
        raise RuntimeError(f"the gateway measured was imported from {gateway.app}, not {args.app_dir}")
    bare = _in_child("bare", args)
    print(f"gateway from {gateway.app}")
    rows = [
        (f"at {args.tools} tools, in one process", "gateway", "bare", "ratio"),
        (
            "CPU per round trip (µs, best)",
            f"{gateway.cpu_us:.1f}",
            f"{bare.cpu_us:.1f}",
            f"{gateway.cpu_us / bare.cpu_us:.2f}",
        ),
        (
            "Python calls per round trip",
            f"{gateway.calls:.0f}",
            f"{bare.calls:.0f}",
            f"{gateway.calls / bare.calls:.2f}",
        ),
    ]
    for name, *figures in rows:
        print(f"{name:<34}" + "".join(f"{figure:>9}" for figure in figures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
