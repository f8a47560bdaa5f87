"""The MCP Inspector's CLI (``@modelcontextprotocol/inspector --cli``, pinned with the Node 22 it needs in
tests/e2e/conformance/) as docs/mcp.md shows it: against ``/mcp`` of a running gateway over Streamable
HTTP, and starting ``elicitation-gateway proxy`` over stdio in front of the example server, whose
question a person answers through the gateway.

The CLI waits 60 s for a result (the SDK's default, which it has no option to change) and sends no
progress token, so these tests answer at once: they hold the command lines and what they return, not
the wait. ``make test`` installs the CLI (``npm ci --prefix tests/e2e/conformance``). Locally a missing
Node 22 or CLI skips these tests, with the reason; under ``CI=true`` it fails them.
"""

import asyncio
import contextlib
import functools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import RunningServer
from tests.e2e.opencode_server import unavailable
from tests.processes import ROOT, areap, start_process
from tests.proxy.conftest import question

PACKAGE = Path(__file__).resolve().parent / "conformance"
NODE = PACKAGE / "node_modules" / "node" / "bin" / "node"
INSPECTOR = PACKAGE / "node_modules" / "@modelcontextprotocol" / "inspector"
LAUNCHER = INSPECTOR / "clients" / "launcher" / "build" / "index.js"  # the package's `inspector` command

QUESTIONS = [
    {
        "question": "Deploy to production now?",
        "header": "Deploy",
        "options": [{"label": "Yes", "description": ""}, {"label": "No", "description": ""}],
    }
]
PROXY = [sys.executable, "-m", "elicitation_gateway", "proxy"]
"""``elicitation-gateway proxy``, as this checkout's code (the CLI starts it in the repository's root)."""
UPSTREAM = [sys.executable, str(ROOT / "examples" / "diagnose_server.py"), "--stdio"]
ANSWERS = {"answers": [["SY235C"], ["Noise"], ["900"]]}
DIAGNOSED = "SY235C after 900 hours: Noise"


@functools.cache
def inspector() -> list[str]:
    """The command that runs the pinned Inspector on the pinned Node 22, or skip (fail under CI)."""
    install = "run `npm ci --prefix tests/e2e/conformance` (make test does)"
    if not NODE.is_file():
        unavailable(f"Node 22 (the npm package node@22) is not installed in {PACKAGE}: {install}")
    if not LAUNCHER.is_file():
        unavailable(f"the MCP Inspector is not installed in {PACKAGE}: {install}")
    version = subprocess.run([NODE, "--version"], capture_output=True, text=True, timeout=30, check=True)
    if not version.stdout.startswith("v22."):
        unavailable(f"{NODE} is {version.stdout.strip()}, not Node 22: {install}")
    return [str(NODE), str(LAUNCHER)]


@contextlib.asynccontextmanager
async def cli(*args: str, home: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """``inspector --cli ARGS`` with its output piped, in a process group of its own: on the way out,
    however the test ends, the group is killed (the proxy and upstream it started over stdio
    included) and the CLI reaped. HOME is a temporary directory, where it keeps its catalog."""
    process = await start_process(
        *inspector(),
        "--cli",
        *args,
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await areap(process)


async def result_of(process: asyncio.subprocess.Process) -> dict[str, Any]:
    """What the CLI printed with ``--format json``: its ``result``, once it has exited with status 0."""
    out, err = await asyncio.wait_for(process.communicate(), 30)
    report = f"stdout:\n{out.decode(errors='replace')}\nstderr:\n{err.decode(errors='replace')}"
    assert process.returncode == 0, report
    printed = json.loads(out)
    assert "result" in printed, report
    return printed["result"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_cli_lists_the_question_tool(server: RunningServer, tmp_path: Path, era: str):
    url = f"{server.url}/mcp"
    command = ("--transport", "http", "--protocol-era", era, "--method", "tools/list", "--format", "json")
    async with cli(url, *command, home=tmp_path) as listing:
        listed = await result_of(listing)
    assert [tool["name"] for tool in listed["tools"]] == ["question"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_cli_calls_the_question_tool_and_gets_the_answer(
    server: RunningServer, tmp_path: Path, era: str
):
    arguments = json.dumps({"questions": QUESTIONS})
    command = [f"{server.url}/mcp", "--transport", "http", "--protocol-era", era]
    command += ["--method", "tools/call", "--tool-name", "question", "--tool-args-json", arguments]
    async with (
        cli(*command, "--format", "json", home=tmp_path) as calling,
        httpx.AsyncClient(base_url=server.url) as gateway,
    ):
        asked = await question(gateway, directory="/srv/any")  # it names no directory: seen under any
        assert asked["questions"][0]["question"] == "Deploy to production now?"
        replied = await gateway.post(f"/question/{asked['id']}/reply", json={"answers": [["Yes"]]})
        assert replied.status_code == 200, replied.text
        result = await result_of(calling)
    assert result["isError"] is False, result
    assert result["structuredContent"] == {"action": "accept", "answers": [["Yes"]]}


# The Inspector takes the first `--` after its own options as the end of them: with one before the
# proxy's command, the proxy's own `--` reaches it; without, the proxy needs two.
PROXY_COMMANDS = {
    "separated": ["--", *PROXY, "--", *UPSTREAM],
    "doubled": [*PROXY, "--", "--", *UPSTREAM],
}


@pytest.mark.parametrize("form", list(PROXY_COMMANDS))
async def test_the_cli_calls_a_tool_through_the_proxy_and_a_person_answers_its_question(
    server: RunningServer, tmp_path: Path, form: str
):
    # The CLI hands a stdio server only a few variables of its own environment: GATEWAY_URL goes in -e.
    options = ["--method", "tools/call", "--tool-name", "diagnose", "--format", "json"]
    options += ["-e", f"GATEWAY_URL={server.url}"]
    async with (
        cli(*options, *PROXY_COMMANDS[form], home=tmp_path) as calling,
        httpx.AsyncClient(base_url=server.url) as gateway,
    ):
        asked = await question(gateway, directory="mcp:Excavator diagnosis")
        shown = asked["questions"][0]["question"]
        assert shown.startswith("Excavator diagnosis (example) · diagnose: Excavator diagnosis")
        replied = await gateway.post(f"/question/{asked['id']}/reply", json=ANSWERS)
        assert replied.status_code == 200, replied.text
        result = await result_of(calling)
    assert result["isError"] is False, result
    assert result["content"] == [{"type": "text", "text": DIAGNOSED}]


MCP_PAGE = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
PINNED = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))["dependencies"]


def printed_commands() -> list[list[str]]:
    """The Inspector's command lines in docs/mcp.md's ``sh`` block, each split as a shell would."""
    (block,) = re.findall(r"^```sh\n(.*?)^```", MCP_PAGE, re.MULTILINE | re.DOTALL)
    lines = [line for line in block.replace("\\\n", " ").splitlines() if line and not line.startswith("#")]
    return [shlex.split(line) for line in lines]


def as_run_here(command: list[str], url: str) -> list[str]:
    """A printed command with this checkout's programs and the test gateway's address: the pinned
    Inspector for ``npx``, this Python for ``.venv/bin/python``, ``python -m elicitation_gateway`` for
    ``elicitation-gateway``; everything else as printed."""
    npx, package, *args = command
    assert npx == "npx", command
    assert package == f"@modelcontextprotocol/inspector@{PINNED['@modelcontextprotocol/inspector']}", command
    here: list[str] = []
    for arg in args:
        if arg == "elicitation-gateway":
            here += PROXY[:-1]
        elif arg == ".venv/bin/python":
            here.append(sys.executable)
        else:
            here.append(arg.replace("http://127.0.0.1:4096", url))
    return here


async def test_the_commands_of_the_mcp_page_run_as_printed(server: RunningServer, tmp_path: Path):
    """docs/mcp.md's two commands, as printed but for the address: the question tool at /mcp, and the
    example server's tool behind the proxy; each question answered through the gateway."""
    ask, proxied = printed_commands()
    assert [ask[2], proxied[2]] == ["--cli", "--cli"], (ask, proxied)  # the test's cli() gives --cli
    async with httpx.AsyncClient(base_url=server.url) as gateway:
        async with cli("--format", "json", *as_run_here(ask, server.url)[1:], home=tmp_path) as calling:
            asked = await question(gateway, directory="/srv/any")
            assert asked["questions"][0]["question"] == "Deploy now?"
            await gateway.post(f"/question/{asked['id']}/reply", json={"answers": [["Yes"]]})
            result = await result_of(calling)
        assert result["structuredContent"] == {"action": "accept", "answers": [["Yes"]]}

        async with cli("--format", "json", *as_run_here(proxied, server.url)[1:], home=tmp_path) as calling:
            asked = await question(gateway, directory="mcp:Excavator diagnosis")
            await gateway.post(f"/question/{asked['id']}/reply", json=ANSWERS)
            result = await result_of(calling)
        assert result["content"] == [{"type": "text", "text": DIAGNOSED}]
