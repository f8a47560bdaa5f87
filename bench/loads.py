"""Client load, each kind in its own process: tools (or baseline posters), one answerer, subscribers.

Every process talks to the benchmark over a pipe: it sends ``READY`` once connected, receives the
measured window ``(start_ns, end_ns)`` (or a stop), and sends back raw samples. All times are
``time.monotonic_ns()``, one clock for every process on the machine, so a tool's send time can travel
inside the question (``callID=t<ns>``) and an answerer's reply time inside the answer (the free-text
``note``), and each side computes its latency without any other bookkeeping.
"""

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import aiohttp
import uvloop

from bench import sse
from bench.probe import raise_open_file_limit

READY = "ready"
STOP = "stop"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "title": "Model", "enum": ["SY215C", "SY235C"]},
        "hours": {"type": "integer", "title": "Hours", "minimum": 0, "maximum": 20000},
        "note": {"type": "string", "title": "Note", "description": "Anything else?"},
    },
    "required": ["model", "hours"],
}
ELICITATION: dict[str, Any] = {"mode": "form", "message": "Benchmark", "requestedSchema": SCHEMA}


def big_ask(seed: str, questions: int = 50, options: int = 200) -> bytes:
    """The largest kind of ask a default gateway takes: 50 choice questions of 200 options each, about
    0.8 MB of JSON, near ``GATEWAY_MAX_BODY_SIZE``; ``seed`` makes each one a schema of its own."""
    properties = {
        f"q{i}": {
            "type": "string",
            "title": f"Question {i}",
            "enum": [
                f"{seed} option {i}-{j}, with a label long enough to make a big ask, near the limit"
                for j in range(options)
            ],
        }
        for i in range(questions)
    }
    body = {
        "mode": "form",
        "message": f"Big ask {seed}",
        "requestedSchema": {"type": "object", "properties": properties},
    }
    return json.dumps(body).encode()


BODY = json.dumps(ELICITATION).encode()
JSON_HEADERS = {"Content-Type": "application/json"}
CALL_ID = re.compile(rb'"callID":"t(\d+)"')
ASKED = b'"type":"question.asked"'
KEEPALIVE = 2.0
"""Seconds an idle client connection is kept: under uvicorn's 5, so the server never closes one
just as the client reuses it (a reset, not a retry, for a POST)."""
TOOL_TIMEOUT = 20
"""Seconds a benchmark question may stay pending (its tool then gets cancel and counts an error)."""


@contextlib.asynccontextmanager
async def _session() -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        yield session


async def _receive(conn: Connection) -> Any:
    return await asyncio.to_thread(conn.recv)


# -------------------------------------------------------------------------------------------------
# Tools and baseline posters: the same loop, with or without the call id and the timed answer


@dataclass
class PosterSamples:
    completed: int = 0
    errors: int = 0
    latency: list[int] = field(default_factory=list)
    """Send to response, ns."""
    reply_to_result: list[int] = field(default_factory=list)
    """Answerer's reply sent to the tool's result received, ns (tools only)."""


def posters_main(conn: Connection, url: str, concurrency: int, tool: bool) -> None:
    """``concurrency`` loops each POSTing ``BODY`` to ``url`` and waiting for the answer, until the end."""
    raise_open_file_limit()
    uvloop.run(_posters(conn, url, concurrency, tool))


async def _posters(conn: Connection, url: str, concurrency: int, tool: bool) -> None:
    async with _session() as session:
        conn.send(READY)
        start, end = await _receive(conn)
        samples = PosterSamples()
        await asyncio.gather(
            *(_post_loop(session, url, tool, start, end, samples) for _ in range(concurrency))
        )
    conn.send(asdict(samples))
    # Alive until the benchmark has read this process's CPU time from /proc, which ends with it: the
    # benchmark may read it late on a loaded machine.
    with contextlib.suppress(EOFError):
        await _receive(conn)


async def _post_loop(
    session: aiohttp.ClientSession, url: str, tool: bool, start: int, end: int, samples: PosterSamples
) -> None:
    while (sent := time.monotonic_ns()) < end:
        # A question whose reply failed would keep its tool waiting: the timeout ends it, and it counts
        # as an error (the result is then cancel, not accept).
        target = f"{url}?callID=t{sent}&timeout={TOOL_TIMEOUT}" if tool else url
        try:
            async with session.post(target, data=BODY, headers=JSON_HEADERS) as response:
                body = await response.read()
                ok = response.status == 200 and (not tool or b'"accept"' in body)
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        done = time.monotonic_ns()
        if not ok:
            samples.errors += 1
            await asyncio.sleep(0.01)
            continue
        if start <= done <= end:
            samples.completed += 1
            samples.latency.append(done - sent)
            if tool:
                samples.reply_to_result.append(done - int(json.loads(body)["content"]["note"]))


# -------------------------------------------------------------------------------------------------
# The answerer: one stream, a reply to every question.asked


@dataclass
class AnswererSamples:
    replies: int = 0
    refused: int = 0
    """Replies to questions already withdrawn (tools stop at the end of the window)."""
    post_to_asked: list[int] = field(default_factory=list)
    """A tool's POST sent to its question.asked received, ns."""


def answerer_main(conn: Connection, host: str, port: int) -> None:
    raise_open_file_limit()
    uvloop.run(_answerer(conn, host, port))


async def _answerer(conn: Connection, host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    samples = AnswererSamples()
    window = [0, 0]
    replies: set[asyncio.Task[None]] = set()
    base = f"http://{host}:{port}"

    async with _session() as session:

        async def reply(request_id: str) -> None:
            answers = [["SY215C"], ["1200"], [str(time.monotonic_ns())]]
            body = json.dumps({"answers": answers}).encode()
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                url = f"{base}/question/{request_id}/reply"
                async with session.post(url, data=body, headers=JSON_HEADERS) as response:
                    await response.read()
                    if response.status == 200:
                        samples.replies += 1
                    else:
                        samples.refused += 1

        def on_data(line: bytes, received: int) -> None:
            if ASKED not in line:
                return
            request = json.loads(line)["properties"]
            if window[0] <= received <= window[1]:
                samples.post_to_asked.append(received - int(request["tool"]["callID"][1:]))
            task = loop.create_task(reply(request["id"]))
            replies.add(task)
            task.add_done_callback(replies.discard)

        subscriber = await sse.subscribe(host, port, "/event", on_data)
        conn.send(READY)
        window[:] = await _receive(conn)
        await _receive(conn)  # STOP
        subscriber.close()
        if replies:
            await asyncio.wait(replies, timeout=10)
    conn.send(asdict(samples))


# -------------------------------------------------------------------------------------------------
# Fan-out subscribers: many idle streams, each timing every question.asked


def subscribers_main(conn: Connection, host: str, port: int, count: int) -> None:
    """Hold ``count`` streams; for each question, send ``("delivered", asked_ns, [delay_ns, ...])``
    once every stream has it; on STOP, send ``("stopped", streams that ended early)``."""
    raise_open_file_limit()
    uvloop.run(_subscribers(conn, host, port, count))


async def _subscribers(conn: Connection, host: str, port: int, count: int) -> None:
    arrivals: dict[int, list[int]] = {}

    def on_data(line: bytes, received: int) -> None:
        if ASKED not in line or (found := CALL_ID.search(line)) is None:
            return
        asked = int(found[1])
        delays = arrivals.setdefault(asked, [])
        delays.append(received - asked)
        if len(delays) == count:
            conn.send(("delivered", asked, arrivals.pop(asked)))

    gate = asyncio.Semaphore(64)  # under the server's accept backlog

    async def connect() -> sse.Subscriber:
        async with gate:
            return await sse.subscribe(host, port, "/event", on_data)

    try:
        subscribers = await asyncio.gather(*(connect() for _ in range(count)))
    except OSError as error:
        conn.send(("error", f"could not open {count} streams: {error}"))
        return
    conn.send(READY)
    await _receive(conn)  # STOP
    ended = sum(subscriber.closed.done() for subscriber in subscribers)
    for subscriber in subscribers:
        subscriber.close()
    conn.send(("stopped", ended))
