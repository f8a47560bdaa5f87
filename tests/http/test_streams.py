"""The event streams over real HTTP: ``GET /event`` and ``GET /global/event`` (docs/protocol.md, Events)."""

import asyncio
import contextlib
import json
import re
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from elicitation_gateway.display import safe
from tests.conftest import TEST_DIRECTORY
from tests.helpers import EventReader, Frame, ask, form, read_events, text_properties, until

EVENT_ID = re.compile(r"^evt_[0-9a-f]{12}[0-9A-Za-z]{14}$")
FINISHED = ("question.replied", "question.rejected")
QUESTION_TYPES = ("question.asked", *FINISHED)


async def create(client: httpx.AsyncClient, params: dict[str, Any] | None = None, **query: Any) -> str:
    """Ask without waiting (``POST /elicitations``); return the question id."""
    response = await client.post("/elicitations", json=params or form(text_properties(1)), params=query)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def reply(client: httpx.AsyncClient, request_id: str, answers: list[list[str]] | None = None) -> None:
    response = await client.post(f"/question/{request_id}/reply", json={"answers": answers or [["ok"]]})
    assert response.status_code == 200, response.text


async def reject(client: httpx.AsyncClient, request_id: str) -> None:
    response = await client.post(f"/question/{request_id}/reject")
    assert response.status_code == 200, response.text


def request_of(frame: Frame) -> str:
    """The question a ``question.*`` frame is about."""
    properties = frame.properties
    return properties["id"] if frame.type == "question.asked" else properties["requestID"]


async def question_frames_until(reader: EventReader, request_id: str, type: str) -> list[Frame]:
    """Question frames up to and including the ``type`` frame of ``request_id``."""
    frames = []
    while True:
        frame = await reader.next()
        if frame.type not in QUESTION_TYPES:
            continue
        frames.append(frame)
        if frame.type == type and request_of(frame) == request_id:
            return frames


def assert_event_json(frame: Frame) -> None:
    payload = frame.data.get("payload", frame.data)
    assert set(payload) == {"id", "type", "properties"}, payload
    assert EVENT_ID.match(payload["id"]), payload["id"]


# ---------------------------------------------------------------------------------------------------
# Frames and headers


@pytest.mark.parametrize("path", ["/event", "/global/event"])
async def test_stream_headers_and_server_connected_first(client, path):
    async with read_events(client, path, skip_connected=False) as events:
        headers = events.response.headers
        assert headers["content-type"].split(";")[0] == "text/event-stream"
        assert headers["cache-control"] == "no-cache, no-transform"
        assert headers["x-accel-buffering"] == "no"

        connected = await events.next()
        assert connected is events.seen[0]
        assert connected.type == "server.connected"
        assert connected.properties == {}
        assert connected.id == ""  # server.* frames carry no id: line
        assert_event_json(connected)


async def test_question_frames_carry_their_id_and_the_documented_properties(client):
    async with read_events(client) as events:
        tool = ask(client, form(text_properties(2), "Hello"), sessionID="ses_0193a1c2b3d4AbCdEfGhIjKlMn")
        asked = await events.next("question.asked")
        listed = (await client.get("/question")).json()
        assert asked.properties == listed[0]
        request_id = asked.properties["id"]
        assert_event_json(asked)
        assert asked.id == asked.data["id"]

        await reply(client, request_id, [["a"], ["b"]])
        replied = await events.next("question.replied")
        assert_event_json(replied)
        assert replied.id == replied.data["id"]
        assert replied.properties == {
            "sessionID": "ses_0193a1c2b3d4AbCdEfGhIjKlMn",
            "requestID": request_id,
            "answers": [["a"], ["b"]],
        }
        assert (await tool).json()["action"] == "accept"

        other = await create(client)
        asked_other = await events.next("question.asked")
        await reject(client, other)
        rejected = await events.next("question.rejected")
        assert_event_json(rejected)
        assert rejected.id == rejected.data["id"]
        assert rejected.properties == {"sessionID": asked_other.properties["sessionID"], "requestID": other}
        assert asked_other.id < rejected.id  # event ids sort in creation order
        assert asked.id < replied.id < asked_other.id


# ---------------------------------------------------------------------------------------------------
# Every question.asked ends in exactly one question.replied or question.rejected


async def _by_reply(client, server, request_id, tool):
    await reply(client, request_id)
    return "question.replied", {"action": "accept", "content": {"k0": "ok"}}


async def _by_reject(client, server, request_id, tool):
    await reject(client, request_id)
    return "question.rejected", {"action": "cancel"}


async def _by_timeout(client, server, request_id, tool):
    return "question.rejected", {"action": "cancel"}


async def _by_withdrawal(client, server, request_id, tool):
    response = await client.delete(f"/elicitations/{request_id}")
    assert response.status_code == 200
    return "question.rejected", {"action": "cancel"}


async def _by_tool_disconnect(client, server, request_id, tool):
    tool.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await tool
    return "question.rejected", None


async def _by_shutdown(client, server, request_id, tool):
    await asyncio.to_thread(server.stop)
    return "question.rejected", {"action": "cancel"}


FINISHERS: dict[str, Callable[..., Awaitable[tuple[str, dict[str, Any] | None]]]] = {
    "reply": _by_reply,
    "reject": _by_reject,
    "timeout": _by_timeout,
    "withdrawal": _by_withdrawal,
    "tool-disconnect": _by_tool_disconnect,
    "shutdown": _by_shutdown,
}


@pytest.mark.parametrize("how", list(FINISHERS))
async def test_every_asked_ends_in_exactly_one_finishing_event(make_server, how):
    server = make_server(timeout=0.3 if how == "timeout" else 60)
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as client,
        httpx.AsyncClient(base_url=server.url, timeout=10) as tool_client,
        read_events(client) as events,
    ):
        tool = ask(tool_client, form(text_properties(1)))
        asked = await events.next("question.asked")
        request_id = asked.properties["id"]

        expected_type, expected_result = await FINISHERS[how](client, server, request_id, tool)

        finished = await events.next(timeout=5)
        while finished.type not in FINISHED:
            finished = await events.next(timeout=5)
        assert finished.type == expected_type
        assert request_of(finished) == request_id
        if how == "shutdown":
            async with asyncio.timeout(5):
                await events.closed.wait()  # shutdown ends the stream after the finishing event
        else:
            await events.no_frame(within=0.3)
        finishing = [f for f in events.seen if f.type in FINISHED and request_of(f) == request_id]
        assert finishing == [finished]
        if expected_result is not None:
            assert (await tool).json() == expected_result


# ---------------------------------------------------------------------------------------------------
# Heartbeats and fan-out


@pytest.mark.parametrize("path", ["/event", "/global/event"])
async def test_heartbeats_have_an_event_id_but_no_id_line(make_server, path):
    server = make_server(heartbeat=0.2)
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as client,
        read_events(client, path) as events,
    ):
        beats = [await events.next("server.heartbeat") for _ in range(2)]
        for beat in beats:
            assert beat.id == ""
            assert beat.properties == {}
            assert_event_json(beat)
            if path == "/global/event":
                assert set(beat.data) == {"payload"}  # no directory key
        assert beats[0].data != beats[1].data  # every heartbeat is its own event


async def test_every_subscriber_receives_the_same_events_in_the_same_order(client):
    async with contextlib.AsyncExitStack() as stack:
        readers = [await stack.enter_async_context(read_events(client)) for _ in range(4)]
        first = await create(client)
        second = await create(client)
        third = await create(client)
        await reply(client, first)
        await reject(client, second)
        assert (await client.delete(f"/elicitations/{third}")).status_code == 200

        seen = [await question_frames_until(reader, third, "question.rejected") for reader in readers]
        sequences = [[(frame.id, frame.data) for frame in frames] for frames in seen]
        assert all(sequence == sequences[0] for sequence in sequences)
        frames = seen[0]
        assert [(frame.type, request_of(frame)) for frame in frames] == [
            ("question.asked", first),
            ("question.asked", second),
            ("question.asked", third),
            ("question.replied", first),
            ("question.rejected", second),
            ("question.rejected", third),
        ]
        ids = [frame.id for frame in frames]
        assert ids == sorted(ids)
        assert len(set(ids)) == len(ids)


# ---------------------------------------------------------------------------------------------------
# Directories


async def test_event_directory_filter_keeps_that_directory_and_questions_naming_none(client):
    async with (
        read_events(client, params={"directory": "/srv/p/a"}) as by_query,
        read_events(client, headers={"x-opencode-directory": "/srv/p/a"}) as by_header,
        read_events(client, params={"directory": "/srv/p/b"}) as other,
        read_events(client) as everything,
    ):
        in_a = await create(client, directory="/srv/p/a")
        in_b = await create(client, directory="/srv/p/b")
        anywhere = await create(client)
        await reply(client, in_a)
        await reject(client, in_b)
        assert (await client.delete(f"/elicitations/{anywhere}")).status_code == 200
        sentinel = await create(client)
        await reject(client, sentinel)

        def seen(frames: list[Frame]) -> list[tuple[str, str]]:
            return [(frame.type, request_of(frame)) for frame in frames]

        a_frames = [
            ("question.asked", in_a),
            ("question.asked", anywhere),
            ("question.replied", in_a),
            ("question.rejected", anywhere),
            ("question.asked", sentinel),
            ("question.rejected", sentinel),
        ]
        for reader in (by_query, by_header):
            assert seen(await question_frames_until(reader, sentinel, "question.rejected")) == a_frames
        assert seen(await question_frames_until(other, sentinel, "question.rejected")) == [
            ("question.asked", in_b),
            ("question.asked", anywhere),
            ("question.rejected", in_b),
            ("question.rejected", anywhere),
            ("question.asked", sentinel),
            ("question.rejected", sentinel),
        ]
        all_frames = await question_frames_until(everything, sentinel, "question.rejected")
        assert len(all_frames) == 8


async def test_global_event_wraps_every_frame_with_its_directory(client):
    async with read_events(client, "/global/event", skip_connected=False) as events:
        connected = await events.next()
        assert connected.type == "server.connected"
        assert set(connected.data) == {"payload"}

        in_a = await create(client, directory="/srv/p/a")
        anywhere = await create(client)
        await reply(client, in_a)
        await reject(client, anywhere)
        frames = await question_frames_until(events, anywhere, "question.rejected")

        assert [(frame.type, request_of(frame), frame.data["directory"]) for frame in frames] == [
            ("question.asked", in_a, "/srv/p/a"),
            ("question.asked", anywhere, TEST_DIRECTORY),
            ("question.replied", in_a, "/srv/p/a"),
            ("question.rejected", anywhere, TEST_DIRECTORY),
        ]
        for frame in frames:
            assert set(frame.data) == {"directory", "payload"}
            assert_event_json(frame)
            assert frame.id == frame.data["payload"]["id"]


# ---------------------------------------------------------------------------------------------------
# Reconnecting


def _resume(how: str, last_event_id: str) -> dict[str, Any]:
    if how == "header":
        return {"headers": {"Last-Event-ID": last_event_id}}
    return {"params": {"last_event_id": last_event_id}}


@pytest.mark.parametrize("how", ["header", "query"])
async def test_reconnect_with_last_event_id_replays_exactly_what_was_missed(client, how):
    async with read_events(client) as first:
        q1 = await create(client)
        seen_last = await first.next("question.asked")
        q2 = await create(client)
        await reply(client, q1)
        q3 = await create(client)
        await reject(client, q2)
        missed = await question_frames_until(first, q2, "question.rejected")

    async with read_events(client, skip_connected=False, **_resume(how, seen_last.id)) as second:
        assert (await second.next()).type == "server.connected"
        replayed = [await second.next() for _ in missed]
        assert [(frame.id, frame.data) for frame in replayed] == [(frame.id, frame.data) for frame in missed]
        assert [(frame.type, request_of(frame)) for frame in replayed] == [
            ("question.asked", q2),
            ("question.replied", q1),
            ("question.asked", q3),
            ("question.rejected", q2),
        ]
        # Nothing is re-announced: the next frame is a live one.
        live = await create(client)
        following = await second.next()
        assert (following.type, request_of(following)) == ("question.asked", live)
        assert following.id == following.data["id"]


async def test_reconnect_without_an_id_reannounces_every_pending_question(client):
    async with read_events(client) as first:
        waiting = [await create(client), await create(client)]
        done = await create(client)
        await reply(client, done)
        original = {}
        for frame in await question_frames_until(first, done, "question.replied"):
            if frame.type == "question.asked":
                original[request_of(frame)] = frame

    async with read_events(client, skip_connected=False) as second:
        assert (await second.next()).type == "server.connected"
        announced = [await second.next() for _ in waiting]
        assert all(frame.type == "question.asked" for frame in announced)
        assert sorted(request_of(frame) for frame in announced) == sorted(waiting)
        for frame in announced:
            assert frame.id == ""  # a re-announcement carries no id: line
            assert_event_json(frame)
            before = original[request_of(frame)]
            assert frame.data["id"] != before.data["id"]
            assert frame.properties == before.properties
        live = await create(client)
        following = await second.next()
        assert (following.type, request_of(following)) == ("question.asked", live)  # not `done`


@pytest.mark.parametrize("case", ["older-than-history", "unknown"])
async def test_reconnect_with_an_id_outside_the_history_reannounces(make_server, case):
    server = make_server(history_size=2)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        async with read_events(client) as first:
            q1 = await create(client)
            oldest = await first.next("question.asked")
            q2 = await create(client)
            q3 = await create(client)
            await reply(client, q2)
            await question_frames_until(first, q2, "question.replied")
        last_event_id = oldest.id if case == "older-than-history" else "evt_000000000000AAAAAAAAAAAAAA"

        for how in ("header", "query"):
            async with read_events(client, skip_connected=False, **_resume(how, last_event_id)) as second:
                assert (await second.next()).type == "server.connected"
                announced = [await second.next(), await second.next()]
                assert [(frame.type, request_of(frame), frame.id) for frame in announced] == [
                    ("question.asked", q1, ""),
                    ("question.asked", q3, ""),
                ]
                live = await create(client)
                following = await second.next()
                assert (following.type, request_of(following)) == ("question.asked", live)
            await reject(client, live)


# ---------------------------------------------------------------------------------------------------
# Framing


TRICKY_TEXT = (
    "<b>Bold</b> & <script>alert('x')</script>\n\ndata: fake\n\nid: evt_bogus\r\n\r\nevent: x\rretry: 1\n:end"
)
TRICKY_LABEL = "Yes\r\ndata: {}\n\nreally"


async def test_html_and_line_breaks_arrive_intact_without_breaking_frames(client):
    schema = {
        "type": "object",
        "properties": {
            "first": {"type": "string", "title": "First"},
            "tricky": {"type": "string", "title": "Tricky", "description": TRICKY_TEXT},
            "pick": {"type": "string", "title": "Pick", "enum": [TRICKY_LABEL, "No"]},
        },
    }
    async with read_events(client) as events:
        tool = ask(client, form(schema, "Line one\r\nline two\n\ndata: not an event"))
        asked = await events.next("question.asked")
        questions = asked.properties["questions"]
        # Made safe to show (a carriage return is a newline), the lines still arrive in one frame.
        assert questions[1]["question"] == safe(TRICKY_TEXT)
        assert questions[2]["options"][0]["label"] == safe(TRICKY_LABEL, oneline=True)
        assert questions[0]["question"].startswith("Line one\nline two\n\ndata: not an event")
        assert asked.properties == (await client.get("/question")).json()[0]

        answers = [["a\r\nb"], ["<i>x</i>\n\ndata: y\n\n"], [TRICKY_LABEL]]
        await reply(client, asked.properties["id"], answers)
        replied = await events.next("question.replied")
        assert replied.properties["answers"] == answers
        assert [frame.type for frame in events.seen] == [
            "server.connected",
            "question.asked",
            "question.replied",
        ]
        assert not events.closed.is_set()
    assert (await tool).json() == {
        "action": "accept",
        "content": {"first": "a\r\nb", "tricky": "<i>x</i>\n\ndata: y\n\n", "pick": TRICKY_LABEL},
    }


async def test_raw_stream_holds_one_data_line_per_event(client):
    """On the wire each event is one ``data:`` line; line breaks in text are escaped inside the JSON."""
    schema = {"type": "object", "properties": {"t": {"type": "string", "description": TRICKY_TEXT}}}
    async with client.stream("GET", "/event", timeout=httpx.Timeout(10, read=5)) as response:
        lines = response.aiter_lines()
        buffer: list[str] = []
        async with asyncio.timeout(5):
            async for line in lines:
                buffer.append(line)
                if line == "":
                    break  # server.connected complete
            request_id = await create(client, form(schema, TRICKY_TEXT))
            block: list[str] = []
            async for line in lines:
                if line == "":
                    if block:
                        break
                    continue
                block.append(line)
    assert [line.split(":", 1)[0] for line in block] == ["id", "data"]
    event = json.loads(block[1].removeprefix("data:").strip())
    assert block[0] == f"id: {event['id']}"
    assert event["type"] == "question.asked"
    assert event["properties"]["id"] == request_id
    assert event["properties"]["questions"][0]["question"] == safe(TRICKY_TEXT)


# ---------------------------------------------------------------------------------------------------
# A subscriber that stops reading


def _stalled_subscriber(port: int) -> socket.socket:
    """A raw ``GET /event`` on a socket with a tiny receive buffer that is never read."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    raw.connect(("127.0.0.1", port))
    raw.sendall(b"GET /event HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    return raw


def _read_to_end(raw: socket.socket) -> bytes:
    raw.settimeout(10)
    chunks = []
    while chunk := raw.recv(1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


async def test_a_stalled_subscriber_is_disconnected_while_others_keep_working(make_server):
    server = make_server(subscriber_queue=5, max_text_length=1_000_000)
    subscribers = server.gateway.store._index._subscribers
    raw = _stalled_subscriber(server.port)
    try:
        await until(
            lambda: bool(subscribers), what="the stalled subscriber subscribed"
        )  # a set in the server's thread
        big = "x" * 200_000
        published = 0
        async with (
            httpx.AsyncClient(base_url=server.url, timeout=10) as client,
            read_events(client) as events,
        ):
            assert len(subscribers) == 2
            while len(subscribers) == 2:
                assert published < 100, "the stalled subscriber was never dropped"
                schema = {"type": "object", "properties": {"k": {"type": "string", "description": big}}}
                request_id = await create(client, form(schema))
                published += 1
                asked = await events.next("question.asked")  # the reading subscriber keeps up
                assert asked.properties["id"] == request_id
            assert len(subscribers) == 1

            # The reading subscriber and the rest of the service still work.
            after = await create(client)
            asked = await events.next("question.asked")
            assert asked.properties["id"] == after
            await reply(client, after)
            assert (await events.next("question.replied")).properties["requestID"] == after
            assert len((await client.get("/question")).json()) == published

        # The stalled stream ended: reading it now reaches its end, short of what was published.
        received = await asyncio.to_thread(_read_to_end, raw)
    finally:
        raw.close()
    assert received.startswith(b"HTTP/1.1 200")
    assert b'"type":"server.connected"' in received
    assert received.count(b'"type":"question.asked"') < published
    assert received.endswith(b"0\r\n\r\n")  # the chunked body was closed, not cut


async def test_a_client_that_leaves_while_its_stream_subscribes_frees_everything(make_server):
    """The response starts before the store has subscribed (a Redis store answers later): a client
    gone by then must not leave a subscription, and a subscriber slot, open for good."""
    server = make_server()  # its store is patched
    store = server.gateway.store
    subscribe = store.subscribe

    async def slow_subscribe(last_event_id=None):
        await asyncio.sleep(0.3)
        return await subscribe(last_event_id)

    store.subscribe = slow_subscribe
    try:
        async with (
            httpx.AsyncClient(base_url=server.url, timeout=10) as client,
            client.stream("GET", "/event") as response,
        ):
            assert response.status_code == 200  # and the client leaves at once
        await until(
            lambda: not (server.gateway.subscribers or len(store._index._subscribers)),
            what="the subscription and its slot freed",
        )
    finally:
        store.subscribe = subscribe
