"""An MCP client whose server's questions are asked through the gateway: ``GatewayClient``'s
``elicitation_callback`` plugged into ``mcp.client.Client`` (docs/clients.md).

    python examples/diagnose_server.py &               # the MCP server, at http://127.0.0.1:8000/mcp
    python examples/ask_through_gateway.py             # answer on the gateway's page meanwhile
    python examples/ask_through_gateway.py http://127.0.0.1:8001/mcp

The gateway is ``$GATEWAY_URL``, else http://127.0.0.1:4096.
"""

import asyncio
import sys

from mcp.client import Client

from elicitation_gateway.client import GatewayClient


async def main(server: str) -> None:
    async with GatewayClient() as gateway:
        callback = gateway.elicitation_callback
        # mode="legacy": a server's ctx.elicit needs the 2025-11-25 era (2026-07-28 has no server requests).
        async with Client(server, mode="legacy", elicitation_callback=callback) as client:
            result = await client.call_tool("diagnose", {})  # its ctx.elicit(...) asks through the gateway
            print(result.content[0].text)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"))
