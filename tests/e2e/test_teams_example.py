"""docs/teams.md's worked example, run as printed (with free ports in place of 4096 and 9000): the people
file, the webhook receiver and the gateway as processes, the tool's curl asking the on-call group with
an escalation to carol, the people's curls before and after the step, the receiver's lines and the
audit trail, each output checked against what the page shows (``…`` standing for what varies)."""

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import tomllib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from standardwebhooks import Webhook

from tests.helpers import until
from tests.processes import ROOT, areap, free_port, start_process

PAGE = (ROOT / "docs" / "teams.md").read_text(encoding="utf-8")
EXAMPLE = PAGE[PAGE.index("## A worked example") :].split("\n## ", 1)[0]
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```$", EXAMPLE, re.MULTILINE | re.DOTALL)
"""Each fenced block of the section, in order: (its language, or "" for what a command prints; its text)."""
SHELL_BLOCKS = [text for language, text in BLOCKS if language == "sh"]
(PEOPLE,) = [text for language, text in BLOCKS if language == "toml"]
(RESULT,) = [text for language, text in BLOCKS if language == "json"]
OUTPUTS = [text for language, text in BLOCKS if not language]


@pytest.fixture(autouse=True)
def curl() -> None:
    """The page's commands need curl: skipped without it on a workstation, a failure under CI=true."""
    if shutil.which("curl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("curl is not installed: .ci/run installs it")
        pytest.skip("curl is not installed")


def block(naming: str) -> str:
    (found,) = [text for text in SHELL_BLOCKS if naming in text]
    return found


def output_block(naming: str) -> list[str]:
    (found,) = [text for text in OUTPUTS if naming in text]
    return found.splitlines()


def printed(script: str) -> list[str]:
    """What a block's ``# prints: X`` comments say its commands print, in order."""
    return re.findall(r"# prints: (\S+)", script)


def shown(line: str, actual: str) -> bool:
    """Whether ``actual`` is the page's ``line``, where ``…`` stands for anything."""
    return re.fullmatch(re.escape(line).replace("…", ".*"), actual) is not None


def assert_shown(lines: list[str], actual: list[str]) -> None:
    assert len(actual) == len(lines), actual
    for line, got in zip(lines, actual, strict=True):
        assert shown(line, got), f"the page shows {line!r}, the command printed {got!r}"


class Terminals:
    """The page's blocks run in ``bash -c`` in a directory of the example's own (with the repository's
    ``.venv`` and ``examples/``), with free ports in place of the page's; each in a process group of its
    own, killed and reaped after the test, however it ends."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.gateway_port = free_port()
        self.receiver_port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OPENCODE_"))}
        self.env["PYTHONPATH"] = str(ROOT)  # the checkout's package, whatever .venv has installed
        self.started: list[asyncio.subprocess.Process] = []

    def on_our_ports(self, text: str) -> str:
        text = re.sub(r"\b4096\b", str(self.gateway_port), text)
        return re.sub(r"\b9000\b", str(self.receiver_port), text)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"

    async def start(self, script: str, **options: object) -> asyncio.subprocess.Process:
        options.setdefault("stdout", asyncio.subprocess.PIPE)
        process = await start_process(
            "bash",
            "-c",
            self.on_our_ports(script),
            cwd=self.directory,
            env=self.env,
            start_new_session=True,
            **options,
        )
        self.started.append(process)
        return process

    async def run(self, script: str) -> list[str]:
        """The block's output lines (standard error too, as a terminal shows it); it must succeed."""
        process = await self.start(script, stderr=asyncio.subprocess.STDOUT)
        async with asyncio.timeout(30):
            out, _ = await process.communicate()
        assert process.returncode == 0, out.decode()
        return out.decode().splitlines()

    async def close(self) -> None:
        for process in self.started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await areap(process)


@pytest.fixture
async def terminals(tmp_path: Path) -> AsyncIterator[Terminals]:
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "people.toml").write_text(PEOPLE, encoding="utf-8")
    opened = Terminals(tmp_path)
    try:
        yield opened
    finally:
        await opened.close()


async def line_of(process: asyncio.subprocess.Process, what: str) -> str:
    assert process.stdout is not None
    async with asyncio.timeout(20):
        line = await process.stdout.readline()
    assert line, f"{what} ended without a line"
    return line.decode().rstrip("\n")


def login(name: str) -> tuple[str, str]:
    return name, tomllib.loads(PEOPLE)["people"][name]["password"]


async def test_the_worked_example_runs_as_printed(terminals: Terminals):
    receiving = await terminals.start(block("webhook_receiver.py"))
    receiver_says = output_block("question.replied")
    assert shown(terminals.on_our_ports(receiver_says[0]), await line_of(receiving, "the receiver"))

    log = terminals.directory / "gateway.log"
    with log.open("wb") as output:
        gateway = await terminals.start(block("GATEWAY_PEOPLE="), stdout=output, stderr=output)
    listening = f"listening on {terminals.url}"
    await until(
        lambda: listening in log.read_text() or gateway.returncode is not None,
        timeout=30,
        what="the gateway starts",
    )
    assert listening in log.read_text(), log.read_text()

    asking = await terminals.start(block('"escalate"'))
    async with httpx.AsyncClient(base_url=terminals.url, timeout=10) as client:

        async def listed_for_alice() -> bool:
            return bool((await client.get("/question", auth=login("alice"))).json())

        await until(listed_for_alice, timeout=30, what="the question is asked")

        before = block("-u bob:")
        people_see = await terminals.run(before)
        assert_shown(output_block('"to":["group:oncall"]'), people_see)
        assert people_see[1:] == printed(before) == ["[]", "404"]
        (question,) = json.loads(people_see[0])
        assert question["to"] == ["group:oncall"]
        for name in ("alice", "bob"):
            assert [q["id"] for q in (await client.get("/question", auth=login(name))).json()] == [
                question["id"]
            ]

        async def escalated_to_carol() -> bool:
            form = await client.get(f"/question/{question['id']}/form", auth=login("carol"))
            return form.status_code == 200

        await until(escalated_to_carol, timeout=30, what="the escalation step falls due")

    find_id = next(line for line in before.splitlines() if line.startswith("ID="))
    after = block("/reply")
    assert await terminals.run(find_id + "\n" + after) == printed(after) == ["200", "true"]

    async with asyncio.timeout(30):
        result, _ = await asking.communicate()
    assert asking.returncode == 0
    assert json.loads(result) == json.loads(RESULT)
    assert json.loads(RESULT)["answeredBy"] == "carol"

    events = [await line_of(receiving, "the receiver") for _ in receiver_says[1:]]
    assert_shown(receiver_says[1:], events)
    assert all(question["id"] in line for line in events)

    trail = output_block('"event":"escalated"')
    assert_shown(trail, await terminals.run(block("audit verify")))
    written = [json.loads(line) for line in (terminals.directory / "trail.jsonl").read_text().splitlines()]
    assert [(entry["event"], entry["who"]) for entry in written] == [
        ("asked", None),
        ("escalated", "carol"),
        ("replied", "carol"),
    ]
    assert {entry["question"] for entry in written} == {question["id"]}


async def test_the_receiver_refuses_a_delivery_not_signed_with_its_secret(terminals: Terminals):
    receiving = await terminals.start(block("webhook_receiver.py"))
    await line_of(receiving, "the receiver")
    body = json.dumps({"type": "question.asked", "timestamp": "", "data": {"id": "que_x", "to": ["bob"]}})
    now = datetime.now(UTC)
    other = Webhook("whsec_" + base64.b64encode(b"not the gateway's secret").decode())
    forged = {
        "webhook-id": "evt_forged",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": other.sign("evt_forged", now, body),
    }
    url = f"http://127.0.0.1:{terminals.receiver_port}/"
    async with httpx.AsyncClient() as client:
        assert (await client.post(url, content=body, headers=forged)).status_code == 400
        assert (await client.post(url, content=body)).status_code == 400
    assert receiving.stdout is not None
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(0.5):
            line = await receiving.stdout.readline()
            raise AssertionError(f"the receiver printed {line!r} for a forged delivery")
