"""Several gateway processes on one real Redis, as a deployment behind a load balancer runs them.

Each replica is ``python -m elicitation_gateway --port 0 --store redis://...``, a process of its own.
The tests ask on
one replica, watch and answer on others, kill and restart replicas, and stop Redis under them.
"""

import asyncio
import contextlib
import re
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from mcp.client import Client

from tests.helpers import COLOR_SCHEMA, ask, form, read_events
from tests.processes import GatewayProcess

pytest_plugins = ["tests.redis_server"]

ROOT = Path(__file__).resolve().parents[2]
GREEN = {"answers": [["green"], ["3"]]}
RED = {"answers": [["red"], ["1"]]}


class Replica(GatewayProcess):
    """One gateway process on ``store``."""

    def __init__(self, name: str, store: str, directory: Path, env: dict[str, str] | None = None) -> None:
        super().__init__(
            name, directory, ["--store", store], {"GATEWAY_DIRECTORY": "/srv/replicas", **(env or {})}
        )
        self.store = store


def start_replicas(
    names: str, store: str, directory: Path, env: dict[str, str] | None = None
) -> list[Replica]:
    replicas = [Replica(name, store, directory, env) for name in names]
    for replica in replicas:  # start them side by side: each takes a moment to import
        replica.launch()
    return [replica.wait_until_listening() for replica in replicas]


@pytest.fixture(scope="module")
def cluster(redis_server, tmp_path_factory) -> Iterator[list[Replica]]:
    """Replicas A, B and C on the session's Redis, kept for the module (they take a while to start)."""
    replicas = start_replicas("ABC", redis_server.url, tmp_path_factory.mktemp("replicas"))
    yield replicas
    for replica in replicas:
        replica.kill()


@pytest.fixture
def replicas(cluster: list[Replica], redis_url: str) -> list[Replica]:
    """A, B and C running, on an empty Redis."""
    for replica in cluster:
        if not replica.running:
            replica.start()
    return cluster


@pytest.fixture
async def clients(replicas: list[Replica]) -> AsyncIterator[list[httpx.AsyncClient]]:
    async with replicas[0].client() as a, replicas[1].client() as b, replicas[2].client() as c:
        yield [a, b, c]


async def create(client: httpx.AsyncClient, **query: Any) -> str:
    response = await client.post("/elicitations", json=form(COLOR_SCHEMA), params=query)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def listed(client: httpx.AsyncClient) -> list[str]:
    response = await client.get("/question")
    assert response.status_code == 200, response.text
    return [request["id"] for request in response.json()]


async def until(check: Callable[[], Any], timeout: float = 15) -> Any:
    """Poll ``check`` (async) until it returns something truthy."""
    async with asyncio.timeout(timeout):
        while not (result := await check()):  # noqa: ASYNC110  (another process's state)
            await asyncio.sleep(0.1)
    return result


async def logged(replica: Replica, text: str) -> bool:
    return replica.logged(text)


# ---------------------------------------------------------------------------------------------------


async def test_asked_on_one_replica_watched_on_another_answered_on_a_third(clients):
    """The tool on A gets the content answered on C; A, B and C send the same events, ids and order."""
    a, b, c = clients
    async with read_events(a) as on_a, read_events(b) as on_b, read_events(c) as on_c:
        tool = ask(a, form(COLOR_SCHEMA, "Paint job"))
        asked = await on_b.next("question.asked")
        request_id = asked.properties["id"]
        assert await listed(c) == [request_id]
        answered = await c.post(f"/question/{request_id}/reply", json=GREEN)
        assert (answered.status_code, answered.json()) == (200, True)
        assert (await tool).json() == {"action": "accept", "content": {"color": "green", "count": 3}}
        for events in (on_a, on_b, on_c):
            await events.next("question.replied")
    seen = [
        [(frame.id, frame.type, frame.data) for frame in events.seen if frame.type.startswith("question.")]
        for events in (on_a, on_b, on_c)
    ]
    assert seen[0] == seen[1] == seen[2]
    assert [frame_type for _, frame_type, _ in seen[0]] == ["question.asked", "question.replied"]
    assert all(frame_id == data["id"] for frame_id, _, data in seen[0])


async def test_last_event_id_replays_on_another_replica(clients):
    a, b, c = clients
    async with read_events(b) as on_b:  # a client that stays, for reference
        async with read_events(a) as on_a:
            first = await create(b)
            last_seen = await on_a.next("question.asked")
        # the client on A is away while these happen
        second = await create(c)
        await b.post(f"/question/{first}/reply", json=GREEN)
        missed = [await on_b.next() for _ in range(3)][1:]
    async with read_events(c, headers={"Last-Event-ID": last_seen.id}) as resumed:
        replayed = [await resumed.next() for _ in range(2)]
        await resumed.no_frame(within=0.3, type="question.asked")
    assert [(f.id, f.type) for f in replayed] == [(f.id, f.type) for f in missed]
    assert (replayed[0].properties["id"], replayed[1].properties["requestID"]) == (second, first)


async def test_a_replica_killed_mid_question_loses_nothing(replicas, clients):
    """The tool re-polls on another replica; the question stays listed and answerable, also on the
    restarted replica, which announces it to a new subscriber."""
    a, b, c = clients
    request_id = await create(a)
    replicas[0].kill()

    assert (await b.get(f"/elicitations/{request_id}")).json() == {"id": request_id, "status": "pending"}
    assert await listed(c) == [request_id]

    async with replicas[0].start().client() as restarted, read_events(restarted) as fresh:
        announced = await fresh.next("question.asked")
        assert (announced.id, announced.properties["id"]) == ("", request_id)
        assert await listed(restarted) == [request_id]
        answered = await restarted.post(f"/question/{request_id}/reply", json=GREEN)
        assert answered.status_code == 200
    result = (await b.get(f"/elicitations/{request_id}")).json()
    assert result["status"] == "answered"
    assert result["result"] == {"action": "accept", "content": {"color": "green", "count": 3}}


async def test_a_timeout_fires_once_for_the_whole_cluster(replicas, clients, redis_url):
    """The replica that asked is gone; the others still expire the question, exactly once."""
    a, b, c = clients
    async with read_events(b) as on_b:
        request_id = await create(a, timeout=1.5)
        await on_b.next("question.asked")
        replicas[0].kill()
        rejected = await on_b.next("question.rejected", timeout=10)
        assert rejected.properties["requestID"] == request_id
        await on_b.no_frame(within=1.0, type="question.rejected")  # the other timers found it finished
    body = (await c.get(f"/elicitations/{request_id}")).json()
    assert (body["status"], body["result"]) == ("expired", {"action": "cancel"})
    assert await listed(b) == []


async def test_a_replica_killed_while_its_tool_waits_has_its_question_withdrawn_by_another(
    make_redis_server, tmp_path
):
    """SIGKILL: nobody can collect that answer any more. Another replica finds the killed one's
    liveness entry lapsed and withdraws its question (tools get nothing, answerers see
    ``question.rejected``), within about one liveness period; a live replica's question stays."""
    liveness = 1.5
    redis = make_redis_server().start()
    env = {"GATEWAY_REPLICA_LIVENESS": str(liveness)}
    killed, other = start_replicas("KO", redis.url, tmp_path, env)
    try:
        async with killed.client() as on_killed, other.client() as on_other, read_events(on_other) as events:
            tool = ask(on_killed, form(COLOR_SCHEMA))
            waited = (await events.next("question.asked")).properties["id"]
            kept = await create(on_killed)  # nobody waits on this one: it stays for the others
            await events.next("question.asked")
            await asyncio.sleep(2 * liveness)  # the live replica's entry is refreshed meanwhile
            assert sorted(await listed(on_other)) == sorted([waited, kept])

            killed.kill()
            rejected = await events.next("question.rejected", timeout=2 * liveness + 5)
            assert rejected.properties["requestID"] == waited
            body = (await on_other.get(f"/elicitations/{waited}")).json()
            assert (body["status"], body["result"]) == ("cancelled", {"action": "cancel"})
            assert await listed(on_other) == [kept]
            assert isinstance(tool.exception(), httpx.TransportError)
    finally:
        killed.kill()
        other.kill()


async def test_a_dropped_call_comes_back_on_another_replica(replicas, clients):
    """Behind a load balancer the re-issued call may reach any replica: it attaches there, to the
    question its dropped call left, and the first replica's window does not withdraw it later."""
    b = clients[1]
    questions = {
        "questions": [{"question": "Roll back?", "header": "Roll back", "options": [{"label": "Yes"}]}]
    }

    async def call(replica: Replica) -> Any:
        async with Client(f"{replica.url}/mcp") as mcp:
            return await mcp.call_tool("question", questions)

    async with read_events(b) as events:
        first = asyncio.create_task(call(replicas[0]))
        asked = await events.next("question.asked")
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await first
        request_id = asked.properties["id"]
        kept = f"elicitation {request_id}: its caller went away; kept for it"
        await until(lambda: logged(replicas[0], kept))  # the first replica keeps it for its caller
        again = asyncio.create_task(call(replicas[1]))
        await until(lambda: logged(replicas[1], f"elicitation {request_id} attached to again by its caller"))
        assert await listed(b) == [request_id]
        await events.no_frame(within=0.2, type="question.asked")
        reply = await b.post(f"/question/{asked.properties['id']}/reply", json={"answers": [["Yes"]]})
        assert reply.status_code == 200
        assert (await again).structured_content == {"action": "accept", "answers": [["Yes"]]}


async def test_requests_with_one_key_sent_at_once_to_three_replicas_share_one_question(replicas, clients):
    """The Idempotency-Key is held in Redis from the first request's arrival: the others, on any
    replica, wait for that question and get its result; a request cut meanwhile leaves it to them."""
    key = {"Idempotency-Key": "deploy-4.2-everywhere"}

    def elicit(client: httpx.AsyncClient) -> asyncio.Task[httpx.Response]:
        return asyncio.create_task(
            client.post("/elicit", json=form(COLOR_SCHEMA), headers=key, timeout=httpx.Timeout(10, read=60))
        )

    async with read_events(clients[0]) as events:
        requests = [elicit(clients[n % 3]) for n in range(9)]
        asked = await events.next("question.asked")
        cut = requests.pop(0)
        joined = f"elicitation {asked.properties['id']} attached to by a call of the same Idempotency-Key"

        async def every_request_waits() -> bool:  # the asking one, and each of the eight others joined
            return sum(replica.output.read_text(errors="replace").count(joined) for replica in replicas) == 8

        await until(every_request_waits, timeout=30)
        await events.no_frame(within=0.1, type="question.asked")  # one question in all
        cut.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await cut
        reply = await clients[1].post(f"/question/{asked.properties['id']}/reply", json=GREEN)
        assert reply.status_code == 200
        responses = await asyncio.gather(*requests)
        assert {(response.status_code, response.text) for response in responses} == {
            (200, '{"action":"accept","content":{"color":"green","count":3}}')
        }
        await events.no_frame(within=0.3, type="question.asked")
        assert [frame.properties["id"] for frame in events.seen if frame.type == "question.asked"] == [
            asked.properties["id"]
        ]
        assert [frame.type for frame in events.seen if frame.type.startswith("question.")] == [
            "question.asked",
            "question.replied",
        ]


async def test_two_replies_racing_on_two_replicas(clients):
    """One wins (200), the other gets 404; the tool gets the winner's answers."""
    a, b, c = clients
    for _ in range(3):
        request_id = await create(a)
        green, red = await asyncio.gather(
            b.post(f"/question/{request_id}/reply", json=GREEN),
            c.post(f"/question/{request_id}/reply", json=RED),
        )
        assert sorted([green.status_code, red.status_code]) == [200, 404]
        loser = green if green.status_code == 404 else red
        assert loser.json()["_tag"] == "QuestionNotFoundError"
        content = (await a.get(f"/elicitations/{request_id}")).json()["result"]["content"]
        assert content["color"] == ("green" if green.status_code == 200 else "red")


async def test_a_replica_stopping_for_an_update_keeps_the_shared_questions(replicas, clients):
    """SIGTERM: the tool waiting on that replica gets ``cancel``; questions asked without waiting stay
    pending for the other replicas."""
    a, b, _ = clients
    async with read_events(b) as on_b:
        tool = ask(a, form(COLOR_SCHEMA))
        waiting = (await on_b.next("question.asked")).properties["id"]
        kept = await create(a)
        await on_b.next("question.asked")
        # uvicorn re-raises the signal once shut down, so the exit status is the signal's own
        assert await asyncio.to_thread(replicas[0].terminate) in (0, -signal.SIGTERM)
        assert (await tool).json() == {"action": "cancel"}
        assert (await on_b.next("question.rejected")).properties["requestID"] == waiting
    assert await listed(b) == [kept]


async def test_redis_stopped_and_started_again(make_redis_server, tmp_path):
    """While Redis is down, routes answer 503, streams end and health says so; the process keeps
    running and recovers by itself, with the questions Redis kept."""
    redis = make_redis_server(persistent=True).start()
    [replica] = start_replicas("R", redis.url, tmp_path)
    try:
        async with replica.client() as client:
            request_id = await create(client)
            async with read_events(client) as events:
                redis.stop()
                async with asyncio.timeout(10):
                    await events.closed.wait()

            for method, path, body in [
                ("GET", "/question", None),
                ("POST", "/elicitations", form(COLOR_SCHEMA)),
                ("GET", f"/elicitations/{request_id}", None),
                ("POST", f"/question/{request_id}/reply", GREEN),
                ("GET", "/event", None),
            ]:
                response = await client.request(method, path, json=body)
                assert response.status_code == 503, (path, response.text)
                assert response.json()["error"] == "store_unavailable"
                assert "unreachable" in response.json()["message"]
            health = await client.get("/healthz")
            assert (health.status_code, health.json()["store"]) == (503, "unavailable")
            assert replica.running

            redis.start()
            await until(lambda: _healthy(client))
            assert await listed(client) == [request_id]
            async with read_events(client) as events:
                assert (await events.next("question.asked")).properties["id"] == request_id
                assert (await client.post(f"/question/{request_id}/reply", json=GREEN)).status_code == 200
                assert (await events.next("question.replied")).properties["requestID"] == request_id
    finally:
        replica.kill()


async def _healthy(client: httpx.AsyncClient) -> bool:
    return (await client.get("/healthz")).status_code == 200


# ---------------------------------------------------------------------------------------------------
# The deployment files (no Docker engine here: check what they say)


class ComposeLoader(yaml.SafeLoader):
    """Compose files may use ``!reset`` (drop what the base file set)."""


ComposeLoader.add_constructor("!reset", lambda loader, node: ("!reset", loader.construct_sequence(node)))


def test_compose_override_adds_persistent_redis_and_two_replicas_behind_the_proxy():
    base = yaml.load((ROOT / "compose.yaml").read_text(), ComposeLoader)
    override = yaml.load((ROOT / "compose.redis.yaml").read_text(), ComposeLoader)
    assert "gateway" in base["services"]  # the override extends the base file's service
    services = override["services"]
    redis = services["redis"]
    assert redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
    gateway = services["gateway"]
    assert gateway["ports"] == ("!reset", [])  # two replicas cannot share a published port
    assert gateway["environment"]["GATEWAY_STORE"] == "redis://redis:6379/0"
    assert gateway["deploy"]["replicas"] == 2
    assert gateway["depends_on"]["redis"]["condition"] == "service_healthy"
    proxy = services["proxy"]
    assert proxy["ports"] == ["127.0.0.1:4096:80"]
    assert "./deploy/nginx.conf:/etc/nginx/nginx.conf:ro" in proxy["volumes"]


def test_proxy_is_configured_for_server_sent_events():
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    settings = dict(re.findall(r"^\s*(proxy_\w+)\s+([^;]+);", conf, re.MULTILINE))
    assert settings["proxy_buffering"] == "off"
    assert settings["proxy_cache"] == "off"
    assert settings["proxy_http_version"] == "1.1"
    assert int(settings["proxy_read_timeout"].rstrip("s")) >= 3600
    assert "server gateway:4096" in conf
