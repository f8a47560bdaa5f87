"""``elicitation-gateway ask`` as a shell script runs it: a real process against a running gateway, input on
stdin or in a file, the ElicitResult on stdout, and an exit code for each outcome."""

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from elicitation_gateway.ask import ACCEPTED, CANCELLED, DECLINED, FAILED, INTERRUPTED
from tests.conftest import TEST_DIRECTORY
from tests.helpers import form, pending, read_events
from tests.processes import areap, start_process

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "deploy": {"type": "boolean", "title": "Deploy", "description": "Deploy release 1.4 now?"},
        "replicas": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 5},
    },
    "required": ["deploy"],
}


@dataclass
class Finished:
    code: int
    stdout: str
    stderr: str

    @property
    def result(self) -> dict[str, Any]:
        return json.loads(self.stdout)


class AskProcess:
    """``python -m elicitation_gateway ask`` running in the background."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def finished(self) -> Finished:
        stdout, stderr = await asyncio.wait_for(self.process.communicate(), 30)
        assert self.process.returncode is not None
        return Finished(self.process.returncode, stdout.decode(), stderr.decode())


StartAsk = Callable[..., Awaitable[AskProcess]]


@pytest.fixture
async def start_ask() -> AsyncIterator[StartAsk]:
    """Starts ``ask`` processes in the background; each is reaped after the test, also after a failure."""
    started: list[asyncio.subprocess.Process] = []

    async def start(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> AskProcess:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
        environment.update(env or {})
        process = await start_process(
            sys.executable,
            "-m",
            "elicitation_gateway",
            "ask",
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment,
        )
        started.append(process)
        if stdin is not None:
            assert process.stdin is not None
            process.stdin.write(stdin.encode())
            await process.stdin.drain()
            process.stdin.close()
        return AskProcess(process)

    yield start
    for process in started:
        await areap(process)


async def test_a_schema_on_stdin_accepted_prints_the_content_and_exits_0(start_ask, server, client):
    ask = await start_ask("--url", server.url, "--message", "Release 1.4 is ready", stdin=json.dumps(SCHEMA))
    [request] = await pending(client, timeout=15)
    assert request["questions"][0]["question"].startswith("Release 1.4 is ready")
    await client.post(f"/question/{request['id']}/reply", json={"answers": [["Yes"], ["3"]]})
    done = await ask.finished()
    assert done.code == ACCEPTED == 0
    assert done.result == {"action": "accept", "content": {"deploy": True, "replicas": 3}}
    assert done.stdout.count("\n") == 1


async def test_form_params_in_a_file_declined_exit_1(start_ask, server, client, tmp_path: Path):
    path = tmp_path / "release.json"
    path.write_text(json.dumps(form(SCHEMA, "From the file")))
    ask = await start_ask("--schema", str(path), env={"GATEWAY_URL": server.url})
    [request] = await pending(client, timeout=15)
    assert request["questions"][0]["question"].startswith("From the file")
    await client.post(f"/question/{request['id']}/reject", json={"action": "decline"})
    done = await ask.finished()
    assert (done.code, done.result) == (DECLINED, {"action": "decline"})
    assert DECLINED == 1


async def test_a_jsonrpc_request_dismissed_exits_2(start_ask, server, client):
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": form(SCHEMA)}
    ask = await start_ask(
        "--url",
        server.url,
        "--session-id",
        "ses_0000000000001AskCommand01",
        "--directory",
        TEST_DIRECTORY,
        stdin=json.dumps(envelope),
    )
    [request] = await pending(client, timeout=15)
    assert request["sessionID"] == "ses_0000000000001AskCommand01"
    assert (await client.get("/question", params={"directory": "/elsewhere"})).json() == []
    await client.post(f"/question/{request['id']}/reject")
    done = await ask.finished()
    assert (done.code, done.result) == (CANCELLED, {"action": "cancel"})
    assert CANCELLED == 2


async def test_a_question_that_times_out_exits_2(start_ask, server):
    ask = await start_ask("--url", server.url, "--timeout", "0.3", stdin=json.dumps(form(SCHEMA)))
    done = await ask.finished()
    assert (done.code, done.result) == (CANCELLED, {"action": "cancel"})


async def test_on_timeout_default_accepts_the_defaults_and_exits_0(start_ask, server):
    schema = {"type": "object", "properties": {"deploy": {"type": "boolean", "default": False}}}
    ask = await start_ask(
        "--url", server.url, "--timeout", "0.3", "--on-timeout", "default", stdin=json.dumps(form(schema))
    )
    done = await ask.finished()
    assert (done.code, done.result) == (0, {"action": "accept", "content": {"deploy": False}})


@pytest.mark.parametrize(
    ("args", "stdin", "says"),
    [
        ((), "{not json", "not valid JSON"),
        ((), "[1, 2]", "must hold a JSON object"),
        ((), json.dumps({"type": "object", "properties": {}, "required": ["ok"]}), "required names 'ok'"),
        (("--schema", "/nonexistent/schema.json"), None, "cannot read /nonexistent/schema.json"),
        (("--timeout", "soon"), "{}", "invalid float value"),
        (("--timeout", "-1"), "{}", "--timeout must be a positive number"),
    ],
    ids=["bad-json", "not-an-object", "empty-schema", "missing-file", "bad-flag", "negative-timeout"],
)
async def test_bad_input_exits_3_with_a_message(start_ask, server, client, args, stdin, says):
    ask = await start_ask("--url", server.url, *args, stdin=stdin)
    done = await ask.finished()
    assert done.code == FAILED == 3
    assert done.stdout == ""
    assert says in done.stderr
    assert (await client.get("/question")).json() == []


async def test_an_unreachable_gateway_exits_3(start_ask, make_server):
    server = make_server()
    server.stop()
    done = await (await start_ask("--url", server.url, stdin=json.dumps(SCHEMA))).finished()
    assert done.code == FAILED
    assert "cannot reach the gateway" in done.stderr


async def test_no_input_at_all_exits_3_instead_of_waiting(start_ask, server):
    done = await (await start_ask("--url", server.url)).finished()  # stdin is /dev/null: empty
    assert done.code == FAILED
    assert "not valid JSON" in done.stderr


async def test_an_interrupted_ask_withdraws_its_question(start_ask, server, client):
    async with read_events(client) as events:
        ask = await start_ask("--url", server.url, stdin=json.dumps(SCHEMA))
        asked = await events.next("question.asked", timeout=15)
        ask.process.send_signal(signal.SIGINT)
        rejected = await events.next("question.rejected", timeout=15)
        assert rejected.properties["requestID"] == asked.properties["id"]
    done = await ask.finished()
    assert done.code == INTERRUPTED
