"""The programs under examples/, run as their docs say: the MCP server that asks with ``ctx.elicit``,
the client that asks its questions through the gateway (docs/clients.md), and the same server over
stdio behind ``elicitation-gateway proxy`` (docs/proxy.md)."""

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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
