"""``/mcp`` streams count against ``GATEWAY_MAX_SUBSCRIBERS`` with ``/event``'s, and end.

A ``GET /mcp`` stream (the Streamable HTTP standalone stream) and the event stream of a ``POST /mcp``
call each hold a place while open: past the limit, either kind, and ``/event``, is refused with ``429``;
closing one gives its place back. A ``GET /mcp`` stream, on which the gateway never sends anything, ends
cleanly after ``GATEWAY_MCP_GET_STREAM_LIFETIME``.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import httpx
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from elicitation_gateway.gateway import Gateway
from tests.helpers import pending, until

STREAM = {"Accept": "text/event-stream"}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}
PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
QUESTION = [{"question": "Go on?", "header": "Go", "options": [{"label": "Yes"}, {"label": "No"}]}]


def streams(gateway: Gateway) -> int:
    """Open streams of both kinds: answerers' and ``/mcp``'s."""
    return gateway.subscribers + gateway.mcp_streams


@contextlib.asynccontextmanager
async def get_stream(client: httpx.AsyncClient) -> AsyncIterator[httpx.Response]:
    async with client.stream("GET", "/mcp", headers=STREAM) as response:
        yield response


async def test_get_mcp_streams_count_against_the_limit_and_give_their_place_back(make_server):
    server = make_server(max_subscribers=2)
    gateway = server.gateway
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        async with get_stream(client) as first, client.stream("GET", "/event") as events:
            assert first.status_code == 200
            assert first.headers["content-type"].startswith("text/event-stream")
            assert events.status_code == 200
            await until(lambda: streams(gateway) == 2, what="both streams counted")

            refused = await client.get("/mcp", headers=STREAM)
            assert refused.status_code == 429
            assert refused.headers["retry-after"] == "1"
            body = refused.json()
            assert body["jsonrpc"] == "2.0"
            assert body["id"] is None
            assert "GATEWAY_MAX_SUBSCRIBERS" in body["error"]["message"]
            assert (await client.get("/event")).status_code == 429
            # A POST that may become a stream is refused as well, and asks nothing.
            refused_call = await client.post("/mcp", json=PING, headers=MCP_ACCEPT)
            assert refused_call.status_code == 429
            assert refused_call.json()["error"]["code"] == -32000
            # One that cannot (the client accepts no stream) is not a stream: served as ever.
            not_a_stream = await client.get("/mcp", headers={"Accept": "application/json"})
            assert not_a_stream.status_code == 406

        await until(lambda: streams(gateway) == 0, what="both places given back")
        async with get_stream(client) as again:
            assert again.status_code == 200
            await until(lambda: streams(gateway) == 1, what="the new stream counted")
    await until(lambda: streams(gateway) == 0, what="its place given back")


async def call_with_the_place(mcp: Client, gateway: Gateway) -> asyncio.Task:
    """The ``question`` tool called once its POST holds the one place. After ``initialized`` the client
    also sends a ``GET /mcp`` of its own (answered at once), which holds the place while it is served:
    a call sent meanwhile is refused (429), and is sent again."""
    for _ in range(20):
        call = asyncio.create_task(mcp.call_tool("question", {"questions": QUESTION}))
        await until(
            lambda call=call: call.done() or gateway.mcp_streams == 1, what="the call holds the place"
        )
        if not call.done():
            return call
        with contextlib.suppress(MCPError):
            call.result()
            raise AssertionError("the call returned before it was answered")
        await until(lambda: streams(gateway) == 0, what="the client's own GET answered")
    raise AssertionError("the call never held the place")


async def test_a_tool_call_streaming_its_wait_holds_a_place_until_it_returns(make_server):
    server = make_server(max_subscribers=1)
    gateway = server.gateway
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        async with Client(f"{server.url}/mcp") as mcp:
            # The client posts notifications/initialized without waiting for it: that POST, which may be
            # answered with a stream as far as its headers say, holds the one place until it is answered.
            await until(lambda: streams(gateway) == 0, what="the initialize exchange's posts answered")
            call = await call_with_the_place(mcp, gateway)
            [request] = await pending(client)
            assert streams(gateway) == 1
            assert (await client.get("/event")).status_code == 429
            replied = await client.post(f"/question/{request['id']}/reply", json={"answers": [["Yes"]]})
            assert replied.status_code == 200
            result = await call
            assert result.structured_content == {"action": "accept", "answers": [["Yes"]]}
            await until(lambda: streams(gateway) == 0, what="the call's place given back")
        # The MCP client gone (it may open a stream of its own again, which would take the one place),
        # the place is an event stream's.
        await until(lambda: streams(gateway) == 0, what="the client's streams ended")
        async with client.stream("GET", "/event") as events:
            assert events.status_code == 200


async def test_a_get_mcp_stream_ends_cleanly_after_its_lifetime(make_server, caplog):
    caplog.set_level(logging.INFO)
    server = make_server(mcp_get_stream_lifetime=0.5)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client, get_stream(client) as stream:
        assert stream.status_code == 200
        async with asyncio.timeout(30):
            body = b"".join([chunk async for chunk in stream.aiter_bytes()])  # ends: no error
        assert b"data:" not in body  # nothing was ever sent on it
    await until(lambda: streams(server.gateway) == 0, what="its place given back")
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
