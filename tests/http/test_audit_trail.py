"""The audit trail on a real gateway: ``GET /audit`` (JSON Lines, the tool token, the ``since`` and
``question`` filters), the way each answer came (``via``: page, terminal, opencode, api; the tool's
withdrawal, the gateway's expiry), answers counted per way in ``/metrics``, the retention, a SQLite
gateway restarted keeping its trail, two replicas on one Redis making one chain, and
``elicitation-gateway audit export`` and ``verify`` (a tampered export names its line)."""

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from elicitation_gateway.answerer.connection import AnswererClient
from elicitation_gateway.audit import verify
from tests.helpers import form, text_properties, until
from tests.receivers import Receiver

pytest_plugins = ["tests.redis_server"]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "audit-token-5c1d"
PARAMS = form(text_properties(1), "Deploy?")


async def ask(client: httpx.AsyncClient, **query) -> str:
    response = await client.post("/elicitations", json=PARAMS, params=query)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def trail(client: httpx.AsyncClient, **query) -> list[dict]:
    response = await client.get("/audit", params=query)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/jsonl")
    assert verify(response.content.splitlines()).ok
    return [json.loads(line) for line in response.content.splitlines()]


def of(entries: list[dict], question: str) -> list[tuple[str, str]]:
    return [(entry["event"], entry["via"]) for entry in entries if entry["question"] == question]


async def test_audit_needs_the_tool_token(make_server):
    server = make_server(tool_token=TOKEN)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        assert (await client.get("/audit")).status_code == 401
        assert (await client.get("/audit", headers={"Authorization": "Bearer wrong"})).status_code == 401
        allowed = await client.get("/audit", headers={"Authorization": f"Bearer {TOKEN}"})
        assert allowed.status_code == 200


async def test_each_way_an_answer_came_is_recorded_and_counted(make_server):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        page, terminal, opencode, api, withdrawn, webhook = [await ask(client) for _ in range(6)]
        answer = {"answers": [["v1"]]}
        ways = ((page, "page"), (terminal, "terminal"), (opencode, None), (webhook, "webhook"))
        for question, header in ways:
            headers = {"X-Gateway-Via": header} if header else {}
            response = await client.post(f"/question/{question}/reply", json=answer, headers=headers)
            assert response.status_code == 200, response.text
        response = await client.post(
            f"/question/{api}/reject", json={"action": "decline"}, headers={"X-Gateway-Via": "api"}
        )
        assert response.status_code == 200
        assert (await client.delete(f"/elicitations/{withdrawn}")).status_code == 200

        entries = await trail(client)
        assert of(entries, page) == [("asked", "tool"), ("replied", "page")]
        assert of(entries, terminal) == [("asked", "tool"), ("replied", "terminal")]
        assert of(entries, opencode) == [("asked", "tool"), ("replied", "opencode")]
        assert of(entries, api) == [("asked", "tool"), ("rejected", "api")]
        assert of(entries, webhook) == [("asked", "tool"), ("replied", "webhook")]
        assert of(entries, withdrawn) == [("asked", "tool"), ("withdrawn", "tool")]
        replied = next(e for e in entries if e["question"] == page and e["event"] == "replied")
        assert replied["answers"] == [["v1"]]
        assert replied["who"] is None
        assert replied["at"].endswith("Z")
        assert datetime.fromisoformat(replied["at"])
        assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))

        metrics = (await client.get("/metrics")).text
        for line in (
            'gateway_answers_total{action="accept",via="page"} 1.0',
            'gateway_answers_total{action="accept",via="terminal"} 1.0',
            'gateway_answers_total{action="accept",via="opencode"} 1.0',
            'gateway_answers_total{action="decline",via="api"} 1.0',
            'gateway_answers_total{action="accept",via="webhook"} 1.0',
        ):
            assert line in metrics


async def test_filters_since_and_question(make_server):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        first, second = await ask(client), await ask(client)
        only = await trail(client, question=second)
        assert [(e["event"], e["question"]) for e in only] == [("asked", second)]
        assert len(await trail(client, since="2000-01-01")) == 2
        assert len(await trail(client, since="2000-01-01T00:00:00+02:00")) == 2
        later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        assert await trail(client, since=later) == []
        everything = await trail(client)
        cut = await trail(client, since=everything[1]["at"])
        assert second in {e["question"] for e in cut}
        assert first in {e["question"] for e in everything}
        for bad in ("yesterday", "2026-12-06T05:00:00"):
            response = await client.get("/audit", params={"since": bad})
            assert response.status_code == 400
            assert response.json()["error"] == "invalid_since"
            assert "since" in response.json()["message"]


async def test_expiry_is_the_gateways(make_server):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        question = await ask(client, timeout="0.3")

        async def expired() -> bool:
            return ("expired", "gateway") in of(await trail(client), question)

        await until(expired, what="the expiry recorded")


async def test_retention_drops_old_entries_and_the_rest_verifies(make_server):
    server = make_server(audit_retention=2)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        old = await ask(client)

        async def dropped() -> bool:
            return not of(await trail(client), old)

        await until(dropped, timeout=20, what="the old entries dropped")
        new = await ask(client)
        entries = await trail(client)  # verified: the first entry names the hash it follows
        assert of(entries, new) == [("asked", "tool")]
        assert entries[-1]["seq"] == 2


async def test_a_sqlite_gateway_restarted_keeps_its_trail(make_server, tmp_path):
    store = f"sqlite:///{tmp_path / 'gateway.db'}"
    server = make_server(store=store)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        question = await ask(client)
        assert (
            await client.post(f"/question/{question}/reply", json={"answers": [["x"]]})
        ).status_code == 200
        before = await trail(client)
    server.stop()
    server = make_server(store=store)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        assert (await trail(client))[: len(before)] == before
        later = await ask(client)
        entries = await trail(client)
        assert of(entries, question) == [("asked", "tool"), ("replied", "opencode")]
        assert of(entries, later) == [("asked", "tool")]
        assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))


async def test_two_replicas_on_one_redis_make_one_chain(make_server, make_redis_server):
    redis_url = make_redis_server().start().url  # a Redis of its own: the trail starts empty
    replicas = [make_server(store=redis_url) for _ in range(2)]
    async with (
        httpx.AsyncClient(base_url=replicas[0].url, timeout=30) as one,
        httpx.AsyncClient(base_url=replicas[1].url, timeout=30) as two,
    ):
        asked = await asyncio.gather(*(ask(client) for client in (one, two) for _ in range(10)))
        # Each question answered on the other replica, all at once.
        replies = [
            (two if index < 10 else one).post(f"/question/{question}/reply", json={"answers": [["x"]]})
            for index, question in enumerate(asked)
        ]
        assert all(response.status_code == 200 for response in await asyncio.gather(*replies))

        async def complete() -> bool:
            return len(await trail(one)) == 40 and len(await trail(two)) == 40

        await until(complete, what="every change recorded")
        entries = await trail(one)  # one chain: verified in trail()
        assert [e["seq"] for e in entries] == list(range(1, 41))
        for question in asked:
            assert of(entries, question) == [("asked", "tool"), ("replied", "opencode")]

        # Both replicas time every question: its expiry is recorded once, by the one that made it.
        expiring = await ask(one, timeout="0.3")

        async def expired() -> bool:
            return ("expired", "gateway") in of(await trail(two), expiring)

        await until(expired, what="the expiry recorded")
        # Each replica is done with its timer (fired, or dropped when it heard of the expiry): neither
        # records anything of it from now on.
        await until(
            lambda: all(expiring not in replica.gateway.expiry for replica in replicas),
            what="both replicas done with the expiry",
        )
        assert of(await trail(one), expiring) == [("asked", "tool"), ("expired", "gateway")]


def gateway(*args: str, **options) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "elicitation_gateway", "audit", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        **options,
    )


async def test_export_and_verify(make_server, tmp_path):
    server = make_server(tool_token=TOKEN)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=server.url, timeout=10, headers=headers) as client:
        questions = [await ask(client) for _ in range(3)]
        for question in questions:
            await client.post(f"/question/{question}/reply", json={"answers": [["x"]]})
    exported = tmp_path / "trail.jsonl"
    refused = await asyncio.to_thread(gateway, "export", "--url", server.url, "-o", str(exported))
    assert refused.returncode == 1
    assert "401" in refused.stderr
    done = await asyncio.to_thread(
        gateway, "export", "--url", server.url, "--token", TOKEN, "-o", str(exported)
    )
    assert done.returncode == 0, done.stderr
    assert "6 entries" in done.stderr
    checked = await asyncio.to_thread(gateway, "verify", str(exported))
    assert checked.returncode == 0, checked.stderr
    assert "6 entries" in checked.stdout

    one = tmp_path / "one.jsonl"
    done = await asyncio.to_thread(
        gateway,
        "export",
        "--question",
        questions[1],
        "--since",
        "2000-01-01",
        "-o",
        str(one),
        env={"GATEWAY_URL": server.url, "GATEWAY_TOOL_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert {json.loads(line)["question"] for line in one.read_text().splitlines()} == {questions[1]}

    lines = original = exported.read_text().splitlines()
    tampered = json.loads(lines[3])
    tampered["answers"] = [["y"]]
    lines = [*original[:3], json.dumps(tampered, separators=(",", ":")), *original[4:]]
    exported.write_text("\n".join(lines) + "\n")
    broken = await asyncio.to_thread(gateway, "verify", str(exported))
    assert broken.returncode == 1
    assert "line 4" in broken.stderr

    removed = tmp_path / "removed.jsonl"
    removed.write_text("\n".join(original[:2] + original[3:]) + "\n")
    broken = await asyncio.to_thread(gateway, "verify", str(removed))
    assert broken.returncode == 1
    assert "line 3" in broken.stderr


async def test_a_delivered_notification_is_recorded(make_server):
    receiver = await Receiver().start()
    try:
        server = make_server(notify=[receiver.url], public_url="https://gateway.example.com/")
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            question = await ask(client)

            async def notified() -> bool:
                return ("notified", "gateway") in of(await trail(client), question)

            await until(notified, what="the notification recorded")
            entry = next(e for e in await trail(client) if e["event"] == "notified")
            assert entry["who"] == "1:json"
    finally:
        await receiver.stop()


async def test_the_terminal_answerer_says_it_is_the_terminal_and_who_answered(make_server, tmp_path):
    people = tmp_path / "people.toml"
    people.write_text('[people.carol]\npassword = "carol-pass"\n')
    server = make_server(people=people)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        replied, declined = await ask(client), await ask(client)
        answerer = AnswererClient(server.url, httpx.BasicAuth("carol", "carol-pass"))
        try:
            await answerer.reply(replied, [["v"]])
            await answerer.reject(declined, decline=True)
        finally:
            await answerer.aclose()
        entries = await trail(client)
        assert of(entries, replied) == [("asked", "tool"), ("replied", "terminal")]
        assert of(entries, declined) == [("asked", "tool"), ("rejected", "terminal")]
        assert {e["who"] for e in entries if e["event"] in ("replied", "rejected")} == {"carol"}


async def test_an_escalation_is_recorded_through_the_one_call_for_it(make_server):
    server = make_server()
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        question = await ask(client)
        server.call(server.gateway.auditing.escalated, question, "group:leads")

        async def escalated() -> bool:
            return ("escalated", "gateway") in of(await trail(client), question)

        await until(escalated, what="the escalation recorded")
        entry = next(e for e in await trail(client) if e["event"] == "escalated")
        assert entry["who"] == "group:leads"
