"""``GET /doc`` describes the API as it behaves: schemathesis calls every operation with generated
requests against a running gateway and checks there is no 5xx and every response matches the document."""

import os
import subprocess
import sys
from pathlib import Path

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def test_every_operation_matches_the_document(make_server):
    # Short waits: generated elicitations time out at once instead of holding the run.
    server = make_server(timeout=0.2, max_timeout=0.3)
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "run",
        f"{server.url}/doc",
        "--checks",
        CHECKS,
        "--exclude-path-regex",
        "^/(event|global/event|mcp)$",  # endless streams; /mcp is tested with the MCP SDK
        "--max-examples",
        "10",
        "--request-timeout",
        "5",
        "--seed",
        "1",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"}
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout


async def test_document_is_openapi_31_and_names_every_route(server, client):
    document = (await client.get("/doc")).json()
    assert document["openapi"] == "3.1.0"
    operation_ids = {
        operation["operationId"] for path in document["paths"].values() for operation in path.values()
    }
    opencode = {"question.list", "question.reply", "question.reject", "event.subscribe", "global.event"}
    assert opencode <= operation_ids
    served = {route.path for route in server.app.routes if getattr(route, "path", "")}
    undocumented = {
        path for path in served if path not in document["paths"] and not path.startswith("/static")
    }
    assert not undocumented, f"routes missing from /doc: {undocumented}"
