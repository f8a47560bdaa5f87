"""The machine, the targets of the issue, and the results as plain-text tables."""

import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("uvicorn", "starlette", "sse-starlette", "uvloop", "httptools", "pydantic", "aiohttp")


def machine() -> dict[str, Any]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "packages": versions,
    }


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the issue with what was measured and whether it is met."""
    checks: list[dict[str, Any]] = []

    def check(name: str, measured: Any, met: bool | None) -> None:
        checks.append({"target": name, "measured": measured, "met": met})

    for row in results.get("round_trips", {}).get("runs", []):
        ratio = row["ratio"]
        check(f"round-trip ratio >= 0.6 (C={row['concurrency']})", ratio, ratio is not None and ratio >= 0.6)
    for run in results.get("fan_out", []):
        if run["subscribers"] == 1000:
            p99 = run["all_received_ms"]["p99"]
            check("fan-out p99 < 100 ms at 1,000 subscribers", p99, p99 is not None and p99 < 100)
            kb = run["kb_per_idle_subscriber"]
            check("<= 30 KB per idle subscriber", kb, kb <= 30)
    if capacity := results.get("capacity"):
        mb = capacity["rss_pending_mb"]
        check(f"{capacity['pending']:,} pending in < 200 MB", mb, mb < 200)
        slowdown = capacity["reply_slowdown"]
        check(
            f"reply with {capacity['pending']:,} pending as fast as with 1 (within 25%)",
            slowdown,
            slowdown <= 1.25,
        )
    worst = worst_lag(results)
    if worst is not None:
        check("no event-loop stall > 100 ms", worst, worst <= 100)
    return checks


def worst_lag(results: dict[str, Any]) -> float | None:
    lags: list[float] = []
    for row in results.get("round_trips", {}).get("runs", []):
        lags.append(row["gateway"]["loop_lag"]["max_ms"] or 0)
    for run in results.get("fan_out", []):
        lags += [run["loop_lag"]["max_ms"] or 0, run["loop_lag_connecting"]["max_ms"] or 0]
    if capacity := results.get("capacity"):
        lags += [lag["max_ms"] or 0 for lag in capacity["loop_lag"].values()]
    return max(lags, default=None)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(header), *(len(row[i]) for row in cells)) for i, header in enumerate(headers)]
    lines = ["  ".join(header.ljust(width) for header, width in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * width for width in widths))
    lines += ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render(results: dict[str, Any]) -> str:
    parts: list[str] = []
    box = results["machine"]
    parts.append(f"Machine: {box['cpus']} CPUs, {box['cpu_model']}, Python {box['python']}, {box['system']}")
    if (trips := results.get("round_trips")) is not None:
        server = trips["server"]
        parts.append(f"\nRound trips (gateway on {server['loop']}, {server['http']})")
        rows = []
        for row in trips["runs"]:
            gateway, base = row["gateway"], row["baseline"]
            rows.append(
                [
                    row["concurrency"],
                    gateway["per_s"],
                    gateway["post_to_asked_ms"]["p50"],
                    gateway["post_to_asked_ms"]["p99"],
                    gateway["reply_to_result_ms"]["p50"],
                    gateway["reply_to_result_ms"]["p99"],
                    gateway["server_cpu_us_per_op"],
                    base["per_s"],
                    base["server_cpu_us_per_op"],
                    row["ratio"],
                    row["cpu_ratio"],
                    gateway["loop_lag"]["max_ms"],
                    gateway["errors"] + gateway.get("replies_refused", 0) + base["errors"],
                ]
            )
        headers = ["C", "elicit/s", "ask p50", "ask p99", "result p50", "result p99", "CPU us/rt"]
        headers += ["baseline req/s", "base CPU us/req", "ratio", "CPU ratio", "lag max", "errors"]
        parts.append(_table(headers, rows))
        parts.append(
            "ask: POST /elicit sent -> question.asked received; result: reply sent -> tool has its result"
            " (ms).\nratio: elicitations/s over half the baseline's requests/s; CPU ratio: the same by server"
            " CPU time.\nerrors: requests that failed or were refused (tools, replies and baseline);"
            " 0 when all went through."
        )
    if (fan := results.get("fan_out")) is not None:
        parts.append(
            "\nFan-out (one question asked; all: until every idle subscriber has it; each: per subscriber)"
        )
        rows = []
        for run in fan:
            for server, measured in (("gateway", run), ("baseline", run.get("baseline"))):
                if measured is None:
                    continue
                rows.append(
                    [
                        measured["subscribers"],
                        server,
                        measured["all_received_ms"]["p50"],
                        measured["all_received_ms"]["p99"],
                        measured["per_subscriber_ms"]["p50"],
                        measured["per_subscriber_ms"]["p99"],
                        measured["kb_per_idle_subscriber"],
                        measured["server_cpu_us_per_delivery"],
                        measured["connect_s"],
                        measured["loop_lag"]["max_ms"],
                        measured["loop_lag_connecting"]["max_ms"],
                    ]
                )
        headers = ["subscribers", "server", "all p50 ms", "all p99 ms", "each p50 ms", "each p99 ms"]
        headers += ["KB/subscriber", "CPU us/delivery", "connect s", "lag max", "lag max connecting"]
        parts.append(_table(headers, rows))
    if (capacity := results.get("capacity")) is not None:
        parts.append(f"\nCapacity ({capacity['pending']:,} pending questions)")
        lag = max((phase["max_ms"] or 0 for phase in capacity["loop_lag"].values()), default=None)
        rows = [
            [
                "RSS before / with them pending (MB)",
                f"{capacity['rss_before_mb']} / {capacity['rss_pending_mb']}",
            ],
            ["memory per pending question (KB)", capacity["kb_per_pending"]],
            ["created per second", capacity["create_per_s"]],
            ["GET /question p50 / max (ms)", f"{capacity['list_ms']['p50']} / {capacity['list_ms']['max']}"],
            ["GET /question body (bytes)", capacity["list_bytes"]],
            ["reply p50 / p99, 1 pending (ms)", _pair(capacity["reply_one_pending_ms"])],
            [
                f"reply p50 / p99, {capacity['pending']:,} pending (ms)",
                _pair(capacity["reply_many_pending_ms"]),
            ],
            ["new subscriber gets every pending question (ms)", capacity["subscribe_backlog_ms"]],
            ["worst loop lag (ms)", lag],
        ]
        parts.append(_table(["measure", "value"], rows))
    parts.append("\nTargets")
    rows = [[check["target"], check["measured"], _met(check["met"])] for check in results["targets"]]
    parts.append(_table(["target", "measured", "met"], rows))
    return "\n".join(parts)


def _pair(spread: dict[str, Any]) -> str:
    return f"{spread['p50']} / {spread['p99']}"


def _met(met: bool | None) -> str:
    return "-" if met is None else ("yes" if met else "NO")
