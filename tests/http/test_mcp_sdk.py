"""The real ``mcp`` SDK end to end: an MCP server's tool elicits, an MCP client forwards the elicitation
to the gateway with ``GatewayClient.elicitation_callback``, a person answers through the gateway's
HTTP API, and the tool gets typed data that the SDK's own validation accepted."""

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import jsonschema
import mcp.types as types
import pytest
import uvicorn
from mcp.client import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

from elicitation_gateway.client import GatewayClient
from tests.helpers import pending


class Diagnosis(BaseModel):
    """Every kind the gateway asks: choices, bounded int, float, bool, multi-choice, optional fields."""

    model: Literal["SY215C", "SY235C"] = Field(title="Model", description="Which model is it?")
    hours: int = Field(ge=0, le=20000, title="Hours", description="Engine hours")
    load: float = Field(title="Load", description="Load in tonnes")
    running: bool = Field(title="Running", description="Does the engine run?")
    symptoms: list[Literal["Black smoke", "Noise", "Leak"]] = Field(title="Symptoms", min_length=1)
    operator: str = Field("unknown", title="Operator", description="Who operates it?")
    notes: str | None = Field(None, title="Notes", description="Anything else?")


RAW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "priority": {
            "type": "string",
            "title": "Priority",
            "oneOf": [
                {"const": "p1", "title": "Urgent"},
                {"const": "p2", "title": "Normal"},
                {"const": "p3", "title": "Whenever"},
            ],
        },
        "teams": {
            "type": "array",
            "title": "Teams",
            "items": {
                "anyOf": [{"const": "hyd", "title": "Hydraulics"}, {"const": "eng", "title": "Engine"}]
            },
            "minItems": 1,
            "maxItems": 2,
        },
    },
    "required": ["priority", "teams"],
}


CONFIRM_MESSAGE = "Delete the old inspection photos? Just say yes or no."
CONFIRM_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
"""Exactly what FastMCP 2.x–3.4 send for ``ctx.elicit(message, response_type=None)``."""


def maintenance_server() -> MCPServer:
    """An MCP server written with the SDK, as any tool author would write it."""
    server = MCPServer("maintenance")

    @server.tool()
    async def diagnose(ctx: Context) -> dict[str, Any]:
        try:
            result = await ctx.elicit("Excavator diagnosis", Diagnosis)
        except MCPError as error:
            return {"code": error.code, "message": error.message}
        if result.action != "accept":
            return {"action": result.action}
        data = result.data.model_dump()
        return {"action": "accept", "data": data, "types": {k: type(v).__name__ for k, v in data.items()}}

    @server.tool()
    async def dispatch(ctx: Context) -> dict[str, Any]:
        result = await ctx.session.elicit_form("Dispatch a crew", RAW_SCHEMA, ctx.request_id)
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)

    @server.tool()
    async def sign_in(ctx: Context) -> dict[str, Any]:
        try:
            result = await ctx.elicit_url(
                "Sign in to the fleet portal", "https://example.com/login", "login-1"
            )
        except MCPError as error:
            return {"code": error.code, "message": error.message}
        return {"action": result.action}

    @server.tool()
    async def bad_form(ctx: Context) -> dict[str, Any]:
        try:
            await ctx.session.elicit_form(
                "Nothing to hold it", {"type": "object", "properties": {}, "required": ["ok"]}, ctx.request_id
            )
        except MCPError as error:
            return {"code": error.code, "message": error.message}
        return {"code": None}

    @server.tool()
    async def confirm_cleanup(ctx: Context) -> dict[str, Any]:
        """A plain confirmation, as FastMCP 2.x–3.4 send ``ctx.elicit(message, response_type=None)``."""
        result = await ctx.session.elicit_form(CONFIRM_MESSAGE, CONFIRM_SCHEMA, ctx.request_id)
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)

    return server


async def person_answers(client: httpx.AsyncClient, answers: list[list[str]]) -> dict[str, Any]:
    """Wait for the one pending question and answer it through the gateway's HTTP API."""
    [request] = await pending(client, timeout=10)
    reply = await client.post(f"/question/{request['id']}/reply", json={"answers": answers})
    assert reply.status_code == 200, reply.text
    return request


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_ctx_elicit_with_every_kind_gets_typed_data(server, client):
    async with (
        GatewayClient(server.url) as gateway,
        Client(maintenance_server(), mode="legacy", elicitation_callback=gateway.elicitation_callback) as mcp,
    ):
        call = asyncio.create_task(mcp.call_tool("diagnose", {}))
        request = await person_answers(
            client, [["SY235C"], ["1200"], ["2.5"], ["Yes"], ["Black smoke", "Leak"], [], []]
        )
        result = structured(await call)

    questions = request["questions"]
    assert [q["header"] for q in questions] == [
        "Model",
        "Hours",
        "Load",
        "Running",
        "Symptoms",
        "Operator",
        "Notes",
    ]
    assert questions[0]["question"].startswith("Excavator diagnosis")
    assert questions[4]["multiple"] is True
    assert result == {
        "action": "accept",
        "data": {
            "model": "SY235C",
            "hours": 1200,
            "load": 2.5,
            "running": True,
            "symptoms": ["Black smoke", "Leak"],
            "operator": "unknown",
            "notes": None,
        },
        "types": {
            "model": "str",
            "hours": "int",
            "load": "float",
            "running": "bool",
            "symptoms": "list",
            "operator": "str",
            "notes": "NoneType",
        },
    }


async def test_a_raw_form_with_titled_one_of_and_items_any_of(server, client):
    async with (
        GatewayClient(server.url) as gateway,
        Client(maintenance_server(), mode="legacy", elicitation_callback=gateway.elicitation_callback) as mcp,
    ):
        call = asyncio.create_task(mcp.call_tool("dispatch", {}))
        request = await person_answers(client, [["Urgent"], ["Hydraulics", "Engine"]])
        result = structured(await call)

    labels = [[option["label"] for option in q["options"]] for q in request["questions"]]
    assert labels == [["Urgent", "Normal", "Whenever"], ["Hydraulics", "Engine"]]
    assert result == {"action": "accept", "content": {"priority": "p1", "teams": ["hyd", "eng"]}}
    jsonschema.validate(result["content"], RAW_SCHEMA)


@pytest.mark.parametrize(
    ("answer", "result"),
    [("Yes", {"action": "accept", "content": {}}), ("No", {"action": "decline"})],
)
async def test_a_plain_confirmation_is_one_yes_no_question(server, client, answer, result):
    """An empty ``properties`` (FastMCP's ``response_type=None``) asks the message as Yes/No: Yes
    accepts with empty content, No declines."""
    async with (
        GatewayClient(server.url) as gateway,
        Client(maintenance_server(), mode="legacy", elicitation_callback=gateway.elicitation_callback) as mcp,
    ):
        call = asyncio.create_task(mcp.call_tool("confirm_cleanup", {}))
        request = await person_answers(client, [[answer]])
        assert structured(await call) == result

    [question] = request["questions"]
    assert question["question"] == CONFIRM_MESSAGE
    assert question["header"] == "Confirm"
    assert [option["label"] for option in question["options"]] == ["Yes", "No"]
    assert question["custom"] is False
    assert "multiple" not in question


# ---------------------------------------------------------------------------------------------------
# A ClientSession over real Streamable HTTP


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free loopback port, in a thread; yield its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive(), "uvicorn stopped before it started"
            assert time.monotonic() < deadline, "uvicorn did not start"
            threading.Event().wait(0.01)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.mark.parametrize(("reject", "action"), [({"action": "decline"}, "decline"), (None, "cancel")])
async def test_a_client_session_over_http_forwards_to_the_gateway(server, client, reject, action):
    with serving(maintenance_server().streamable_http_app()) as tools_url:
        async with (
            GatewayClient(server.url) as gateway,
            streamable_http_client(f"{tools_url}/mcp") as (read, write),
            ClientSession(read, write, elicitation_callback=gateway.elicitation_callback) as session,
        ):
            await session.initialize()
            call = asyncio.create_task(session.call_tool("diagnose", {}))
            [request] = await pending(client, timeout=10)
            await client.post(f"/question/{request['id']}/reject", json=reject)
            result = structured(await call)
            assert result == {"action": action}

            call = asyncio.create_task(session.call_tool("dispatch", {}))
            await person_answers(client, [["Whenever"], ["Engine"]])
            assert structured(await call) == {
                "action": "accept",
                "content": {"priority": "p3", "teams": ["eng"]},
            }


# ---------------------------------------------------------------------------------------------------
# What the callback cannot ask


async def test_url_mode_gets_invalid_params_or_decline(server, client):
    async with (
        GatewayClient(server.url) as gateway,
        Client(maintenance_server(), mode="legacy", elicitation_callback=gateway.elicitation_callback) as mcp,
    ):
        refused = structured(await mcp.call_tool("sign_in", {}))
    assert refused["code"] == types.INVALID_PARAMS == -32602
    assert "URL mode" in refused["message"]

    async with (
        GatewayClient(server.url, url_mode="decline") as gateway,
        Client(maintenance_server(), mode="legacy", elicitation_callback=gateway.elicitation_callback) as mcp,
    ):
        assert structured(await mcp.call_tool("sign_in", {})) == {"action": "decline"}
    assert (await client.get("/question")).json() == []


async def test_gateway_errors_become_error_data_with_a_message(make_server):
    server = make_server()
    async with (
        GatewayClient(server.url) as gateway,
        Client(maintenance_server(), mode="legacy", elicitation_callback=gateway.elicitation_callback) as mcp,
    ):
        refused = structured(await mcp.call_tool("bad_form", {}))
    assert refused["code"] == types.INVALID_PARAMS
    assert "requestedSchema.required names 'ok'" in refused["message"]

    server.stop()
    async with (
        GatewayClient(server.url) as gateway,
        Client(maintenance_server(), mode="legacy", elicitation_callback=gateway.elicitation_callback) as mcp,
    ):
        unreachable = structured(await mcp.call_tool("diagnose", {}))
    assert unreachable["code"] == types.INTERNAL_ERROR
    assert "cannot reach the gateway" in unreachable["message"]
