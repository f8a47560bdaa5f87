"""Names ``/mcp`` does not offer: an unknown tool, prompt or resource is the JSON-RPC error the MCP spec
names for it (``-32602`` Invalid params, naming what is unknown), in both protocol eras, with nothing
asked and no error or traceback in the gateway's log."""

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

# The mcp 2.3 client negotiates the newest protocol unless told to speak the 2025-11-25 one.
ERAS = {"auto": "2026-07-28", "legacy": "2025-11-25"}

UNKNOWN: dict[str, tuple[Callable[[Client], Awaitable[Any]], str]] = {
    "tool": (lambda mcp: mcp.call_tool("delete_everything", {}), "Unknown tool: delete_everything"),
    "prompt": (lambda mcp: mcp.get_prompt("summarise"), "Unknown prompt: summarise"),
    "resource": (lambda mcp: mcp.read_resource("file:///etc/passwd"), "Unknown resource: file:///etc/passwd"),
}


@pytest.mark.parametrize("mode", list(ERAS))
@pytest.mark.parametrize("kind", list(UNKNOWN))
async def test_an_unknown_name_is_invalid_params_and_logs_no_error(server, client, caplog, mode, kind):
    caplog.set_level(logging.WARNING)
    request, message = UNKNOWN[kind]
    async with Client(f"{server.url}/mcp", mode=mode) as mcp:
        assert mcp.protocol_version == ERAS[mode]
        with pytest.raises(MCPError) as refused:
            await request(mcp)
        # The connection stays usable: the one tool is still listed.
        assert [tool.name for tool in (await mcp.list_tools()).tools] == ["question"]

    assert refused.value.code == INVALID_PARAMS
    assert refused.value.message == message
    assert (await client.get("/question")).json() == []
    troubles = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not troubles, [f"{r.name}: {r.getMessage()}" for r in troubles]
