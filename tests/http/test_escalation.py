"""Escalation and people's own notifications on a real gateway: a question that nobody answers in time
also reaches the people of each ``escalate`` step (listed, streamed, answerable, notified once), on the
in-memory store, across a restart on SQLite and across two replicas on Redis; each person with
``notify`` URLs hears of the questions they can see; bad steps are a 400 naming what is wrong."""

import asyncio
import contextlib
import json
import re
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp.client import Client

from elicitation_gateway.client import GatewayClient
from tests.helpers import form, read_events, text_properties, until
from tests.http.test_webhooks import SECRET as WEBHOOK_SECRET
from tests.receivers import Receiver

pytest_plugins = ["tests.redis_server"]

PARAMS = form(text_properties(1), "Roll back the release?")
PASSWORDS = {"alice": "alice-pass", "bob": "bob-pass", "carol": "carol-pass", "dave": "dave-pass"}


@pytest.fixture
async def inboxes() -> AsyncIterator[Receiver]:
    """Everyone's Apprise ``json://`` URL: each person's notifications go to a path of their name."""
    made = await Receiver().start()
    yield made
    await made.stop()


def people_file(tmp_path, inboxes: Receiver):
    """alice (oncall), bob and carol (leads), each with a URL of their own; dave, with none."""
    path = tmp_path / "people.toml"
    path.write_text(
        f"""
[people.alice]
password = "alice-pass"
groups = ["oncall"]
notify = ["{inboxes.url_for("alice")}"]

[people.bob]
password = "bob-pass"
groups = ["leads"]
notify = ["{inboxes.url_for("bob")}"]

[people.carol]
password = "carol-pass"
groups = ["leads"]
notify = ["{inboxes.url_for("carol")}"]

[people.dave]
password = "dave-pass"
"""
    )
    return path


def settings(tmp_path, inboxes: Receiver, **more: Any) -> dict[str, Any]:
    return {"people": people_file(tmp_path, inboxes), "public_url": "https://gw.test", **more}


@contextlib.asynccontextmanager
async def logins(server) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    async with contextlib.AsyncExitStack() as stack:
        made = {"tool": await stack.enter_async_context(httpx.AsyncClient(base_url=server.url, timeout=30))}
        for user, password in PASSWORDS.items():
            login = httpx.AsyncClient(base_url=server.url, timeout=30, auth=(user, password))
            made[user] = await stack.enter_async_context(login)
        yield made


async def create(tool: httpx.AsyncClient, **body: Any) -> str:
    response = await tool.post("/elicitations", json={**PARAMS, **body}, params={"timeout": "60"})
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def listing(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/question")
    assert response.status_code == 200
    return {item["id"]: item for item in response.json()}


async def told_of_a_later_question(
    http: dict[str, httpx.AsyncClient], inboxes: Receiver, *names: str, team: Receiver | None = None
) -> None:
    """Ask everyone a question, and wait until ``names`` (and ``team``'s GATEWAY_NOTIFY target) are
    told of it. Each target sends one notification at a time, in order, so whatever an earlier
    question would have had them told has come by then, however long it took."""
    later = await create(http["tool"])
    await until(
        lambda: (
            all(inboxes.about(name, later) == 1 for name in names)
            and (team is None or team.about("team", later) == 1)
        ),
        what="a later question notified",
    )


async def test_a_step_reaches_its_people_at_its_time_once(make_server, tmp_path, inboxes):
    """Before ``after``, bob (of the step's group) gets a 404 and nothing on his stream; at ``after``
    his live stream gets the question.asked, his listing holds it with the wider ``to``, he and carol
    are notified once, and he can answer it. alice, asked first, is not shown it a second time."""
    server = make_server(**settings(tmp_path, inboxes))
    async with logins(server) as http:
        async with read_events(http["bob"]) as bobs, read_events(http["alice"]) as alices:
            asked_at = time.monotonic()
            request_id = await create(
                http["tool"], to=["alice"], escalate=[{"after": 1.5, "to": ["group:leads"]}]
            )
            assert (await alices.next("question.asked")).properties["id"] == request_id
            assert (await http["bob"].get(f"/question/{request_id}/form")).status_code == 404
            assert request_id not in await listing(http["bob"])
            await until(lambda: inboxes.about("alice", request_id) == 1, what="alice notified when asked")
            assert inboxes.about("bob", request_id) == 0

            escalated = await bobs.next("question.asked", timeout=30)
            assert time.monotonic() - asked_at >= 1.4
            assert escalated.properties["id"] == request_id
            assert escalated.properties["to"] == ["alice", "group:leads"]
            assert (await listing(http["bob"]))[request_id]["to"] == ["alice", "group:leads"]
            assert (await listing(http["alice"]))[request_id]["to"] == ["alice", "group:leads"]
            assert request_id not in await listing(http["dave"])
            await until(
                lambda: inboxes.about("bob", request_id) == inboxes.about("carol", request_id) == 1,
                what="the step's people notified",
            )
            # The step's people are told why it reaches them now; alice's was a first notification.
            bobs_first = inboxes.bodies("bob")[0]
            assert bobs_first["title"].startswith("Escalated: ")
            assert bobs_first["message"].startswith("Nobody answered in 2 s: it now reaches you")
            assert inboxes.bodies("alice")[0]["title"].startswith("Question: ")

            reply = await http["bob"].post(f"/question/{request_id}/reply", json={"answers": [["yes"]]})
            assert reply.status_code == 200, reply.text
            before_the_reply = await alices.through("question.replied")
            assert before_the_reply[-1].properties["requestID"] == request_id
            assert "question.asked" not in [frame.type for frame in before_the_reply]  # shown once
        status = (await http["tool"].get(f"/elicitations/{request_id}")).json()
        assert status["result"]["answeredBy"] == "bob"
        await told_of_a_later_question(http, inboxes, "alice", "bob", "carol")
    assert [inboxes.about(name, request_id) for name in ("alice", "bob", "carol")] == [1, 1, 1]


async def test_each_person_hears_of_the_questions_they_can_see(make_server, tmp_path, inboxes):
    """A question with no ``to`` goes to everyone with URLs (and still to GATEWAY_NOTIFY); one with a
    ``to`` only to the people it reaches."""
    team = await Receiver().start()
    try:
        server = make_server(**settings(tmp_path, inboxes, notify=[team.url_for("team")]))
        async with logins(server) as http:
            everyones = await create(http["tool"])
            leads = await create(http["tool"], to=["group:leads"])
            await until(
                lambda: (
                    all(inboxes.about(name, everyones) for name in ("alice", "bob", "carol"))
                    and inboxes.about("bob", leads) == inboxes.about("carol", leads) == 1
                    and team.about("team", everyones) == 1
                ),
                what="everyone's question to all, the leads' to bob and carol",
            )
            await told_of_a_later_question(http, inboxes, "alice", "bob", "carol", team=team)
            assert inboxes.about("alice", leads) == 0
            assert team.about("team", leads) == 0
            assert [inboxes.about(name, everyones) for name in ("alice", "bob", "carol")] == [1, 1, 1]
    finally:
        await team.stop()


@pytest.mark.parametrize(
    ("escalate", "code", "said"),
    [
        ([{"after": 0, "to": ["bob"]}], "invalid_escalate", "after must be a positive number"),
        ([{"after": "soon", "to": ["bob"]}], "invalid_escalate", "after must be a positive number"),
        ([{"after": 5, "to": []}], "invalid_escalate", "names nobody"),
        ([{"after": n + 1, "to": ["bob"]} for n in range(11)], "invalid_escalate", "at most 10"),
        ([{"after": 5, "to": ["zed"]}], "unknown_recipient", "'zed' names no person"),
        ([{"after": 5, "to": ["group:nobody"]}], "unknown_recipient", "'group:nobody' names no group"),
        ({"after": 5}, "invalid_escalate", "must be a list of steps"),
    ],
)
async def test_bad_steps_are_refused_naming_what_is_wrong(
    make_server, tmp_path, inboxes, escalate, code, said
):
    server = make_server(**settings(tmp_path, inboxes))
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as tool:
        for path in ("/elicit", "/elicitations"):
            response = await tool.post(path, json={**PARAMS, "to": ["alice"], "escalate": escalate})
            assert response.status_code == 400, response.text
            assert code in response.text
            assert said in response.text
        assert server.run(server.gateway.store.count_pending()) == 0


async def test_escalate_needs_a_people_file(make_server):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as tool:
        response = await tool.post(
            "/elicitations", json={**PARAMS, "escalate": [{"after": 5, "to": ["bob"]}]}
        )
    assert response.status_code == 400
    assert "'escalate' names people, but the gateway has no people file" in response.text


async def test_the_escalated_hook_is_told_once_per_step(make_server, tmp_path, inboxes):
    server = make_server(**settings(tmp_path, inboxes))
    told: list[tuple[str, tuple[str, ...]]] = []
    server.gateway.on_escalated(lambda request_id, names: told.append((request_id, names)))
    async with logins(server) as http:
        request_id = await create(
            http["tool"],
            to=["dave"],
            escalate=[{"after": 0.5, "to": ["alice"]}, {"after": 1, "to": ["group:leads", "alice"]}],
        )
        await until(lambda: len(told) == 2, what="both steps")
        assert (await listing(http["bob"]))[request_id]["to"] == ["dave", "alice", "group:leads"]
        # A later question's step, told after both: a step told again would have come before it.
        later = await create(http["tool"], to=["dave"], escalate=[{"after": 0.5, "to": ["bob"]}])
        await until(lambda: len(told) >= 3, what="the later question's step")
    assert told == [(request_id, ("alice",)), (request_id, ("alice", "bob", "carol")), (later, ("bob",))]


async def test_a_restart_on_sqlite_keeps_the_audience_and_notifies_no_step_again(
    make_server, tmp_path, inboxes
):
    """Step one is announced before the restart, step two after it, by the new process: each once."""
    store = {"store": f"sqlite:///{tmp_path / 'gateway.db'}"}
    first = make_server(**settings(tmp_path, inboxes, **store))
    async with logins(first) as http:
        # Step two well after step one: the first process has stopped before it, even on a loaded machine.
        request_id = await create(
            http["tool"], to=["dave"], escalate=[{"after": 1, "to": ["bob"]}, {"after": 8, "to": ["carol"]}]
        )
        await until(lambda: inboxes.about("bob", request_id) == 1, what="step one notified")
    await asyncio.to_thread(first.stop)
    assert inboxes.about("carol", request_id) == 0
    second = make_server(**settings(tmp_path, inboxes, **store))
    async with logins(second) as http:
        assert (await listing(http["bob"]))[request_id]["to"] == ["dave", "bob"]
        assert (await http["carol"].get(f"/question/{request_id}/form")).status_code == 404
        async with read_events(http["carol"]) as carols:
            assert (await carols.next("question.asked", timeout=30)).properties["id"] == request_id
        await until(lambda: inboxes.about("carol", request_id) == 1, what="step two notified")
        assert (await listing(http["carol"]))[request_id]["to"] == ["dave", "bob", "carol"]
        reply = await http["carol"].post(f"/question/{request_id}/reply", json={"answers": [["no"]]})
        assert reply.status_code == 200
        await told_of_a_later_question(http, inboxes, "bob", "carol")
    assert inboxes.about("bob", request_id) == 1
    assert inboxes.about("carol", request_id) == 1


async def test_two_replicas_on_redis_notify_a_step_once(make_server, tmp_path, inboxes, redis_url):
    """Both replicas time the step; one notifies it. bob's stream on the replica that did not ask shows
    it at its time, and he answers it there."""
    config = settings(tmp_path, inboxes, store=redis_url)
    one, other = make_server(**config), make_server(**config)
    async with logins(one) as on_one, logins(other) as on_other:
        async with read_events(on_other["bob"]) as bobs, read_events(on_one["bob"]) as bobs_on_one:
            request_id = await create(on_one["tool"], to=["alice"], escalate=[{"after": 1.5, "to": ["bob"]}])
            assert (await on_other["bob"].get(f"/question/{request_id}/form")).status_code == 404
            escalated = await bobs.next("question.asked", timeout=30)
            assert escalated.properties["id"] == request_id
            # Each replica shows the step on its own streams when its own timer fires: both have.
            assert (await bobs_on_one.next("question.asked", timeout=30)).properties["id"] == request_id
        await until(lambda: inboxes.about("bob", request_id) == 1, what="the step notified")
        assert (await listing(on_one["bob"]))[request_id]["to"] == ["alice", "bob"]
        reply = await on_other["bob"].post(f"/question/{request_id}/reply", json={"answers": [["yes"]]})
        assert reply.status_code == 200
    for server in (one, other):  # what either queued is sent before it stops (the store outlives it)
        await asyncio.to_thread(server.stop)
    assert inboxes.about("bob", request_id) == 1
    assert inboxes.about("alice", request_id) == 1


async def test_the_python_client_the_mcp_tool_and_ask_escalate(make_server, tmp_path, inboxes):
    """Every way of asking takes the steps: each question, for dave, reaches bob at its step."""
    server = make_server(**settings(tmp_path, inboxes))
    questions = [{"question": "Deploy now?", "header": "Deploy", "options": []}]
    async with (
        logins(server) as http,
        GatewayClient(server.url) as gateway,
        Client(f"{server.url}/mcp") as mcp,
    ):
        created = await gateway.create(PARAMS, to=["dave"], escalate=[{"after": 0.5, "to": ["bob"]}])
        call = asyncio.create_task(
            mcp.call_tool(
                "question",
                {"questions": questions, "to": ["dave"], "escalate": [{"after": 0.5, "to": ["bob"]}]},
            )
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *(
                "-m",
                "elicitation_gateway",
                "ask",
                "--url",
                server.url,
                "--to",
                "dave",
                "--escalate",
                "0.5:bob",
            ),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        process.stdin.write(json.dumps(PARAMS).encode())
        process.stdin.close()
        try:
            await until(lambda: len(inboxes.bodies("bob")) == 3, what="bob told of each")
            items = await listing(http["bob"])
            assert len(items) == 3
            assert created in items
            assert all(item["to"] == ["dave", "bob"] for item in items.values())
            for request_id in items:
                await http["bob"].post(f"/question/{request_id}/reply", json={"answers": [["yes"]]})
            out, _ = await asyncio.wait_for(process.communicate(), 30)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert json.loads(out) == {"action": "accept", "content": {"k0": "yes"}, "answeredBy": "bob"}
        assert (await call).structured_content == {"action": "accept", "answers": [["yes"]]}
        refused = await mcp.call_tool(
            "question", {"questions": questions, "to": ["dave"], "escalate": [{"after": 0, "to": ["bob"]}]}
        )
        assert refused.is_error
        assert "after must be a positive number" in refused.content[0].text


async def test_webhooks_get_one_question_asked_whatever_the_steps(make_server, tmp_path, inboxes):
    """A step's question.asked is each process's own, for its streams: receivers of webhooks follow
    the questions as before (asked once, then how it ended)."""
    hooks = f"http://127.0.0.1:{inboxes.port}/hooks"
    server = make_server(**settings(tmp_path, inboxes, webhook_urls=hooks, webhook_secret=WEBHOOK_SECRET))
    async with logins(server) as http:
        request_id = await create(http["tool"], to=["dave"], escalate=[{"after": 0.5, "to": ["bob"]}])
        await until(lambda: inboxes.about("bob", request_id) == 1, what="the step notified")
        await http["bob"].post(f"/question/{request_id}/reply", json={"answers": [["yes"]]})
        await until(lambda: len(inboxes.bodies("hooks")) == 2, what="asked and replied sent")
    # Stopped, the gateway sends what it has queued first: a delivery of the step's question.asked
    # would have been queued before the reply's.
    await asyncio.to_thread(server.stop)
    assert [post["type"] for post in inboxes.bodies("hooks")] == ["question.asked", "question.replied"]


async def test_the_steps_of_everyones_question_only_notify(make_server, tmp_path, inboxes):
    server = make_server(**settings(tmp_path, inboxes))
    async with logins(server) as http, read_events(http["dave"]) as daves:
        request_id = await create(http["tool"], escalate=[{"after": 0.5, "to": ["bob"]}])
        assert (await daves.next("question.asked")).properties["id"] == request_id
        await until(lambda: inboxes.about("bob", request_id) == 2, what="told when asked, then at the step")
        await until(lambda: inboxes.about("alice", request_id) == 1, what="alice told when asked")
        assert "to" not in (await listing(http["dave"]))[request_id]
        reply = await http["bob"].post(f"/question/{request_id}/reply", json={"answers": [["yes"]]})
        assert reply.status_code == 200
        # The step, had it been shown on streams, would have come before the reply.
        shown = [frame.type for frame in await daves.through("question.replied")]
        assert "question.asked" not in shown
    assert inboxes.about("alice", request_id) == 1


async def test_a_persons_notification_carries_one_tap_links_that_answer_as_them(
    make_server, tmp_path, inboxes
):
    """bob's own notification of a yes/no question holds one link per choice, signed for him; the
    tool's ``/elicit`` gets bob's choice and ``answeredBy``, and the audit trail says it came by link.
    carol's links are her own: hers answer as carol, never as bob."""
    yes_no = {
        "message": "Roll back the release?",
        "requestedSchema": {"type": "object", "properties": {"go": {"type": "boolean"}}},
    }
    server = make_server(**settings(tmp_path, inboxes, link_secret="a-link-secret-of-at-least-32-characters"))
    async with logins(server) as http:
        waiting = asyncio.create_task(
            http["tool"].post("/elicit", json={**yes_no, "to": ["group:leads"]}, timeout=60)
        )
        await until(lambda: bool(inboxes.bodies("bob") and inboxes.bodies("carol")), what="notified")
        request_id = (await listing(http["bob"])).popitem()[0]

        def links_in(person: str) -> dict[str, str]:
            text = inboxes.bodies(person)[0]["message"]
            return dict(re.findall(r"^(Yes|No): (https://gw\.test/link/\S+)$", text, re.M))

        bobs, carols = links_in("bob"), links_in("carol")
        assert set(bobs) == set(carols) == {"Yes", "No"}
        assert not set(bobs.values()) & set(carols.values())
        path = bobs["No"].removeprefix("https://gw.test")
        page = await http["tool"].get(path)
        assert page.status_code == 200
        assert "<form" in page.text
        assert not waiting.done()
        answered = await http["tool"].post(path, headers={"Origin": server.url})
        assert answered.status_code == 200, answered.text
        result = (await waiting).json()
        assert result["content"] == {"go": False}
        assert result["answeredBy"] == "bob"
        over = await http["tool"].post(carols["Yes"].removeprefix("https://gw.test"))
        assert over.status_code == 410
        trail = await http["tool"].get("/audit", params={"question": request_id})
        replied = [json.loads(line) for line in trail.text.splitlines() if '"replied"' in line]
        assert [(entry["who"], entry["via"]) for entry in replied] == [("bob", "link")]
