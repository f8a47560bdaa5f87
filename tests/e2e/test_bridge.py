"""Bridge mode (``GATEWAY_OPENCODE_URL``) in front of a real ``opencode serve``: the published CLI pinned
in tests/e2e/opencode/, started offline with its HOME in a temporary directory.

What a model-less OpenCode cannot show (a question of its own pending, an answer that is slow to
come, bodies of many megabytes) is shown against a small scripted upstream at the end.
"""

import asyncio
import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from elicitation_gateway import __version__
from elicitation_gateway.server import bridge as bridge_module
from tests.conftest import RunningServer
from tests.e2e.opencode_server import OpenCodeServer, basic_auth, free_port
from tests.helpers import (
    COLOR_ACCEPTED,
    COLOR_SCHEMA,
    EventReader,
    Frame,
    ask,
    form,
    pending,
    read_events,
    until,
)

EXCAVATOR: dict[str, Any] = {
    "message": "Excavator diagnosis",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "model": {"type": "string", "title": "Model", "enum": ["SY215C", "SY235C"]},
            "symptoms": {
                "type": "array",
                "title": "Symptoms",
                "description": "Select symptoms:",
                "items": {"type": "string", "enum": ["Black smoke", "Noise"]},
            },
            "hours": {"type": "integer", "title": "Hours", "minimum": 0, "maximum": 20000},
        },
        "required": ["model", "hours"],
    },
}
EXCAVATOR_ANSWERS = [["SY215C"], ["Black smoke", "Noise"], ["1200"]]
EXCAVATOR_CONTENT = {"model": "SY215C", "symptoms": ["Black smoke", "Noise"], "hours": 1200}

TUI_ROUTES = [
    # What `opencode attach` 1.18.33 reads before and after it opens its event stream (the first four
    # and /session/{id} are fatal when missing).
    "/config",
    "/config/providers",
    "/provider",
    "/provider/auth",
    "/agent",
    "/path",
    "/project/current",
    "/session/status",
    "/command",
    "/lsp",
    "/mcp",
    "/formatter",
    "/vcs",
    "/experimental/capabilities",
    "/experimental/resource",
    "/experimental/workspace",
    "/experimental/workspace/status",
    "/api/agent",
    "/api/command",
    "/api/integration",
    "/api/location",
    "/api/model",
    "/api/provider",
    "/api/reference",
    "/api/skill",
    # Shared with the gateway, OpenCode's in bridge mode.
    "/doc",
    "/global/health",
    "/",
    # OpenCode's refusals are handed on too.
    "/no/such/route",
    "/session/ses_0000000000000000000000000",
]
SESSION_ROUTES = ["", "/message?limit=100", "/todo", "/diff", "/children"]


@pytest.fixture(scope="module")
def opencode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenCodeServer]:
    server = OpenCodeServer(tmp_path_factory.mktemp("opencode")).start()
    yield server
    server.stop()


@pytest.fixture
def bridge(make_server: Callable[..., RunningServer], opencode: OpenCodeServer) -> RunningServer:
    return make_server(opencode_url=opencode.url)


@pytest.fixture
async def http(bridge: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=bridge.url, timeout=20) as client:
        yield client


@pytest.fixture
async def direct(opencode: OpenCodeServer) -> AsyncIterator[httpx.AsyncClient]:
    """Straight to OpenCode: what the gateway's answers are compared with."""
    async with httpx.AsyncClient(base_url=opencode.url, timeout=20, headers=opencode.auth()) as client:
        yield client


def headers_of(response: httpx.Response) -> list[tuple[str, str]]:
    """A response's headers but those of the connection, which uvicorn writes anew."""
    return sorted(
        (name, value)
        for name, value in response.headers.multi_items()
        if name not in ("date", "server", "connection", "keep-alive", "transfer-encoding")
    )


def same_answer(through: httpx.Response, straight: httpx.Response) -> None:
    where = through.request.url.raw_path.decode()
    assert through.status_code == straight.status_code, where
    assert headers_of(through) == headers_of(straight), where
    if through.content != straight.content:  # equal as JSON, then: a key order, a timestamp's digits
        assert through.json() == straight.json(), where


# ---------------------------------------------------------------------------------------------------
# Pass-through


async def test_every_route_the_tui_reads_answers_as_opencode_does(
    http: httpx.AsyncClient, direct: httpx.AsyncClient, opencode: OpenCodeServer
):
    session = (await direct.post("/session", json={"title": "routes"})).json()["id"]
    project = (await direct.get("/project/current")).json()["id"]
    headers = {"x-opencode-directory": str(opencode.project)}
    paths = [
        *TUI_ROUTES,
        *(f"/session/{session}{tail}" for tail in SESSION_ROUTES),
        f"/project/{project}/directories",
        f"/session?directory={opencode.project}&roots=true&limit=50",
    ]
    for path in paths:  # some load lazily (/api/integration is empty on its first call)
        await direct.get(path, headers=headers)
    for path in paths:
        same_answer(await http.get(path, headers=headers), await direct.get(path, headers=headers))


async def test_writes_reach_opencode_with_their_bodies(http: httpx.AsyncClient, direct: httpx.AsyncClient):
    created = await http.post("/session", json={"title": "through the gateway"})
    assert created.status_code == 200
    session = created.json()["id"]
    assert (await direct.get(f"/session/{session}")).json()["title"] == "through the gateway"

    renamed = await http.patch(f"/session/{session}", json={"title": "renamed"})
    assert renamed.status_code == 200
    assert (await direct.get(f"/session/{session}")).json()["title"] == "renamed"

    bad = await http.patch(
        f"/session/{session}", content=b"{not json", headers={"content-type": "application/json"}
    )
    straight = await direct.patch(
        f"/session/{session}", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert bad.status_code == straight.status_code >= 400

    assert (await http.delete(f"/session/{session}")).status_code == 200
    assert (await direct.get(f"/session/{session}")).status_code == 404


async def test_an_event_stream_passed_through_is_not_held_back(http: httpx.AsyncClient):
    """``/api/event`` (OpenCode 2's stream) is not the gateway's: its frames come as OpenCode sends them."""
    async with asyncio.timeout(10), http.stream("GET", "/api/event") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                assert json.loads(line[5:])["type"] == "server.connected"
                break


# ---------------------------------------------------------------------------------------------------
# Merged streams


async def session_created(
    http: httpx.AsyncClient, events: EventReader, directory: str | None = None
) -> Frame:
    """Make sessions through the gateway until OpenCode's ``session.created`` for one arrives.

    OpenCode 1.18.33 itself sometimes misses the first events after a subscriber connects: it writes
    ``server.connected`` before the subscription is live (seen about once in twelve fresh servers
    without the gateway in between). A later event always arrives.
    """
    params = {"directory": directory} if directory else {}
    for _ in range(5):
        made = (await http.post("/session", params=params, json={"title": "merged"})).json()
        with contextlib.suppress(TimeoutError):
            while True:
                created = await events.next("session.created", timeout=2)
                if created.properties["sessionID"] == made["id"]:
                    return created
    raise AssertionError(f"OpenCode's session.created never came through; seen: {events.seen}")


async def test_the_global_stream_carries_both_sides_events_in_whole_frames(
    http: httpx.AsyncClient, bridge: RunningServer
):
    async with read_events(http, "/global/event", skip_connected=False) as events:
        connected = await events.next()
        assert connected.type == "server.connected"
        assert connected.data == {"payload": connected.data["payload"]}  # OpenCode's: no directory
        tool = ask(http, form(COLOR_SCHEMA), directory="/srv/project")
        asked = await events.next("question.asked")
        assert asked.data["directory"] == "/srv/project"
        assert asked.properties["sessionID"] == bridge.gateway.default_session_id

        created = await session_created(http, events)
        assert created.data["project"]  # OpenCode's own frame, as OpenCode shapes it

        reply = await http.post(
            f"/question/{asked.properties['id']}/reply", json={"answers": [["green"], ["3"]]}
        )
        assert reply.json() is True
        replied = await events.next("question.replied")
        assert replied.properties["requestID"] == asked.properties["id"]
        assert (await tool).json() == COLOR_ACCEPTED
        # Every frame parsed as JSON (whole), and the gateway added no server.connected of its own.
        assert [frame.type for frame in events.seen].count("server.connected") == 1


async def test_the_instance_stream_keeps_the_directory_filter(
    http: httpx.AsyncClient, opencode: OpenCodeServer
):
    here = str(opencode.project)
    async with read_events(http, "/event", params={"directory": here}) as events:
        elsewhere = ask(http, form(COLOR_SCHEMA), directory="/srv/elsewhere")
        await pending(http, 1)
        mine = ask(http, form(COLOR_SCHEMA), directory=here)
        listed = await pending(http, 2)
        asked = await events.next("question.asked")
        assert asked.data["properties"]["questions"]  # /event's shape: the event itself, not wrapped
        assert asked.properties["id"] == listed[1]["id"]
        created = await session_created(http, events, directory=here)
        assert created.properties["info"]["directory"] == here
        await events.no_frame(type="question.asked")  # the question about /srv/elsewhere is not shown
        for request in listed:
            await http.post(f"/question/{request['id']}/reject")
    assert (await elsewhere).json() == (await mine).json() == {"action": "cancel"}


async def test_a_reconnecting_client_is_told_every_pending_question_again(http: httpx.AsyncClient):
    tool = ask(http, EXCAVATOR)
    (question,) = await pending(http)
    for _ in range(2):  # the TUI reconnects without Last-Event-ID, and re-reads nothing else
        async with read_events(http, "/global/event", skip_connected=False) as events:
            assert (await events.next()).type == "server.connected"
            announced = await events.next()
            assert announced.type == "question.asked"
            assert announced.properties["id"] == question["id"]
            assert [q["header"] for q in announced.properties["questions"]] == ["Model", "Symptoms", "Hours"]
    await http.post(f"/question/{question['id']}/reply", json={"answers": EXCAVATOR_ANSWERS})
    assert (await tool).json() == {"action": "accept", "content": EXCAVATOR_CONTENT}


async def test_the_gateway_adds_no_heartbeat_of_its_own(
    make_server: Callable[..., RunningServer], opencode: OpenCodeServer
):
    fast = make_server(opencode_url=opencode.url, heartbeat=0.1)
    async with httpx.AsyncClient(base_url=fast.url, timeout=10) as client:
        async with read_events(client, "/global/event") as events:
            await events.no_frame(within=1.0, type="server.heartbeat")  # OpenCode beats every 10 s
        async with read_events(client, "/gateway/global/event") as own:  # the gateway's own stream beats
            await own.next("server.heartbeat")


# ---------------------------------------------------------------------------------------------------
# Questions and replies


async def test_replies_go_to_the_side_that_asked(http: httpx.AsyncClient, direct: httpx.AsyncClient):
    tool = ask(http, form(COLOR_SCHEMA))
    (question,) = await pending(http)
    # An id the gateway did not ask is OpenCode's: OpenCode answers, in its shapes.
    for action in ("reply", "reject"):
        path = f"/question/que_00000000000000000000000000/{action}"
        body = {"answers": [["x"]]} if action == "reply" else None
        same_answer(await http.post(path, json=body), await direct.post(path, json=body))
    # The gateway's own id is the gateway's: the tool gets typed content.
    reply = await http.post(f"/question/{question['id']}/reply", json={"answers": [["green"], ["3"]]})
    assert reply.json() is True
    assert (await tool).json() == COLOR_ACCEPTED
    # Finished, it stays the gateway's: its 404, not OpenCode's.
    again = await http.post(f"/question/{question['id']}/reply", json={"answers": [["green"], ["3"]]})
    assert again.status_code == 404
    assert again.json()["requestID"] == question["id"]


def scripted_model() -> list[Route]:
    """An OpenAI-compatible chat model that asks with OpenCode's own question tool, then says "done"."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return (
            "data: "
            + json.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [choice]})
            + "\n\n"
        )

    async def completions(request: Request) -> Response:
        body = await request.json()
        tools = [tool["function"]["name"] for tool in body.get("tools", [])]
        answered = any(message["role"] == "tool" for message in body["messages"])

        async def stream() -> AsyncIterator[str]:
            if "question" in tools and not answered:
                arguments = {
                    "questions": [{"question": "Which colour?", "header": "Colour", "options": COLOURS}]
                }
                call = {"index": 0, "id": "call_1", "type": "function"}
                call["function"] = {"name": "question", "arguments": json.dumps(arguments)}
                yield chunk({"role": "assistant", "tool_calls": [call]})
                yield chunk({}, "tool_calls")
            else:
                yield chunk({"role": "assistant", "content": "done"})
                yield chunk({}, "stop")
            yield "data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    return [Route("/v1/chat/completions", completions, methods=["POST"])]


COLOURS = [{"label": "red", "description": "warm"}, {"label": "blue", "description": "cold"}]


def model_config(url: str) -> dict[str, Any]:
    """OpenCode's config for the scripted model (the openai-compatible provider ships inside the CLI)."""
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Scripted",
        "options": {"baseURL": url + "/v1", "apiKey": "scripted"},
        "models": {"model": {"name": "Scripted model", "tool_call": True}},
    }
    return {"provider": {"scripted": provider}, "model": "scripted/model", "small_model": "scripted/model"}


@pytest.mark.timeout(90)
async def test_opencodes_own_question_tool_keeps_working_through_the_gateway(
    make_server: Callable[..., RunningServer], tmp_path: Path
):
    """A real OpenCode question (its model called the question tool) and a gateway question, side by
    side: both streamed, both listed, each answered where it was asked."""
    with ScriptedUpstream(scripted_model()) as model:
        upstream = OpenCodeServer(tmp_path, config=model_config(model.url)).start()
        try:
            gateway = make_server(opencode_url=upstream.url)
            async with httpx.AsyncClient(base_url=gateway.url, timeout=20) as client:
                async with read_events(client, "/global/event") as events:
                    tool = ask(client, form(COLOR_SCHEMA))
                    mine = await events.next("question.asked")
                    session = (await client.post("/session", json={"title": "asks"})).json()["id"]
                    prompt = {"parts": [{"type": "text", "text": "ask me"}]}
                    started = await client.post(f"/session/{session}/prompt_async", json=prompt)
                    assert started.status_code == 204
                    theirs = await events.next("question.asked", timeout=30)
                    assert theirs.properties["sessionID"] == session
                    assert theirs.properties["tool"]["callID"] == "call_1"

                    listed = (await client.get("/question")).json()
                    assert [q["id"] for q in listed] == [mine.properties["id"], theirs.properties["id"]]

                    answer = await client.post(
                        f"/question/{theirs.properties['id']}/reply", json={"answers": [["blue"]]}
                    )
                    assert answer.json() is True
                    replied = await events.next("question.replied")
                    assert replied.properties["requestID"] == theirs.properties["id"]
                    await client.post(
                        f"/question/{mine.properties['id']}/reply", json={"answers": [["green"], ["3"]]}
                    )
                    assert (await tool).json() == COLOR_ACCEPTED

                async def tool_finished() -> bool:
                    messages = (await client.get(f"/session/{session}/message")).json()
                    parts = [
                        part for message in messages for part in message["parts"] if part["type"] == "tool"
                    ]
                    return bool(parts) and parts[0]["state"]["status"] == "completed"

                await until(tool_finished, timeout=20, what="OpenCode's question tool finished")
                messages = (await client.get(f"/session/{session}/message")).json()
                (part,) = [
                    part for message in messages for part in message["parts"] if part["type"] == "tool"
                ]
                assert '"Which colour?"="blue"' in part["state"]["output"]
        finally:
            upstream.stop()


async def test_the_question_list_is_both_sides(http: httpx.AsyncClient, direct: httpx.AsyncClient):
    assert (await http.get("/question")).json() == (await direct.get("/question")).json() == []
    tool = ask(http, EXCAVATOR)
    (question,) = await pending(http)
    assert question["questions"][0]["header"] == "Model"
    await http.post(f"/question/{question['id']}/reject", json={"action": "decline"})
    assert (await tool).json() == {"action": "decline"}


async def test_unsessioned_questions_go_to_a_real_session_and_sessioned_ones_where_they_say(
    http: httpx.AsyncClient, direct: httpx.AsyncClient, bridge: RunningServer, opencode: OpenCodeServer
):
    default = bridge.gateway.default_session_id
    assert default.startswith("ses_")
    assert default != bridge.settings.session_id
    session = (await direct.get(f"/session/{default}")).json()
    assert session["title"] == "Elicitation Gateway"

    own_session = (await direct.post("/session", json={"title": "a tool's own"})).json()["id"]
    unsessioned = ask(http, form(COLOR_SCHEMA))
    sessioned = ask(http, form(COLOR_SCHEMA), sessionID=own_session, directory=str(opencode.project))
    listed = await pending(http, 2)
    assert sorted(request["sessionID"] for request in listed) == sorted([default, own_session])
    for request in listed:
        await http.post(f"/question/{request['id']}/reject")
    assert (await unsessioned).json() == (await sessioned).json() == {"action": "cancel"}


async def test_a_restarted_gateway_keeps_its_session_and_a_lost_one_is_made_again(
    make_server: Callable[..., RunningServer],
    bridge: RunningServer,
    direct: httpx.AsyncClient,
    opencode: OpenCodeServer,
    monkeypatch: pytest.MonkeyPatch,
):
    first = bridge.gateway.default_session_id
    monkeypatch.setattr(bridge_module, "SESSION_CHECK_INTERVAL", 0.1)
    second = make_server(opencode_url=opencode.url)
    assert second.gateway.default_session_id == first  # a TUI opened with --session keeps working

    assert (await direct.delete(f"/session/{first}")).status_code == 200
    await until(lambda: second.gateway.default_session_id != first, what="a new session made")
    remade = second.gateway.default_session_id
    assert (await direct.get(f"/session/{remade}")).json()["title"] == "Elicitation Gateway"


# ---------------------------------------------------------------------------------------------------
# Routes both sides have


async def test_shared_routes_are_opencodes_and_the_gateways_move_under_its_prefix(
    http: httpx.AsyncClient, direct: httpx.AsyncClient
):
    for path in ("/", "/doc", "/mcp", "/global/health"):
        same_answer(await http.get(path), await direct.get(path))

    moved = await http.get("/gateway", follow_redirects=False)
    assert moved.status_code == 308
    assert moved.headers["location"] == "/gateway/"
    page = await http.get("/gateway/")
    assert page.status_code == 200
    assert "Elicitation Gateway" in page.text
    assert (await http.get("/gateway/static/app.js")).status_code == 200  # the page's relative links

    document = (await http.get("/gateway/doc")).json()
    assert "/elicit" in document["paths"]
    health = await http.get("/gateway/global/health")
    assert health.json() == {"healthy": True, "version": __version__}
    assert (await http.get("/healthz")).json()["upstream"] == "ok"

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    mcp = await http.post(
        "/gateway/mcp", json=initialize, headers={"accept": "application/json, text/event-stream"}
    )
    assert mcp.status_code == 200
    assert "serverInfo" in mcp.text

    tool = ask(http, form(COLOR_SCHEMA))
    (question,) = await pending(http)
    async with read_events(http, "/gateway/event", skip_connected=False) as own:
        connected = await own.next()
        assert connected.type == "server.connected"
        assert (await own.next()).properties["id"] == question["id"]
    assert [q["id"] for q in (await http.get("/gateway/question")).json()] == [question["id"]]
    form_described = await http.get(f"/gateway/question/{question['id']}/form")
    assert form_described.json()["id"] == question["id"]
    await http.post(f"/gateway/question/{question['id']}/reply", json={"answers": [["green"], ["3"]]})
    assert (await tool).json() == COLOR_ACCEPTED


async def test_credentials_pass_through_and_the_gateway_guards_its_own_routes(
    make_server: Callable[..., RunningServer], tmp_path: Path
):
    guarded = OpenCodeServer(tmp_path, password="upstream-secret").start()
    try:
        gateway = make_server(opencode_url=guarded.url, answerer_password="upstream-secret")
        # The gateway's own calls (its session) used the same credentials.
        assert gateway.gateway.default_session_id != gateway.settings.session_id
        tui = {"Authorization": basic_auth("opencode", "upstream-secret")}
        async with httpx.AsyncClient(base_url=gateway.url, timeout=20) as client:
            assert (await client.get("/config", headers=tui)).status_code == 200
            refused = await client.get("/config")
            assert refused.status_code == 401  # OpenCode's refusal, handed on
            assert "www-authenticate" in refused.headers
            assert (await client.get("/question")).status_code == 401  # the gateway's own
            assert (await client.get("/question", headers=tui)).json() == []
            wrong = {"Authorization": basic_auth("opencode", "wrong")}
            assert (await client.get("/global/event", headers=wrong)).status_code == 401
            tool = ask(client, form(COLOR_SCHEMA))  # the tool side needs no answerer password
            async with read_events(client, "/global/event", headers=tui, skip_connected=False) as events:
                assert (await events.next()).type == "server.connected"
                asked = await events.next("question.asked")
            await client.post(
                f"/question/{asked.properties['id']}/reply", headers=tui, json={"answers": [["green"], ["3"]]}
            )
            assert (await tool).json() == COLOR_ACCEPTED
    finally:
        guarded.stop()


def test_listening_beyond_loopback_in_front_of_an_open_opencode_is_warned_of(
    make_server: Callable[..., RunningServer], opencode: OpenCodeServer, caplog: pytest.LogCaptureFixture
):
    make_server(opencode_url=opencode.url)
    assert "can drive OpenCode" not in caplog.text
    make_server(opencode_url=opencode.url, host="0.0.0.0")  # the setting; the test server binds loopback
    assert "answers without a password and the gateway listens on 0.0.0.0" in caplog.text


# ---------------------------------------------------------------------------------------------------
# The upstream stopped and restarted


@pytest.mark.timeout(90)
async def test_the_upstream_stopped_and_restarted(make_server: Callable[..., RunningServer], tmp_path: Path):
    upstream = OpenCodeServer(tmp_path, port=free_port()).start()
    try:
        gateway = make_server(opencode_url=upstream.url)
        session = gateway.gateway.default_session_id
        async with httpx.AsyncClient(base_url=gateway.url, timeout=20) as client:
            async with read_events(client, "/global/event") as events:
                upstream.stop()
                async with asyncio.timeout(15):
                    await events.closed.wait()  # the client's stream ends with OpenCode's: it reconnects

            down = await client.get("/config")
            assert down.status_code == 502
            assert down.json()["error"] == "upstream_unavailable"
            assert upstream.url in down.json()["message"]
            stream = await client.get("/global/event")
            assert stream.status_code == 502
            health = await client.get("/healthz")
            assert health.status_code == 503
            assert health.json()["store"] == "ok"
            assert health.json()["upstream"] == "unavailable"

            # The gateway's side keeps working: no tool loses its question.
            tool = ask(client, form(COLOR_SCHEMA))
            (question,) = await pending(client)
            assert question["sessionID"] == session

            upstream.start()  # same port, same data: the gateway's session is still there
            assert (await client.get("/config")).status_code == 200
            assert (await client.get("/healthz")).json()["upstream"] == "ok"
            async with read_events(client, "/global/event", skip_connected=False) as events:
                assert (await events.next()).type == "server.connected"
                announced = await events.next()
                assert announced.properties["id"] == question["id"]
            assert (await upstream_session(upstream, session))["title"] == "Elicitation Gateway"
            await client.post(f"/question/{question['id']}/reply", json={"answers": [["green"], ["3"]]})
            assert (await tool).json() == COLOR_ACCEPTED
    finally:
        upstream.stop()


async def upstream_session(upstream: OpenCodeServer, session: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=upstream.url, headers=upstream.auth(), timeout=10) as client:
        return (await client.get(f"/session/{session}")).json()


# ---------------------------------------------------------------------------------------------------
# Against a scripted upstream: what a model-less OpenCode cannot show


class ScriptedUpstream:
    """A small HTTP server in a thread that plays an OpenCode server's part in one scene."""

    def __init__(self, routes: list[Route]) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.app = Starlette(routes=routes)
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve([self._socket])), daemon=True
        )

    def __enter__(self) -> "ScriptedUpstream":
        self._thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self._thread.is_alive():
            if self.server.started:
                return self
            threading.Event().wait(0.01)
        raise RuntimeError("the scripted upstream did not start")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(10)


def opencode_basics(session: str = "ses_0000000000scriptedUpstream") -> list[Route]:
    """What the bridge asks at start-up: its session, and health."""

    async def sessions(request: Request) -> Response:
        if request.method == "POST":
            return JSONResponse({"id": session, "title": "Elicitation Gateway", "directory": "/"})
        return JSONResponse([])

    return [
        Route("/session", sessions, methods=["GET", "POST"]),
        Route("/session/{id}", lambda request: JSONResponse({"id": session}), methods=["GET"]),
        Route("/global/health", lambda request: JSONResponse({"healthy": True, "version": "scripted"})),
    ]


async def test_a_slow_upstream_is_a_504_and_prompts_may_take_their_time(
    make_server: Callable[..., RunningServer],
):
    async def slow(request: Request) -> Response:
        await asyncio.sleep(2)
        return JSONResponse({"late": True})

    routes = [
        *opencode_basics(),
        Route("/config", slow),
        Route("/global/event", slow),
        Route("/session/{id}/message", slow, methods=["POST"]),
    ]
    with ScriptedUpstream(routes) as upstream:
        gateway = make_server(opencode_url=upstream.url, opencode_timeout=0.3)
        async with httpx.AsyncClient(base_url=gateway.url, timeout=10) as client:
            late = await client.get("/config")
            assert late.status_code == 504
            assert late.json()["error"] == "upstream_timeout"
            assert (await client.get("/global/event")).status_code == 504
            prompt = await client.post("/session/ses_x/message", json={"parts": []})
            assert prompt.status_code == 200  # a model's turn has no time limit
            tool = ask(client, form(COLOR_SCHEMA))  # the gateway's own side is not held up
            (question,) = await pending(client)
            await client.post(f"/question/{question['id']}/reply", json={"answers": [["green"], ["3"]]})
            assert (await tool).json() == COLOR_ACCEPTED


async def test_large_bodies_stream_both_ways_without_being_held(make_server: Callable[..., RunningServer]):
    chunk = b"x" * 65536
    chunks = 256  # 16 MiB each way
    first_chunk_arrived = threading.Event()
    client_has_first_chunk = threading.Event()

    async def upload(request: Request) -> Response:
        size = 0
        async for part in request.stream():
            size += len(part)
            first_chunk_arrived.set()
        return JSONResponse({"size": size})

    async def download(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            yield chunk
            await asyncio.to_thread(client_has_first_chunk.wait, 10)  # only once the client has it
            for _ in range(chunks - 1):
                yield chunk

        return StreamingResponse(body(), media_type="application/octet-stream")

    routes = [*opencode_basics(), Route("/upload", upload, methods=["POST"]), Route("/download", download)]
    with ScriptedUpstream(routes) as upstream:
        gateway = make_server(opencode_url=upstream.url)

        async def sent() -> AsyncIterator[bytes]:
            yield chunk
            # The rest only once the upstream has the first: a gateway that held the body whole
            # would wait here for ever.
            assert await asyncio.to_thread(first_chunk_arrived.wait, 10)
            for _ in range(chunks - 1):
                yield chunk

        async with httpx.AsyncClient(base_url=gateway.url, timeout=20) as client:
            uploaded = await client.post("/upload", content=sent())
            assert uploaded.json() == {"size": len(chunk) * chunks}
            received = 0
            async with client.stream("GET", "/download") as response:
                async for part in response.aiter_raw():
                    received += len(part)
                    client_has_first_chunk.set()
            assert received == len(chunk) * chunks


async def test_opencodes_own_questions_are_listed_and_answered_through_the_gateway(
    make_server: Callable[..., RunningServer],
):
    theirs = {"id": "que_ffffffffffffOpenCodeAsked1", "sessionID": "ses_1", "questions": []}
    answered: list[tuple[str, dict[str, Any], str | None]] = []

    async def questions(request: Request) -> Response:
        return JSONResponse([theirs])

    async def reply(request: Request) -> Response:
        answered.append(
            (request.path_params["id"], await request.json(), request.headers.get("authorization"))
        )
        return JSONResponse(True)

    routes = [
        *opencode_basics(),
        Route("/question", questions),
        Route("/question/{id}/reply", reply, methods=["POST"]),
    ]
    with ScriptedUpstream(routes) as upstream:
        gateway = make_server(opencode_url=upstream.url)
        async with httpx.AsyncClient(base_url=gateway.url, timeout=10) as client:
            tool = ask(client, form(COLOR_SCHEMA))
            listed = await pending(client, 2)
            assert listed[1] == theirs  # the gateway's first, then OpenCode's
            mine = listed[0]["id"]

            token = "Basic " + base64.b64encode(b"opencode:x").decode()
            answer = {"answers": [["Yes"]]}
            response = await client.post(
                f"/question/{theirs['id']}/reply", json=answer, headers={"authorization": token}
            )
            assert response.json() is True
            assert answered == [(theirs["id"], answer, token)]

            await client.post(f"/question/{mine}/reply", json={"answers": [["green"], ["3"]]})
            assert (await tool).json() == COLOR_ACCEPTED
            assert len(answered) == 1


async def test_requests_forwarded_to_opencode_are_guarded_as_the_gateways_own(
    make_server: Callable[..., RunningServer],
):
    """A DNS-rebinding page or a page on another origin reaches OpenCode through the gateway's port no
    more than it reaches the gateway: foreign hosts are 421 and cross-site changes 403 before anything
    is forwarded; the same requests from a tool or a same-origin page go through."""
    forwarded: list[str] = []

    async def prompt(request: Request) -> Response:
        forwarded.append(request.url.path)
        return JSONResponse({"ok": True})

    routes = [
        *opencode_basics(),
        Route("/session/{id}/message", prompt, methods=["POST"]),
        Route("/config", prompt),
    ]
    with ScriptedUpstream(routes) as upstream:
        gateway = make_server(opencode_url=upstream.url)
        async with httpx.AsyncClient(base_url=gateway.url, timeout=10) as client:
            rebound = await client.get("/config", headers={"Host": f"rebound.example:{gateway.port}"})
            assert rebound.status_code == 421
            assert rebound.json()["error"] == "host_not_allowed"
            for attack in (
                {"Origin": "https://evil.example", "Content-Type": "text/plain"},
                {"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"},
                {"Origin": "null"},
            ):
                refused = await client.post(
                    "/session/ses_x/message", content=b'{"parts": []}', headers=attack
                )
                assert refused.status_code == 403, refused.text
                assert refused.json()["error"] == "cross_origin"
            assert forwarded == []

            assert (await client.post("/session/ses_x/message", json={"parts": []})).status_code == 200
            own_page = {"Origin": gateway.url, "Sec-Fetch-Site": "same-origin"}
            assert (await client.post("/session/ses_x/message", json={}, headers=own_page)).status_code == 200
            assert (await client.get("/config")).status_code == 200
            assert forwarded == ["/session/ses_x/message", "/session/ses_x/message", "/config"]
