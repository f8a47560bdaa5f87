"""An MCP client that starts ``examples/diagnose_server.py`` behind ``elicitation-gateway proxy`` over
stdio, as an agent's MCP client would, and calls its tool: the server's question goes to the gateway,
where a person answers it (docs/proxy.md).

    make run                                             # the gateway, in one terminal
    .venv/bin/python examples/call_through_proxy.py      # in another; answer on http://127.0.0.1:4096/

The gateway is ``$GATEWAY_URL``, else http://127.0.0.1:4096. The client needs no elicitation support
of its own: the proxy asks the gateway.
"""

import asyncio
import os
import sys
from pathlib import Path

from mcp import StdioServerParameters
from mcp.client import Client

SERVER = Path(__file__).with_name("diagnose_server.py")


async def main() -> None:
    proxy = StdioServerParameters(
        command=sys.executable,  # this Python has the gateway installed: its ``elicitation-gateway``
        args=["-m", "elicitation_gateway", "proxy", "--", sys.executable, str(SERVER), "--stdio"],
        env={**os.environ},  # the proxy reads GATEWAY_URL and GATEWAY_TOOL_TOKEN from here
    )
    async with Client(proxy) as client:
        print("calling diagnose: answer its question on the gateway's page", file=sys.stderr)
        result = await client.call_tool("diagnose", {})
        print(result.content[0].text)


if __name__ == "__main__":
    asyncio.run(main())
