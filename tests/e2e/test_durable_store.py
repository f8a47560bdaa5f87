"""A gateway on a SQLite file, killed with SIGKILL and started again on the same file: real processes."""

import asyncio
import time

import httpx

from elicitation_gateway.client import GatewayClient
from tests.e2e.test_cli import free_port, gateway_process
from tests.helpers import ask, form, read_events, text_properties

QUESTION = form(text_properties(1))


async def created(client: httpx.AsyncClient, **query: str) -> str:
    response = await client.post("/elicitations", json=QUESTION, params=query)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def listed(client: httpx.AsyncClient) -> list[str]:
    return [question["id"] for question in (await client.get("/question")).json()]


async def test_what_a_killed_gateway_kept_is_there_after_a_restart(tmp_path):
    store = f"sqlite:///{tmp_path / 'gateway.db'}"
    with gateway_process("--port", "0", "--store", store) as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            async with read_events(client) as watching:
                answered = await created(client)
                first = await watching.next("question.asked")
                waiting = await created(client)
                short = await created(client, timeout="1.5")
                asked_at = time.monotonic()
                blocking = ask(client, QUESTION)  # POST /elicit: its connection dies with the process
                for _ in range(3):
                    blocking_id = (await watching.next("question.asked")).properties["id"]
                reply = await client.post(f"/question/{answered}/reply", json={"answers": [["blue"]]})
                assert reply.status_code == 200
                await watching.next("question.replied")
                process.kill()  # SIGKILL: no shutdown, nothing finished on the way out
                await asyncio.to_thread(process.wait, 10)
            assert isinstance(blocking.exception(), httpx.TransportError)

    await asyncio.sleep(max(0, asked_at + 1.6 - time.monotonic()))  # ``short`` times out while down
    with gateway_process("--port", "0", "--store", store) as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            # Withdrawn at start (its tool is gone), expired at once (its time passed): one left.
            assert await listed(client) == [waiting]
            assert (await client.get(f"/elicitations/{blocking_id}")).json()["status"] == "cancelled"
            assert (await client.get(f"/elicitations/{short}")).json()["status"] == "expired"
            result = (await client.get(f"/elicitations/{answered}")).json()
            assert result == {
                "id": answered,
                "status": "answered",
                "result": {"action": "accept", "content": {"k0": "blue"}},
            }

            async with read_events(client, skip_connected=False) as fresh:
                await fresh.next("server.connected")
                announced = await fresh.next("question.asked")
                assert announced.properties["id"] == waiting
                await fresh.no_frame(type="question.asked")

            async with read_events(client, headers={"Last-Event-ID": first.id}) as replaying:
                replayed = [await replaying.next() for _ in range(6)]
            assert [(f.type, f.properties.get("id") or f.properties["requestID"]) for f in replayed] == [
                ("question.asked", waiting),
                ("question.asked", short),
                ("question.asked", blocking_id),
                ("question.replied", answered),
                ("question.rejected", blocking_id),
                ("question.rejected", short),
            ]
            assert [f.id for f in replayed] == sorted(f.id for f in replayed)

            polling = asyncio.create_task(client.get(f"/elicitations/{waiting}", params={"wait": 10}))
            await asyncio.sleep(0.2)
            assert not polling.done()
            reply = await client.post(f"/question/{waiting}/reply", json={"answers": [["green"]]})
            assert reply.status_code == 200
            assert (await polling).json()["result"] == {"action": "accept", "content": {"k0": "green"}}


async def test_the_python_client_gets_its_answer_across_a_kill_and_restart(tmp_path):
    store = f"sqlite:///{tmp_path / 'gateway.db'}"
    port = free_port()
    async with GatewayClient(f"http://127.0.0.1:{port}", reconnect_for=30, poll_wait=2) as tool:
        with gateway_process("--port", str(port), "--store", store) as (process, url):
            async with httpx.AsyncClient(base_url=url, timeout=10) as client, read_events(client) as watching:
                eliciting = asyncio.create_task(tool.elicit(QUESTION))
                request_id = (await watching.next("question.asked")).properties["id"]
            process.kill()
            await asyncio.to_thread(process.wait, 10)
        await asyncio.sleep(0.5)  # the client is reconnecting meanwhile
        assert not eliciting.done()
        with gateway_process("--port", str(port), "--store", store) as (process, url):
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                assert await listed(client) == [request_id]
                reply = await client.post(f"/question/{request_id}/reply", json={"answers": [["yes"]]})
                assert reply.status_code == 200
                result = await asyncio.wait_for(eliciting, 15)
    assert (result.action, result.content) == ("accept", {"k0": "yes"})
