"""The proxy's ``tools/call`` to its upstream (``proxy/tool_call.py``), against the test upstream served
in memory by the ``mcp`` package, in both protocol eras: the result as the upstream sent it, progress,
and the ``InputRequiredResult`` rounds ``Client.call_tool`` would drive (answers, refusals, a round
with no question, the cap on rounds)."""

from typing import Any

import pytest
from mcp.client import Client, InputRequiredRoundsExceededError
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequestParams, ElicitResult, ErrorData, InputRequiredResult

from elicitation_gateway.proxy.tool_call import call_tool
from tests.proxy.upstream import SCRAP_MESSAGE, STOCK_CONTENT, build

MODES = ["legacy", "auto"]  # auto: 2026-07-28, which the in-memory server offers


@pytest.mark.parametrize("mode", MODES)
async def test_a_result_that_breaks_the_output_schema_comes_back_as_sent(mode: str):
    async with Client(build(), mode=mode) as client:  # type: ignore[arg-type]
        result = await call_tool(client, "stock", {"part": "hose"})
        assert result.structured_content == STOCK_CONTENT
        assert not result.is_error
        with pytest.raises(RuntimeError, match="Invalid structured content"):
            await client.call_tool("stock", {"part": "hose"})  # the SDK's own call checks it


@pytest.mark.parametrize("mode", MODES)
async def test_the_same_result_as_the_sdks_call_where_it_checks_nothing_amiss(mode: str):
    async with Client(build(), mode=mode) as client:  # type: ignore[arg-type]
        for name, arguments in [("quote", {"part": "hose", "quantity": 2}), ("fail", {"reason": "no"})]:
            assert await call_tool(client, name, arguments) == await client.call_tool(name, arguments)
        seen: list[tuple[float, float | None, str | None]] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append((value, total, message))

        result = await call_tool(client, "slow_count", {"steps": 3}, progress_callback=progress)
        assert result.content[0].text == "counted to 3"  # type: ignore[union-attr]
        assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_an_input_required_result_is_answered_through_the_clients_callback():
    asked: list[str] = []

    async def answer(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirmed": True})

    async with Client(build(), mode="auto", elicitation_callback=answer) as client:
        result = await call_tool(client, "scrap", {"machine": "SY215C"})
    assert result.content[0].text == "SY215C scrapped"  # type: ignore[union-attr]
    assert asked == [SCRAP_MESSAGE]


async def test_a_question_the_callback_refuses_ends_the_call_with_its_error():
    async def refuse(context: Any, params: ElicitRequestParams) -> ErrorData:
        return ErrorData(code=-32042, message="nobody to ask")

    async with Client(build(), mode="auto", elicitation_callback=refuse) as client:
        with pytest.raises(MCPError, match="nobody to ask") as refused:
            await call_tool(client, "scrap", {"machine": "SY215C"})
    assert refused.value.code == -32042


def waiting_server(ready_after: int | None) -> tuple[MCPServer, list[str | None]]:
    """A tool that answers with an ``InputRequiredResult`` holding only state until it has been sent
    ``ready_after`` times (never, with ``None``); each ``requestState`` it was sent is noted."""
    server = MCPServer("waiting")
    states: list[str | None] = []

    @server.tool()
    async def wait(ctx: Context) -> str:
        states.append(ctx.request_state)
        if ready_after is not None and len(states) >= ready_after:
            return "ready"
        return InputRequiredResult(request_state=f"attempt {len(states)}")  # type: ignore[return-value]

    return server, states


async def test_a_round_with_only_state_is_sent_again_with_that_state():
    server, states = waiting_server(ready_after=3)
    async with Client(server, mode="auto") as client:
        result = await call_tool(client, "wait")
    assert result.content[0].text == "ready"  # type: ignore[union-attr]
    assert states == [None, "attempt 1", "attempt 2"]


async def test_rounds_stop_at_the_clients_cap():
    server, states = waiting_server(ready_after=None)
    async with Client(server, mode="auto", input_required_max_rounds=2) as client:
        with pytest.raises(InputRequiredRoundsExceededError):
            await call_tool(client, "wait")
    assert len(states) == 3  # the first call and two rounds
