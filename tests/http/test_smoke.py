"""One full round trip through real HTTP, as a newcomer's first elicitation would go, on the
in-memory store and on Redis."""

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.helpers import RFC0010_SCHEMA, ask, form, read_events

pytest_plugins = ["tests.redis_server"]


@pytest.fixture(params=["memory", "redis"])
async def client(request, make_server) -> AsyncIterator[httpx.AsyncClient]:
    backend = {"store": request.getfixturevalue("redis_url")} if request.param == "redis" else {}
    async with httpx.AsyncClient(base_url=make_server(**backend).url, timeout=10) as http:
        yield http


async def test_rfc0010_questionnaire_round_trip(client):
    async with read_events(client) as events:
        tool = ask(client, form(RFC0010_SCHEMA, "Excavator diagnosis"))
        asked = await events.next("question.asked")
        request = asked.properties
        assert [q["header"] for q in request["questions"]] == ["Model", "Symptoms", "Notes"]
        assert request["questions"][1]["multiple"] is True
        assert request["questions"][1]["options"][1] == {"label": "Noise", "description": "Abnormal noise"}
        assert asked.id == asked.data["id"]

        reply = await client.post(
            f"/question/{request['id']}/reply",
            json={"answers": [["SY215C"], ["Black smoke", "Noise"], ["Loud at idle"]]},
        )
        assert reply.status_code == 200
        assert reply.json() is True

        replied = await events.next("question.replied")
        assert replied.properties["requestID"] == request["id"]
        result = (await tool).json()
    assert result == {
        "action": "accept",
        "content": {"q0": "SY215C", "q1": ["Black smoke", "Noise"], "q2": "Loud at idle"},
    }
