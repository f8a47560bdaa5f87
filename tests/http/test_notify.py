"""Notifications of new questions (GATEWAY_NOTIFY) on a real gateway, with loopback HTTP receivers
standing in for the targets (Apprise's ``json://`` URL): delivered, down, slow, failing, and one that
never finishes answering beside a good one."""

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import child_processes, until
from tests.receivers import Receiver, question_of

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


class DripTarget:
    """A webhook that never finishes answering: it reads the request, then sends one byte of a status
    line every half second for as long as the connection lasts. It never closes a connection itself,
    so each one that ends was ended by the gateway."""

    def __init__(self) -> None:
        self.bodies: list[str] = []
        self.open = 0
        self.hung_up = 0  # connections the gateway ended
        self.port = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._stopping = False

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        self._writers.add(writer)
        self.open += 1
        drip = asyncio.create_task(self._drip(writer))
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            self.bodies.append((await reader.readexactly(length)).decode())
            await reader.read()  # until the gateway hangs up
            self.hung_up += not self._stopping
        except (ConnectionError, asyncio.IncompleteReadError):
            self.hung_up += not self._stopping
        finally:
            drip.cancel()
            self.open -= 1
            self._writers.discard(writer)
            writer.close()

    async def _drip(self, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while True:
                writer.write(b"H")
                await writer.drain()
                await asyncio.sleep(0.5)

    async def start(self) -> "DripTarget":
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Hang up on whatever is still open (a gateway that failed to), and stop listening."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            await asyncio.gather(*self._handlers, return_exceptions=True)

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/hook"

    def asked(self) -> list[str]:
        return [question_of(body) for body in self.bodies]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    started = await Receiver().start()
    yield started
    await started.stop()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def notifications(text: str) -> dict[tuple[str, str], float]:
    """``gateway_notifications_total`` of a /metrics text, by (target, outcome)."""
    counts: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "gateway_notifications_total":
                counts[sample.labels["target"], sample.labels["outcome"]] = sample.value
    return counts


def outcomes_of(counts: dict[tuple[str, str], float], target: str) -> dict[str, float]:
    return {outcome: value for (label, outcome), value in counts.items() if label == target}


def outcomes(text: str, target: str = "1:json") -> dict[str, float]:
    """The outcomes of one target's notifications: ``{"sent": 1.0, "failed": 0.0, ...}``."""
    return outcomes_of(notifications(text), target)


async def metrics_of(http: httpx.AsyncClient) -> str:
    response = await http.get("/metrics")
    assert response.status_code == 200
    return response.text


async def wait_for_outcome(
    http: httpx.AsyncClient, outcome: str, value: float, within: float, target: str = "1:json"
) -> str:
    """The /metrics text once ``target`` has counted ``value`` notifications with ``outcome``."""
    text = ""

    async def counted() -> bool:
        nonlocal text
        text = await metrics_of(http)
        return outcomes(text, target).get(outcome, 0) >= value

    await until(counted, timeout=within, what=f"{value:g} notifications {outcome} to target {target}")
    return text


async def ended(http: httpx.AsyncClient, request_id: str) -> None:
    """Until the question has ended (a long poll on its result)."""
    response = await http.get(f"/elicitations/{request_id}", params={"wait": "20"}, timeout=30)
    assert response.json()["status"] != "pending", response.text


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
        text = await wait_for_outcome(http, "sent", 1, within=5)
        # A target sends one notification at a time, in order: a second post of the first question
        # would come before the next question's.
        later = await ask(http)
        await until(lambda: later in receiver.asked(), what="the next question announced")
    assert receiver.asked() == [request_id, later]
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
    assert outcomes(text) == {"sent": 1, "failed": 0, "skipped": 0, "dropped": 0}


async def test_a_receiver_that_is_down_never_fails_the_ask_and_is_counted(make_server):
    server = make_server(
        notify=[f"json://127.0.0.1:{closed_port()}/hook"], notify_timeout=2, notify_retries=2
    )
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        started = time.monotonic()
        await ask(http)
        assert time.monotonic() - started < 1
        text = await wait_for_outcome(http, "failed", 1, within=15)
    assert outcomes(text) == {"sent": 0, "failed": 1, "skipped": 0, "dropped": 0}


async def test_a_slow_receiver_never_delays_the_ask_and_its_attempts_time_out(make_server):
    slow = await Receiver(delay=30).start()
    try:
        server = make_server(notify=[slow.url], notify_timeout=1, notify_retries=1)
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            started = time.monotonic()
            await ask(http)
            asked_in = time.monotonic() - started
            assert asked_in < 1  # well before the receiver would answer
            text = await wait_for_outcome(http, "failed", 1, within=15)
        assert outcomes(text) == {"sent": 0, "failed": 1, "skipped": 0, "dropped": 0}
        assert len(slow.posts) == 2  # the first attempt and one retry, each cut off at notify_timeout
    finally:
        await slow.stop()


async def test_a_question_still_unanswered_near_its_expiry_is_notified_again(make_server, receiver):
    """``GATEWAY_NOTIFY_REMIND``: a reminder that long before the timeout, only while unanswered, and only
    for questions that last longer than that."""
    server = make_server(notify=[receiver.url], notify_remind=1, public_url="https://gateway.example.com")
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        # A first question, answered once announced, starts the worker process: the timed ones then
        # find it warm.
        warm_up = await ask(http)
        await until(lambda: len(receiver.posts) == 1, what="the first question announced")
        await http.post(f"/question/{warm_up}/reply", json={"answers": [["staging"], []]})
        receiver.posts.clear()
        # Reminded 1 s before the end, 2.6 s after asking: the time the test has to answer the first.
        answered = (await http.post("/elicitations", json=PARAMS, params={"timeout": "3.6"})).json()["id"]
        short = await http.post("/elicitations", json=PARAMS, params={"timeout": "0.8"})  # too short
        assert short.status_code == 201
        reminded = (await http.post("/elicitations", json=PARAMS, params={"timeout": "3.6"})).json()["id"]
        # Answered once announced: a question finished before its notification goes out is not announced.
        await until(lambda: len(receiver.posts) == 3, what="the three questions announced")
        reply = await http.post(f"/question/{answered}/reply", json={"answers": [["staging"], []]})
        assert reply.status_code == 200
        await wait_for_outcome(http, "sent", 5, within=10)
        await ended(http, reminded)  # the last to end: no later reminder can come
        text = await metrics_of(http)
    bodies = [json.loads(post["body"]) for post in receiver.posts]
    titles = [body["title"] for body in bodies]
    assert titles == ["Question: Target"] * 3 + ["Reminder: Target"], titles
    assert "Still unanswered: it is cancelled in 1 s." in bodies[3]["message"]
    assert f"?question={reminded}" in bodies[3]["message"]  # not the answered one, nor the short one
    assert outcomes(text)["sent"] == 5  # the first question's, too


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
        # A first question on each, answered once announced, starts each replica's worker process.
        for client in (one, other):
            warm_up = await ask(client)
            await until(lambda: len(receiver.posts) == 1, what="the first question announced")
            await client.post(f"/question/{warm_up}/reply", json={"answers": [["staging"], []]})
            receiver.posts.clear()
        reminded = (await one.post("/elicitations", json=PARAMS, params={"timeout": "3.6"})).json()["id"]
        answered = (await other.post("/elicitations", json=PARAMS, params={"timeout": "3.6"})).json()["id"]
        await until(lambda: len(receiver.posts) == 2, what="both questions announced")
        reply = await one.post(f"/question/{answered}/reply", json={"answers": [["staging"], []]})
        assert reply.status_code == 200
        await until(lambda: len(receiver.posts) == 3, timeout=10, what="the reminder")
        await ended(one, reminded)  # both questions are over: any notification would have come
        sent = [outcomes(await metrics_of(client))["sent"] for client in (one, other)]
    bodies = [json.loads(post["body"]) for post in receiver.posts]
    titles = sorted(body["title"] for body in bodies)
    assert titles == ["Question: Target", "Question: Target", "Reminder: Target"]
    [reminder] = [body for body in bodies if body["title"].startswith("Reminder")]
    assert f"?question={reminded}" in reminder["message"]
    assert sent == [3, 2]  # each its first; the first asked one and reminded it; the second asked one


# ---------------------------------------------------------------------------------------------------
# Each target on its own


async def test_a_target_that_never_finishes_answering_holds_up_no_other(make_server, receiver):
    """A target that drips its answer out a byte at a time (so that no socket timeout ever fires) beside
    a good one, over more questions than the loop's default executor has threads: the good one gets
    every notification once, in order, while the other is stuck; each stuck attempt's worker process is
    killed at ``notify_timeout`` (the drip target sees the gateway hang up), the loop's default executor
    stays free, the gateway never has more than a worker for each target, and at shutdown no
    connection and no worker process is left, not even unreaped."""
    questions = 12  # the default executor has min(32, CPUs + 4) threads
    before = child_processes()  # the gateway runs in this process: its workers are this one's children
    drip = await DripTarget().start()
    try:
        server = make_server(
            notify=[receiver.url, drip.url],
            notify_timeout=1,
            notify_retries=1,
            public_url="https://gw.test",
        )
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            asked = [await ask(http) for _ in range(questions)]
            await until(lambda: len(receiver.posts) >= questions, timeout=10, what="every announcement")
            # Its worker may have started a moment after the good target's, which was done in milliseconds.
            await until(lambda: bool(drip.bodies), what="the drip target tried")
            assert len(drip.bodies) < 2 * questions  # still stuck on its first questions
            assert receiver.asked() == asked  # each once, in order

            async def default_executor_runs() -> str:
                return await asyncio.to_thread(lambda: "free")

            assert await asyncio.to_thread(server.run, default_executor_runs(), 5) == "free"
            # Each stuck attempt ends at its deadline: the gateway hangs up on the drip.
            await until(lambda: drip.hung_up >= 3, timeout=20, what="stuck attempts cut off")
            assert len(child_processes() - before) <= 2
        await asyncio.to_thread(server.stop)
        await until(lambda: drip.open == 0, what="every drip connection closed by the gateway")
        assert child_processes() <= before, "a notification worker left after stop"
        assert receiver.asked() == asked  # never again, up to the end
        counts = notifications(server.gateway.metrics.exposition().decode())
        assert outcomes_of(counts, "1:json") == {"sent": questions, "failed": 0, "skipped": 0, "dropped": 0}
        stuck = outcomes_of(counts, "2:json")
        assert stuck["sent"] == 0
        assert sum(stuck.values()) == questions  # one outcome each: failed, skipped or dropped
    finally:
        await drip.stop()


async def test_a_question_answered_before_a_slow_target_gets_to_it_is_not_sent_there_late(
    make_server, receiver
):
    slow = await Receiver(delay=1.5).start()
    try:
        server = make_server(notify=[receiver.url, slow.url], notify_timeout=5, public_url="https://gw.test")
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            first, second = await ask(http), await ask(http)
            await until(lambda: len(slow.posts) == 1, what="the slow target busy with the first")
            await until(lambda: len(receiver.posts) == 2, what="the good target done with both")
            reply = await http.post(f"/question/{second}/reply", json={"answers": [["staging"], []]})
            assert reply.status_code == 200
            text = await wait_for_outcome(http, "skipped", 1, within=10, target="2:json")
            assert outcomes(text, "2:json") == {"sent": 1, "failed": 0, "skipped": 1, "dropped": 0}
            assert outcomes(text, "1:json") == {"sent": 2, "failed": 0, "skipped": 0, "dropped": 0}
        assert slow.asked() == [first]
        assert receiver.asked() == [first, second]
    finally:
        await slow.stop()


async def test_a_failing_target_is_retried_without_sending_again_to_the_others(make_server, receiver):
    flaky = await Receiver(failures=2).start()
    try:
        server = make_server(notify=[flaky.url, receiver.url], notify_retries=3, public_url="https://gw.test")
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            asked = await ask(http)
            await wait_for_outcome(http, "sent", 1, within=10, target="1:json")
            # Each target sends one notification at a time, in order: once both have the next
            # question, a repeat of the first to the good target would have come before it.
            later = await ask(http)
            await wait_for_outcome(http, "sent", 2, within=10, target="1:json")
            text = await wait_for_outcome(http, "sent", 2, within=10, target="2:json")
        assert flaky.asked() == [asked] * 3 + [later]  # two 500s, then accepted; the next at once
        assert receiver.asked() == [asked, later]
        assert outcomes(text, "1:json") == {"sent": 2, "failed": 0, "skipped": 0, "dropped": 0}
        assert outcomes(text, "2:json") == {"sent": 2, "failed": 0, "skipped": 0, "dropped": 0}
    finally:
        await flaky.stop()


async def test_targets_are_named_by_position_and_scheme_never_by_their_secrets(make_server, receiver, caplog):
    """A URL Apprise cannot parse is an ERROR naming its position; a gateway made in-process serves
    and notifies the others (the command stops before it listens: tests/e2e/test_cli.py), and no
    metric or log line holds anything of a URL but its scheme."""
    caplog.set_level(logging.DEBUG)
    secret_url = f"json://hook-user:pw-5ecret@127.0.0.1:{receiver.port}/hook-5ecret"
    unparseable = ["bogus://tok-5ecret-two/x", "tok-5ecret-three"]
    server = make_server(notify=[secret_url, *unparseable, receiver.url], public_url="https://gw.test")
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        asked = await ask(http)
        text = await wait_for_outcome(http, "sent", 1, within=10, target="4:json")
        text = await wait_for_outcome(http, "sent", 1, within=10, target="1:json")
    assert receiver.asked() == [asked, asked]
    assert {target for target, _ in notifications(text)} == {"1:json", "4:json"}
    assert "5ecret" not in text
    assert "hook-user" not in text
    errors = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
    assert "GATEWAY_NOTIFY URL number 2 is not one Apprise understands: nothing is sent to it" in errors
    assert "GATEWAY_NOTIFY URL number 3 is not one Apprise understands: nothing is sent to it" in errors
    for record in caplog.records:  # the gateway's lines, and Apprise's where the gateway shows them
        if record.name.startswith("elicitation_gateway") or (
            record.name.startswith(("apprise", "uvicorn")) and record.levelno >= logging.INFO
        ):
            assert "5ecret" not in record.getMessage(), record.getMessage()


@pytest.mark.parametrize("public_url", [None, "https://gw.test"])
async def test_notifying_without_a_public_url_is_warned_of(make_server, receiver, caplog, public_url):
    caplog.set_level(logging.INFO)
    make_server(notify=[receiver.url], public_url=public_url)
    warned = [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "GATEWAY_PUBLIC_URL" in record.getMessage()
    ]
    assert warned == (
        []
        if public_url
        else [
            "notifications carry no link to the question: set GATEWAY_PUBLIC_URL to the address people "
            "open the gateway at"
        ]
    )
