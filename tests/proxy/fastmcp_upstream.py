"""An upstream written with FastMCP 4 that asks in both styles, for the proxy's era tests: ``order_part``
asks mid-call with ``ctx.elicit`` (push-style, a 2025-11-25 connection only), ``deliver`` is a guard
tool that returns an ``InputRequiredResult`` (a 2026-07-28 connection only), as is the prompt
``site_survey``; ``quote`` asks nobody.

``python -m tests.proxy.fastmcp_upstream`` serves it over stdio; ``--http PORT`` over Streamable HTTP at
``/mcp``; ``--starts FILE`` notes each start of the process in FILE.
"""

import argparse
import os

import mcp_types
from fastmcp import Context, FastMCP
from pydantic import BaseModel, Field

NAME = "Crane Service"
ORDER_MESSAGE = "Confirm the crane hire"
REGION_MESSAGE = "Where should the crane go?"
REGION_SCHEMA = {
    "type": "object",
    "properties": {"region": {"type": "string", "title": "Region", "enum": ["eu-west", "us-east"]}},
    "required": ["region"],
}


class Hire(BaseModel):
    days: int = Field(title="Days", ge=1, le=30)


def build() -> FastMCP:
    server = FastMCP(NAME, instructions="Hires cranes.")

    @server.tool
    async def quote(days: int) -> str:
        """The price of ``days`` of hire: asks nobody."""
        return f"{days * 900} EUR"

    @server.tool
    async def order_part(ctx: Context) -> str:
        """Hires a crane after asking the person (``ctx.elicit`` mid-call)."""
        outcome = await ctx.elicit(ORDER_MESSAGE, Hire)
        if outcome.action == "accept":
            return f"hired for {outcome.data.days} days"
        return f"no hire: {outcome.action}"

    @server.tool
    async def deliver(machine: str, ctx: Context) -> str | mcp_types.InputRequiredResult:
        """Delivers ``machine`` where the person says (a guard: asks by returning InputRequiredResult)."""
        answer = (ctx.input_responses or {}).get("region")
        if answer is None:
            form = mcp_types.ElicitRequestFormParams(message=REGION_MESSAGE, requested_schema=REGION_SCHEMA)
            request = mcp_types.ElicitRequest(params=form)
            return mcp_types.InputRequiredResult(input_requests={"region": request})
        if isinstance(answer, mcp_types.ElicitResult) and answer.action == "accept" and answer.content:
            return f"{machine} goes to {answer.content['region']}"
        return f"{machine} stays: {getattr(answer, 'action', answer)}"

    @server.prompt
    async def site_survey(ctx: Context) -> str | mcp_types.InputRequiredResult:
        """A survey checklist for where the person says (a guard prompt)."""
        answer = (ctx.input_responses or {}).get("region")
        if answer is None:
            form = mcp_types.ElicitRequestFormParams(message=REGION_MESSAGE, requested_schema=REGION_SCHEMA)
            return mcp_types.InputRequiredResult(
                input_requests={"region": mcp_types.ElicitRequest(params=form)}
            )
        region = (
            answer.content["region"]
            if isinstance(answer, mcp_types.ElicitResult) and answer.content
            else None
        )
        return f"Survey the ground in {region}."

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--starts", metavar="FILE")
    args = parser.parse_args()
    if args.starts:
        with open(args.starts, "a", encoding="utf-8") as noted:
            noted.write(f"{os.getpid()}\n")
    server = build()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http, show_banner=False)
    else:
        server.run("stdio", show_banner=False)


if __name__ == "__main__":
    main()
