"""The Python client (elicitation_gateway/client.py) against a running gateway: results, options,
reconnects through a proxy that cuts long requests, withdrawal when the caller gives up, clear errors."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import mcp.types as types
import pytest

from elicitation_gateway.client import (
    ElicitationLost,
    GatewayClient,
    GatewayRefused,
    GatewayResult,
    GatewayUnavailable,
)
from tests.conftest import TEST_DIRECTORY
from tests.helpers import form, pending, read_events

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "color": {"type": "string", "title": "Color", "enum": ["red", "green"]},
        "count": {"type": "integer", "title": "Count", "minimum": 1, "maximum": 9},
        "urgent": {"type": "boolean", "title": "Urgent"},
    },
    "required": ["color", "count"],
}


async def answer(client: httpx.AsyncClient, answers: list[list[str]]) -> dict[str, Any]:
    """Reply to the one pending question, as a person would; return the request."""
    [request] = await pending(client)
    response = await client.post(f"/question/{request['id']}/reply", json={"answers": answers})
    assert response.status_code == 200, response.text
    return request


async def test_elicit_returns_typed_content_as_an_elicit_result(server, client):
    params = types.ElicitRequestFormParams(message="Paint job", requested_schema=SCHEMA)
    async with GatewayClient(server.url) as gateway:
        tool = asyncio.create_task(gateway.elicit(params))
        await answer(client, [["green"], ["3"], ["Yes"]])
        result = await tool
    assert isinstance(result, types.ElicitResult)
    assert result.action == "accept"
    assert result.content == {"color": "green", "count": 3, "urgent": True}


async def test_a_plain_dict_and_the_question_options_reach_the_question(server, client):
    async with GatewayClient(server.url, directory=TEST_DIRECTORY) as gateway:
        tool = asyncio.create_task(
            gateway.elicit(
                form(SCHEMA, "Paint job"),
                session_id="ses_0000000000001ClientTest01",
                message_id="msg_1",
                call_id="call_1",
                timeout=30,
            )
        )
        request = await answer(client, [["red"], ["1"], []])
        result = await tool
    assert request["sessionID"] == "ses_0000000000001ClientTest01"
    assert request["tool"] == {"messageID": "msg_1", "callID": "call_1"}
    record = record_of(server, request["id"])
    assert record.directory == TEST_DIRECTORY
    assert record.expires_at - record.created_at == pytest.approx(30)
    assert result == GatewayResult(action="accept", content={"color": "red", "count": 1})


def record_of(server, request_id: str):
    """The gateway's record of a finished request (read from its store)."""
    future = asyncio.run_coroutine_threadsafe(server.gateway.store.get(request_id), server._loop)
    return future.result(5)


@pytest.mark.parametrize(
    ("body", "action"), [(None, "cancel"), ({"action": "decline"}, "decline")], ids=["reject", "decline"]
)
async def test_decline_and_cancel_carry_no_content(server, client, body, action):
    async with GatewayClient(server.url) as gateway:
        tool = asyncio.create_task(gateway.elicit(form(SCHEMA)))
        [request] = await pending(client)
        rejected = await client.post(f"/question/{request['id']}/reject", json=body)
        assert rejected.status_code == 200
        result = await tool
    assert result == GatewayResult(action=action)
    assert result.content is None


async def test_a_question_that_times_out_gives_cancel(server):
    async with GatewayClient(server.url, poll_wait=0.2) as gateway:
        result = await gateway.elicit(form(SCHEMA), timeout=0.3)
    assert result.action == "cancel"


async def test_on_timeout_default_gives_the_schemas_defaults(server):
    """``on_timeout="default"``, per call or as the client's default: accept with the defaults."""
    with_defaults = {
        "type": "object",
        "properties": {"color": {"type": "string", "enum": ["red", "green"], "default": "red"}},
        "required": ["color"],
    }
    async with GatewayClient(server.url, poll_wait=0.2) as gateway:
        result = await gateway.elicit(form(with_defaults), timeout=0.3, on_timeout="default")
    assert result == GatewayResult(action="accept", content={"color": "red"})
    async with GatewayClient(server.url, poll_wait=0.2, on_timeout="default") as gateway:
        assert (await gateway.elicit(form(with_defaults), timeout=0.3)).action == "accept"
        with pytest.raises(GatewayRefused) as refused:  # count has no default: refused, nothing asked
            await gateway.elicit(form(SCHEMA), timeout=0.3)
    assert refused.value.code == "invalid_timeout_choice"


async def test_the_default_timeout_of_the_client_applies(server, client):
    async with GatewayClient(server.url, timeout=42) as gateway:
        request_id = await gateway.create(form(SCHEMA))
    record = record_of(server, request_id)
    assert record.expires_at - record.created_at == pytest.approx(42)


async def test_long_polls_are_repeated_until_the_answer_comes(server, client):
    """With waits much shorter than the person takes, the client polls again and again."""
    polls: asyncio.Queue[str] = asyncio.Queue()

    async def seen(request: httpx.Request) -> None:
        if request.method == "GET":
            polls.put_nowait(request.url.params["wait"])

    async with (
        httpx.AsyncClient(event_hooks={"request": [seen]}) as http,
        GatewayClient(server.url, poll_wait=0.05, http=http) as gateway,
    ):
        tool = asyncio.create_task(gateway.elicit(form(SCHEMA)))
        waits = [await asyncio.wait_for(polls.get(), 10) for _ in range(3)]
        assert waits == ["0.05"] * 3
        assert not tool.done()
        await answer(client, [["green"], ["9"], ["No"]])
        result = await tool
    assert result.content == {"color": "green", "count": 9, "urgent": False}


# ---------------------------------------------------------------------------------------------------
# A proxy that cuts long requests


@dataclass
class CuttingProxy:
    """A TCP proxy that drops every connection ``cut_after`` seconds after it opened, as proxies with
    a short timeout do to long-polls. ``cuts`` gets an item per connection it cut."""

    upstream_port: int
    cut_after: float
    url: str = ""
    cuts: asyncio.Queue[None] = field(default_factory=asyncio.Queue)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()

        pipes = {
            asyncio.create_task(pipe(reader, upstream_writer)),
            asyncio.create_task(pipe(upstream_reader, writer)),
        }
        done, _ = await asyncio.wait(pipes, timeout=self.cut_after, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            self.cuts.put_nowait(None)
        for stream in (writer, upstream_writer):
            stream.transport.abort()
        for task in pipes:
            task.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)


@contextlib.asynccontextmanager
async def cutting_proxy(upstream_url: str, cut_after: float) -> AsyncIterator[CuttingProxy]:
    proxy = CuttingProxy(upstream_port=httpx.URL(upstream_url).port or 80, cut_after=cut_after)
    listener = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    proxy.url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    try:
        yield proxy
    finally:
        listener.close()


async def test_elicit_survives_a_proxy_that_cuts_long_requests(server, client):
    async with (
        cutting_proxy(server.url, cut_after=0.3) as proxy,
        GatewayClient(proxy.url, poll_wait=5) as gateway,
    ):
        tool = asyncio.create_task(gateway.elicit(form(SCHEMA)))
        for _ in range(2):  # two waits were cut; the client came back each time
            await asyncio.wait_for(proxy.cuts.get(), 10)
        assert not tool.done()
        await answer(client, [["red"], ["2"], ["No"]])
        result = await tool
    assert result.content == {"color": "red", "count": 2, "urgent": False}


# ---------------------------------------------------------------------------------------------------
# Giving up, and errors


async def test_a_cancelled_elicit_withdraws_its_question(server, client):
    async with read_events(client) as events, GatewayClient(server.url) as gateway:
        tool = asyncio.create_task(gateway.elicit(form(SCHEMA)))
        asked = await events.next("question.asked")
        tool.cancel()
        rejected = await events.next("question.rejected")
        assert rejected.properties["requestID"] == asked.properties["id"]
    status = await client.get(f"/elicitations/{asked.properties['id']}")
    assert status.json() == {
        "id": asked.properties["id"],
        "status": "cancelled",
        "result": {"action": "cancel"},
    }


async def test_an_invalid_schema_is_refused_with_the_gateways_message(server, client):
    bad = form({"type": "object", "properties": {}, "required": ["ok"]})
    async with GatewayClient(server.url) as gateway:
        with pytest.raises(GatewayRefused) as refused:
            await gateway.elicit(bad)
    assert refused.value.status == 400
    assert refused.value.code == "invalid_schema"
    assert "requestedSchema.required names 'ok'" in str(refused.value)
    assert (await client.get("/question")).json() == []


async def test_an_unreachable_gateway_is_reported(make_server):
    server = make_server()
    server.stop()
    async with GatewayClient(server.url, reconnect_for=0.3) as gateway:
        with pytest.raises(GatewayUnavailable, match="cannot reach the gateway"):
            await gateway.elicit(form(SCHEMA))


async def test_an_unknown_elicitation_is_lost(server):
    async with GatewayClient(server.url) as gateway:
        with pytest.raises(ElicitationLost, match="que_000000000000unknown"):
            await gateway.result("que_000000000000unknown")


async def test_url_mode_is_refused_before_anything_is_sent(server, client):
    params = types.ElicitRequestURLParams(message="Sign in", url="https://example.com", elicitation_id="e1")
    async with GatewayClient(server.url) as gateway:
        for bad in (params, {"mode": "url", "message": "Sign in", "url": "https://example.com"}):
            with pytest.raises(ValueError, match="URL mode"):
                await gateway.elicit(bad)
        with pytest.raises(ValueError, match="not MCP form params"):
            await gateway.elicit({"message": "no schema"})
    assert (await client.get("/question")).json() == []


async def test_the_tool_token_is_sent_as_a_bearer_token(make_server):
    server = make_server(tool_token="s3cret")
    async with GatewayClient(server.url, token="wrong") as gateway:
        with pytest.raises(GatewayRefused) as refused:
            await gateway.create(form(SCHEMA))
    assert refused.value.status == 401
    async with GatewayClient(server.url, token="s3cret") as gateway:
        assert (await gateway.create(form(SCHEMA))).startswith("que_")
