"""The upstream's protocol era (``--upstream-era``) with upstreams that ask in both styles: a push-style
``ctx.elicit`` travels on a 2025-11-25 connection only, an ``InputRequiredResult`` returned by the tool
itself (FastMCP 4's guard tools, a bare one from an ``mcp`` server) on a 2026-07-28 connection only.
Under the default (``auto``) both reach the person; a pinned era's failures name the flag."""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import RunningServer
from tests.helpers import until
from tests.proxy.conftest import DIRECTORY, WHO, HttpUpstream, Proxy, nothing_pending, question
from tests.proxy.fastmcp_upstream import NAME, ORDER_MESSAGE, REGION_MESSAGE
from tests.proxy.test_lifecycle import alive
from tests.proxy.test_proxy import ERAS, counts, text
from tests.proxy.upstream import SCRAP_MESSAGE

pytestmark = pytest.mark.timeout(120)
FASTMCP = [sys.executable, "-m", "tests.proxy.fastmcp_upstream"]
FASTMCP_DIRECTORY = f"mcp:{NAME}"
SECOND = "asked again on a second connection to it, in 2026-07-28"


@pytest.fixture(params=["stdio", "http"])
def both_styles(
    request: pytest.FixtureRequest, http_upstream: Callable[..., HttpUpstream]
) -> list[str] | str:
    """The FastMCP 4 upstream as the proxy is told of it: a command, or a URL."""
    return FASTMCP if request.param == "stdio" else http_upstream(command=FASTMCP).url


async def asked_and_answered(
    client: Any,
    gateway: httpx.AsyncClient,
    tool: str,
    arguments: dict[str, Any],
    answers: list[list[str]],
    directory: str = FASTMCP_DIRECTORY,
) -> tuple[str, str]:
    """Calls ``tool`` through the proxy, answers its one question on the gateway with ``answers``:
    the question's text and the tool's result."""
    results: list[str] = []

    async def call() -> None:
        results.append(text(await client.call_tool(tool, arguments)))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call)
        asked = await question(gateway, directory=directory)
        await gateway.post(f"/question/{asked['id']}/reply", json={"answers": answers})
    return asked["questions"][0]["question"], results[0]


@pytest.mark.parametrize("era", ERAS)
async def test_by_default_a_fastmcp_upstream_is_asked_in_both_styles(
    server: RunningServer, proxy: Proxy, both_styles: list[str] | str, era: str
):
    async with (
        proxy.client(server.url, era=era, upstream=both_styles) as client,
        httpx.AsyncClient(base_url=server.url, timeout=10) as gateway,
    ):
        before = await counts(gateway)
        # Push-style, then a guard (asked again in 2026-07-28), then each once more: the second
        # connection is kept, and the first still carries push-style questions.
        for tool, arguments, answer, expected, message in [
            ("order_part", {}, "3", "hired for 3 days", ORDER_MESSAGE),
            ("deliver", {"machine": "LTM 1100"}, "eu-west", "LTM 1100 goes to eu-west", REGION_MESSAGE),
            ("order_part", {}, "5", "hired for 5 days", ORDER_MESSAGE),
            ("deliver", {"machine": "AC 45"}, "us-east", "AC 45 goes to us-east", REGION_MESSAGE),
        ]:
            asked, result = await asked_and_answered(client, gateway, tool, arguments, [[answer]])
            assert asked.startswith(f"{NAME} · {tool}: {message}")
            assert result == expected
        assert text(await client.call_tool("quote", {"days": 2})) == "1800 EUR"
        # A guard prompt too: prompts and resources may answer with an InputRequiredResult.
        async with anyio.create_task_group() as tasks:
            prompts: list[Any] = []

            async def get() -> None:
                prompts.append(await client.get_prompt("site_survey"))

            tasks.start_soon(get)
            asked = await question(gateway, directory=FASTMCP_DIRECTORY)
            assert asked["questions"][0]["question"].startswith(f"{NAME}: {REGION_MESSAGE}")
            await gateway.post(f"/question/{asked['id']}/reply", json={"answers": [["us-east"]]})
        assert prompts[0].messages[0].content.text == "Survey the ground in us-east."
        await nothing_pending(gateway)
        assert await counts(gateway) == (before[0] + 5, before[1] + 5)  # each question asked once
    said = proxy.stderr()
    assert "protocol 2025-11-25" in said
    assert said.count(SECOND) == 1, said


async def test_a_bare_input_required_result_from_an_mcp_server_is_asked_by_default(
    server: RunningServer, proxy: Proxy, tmp_path: Path
):
    """As mcp-confirm asks: an ``mcp`` server sends a tool's own ``InputRequiredResult`` in 2026-07-28
    only (on 2025-11-25: "Handler returned an invalid result")."""
    async with (
        proxy.client(server.url) as client,
        httpx.AsyncClient(base_url=server.url, timeout=10) as gateway,
    ):
        asked, result = await asked_and_answered(
            client, gateway, "scrap", {"machine": "SY215C"}, [["Yes"]], directory=DIRECTORY
        )
        assert asked.startswith(f"{WHO} · scrap: {SCRAP_MESSAGE}")
        assert result == "SY215C scrapped"
        # The push-style tools of the same upstream still ask on the 2025-11-25 connection.
        asked, result = await asked_and_answered(
            client, gateway, "plan_shift", {}, [["6"], ["No"]], directory=DIRECTORY
        )
        assert result == "shift of 6 hours (night: False)"


async def test_the_second_stdio_upstream_ends_with_the_proxy(
    server: RunningServer, proxy: Proxy, tmp_path: Path
):
    starts = tmp_path / "starts"
    async with (
        proxy.client(server.url, upstream=[*FASTMCP, "--starts", str(starts)]) as client,
        httpx.AsyncClient(base_url=server.url, timeout=10) as gateway,
    ):
        assert text(await client.call_tool("quote", {"days": 1})) == "900 EUR"
        assert len(starts.read_text().split()) == 1  # the second is started when first needed
        await asked_and_answered(client, gateway, "deliver", {"machine": "LTM 1100"}, [["eu-west"]])
        pids = [int(pid) for pid in starts.read_text().split()]
        assert len(pids) == 2
    for pid in pids:
        await until(lambda pid=pid: not alive(pid), timeout=30, what=f"upstream {pid} gone")


async def test_a_pinned_era_names_the_flag_in_the_error(
    server: RunningServer, proxy: Proxy, http_upstream: Callable[..., HttpUpstream]
):
    fastmcp = http_upstream(command=FASTMCP).url
    async with proxy.client(server.url, "--upstream-era", "legacy", upstream=fastmcp) as client:
        with pytest.raises(MCPError, match=r"only exists at MCP 2026-07-28.*--upstream-era legacy"):
            await client.call_tool("deliver", {"machine": "LTM 1100"})
    async with proxy.client(server.url, "--upstream-era", "legacy") as client:
        with pytest.raises(MCPError, match=r"Handler returned an invalid result.*--upstream-era legacy"):
            await client.call_tool("scrap", {"machine": "SY215C"})
    async with proxy.client(server.url, "--upstream-era", "modern", upstream=fastmcp) as client:
        failed = await client.call_tool("order_part", {})
        assert failed.is_error
        assert "unavailable on 2026-07-28 connections" in failed.content[0].text
        assert "--upstream-era modern" in failed.content[0].text
    async with proxy.client(server.url, "--upstream-era", "modern") as client:
        with pytest.raises(MCPError, match=r"no back-channel .*--upstream-era modern"):
            await client.call_tool("order_part", {})
    async with httpx.AsyncClient(base_url=server.url) as gateway:
        await nothing_pending(gateway)
    assert SECOND not in proxy.stderr()
