"""The programs under examples/, run as their docs say: the MCP server that asks with ``ctx.elicit``,
the client that asks its questions through the gateway (docs/clients.md), and the same server over
stdio behind ``elicitation-gateway proxy`` (docs/proxy.md)."""

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import StdioServerParameters
from mcp.client import Client

from tests.conftest import RunningServer
from tests.processes import ROOT, areaped, child_setup, free_port, reaped, start_process, wait_for_port
from tests.proxy.conftest import question

EXAMPLES = ROOT / "examples"
ANSWERS = {"answers": [["SY235C"], ["Noise"], ["900"]]}
DIAGNOSED = "SY235C after 900 hours: Noise"


@pytest.fixture
def example_server() -> Iterator[str]:
    """``python examples/diagnose_server.py --port N``: its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "diagnose_server.py"), "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=child_setup,
    )
    with reaped(process):
        wait_for_port(port, process, "examples/diagnose_server.py")
        yield f"http://127.0.0.1:{port}/mcp"


async def test_the_client_example_asks_its_servers_question_through_the_gateway(
    server: RunningServer, example_server: str
):
    client = await start_process(
        sys.executable,
        str(EXAMPLES / "ask_through_gateway.py"),
        example_server,
        cwd=ROOT,
        env={"GATEWAY_URL": server.url, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with areaped(client), httpx.AsyncClient(base_url=server.url) as gateway:
        asked = await question(gateway, directory="/srv/any")  # it names no directory: seen under any
        assert asked["questions"][0]["question"].startswith("Excavator diagnosis")
        await gateway.post(f"/question/{asked['id']}/reply", json=ANSWERS)
        out, err = await asyncio.wait_for(client.communicate(), 30)
    assert client.returncode == 0, err.decode()
    assert out.decode().strip() == DIAGNOSED


async def test_the_example_server_behind_the_proxy(server: RunningServer, tmp_path: Path):
    upstream = [sys.executable, str(EXAMPLES / "diagnose_server.py"), "--stdio"]
    proxy = StdioServerParameters(
        command=sys.executable,
        args=["-m", "elicitation_gateway", "proxy", "--gateway", server.url, "--", *upstream],
        cwd=ROOT,
    )
    async with Client(proxy) as client, httpx.AsyncClient(base_url=server.url) as gateway:
        calling = asyncio.ensure_future(client.call_tool("diagnose", {}))
        asked = await question(gateway, directory="mcp:Excavator diagnosis")
        shown = asked["questions"][0]["question"]
        assert shown.startswith("Excavator diagnosis (example) · diagnose: Excavator diagnosis")
        await gateway.post(f"/question/{asked['id']}/reply", json=ANSWERS)
        result = await asyncio.wait_for(calling, 30)
    assert result.content[0].text == DIAGNOSED


@contextlib.asynccontextmanager
async def running(script: str, **options: Any) -> AsyncIterator[asyncio.subprocess.Process]:
    """``python SCRIPT`` with its output piped; killed and reaped on the way out, even when the test
    fails, so that no process outlives its test."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        script,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        **options,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


MCP_PAGE = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")


async def test_the_long_wait_program_of_the_mcp_page_runs_as_printed(make_server, tmp_path: Path):
    """docs/mcp.md's Python program, as printed but for the address: it hears progress while a person
    takes their time, and prints the answer."""
    (program,) = re.findall(r"^```python\n(.*?)^```", MCP_PAGE, re.MULTILINE | re.DOTALL)
    server = make_server(mcp_progress_interval=0.2)
    script = tmp_path / "wait.py"
    script.write_text(program.replace("http://127.0.0.1:4096", server.url), encoding="utf-8")
    async with running(str(script)) as waiting:
        assert waiting.stdout is not None
        async with httpx.AsyncClient(base_url=server.url) as gateway:
            asked = await question(gateway, directory="/srv/any")
            heard = await asyncio.wait_for(waiting.stdout.readline(), 30)  # progress, before any answer
            assert heard.decode().startswith("waited "), heard
            await gateway.post(f"/question/{asked['id']}/reply", json={"answers": [["Yes"]]})
        out, err = await asyncio.wait_for(waiting.communicate(), 30)
    assert waiting.returncode == 0, err.decode()
    last = out.decode().strip().splitlines()[-1]
    assert "Yes" in last, out.decode()


async def test_the_proxy_client_example_calls_the_example_server_behind_the_proxy(server: RunningServer):
    """``examples/call_through_proxy.py``, run as docs/proxy.md says, with the gateway at $GATEWAY_URL."""
    script = str(EXAMPLES / "call_through_proxy.py")
    async with running(script, env={**os.environ, "GATEWAY_URL": server.url}) as calling:
        async with httpx.AsyncClient(base_url=server.url) as gateway:
            asked = await question(gateway, directory="mcp:Excavator diagnosis")
            await gateway.post(f"/question/{asked['id']}/reply", json=ANSWERS)
        out, err = await asyncio.wait_for(calling.communicate(), 30)
    assert calling.returncode == 0, err.decode()
    assert out.decode().strip() == DIAGNOSED
