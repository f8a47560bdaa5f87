"""Operating the gateway: health, metrics, logs."""

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from elicitation_gateway import __version__
from elicitation_gateway.server.security import warn_if_exposed
from elicitation_gateway.settings import Settings
from tests.e2e.test_cli import gateway_process
from tests.helpers import ask, form, pending, read_events, text_properties
from tests.processes import child_setup, reaped


async def test_global_health_in_opencode_shape(client):
    health = await client.get("/global/health")
    assert health.status_code == 200
    assert health.json() == {"healthy": True, "version": __version__}


async def test_healthz(client):
    health = await client.get("/healthz")
    assert (health.status_code, health.json()) == (
        200,
        {"status": "ok", "store": "ok", "version": __version__},
    )


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith((name + " ", name + "{")):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in metrics")


async def test_metrics_count_what_happens(client):
    async with read_events(client) as events:
        tool = ask(client, form(text_properties(1)))
        await events.next("question.asked")
        during = (await client.get("/metrics")).text
        assert metric(during, "gateway_pending_questions") == 1
        assert metric(during, "gateway_sse_subscribers") == 1
        [request] = await pending(client)
        await client.post(f"/question/{request['id']}/reply", json={"answers": [["hi"]]})
        await tool
        await events.next("question.replied")
        after = (await client.get("/metrics")).text
    assert (await client.get("/metrics")).headers["content-type"].startswith("text/plain")
    assert metric(after, "gateway_pending_questions") == 0
    assert metric(after, "gateway_elicitations_asked_total") == 1
    assert metric(after, 'gateway_elicitations_finished_total{outcome="answered"}') == 1
    assert metric(after, "gateway_time_to_answer_seconds_count") == 1
    assert metric(after, "gateway_events_sent_total") >= 3  # connected, asked, replied


@contextmanager
def json_gateway(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    """``python -m elicitation_gateway`` with JSON logs: yields it, the ``url`` of its listening record,
    and the file its standard error goes to (its standard output stays on the pipe)."""
    errors = tmp_path / "stderr.log"
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OPENCODE_"))}
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "elicitation_gateway", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**environment, "GATEWAY_LOG_FORMAT": "json"},
            preexec_fn=child_setup,
        )
    with reaped(process):
        assert process.stdout is not None
        banner = json.loads(process.stdout.readline())
        assert "listening on http://" in banner["message"], banner
        yield process, banner["url"], errors


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line as the JSON object it must be."""
    entries = []
    for line in text.splitlines():
        entry = json.loads(line)  # a line that is not JSON fails here, with the line in the message
        assert isinstance(entry, dict), line
        assert {"time", "level", "logger", "message"} <= entry.keys(), line
        entries.append(entry)
    return entries


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_json_logs_are_json_only_from_start_to_stop(tmp_path, sig):
    """A log collector reading both streams sees one JSON object a line: the start (uvicorn's lines and
    the gateway's listening line), requests (access lines as fields), an outcome, and the stop (by
    an orchestrator's SIGTERM or a terminal's SIGINT)."""
    with json_gateway(tmp_path) as (process, url, errors):
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/livez")).status_code == 200
            created = (await client.post("/elicitations", json=form(text_properties(1)))).json()
            await client.post(f"/question/{created['id']}/reject", json={"action": "decline"})
        process.send_signal(sig)
        rest, _ = process.communicate(timeout=15)
    assert process.returncode == -sig
    stdout, stderr = json_lines(rest), json_lines(errors.read_text())
    assert stdout == []  # the listening line was the only one there
    assert not any("\u001b" in json.dumps(entry) or "color_message" in entry for entry in stderr)
    messages = [entry["message"] for entry in stderr]
    assert any(message.startswith("Started server process") for message in messages)
    assert any(message.startswith("Finished server process") for message in messages)

    [live] = [entry for entry in stderr if entry.get("path") == "/livez"]
    assert (live["logger"], live["method"], live["status"], live["http_version"]) == (
        "uvicorn.access",
        "GET",
        200,
        "1.1",
    )
    assert live["client"].startswith("127.0.0.1:")
    assert 0 <= live["duration_ms"] < 5000

    [outcome] = [entry for entry in stderr if entry.get("elicitation") == created["id"]]
    assert (outcome["level"], outcome["outcome"]) == ("info", "declined")
    assert isinstance(outcome["duration"], float | int)


def test_a_warning_when_listening_beyond_loopback_without_secrets():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OPENCODE_"))}
    with gateway_process("--host", "0.0.0.0", "--port", "0", env=env) as (process, _):
        process.terminate()
        output = process.startup_output + process.communicate(timeout=15)[0]
    assert "without authentication" in output
    secured = {**env, "GATEWAY_TOOL_TOKEN": "t", "OPENCODE_SERVER_PASSWORD": "p"}
    with gateway_process("--host", "0.0.0.0", "--port", "0", env=secured) as (process, _):
        process.terminate()
        output = process.startup_output + process.communicate(timeout=15)[0]
    assert "without authentication" not in output


def test_no_warning_on_loopback(caplog):
    warn_if_exposed(Settings(host="127.0.0.1"))
    warn_if_exposed(Settings(host="::1"))
    warn_if_exposed(Settings(host="localhost"))
    assert not caplog.records
