"""The ``MCPServer`` behind ``/mcp``: the SDK's, with names it does not offer refused as the spec says.

The MCP spec makes an unknown tool or prompt a protocol error, ``-32602`` Invalid params ("Unknown
tool: ..."). ``mcp`` 2.3 answers an unknown tool with a tool result flagged ``isError`` (which the model
reads as the tool's own answer), and an unknown prompt with a bare ``ValueError``: an internal error on
the wire (code ``0`` in the 2025-11-25 era, ``-32603`` in the 2026-07-28 era) and a traceback at ERROR
in the log. An ``MCPError`` raised from ``call_tool`` or ``get_prompt`` reaches the caller as that
JSON-RPC error, unchanged and unlogged, in both eras. Unknown resources need nothing: the SDK raises its
``ResourceNotFoundError``, answered with ``-32602`` in both eras (SEP-2164 made that the code in
2026-07-28; the 2025-11-25 spec had recommended ``-32002``).
"""

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, GetPromptResult, InputRequiredResult


class UnknownNamesRefused(MCPServer):
    """An ``MCPServer`` whose unknown tools and prompts are ``-32602`` errors naming what is unknown."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name not in {tool.name for tool in await self.list_tools()}:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")
        return await super().call_tool(name, arguments, context)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context | None = None
    ) -> GetPromptResult | InputRequiredResult:
        if name not in {prompt.name for prompt in await self.list_prompts()}:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}")
        return await super().get_prompt(name, arguments, context)
