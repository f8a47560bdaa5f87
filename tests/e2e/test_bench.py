"""The benchmark harness works end to end: ``python -m bench --quick`` starts real servers as processes,
loads them from client processes, and reports every measure the Performance section publishes.

Nothing here asserts a speed: the quick run's counts are far too small to mean anything. It pins that
each measure was actually taken (samples exist, the probe reported, nothing failed), that repeated runs
are folded into medians with every run kept, and that an earlier run's JSON is shown beside this one.
One quick run with ``--runs 2 --before`` covers all of it, to keep the suite short.
"""

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import report
from bench.process import ServerProcess
from bench.scenarios import median_of, percentile, shares

REPOSITORY = Path(__file__).resolve().parents[2]
RUNS = 2


def _spread(p50: float, p99: float) -> dict[str, Any]:
    return {"p50": p50, "p99": p99, "max": p99, "count": 5}


EARLIER_RUN: dict[str, Any] = {
    # As a run of the harness before it recorded its store and kept each run: --before must read it too.
    "machine": {"cpus": 2, "cpu_model": "AMD EPYC", "python": "3.11.7", "system": "Linux"},
    "options": {"log_level": "info", "priority": 0, "app_dir": str(REPOSITORY)},
    "round_trips": {
        "runs": [{"concurrency": 1, "gateway": {"per_s": 123.0, "server_cpu_us_per_op": 4567.0}}]
    },
    "capacity": {
        "pending": 50,
        "rss_before_mb": 80.0,
        "rss_pending_mb": 81.5,
        "kb_per_pending": 30.7,
        "create_per_s": 111.0,
        "list_ms": _spread(1.0, 2.0),
        "list_bytes": 20_000,
        "reply_one_pending_ms": _spread(1.0, 2.0),
        "reply_many_pending_ms": _spread(1.1, 2.2),
        "reply_slowdown": 1.1,
        "subscribe_backlog_ms": 3.0,
        "loop_lag": {"create": {"max_ms": 9.0}},
    },
}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    folder = tmp_path_factory.mktemp("bench")
    output, before = folder / "results.json", folder / "before.json"
    before.write_text(json.dumps(EARLIER_RUN))
    command = [sys.executable, "-m", "bench", "--quick", "--runs", str(RUNS), "--before", str(before)]
    finished = subprocess.run(
        [*command, "--json", str(output)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    return json.loads(output.read_text()), finished.stdout


def _measured(concurrency: int, per_s: float, cpu_us: float, p99_ms: float | None = None) -> dict[str, Any]:
    """One round-trip measurement; with ``p99_ms`` that of tools, whose latencies are timed too."""
    measured: dict[str, Any] = {"concurrency": concurrency, "per_s": per_s, "server_cpu_us_per_op": cpu_us}
    measured.update(errors=0, loop_lag={"max_ms": 5.0})
    if p99_ms is not None:
        measured["post_to_asked_ms"] = _spread(p99_ms / 2, p99_ms)
        measured["reply_to_result_ms"] = _spread(p99_ms / 2, p99_ms + 10)
    return measured


def _results(store: str) -> dict[str, Any]:
    """Made-up results of a full run (C=1 and C=32, fan-out to 1,000): what the quick run cannot reach."""
    rows = []
    for concurrency, per_s, cpu_us, p99 in ((1, 300.0, 1000.0, 5.0), (32, 500.0, 900.0, 45.0)):
        gateway = _measured(concurrency, per_s, cpu_us, p99)
        baseline = _measured(concurrency, 1200.0, 400.0)
        row = {"concurrency": concurrency, "gateway": gateway, "baseline": baseline}
        rows.append({**row, "ratio": per_s / 600, "cpu_ratio": 0.8, "cpu_per_request": cpu_us / 400})
    fan_out = {
        "subscribers": 1000,
        "all_received_ms": _spread(50.0, 90.0),
        "loop_lag": {"max_ms": 20.0},
        "loop_lag_connecting": {"max_ms": 30.0},
        "baseline": {"all_received_ms": _spread(40.0, 95.0)},
    }
    return {
        "machine": EARLIER_RUN["machine"],
        "store": store,
        "options": {"runs": 1},
        "round_trips": {"server": {"loop": "uvloop.Loop", "http": "httptools"}, "runs": rows},
        "fan_out": [fan_out],
    }


def _sampled(spread: dict[str, Any]) -> bool:
    return spread["count"] > 0 and spread["p50"] is not None and spread["p99"] >= spread["p50"]


@pytest.mark.timeout(180)
def test_round_trips_are_measured_beside_the_baseline(quick_run):
    results, _ = quick_run
    trips = results["round_trips"]
    assert trips["server"]["loop"] == "uvloop.Loop"
    # uvicorn's httptools protocol, with the gateway's deadlines for slow clients
    assert trips["server"]["http"] == "elicitation_gateway.server.uvicorn_internals.DeadlineProtocol"
    assert [row["concurrency"] for row in trips["runs"]] == [1, 4]
    for row in trips["runs"]:
        gateway, baseline = row["gateway"], row["baseline"]
        assert gateway["completed"] > 0
        assert gateway["errors"] == 0
        assert baseline["completed"] > 0
        assert baseline["errors"] == 0
        assert _sampled(gateway["post_to_asked_ms"])
        assert _sampled(gateway["reply_to_result_ms"])
        assert _sampled(baseline["latency_ms"])
        assert row["ratio"] == pytest.approx(gateway["per_s"] / (baseline["per_s"] / 2), abs=0.001)
        assert row["cpu_per_request"] > 0
        assert gateway["loop_lag"]["max_ms"] is not None  # the probe ran inside the server
        bare = row["baseline_round_trip"]  # the same tools and answerer against the baseline
        assert bare["completed"] > 0
        assert bare["errors"] == 0
        assert bare["replies_refused"] == 0
        assert _sampled(bare["post_to_asked_ms"])
        assert _sampled(bare["reply_to_result_ms"])
        assert len(row["each_run"]) == RUNS
        for run in row["each_run"]:
            assert run["gateway"]["completed"] > 0
            assert run["baseline_round_trip"]["completed"] > 0
            assert run["ratio"] is not None
        completed = sorted(run["gateway"]["completed"] for run in row["each_run"])
        assert gateway["completed"] == pytest.approx(sum(completed) / RUNS)  # the median of two


@pytest.mark.timeout(180)
def test_fan_out_reaches_every_subscriber_of_both_servers(quick_run):
    results, _ = quick_run
    (run,) = results["fan_out"]
    assert run["subscribers"] == 20
    assert run["all_received_ms"]["count"] == run["questions"] == 3
    assert run["per_subscriber_ms"]["count"] == 20 * 3
    assert run["streams_ended_early"] == 0
    assert run["rss_idle_mb"] > 0
    assert isinstance(run["kb_per_idle_subscriber"], float)
    assert run["loop_lag"]["max_ms"] is not None
    baseline = run["baseline"]  # the same clients against a bare StreamingResponse
    assert baseline["per_subscriber_ms"]["count"] == 20 * 3
    assert baseline["streams_ended_early"] == 0
    assert len(run["each_run"]) == RUNS
    assert all(each["baseline"]["per_subscriber_ms"]["count"] == 20 * 3 for each in run["each_run"])


@pytest.mark.timeout(180)
def test_capacity_times_listing_replies_and_backlog(quick_run):
    results, _ = quick_run
    capacity = results["capacity"]
    assert capacity["pending"] == 50
    assert capacity["list_bytes"] > 50 * 100  # GET /question listed every pending question
    assert _sampled(capacity["reply_one_pending_ms"])
    assert _sampled(capacity["reply_many_pending_ms"])
    assert capacity["subscribe_backlog_ms"] > 0
    assert set(capacity["loop_lag"]) >= {"create", "list"}
    assert capacity["rss_increase_mb"] == pytest.approx(
        capacity["rss_pending_mb"] - capacity["rss_before_mb"], abs=0.2
    )
    assert len(capacity["each_run"]) == RUNS
    # Each run starts from an empty gateway: the first run's questions were withdrawn before the second.
    assert [each["list_bytes"] for each in capacity["each_run"]] == [capacity["list_bytes"]] * RUNS


@pytest.mark.timeout(180)
def test_big_asks_measure_what_is_taken_memory_and_the_loop(quick_run):
    results, stdout = quick_run
    big = results["big_asks"]
    assert big["asks"] == 6
    assert big["body_bytes"] > 700_000
    assert big["accepted"] + big["refused_full"] == 6
    assert big["errors"] == 0
    assert big["rss_peak_mb"] >= big["rss_pending_mb"] > 0
    assert big["server_cpu_ms_per_ask"] > 0
    assert big["loop_lag"]["max_ms"] is not None
    assert len(big["each_run"]) == RUNS
    assert "Big asks (6 of" in stdout


@pytest.mark.timeout(180)
def test_stalled_subscribers_measure_what_each_holds_and_when_it_is_dropped(quick_run):
    results, stdout = quick_run
    held = results["stalled"]
    assert held["subscribers"] == 10
    assert held["big_questions"] == 2
    assert held["backlog_mb"] > 1
    assert held["subscribers_held"] == 10  # each was open when memory was read
    assert held["seconds_until_dropped"] is not None  # and each was dropped
    assert isinstance(held["rss_per_subscriber_kb"], float)
    assert held["kernel_send_queue_per_subscriber_kb"] > 0
    assert held["livez_connecting"]["max_ms"] is not None
    assert held["livez_dropping"]["max_ms"] is not None
    assert held["loop_lag"]["max_ms"] is not None
    assert held["loop_lag_dropping"]["max_ms"] is not None
    assert len(held["each_run"]) == RUNS
    assert "Stalled subscribers (10 that never read" in stdout


@pytest.mark.timeout(180)
def test_proxy_passthrough_is_measured_beside_the_bare_upstream(quick_run):
    results, printed = quick_run
    (row,) = results["proxy"]["rows"]
    assert (row["transport"], row["era"], row["in_flight"]) == ("stdio", "legacy", 4)
    for path in ("direct", "proxy"):
        measured = row[path]
        assert measured["completed"] > 0
        assert measured["errors"] == 0
        assert _sampled(measured["latency_ms"])
        assert measured["cpu_us_per_call"]["client"] > 0
        assert measured["cpu_us_per_call"]["upstream"] > 0  # the upstream process was found and read
    # The proxy's own process is measured beside the upstream it started, and only on its path.
    assert set(row["proxy"]["cpu_us_per_call"]) == {"client", "proxy", "upstream", "total"}
    assert set(row["direct"]["cpu_us_per_call"]) == {"client", "upstream", "total"}
    assert row["proxy"]["cpu_us_per_call"]["proxy"] > 0
    for path in ("direct", "proxy"):
        assert row[path]["processes"]["upstream"].startswith("-m tests.proxy.upstream")
        assert row[path]["processes"]["client"].startswith("-m bench")
    assert row["proxy"]["processes"]["proxy"].startswith("-m elicitation_gateway proxy --gateway")
    assert row["overhead"]["cpu_us_per_call"] == pytest.approx(
        row["proxy"]["cpu_us_per_call"]["total"] - row["direct"]["cpu_us_per_call"]["total"], abs=0.2
    )
    assert len(row["each_run"]) == RUNS
    assert "Proxy passthrough (tool 'quote'" in printed


@pytest.mark.timeout(180)
def test_report_names_the_machine_the_store_and_every_target(quick_run):
    results, printed = quick_run
    assert results["machine"]["cpus"] >= 1
    assert results["machine"]["python"].count(".") == 2
    assert results["store"] == "memory"
    assert results["options"]["runs"] == RUNS
    targets = [check["target"] for check in results["targets"]]
    assert "CPU per round trip <= 2.5x a bare request's (C=1)" in targets
    assert "elicitations/s >= 0.7 of half the bare requests/s (C=4)" in targets
    assert "no event-loop stall > 100 ms" in targets
    assert "GET /question with 50 pending < 100 ms (p50)" in targets
    assert "50 pending in <= 30 MB (RSS increase)" in targets
    assert "reply with 50 pending as fast as with 1 (within 25 %)" in targets
    assert not any("C=32" in target or "Redis" in target for target in targets)  # neither was measured
    for check in results["targets"]:
        assert isinstance(check["measured"], str)
        assert check["met"] in (True, False)
    for heading in ("Round trips", "Fan-out", "Capacity", "Targets", "medians shown"):
        assert heading in printed


@pytest.mark.timeout(180)
def test_before_file_is_shown_beside_this_run(quick_run):
    results, printed = quick_run
    assert results["before"]["store"] is None  # the earlier file did not record one
    first, second = results["round_trips"]["runs"]
    assert first["before"] == {"per_s": 123.0, "server_cpu_us_per_op": 4567.0}
    assert second["before"] is None  # the earlier run had no C=4
    assert results["capacity"]["before"]["create_per_s"] == 111.0
    assert "(store not recorded)" in printed
    assert "4,567.0" in printed  # the round-trip table's before column
    assert "111.0" in printed  # the capacity table's before column


@pytest.mark.timeout(180)
def test_a_run_reads_back_as_the_before_of_the_next(quick_run):
    results, _ = quick_run
    later = copy.deepcopy(results)
    report.attach_before(later, results, Path("earlier.json"))
    assert later["before"] == {"file": "earlier.json", "store": "memory"}
    for row in later["round_trips"]["runs"]:
        assert row["before"]["per_s"] == row["gateway"]["per_s"]
        assert row["before"]["server_cpu_us_per_op"] == row["gateway"]["server_cpu_us_per_op"]
    assert "each_run" not in later["capacity"]["before"]
    assert "before" in report.render({**later, "targets": report.targets(later)})


def _targets(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["target"]: check for check in report.targets(results)}


def test_latency_fan_out_and_cpu_targets_of_a_full_run():
    checks = _targets(_results("memory"))
    assert checks["post -> asked p99 < 50 ms at C=32"]["met"] is True
    assert checks["reply -> result p99 < 50 ms at C=32"]["met"] is False  # 55 ms
    assert checks["CPU per round trip <= 2.5x a bare request's (C=1)"]["measured"] == "2.50x (1,000 / 400 us)"
    assert checks["CPU per round trip <= 2.5x a bare request's (C=32)"]["met"] is True
    assert checks["elicitations/s >= 0.7 of half the bare requests/s (C=1)"]["met"] is False
    fan_out = checks["fan-out to 1,000: p99 all have it <= the bare baseline's"]
    assert (fan_out["met"], fan_out["measured"]) == (True, "90.0 vs 95.0 ms (-5 %)")
    assert not any("Redis" in target for target in checks)


def test_a_measure_just_under_its_target_is_not_shown_as_the_target():
    results = _results("memory")
    results["round_trips"]["runs"][1]["gateway"]["post_to_asked_ms"]["p99"] = 49.98
    check = _targets(results)["post -> asked p99 < 50 ms at C=32"]
    assert (check["met"], check["measured"]) == (True, "49.98 ms")


def test_redis_cpu_target_needs_a_reference_of_the_same_store():
    name = "Redis: CPU per round trip <= 50% of the reference's"
    results = _results("redis://127.0.0.1:6379/0")
    assert _targets(results)[name]["measured"] == "no reference (--before FILE)"

    other_store = copy.deepcopy(results)
    report.attach_before(other_store, _results("memory"), Path("memory.json"))
    assert _targets(other_store)[name]["measured"] == "no reference (before ran on memory)"

    earlier = _results("redis://127.0.0.1:6379/0")
    earlier["round_trips"]["runs"][0]["gateway"]["server_cpu_us_per_op"] = 2500.0
    report.attach_before(results, earlier, Path("redis.json"))
    checks = _targets(results)
    assert checks[f"{name} (C=1)"]["met"] is True  # 1,000 us against 2,500
    assert checks[f"{name} (C=1)"]["measured"] == "1,000 vs 2,500 us (0.40x)"
    assert checks[f"{name} (C=32)"]["met"] is False  # the same 900 us as before


def test_runs_fold_into_medians_with_failures_added_up():
    runs = [
        {"per_s": 10.0, "completed": 3, "errors": 1, "server": "x", "lag": {"max_ms": 4.0}},
        {"per_s": 30.0, "completed": 5, "errors": 0, "server": "x", "lag": {"max_ms": None}},
        {"per_s": 20.0, "completed": 4, "errors": 2, "server": "x", "lag": {"max_ms": 8.0}},
    ]
    assert median_of(runs) == {
        "per_s": 20.0,
        "completed": 4,
        "errors": 3,
        "server": "x",
        "lag": {"max_ms": 6.0},
    }
    assert median_of([{"count": 3}, {"count": 3}]) == {"count": 3}


def test_store_url_is_recorded_without_its_password():
    assert report.redacted("redis://:secret@10.0.0.1:6379/0") == "redis://:***@10.0.0.1:6379/0"
    assert report.redacted("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert report.store_kind("rediss://cache:6380/1") == "redis"
    assert report.store_kind("sqlite:///gateway.db") == "sqlite"
    assert report.store_kind("memory") == "memory"


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile([7], 99) == 7
    assert percentile([], 50) is None


def test_load_is_split_evenly_over_client_processes():
    assert shares(128, 2) == [64, 64]
    assert shares(5, 2) == [3, 2]
    assert shares(1, 2) == [1]


def test_app_dir_changes_the_service_measured_and_nothing_else(tmp_path):
    """``--app-dir`` of an older checkout measures its service beside this harness's own baseline and
    probe, even when that checkout has a ``bench`` package of its own."""
    for package in ("elicitation_gateway", "bench"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    script = (
        "import bench.baseline, elicitation_gateway, pathlib; "
        "print(pathlib.Path(elicitation_gateway.__file__).resolve().parent); "
        "print(pathlib.Path(bench.baseline.__file__).resolve().parent)"
    )
    server = ServerProcess("bench.baseline", app_dir=tmp_path)
    try:
        found = subprocess.run(
            [sys.executable, "-c", script],
            cwd=server._workdir,
            env={**server._env, "PYTHONSAFEPATH": ""},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    finally:
        shutil.rmtree(server._workdir, ignore_errors=True)
    assert found == [str(tmp_path / "elicitation_gateway"), str(REPOSITORY / "bench")]


def test_memory_is_measured_beside_the_baseline(quick_run):
    results, printed = quick_run
    memory = results["memory"]
    assert memory["held"] == 20
    for name in ("gateway", "baseline"):
        assert memory[name]["idle_mb"] > 10
        assert memory[name]["held_mb"] >= memory[name]["idle_mb"] - 1
    assert len(memory["each_run"]) == RUNS
    assert "each of 20 held POST /elicit (KB)" in printed


def test_the_in_process_measure_drives_both_apps_and_can_measure_another_checkout(tmp_path):
    """``python -m bench.in_process --quick``: real round trips through the gateway's ASGI app and the
    baseline's, each in a process of its own; ``--app-dir`` measures another checkout's gateway and
    ``--profile`` shows its costliest functions."""
    shutil.copytree(REPOSITORY / "elicitation_gateway", tmp_path / "elicitation_gateway")
    command = [
        sys.executable,
        "-m",
        "bench.in_process",
        "--quick",
        "--app-dir",
        str(tmp_path),
        "--profile",
        "3",
    ]
    with subprocess.Popen(
        command,
        cwd=REPOSITORY,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as run:
        try:
            out, err = run.communicate(timeout=120)
        finally:  # a run that hangs takes its children with it
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
    assert run.returncode == 0, err[-4000:]
    lines = out.splitlines()
    summary = lines.index(f"gateway from {tmp_path.resolve()}")
    assert any("cumulative" in line for line in lines[:summary]), "the profile comes first"
    rows = {line[:34].strip(): line[34:].split() for line in lines[summary + 2 :]}
    cpu, calls = rows["CPU per round trip (µs, best)"], rows["Python calls per round trip"]
    assert all(float(figure) > 0 for figure in cpu + calls)
    assert float(calls[0]) > float(calls[1])  # the gateway does more than the bare app, whatever the load


def test_the_in_process_measure_refuses_a_checkout_without_the_gateway(tmp_path):
    command = [sys.executable, "-m", "bench.in_process", "--quick", "--app-dir", str(tmp_path)]
    done = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert f"--app-dir {tmp_path.resolve()} holds no elicitation_gateway package" in done.stderr
