"""``python -m bench``: measure the gateway beside a raw Starlette baseline; print a table, write JSON."""

import argparse
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench import memory, proxy, report, scenarios, stalled
from bench.process import REPOSITORY

SECTIONS = ("round-trips", "memory", "fan-out", "capacity", "big-asks", "stalled", "proxy")


def _counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _positive(text: str) -> int:
    count = int(text)
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {count}")
    return count


def _previous_run(path: Path) -> dict:
    """The JSON of an earlier ``python -m bench``, read up front so that a wrong path fails at once."""
    try:
        previous = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read {path}: {error}") from None
    if not isinstance(previous, dict) or "machine" not in previous:
        raise ValueError(f"{path} is not the JSON of a python -m bench run")
    return previous


@dataclass(frozen=True)
class Command:
    options: scenarios.Options
    sections: list[str]
    output: Path
    quick: bool
    before_file: Path | None
    before: dict | None


def parse(argv: list[str]) -> Command:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"sections to run, of {', '.join(SECTIONS)}"
    )
    parser.add_argument("--concurrency", type=_counts, default=[1, 32, 128], help="tools at once (1,32,128)")
    parser.add_argument("--subscribers", type=_counts, default=[1000, 5000], help="fan-out sizes (1000,5000)")
    parser.add_argument("--pending", type=int, default=10_000, help="pending questions for capacity")
    parser.add_argument("--held", type=int, default=1000, help="memory: POST /elicit held at once (1000)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds measured per run (8)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of load before measuring (2)")
    parser.add_argument("--questions", type=int, default=40, help="questions asked per fan-out size (40)")
    parser.add_argument("--replies", type=int, default=200, help="replies timed per capacity phase (200)")
    parser.add_argument("--big-asks", type=int, default=60, help="asks of about 0.8 MB for big-asks (60)")
    parser.add_argument(
        "--stalled",
        type=int,
        default=400,
        help="stalled: subscribers that never read, 20 big questions pending (400)",
    )
    parser.add_argument("--clients", type=int, default=2, help="client processes per load (2)")
    parser.add_argument(
        "--in-flight", type=_counts, default=[1, 8], help="proxy: tool calls in flight on one client (1,8)"
    )
    parser.add_argument("--log-level", default="info", help="GATEWAY_LOG_LEVEL of both servers (info)")
    parser.add_argument(
        "--priority",
        type=int,
        default=0,
        help="nice value for the bench, its servers and clients (negative needs root): on a shared machine,"
        " -10 keeps other work from skewing the numbers",
    )
    parser.add_argument("--app-dir", type=Path, default=REPOSITORY, help="import the service from here")
    parser.add_argument("--profile", type=Path, help="record py-spy profiles of each window into this folder")
    parser.add_argument("--json", type=Path, default=REPOSITORY / "bench" / "results.json", help="output")
    parser.add_argument(
        "--runs",
        type=_positive,
        default=1,
        help="repeat every measurement this many times and report the medians (1); each run is in the JSON",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="JSON of an earlier run (same store): its numbers are shown beside these, and on Redis it is"
        " the reference of the CPU target",
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny counts: proves the harness, measures nothing"
    )
    args = parser.parse_args(argv)
    try:
        before = None if args.before is None else _previous_run(args.before)
    except ValueError as error:
        parser.error(f"--before: {error}")
    sections = [part.strip() for part in args.only.split(",") if part.strip()]
    if unknown := set(sections) - set(SECTIONS):
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    options = scenarios.Options(
        concurrency=args.concurrency,
        subscribers=args.subscribers,
        pending=args.pending,
        duration=args.duration,
        warmup=args.warmup,
        fan_out_questions=args.questions,
        reply_samples=args.replies,
        clients=args.clients,
        log_level=args.log_level,
        priority=args.priority,
        app_dir=args.app_dir.resolve(),
        profile_dir=args.profile,
        runs=args.runs,
        big_asks=args.big_asks,
        proxy_in_flight=args.in_flight,
        stalled_subscribers=args.stalled,
        held=args.held,
    )
    if args.quick:
        options = scenarios.Options(
            concurrency=[1, 4],
            subscribers=[20],
            pending=50,
            duration=0.5,
            warmup=0.3,
            fan_out_questions=3,
            reply_samples=5,
            clients=2,
            log_level=args.log_level,
            app_dir=options.app_dir,
            runs=args.runs,
            big_asks=6,
            stalled_subscribers=10,
            stalled_questions=2,
            stalled_send_timeout=5.0,
            proxy_in_flight=[4],
            proxy_eras=["legacy"],
            proxy_transports=["stdio"],
            held=20,
        )
    if args.priority:
        os.setpriority(os.PRIO_PROCESS, 0, args.priority)  # servers and clients inherit it
    return Command(options, sections, args.json, args.quick, args.before, before)


def main(argv: list[str]) -> int:
    command = parse(argv)
    options, sections, quick = command.options, command.sections, command.quick
    began = time.monotonic()
    results: dict = {
        "machine": report.machine(),
        "store": report.redacted(options.store),
        "options": {
            "log_level": options.log_level,
            "priority": options.priority,
            "app_dir": str(options.app_dir),
            "runs": options.runs,
            "concurrency": list(options.concurrency),
        },
    }
    with contextlib.ExitStack() as stack:
        # The quick run shares one server of each kind between sections: starting them is most of its time.
        shared: scenarios.Shared = {}
        if quick:
            for module in (scenarios.GATEWAY, scenarios.BASELINE):
                shared[module] = stack.enter_context(options.server(module))
        if "round-trips" in sections:
            results["round_trips"] = scenarios.round_trips(options, shared)
        if "memory" in sections:
            results["memory"] = memory.memory(options, shared)
        if "fan-out" in sections:
            results["fan_out"] = [scenarios.fan_out(options, count, shared) for count in options.subscribers]
        if "capacity" in sections:
            results["capacity"] = scenarios.capacity(options, shared)
        if "big-asks" in sections:
            results["big_asks"] = scenarios.big_asks(options, shared)
        if "stalled" in sections:
            results["stalled"] = stalled.stalled_subscribers(options)
        if "proxy" in sections:
            results["proxy"] = proxy.passthrough(options)
    if command.before_file is not None and command.before is not None:
        report.attach_before(results, command.before, command.before_file)
    results["targets"] = report.targets(results)
    results["seconds"] = round(time.monotonic() - began, 1)
    print(report.render(results))
    command.output.parent.mkdir(parents=True, exist_ok=True)
    command.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {command.output} in {results['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
