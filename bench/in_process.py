"""``python -m bench.in_process``: the application's own CPU per round trip, without sockets or uvicorn.

The socket benchmark (``python -m bench``) measures what a deployment costs, but on a busy machine a
single run's ratio moves by ±15 %, and it cannot tell the application's work from the HTTP server's
and the kernel's, which the gateway and the bare app share. This drives both ASGI apps directly, in
one process, on the loop the service runs on (uvloop): ``tools`` tools each hold a ``POST /elicit``
of the benchmark's 3-question schema, one answerer reads ``GET /event`` and replies to every
``question.asked``, and the process's CPU time is divided by the round trips. The best of
``repeat`` passes is reported, and Python's count of calls per round trip, which does not move with
the machine's load at all.

``--profile N`` prints the N functions with the most cumulative time (cProfile) for the gateway.
"""

import argparse
import asyncio
import cProfile
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


async def _call(
    app: App, method: str, path: str, body: bytes = b"", on_body: Callable[[bytes], None] | None = None
) -> bytes:
    """One request through the ASGI app; its body, or each chunk to ``on_body`` (a stream)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:4096"), *(JSON if body else [])],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 4096),
        "state": {},
    }
    sent = False
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # the client stays until the response is over
        return {"type": "http.disconnect"}

    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            if on_body is not None:
                on_body(chunk)
            else:
                chunks.append(chunk)

    try:
        await app(scope, receive, send)
    finally:
        done.set()
    return b"".join(chunks)


async def _lifespan(app: App) -> asyncio.Queue[dict[str, Any]]:
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()
        elif message["type"] == "lifespan.startup.failed":
            raise RuntimeError(message.get("message"))

    asyncio.get_running_loop().create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, messages.get, send)
    )
    await messages.put({"type": "lifespan.startup"})
    await started.wait()
    return messages


async def _measure(app: App, tools: int, round_trips: int, repeat: int, profile: int) -> tuple[float, float]:
    """The best pass's CPU per round trip (µs), and the calls per round trip."""
    await _lifespan(app)
    loop = asyncio.get_running_loop()
    replies: set[asyncio.Task[bytes]] = set()

    def on_frame(chunk: bytes) -> None:
        for line in chunk.split(b"\n"):
            if line.startswith(b"data:") and ASKED in line:
                request_id = json.loads(line[5:])["properties"]["id"]
                task = loop.create_task(_call(app, "POST", f"/question/{request_id}/reply", ANSWERS))
                replies.add(task)
                task.add_done_callback(replies.discard)

    stream = loop.create_task(_call(app, "GET", "/event", on_body=on_frame))
    await asyncio.sleep(0.05)  # the stream is open before the first ask
    left = 0

    async def tool() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            result = await _call(app, "POST", "/elicit", BODY)
            if b'"accept"' not in result:
                raise RuntimeError(f"a round trip failed: {result[:200]!r}")

    async def run(count: int) -> None:
        nonlocal left
        left = count
        await asyncio.gather(*(tool() for _ in range(tools)))

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
    return best * 1e6, calls / round_trips


def _in_child(which: str, tools: int, round_trips: int, repeat: int, profile: int) -> Measure:
    """Each app in a process of its own: neither's imports or garbage weigh on the other's figures."""
    command = [sys.executable, "-m", "bench.in_process", "--one", which, "--tools", str(tools)]
    command += ["--round-trips", str(round_trips), "--repeat", str(repeat), "--profile", str(profile)]
    path = os.pathsep.join(filter(None, [str(HARNESS), os.environ.get("PYTHONPATH")]))
    environment = os.environ | {"PYTHONPATH": path}
    done = subprocess.run(command, cwd=HARNESS, env=environment, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{which} failed:\n{done.stderr[-2000:]}")
    *shown, last = done.stdout.rstrip("\n").split("\n")
    if shown:
        print("\n".join(shown))
    figures = json.loads(last)
    return Measure(figures["app"], figures["cpu_us"], figures["calls"])


HARNESS = Path(__file__).resolve().parent.parent
"""This checkout: its ``bench`` runs the measure, whichever gateway is measured."""


def _one(which: str, tools: int, round_trips: int, repeat: int, profile: int) -> None:
    import logging

    import uvloop

    if which == "gateway":
        if app_dir := os.environ.get("BENCH_APP_DIR"):  # before the gateway is first imported
            sys.path.insert(0, app_dir)
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
    else:
        from bench.baseline import app as bare

        logging.disable(logging.CRITICAL)
        app, origin = bare, sys.modules["bench.baseline"].__file__
    cpu_us, calls = uvloop.run(
        _measure(app, tools, round_trips, repeat, profile if which == "gateway" else 0)
    )
    app_dir = str(Path(origin or "").resolve().parent.parent)
    print(json.dumps({"app": app_dir, "cpu_us": cpu_us, "calls": calls}), flush=True)
    os._exit(0)  # the apps' lifespans are left running: nothing to wait for


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
    parser.add_argument("--app-dir", type=Path, help="import the gateway from this checkout")
    parser.add_argument(
        "--quick", action="store_true", help="tiny counts: proves the harness, measures nothing"
    )
    parser.add_argument("--one", choices=("gateway", "bare"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.round_trips, args.repeat = 50, 1
    if args.one:
        _one(args.one, args.tools, args.round_trips, args.repeat, args.profile)
        return 0
    if args.app_dir:
        os.environ["BENCH_APP_DIR"] = str(args.app_dir.resolve())
    gateway = _in_child("gateway", args.tools, args.round_trips, args.repeat, args.profile)
    bare = _in_child("bare", args.tools, args.round_trips, args.repeat, 0)
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
