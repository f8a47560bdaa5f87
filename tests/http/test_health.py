"""Liveness, readiness and metrics, as probes and scrapers see them on a real server.

``/livez`` says the process answers; ``/healthz`` says it can serve (store, upstream, not stopping).
An orchestrator restarts on the first and stops routing on the second, so the first must not follow
the store or the upstream.
"""

import socket
import sys

import httpx
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.parser import text_string_to_metric_families

from elicitation_gateway import __version__
from elicitation_gateway.server.bridge import Owner, owner

pytest_plugins = ["tests.redis_server"]

LIVE = {"status": "ok", "version": __version__}


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_livez_says_the_process_answers(client):
    live = await client.get("/livez")
    assert (live.status_code, live.json()) == (200, LIVE)
    assert live.headers["content-type"] == "application/json"


async def test_livez_stays_up_while_redis_is_down_and_healthz_does_not(make_server, make_redis_server):
    redis = make_redis_server().start()
    server = make_server(store=redis.url)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        assert (await http.get("/healthz")).status_code == 200
        redis.stop()
        ready = await http.get("/healthz")
        assert (ready.status_code, ready.json()["store"]) == (503, "unavailable")
        assert (await http.get("/global/health")).status_code == 503
        live = await http.get("/livez")
        assert (live.status_code, live.json()) == (200, LIVE)


async def test_livez_stays_up_while_stopping_and_healthz_does_not(make_server):
    server = make_server()
    server.run(server.gateway.shutdown())  # what a SIGTERM starts with: the gateway stops taking work
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        assert (await http.get("/healthz")).status_code == 503
        assert (await http.get("/livez")).status_code == 200


async def test_livez_needs_no_credentials(make_server):
    server = make_server(tool_token="tool-secret", answerer_password="answerer-secret")
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        assert (await http.get("/question")).status_code == 401  # the doors are kept...
        assert (await http.get("/livez")).status_code == 200  # ...but not this one


async def test_in_bridge_mode_livez_is_the_gateways_and_ignores_the_upstream(make_server):
    assert owner("GET", "/livez") is Owner.GATEWAY
    server = make_server(opencode_url=f"http://127.0.0.1:{closed_port()}")  # nothing listens there
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        ready = await http.get("/healthz")
        assert (ready.status_code, ready.json()["upstream"]) == (503, "unavailable")
        live = await http.get("/livez")
        assert (live.status_code, live.json()) == (200, LIVE)


# ---------------------------------------------------------------------------------------------------
# Metrics


async def test_metrics_are_prometheus_text_with_process_and_gc_families(client):
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == CONTENT_TYPE_PLAIN_0_0_4
    families = {family.name: family for family in text_string_to_metric_families(response.text)}
    samples = {sample.name for family in families.values() for sample in family.samples}
    assert "python_gc_objects_collected_total" in samples
    assert "python_info" in samples
    if sys.platform.startswith("linux"):
        assert {"process_cpu_seconds_total", "process_resident_memory_bytes"} <= samples
    assert {"gateway_elicitations_asked_total", "gateway_time_to_answer_seconds_count"} <= samples


async def test_metrics_have_no_created_series(client):
    text = (await client.get("/metrics")).text
    assert "gateway_elicitations_asked_total" in text
    assert [line for line in text.splitlines() if "_created" in line] == []
