"""The HTTP behaviour that must not depend on where questions are kept: each test runs against a
gateway on the in-memory store, on a SQLite file and on a real Redis.

The other HTTP test files pin every detail on the default (in-memory) store; this file repeats the
behaviours a backend takes part in: asking, answering, long-polls, timeouts, withdrawal, retention,
replay, re-announcement, filters, health, and what a shutdown finishes.
"""

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import RunningServer
from tests.helpers import COLOR_ACCEPTED, COLOR_SCHEMA, ask, form, pending, read_events, until, waited_on

pytest_plugins = ["tests.redis_server"]


@pytest.fixture(params=["memory", "redis", "sqlite"])
def start(request, make_server) -> Callable[..., RunningServer]:
    """``start(**settings)``: a gateway on the backend under test. With SQLite, the gateways a test starts
    one after the other use the same file, as a restarted one does."""
    backend = {}
    if request.param == "redis":
        backend = {"store": request.getfixturevalue("redis_url")}
    elif request.param == "sqlite":
        backend = {"store": f"sqlite:///{request.getfixturevalue('tmp_path')}/gateway.db"}
    return lambda **settings: make_server(**backend, **settings)


def connect(server: RunningServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=10)


async def create(client: httpx.AsyncClient, **query: Any) -> str:
    response = await client.post("/elicitations", json=form(COLOR_SCHEMA), params=query)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def answer(client: httpx.AsyncClient, request_id: str) -> httpx.Response:
    return await client.post(f"/question/{request_id}/reply", json={"answers": [["green"], ["3"]]})


async def forgotten(client: httpx.AsyncClient, request_id: str) -> bool:
    """Whether ``GET /elicitations/{id}`` turns 404 (failing after the helpers' safety net)."""

    async def gone() -> bool:
        return (await client.get(f"/elicitations/{request_id}")).status_code == 404

    await until(gone, what=f"{request_id} forgotten")
    return True


async def test_elicit_is_answered_with_typed_content(start):
    async with connect(start()) as client, read_events(client) as events:
        tool = ask(client, form(COLOR_SCHEMA, "Paint job"))
        asked = await events.next("question.asked")
        assert asked.id == asked.data["id"]
        assert (await answer(client, asked.properties["id"])).json() is True
        replied = await events.next("question.replied")
        assert replied.properties["answers"] == [["green"], ["3"]]
        assert (await tool).json() == COLOR_ACCEPTED


async def test_asynchronous_form_reports_pending_then_the_result(start):
    async with connect(start()) as client:
        request_id = await create(client)
        assert (await client.get(f"/elicitations/{request_id}")).json() == {
            "id": request_id,
            "status": "pending",
        }
        assert [r["id"] for r in await pending(client)] == [request_id]
        assert (await answer(client, request_id)).status_code == 200
        body = (await client.get(f"/elicitations/{request_id}")).json()
        assert body == {"id": request_id, "status": "answered", "result": COLOR_ACCEPTED}
        assert (await client.get("/question")).json() == []
        assert (await client.get("/elicitations/que_000000000000unknown000000")).status_code == 404


async def test_long_poll_returns_once_answered(start):
    server = start()
    async with connect(server) as client:
        request_id = await create(client)
        polling = asyncio.create_task(client.get(f"/elicitations/{request_id}", params={"wait": 30}))
        await until(lambda: waited_on(server.gateway.store, request_id), what="the poll waits")
        assert not polling.done()
        await answer(client, request_id)
        body = (await polling).json()
    assert body["status"] == "answered"
    assert body["result"] == COLOR_ACCEPTED


async def test_reject_decline_and_a_second_answer(start):
    async with connect(start()) as client:
        dismissed, declined = await create(client), await create(client)
        assert (await client.post(f"/question/{dismissed}/reject")).json() is True
        decline = await client.post(f"/question/{declined}/reject", json={"action": "decline"})
        assert decline.json() is True
        assert (await client.get(f"/elicitations/{dismissed}")).json()["result"] == {"action": "cancel"}
        assert (await client.get(f"/elicitations/{declined}")).json()["result"] == {"action": "decline"}
        late = await answer(client, dismissed)
        assert late.status_code == 404
        assert late.json()["_tag"] == "QuestionNotFoundError"


async def test_answers_that_do_not_fit_leave_the_question_pending(start):
    async with connect(start()) as client:
        request_id = await create(client)
        wrong = await client.post(f"/question/{request_id}/reply", json={"answers": [["green"], ["lots"]]})
        assert wrong.status_code == 400
        assert [issue["header"] for issue in wrong.json()["data"]["issues"]] == ["Count"]
        assert (await client.get(f"/elicitations/{request_id}")).json()["status"] == "pending"
        assert (await answer(client, request_id)).status_code == 200


async def test_timeout_expires_the_question_with_one_rejected_event(start):
    async with connect(start()) as client, read_events(client) as events:
        request_id = await create(client, timeout=0.3)
        await events.next("question.asked")
        rejected = await events.next("question.rejected")
        assert rejected.properties["requestID"] == request_id
        await events.no_frame(within=0.3, type="question.rejected")
        body = (await client.get(f"/elicitations/{request_id}")).json()
    assert (body["status"], body["result"]) == ("expired", {"action": "cancel"})


async def test_withdrawal_and_retention(start):
    async with connect(start(result_ttl=0.5)) as client, read_events(client) as events:
        request_id = await create(client)
        withdrawn = await client.delete(f"/elicitations/{request_id}")
        assert withdrawn.json() == {"id": request_id, "status": "cancelled", "result": {"action": "cancel"}}
        assert (await events.next("question.rejected")).properties["requestID"] == request_id
        again = await client.delete(f"/elicitations/{request_id}")
        assert (again.status_code, again.json()["status"]) == (409, "cancelled")
        assert await forgotten(client, request_id)


async def test_a_tool_that_disconnects_withdraws_its_question(start):
    async with connect(start()) as client, read_events(client) as events:
        tool = ask(client, form(COLOR_SCHEMA))
        asked = await events.next("question.asked")
        tool.cancel()
        rejected = await events.next("question.rejected")
        assert rejected.properties["requestID"] == asked.properties["id"]
        status = (await client.get(f"/elicitations/{asked.properties['id']}")).json()["status"]
    assert status == "cancelled"


async def test_last_event_id_replays_what_was_missed(start):
    async with connect(start()) as client:
        async with read_events(client) as events:
            first = await create(client)
            seen = await events.next("question.asked")
        second = await create(client)
        await answer(client, first)
        async with read_events(client, headers={"Last-Event-ID": seen.id}) as resumed:
            missed = [await resumed.next() for _ in range(2)]
            await resumed.no_frame(within=0.2)
    assert [(f.type, f.id != "") for f in missed] == [("question.asked", True), ("question.replied", True)]
    assert missed[0].properties["id"] == second
    assert missed[1].properties["requestID"] == first
    assert seen.id < missed[0].id < missed[1].id


async def test_reconnect_without_or_beyond_the_history_reannounces_pending_questions(start):
    async with connect(start(history_size=2)) as client:
        async with read_events(client) as events:
            ids = [await create(client) for _ in range(3)]
            oldest = (await events.next("question.asked")).id
        await answer(client, ids[0])
        for headers in ({}, {"Last-Event-ID": oldest}, {"Last-Event-ID": "evt_000000000000unknown0000000"}):
            async with read_events(client, headers=headers) as events:
                again = [await events.next() for _ in range(2)]
                await events.no_frame(within=0.2)
            assert [(f.type, f.id) for f in again] == [("question.asked", "")] * 2
            assert [f.properties["id"] for f in again] == ids[1:]


async def test_directory_filter_and_global_wrapping(start):
    async with (
        connect(start()) as client,
        read_events(client, params={"directory": "/a"}) as only_a,
        read_events(client, "/global/event") as everything,
    ):
        in_b = await create(client, directory="/b")
        in_a = await create(client, directory="/a/")
        wrapped = [await everything.next("question.asked") for _ in range(2)]
        filtered = await only_a.next("question.asked")
        await only_a.no_frame(within=0.2, type="question.asked")
    assert [(f.data["directory"], f.properties["id"]) for f in wrapped] == [("/b", in_b), ("/a", in_a)]
    assert filtered.properties["id"] == in_a


async def test_health_reports_the_store(start):
    async with connect(start()) as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["store"] == "ok"


async def test_shutdown_answers_waiting_tools_and_keeps_only_shared_questions(start):
    """Stopping gives a tool waiting on ``POST /elicit`` ``cancel``. A question asked without waiting is
    cancelled with the in-memory store, which ends with the process, and stays pending in Redis, where
    other replicas carry on with it."""
    server = start()
    async with connect(server) as client, read_events(client) as events:
        tool = ask(client, form(COLOR_SCHEMA))
        waiting = (await events.next("question.asked")).properties["id"]
        polled = await create(client)
        await events.next("question.asked")
        await asyncio.to_thread(server.stop)
        assert (await tool).json() == {"action": "cancel"}
        async with asyncio.timeout(5):
            await events.closed.wait()  # the stream ends with the service
        rejected = [
            frame.properties["requestID"] for frame in events.seen if frame.type == "question.rejected"
        ]

    shared = server.settings.store != "memory"
    if not shared:
        assert sorted(rejected) == sorted([waiting, polled])
    else:
        assert rejected == [waiting]
        async with connect(start()) as client:
            assert [r["id"] for r in (await client.get("/question")).json()] == [polled]
            assert (await client.get(f"/elicitations/{waiting}")).json()["status"] == "cancelled"


async def test_streams_opening_at_once_do_not_overshoot_the_subscriber_limit(start):
    server = start(max_subscribers=3)
    attempts = 12
    statuses: list[int] = []
    all_answered = asyncio.Event()

    async def open_stream(client: httpx.AsyncClient) -> None:
        async with client.stream("GET", "/event") as response:
            statuses.append(response.status_code)
            if len(statuses) == attempts:
                all_answered.set()
            if response.status_code == 200:
                await all_answered.wait()  # held open until every attempt has its answer

    async with httpx.AsyncClient(base_url=server.url, limits=httpx.Limits(max_connections=None)) as client:
        async with asyncio.timeout(30):
            await asyncio.gather(*(open_stream(client) for _ in range(attempts)))
    assert sorted(statuses) == [200] * 3 + [429] * (attempts - 3)
    await until(lambda: server.gateway.subscribers == 0, what="every slot given back")
