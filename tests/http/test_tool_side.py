"""The tool side over real HTTP (docs/protocol.md, Tool side): POST /elicit, its JSON-RPC form, query
parameters, results, timeouts, withdrawal on disconnect, the asynchronous /elicitations form, and
what a pending tool gets when the service stops."""

import asyncio
from typing import Any

import httpx
import pytest

from elicitation_gateway.settings import DEFAULT_SESSION_ID
from tests.conftest import TEST_DIRECTORY
from tests.helpers import COLOR_ACCEPTED, COLOR_SCHEMA, ask, form, pending, read_events, until, waited_on


async def reply(client: httpx.AsyncClient, request_id: str, answers: list[list[str]]) -> None:
    response = await client.post(f"/question/{request_id}/reply", json={"answers": answers})
    assert response.status_code == 200, response.text
    assert response.json() is True


async def create(client: httpx.AsyncClient, params: Any = None, **query: Any) -> str:
    """POST /elicitations; return the new id."""
    response = await client.post("/elicitations", json=params or form(COLOR_SCHEMA), params=query)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def status_of(client: httpx.AsyncClient, request_id: str, **query: Any) -> dict[str, Any]:
    response = await client.get(f"/elicitations/{request_id}", params=query)
    assert response.status_code == 200, response.text
    return response.json()


# ---------------------------------------------------------------------------------------------------
# POST /elicit: bodies and results


@pytest.mark.parametrize("with_mode", [True, False], ids=["mode-form", "mode-absent"])
async def test_elicit_form_params_round_trip(client, with_mode):
    """MCP form params, with or without ``mode``, are asked and answered with typed content."""
    params = form(COLOR_SCHEMA, "Paint job")
    if not with_mode:
        del params["mode"]
    async with read_events(client) as events:
        tool = ask(client, params)
        asked = await events.next("question.asked")
        assert [q["header"] for q in asked.properties["questions"]] == ["Color", "Count"]
        await reply(client, asked.properties["id"], [["green"], ["3"]])
        response = await tool
    assert response.status_code == 200
    assert response.json() == COLOR_ACCEPTED


@pytest.mark.parametrize("rpc_id", [7, 0, "req-7"], ids=["int-id", "zero-id", "string-id"])
async def test_elicit_jsonrpc_envelope_gets_jsonrpc_response_with_same_id(client, rpc_id):
    """An ``elicitation/create`` JSON-RPC request is answered by a JSON-RPC response with its id."""
    envelope = {"jsonrpc": "2.0", "id": rpc_id, "method": "elicitation/create", "params": form(COLOR_SCHEMA)}
    tool = ask(client, envelope)
    [request] = await pending(client)
    await reply(client, request["id"], [["green"], ["3"]])
    response = await tool
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": rpc_id, "result": COLOR_ACCEPTED}


async def test_elicit_jsonrpc_decline_is_a_result(client):
    """A declined JSON-RPC elicitation is a JSON-RPC ``result`` (not an ``error``) with ``decline``."""
    envelope = {"jsonrpc": "2.0", "id": 3, "method": "elicitation/create", "params": form(COLOR_SCHEMA)}
    tool = ask(client, envelope)
    [request] = await pending(client)
    response = await client.post(f"/question/{request['id']}/reject", json={"action": "decline"})
    assert response.status_code == 200
    assert (await tool).json() == {"jsonrpc": "2.0", "id": 3, "result": {"action": "decline"}}


async def test_query_parameters_shape_the_question_request(client):
    """sessionID and messageID/callID land in the QuestionRequest of GET /question and question.asked."""
    query = {"sessionID": "ses_abc123", "messageID": "msg_42", "callID": "call_7", "directory": "/srv/proj"}
    async with read_events(client) as events:
        tool = ask(client, form(COLOR_SCHEMA), **query)
        asked = await events.next("question.asked")
        [listed] = await pending(client)
        assert listed == asked.properties
        assert listed["sessionID"] == "ses_abc123"
        assert listed["tool"] == {"messageID": "msg_42", "callID": "call_7"}
        assert listed["id"].startswith("que_")
        await reply(client, listed["id"], [["red"], []])
        assert (await tool).json() == {"action": "accept", "content": {"color": "red"}}


async def test_directory_query_parameter_files_the_question_under_that_directory(client):
    """``directory`` is what answerers filter on and what /global/event wraps the question with."""
    async with read_events(client, "/global/event") as events:
        tool = ask(client, form(COLOR_SCHEMA), directory="/srv/proj")
        asked = await events.next("question.asked")
        assert asked.data["directory"] == "/srv/proj"
        request_id = asked.properties["id"]
        mine = (await client.get("/question", params={"directory": "/srv/proj"})).json()
        other = (await client.get("/question", params={"directory": "/srv/other"})).json()
        assert [r["id"] for r in mine] == [request_id]
        assert other == []
        await client.post(f"/question/{request_id}/reject")
        assert (await tool).json() == {"action": "cancel"}


async def test_defaults_without_query_parameters(client):
    """Without sessionID the configured default session is used; without messageID/callID no ``tool``;
    without directory the service's default directory."""
    async with read_events(client, "/global/event") as events:
        tool = ask(client, form(COLOR_SCHEMA))
        asked = await events.next("question.asked")
        assert asked.properties["sessionID"] == DEFAULT_SESSION_ID
        assert "tool" not in asked.properties
        assert asked.data["directory"] == TEST_DIRECTORY
        await client.post(f"/question/{asked.properties['id']}/reject")
        await tool


async def test_configured_default_session_id(make_server):
    """The ``session_id`` setting is the sessionID of questions whose tool names none."""
    server = make_server(session_id="ses_configured0001")
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        tool = ask(client, form(COLOR_SCHEMA))
        [request] = await pending(client)
        assert request["sessionID"] == "ses_configured0001"
        await client.post(f"/question/{request['id']}/reject")
        await tool


@pytest.mark.parametrize(
    ("reject_body", "expected"),
    [({"action": "decline"}, {"action": "decline"}), (None, {"action": "cancel"})],
    ids=["decline", "cancel"],
)
async def test_rejected_question_gives_decline_or_cancel_without_content(client, reject_body, expected):
    """Reject with ``{"action": "decline"}`` gives ``decline``, without a body ``cancel``; no content."""
    async with read_events(client) as events:
        tool = ask(client, form(COLOR_SCHEMA))
        asked = await events.next("question.asked")
        request_id = asked.properties["id"]
        response = await client.post(f"/question/{request_id}/reject", json=reject_body)
        assert response.status_code == 200
        rejected = await events.next("question.rejected")
        assert rejected.properties == {"sessionID": DEFAULT_SESSION_ID, "requestID": request_id}
        result = (await tool).json()
    assert result == expected
    assert "content" not in result


async def test_accept_content_never_holds_null(client):
    """Optional questions left unanswered are left out of ``content``; no value is ever ``null``."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name"},
            "nick": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Nick"},
            "age": {"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "Age"},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "title": "Tags"},
        },
        "required": ["name"],
    }
    tool = ask(client, form(schema))
    [request] = await pending(client)
    await reply(client, request["id"], [["Ada"], [], [], []])
    result = (await tool).json()
    assert result["action"] == "accept"
    assert result["content"]["name"] == "Ada"
    assert None not in result["content"].values()
    assert "nick" not in result["content"]
    assert "age" not in result["content"]


# ---------------------------------------------------------------------------------------------------
# Timeouts


async def test_per_request_timeout_cancels_and_rejects(client):
    """``?timeout=`` ends an unanswered question: the tool gets ``cancel``, answerers see
    ``question.rejected``, and its status is ``expired``."""
    async with read_events(client) as events:
        tool = ask(client, form(COLOR_SCHEMA), timeout="0.3")
        asked = await events.next("question.asked")
        request_id = asked.properties["id"]
        rejected = await events.next("question.rejected")
        assert rejected.properties["requestID"] == request_id
        assert (await tool).json() == {"action": "cancel"}
    assert (await client.get("/question")).json() == []
    assert await status_of(client, request_id) == {
        "id": request_id,
        "status": "expired",
        "result": {"action": "cancel"},
    }


DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "color": {"type": "string", "enum": ["red", "green"], "default": "green"},
        "count": {"type": "integer", "default": 2},
        "note": {"type": "string"},
    },
    "required": ["color", "count"],
}


async def test_on_timeout_default_accepts_the_defaults(client):
    """``?onTimeout=default``: at expiry the tool gets ``accept`` with the schema's defaults (an optional
    field without one is left out), answerers see ``question.replied`` with empty answers, and its status
    is ``answered``. Nobody answered, so it is not timed as an answer in ``/metrics``."""
    timed_before = await answers_timed(client)
    async with read_events(client) as events:
        tool = ask(client, form(DEFAULTS_SCHEMA), timeout="0.3", onTimeout="default")
        asked = await events.next("question.asked")
        request_id = asked.properties["id"]
        replied = await events.next("question.replied")
        assert replied.properties["requestID"] == request_id
        assert replied.properties["answers"] == [[], [], []]
        accepted = {"action": "accept", "content": {"color": "green", "count": 2}}
        assert (await tool).json() == accepted
    assert (await client.get("/question")).json() == []
    assert await status_of(client, request_id) == {"id": request_id, "status": "answered", "result": accepted}
    assert await answers_timed(client) == timed_before


async def answers_timed(client) -> float:
    metrics = (await client.get("/metrics")).text
    [line] = [
        line for line in metrics.splitlines() if line.startswith("gateway_time_to_answer_seconds_count")
    ]
    return float(line.split()[-1])


async def test_on_timeout_default_long_poll(client):
    """``POST /elicitations?onTimeout=default``: the long poll returns ``answered`` with the defaults."""
    request_id = await create(client, form(DEFAULTS_SCHEMA), timeout="0.3", onTimeout="default")
    body = await status_of(client, request_id, wait="30")
    accepted = {"action": "accept", "content": {"color": "green", "count": 2}}
    assert body == {"id": request_id, "status": "answered", "result": accepted}


async def test_on_timeout_cancel_is_the_default_behaviour(client):
    """``?onTimeout=cancel`` spelled out behaves as without it, also for a schema with defaults."""
    request_id = await create(client, form(DEFAULTS_SCHEMA), timeout="0.3", onTimeout="cancel")
    body = await status_of(client, request_id, wait="30")
    assert body == {"id": request_id, "status": "expired", "result": {"action": "cancel"}}


@pytest.mark.parametrize("path", ["/elicit", "/elicitations"])
async def test_on_timeout_default_without_defaults_is_refused(client, path):
    """A required field without a default cannot be accepted at expiry: 400 when asked, naming it,
    and nothing is asked."""
    response = await client.post(path, json=form(COLOR_SCHEMA), params={"onTimeout": "default"})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_timeout_choice"
    assert "'color'" in body["message"]
    assert (await client.get("/question")).json() == []


async def test_unknown_on_timeout_is_refused(client):
    response = await client.post("/elicitations", json=form(DEFAULTS_SCHEMA), params={"onTimeout": "later"})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_timeout_choice"


async def test_default_timeout_comes_from_settings(make_server):
    """Without ``?timeout=`` the ``timeout`` setting applies."""
    server = make_server(timeout=0.3)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client, read_events(client) as events:
        tool = ask(client, form(COLOR_SCHEMA))
        asked = await events.next("question.asked")
        rejected = await events.next("question.rejected")
        assert rejected.properties["requestID"] == asked.properties["id"]
        async with asyncio.timeout(10):
            assert (await tool).json() == {"action": "cancel"}


async def test_timeout_above_maximum_is_capped(make_server):
    """A ``timeout`` above ``max_timeout`` is capped: timeout=100 with a 0.5 s maximum ends in ``cancel``."""
    server = make_server(max_timeout=0.5)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client, read_events(client) as events:
        tool = ask(client, form(COLOR_SCHEMA), timeout="100")
        asked = await events.next("question.asked")
        rejected = await events.next("question.rejected", timeout=10)
        assert rejected.properties["requestID"] == asked.properties["id"]
        async with asyncio.timeout(10):
            response = await tool
        assert response.status_code == 200
        assert response.json() == {"action": "cancel"}


async def test_wait_above_maximum_is_capped_not_refused(make_server):
    """A ``wait`` above ``max_timeout`` is not a 400: it is capped, and the long poll returns (here when
    the question, whose own timeout is capped too, expires)."""
    server = make_server(max_timeout=0.5, timeout=30)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        request_id = await create(client, timeout="30")
        async with asyncio.timeout(10):
            body = await status_of(client, request_id, wait="100")
        assert body == {"id": request_id, "status": "expired", "result": {"action": "cancel"}}


# ---------------------------------------------------------------------------------------------------
# A tool that goes away


async def _disconnect_by_cancel(task: asyncio.Task, tool_client: httpx.AsyncClient) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _disconnect_by_close(task: asyncio.Task, tool_client: httpx.AsyncClient) -> None:
    await tool_client.aclose()
    try:
        await task
    except (httpx.HTTPError, RuntimeError, asyncio.CancelledError):
        pass
    else:  # pragma: no cover - the closed client cannot have received an answer
        raise AssertionError("the closed client still got a response")


@pytest.mark.parametrize("disconnect", [_disconnect_by_cancel, _disconnect_by_close], ids=["cancel", "close"])
async def test_tool_disconnect_withdraws_its_question(server, client, disconnect):
    """When the waiting tool's connection closes, the question is withdrawn: ``question.rejected``,
    gone from GET /question, and its status is ``cancelled``."""
    async with read_events(client) as events:
        tool_client = httpx.AsyncClient(base_url=server.url, timeout=10)
        try:
            task = ask(tool_client, form(COLOR_SCHEMA))
            asked = await events.next("question.asked")
            request_id = asked.properties["id"]
            await disconnect(task, tool_client)
            rejected = await events.next("question.rejected")
            assert rejected.properties["requestID"] == request_id
        finally:
            await tool_client.aclose()
    assert (await client.get("/question")).json() == []
    body = await status_of(client, request_id)
    assert body["status"] == "cancelled"
    assert body["result"] == {"action": "cancel"}
    response = await client.post(f"/question/{request_id}/reply", json={"answers": [["red"], []]})
    assert response.status_code == 404


async def test_elicit_question_is_readable_through_elicitations(client):
    """POST /elicit is create + wait: its question's status is readable at /elicitations/{id}."""
    tool = ask(client, form(COLOR_SCHEMA))
    [request] = await pending(client)
    assert await status_of(client, request["id"]) == {"id": request["id"], "status": "pending"}
    await reply(client, request["id"], [["green"], ["3"]])
    assert (await tool).json() == COLOR_ACCEPTED
    assert await status_of(client, request["id"]) == {
        "id": request["id"],
        "status": "answered",
        "result": COLOR_ACCEPTED,
    }


# ---------------------------------------------------------------------------------------------------
# The asynchronous form


async def test_create_returns_201_pending_with_location(client):
    """POST /elicitations answers at once: 201, ``{"id", "status": "pending"}`` and a Location header."""
    async with read_events(client) as events:
        response = await client.post(
            "/elicitations", json=form(COLOR_SCHEMA), params={"sessionID": "ses_async1", "callID": "c1"}
        )
        assert response.status_code == 201
        body = response.json()
        assert body == {"id": body["id"], "status": "pending"}
        assert body["id"].startswith("que_")
        assert response.headers["location"] == f"/elicitations/{body['id']}"
        asked = await events.next("question.asked")
    assert asked.properties["id"] == body["id"]
    assert asked.properties["sessionID"] == "ses_async1"
    assert asked.properties["tool"] == {"messageID": "", "callID": "c1"}
    assert await status_of(client, body["id"]) == {"id": body["id"], "status": "pending"}
    location = await client.get(response.headers["location"])
    assert location.json() == {"id": body["id"], "status": "pending"}


async def test_long_poll_returns_once_answered(server, client):
    """GET ?wait= waits for the answer and returns ``answered`` with the result."""
    request_id = await create(client)
    poll = asyncio.create_task(client.get(f"/elicitations/{request_id}", params={"wait": "30"}))
    await until(lambda: waited_on(server.gateway.store, request_id), what="the poll waits")
    await reply(client, request_id, [["green"], ["3"]])
    response = await poll
    assert response.status_code == 200
    assert response.json() == {"id": request_id, "status": "answered", "result": COLOR_ACCEPTED}


@pytest.mark.parametrize(
    ("reject_body", "status", "result"),
    [({"action": "decline"}, "declined", {"action": "decline"}), (None, "cancelled", {"action": "cancel"})],
    ids=["declined", "cancelled"],
)
async def test_long_poll_returns_once_rejected(server, client, reject_body, status, result):
    """GET ?wait= returns ``declined`` / ``cancelled`` when the person rejects."""
    request_id = await create(client)
    poll = asyncio.create_task(client.get(f"/elicitations/{request_id}", params={"wait": "30"}))
    await until(lambda: waited_on(server.gateway.store, request_id), what="the poll waits")
    response = await client.post(f"/question/{request_id}/reject", json=reject_body)
    assert response.status_code == 200
    assert (await poll).json() == {"id": request_id, "status": status, "result": result}


async def test_long_poll_returns_once_expired(client):
    """GET ?wait= returns ``expired`` with ``cancel`` when the question's own timeout ends first."""
    request_id = await create(client, timeout="0.3")
    body = await status_of(client, request_id, wait="30")
    assert body == {"id": request_id, "status": "expired", "result": {"action": "cancel"}}


async def test_long_poll_that_runs_out_returns_pending(client):
    """A ``wait`` that ends before an answer returns ``pending`` without ``result``; the question stays."""
    request_id = await create(client)
    assert await status_of(client, request_id, wait="0.2") == {"id": request_id, "status": "pending"}
    assert [r["id"] for r in (await client.get("/question")).json()] == [request_id]


async def test_delete_withdraws_a_pending_question(client):
    """DELETE makes it ``cancelled`` and sends ``question.rejected``; it leaves GET /question."""
    async with read_events(client) as events:
        request_id = await create(client, sessionID="ses_del")
        await events.next("question.asked")
        response = await client.delete(f"/elicitations/{request_id}")
        assert response.status_code == 200
        assert response.json()["status"] == "cancelled"
        rejected = await events.next("question.rejected")
        assert rejected.properties == {"sessionID": "ses_del", "requestID": request_id}
    assert (await client.get("/question")).json() == []
    assert await status_of(client, request_id) == {
        "id": request_id,
        "status": "cancelled",
        "result": {"action": "cancel"},
    }


@pytest.mark.parametrize("finish", ["answered", "declined", "cancelled"])
async def test_delete_of_finished_is_409_with_its_status(client, finish):
    """Deleting a finished elicitation is a 409 naming its status; the result is unchanged."""
    request_id = await create(client)
    if finish == "answered":
        await reply(client, request_id, [["green"], ["3"]])
    elif finish == "declined":
        await client.post(f"/question/{request_id}/reject", json={"action": "decline"})
    else:
        await client.delete(f"/elicitations/{request_id}")
    response = await client.delete(f"/elicitations/{request_id}")
    assert response.status_code == 409
    body = response.json()
    assert body["status"] == finish
    assert body["error"]
    assert finish in body["message"]
    assert (await status_of(client, request_id))["status"] == finish


@pytest.mark.parametrize(
    ("method", "query"),
    [("GET", {}), ("GET", {"wait": "1"}), ("DELETE", {})],
    ids=["get", "get-wait", "delete"],
)
async def test_unknown_elicitation_is_404(client, method, query):
    """An unknown id is a 404 with an error body, for GET (with or without wait) and DELETE."""
    response = await client.request(method, "/elicitations/que_000000000000unknownunknow", params=query)
    assert response.status_code == 404
    body = response.json()
    assert body["error"]
    assert "que_000000000000unknownunknow" in body["message"]


async def test_finished_results_are_kept_for_result_ttl_then_forgotten(make_server):
    """A finished result stays readable, and after ``result_ttl`` it is gone (404)."""
    server = make_server(result_ttl=0.3)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        request_id = await create(client)
        await reply(client, request_id, [["green"], ["3"]])
        assert await status_of(client, request_id) == {
            "id": request_id,
            "status": "answered",
            "result": COLOR_ACCEPTED,
        }
        response = await client.get(f"/elicitations/{request_id}")

        async def gone() -> bool:
            nonlocal response
            response = await client.get(f"/elicitations/{request_id}")
            return response.status_code != 200

        await until(gone, what="the result forgotten")
        assert response.status_code == 404


# ---------------------------------------------------------------------------------------------------
# Shutdown


async def test_shutdown_cancels_pending_tools_and_rejects_for_subscribers(make_server):
    """Stopping the service gives a waiting tool ``cancel`` and subscribers ``question.rejected``."""
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client, read_events(client) as events:
        tool = ask(client, form(COLOR_SCHEMA))
        asked = await events.next("question.asked")
        polled = await create(client)
        await events.next("question.asked")
        stopping = asyncio.create_task(asyncio.to_thread(server.stop))
        rejected = {(await events.next("question.rejected")).properties["requestID"] for _ in range(2)}
        assert rejected == {asked.properties["id"], polled}
        response = await tool
        assert response.status_code == 200
        assert response.json() == {"action": "cancel"}
        await stopping
