"""The gateway as an MCP server: the ``question`` tool at ``/mcp``, called with the ``mcp`` SDK's own
client over real Streamable HTTP, answered by a person through the gateway's HTTP API."""

import asyncio
from typing import Any

import httpx
import mcp.types as types
import pytest
from mcp.client import Client

from tests.conftest import TEST_DIRECTORY
from tests.helpers import pending, read_events

QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Which model is it?",
        "header": "Model",
        "options": [
            {"label": "SY215C", "description": "21 t class"},
            {"label": "SY235C", "description": "23 t class"},
        ],
    },
    {
        "question": "Which symptoms do you see?",
        "header": "Symptoms",
        "options": [{"label": "Black smoke", "description": ""}, {"label": "Noise", "description": ""}],
        "multiple": True,
    },
    {"question": "Anything else?", "header": "Notes", "options": []},
]


def text_of(result: types.CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_question_tool_round_trip(server, client, mode):
    async with read_events(client) as events, Client(f"{server.url}/mcp", mode=mode) as mcp:
        call = asyncio.create_task(mcp.call_tool("question", {"questions": QUESTIONS}))
        asked = (await events.next("question.asked")).properties
        reply = await client.post(
            f"/question/{asked['id']}/reply",
            json={"answers": [["SY235C"], ["Black smoke", "Noise"], ["Loud at idle"]]},
        )
        assert reply.status_code == 200
        result = await call

    first, second, third = asked["questions"]
    assert first == {
        "question": "Which model is it?",
        "header": "Model",
        "options": [
            {"label": "SY215C", "description": "21 t class"},
            {"label": "SY235C", "description": "23 t class"},
        ],
        "custom": False,
    }
    assert second["multiple"] is True
    assert [o["label"] for o in second["options"]] == ["Black smoke", "Noise"]
    assert third == {"question": "Anything else?", "header": "Notes", "options": []}

    assert not result.is_error
    assert result.structured_content == {
        "action": "accept",
        "answers": [["SY235C"], ["Black smoke", "Noise"], ["Loud at idle"]],
    }
    assert text_of(result) == (
        'User has answered your questions: "Which model is it?"="SY235C", '
        '"Which symptoms do you see?"="Black smoke, Noise", "Anything else?"="Loud at idle". '
        "You can now continue with the user's answers in mind."
    )


async def test_the_tool_is_listed_with_opencodes_input_shape(server):
    async with Client(f"{server.url}/mcp") as mcp:
        [tool] = (await mcp.list_tools()).tools
    assert tool.name == "question"
    assert tool.input_schema["required"] == ["questions"]
    item = tool.input_schema["properties"]["questions"]["items"]
    if "$ref" in item:
        item = tool.input_schema["$defs"][item["$ref"].rsplit("/", 1)[-1]]
    assert set(item["properties"]) == {"question", "header", "options", "multiple"}
    assert set(item["required"]) == {"question", "header"}
    assert tool.output_schema is not None
    assert set(tool.output_schema["properties"]) == {"action", "answers"}


async def test_unanswered_questions_are_reported_as_such(server, client):
    async with Client(f"{server.url}/mcp") as mcp:
        call = asyncio.create_task(mcp.call_tool("question", {"questions": QUESTIONS}))
        [request] = await pending(client)
        await client.post(f"/question/{request['id']}/reply", json={"answers": [["SY215C"], [], []]})
        result = await call
    assert result.structured_content == {"action": "accept", "answers": [["SY215C"], [], []]}
    assert '"Anything else?"="Unanswered"' in text_of(result)


@pytest.mark.parametrize(
    ("body", "action", "words"),
    [({"action": "decline"}, "decline", "declined"), (None, "cancel", "dismissed")],
    ids=["decline", "dismiss"],
)
async def test_a_refusal_is_told_to_the_agent(server, client, body, action, words):
    async with Client(f"{server.url}/mcp") as mcp:
        call = asyncio.create_task(mcp.call_tool("question", {"questions": QUESTIONS[:1]}))
        [request] = await pending(client)
        await client.post(f"/question/{request['id']}/reject", json=body)
        result = await call
    assert not result.is_error
    assert result.structured_content == {"action": action, "answers": []}
    assert words in text_of(result)


async def test_a_question_that_times_out_is_cancel(make_server):
    server = make_server(timeout=0.3)
    async with Client(f"{server.url}/mcp") as mcp:
        result = await mcp.call_tool("question", {"questions": QUESTIONS[:1]})
    assert result.structured_content == {"action": "cancel", "answers": []}


async def test_a_gateway_that_stops_gives_the_agent_cancel(make_server):
    server = make_server()
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as client,
        Client(f"{server.url}/mcp") as mcp,
    ):
        call = asyncio.create_task(mcp.call_tool("question", {"questions": QUESTIONS[:1]}))
        await pending(client)
        await asyncio.to_thread(server.stop)
        result = await call
    assert result.structured_content == {"action": "cancel", "answers": []}


async def test_session_and_directory_come_from_the_mcp_url(server, client):
    url = f"{server.url}/mcp?sessionID=ses_0000000000001McpToolTest01&directory={TEST_DIRECTORY}/"
    async with Client(url) as mcp:
        call = asyncio.create_task(mcp.call_tool("question", {"questions": QUESTIONS[2:]}))
        [request] = await pending(client)
        assert request["sessionID"] == "ses_0000000000001McpToolTest01"
        elsewhere = await client.get("/question", params={"directory": "/somewhere/else"})
        assert elsewhere.json() == []
        await client.post(f"/question/{request['id']}/reply", json={"answers": [["ok"]]})
        assert (await call).structured_content == {"action": "accept", "answers": [["ok"]]}


@pytest.mark.parametrize(
    ("questions", "problem"),
    [
        ([], "at least 1 item"),
        (
            [{"question": "Pick", "header": "Pick", "options": [{"label": "A"}, {"label": "A"}]}],
            "'A' is given twice",
        ),
        ([{"header": "No text", "options": []}], "questions.0.question"),
        (
            [
                {
                    "question": "Pick",
                    "header": "Pick",
                    "options": [{"label": "Abort"}, {"label": "Abort\u200b"}],
                }
            ],
            "requestedSchema.properties.q0.oneOf has the options 'Abort' and 'Abort\\u200b', which a person "
            "cannot tell apart",
        ),
        (
            [{"question": "Fine?", "header": "Fine"}, {"question": "Your password?", "header": "Password"}],
            "requestedSchema.properties.q1 looks like it asks for a password",
        ),
        (
            [
                {
                    "question": "Pick",
                    "header": "Pick",
                    "multiple": True,
                    "options": [{"label": str(n)} for n in range(201)],
                }
            ],
            "requestedSchema.properties.q0.items offers 201 options; at most 200 are allowed",
        ),
    ],
    ids=["none", "repeated-label", "missing-text", "look-alike-labels", "secret", "too-many-options"],
)
async def test_bad_input_is_a_tool_error_and_asks_nothing(server, client, questions, problem):
    async with Client(f"{server.url}/mcp") as mcp:
        result = await mcp.call_tool("question", {"questions": questions})
    assert result.is_error
    assert problem in text_of(result)
    assert (await client.get("/question")).json() == []


async def test_malformed_mcp_requests_get_a_4xx(server):
    async with httpx.AsyncClient(base_url=server.url) as http:
        garbled = await http.post("/mcp", content=b"not json", headers={"Content-Type": "application/json"})
        not_a_stream = await http.get("/mcp", headers={"Accept": "application/json"})
    assert 400 <= garbled.status_code < 500
    assert not_a_stream.status_code == 406


@pytest.mark.parametrize("session", ["abc", "ses%20two", "ses" + "x" * 200])
async def test_a_session_id_is_checked_on_mcp_as_on_post_elicit(server, client, session):
    """One rule for both doors: starts with ``ses``, no whitespace, at most 200 characters."""
    refused = await client.post(
        "/elicit",
        json={"message": "m", "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}}},
        params={"sessionID": session.replace("%20", " ")},
    )
    assert refused.status_code == 400
    async with Client(f"{server.url}/mcp?sessionID={session}") as mcp:
        result = await mcp.call_tool("question", {"questions": QUESTIONS[2:]})
    assert result.is_error
    assert "sessionID" in text_of(result)
    assert (await client.get("/question")).json() == []
