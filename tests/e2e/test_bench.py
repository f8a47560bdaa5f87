"""The benchmark harness works end to end: ``python -m bench --quick`` starts real servers as processes,
loads them from client processes, and reports every measure the Performance section publishes.

Nothing here asserts a speed: the quick run's counts are far too small to mean anything. It pins that
each measure was actually taken (samples exist, the probe reported, nothing failed).
"""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.scenarios import percentile, shares

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    output = tmp_path_factory.mktemp("bench") / "results.json"
    finished = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--json", str(output)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    return json.loads(output.read_text()), finished.stdout


def _sampled(spread: dict[str, Any]) -> bool:
    return spread["count"] > 0 and spread["p50"] is not None and spread["p99"] >= spread["p50"]


@pytest.mark.timeout(180)
def test_round_trips_are_measured_beside_the_baseline(quick_run):
    results, _ = quick_run
    trips = results["round_trips"]
    assert trips["server"]["loop"] == "uvloop.Loop"
    assert trips["server"]["http"].endswith("HttpToolsProtocol")
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
        assert gateway["loop_lag"]["max_ms"] is not None  # the probe ran inside the server


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


@pytest.mark.timeout(180)
def test_report_names_the_machine_and_every_target(quick_run):
    results, printed = quick_run
    assert results["machine"]["cpus"] >= 1
    assert results["machine"]["python"].count(".") == 2
    targets = [check["target"] for check in results["targets"]]
    assert any(target.startswith("round-trip ratio") for target in targets)
    assert any("pending in < 200 MB" in target for target in targets)
    assert "no event-loop stall > 100 ms" in targets
    for heading in ("Round trips", "Fan-out", "Capacity", "Targets"):
        assert heading in printed


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
