"""The README's curl walkthrough, run as written (with the test server's address in place of port 4096):
ask, answer, and decline, each shell block exactly as the README prints it."""

import asyncio
import json
import os
import re
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from tests.conftest import RunningServer
from tests.helpers import until
from tests.processes import areap, start_process
from tests.unit.test_docs import README


@pytest.fixture(autouse=True)
def curl() -> None:
    """The README's commands need curl: skipped without it on a workstation, a failure under CI=true
    (.ci/run installs it)."""
    if shutil.which("curl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("curl is not installed: .ci/run installs it")
        pytest.skip("curl is not installed")


WALKTHROUGH = README[README.index("## Your first elicitation") :].split("\n## ", 1)[0]
SHELL_BLOCKS = re.findall(r"^```sh\n(.*?)^```", WALKTHROUGH, re.MULTILINE | re.DOTALL)


def block(naming: str) -> str:
    (found,) = [text for text in SHELL_BLOCKS if naming in text]
    return found


def as_run_on(server: RunningServer, script: str) -> str:
    return script.replace("http://127.0.0.1:4096", server.url)


Bash = Callable[[RunningServer, str], Awaitable[asyncio.subprocess.Process]]


@pytest.fixture
async def bash() -> AsyncIterator[Bash]:
    """Runs a script in ``bash -c`` against the server; every one is reaped after the test."""
    started: list[asyncio.subprocess.Process] = []

    async def start(server: RunningServer, script: str) -> asyncio.subprocess.Process:
        started.append(
            await start_process("bash", "-c", as_run_on(server, script), stdout=asyncio.subprocess.PIPE)
        )
        return started[-1]

    yield start
    for process in started:
        await areap(process)


async def output(process: asyncio.subprocess.Process) -> str:
    async with asyncio.timeout(20):
        stdout, _ = await process.communicate()
    assert process.returncode == 0
    return stdout.decode()


async def start_asking(bash: Bash, server: RunningServer) -> asyncio.subprocess.Process:
    """Terminal 2: the tool's curl, which waits until the question is answered."""
    asking = await bash(server, block("/elicit"))
    async with httpx.AsyncClient(base_url=server.url) as client:

        async def asked() -> bool:
            return bool((await client.get("/question")).json())

        await until(asked, timeout=10, what="the question is asked")
    return asking


async def run(bash: Bash, server: RunningServer, script: str) -> str:
    return await output(await bash(server, script))


async def result_of(asking: asyncio.subprocess.Process) -> object:
    return json.loads(await output(asking))


async def test_the_walkthrough_answers_as_written(bash: Bash, make_server: Callable[..., RunningServer]):
    server = make_server()
    asking = await start_asking(bash, server)
    printed = re.search(r"# prints: (\S+)", block("/reply"))
    assert printed, "the README shows what terminal 3 prints"
    assert await run(bash, server, block("/reply")) == printed.group(1)
    (shown,) = re.findall(r"^```json\n(.*?)\n```", WALKTHROUGH, re.MULTILINE | re.DOTALL)
    assert await result_of(asking) == json.loads(shown)


async def test_the_decline_example_declines(bash: Bash, make_server: Callable[..., RunningServer]):
    server = make_server()
    asking = await start_asking(bash, server)
    find_id = block("/reply").splitlines()[0]
    assert find_id.startswith("ID=")
    assert await run(bash, server, find_id + "\n" + block("/reject")) == "true"
    assert await result_of(asking) == {"action": "decline"}
