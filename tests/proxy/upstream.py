"""The upstream MCP server the proxy's tests put behind the gateway, written with the ``mcp`` package as
any server author would write it: a tool that asks nobody, one that asks mid-call with ``ctx.elicit``
(push-style), one that asks through a ``Resolve(Elicit(...))`` resolver (an ``InputRequiredResult`` in
the 2026-07-28 era), plain yes/no confirmations (a schema with no properties: push-style exactly as
FastMCP 2.x sends it, and through a resolver), one that returns an ``InputRequiredResult`` itself
(2026-07-28 only), and a prompt, a resource, a failing tool and one whose result breaks the output
schema it declares to show the proxy is transparent.

``python -m tests.proxy.upstream`` serves it over stdio; ``--http PORT`` over Streamable HTTP at
``/mcp``; ``--crash-on NAME`` exits the process in the middle of that tool; ``--name`` and ``--title``
give its ``serverInfo`` another name and title (``--title-size N`` pads the title to N characters).
"""

import argparse
import os
from typing import Annotated

import anyio
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
    Tool,
    ToolAnnotations,
)
from pydantic import BaseModel, Field

NAME = "Excavator Service"
ORDER_MESSAGE = "Confirm the spare-part order"
REGION_MESSAGE = "Where should the machine be delivered?"
SHIFT_MESSAGE = "Plan the operator's shift"
SCRAP_MESSAGE = "Scrap the machine for good?"
SCRAP_SCHEMA = {"type": "object", "properties": {"confirmed": {"type": "boolean"}}, "required": ["confirmed"]}
LINK_MESSAGE = "Sign in to the parts portal"
LINK_URL = "https://parts.example.com/sign-in?session=1"
CLEAN_MESSAGE = "Delete the 14 old parts photos? Just say yes or no."
WIPE_MESSAGE = "Wipe the machine's fault log?"
CONFIRM_SCHEMA = {"type": "object", "properties": {}}
"""A plain confirmation exactly as FastMCP 2.x to 3.4 send ``ctx.elicit(message, response_type=None)``."""


class Order(BaseModel):
    part: str = Field(title="Part", json_schema_extra={"enum": ["bucket", "track", "hose"]})
    quantity: int = Field(title="Quantity", ge=1, le=50)
    express: bool = Field(False, title="Express delivery")


class Region(BaseModel):
    region: str = Field(title="Region", json_schema_extra={"enum": ["eu-west", "us-east"]})


class Shift(BaseModel):
    hours: int = Field(8, title="Hours", ge=1, le=12)
    night: bool = Field(False, title="Night shift")


class Confirm(BaseModel):  # no fields: a yes or a no. No docstring: it would be the schema's description
    pass


class Quote(BaseModel):
    total: float
    currency: str


STOCK_SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer"}, "depot": {"type": "string"}},
    "required": ["count", "depot"],
}
"""The output schema ``stock`` declares, which its results break."""
STOCK_CONTENT = {"count": "a dozen", "note": "depot unknown"}


class Server(MCPServer):
    """An ``MCPServer`` whose ``stock`` tool declares :data:`STOCK_SCHEMA` as its output schema: a
    schema written by hand, which the tool's results do not follow."""

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        return [
            tool.model_copy(update={"output_schema": STOCK_SCHEMA}) if tool.name == "stock" else tool
            for tool in tools
        ]


def build(
    crash_on: str | None = None, name: str = NAME, title: str | None = "Excavator Service (spare parts)"
) -> MCPServer:
    server = Server(name, title=title, instructions="Orders spare parts.")

    def maybe_crash(tool: str) -> None:
        if crash_on == tool:
            os._exit(3)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, title="Price of a part"))
    async def quote(part: str, quantity: int = 1) -> Quote:
        """The price of ``quantity`` of ``part``: asks nobody."""
        return Quote(total=12.5 * quantity, currency="EUR")

    @server.tool()
    async def slow_count(steps: int, ctx: Context) -> str:
        """Counts to ``steps``, reporting progress on the way."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        return f"counted to {steps}"

    @server.tool()
    async def fail(reason: str) -> str:
        """Always fails, with ``reason``."""
        raise ToolError(f"refused: {reason}")

    @server.tool()
    async def stock(part: str) -> CallToolResult:
        """How many of ``part`` are in stock: a result that breaks the tool's declared output schema
        (a count in words, no depot, a field it does not name)."""
        return CallToolResult(
            content=[TextContent(type="text", text=f"{part}: a dozen")], structured_content=STOCK_CONTENT
        )

    @server.tool()
    async def order_part(ctx: Context) -> str:
        """Orders a part after asking the person (``ctx.elicit`` mid-call)."""
        maybe_crash("order_part")
        outcome = await ctx.elicit(ORDER_MESSAGE, Order)
        if isinstance(outcome, AcceptedElicitation):
            order = outcome.data
            return f"ordered {order.quantity} {order.part} (express: {order.express})"
        return f"no order: {outcome.action}"

    @server.tool()
    async def plan_shift(ctx: Context) -> str:
        """Plans a shift: every answer has a default."""
        outcome = await ctx.elicit(SHIFT_MESSAGE, Shift)
        if isinstance(outcome, AcceptedElicitation):
            return f"shift of {outcome.data.hours} hours (night: {outcome.data.night})"
        return f"no shift: {outcome.action}"

    @server.tool()
    async def clean_up(ctx: Context) -> str:
        """Deletes old photos once the person says yes: a FastMCP 2.x-style plain confirmation."""
        outcome = await ctx.session.elicit_form(CLEAN_MESSAGE, CONFIRM_SCHEMA, ctx.request_id)
        if outcome.action == "accept":
            return f"cleaned up (content: {outcome.content})"
        return f"kept the photos: {outcome.action}"

    async def ask_wipe() -> Elicit[Confirm]:
        return Elicit(WIPE_MESSAGE, Confirm)

    @server.tool()
    async def wipe_log(
        machine: str, confirmed: Annotated[ElicitationResult[Confirm], Resolve(ask_wipe)]
    ) -> str:
        """Wipes ``machine``'s fault log once the person says yes (a resolver asks a plain confirmation)."""
        if isinstance(confirmed, AcceptedElicitation):
            return f"{machine}: log wiped"
        return f"{machine}: log kept ({confirmed.action})"

    @server.tool()
    async def link_account(ctx: Context) -> str:
        """Asks the person to sign in on a web page (URL mode)."""
        outcome = await ctx.elicit_url(LINK_MESSAGE, LINK_URL, "link-1")
        return f"link: {outcome.action}"

    @server.tool()
    async def stubborn_order(ctx: Context) -> str:
        """Asks as ``order_part`` does, but ignores the client's cancelling while it waits, as a server
        may: its question is withdrawn by the proxy alone."""
        with anyio.CancelScope(shield=True):
            outcome = await ctx.elicit(ORDER_MESSAGE, Order)
        return f"stubborn: {outcome.action}"

    async def ask_region() -> Elicit[Region]:
        return Elicit(REGION_MESSAGE, Region)

    @server.tool()
    async def deliver(machine: str, region: Annotated[ElicitationResult[Region], Resolve(ask_region)]) -> str:
        """Delivers ``machine`` where the person says (a resolver asks)."""
        if isinstance(region, AcceptedElicitation):
            return f"{machine} goes to {region.data.region}"
        return f"{machine} stays: {region.action}"

    @server.tool()
    async def scrap(machine: str, ctx: Context) -> str:
        """Scraps ``machine`` once the person confirms, asking by returning an ``InputRequiredResult``
        itself: the ``mcp`` package sends that in the 2026-07-28 era only."""
        answer = (ctx.input_responses or {}).get("confirm")
        if answer is None:
            form = ElicitRequestFormParams(message=SCRAP_MESSAGE, requested_schema=SCRAP_SCHEMA)
            return InputRequiredResult(input_requests={"confirm": ElicitRequest(params=form)})  # type: ignore[return-value]
        if (
            isinstance(answer, ElicitResult)
            and answer.action == "accept"
            and (answer.content or {}).get("confirmed")
        ):
            return f"{machine} scrapped"
        return f"{machine} kept"

    @server.tool()
    async def restock(part: str, ctx: Context) -> str:
        """Adds a tool for ``part`` and says the tool list changed."""

        async def order() -> str:
            return f"{part} ordered"

        server.add_tool(order, name=f"order_{part}")
        await ctx.session.send_tool_list_changed()
        return f"order_{part} added"

    @server.prompt(title="Inspection checklist")
    def checklist(machine: str) -> str:
        """A checklist prompt for ``machine``."""
        return f"Inspect the {machine}: tracks, hoses, bucket teeth."

    @server.resource("parts://catalogue", mime_type="text/plain")
    def catalogue() -> str:
        """The parts catalogue."""
        return "bucket, track, hose"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--crash-on", metavar="TOOL")
    parser.add_argument("--name", default=NAME)
    parser.add_argument("--title", default="Excavator Service (spare parts)")
    parser.add_argument("--title-size", type=int, default=0)
    args = parser.parse_args()
    title = args.title.ljust(args.title_size, "x") or None
    server = build(args.crash_on, args.name, title)
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
