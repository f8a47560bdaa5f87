"""A plain confirmation through real HTTP: FastMCP 2.x–3.4's ``ctx.elicit(message, response_type=None)``
sends an object schema with no properties (``tests/fixtures/schemas/fastmcp-2.x-confirm.json``). It is
asked as one Yes/No question showing the message; Yes gives ``accept`` with ``{}``, No ``decline``, on
``/elicit``, ``/elicitations`` and the answerer's form alike (docs/protocol.md, "A schema with no
properties")."""

from typing import Any

import httpx
import pytest

from tests.conftest import CAPTURED_SCHEMAS, load_params
from tests.helpers import ask, read_events

FASTMCP_2 = load_params(CAPTURED_SCHEMAS / "fastmcp-2.x-confirm.json")


def test_the_fixture_is_what_fastmcp_2_sends():
    assert FASTMCP_2["requestedSchema"] == {"type": "object", "properties": {}}


async def confirm(
    client: httpx.AsyncClient, answers: list[list[str]]
) -> tuple[dict[str, Any], httpx.Response]:
    """Ask the FastMCP 2.x confirmation on ``/elicit`` and reply with ``answers``: the request announced
    and the tool's response."""
    async with read_events(client) as events:
        tool = ask(client, FASTMCP_2)
        request = (await events.next("question.asked")).properties
        reply = await client.post(f"/question/{request['id']}/reply", json={"answers": answers})
        assert reply.status_code == 200, reply.text
        assert reply.json() is True
        replied = await events.next("question.replied")
        assert replied.properties == {
            "sessionID": request["sessionID"],
            "requestID": request["id"],
            "answers": answers,
        }
        return request, await tool


async def test_it_is_asked_as_one_yes_no_question_showing_the_message(client):
    request, response = await confirm(client, [["Yes"]])
    assert request["questions"] == [
        {
            "question": FASTMCP_2["message"],
            "header": "Confirm",
            "options": [{"label": "Yes", "description": ""}, {"label": "No", "description": ""}],
            "custom": False,
        }
    ]
    assert response.status_code == 200, response.text
    assert response.json() == {"action": "accept", "content": {}}
    status = await client.get(f"/elicitations/{request['id']}")
    assert status.json() == {
        "id": request["id"],
        "status": "answered",
        "result": {"action": "accept", "content": {}},
    }


async def test_no_declines(client):
    request, response = await confirm(client, [["No"]])
    assert response.status_code == 200, response.text
    assert response.json() == {"action": "decline"}
    status = await client.get(f"/elicitations/{request['id']}")
    assert status.json() == {"id": request["id"], "status": "declined", "result": {"action": "decline"}}
    metrics = (await client.get("/metrics")).text
    assert 'gateway_elicitations_finished_total{outcome="declined"} 1.0' in metrics


async def test_an_unanswered_reply_is_refused_and_the_question_stays_open(client):
    async with read_events(client) as events:
        tool = ask(client, FASTMCP_2)
        request = (await events.next("question.asked")).properties
        for answers in ([], [[]], [["Maybe"]]):
            refused = await client.post(f"/question/{request['id']}/reply", json={"answers": answers})
            assert refused.status_code == 400, refused.text
            [issue] = refused.json()["data"]["issues"]
            assert (issue["index"], issue["header"]) == (0, "Confirm")
        assert [pending["id"] for pending in (await client.get("/question")).json()] == [request["id"]]
        reply = await client.post(f"/question/{request['id']}/reply", json={"answers": [["Yes"]]})
        assert reply.status_code == 200, reply.text
        assert (await tool).json() == {"action": "accept", "content": {}}


async def test_the_answerers_form_says_it_is_a_confirmation(client):
    created = await client.post("/elicitations", json=FASTMCP_2)
    assert created.status_code == 201, created.text
    request_id = created.json()["id"]
    form = (await client.get(f"/question/{request_id}/form")).json()
    assert form["confirm"] is True
    assert form["legacy"] is False
    assert form["message"] == FASTMCP_2["message"]
    [field] = form["fields"]
    assert (field["kind"], field["required"], field["header"], field["text"]) == (
        "boolean",
        True,
        "Confirm",
        "",
    )

    reply = await client.post(f"/question/{request_id}/reply", json={"answers": [["No"]]})
    assert reply.status_code == 200, reply.text
    waited = await client.get(f"/elicitations/{request_id}", params={"wait": 5})
    assert waited.json() == {"id": request_id, "status": "declined", "result": {"action": "decline"}}


async def test_a_form_with_questions_says_it_is_none(client):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    created = await client.post("/elicitations", json={"message": "Fine?", "requestedSchema": schema})
    form = (await client.get(f"/question/{created.json()['id']}/form")).json()
    assert form["confirm"] is False


@pytest.mark.parametrize(("body", "action"), [({"action": "decline"}, "decline"), (None, "cancel")])
async def test_rejecting_it_is_as_for_any_question(client, body, action):
    async with read_events(client) as events:
        tool = ask(client, FASTMCP_2)
        request = (await events.next("question.asked")).properties
        await client.post(f"/question/{request['id']}/reject", json=body)
        await events.next("question.rejected")
        assert (await tool).json() == {"action": action}


async def test_on_timeout_default_is_refused_nobody_says_yes_for_the_person(client):
    response = await client.post("/elicit", params={"onTimeout": "default"}, json=FASTMCP_2)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "invalid_timeout_choice"
    assert "confirmation" in response.json()["message"]
    assert (await client.get("/question")).json() == []


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "object", "properties": {}, "required": ["ok"]}, "requestedSchema.required names 'ok'"),
        ({"type": "object"}, "requestedSchema must have properties"),
        ({"type": "object", "properties": []}, "requestedSchema.properties must be an object"),
    ],
)
async def test_other_schemas_without_questions_are_still_refused(client, schema, says):
    response = await client.post("/elicit", json={"message": "Sure?", "requestedSchema": schema})
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "invalid_schema"
    assert says in response.json()["message"]
    assert (await client.get("/question")).json() == []
