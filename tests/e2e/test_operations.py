"""Operating the gateway: health, metrics, logs."""

import json
import os

import httpx

from elicitation_gateway import __version__
from elicitation_gateway.server.security import warn_if_exposed
from elicitation_gateway.settings import Settings
from tests.e2e.test_cli import gateway_process
from tests.helpers import ask, form, pending, read_events, text_properties


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


async def test_every_outcome_is_one_json_log_line_with_id_and_duration():
    with gateway_process("--port", "0", env={"GATEWAY_LOG_FORMAT": "json"}) as (process, url):
        async with httpx.AsyncClient(base_url=url) as client:
            created = (await client.post("/elicitations", json=form(text_properties(1)))).json()
            await client.post(f"/question/{created['id']}/reject", json={"action": "decline"})
        process.terminate()
        output, _ = process.communicate(timeout=15)
    entries = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    outcomes = [e for e in entries if e.get("elicitation") == created["id"]]
    assert len(outcomes) == 1
    assert outcomes[0]["outcome"] == "declined"
    assert isinstance(outcomes[0]["duration"], float | int)
    assert outcomes[0]["level"] == "info"


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
