"""The machine, the targets of the issue, and the results as plain-text tables."""

import os
import platform
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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


CPU_PER_REQUEST_MAX = 2.5
"""A round trip is two requests and their events: it may cost at most this many bare requests of CPU."""
THROUGHPUT_RATIO_MIN = 0.7
"""Elicitations per second over half the bare app's requests per second (two requests a round trip)."""
LATENCY_CONCURRENCY = 32
LATENCY_P99_MAX_MS = 50.0
STALL_MAX_MS = 100.0
LIST_MAX_MS = 100.0
PENDING_MEMORY_MAX_MB = 30.0
REPLY_SLOWDOWN_MAX = 1.25
FAN_OUT_SUBSCRIBERS = 1000
REDIS_CPU_SHARE_MAX = 0.5
"""On Redis, a round trip's CPU must fall to at most this share of the reference run's (``--before``)."""
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def store_kind(store: str) -> str:
    """``memory``, ``sqlite`` or ``redis``: what decides which targets apply and which runs compare."""
    if store.startswith(REDIS_SCHEMES):
        return "redis"
    if store.startswith("sqlite:"):
        return "sqlite"
    return store


def redacted(store: str) -> str:
    """The store's URL without its password, fit to be written to a results file."""
    parts = urlsplit(store)
    if parts.password is None:
        return store
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def attach_before(results: dict[str, Any], before: dict[str, Any], source: Path) -> None:
    """Put a previous run's numbers beside this run's: round trips matched by concurrency, capacity
    as a whole. Files of runs that did not record their store are taken as they are."""
    results["before"] = {"file": str(source), "store": before.get("store")}
    earlier = {row["concurrency"]: row["gateway"] for row in before.get("round_trips", {}).get("runs", [])}
    for row in results.get("round_trips", {}).get("runs", []):
        gateway = earlier.get(row["concurrency"])
        row["before"] = (
            None
            if gateway is None
            else {"per_s": gateway["per_s"], "server_cpu_us_per_op": gateway["server_cpu_us_per_op"]}
        )
    if (capacity := results.get("capacity")) is not None and (held := before.get("capacity")):
        capacity["before"] = {key: value for key, value in held.items() if key not in ("each_run", "before")}
    if (big := results.get("big_asks")) is not None and (held := before.get("big_asks")):
        big["before"] = {key: value for key, value in held.items() if key not in ("each_run", "before")}
    if (stalled := results.get("stalled")) is not None and (held := before.get("stalled")):
        stalled["before"] = {key: value for key, value in held.items() if key not in ("each_run", "before")}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target with its measured value (``value``, and readable in ``measured``) and whether it is met
    (None when there is nothing to judge it by)."""
    checks: list[dict[str, Any]] = []

    def check(name: str, value: float | None, measured: str, met: bool | None) -> None:
        checks.append({"target": name, "value": value, "measured": measured, "met": met})

    trips = results.get("round_trips", {}).get("runs", [])
    for row in trips:
        times = row["cpu_per_request"]
        round_trip, request = row["gateway"]["server_cpu_us_per_op"], row["baseline"]["server_cpu_us_per_op"]
        costs = f"{_whole(round_trip)} / {_whole(request)} us"
        check(
            f"CPU per round trip <= {CPU_PER_REQUEST_MAX}x a bare request's (C={row['concurrency']})",
            times,
            f"{_times(times)} ({costs})",
            None if times is None else times <= CPU_PER_REQUEST_MAX,
        )
    for row in trips:
        ratio, half = row["ratio"], row["baseline"]["per_s"] / 2
        check(
            f"elicitations/s >= {THROUGHPUT_RATIO_MIN} of half the bare requests/s (C={row['concurrency']})",
            ratio,
            f"{_cell(ratio)} ({_whole(row['gateway']['per_s'])} vs {_whole(half)} per s)",
            None if ratio is None else ratio >= THROUGHPUT_RATIO_MIN,
        )
    for row in trips:
        if row["concurrency"] != LATENCY_CONCURRENCY:
            continue
        for key, name in (("post_to_asked_ms", "post -> asked"), ("reply_to_result_ms", "reply -> result")):
            p99 = row["gateway"][key]["p99"]
            check(
                f"{name} p99 < {LATENCY_P99_MAX_MS:.0f} ms at C={LATENCY_CONCURRENCY}",
                p99,
                f"{_against(p99, LATENCY_P99_MAX_MS)} ms",
                None if p99 is None else p99 < LATENCY_P99_MAX_MS,
            )
    if (worst := worst_lag(results)) is not None:
        runs = results.get("options", {}).get("runs", 1)
        check(
            f"no event-loop stall > {STALL_MAX_MS:.0f} ms",
            worst,
            f"{_against(worst, STALL_MAX_MS)} ms{' (worst of every run)' if runs > 1 else ''}",
            worst <= STALL_MAX_MS,
        )
    if capacity := results.get("capacity"):
        pending = f"{capacity['pending']:,} pending"
        listing = capacity["list_ms"]
        check(
            f"GET /question with {pending} < {LIST_MAX_MS:.0f} ms (p50)",
            listing["p50"],
            f"{_against(listing['p50'], LIST_MAX_MS)} ms (max {_cell(listing['max'])})",
            None if listing["p50"] is None else listing["p50"] < LIST_MAX_MS,
        )
        increase = rss_increase(capacity)
        rss = f"{_cell(capacity['rss_before_mb'])} -> {_cell(capacity['rss_pending_mb'])}"
        check(
            f"{pending} in <= {PENDING_MEMORY_MAX_MB:.0f} MB (RSS increase)",
            increase,
            f"{_against(increase, PENDING_MEMORY_MAX_MB)} MB ({rss})",
            increase <= PENDING_MEMORY_MAX_MB,
        )
        slowdown = capacity["reply_slowdown"]
        one, many = capacity["reply_one_pending_ms"]["p50"], capacity["reply_many_pending_ms"]["p50"]
        check(
            f"reply with {pending} as fast as with 1 (within {(REPLY_SLOWDOWN_MAX - 1) * 100:.0f} %)",
            slowdown,
            f"{_change(slowdown)} (p50 {_cell(many)} vs {_cell(one)} ms)",
            slowdown <= REPLY_SLOWDOWN_MAX,
        )
    for run in results.get("fan_out", []):
        if run["subscribers"] != FAN_OUT_SUBSCRIBERS or run.get("baseline") is None:
            continue
        mine, bare = run["all_received_ms"]["p99"], run["baseline"]["all_received_ms"]["p99"]
        met = None if mine is None or bare is None else mine <= bare
        change = f" ({_change(mine / bare)})" if met is not None and bare else ""
        check(
            f"fan-out to {FAN_OUT_SUBSCRIBERS:,}: p99 all have it <= the bare baseline's",
            mine,
            f"{_cell(mine)} vs {_cell(bare)} ms{change}",
            met,
        )
    if store_kind(results.get("store", "memory")) == "redis":
        _redis_targets(results, trips, check)
    return checks


def _redis_targets(
    results: dict[str, Any],
    trips: list[dict[str, Any]],
    check: Callable[[str, float | None, str, bool | None], None],
) -> None:
    name = f"Redis: CPU per round trip <= {REDIS_CPU_SHARE_MAX:.0%} of the reference's"
    before = results.get("before")
    if before is None:
        check(name, None, "no reference (--before FILE)", None)
        return
    if before["store"] is not None and store_kind(before["store"]) != "redis":
        check(name, None, f"no reference (before ran on {store_kind(before['store'])})", None)
        return
    for row in trips:
        now = row["gateway"]["server_cpu_us_per_op"]
        then = (row.get("before") or {}).get("server_cpu_us_per_op")
        share = now / then if now is not None and then else None
        measured = (
            f"{_whole(now)} vs {_whole(then)} us ({_times(share)})" if share is not None else "no reference"
        )
        check(
            f"{name} (C={row['concurrency']})",
            share,
            measured,
            None if share is None else share <= REDIS_CPU_SHARE_MAX,
        )


def rss_increase(capacity: dict[str, Any]) -> float:
    """Memory the pending questions took (runs before this field was recorded: from the two RSS)."""
    increase = capacity.get("rss_increase_mb")
    if increase is None:
        increase = round(capacity["rss_pending_mb"] - capacity["rss_before_mb"], 1)
    return increase


def worst_lag(results: dict[str, Any]) -> float | None:
    """The longest stall of the gateway in any run: one stall breaks the target, whatever the median."""
    lags: list[float] = []
    for row in results.get("round_trips", {}).get("runs", []):
        for run in row.get("each_run", [row]):
            lags.append(run["gateway"]["loop_lag"]["max_ms"] or 0)
    for size in results.get("fan_out", []):
        for run in size.get("each_run", [size]):
            lags += [run["loop_lag"]["max_ms"] or 0, run["loop_lag_connecting"]["max_ms"] or 0]
    if capacity := results.get("capacity"):
        for run in capacity.get("each_run", [capacity]):
            lags += [lag["max_ms"] or 0 for lag in run["loop_lag"].values()]
    return max(lags, default=None)


def _whole(value: float | None) -> str:
    """Rates and microseconds: their decimals are noise."""
    return "-" if value is None else f"{value:,.0f}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _change(ratio: float) -> str:
    """A ratio to 1 as a change: 1.12 is ``+12 %``, 0.8 is ``-20 %``."""
    return f"{(ratio - 1) * 100:+.0f} %"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    """Numbers right-aligned; a column of nothing but text (names, targets) left-aligned."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    text = [all(isinstance(row[i], str) for row in rows) for i in range(len(headers))]
    lines = ["  ".join(header.ljust(width) for header, width in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * width for width in widths))
    for row in cells:
        aligned = (
            cell.ljust(width) if left else cell.rjust(width)
            for cell, width, left in zip(row, widths, text, strict=True)
        )
        lines.append("  ".join(aligned).rstrip())
    return "\n".join(lines)


def _against(value: float | None, limit: float) -> str:
    """``value`` as :func:`_cell` shows it, with more digits where that would round it onto ``limit``
    (49.98 against 50 reads 49.98, not 50.0)."""
    cell = _cell(value)
    if value is not None and value != limit and cell == _cell(float(limit)):
        return f"{value:,.3f}".rstrip("0")
    return cell


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
    runs = results.get("options", {}).get("runs", 1)
    repeated = f"; every measurement {runs} times, medians shown" if runs > 1 else ""
    parts.append(f"Store: {results.get('store', 'memory')}{repeated}")
    before = results.get("before")
    if before is not None:
        parts.append(f"Before: {before['file']} (store {before['store'] or 'not recorded'})")
    if (trips := results.get("round_trips")) is not None:
        parts.append(_round_trips(trips, before is not None))
    if (held := results.get("memory")) is not None:
        parts.append(_memory(held))
    if (fan := results.get("fan_out")) is not None:
        parts.append(_fan_out(fan))
    if (capacity := results.get("capacity")) is not None:
        parts.append(_capacity(capacity))
    if (big := results.get("big_asks")) is not None:
        parts.append(_big_asks(big))
    if (held := results.get("stalled")) is not None:
        parts.append(_stalled(held))
    if (passthrough := results.get("proxy")) is not None:
        parts.append(_proxy(passthrough))
    parts.append("\nTargets")
    rows = [[check["target"], check["measured"], _met(check["met"])] for check in results["targets"]]
    parts.append(_table(["target", "measured", "met"], rows))
    return "\n".join(parts)


def _round_trips(trips: dict[str, Any], with_before: bool) -> str:
    server = trips["server"]
    parts = [f"\nRound trips (gateway on {server['loop']}, {server['http']})"]
    rows = []
    for row in trips["runs"]:
        gateway, base, bare = row["gateway"], row["baseline"], row.get("baseline_round_trip")
        earlier = row.get("before") or {}
        cells: list[Any] = [row["concurrency"], gateway["per_s"]]
        cells += [earlier.get("per_s")] if with_before else []
        cells.append(gateway["server_cpu_us_per_op"])
        cells += [earlier.get("server_cpu_us_per_op")] if with_before else []
        cells += [base["per_s"], base["server_cpu_us_per_op"]]
        cells += [bare["per_s"], bare["server_cpu_us_per_op"]] if bare else [None, None]
        cells += [row["ratio"], row.get("cpu_per_request")]
        failed = [gateway["errors"], gateway.get("replies_refused", 0), base["errors"]]
        failed += [bare["errors"], bare.get("replies_refused", 0)] if bare else []
        cells.append(sum(failed))
        rows.append(cells)
    headers = ["C", "elicit/s", *(["before"] if with_before else []), "CPU us/rt"]
    headers += ["before"] if with_before else []
    headers += ["base req/s", "base CPU us/req", "bare rt/s", "bare CPU us/rt", "ratio", "CPU/req", "errors"]
    parts.append(_table(headers, rows))
    rows = []
    for row in trips["runs"]:
        gateway, bare = row["gateway"], row.get("baseline_round_trip") or {}
        cells = [row["concurrency"]]
        for measured in (gateway, bare):
            for key in ("post_to_asked_ms", "reply_to_result_ms"):
                spread = measured.get(key) or {}
                cells += [spread.get("p50"), spread.get("p99")]
        cells.append(gateway["loop_lag"]["max_ms"])
        rows.append(cells)
    headers = ["C", "ask p50", "ask p99", "result p50", "result p99"]
    headers += ["bare ask p50", "bare ask p99", "bare result p50", "bare result p99", "lag max"]
    parts.append("")
    parts.append(_table(headers, rows))
    notes = [
        "rt: round trip. base: the baseline's bare JSON POST; bare rt: the same round trip against the"
        " baseline (POST /elicit held until its reply).",
        "ratio: elicitations/s over half the base requests/s; CPU/req: CPU us/rt over base CPU us/req.",
        "ask: POST /elicit sent -> question.asked received; result: reply sent -> tool has its result (ms).",
        "errors: requests that failed or were refused (tools, replies, baseline); 0 when all went through.",
    ]
    if with_before:
        notes.append("before: the gateway's same measure in the --before file, at the same C.")
    parts.append("\n".join(notes))
    return "\n".join(parts)


def _memory(memory: dict[str, Any]) -> str:
    gateway, baseline = memory["gateway"], memory["baseline"]
    rows = [
        [
            "idle process, after one round trip (MB)",
            gateway["idle_mb"],
            baseline["idle_mb"],
            memory["idle_ratio"],
        ],
        [
            f"each of {memory['held']:,} held POST /elicit (KB)",
            gateway["kb_per_held"],
            baseline["kb_per_held"],
            memory["held_ratio"],
        ],
    ]
    return "\nMemory (RSS)\n" + _table(["", "gateway", "baseline", "ratio"], rows)


def _fan_out(fan: list[dict[str, Any]]) -> str:
    parts = ["\nFan-out (one question asked; all: until every idle subscriber has it; each: per subscriber)"]
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
    return "\n".join(parts)


def _capacity(capacity: dict[str, Any]) -> str:
    parts = [f"\nCapacity ({capacity['pending']:,} pending questions)"]
    rows = _capacity_rows(capacity)
    headers = ["measure", "value"]
    if (before := capacity.get("before")) is not None:
        headers.append("before")
        if before["pending"] != capacity["pending"]:
            headers[-1] = f"before ({before['pending']:,} pending)"
        rows = [[*row, earlier[1]] for row, earlier in zip(rows, _capacity_rows(before), strict=True)]
    parts.append(_table(headers, rows))
    return "\n".join(parts)


def _capacity_rows(capacity: dict[str, Any]) -> list[list[Any]]:
    lag = max((phase["max_ms"] or 0 for phase in capacity["loop_lag"].values()), default=None)
    return [
        [
            "RSS before / with them pending (MB)",
            f"{_cell(capacity['rss_before_mb'])} / {_cell(capacity['rss_pending_mb'])}",
        ],
        ["RSS increase with them pending (MB)", rss_increase(capacity)],
        ["memory per pending question (KB)", capacity["kb_per_pending"]],
        ["created per second", capacity["create_per_s"]],
        ["GET /question p50 / max (ms)", f"{capacity['list_ms']['p50']} / {capacity['list_ms']['max']}"],
        ["GET /question body (bytes)", capacity["list_bytes"]],
        ["reply p50 / p99, 1 pending (ms)", _pair(capacity["reply_one_pending_ms"])],
        [f"reply p50 / p99, {capacity['pending']:,} pending (ms)", _pair(capacity["reply_many_pending_ms"])],
        ["new subscriber gets every pending question (ms)", capacity["subscribe_backlog_ms"]],
        ["worst loop lag (ms)", lag],
    ]


def _big_asks(big: dict[str, Any]) -> str:
    parts = [f"\nBig asks ({big['asks']} of {big['body_bytes']:,} bytes, 8 at a time in 4 sessions)"]
    rows = _big_ask_rows(big)
    headers = ["measure", "value"]
    if (before := big.get("before")) is not None:
        headers.append("before")
        rows = [[*row, earlier[1]] for row, earlier in zip(rows, _big_ask_rows(before), strict=True)]
    parts.append(_table(headers, rows))
    return "\n".join(parts)


def _big_ask_rows(big: dict[str, Any]) -> list[list[Any]]:
    return [
        ["taken / refused as full / other", f"{big['accepted']} / {big['refused_full']} / {big['errors']}"],
        ["seconds for all", big["seconds"]],
        ["server CPU per ask (ms)", big["server_cpu_ms_per_ask"]],
        [
            "RSS before / pending / peak (MB)",
            f"{big['rss_before_mb']} / {big['rss_pending_mb']} / {big['rss_peak_mb']}",
        ],
        ["RSS once every question is rejected (MB)", big["rss_after_reject_mb"]],
        ["worst loop lag (ms)", big["loop_lag"]["max_ms"]],
    ]


def _stalled(held: dict[str, Any]) -> str:
    parts = [
        f"\nStalled subscribers ({held['subscribers']} that never read, {held['big_questions']} big questions"
        f" pending: {held['backlog_mb']} MB owed to each)"
    ]
    rows = _stalled_rows(held)
    headers = ["measure", "value"]
    if (before := held.get("before")) is not None:
        headers.append("before")
        rows = [[*row, earlier[1]] for row, earlier in zip(rows, _stalled_rows(before), strict=True)]
    parts.append(_table(headers, rows))
    return "\n".join(parts)


def _stalled_rows(held: dict[str, Any]) -> list[list[Any]]:
    return [
        ["server RSS per stalled subscriber (KB)", held["rss_per_subscriber_kb"]],
        ["kernel send queue per stalled subscriber (KB)", held["kernel_send_queue_per_subscriber_kb"]],
        [
            "RSS before / held / after the drop (MB)",
            f"{held['rss_before_mb']} / {held['rss_held_mb']} / {held['rss_after_drop_mb']}",
        ],
        ["seconds until every one was dropped", held["seconds_until_dropped"]],
        ["/livez p99 / max while they connect (ms)", _livez(held.get("livez_connecting"))],
        ["/livez p99 / max while they are dropped (ms)", _livez(held.get("livez_dropping"))],
        ["worst loop lag while they connect / are dropped (ms)", _lags(held)],
    ]


def _livez(spread: dict[str, Any] | None) -> str:
    return "-" if spread is None else f"{spread['p99_ms']} / {spread['max_ms']}"


def _lags(held: dict[str, Any]) -> str:
    dropping = (held.get("loop_lag_dropping") or {}).get("max_ms")
    return f"{held['loop_lag']['max_ms']} / {dropping if dropping is not None else '-'}"


def _proxy(passthrough: dict[str, Any]) -> str:
    parts = [f"\nProxy passthrough (tool {passthrough['tool']!r}, which asks nobody; one client)"]
    rows = []
    for row in passthrough["rows"]:
        for path in ("direct", "proxy"):
            measured = row[path]
            cpu = measured["cpu_us_per_call"]
            cells: list[Any] = [
                row["transport"],
                row["era"],
                row["in_flight"],
                path,
                _rounded(measured["per_s"]),
            ]
            cells += [measured["latency_ms"]["p50"], measured["latency_ms"]["p99"]]
            cells += [_rounded(cpu.get(role)) for role in ("client", "proxy", "upstream", "total")]
            cells.append(measured["errors"])
            rows.append(cells)
    headers = ["upstream", "era", "C", "path", "calls/s", "p50 ms", "p99 ms"]
    headers += ["client CPU us", "proxy CPU us", "upstream CPU us", "total CPU us", "errors"]
    parts.append(_table(headers, rows))
    rows = []
    for row in passthrough["rows"]:
        more = row["overhead"]
        rows.append(
            [
                row["transport"],
                row["era"],
                row["in_flight"],
                _rounded(more["latency_p50_us"]),
                _rounded(more["latency_p99_us"]),
                _rounded(more["cpu_us_per_call"]),
                more["per_s_ratio"],
            ]
        )
    parts.append("")
    parts.append(
        _table(["upstream", "era", "C", "+p50 us", "+p99 us", "+CPU us/call", "calls/s ratio"], rows)
    )
    notes = [
        "C: calls in flight on the one client; direct: the client starts (stdio) or reaches (http) the"
        " upstream itself; proxy: through elicitation-gateway proxy.",
        "CPU us: per call, of each process, from /proc/<pid>/stat over the measured window; the client is"
        " the bench's own process.",
        "+: the proxy's row less the direct one (its overhead per call); calls/s ratio: proxy over direct.",
    ]
    parts.append("\n".join(notes))
    return "\n".join(parts)


def _rounded(value: float | None) -> int | None:
    """Rates and microseconds, as whole numbers right-aligned in a table: their decimals are noise."""
    return None if value is None else round(value)


def _pair(spread: dict[str, Any]) -> str:
    return f"{spread['p50']} / {spread['p99']}"


def _met(met: bool | None) -> str:
    return "-" if met is None else ("yes" if met else "NO")
