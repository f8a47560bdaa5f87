"""Notifications of new questions (GATEWAY_NOTIFY) on a real gateway, with a loopback HTTP receiver
standing in for the notifier (Apprise's ``json://`` URL): delivered, receiver down, receiver slow."""

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web

pytest_plugins = ["tests.redis_server"]

PASSWORD = "answerer-secret-4f9a"
PARAMS = {
    "message": "Deploy the release?\nIt touches the billing service.",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "target": {"type": "string", "title": "Target", "enum": ["staging", "production"]},
            "note": {"type": "string", "title": "Note"},
        },
        "required": ["target"],
    },
}


class Receiver:
    """An HTTP server on a free loopback port that keeps every POST it gets."""

    def __init__(self, delay: float = 0) -> None:
        self.delay = delay
        self.posts: list[dict[str, Any]] = []
        self.received = asyncio.Event()
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.posts.append({"body": await request.text(), "headers": dict(request.headers)})
        self.received.set()
        await asyncio.sleep(self.delay)
        return web.json_response({"ok": True})

    async def start(self) -> "Receiver":
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/hook"


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    started = await Receiver().start()
    yield started
    await started.stop()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


async def metrics_of(http: httpx.AsyncClient) -> str:
    response = await http.get("/metrics")
    assert response.status_code == 200
    return response.text


async def wait_for_metric(http: httpx.AsyncClient, name: str, value: float, within: float) -> str:
    deadline = time.monotonic() + within
    while True:
        text = await metrics_of(http)
        if metric(text, name) >= value or time.monotonic() > deadline:
            return text
        await asyncio.sleep(0.1)


async def ask(http: httpx.AsyncClient) -> str:
    response = await http.post("/elicitations", json=PARAMS)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def test_a_new_question_is_notified_once_with_its_headers_and_a_link(
    make_server, receiver, monkeypatch
):
    monkeypatch.setenv("OPENCODE_SERVER_PASSWORD", PASSWORD)
    server = make_server(notify=[receiver.url], public_url="https://gateway.example.com/")
    assert server.settings.answerer_password is not None  # the secret that must not leak
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        request_id = await ask(http)
        await asyncio.wait_for(receiver.received.wait(), 10)
        text = await wait_for_metric(http, "gateway_notifications_sent_total", 1, within=5)
        await asyncio.sleep(0.3)  # a second post would have come by now
    assert len(receiver.posts) == 1
    raw = receiver.posts[0]["body"]
    body = json.loads(raw)
    assert body["title"] == "Question: Target"
    assert "Deploy the release?" in body["message"]
    assert "- Target" in body["message"]
    assert "- Note" in body["message"]
    assert f"https://gateway.example.com/?question={request_id}" in body["message"]
    assert PASSWORD not in raw
    assert PASSWORD not in json.dumps(receiver.posts[0]["headers"])
    assert "opencode:" not in raw  # no credentials in the link either
    assert metric(text, "gateway_notifications_sent_total") == 1
    assert metric(text, "gateway_notifications_failed_total") == 0


async def test_a_receiver_that_is_down_never_fails_the_ask_and_is_counted(make_server):
    server = make_server(
        notify=[f"json://127.0.0.1:{closed_port()}/hook"], notify_timeout=2, notify_retries=2
    )
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        started = time.monotonic()
        await ask(http)
        assert time.monotonic() - started < 1
        text = await wait_for_metric(http, "gateway_notifications_failed_total", 1, within=15)
    assert metric(text, "gateway_notifications_failed_total") == 1
    assert metric(text, "gateway_notifications_sent_total") == 0


async def test_a_slow_receiver_never_delays_the_ask_and_its_attempts_time_out(make_server):
    slow = await Receiver(delay=30).start()
    try:
        server = make_server(notify=[slow.url], notify_timeout=1, notify_retries=1)
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            started = time.monotonic()
            await ask(http)
            asked_in = time.monotonic() - started
            assert asked_in < 1  # well before the receiver would answer
            text = await wait_for_metric(http, "gateway_notifications_failed_total", 1, within=15)
        assert metric(text, "gateway_notifications_failed_total") == 1
        assert metric(text, "gateway_notifications_sent_total") == 0
        assert len(slow.posts) == 2  # the first attempt and one retry, each cut off at notify_timeout
    finally:
        await slow.stop()


async def test_a_question_still_unanswered_near_its_expiry_is_notified_again(make_server, receiver):
    """``GATEWAY_NOTIFY_REMIND``: a reminder that long before the timeout, only while unanswered, and only
    for questions that last longer than that."""
    server = make_server(notify=[receiver.url], notify_remind=1, public_url="https://gateway.example.com")
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        answered = (await http.post("/elicitations", json=PARAMS, params={"timeout": "1.6"})).json()["id"]
        short = await http.post("/elicitations", json=PARAMS, params={"timeout": "0.8"})  # too short
        assert short.status_code == 201
        reminded = (await http.post("/elicitations", json=PARAMS, params={"timeout": "1.6"})).json()["id"]
        reply = await http.post(f"/question/{answered}/reply", json={"answers": [["staging"], []]})
        assert reply.status_code == 200
        await wait_for_metric(http, "gateway_notifications_sent_total", 4, within=10)
        await asyncio.sleep(1.2)  # every question has expired: no later reminder can come
        text = await metrics_of(http)
    bodies = [json.loads(post["body"]) for post in receiver.posts]
    titles = [body["title"] for body in bodies]
    assert titles == ["Question: Target"] * 3 + ["Reminder: Target"], titles
    assert "Still unanswered: it is cancelled in 1 min." in bodies[3]["message"]
    assert f"?question={reminded}" in bodies[3]["message"]  # not the answered one, nor the short one
    assert metric(text, "gateway_notifications_sent_total") == 4


async def test_queued_notifications_are_sent_before_a_durable_gateway_stops(make_server, tmp_path):
    """On SQLite (or Redis) the questions outlive the process, so what is queued is still sent."""
    slow = await Receiver(delay=0.3).start()
    try:
        server = make_server(notify=[slow.url], store=f"sqlite:///{tmp_path / 'gateway.db'}")
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            for _ in range(3):
                await ask(http)
        await asyncio.to_thread(server.stop)
        assert len(slow.posts) == 3
    finally:
        await slow.stop()


async def test_two_replicas_on_redis_notify_and_remind_once(make_server, receiver, redis_url):
    """Each question is notified by the replica that asked it, and only once in the cluster; the other
    replica, which sees it too, stays quiet. One answered on the other replica gets no reminder."""
    settings = {
        "notify": [receiver.url],
        "notify_remind": 1,
        "store": redis_url,
        "public_url": "https://gw.test",
    }
    first, second = make_server(**settings), make_server(**settings)
    async with (
        httpx.AsyncClient(base_url=first.url, timeout=10) as one,
        httpx.AsyncClient(base_url=second.url, timeout=10) as other,
    ):
        reminded = (await one.post("/elicitations", json=PARAMS, params={"timeout": "1.6"})).json()["id"]
        answered = (await other.post("/elicitations", json=PARAMS, params={"timeout": "1.6"})).json()["id"]
        reply = await one.post(f"/question/{answered}/reply", json={"answers": [["staging"], []]})
        assert reply.status_code == 200
        await asyncio.sleep(2.5)  # both questions are over: any notification would have come
        sent = [
            metric(await metrics_of(client), "gateway_notifications_sent_total") for client in (one, other)
        ]
    bodies = [json.loads(post["body"]) for post in receiver.posts]
    titles = sorted(body["title"] for body in bodies)
    assert titles == ["Question: Target", "Question: Target", "Reminder: Target"]
    [reminder] = [body for body in bodies if body["title"].startswith("Reminder")]
    assert f"?question={reminded}" in reminder["message"]
    assert sent == [2, 1]  # the first asked one and reminded it; the second asked one
