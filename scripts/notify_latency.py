"""Measure what notifications cost: the first delivery (the worker process started for it), deliveries
once it is warm, the memory of a worker, and a kill with its replacement. Prints one JSON object.

    .venv/bin/python scripts/notify_latency.py              # 200 warm deliveries
    .venv/bin/python scripts/notify_latency.py --count 5    # a quick check that it runs

The target is an HTTP server in this process (a thread) that Apprise's ``json://`` plugin posts to;
a delivery is timed from ``Notifier.submit`` to the server having the request. Memory is read from
``/proc`` (Linux): a worker's resident set, its proportional share (``Pss``: pages shared with other
processes, such as the interpreter's, split between them) and its private pages.
"""

import argparse
import asyncio
import http.server
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere: import the package from this checkout
    sys.path.insert(0, str(ROOT))

from elicitation_gateway.conversion.schema import build_form  # noqa: E402
from elicitation_gateway.metrics import Metrics  # noqa: E402
from elicitation_gateway.models import QuestionRequest  # noqa: E402
from elicitation_gateway.notify import Notifier  # noqa: E402
from elicitation_gateway.records import Record  # noqa: E402
from elicitation_gateway.settings import Settings  # noqa: E402


class Target(http.server.ThreadingHTTPServer):
    """Notes when each question's notification arrives."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Target

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.arrived[body["message"].rsplit("?question=", 1)[1]] = time.perf_counter()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


def record(request_id: str) -> Record:
    form = build_form({"type": "object", "properties": {"ok": {"type": "boolean", "title": "Go"}}}, "m")
    request = QuestionRequest.new(request_id, "ses_bench", list(form.questions), None)
    now = time.time()
    return Record.new(request, form, "Deploy?", "/srv", now, now + 600, "cancel")


def memory_mb(pid: int) -> dict[str, float]:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
    sizes = {key: int(value.split()[0]) / 1024 for key, value in (line.split(":", 1) for line in rollup)}
    return {
        "rss": round(int(status["VmRSS"].split()[0]) / 1024, 1),
        "pss": round(sizes["Pss"], 1),
        "private": round(sizes["Private_Clean"] + sizes["Private_Dirty"], 1),
    }


async def deliver(notifier: Notifier, target: Target, request_id: str) -> float:
    began = time.perf_counter()
    notifier.submit(record(request_id))
    while request_id not in target.arrived:  # noqa: ASYNC110 (noted by a thread of the target: polled)
        await asyncio.sleep(0.0005)
    return target.arrived[request_id] - began


async def measure(count: int) -> dict[str, Any]:
    target = Target()
    threading.Thread(target=target.serve_forever, daemon=True).start()

    async def pending(request_id: str) -> bool:
        return True

    url = f"json://127.0.0.1:{target.server_address[1]}/hook"
    settings = Settings(notify=[url], notify_timeout=10, notify_retries=0, public_url="https://gw.test")
    notifier = Notifier(settings, Metrics(), pending)
    notifier.start()
    try:
        first = await deliver(notifier, target, "q_first")
        warm = sorted([await deliver(notifier, target, f"q_{number}") for number in range(count)])
        worker = await notifier.pool.borrow()  # idle: the last delivery has been counted
        assert worker.pid is not None
        worker_memory = memory_mb(worker.pid)
        began = time.perf_counter()
        await notifier.pool.discard(worker)  # as a missed deadline does: killed, reaped, replaced
        killed = time.perf_counter() - began
        notifier.pool.give_back(await notifier.pool.borrow())
        replaced = time.perf_counter() - began
    finally:
        await notifier.stop()
        target.shutdown()
    return {
        "first_delivery_s": round(first, 3),
        "warm_deliveries": count,
        "warm_p50_ms": round(statistics.median(warm) * 1000, 2),
        "warm_p90_ms": round(warm[int(0.9 * (count - 1))] * 1000, 2),
        "worker_mb": worker_memory,
        "kill_and_reap_ms": round(killed * 1000, 1),
        "replacement_ready_s": round(replaced, 3),
        "gateway_rss_mb": memory_mb(os.getpid())["rss"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200, help="warm deliveries to time (default 200)")
    print(json.dumps(asyncio.run(measure(parser.parse_args().count))))


if __name__ == "__main__":
    main()
