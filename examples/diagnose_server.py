"""A small MCP server whose tool asks a person mid-call with ``ctx.elicit``: the server that the
examples in docs/clients.md and docs/proxy.md talk to.

    python examples/diagnose_server.py                 # Streamable HTTP at http://127.0.0.1:8000/mcp
    python examples/diagnose_server.py --port 8001     # another port
    python examples/diagnose_server.py --stdio         # over stdio, e.g. behind elicitation-gateway proxy
"""

import argparse

from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field


class Diagnosis(BaseModel):
    model: str = Field(title="Model", json_schema_extra={"enum": ["SY215C", "SY235C"]})
    symptoms: list[str] = Field(
        title="Symptoms",
        description="Select symptoms:",
        json_schema_extra={"items": {"type": "string", "enum": ["Black smoke", "Noise"]}},
    )
    hours: int = Field(title="Hours", ge=0, le=20000)


server = MCPServer("Excavator diagnosis", title="Excavator diagnosis (example)")


@server.tool()
async def diagnose(ctx: Context) -> str:
    """Diagnoses an excavator after asking the person about it."""
    outcome = await ctx.elicit("Excavator diagnosis", Diagnosis)
    if not isinstance(outcome, AcceptedElicitation):
        return f"no diagnosis: the person chose {outcome.action}"
    answer = outcome.data
    return f"{answer.model} after {answer.hours} hours: {', '.join(answer.symptoms) or 'no symptoms'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--stdio", action="store_true", help="serve over stdio instead of HTTP")
    args = parser.parse_args()
    if args.stdio:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
