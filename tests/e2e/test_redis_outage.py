"""Redis stopped and started again under tools that wait: they keep waiting, never a 503, and get the
person's answer once Redis is back; a question whose time passes meanwhile, or whose tool goes away,
is finished as soon as Redis answers, before anyone can answer it. A real ``redis-server`` with an
append-only file (so a restart keeps the questions), a real gateway, real HTTP and MCP clients."""

import asyncio
import signal
from typing import Any

import httpx
import pytest
from mcp.client import Client

from elicitation_gateway.gateway import STORE_RETRY, AskOptions
from tests.helpers import COLOR_ACCEPTED, COLOR_SCHEMA, ask, form, pending, read_events, until

pytest_plugins = ["tests.redis_server"]

GREEN = {"answers": [["green"], ["3"]]}
NOTE = [{"question": "Anything else?", "header": "Notes", "options": []}]


async def ready(client: httpx.AsyncClient, expected: bool = True) -> bool:
    return ((await client.get("/readyz")).status_code == 200) is expected


async def status(client: httpx.AsyncClient, request_id: str) -> str:
    return (await client.get(f"/elicitations/{request_id}")).json().get("status", "")


async def outage(redis: Any, client: httpx.AsyncClient) -> None:
    """Stop Redis and wait until the gateway says so."""
    await asyncio.to_thread(redis.stop)
    await until(lambda: ready(client, expected=False), what="the gateway notices Redis is gone")


async def back(redis: Any, client: httpx.AsyncClient) -> None:
    await asyncio.to_thread(redis.start)
    await until(lambda: ready(client), timeout=20, what="the gateway is ready again")


async def test_waiting_tools_keep_waiting_through_an_outage_and_get_the_answer(
    make_server, make_redis_server
):
    redis = make_redis_server(persistent=True).start()
    server = make_server(store=redis.url)
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as client,
        Client(f"{server.url}/mcp") as mcp,
    ):
        elicit = ask(client, form(COLOR_SCHEMA))
        agent = asyncio.create_task(mcp.call_tool("question", {"questions": NOTE}))
        asked = {request["questions"][0]["header"]: request["id"] for request in await pending(client, 2)}

        await outage(redis, client)
        readiness = (await client.get("/readyz")).json()
        assert readiness["store"] == "unavailable"
        assert "Redis" in readiness["reason"]
        await asyncio.sleep(3 * STORE_RETRY)  # they try again meanwhile (before, they got 503 at once)
        assert not elicit.done()
        assert not agent.done()

        await back(redis, client)
        assert (await client.post(f"/question/{asked['Color']}/reply", json=GREEN)).status_code == 200
        reply = await client.post(f"/question/{asked['Notes']}/reply", json={"answers": [["all good"]]})
        assert reply.status_code == 200
        answered = await elicit
        assert (answered.status_code, answered.json()) == (200, COLOR_ACCEPTED)
        assert (await agent).structured_content == {"action": "accept", "answers": [["all good"]]}


async def test_a_wait_whose_time_passes_in_an_outage_is_cancel_and_its_question_expires(
    make_server, make_redis_server
):
    redis = make_redis_server(persistent=True).start()
    server = make_server(store=redis.url)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        async with read_events(client) as events:
            elicit = ask(client, form(COLOR_SCHEMA), timeout=2)
            asked = await events.next("question.asked")
            request_id = asked.properties["id"]
            await outage(redis, client)
        answered = await elicit  # its time passes while Redis is down
        assert (answered.status_code, answered.json()) == (200, {"action": "cancel"})

        await back(redis, client)
        # The owed expiry is made in the background as soon as Redis answers, reply or not.
        await until(lambda: _is(client, request_id, "expired"), what="the owed expiry is made")
        reply = await client.post(f"/question/{request_id}/reply", json=GREEN)
        assert reply.status_code == 404, "an answer nobody would collect"
        async with read_events(client, headers={"Last-Event-ID": asked.id}) as replay:
            rejected = await replay.next("question.rejected")
        assert rejected.properties["requestID"] == request_id
        assert (await client.get("/question")).json() == []


async def test_a_tool_that_goes_away_in_an_outage_has_its_question_withdrawn_once_redis_is_back(
    make_server, make_redis_server
):
    redis = make_redis_server(persistent=True).start()
    server = make_server(store=redis.url)
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as client,
        httpx.AsyncClient(base_url=server.url, timeout=10) as tool,
    ):
        elicit = ask(tool, form(COLOR_SCHEMA))
        [request] = await pending(client)
        await outage(redis, client)
        elicit.cancel()  # the tool gives up: its connection closes
        await until(lambda: request["id"] in server.gateway.owed, what="the withdrawal is owed")

        await back(redis, client)
        await until(lambda: _is(client, request["id"], "cancelled"), what="the owed withdrawal is made")
        assert (await client.post(f"/question/{request['id']}/reply", json=GREEN)).status_code == 404


@pytest.mark.parametrize("answer", ["reply", "reject"])
async def test_an_answer_after_the_expiry_is_refused_and_expires_the_question(make_server, answer):
    """Whatever made its timer late (an outage when it was due, a replica gone), a question past its
    ``expires_at`` takes no answer: its tool has stopped waiting."""
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client, read_events(client) as events:
        request_id = server.run(_asked_late(server, 0.5))  # its timer will not fire
        await events.next("question.asked")
        await asyncio.sleep(0.6)  # past its expires_at
        assert await status(client, request_id) == "pending"
        body = GREEN if answer == "reply" else {}
        response = await client.post(f"/question/{request_id}/{answer}", json=body)
        assert response.status_code == 404
        assert response.json()["_tag"] == "QuestionNotFoundError"
        rejected = await events.next("question.rejected")
        assert rejected.properties["requestID"] == request_id
        assert await status(client, request_id) == "expired"


async def _asked_late(server: Any, timeout: float) -> str:
    """A question whose timer will not fire: asked and its timer dropped in one step of the server's
    loop, so that the timer cannot fire first however late this test runs."""
    record = await server.gateway.ask("Please answer", COLOR_SCHEMA, AskOptions(timeout=timeout))
    server.gateway.expiry.discard(record.id)
    return record.id


async def _is(client: httpx.AsyncClient, request_id: str, expected: str) -> bool:
    return await status(client, request_id) == expected


async def test_a_redis_unreachable_at_start_up_is_one_line_saying_the_gateway_waits_for_it(tmp_path):
    from tests.e2e.test_cli import gateway_process
    from tests.redis_server import RedisServer

    redis = RedisServer(tmp_path / "redis")  # its port chosen, nothing listening there yet
    try:
        with gateway_process("--port", "0", env={"GATEWAY_STORE": redis.url}) as (process, url):
            shown = process.startup_output
            said = [line for line in shown.splitlines() if "Redis" in line]
            assert len(said) == 1, shown
            assert "WARNING" in said[0]
            assert "unreachable at start-up" in said[0]
            assert "/readyz says not ready" in said[0]
            assert "ERROR" not in shown
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                assert (await client.get("/readyz")).status_code == 503
                await asyncio.to_thread(redis.start)
                await until(lambda: ready(client), timeout=20, what="the gateway is ready once Redis is")
    finally:
        await asyncio.to_thread(redis.stop)


async def test_an_ask_refused_while_redis_stalls_is_made_nowhere(make_server, make_redis_server):
    """Redis frozen (SIGSTOP) across an ask: the write's reply never comes, the tool gets 503, and the
    write lands when Redis resumes. The refused ask is undone as soon as Redis answers, whichever
    arrives first: nothing the tool was told failed stays pending, and a question.asked it made is
    followed by its question.rejected."""
    redis = make_redis_server().start()
    assert redis.process is not None
    server = make_server(store=redis.url)
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        async with read_events(client) as events:
            before = (await client.post("/elicitations", json=form(COLOR_SCHEMA, "Before"))).json()["id"]
            marker = (await events.next("question.asked")).id
            await client.delete(f"/elicitations/{before}")

        redis.process.send_signal(signal.SIGSTOP)
        try:
            refused = await client.post("/elicitations", json=form(COLOR_SCHEMA, "In the stall"))
        finally:
            redis.process.send_signal(signal.SIGCONT)
        assert refused.status_code == 503
        assert refused.json()["error"] == "store_unavailable"

        await until(lambda: not server.gateway.owed, timeout=30, what="the refused ask is undone")
        await until(lambda: ready(client), timeout=30, what="the gateway is ready again")
        retried = await client.post("/elicitations", json=form(COLOR_SCHEMA, "In the stall"))
        assert retried.status_code == 201
        assert [request["id"] for request in (await client.get("/question")).json()] == [retried.json()["id"]]

        async with read_events(client, headers={"Last-Event-ID": marker}) as replay:
            while (await replay.next("question.asked")).properties["id"] != retried.json()["id"]:
                pass
        asked = {frame.properties["id"] for frame in replay.seen if frame.type == "question.asked"}
        ended = {frame.properties["requestID"] for frame in replay.seen if frame.type == "question.rejected"}
        assert asked - ended == {retried.json()["id"]}, "a question.asked with no end"


async def test_a_request_with_a_key_refused_while_redis_stalls_can_be_sent_again_at_once(
    make_server, make_redis_server
):
    """The key's hold, written in the stall, lands when Redis resumes: the retry with the same key is
    not kept waiting for that hold's lease (three liveness periods) by a request that got 503."""
    redis = make_redis_server().start()
    assert redis.process is not None
    server = make_server(store=redis.url, replica_liveness=60)
    key = {"Idempotency-Key": "deploy-4.2-stalled"}
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        # A request with another key first: the connection the stalled write goes on is open and
        # Redis knows the script, so the write is sent, and runs once Redis resumes.
        async with read_events(client) as events:
            before = asyncio.create_task(
                client.post("/elicit", json=form(COLOR_SCHEMA), headers={"Idempotency-Key": "before"})
            )
            asked = await events.next("question.asked")
            await client.post(f"/question/{asked.properties['id']}/reply", json=GREEN)
            assert (await before).status_code == 200
        redis.process.send_signal(signal.SIGSTOP)
        try:
            refused = await client.post("/elicit", json=form(COLOR_SCHEMA), headers=key)
        finally:
            redis.process.send_signal(signal.SIGCONT)
        assert refused.status_code == 503
        await until(lambda: ready(client), timeout=30, what="the gateway is ready again")

        async with read_events(client) as events:
            retried = asyncio.create_task(client.post("/elicit", json=form(COLOR_SCHEMA), headers=key))
            asked = await events.next("question.asked", timeout=20)
            reply = await client.post(f"/question/{asked.properties['id']}/reply", json=GREEN)
            assert reply.status_code == 200
            assert (await retried).json() == COLOR_ACCEPTED
