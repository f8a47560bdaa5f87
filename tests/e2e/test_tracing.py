"""Tracing with the ``otel`` extra: ``opentelemetry-instrument elicitation-gateway`` sends a span for each
request, named by its route, with the ``mcp`` package's spans beneath; without a tracer provider the app
has no tracing middleware at all. Spans go to the console exporter, so nothing leaves the machine."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from elicitation_gateway.server.app import create_app
from elicitation_gateway.settings import Settings
from tests.helpers import form, text_properties
from tests.processes import child_setup, reaped

BIN = Path(sys.executable).parent
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed, one after another."""
    decoder, spans, index = json.JSONDecoder(), [], 0
    while (start := text.find("{", index)) != -1:
        span, index = decoder.raw_decode(text, start)
        spans.append(span)
    return spans


def test_opentelemetry_instrument_traces_each_request_by_its_route(tmp_path):
    instrument = BIN / "opentelemetry-instrument"
    assert instrument.is_file(), "opentelemetry-instrument is missing: it comes with the otel extra"
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OPENCODE_", "OTEL_"))
    }
    environment |= {"OTEL_SERVICE_NAME": "gateway-under-test", "OTEL_BSP_SCHEDULE_DELAY": "100"}
    command = [str(instrument), "--traces_exporter", "console", "--metrics_exporter", "none"]
    command += ["--logs_exporter", "none", str(BIN / "elicitation-gateway"), "--port", "0"]
    errors = tmp_path / "stderr.log"
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=environment, preexec_fn=child_setup
        )
    with reaped(process):
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert "listening on http://" in banner, banner + errors.read_text()
        url = banner.rsplit(" ", 1)[1].strip()
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/livez").status_code == 200
            created = client.post("/elicitations", json=form(text_properties(1))).json()
            assert client.get(f"/elicitations/{created['id']}").status_code == 200
            assert client.delete(f"/elicitations/{created['id']}").status_code == 200
            headers = {"Accept": "application/json, text/event-stream"}
            assert client.post("/mcp", json=INITIALIZE, headers=headers).status_code == 200
            # Neither a query (it may hold a password) nor a one-tap link's token reaches a span.
            assert client.get("/question", params={"auth_token": "sekrit pass"}).status_code == 200
            client.get("/link/TOKENtoken123.sig456")
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == -signal.SIGTERM, errors.read_text()  # as uvicorn ends on a signal

    spans = console_spans(output)
    by_name = {span["name"]: span for span in spans}
    for name, route in [
        ("POST /elicitations", "/elicitations"),
        ("GET /elicitations/{id}", "/elicitations/{id}"),
        ("DELETE /elicitations/{id}", "/elicitations/{id}"),
        ("POST /mcp", "/mcp"),
    ]:
        assert name in by_name, f"no span {name!r} in {sorted(by_name)}"
        assert by_name[name]["kind"] == "SpanKind.SERVER"
        assert by_name[name]["attributes"]["http.route"] == route
        assert by_name[name]["resource"]["attributes"]["service.name"] == "gateway-under-test"
    assert not any(created["id"] in span["name"] for span in spans), "span names carry no ids"
    for secret in ("sekrit", "TOKENtoken123"):
        assert secret not in output, f"a span carries {secret!r}"
    assert "GET /question" in by_name
    assert "GET /link/{token}" in by_name
    assert any("…" in str(value) for value in by_name["GET /link/{token}"]["attributes"].values())
    assert not any("/livez" in span["name"] for span in spans), "probes are not traced"
    assert not any(span["name"].endswith((" http send", " http receive")) for span in spans)
    # The mcp package's own span, within the request's.
    mcp = by_name["initialize"]
    assert mcp["context"]["trace_id"] == by_name["POST /mcp"]["context"]["trace_id"]


def test_no_tracing_middleware_without_a_tracer_provider():
    """In this process no provider was set up: the app is exactly what it is without the extra."""
    app = create_app(Settings())
    assert not any("opentelemetry" in middleware.cls.__module__ for middleware in app.user_middleware)
