"""Questions addressed to people (``"to"``, GATEWAY_PEOPLE) on a real gateway: listed, streamed, shown and
answerable only for the people and groups they name, not found for anyone else (the shared login
included); who answered on the record, in the tool's result and in ``question.replied``; a ``to`` that
names nobody refused with nothing asked. On the memory, SQLite and Redis stores."""

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator

import httpx
import pytest
from mcp.client import Client
from mcp.types import ElicitRequestFormParams

from elicitation_gateway.client import GatewayClient
from tests.helpers import form, read_events, text_properties

SHARED = "shared-secret-1b7e"
PEOPLE = """
[people.alice]
password = "alice-pass"
groups = ["oncall"]

[people.bob]
password = "bob-pass"
groups = ["oncall"]

[people.carol]
password = "carol-pass"
"""
LOGINS = {"alice": "alice-pass", "bob": "bob-pass", "carol": "carol-pass", "opencode": SHARED}
PARAMS = form(text_properties(1), "Deploy?")


pytest_plugins = ["tests.redis_server"]


@pytest.fixture(params=["memory", "sqlite", "redis"])
def team(request, make_server, tmp_path):
    """A gateway with people on each store: whom a question is for, and who answered it, are kept
    by every backend."""
    path = tmp_path / "people.toml"
    path.write_text(PEOPLE)
    backend = {}
    if request.param == "redis":
        backend = {"store": request.getfixturevalue("redis_url")}
    elif request.param == "sqlite":
        backend = {"store": f"sqlite:///{tmp_path}/gateway.db"}
    return make_server(people=path, answerer_password=SHARED, **backend)


@contextlib.asynccontextmanager
async def clients(server) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """A client for the tool, and one signed in as each person and as the shared login."""
    async with contextlib.AsyncExitStack() as stack:
        made = {"tool": await stack.enter_async_context(httpx.AsyncClient(base_url=server.url, timeout=30))}
        for user, password in LOGINS.items():
            login = httpx.AsyncClient(base_url=server.url, timeout=30, auth=(user, password))
            made[user] = await stack.enter_async_context(login)
        yield made


async def listed(client: httpx.AsyncClient) -> list[str]:
    response = await client.get("/question")
    assert response.status_code == 200
    return [question["id"] for question in response.json()]


async def until_listed(client: httpx.AsyncClient) -> list[str]:
    """The listing once it holds a question (the tool's POST may still be on its way)."""
    async with asyncio.timeout(30):
        while True:
            if found := await listed(client):
                return found
            await asyncio.sleep(0.02)


async def asked(tool: httpx.AsyncClient, to: list[str] | None) -> str:
    body = {**PARAMS, **({"to": to} if to is not None else {})}
    response = await tool.post("/elicitations", json=body)
    assert response.status_code == 201, response.text
    return response.json()["id"]


@pytest.mark.parametrize(
    ("to", "who_sees"),
    [
        (["alice"], {"alice"}),
        (["group:oncall"], {"alice", "bob"}),
        (["carol", "group:oncall"], {"alice", "bob", "carol"}),
        (None, {"alice", "bob", "carol", "opencode"}),
        ([], {"alice", "bob", "carol", "opencode"}),
    ],
)
async def test_a_question_exists_only_for_those_it_is_addressed_to(team, to, who_sees):
    async with clients(team) as http:
        request_id = await asked(http["tool"], to)
        for user in LOGINS:
            sees = request_id in await listed(http[user])
            assert sees == (user in who_sees), user
            form_of = await http[user].get(f"/question/{request_id}/form")
            assert form_of.status_code == (200 if user in who_sees else 404), user
            if user not in who_sees:  # as for an unknown id, in OpenCode's shape
                unknown_id = "que_00000000000000000000000000"
                unknown = (await http[user].get(f"/question/{unknown_id}/form")).text
                assert form_of.text == unknown.replace(unknown_id, request_id)
                replied = await http[user].post(f"/question/{request_id}/reply", json={"answers": [["x"]]})
                assert replied.status_code == 404
                rejected = await http[user].post(f"/question/{request_id}/reject")
                assert rejected.status_code == 404
        assert request_id in await listed(http[next(iter(who_sees))])  # still pending: nothing changed


async def test_the_tool_learns_who_answered(team):
    async with clients(team) as http:
        tool = asyncio.create_task(http["tool"].post("/elicit", json={**PARAMS, "to": ["group:oncall"]}))
        pending = await until_listed(http["bob"])
        assert (await http["bob"].post(f"/question/{pending[0]}/reply", json={"answers": [["ship"]]})).json()
        result = (await tool).json()
        assert result == {"action": "accept", "content": {"k0": "ship"}, "answeredBy": "bob"}
        status = (await http["tool"].get(f"/elicitations/{pending[0]}")).json()
        assert status["result"]["answeredBy"] == "bob"


async def test_a_decline_is_on_record_too_and_the_shared_login_answers_as_nobody(team):
    async with clients(team) as http:
        mine = await asked(http["tool"], ["carol"])
        await http["carol"].post(f"/question/{mine}/reject", json={"action": "decline"})
        status = (await http["tool"].get(f"/elicitations/{mine}")).json()
        assert status["result"] == {"action": "decline", "answeredBy": "carol"}
        everyones = await asked(http["tool"], None)
        await http["opencode"].post(f"/question/{everyones}/reply", json={"answers": [["fine"]]})
        status = (await http["tool"].get(f"/elicitations/{everyones}")).json()
        assert status["result"] == {"action": "accept", "content": {"k0": "fine"}}


async def test_streams_carry_only_the_questions_addressed_to_their_person(team):
    async with (
        clients(team) as http,
        read_events(http["alice"]) as alice,
        read_events(http["carol"], "/global/event") as carol,
    ):
        for_alice = await asked(http["tool"], ["alice"])
        everyones = await asked(http["tool"], None)
        assert (await alice.next("question.asked")).properties["id"] == for_alice
        assert (await alice.next("question.asked")).properties["id"] == everyones
        # carol's first question.asked is everyone's: alice's was never sent to her
        seen = await carol.next("question.asked")
        assert seen.properties["id"] == everyones
        assert "to" not in seen.properties
        await http["alice"].post(f"/question/{for_alice}/reply", json={"answers": [["yes"]]})
        await http["carol"].post(f"/question/{everyones}/reply", json={"answers": [["no"]]})
        replied = await alice.next("question.replied")
        assert replied.properties["requestID"] == for_alice
        assert replied.properties["answeredBy"] == "alice"
        assert (await alice.next("question.replied")).properties["answeredBy"] == "carol"
        only = await carol.next("question.replied")  # alice's reply never reaches carol
        assert only.properties["requestID"] == everyones


async def test_a_stream_replaying_after_a_reconnect_shows_the_finish_of_what_it_showed(team):
    """alice saw her question asked, lost her stream, and it was answered meanwhile: replaying from
    the question.asked she saw, her new stream gets its question.replied (with the ``to`` it finished
    with). carol, replaying from the same point, gets nothing of it."""
    async with clients(team) as http:
        async with read_events(http["alice"]) as before:
            for_alice = await asked(http["tool"], ["alice"])
            seen = await before.next("question.asked")
        await http["alice"].post(f"/question/{for_alice}/reply", json={"answers": [["yes"]]})
        replay = {"Last-Event-ID": seen.id}
        async with read_events(http["alice"], headers=replay) as after:
            replied = await after.next("question.replied")
            assert replied.properties["requestID"] == for_alice
            assert replied.properties["to"] == ["alice"]
        async with read_events(http["carol"], headers=replay) as carols:
            await carols.no_frame(within=0.5, type="question.replied")


async def test_the_listing_shows_whom_a_question_is_for(team):
    async with clients(team) as http:
        request_id = await asked(http["tool"], ["carol", "group:oncall", "carol"])
        [question] = (await http["alice"].get("/question")).json()
        assert question["id"] == request_id
        assert question["to"] == ["carol", "group:oncall"]


@pytest.mark.parametrize(
    ("to", "status", "says"),
    [
        (["dave"], 400, "'dave' names no person of the people file"),
        (["alice", "group:leads"], 400, "'group:leads' names no group of the people file"),
        ("alice", 400, '"to" must be a list of names'),
        ([1], 400, '"to" must be a list of names'),
        (["a b"], 400, "which is no name of a person or group"),
        (["x"] * 51, 400, "at most 50"),
    ],
)
async def test_a_to_that_names_nobody_is_refused_and_nothing_is_asked(team, to, status, says):
    async with clients(team) as http:
        response = await http["tool"].post("/elicitations", json={**PARAMS, "to": to})
        assert response.status_code == status
        assert says in response.json()["message"]
        for user in LOGINS:
            assert await listed(http[user]) == []


async def test_a_to_on_a_gateway_without_people_is_refused(client):
    response = await client.post("/elicitations", json={**PARAMS, "to": ["alice"]})
    assert response.status_code == 400
    assert response.json()["error"] == "unknown_recipient"
    assert "no people file (GATEWAY_PEOPLE)" in response.json()["message"]
    assert (await client.get("/question")).json() == []


async def test_the_python_client_addresses_a_question(team):
    async with clients(team) as http, GatewayClient(team.url) as gateway:
        request_id = await gateway.create(PARAMS, to=["bob"])
        assert await listed(http["bob"]) == [request_id]
        assert await listed(http["alice"]) == []


async def test_the_python_client_learns_who_answered_and_mcp_servers_do_not(team):
    async with clients(team) as http, GatewayClient(team.url) as gateway:
        asking = asyncio.create_task(gateway.elicit(PARAMS, to=["group:oncall"]))
        [request_id] = await until_listed(http["alice"])
        await http["alice"].post(f"/question/{request_id}/reply", json={"answers": [["ship"]]})
        result = await asking
        assert (result.action, result.content, result.answered_by) == ("accept", {"k0": "ship"}, "alice")
        asking = asyncio.create_task(gateway.elicit(PARAMS, to=["carol"]))
        [request_id] = await until_listed(http["carol"])
        await http["carol"].post(f"/question/{request_id}/reject", json={"action": "decline"})
        assert ((await asking).action, (await asking).answered_by) == ("decline", "carol")
        # An MCP server asking through the client's elicitation callback gets the result as MCP has it.
        answering = asyncio.create_task(gateway.elicitation_callback(None, ElicitRequestFormParams(**PARAMS)))
        [request_id] = await until_listed(http["opencode"])
        await http["bob"].post(f"/question/{request_id}/reply", json={"answers": [["go"]]})
        sent = (await answering).model_dump(mode="json", by_alias=True, exclude_none=True)
        assert sent == {"action": "accept", "content": {"k0": "go"}}


async def test_the_mcp_question_tool_addresses_a_question(team):
    questions = [{"question": "Deploy now?", "header": "Deploy", "options": []}]
    async with clients(team) as http, Client(f"{team.url}/mcp") as mcp:
        call = asyncio.create_task(
            mcp.call_tool("question", {"questions": questions, "to": ["group:oncall"]})
        )
        [request_id] = await until_listed(http["alice"])
        assert await listed(http["carol"]) == []
        await http["alice"].post(f"/question/{request_id}/reply", json={"answers": [["yes"]]})
        result = await call
        assert result.structured_content == {"action": "accept", "answers": [["yes"]]}  # as ever
        refused = await mcp.call_tool("question", {"questions": questions, "to": ["nobody"]})
        assert refused.is_error
        assert "'nobody' names no person" in refused.content[0].text


async def test_ask_on_the_command_line_addresses_a_question(team):
    async with clients(team) as http:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "elicitation_gateway",
            "ask",
            "--url",
            team.url,
            "--to",
            "carol",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        process.stdin.write(json.dumps(PARAMS).encode())
        process.stdin.close()
        try:
            [request_id] = await until_listed(http["carol"])
            assert await listed(http["alice"]) == []
            await http["carol"].post(f"/question/{request_id}/reply", json={"answers": [["go"]]})
            out, _ = await asyncio.wait_for(process.communicate(), 30)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert json.loads(out) == {"action": "accept", "content": {"k0": "go"}, "answeredBy": "carol"}
