"""Signed webhooks against real loopback receivers: signatures that the Standard Webhooks reference
library (Node's ``standardwebhooks``, not the gateway's) accepts, retries with the same id, and
receivers that fail, never answer or drip their answer beside a good one, which they never delay."""

import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from elicitation_gateway import webhooks
from elicitation_gateway.webhooks import WebhookSender
from tests.helpers import ask, form, pending, until
from tests.receivers import Receiver

pytest_plugins = ["tests.redis_server"]

SECRET = "whsec_" + base64.b64encode(os.urandom(24)).decode()
NODE_TESTS = Path(__file__).resolve().parents[1] / "e2e" / "node"


class Dripper:
    """Accepts the POST, then sends its answer a byte a second: no read ever times out by itself."""

    def __init__(self) -> None:
        self.tries = 0
        self.server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.tries += 1
        try:
            await reader.readuntil(b"\r\n\r\n")
            for byte in b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n" + b"x" * 1000:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(1)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> "Dripper":
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/hooks"


def verified_by_the_reference_library(secret: str, posts: list[dict[str, Any]]) -> list[Any]:
    """What Node's ``standardwebhooks`` makes of each post: its payload, or ``refused: …``."""
    node = shutil.which("node")
    if node is None or not (NODE_TESTS / "node_modules" / "standardwebhooks").exists():
        message = "node and tests/e2e/node's packages (make test installs them) verify the signatures"
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(message)
        pytest.skip(message)
    deliveries = [{"headers": post["headers"], "body": post["body"]} for post in posts]
    done = subprocess.run(
        [node, str(NODE_TESTS / "verify-webhook.mjs")],
        input=json.dumps({"secret": secret, "deliveries": deliveries}),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [line if line.startswith("refused") else json.loads(line) for line in done.stdout.splitlines()]


async def test_each_event_reaches_every_receiver_signed_as_the_specification_says():
    outcomes: list[tuple[str, str]] = []
    async with Receiver(scheme="http") as first, Receiver(scheme="http") as second:
        sender = WebhookSender([first.url, second.url], SECRET, on_outcome=lambda *o: outcomes.append(o))
        sender.start()
        try:
            sender.submit(
                "evt_1", "question.asked", {"id": "que_1", "questions": [{"question": "Deploy? ✓ 🚀"}]}
            )
            sender.submit("evt_2", "question.replied", {"requestID": "que_1", "answers": [["Yes"]]})
            await until(lambda: len(outcomes) == 4)
        finally:
            await sender.stop()
    for receiver in (first, second):
        payloads = verified_by_the_reference_library(SECRET, receiver.posts)
        payloads.sort(key=lambda payload: payload["type"])  # sent side by side: either may come first
        assert [p["type"] for p in payloads] == ["question.asked", "question.replied"]
        assert payloads[0]["data"]["questions"][0]["question"] == "Deploy? ✓ 🚀"
        assert payloads[0]["timestamp"].endswith("Z")
        assert sorted(post["headers"]["webhook-id"] for post in receiver.posts) == ["evt_1", "evt_2"]
        assert all(post["headers"]["Content-Type"] == "application/json" for post in receiver.posts)
    assert sorted(outcomes) == sorted([(first.url, "sent"), (second.url, "sent")] * 2)


async def test_a_wrong_secret_or_an_edited_body_is_refused_by_the_reference_library():
    async with Receiver(scheme="http") as receiver:
        sender = WebhookSender([receiver.url], SECRET)
        sender.start()
        try:
            sender.submit("evt_1", "question.asked", {"id": "que_1"})
            await until(lambda: len(receiver.posts) == 1)
        finally:
            await sender.stop()
    post = receiver.posts[0]
    edited = {**post, "body": post["body"].replace("que_1", "que_2")}
    other_secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    assert verified_by_the_reference_library(SECRET, [post, edited])[1].startswith("refused")
    assert verified_by_the_reference_library(other_secret, [post])[0].startswith("refused")


async def test_a_failed_delivery_is_retried_with_the_same_id_and_signed_anew():
    outcomes: list[str] = []
    async with Receiver(scheme="http", failures=2) as receiver:
        sender = WebhookSender(
            [receiver.url], SECRET, retries=(0.05, 0.05, 0.05), on_outcome=lambda _, o: outcomes.append(o)
        )
        sender.start()
        try:
            sender.submit("evt_1", "question.asked", {"id": "que_1"})
            await until(lambda: len(receiver.posts) == 3)
            await until(lambda: "sent" in outcomes)
        finally:
            await sender.stop()
    assert {post["headers"]["webhook-id"] for post in receiver.posts} == {"evt_1"}
    assert len({post["body"] for post in receiver.posts}) == 1
    assert outcomes == ["retried", "retried", "sent"]
    assert all(
        not str(p).startswith("refused") for p in verified_by_the_reference_library(SECRET, receiver.posts)
    )


async def test_a_delivery_that_keeps_failing_stops_after_its_retries():
    outcomes: list[str] = []
    async with Receiver(scheme="http", failures=100) as receiver:
        sender = WebhookSender(
            [receiver.url], SECRET, retries=(0.01, 0.01), on_outcome=lambda _, o: outcomes.append(o)
        )
        sender.start()
        try:
            sender.submit("evt_1", "question.asked", {"id": "que_1"})
            await until(lambda: "failed" in outcomes)  # each attempt ends in one outcome
        finally:
            await sender.stop()
    assert len(receiver.posts) == 3
    assert outcomes == ["retried", "retried", "failed"]


async def test_receivers_that_never_answer_or_drip_delay_no_other():
    """The hanging and dripping receivers hold every one of their deliveries to the deadline; the good
    receiver has each event before the first of theirs ends all the same, and theirs do end."""
    outcomes: list[tuple[str, str]] = []
    async with (
        Receiver(scheme="http") as good,
        Receiver(scheme="http", hang=True) as hanging,
        Dripper() as dripper,
    ):
        sender = WebhookSender(
            [hanging.url, dripper.url, good.url],
            SECRET,
            retries=(),
            timeout=3.0,
            on_outcome=lambda *o: outcomes.append(o),
        )
        sender.start()
        try:
            for n in range(webhooks.IN_FLIGHT):
                sender.submit(f"evt_{n}", "question.asked", {"id": f"que_{n}"})
            await until(lambda: len(good.posts) == webhooks.IN_FLIGHT)
            assert [o for url, o in outcomes if url != good.url] == [], "a bad receiver's attempt ended first"
            bad_ended = lambda: sum(1 for url, o in outcomes if url != good.url and o == "failed")  # noqa: E731
            await until(lambda: bad_ended() == 2 * webhooks.IN_FLIGHT, 30)
        finally:
            await sender.stop()
    assert len(hanging.posts) == webhooks.IN_FLIGHT
    assert dripper.tries == webhooks.IN_FLIGHT


async def test_a_receiver_whose_queue_is_full_drops_what_it_cannot_hold(monkeypatch):
    monkeypatch.setattr(webhooks, "QUEUE_SIZE", 3)
    monkeypatch.setattr(webhooks, "IN_FLIGHT", 1)
    outcomes: list[str] = []
    async with Receiver(scheme="http", hang=True) as hanging:
        sender = WebhookSender(
            [hanging.url], SECRET, retries=(), timeout=5, on_outcome=lambda _, o: outcomes.append(o)
        )
        sender.start()
        try:
            for n in range(10):
                sender.submit(f"evt_{n}", "question.asked", {"id": f"que_{n}"})
            await until(lambda: len(hanging.posts) == 1)
        finally:
            await sender.stop()
    assert outcomes.count("dropped") == 7  # queued at once: three held, the rest dropped


# ---------------------------------------------------------------------------------------------------
# On a real gateway


async def test_a_gateway_sends_each_question_event_to_its_receivers(make_server):
    """Asked, then replied; asked, then declined: each event once, signed, with the event's own id,
    and counted by outcome in /metrics."""
    async with Receiver(scheme="http") as receiver, Receiver(scheme="http", hang=True) as hanging:
        server = make_server(webhook_urls=f"{hanging.url},{receiver.url}", webhook_secret=SECRET)
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            params = form(
                {"type": "object", "properties": {"deploy": {"type": "boolean", "title": "Deploy now?"}}},
                "Ship it?",
            )
            for answer in ("reply", "reject"):
                tool = ask(http, params)
                [request] = await pending(http)
                if answer == "reply":
                    await http.post(f"/question/{request['id']}/reply", json={"answers": [["Yes"]]})
                else:
                    await http.post(f"/question/{request['id']}/reject")
                await tool
            sent = 'gateway_webhooks_total{outcome="sent",receiver="2"} 4.0'
            metrics = ""

            async def counted() -> bool:  # each delivery once the receiver has answered it
                nonlocal metrics
                metrics = (await http.get("/metrics")).text
                return sent in metrics

            await until(counted, what="four deliveries counted as sent")
    payloads = verified_by_the_reference_library(SECRET, receiver.posts)
    kinds = sorted(p["type"] for p in payloads)
    assert kinds == ["question.asked", "question.asked", "question.rejected", "question.replied"]
    replied = next(p for p in payloads if p["type"] == "question.replied")
    assert replied["data"]["answers"] == [["Yes"]]
    asked = next(p for p in payloads if p["type"] == "question.asked")
    assert asked["data"]["questions"][0]["question"].endswith("Deploy now?")
    ids = [post["headers"]["webhook-id"] for post in receiver.posts]
    assert len(set(ids)) == 4
    assert all(event_id.startswith("evt_") for event_id in ids)
    assert sent in metrics
    assert len(receiver.posts) == 4
    assert "127.0.0.1" not in metrics.split("gateway_webhooks")[1]  # receivers by position, never URL


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"GATEWAY_WEBHOOK_URLS": "http://127.0.0.1:9/hook"}, "GATEWAY_WEBHOOK_URLS needs it"),
        ({"GATEWAY_WEBHOOK_URLS": "ftp://127.0.0.1/hook", "GATEWAY_WEBHOOK_SECRET": SECRET}, "URL number 1"),
        (
            {"GATEWAY_WEBHOOK_URLS": "http://a:token@h/", "GATEWAY_WEBHOOK_SECRET": SECRET},
            "without credentials",
        ),
        ({"GATEWAY_WEBHOOK_SECRET": "whsec_c2hvcnQ="}, "24 to 64 random bytes"),
        ({"GATEWAY_WEBHOOK_SECRET": "not-whsec"}, "must be whsec_"),
    ],
)
def test_webhook_settings_that_cannot_work_stop_the_start(settings, says):
    done = subprocess.run(
        [sys.executable, "-m", "elicitation_gateway", "--port", "0"],
        env={"PATH": "/usr/bin:/bin", **settings},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert says in done.stderr
    assert "token" not in done.stderr


async def test_two_replicas_on_redis_send_each_event_once(make_server, redis_url):
    """Every replica of a shared store sees every event; a receiver gets each once, whichever replica
    was asked and whichever was answered."""
    async with Receiver(scheme="http") as receiver:
        config = {"store": redis_url, "webhook_urls": receiver.url, "webhook_secret": SECRET}
        one, other = make_server(**config), make_server(**config)
        async with (
            httpx.AsyncClient(base_url=one.url, timeout=10) as on_one,
            httpx.AsyncClient(base_url=other.url, timeout=10) as on_other,
        ):
            params = form({"type": "object", "properties": {"go": {"type": "boolean"}}}, "Go?")
            tool = ask(on_one, params)
            [request] = await pending(on_other)
            reply = await on_other.post(f"/question/{request['id']}/reply", json={"answers": [["Yes"]]})
            assert reply.status_code == 200
            await tool
            await until(lambda: len(receiver.posts) >= 2)
        # Stopped as SIGTERM stops them: each replica sends what it has queued before it exits, so a
        # second copy from the replica that did not claim an event would be here by now.
        for server in (one, other):
            await asyncio.to_thread(server.stop)
    sent = [
        sample.value
        for server in (one, other)
        for family in text_string_to_metric_families(server.gateway.metrics.exposition().decode())
        for sample in family.samples
        if sample.name == "gateway_webhooks_total" and sample.labels["outcome"] == "sent"
    ]
    assert sum(sent) == 2  # one replica or the other sent each event, and only one
    assert len(receiver.posts) == 2
    payloads = verified_by_the_reference_library(SECRET, receiver.posts)
    assert sorted(p["type"] for p in payloads) == ["question.asked", "question.replied"]
    assert len({post["headers"]["webhook-id"] for post in receiver.posts}) == 2
