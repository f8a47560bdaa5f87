"""A person may take an hour: the agent's call hears how the wait stands, and a call whose connection
drops comes back to its question instead of asking again. With the real ``mcp`` client in both protocol
eras, and ``POST /elicit`` with an ``Idempotency-Key``."""

import asyncio
import contextlib
import json
import logging
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from elicitation_gateway.gateway import AskOptions, Caller
from tests.helpers import COLOR_ACCEPTED, COLOR_SCHEMA, form, pending, read_events, until

QUESTION = [
    {
        "question": "Deploy release 4.2 now?",
        "header": "Deploy",
        "options": [{"label": "Yes"}, {"label": "No"}],
    }
]
MODES = ["auto", "legacy"]
"""``auto`` negotiates 2026-07-28 against the gateway, ``legacy`` 2025-11-25."""


async def call(url: str, mode: str, key: str | None = None, **options: Any) -> Any:
    """The ``question`` call from a client of its own; with ``key``, it sends that ``Idempotency-Key``."""
    async with Client(mcp_server(url, key), mode=mode) as mcp:
        return await mcp.call_tool("question", {"questions": QUESTION}, **options)


def mcp_server(url: str, key: str | None = None) -> Any:
    """``/mcp`` as a client configured with ``Idempotency-Key: key`` reaches it."""
    if key is None:
        return f"{url}/mcp"
    http = httpx2.AsyncClient(headers={"Idempotency-Key": key}, timeout=httpx2.Timeout(30.0, read=None))
    return streamable_http_client(f"{url}/mcp", http_client=http)


async def drop(task: asyncio.Task[Any], server: Any = None, request_id: str = "") -> None:
    """Close the call's connection: cancelling the client's task ends its ``Client``, whose HTTP
    connection goes with it, in either era. With ``server``, wait until the gateway has noticed and kept
    ``request_id`` for the caller: a client comes back after it noticed the drop, which takes longer."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    if server is not None:
        await until(
            lambda: request_id in server.gateway.reattach.orphaned, what="the question kept for its caller"
        )


async def attached(caplog: pytest.LogCaptureFixture, request_id: str) -> None:
    """Until the gateway says a call came back for ``request_id`` (its log line)."""
    await until(
        lambda: any(
            record.getMessage().startswith(f"elicitation {request_id} attached to")
            for record in caplog.records
        ),
        what="the call attached to its question",
    )


# ---------------------------------------------------------------------------------------------------
# Progress


@pytest.mark.parametrize("mode", MODES)
async def test_a_waiting_call_hears_how_the_wait_stands_every_interval(make_server, mode):
    server = make_server(mcp_progress_interval=0.2, timeout=600)
    heard: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        heard.append((value, total, message))

    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client):
        asked = asyncio.create_task(call(server.url, mode, progress_callback=progress))
        [request] = await pending(client)
        await until(lambda: len(heard) >= 5, what="five progress notifications")
        await client.post(f"/question/{request['id']}/reply", json={"answers": [["Yes"]]})
        result = await asked
    assert result.structured_content == {"action": "accept", "answers": [["Yes"]]}
    values = [value for value, _, _ in heard]
    assert values == sorted(values)
    assert len(set(values)) == len(values)  # each notification advances, as the spec asks
    assert all(total is not None and 590 <= total <= 601 for _, total, _ in heard)
    assert heard[0][2] is not None
    assert heard[0][2].startswith("waiting for an answer, 1 answerer connected, expires in 10 min")


async def test_a_call_without_a_progress_token_is_sent_no_progress(make_server):
    server = make_server(mcp_progress_interval=0.1)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "question", "arguments": {"questions": QUESTION}},
    }
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:

        async def answer_later() -> None:
            [request] = await pending(client)
            await asyncio.sleep(0.6)  # six intervals
            await client.post(f"/question/{request['id']}/reply", json={"answers": [["No"]]})

        answering = asyncio.create_task(answer_later())
        response = await client.post("/mcp", json=body, headers=headers)
        await answering
    messages = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    assert [message.get("method") for message in messages] == [None]
    assert messages[0]["result"]["structuredContent"] == {"action": "accept", "answers": [["No"]]}


KEEP_ALIVE = 15.0
"""How often a waiting call's event stream carries an SSE comment (``: ping``), progress or none: the
``sse-starlette`` default of the ``mcp`` server transport, which docs/mcp.md promises clients."""


async def test_a_call_without_a_progress_token_is_never_silent_for_longer_than_the_keep_alive(make_server):
    """A client whose HTTP read timeout is a little over the keep-alive survives a wait of several
    timeouts without progress, in both eras: the stream's comments restart the read timeout."""
    server = make_server()
    read_timeout = KEEP_ALIVE + 3
    started = asyncio.get_running_loop().time()

    async def call_quietly(mode: str) -> Any:
        http = httpx2.AsyncClient(timeout=httpx2.Timeout(10.0, read=read_timeout))
        async with (
            http,
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http), mode=mode) as mcp,
        ):
            return await mcp.call_tool("question", {"questions": QUESTION})

    async with httpx.AsyncClient(base_url=server.url) as client:
        calls = [asyncio.create_task(call_quietly(mode)) for mode in MODES]
        requests = await pending(client, count=len(MODES))
        await asyncio.sleep(read_timeout + 5 - (asyncio.get_running_loop().time() - started))
        assert not any(call.done() for call in calls), [call.result() for call in calls if call.done()]
        for request in requests:
            await client.post(f"/question/{request['id']}/reply", json={"answers": [["Yes"]]})
        results = await asyncio.wait_for(asyncio.gather(*calls), 10)
    assert [result.structured_content for result in results] == [
        {"action": "accept", "answers": [["Yes"]]}
    ] * 2


# ---------------------------------------------------------------------------------------------------
# Re-issued calls


@pytest.mark.parametrize("mode", MODES)
async def test_a_reissued_call_attaches_to_the_question_its_dropped_call_left(make_server, mode, caplog):
    caplog.set_level(logging.INFO, logger="elicitation_gateway")
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        first = asyncio.create_task(call(server.url, mode))
        asked = await events.next("question.asked")
        await drop(first, server, asked.properties["id"])

        again = asyncio.create_task(call(server.url, mode))
        await attached(caplog, asked.properties["id"])
        assert [request["id"] for request in await pending(client)] == [asked.properties["id"]]
        reply = await client.post(f"/question/{asked.properties['id']}/reply", json={"answers": [["No"]]})
        assert reply.status_code == 200
        assert (await again).structured_content == {"action": "accept", "answers": [["No"]]}
        # Kept pending for the caller (never rejected), and asked once: nothing of the kind came before
        # the reply's event.
        shown = [frame.type for frame in await events.through("question.replied")]
        assert "question.rejected" not in shown
        assert "question.asked" not in shown


@pytest.mark.parametrize("mode", MODES)
async def test_an_answer_given_while_the_caller_was_away_is_handed_to_it_once(make_server, mode):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        first = asyncio.create_task(call(server.url, mode, key="agent-a-7f3e"))
        asked = await events.next("question.asked")
        await drop(first, server, asked.properties["id"])
        reply = await client.post(f"/question/{asked.properties['id']}/reply", json={"answers": [["Yes"]]})
        assert reply.status_code == 200  # accepted, never 404: the question waited for its caller

        again = await call(server.url, mode, key="agent-a-7f3e")
        assert again.structured_content == {"action": "accept", "answers": [["Yes"]]}
        await events.no_frame(within=0.1, type="question.asked")

        third = asyncio.create_task(call(server.url, mode, key="agent-a-7f3e"))  # once: this one asks anew
        assert (await events.next("question.asked")).properties["id"] != asked.properties["id"]
        await drop(third)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("first_key", [None, "agent-a-7f3e"])
async def test_an_answer_given_while_the_caller_was_away_never_reaches_another_caller(
    make_server, mode, first_key
):
    """Agent A's call drops and the person answers it; agent B, with the same (no) credentials, makes
    the same call: B's question is asked and answered on its own, and A's answer reaches nobody but A,
    whether A sent a key (B sends none, or another) or not (then nobody can show to be A)."""
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        first = asyncio.create_task(call(server.url, mode, key=first_key))
        asked = await events.next("question.asked")
        await drop(first, server, asked.properties["id"])
        reply = await client.post(f"/question/{asked.properties['id']}/reply", json={"answers": [["Yes"]]})
        assert reply.status_code == 200

        for other_key in (None, "agent-b-91c2"):
            other = asyncio.create_task(call(server.url, mode, key=other_key))
            theirs = await events.next("question.asked")
            assert theirs.properties["id"] != asked.properties["id"]
            reply = await client.post(
                f"/question/{theirs.properties['id']}/reply", json={"answers": [["No"]]}
            )
            assert reply.status_code == 200
            assert (await other).structured_content == {"action": "accept", "answers": [["No"]]}


async def test_a_question_left_pending_reaches_another_caller_only_without_a_key(make_server):
    """A pending question is what anyone who makes the same call sees: a caller without a key attaches
    to one left by a caller without a key (and the person answers it while that call waits), never to
    one left by a caller with a key; a caller with another key never attaches."""
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        keyed = asyncio.create_task(call(server.url, "auto", key="agent-a-7f3e"))
        asked = await events.next("question.asked")
        await drop(keyed, server, asked.properties["id"])
        for other_key in (None, "agent-b-91c2"):
            other = asyncio.create_task(call(server.url, "auto", key=other_key))
            assert (await events.next("question.asked")).properties["id"] != asked.properties["id"]
            await drop(other)


async def test_an_orphan_nobody_comes_back_for_is_withdrawn_at_the_windows_end(make_server):
    server = make_server(reattach_window=0.5)
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        first = asyncio.create_task(call(server.url, "auto"))
        asked = await events.next("question.asked")
        await drop(first)
        rejected = await events.next("question.rejected", timeout=5)
        assert rejected.properties["requestID"] == asked.properties["id"]
        assert (await client.get("/question")).json() == []


async def test_without_a_window_a_dropped_call_withdraws_its_question_at_once(make_server):
    server = make_server(reattach_window=0)
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        first = asyncio.create_task(call(server.url, "auto"))
        asked = await events.next("question.asked")
        await drop(first)
        rejected = await events.next("question.rejected")  # not kept for a window of 300 s
        assert rejected.properties["requestID"] == asked.properties["id"]


async def test_two_identical_calls_both_connected_are_two_questions(make_server):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client:
        calls = [asyncio.create_task(call(server.url, "auto")) for _ in range(2)]
        listed = await pending(client, 2)
        assert len({request["id"] for request in listed}) == 2
        for request, answer in zip(listed, ("Yes", "No"), strict=True):
            await client.post(f"/question/{request['id']}/reply", json={"answers": [[answer]]})
        results = [await task for task in calls]
        assert sorted(result.structured_content["answers"][0][0] for result in results) == ["No", "Yes"]


async def test_another_callers_call_does_not_attach(make_server):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        first = asyncio.create_task(call(server.url, "auto"))
        asked = await events.next("question.asked")
        await drop(first, server, asked.properties["id"])
        async with Client(f"{server.url}/mcp?sessionID=ses_someone_else") as mcp:
            other = asyncio.create_task(mcp.call_tool("question", {"questions": QUESTION}))
            assert (await events.next("question.asked")).properties["id"] != asked.properties["id"]
            other.cancel()


# ---------------------------------------------------------------------------------------------------
# POST /elicit with an Idempotency-Key


def elicit(
    client: httpx.AsyncClient, key: str | None, body: dict[str, Any] | None = None
) -> asyncio.Task[httpx.Response]:
    headers = {} if key is None else {"Idempotency-Key": key}
    return asyncio.create_task(
        client.post(
            "/elicit", json=body or form(COLOR_SCHEMA), headers=headers, timeout=httpx.Timeout(10, read=60)
        )
    )


async def cut(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_retried_request_with_the_same_key_attaches(make_server, caplog):
    caplog.set_level(logging.INFO, logger="elicitation_gateway")
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        first = elicit(client, "deploy-4.2-a1b2")
        asked = await events.next("question.asked")
        await cut(first)
        await until(
            lambda: asked.properties["id"] in server.gateway.reattach.orphaned, what="kept for the retry"
        )

        retried = elicit(client, "deploy-4.2-a1b2")
        await attached(caplog, asked.properties["id"])
        assert [request["id"] for request in await pending(client)] == [asked.properties["id"]]
        await client.post(f"/question/{asked.properties['id']}/reply", json={"answers": [["green"], ["3"]]})
        assert (await retried).json() == COLOR_ACCEPTED
        shown = [frame.type for frame in await events.through("question.replied")]
        assert "question.rejected" not in shown  # kept for the retry
        assert "question.asked" not in shown  # asked once


async def test_a_key_reused_with_another_body_is_422(make_server):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        first = elicit(client, "k-1")
        asked = await events.next("question.asked")
        other = await client.post(
            "/elicit", json=form(COLOR_SCHEMA, "Another"), headers={"Idempotency-Key": "k-1"}
        )
        assert other.status_code == 422
        assert other.json()["error"] == "idempotency_key_reused"

        await cut(first)
        await until(
            lambda: asked.properties["id"] in server.gateway.reattach.orphaned, what="kept for the retry"
        )
        reused = await client.post(
            "/elicit", json=form(COLOR_SCHEMA, "Another"), headers={"Idempotency-Key": "k-1"}
        )
        assert reused.status_code == 422  # the orphan stays for the right body
        assert [request["id"] for request in await pending(client)] == [asked.properties["id"]]
        bad = await client.post("/elicit", json=form(COLOR_SCHEMA), headers={"Idempotency-Key": "a b"})
        assert bad.status_code == 400
        assert bad.json()["error"] == "invalid_idempotency_key"


async def test_without_a_key_a_cut_request_withdraws_its_question(make_server):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        first = elicit(client, None)
        asked = await events.next("question.asked")
        await cut(first)
        rejected = await events.next("question.rejected")  # not kept for a window of 300 s
        assert rejected.properties["requestID"] == asked.properties["id"]


async def test_requests_sent_at_once_with_one_key_make_one_question_and_share_its_result(make_server):
    """The key is held from the start of the first request, not once its question is made: the others,
    arriving while it is asked or while it waits, wait on that question and get its result."""
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        requests = [elicit(client, "deploy-4.2-once") for _ in range(8)]
        asked = await events.next("question.asked")
        await until(
            lambda: server.gateway.reattach.holds[next(iter(server.gateway.reattach.holds))].holders == 8
        )
        reply = await client.post(
            f"/question/{asked.properties['id']}/reply", json={"answers": [["green"], ["3"]]}
        )
        assert reply.status_code == 200
        responses = await asyncio.gather(*requests)
        assert [(response.status_code, response.json()) for response in responses] == [
            (200, COLOR_ACCEPTED)
        ] * 8
        await events.no_frame(within=0.2, type="question.asked")  # one question in all
        assert all(
            frame.properties["id"] == asked.properties["id"]
            for frame in events.seen
            if frame.type == "question.asked"
        )


async def test_requests_sent_at_once_with_one_key_share_a_refusal(make_server):
    server = make_server(max_pending=1)
    async with httpx.AsyncClient(base_url=server.url) as client:
        assert (await client.post("/elicitations", json=form(COLOR_SCHEMA))).status_code == 201
        responses = await asyncio.gather(*[elicit(client, "k-full") for _ in range(4)])
        assert server.gateway.reattach.holds == {}
    assert {(response.status_code, response.json()["error"]) for response in responses} == {
        (429, "too_many_pending")
    }


async def test_one_of_several_requests_with_one_key_going_away_leaves_the_question_to_the_others(make_server):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        first, second = elicit(client, "k-two"), elicit(client, "k-two")
        asked = await events.next("question.asked")
        await until(lambda: sum(hold.holders for hold in server.gateway.reattach.holds.values()) == 2)
        await cut(first)
        await until(lambda: sum(hold.holders for hold in server.gateway.reattach.holds.values()) == 1)
        await events.no_frame(within=0.2, type="question.rejected")
        assert asked.properties["id"] not in server.gateway.reattach.orphaned
        await client.post(f"/question/{asked.properties['id']}/reply", json={"answers": [["green"], ["3"]]})
        assert (await second).json() == COLOR_ACCEPTED
        assert server.gateway.reattach.holds == {}


async def test_an_answer_given_while_a_request_was_away_reaches_only_its_key(make_server):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client) as events:
        first = elicit(client, "agent-a-7f3e")
        asked = await events.next("question.asked")
        await cut(first)
        await until(
            lambda: asked.properties["id"] in server.gateway.reattach.orphaned, what="kept for the retry"
        )
        reply = await client.post(
            f"/question/{asked.properties['id']}/reply", json={"answers": [["green"], ["3"]]}
        )
        assert reply.status_code == 200

        for other_key in (None, "agent-b-91c2"):
            other = elicit(client, other_key)
            theirs = await events.next("question.asked")
            assert theirs.properties["id"] != asked.properties["id"]
            await client.post(f"/question/{theirs.properties['id']}/reply", json={"answers": [["red"], []]})
            assert (await other).json() == {"action": "accept", "content": {"color": "red"}}
        assert (await elicit(client, "agent-a-7f3e")).json() == COLOR_ACCEPTED


async def test_a_request_gone_while_its_key_is_being_asked_leaves_the_ask_to_the_next(make_server):
    """The request holding a key goes away while its question is still being made (a big schema is
    converted off the loop): the one waiting on the key asks it instead, and nothing is left held."""
    server = make_server()
    gateway = server.gateway
    caller = Caller("gone-while-asked", "body", exclusive=True, proven=True)
    big = {
        "type": "object",
        "properties": {f"k{n}": {"type": "string", "title": "x" * 2000} for n in range(40)},
    }

    async def race() -> tuple[str, dict[str, Any]]:
        await gateway.asking.converting.acquire()  # big schemas wait: the first request is still asking
        first = asyncio.create_task(gateway.ask_or_attach("Big", big, AskOptions(), caller))
        await until(lambda: caller.key in gateway.reattach.holds, what="the first request holds the key")
        second = asyncio.create_task(gateway.ask_or_attach("Big", big, AskOptions(), caller))
        await until(
            lambda: gateway.reattach.holds[caller.key].holders == 2, what="the second waits on the key"
        )
        first.cancel()
        await asyncio.wait({first})
        gateway.asking.converting.release()
        record = await second  # asked by the second request
        waiting = asyncio.create_task(gateway.final_result(record, caller=caller))
        await gateway.withdraw(record.id)
        assert await waiting == {"action": "cancel"}
        return record.id, dict(gateway.reattach.holds)

    request_id, holds = server.run(race())
    assert holds == {}
    async with httpx.AsyncClient(base_url=server.url) as client:
        assert (await client.get(f"/elicitations/{request_id}")).json()["status"] == "cancelled"
        assert (await client.get("/question")).json() == []
