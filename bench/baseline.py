"""``python -m bench.baseline``: the least a Starlette service can do, for the gateway to be held against.

- ``POST /echo`` parses a JSON body and answers a small JSON object: the baseline of one request.
- ``GET /event`` is a bare ``StreamingResponse`` of Server-Sent Events, and ``POST /elicitations``
  sends one ``question.asked``-shaped frame, encoded once, to every open stream: the baseline of
  fan-out. ``POST /question/{id}/reject`` accepts anything, so the same client code runs against both.
- ``POST /elicit`` sends that frame and holds the request until ``POST /question/{id}/reply`` brings
  the answers, which it returns as an accepted result: the baseline of a whole round trip, driven by
  the same tools and answerer as the gateway's.

It is served with the uvicorn settings the gateway uses
(:func:`~elicitation_gateway.server.runner.serve`): same loop and HTTP
protocol choice, same log level (read from ``GATEWAY_LOG_LEVEL``), access log on, lifespan on, and the
same loop-lag probe.
"""

import argparse
import asyncio
import itertools
import json
import os
import sys
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from bench.probe import probed, raise_open_file_limit

QUESTIONS = [
    {
        "question": "Benchmark\n\nModel",
        "header": "Model",
        "options": [{"label": "SY215C", "description": ""}],
    },
    {"question": "Hours (a whole number from 0 to 20000)", "header": "Hours", "options": []},
    {"question": "Anything else?", "header": "Note", "options": []},
]
streams: set[asyncio.Queue[bytes]] = set()
asked = itertools.count()
waiting: dict[str, asyncio.Future[list[list[str]]]] = {}


async def echo(request: Request) -> JSONResponse:
    body = json.loads(await request.body())
    return JSONResponse({"action": "accept", "content": {"keys": len(body)}})


async def event(request: Request) -> StreamingResponse:
    async def frames() -> AsyncIterator[bytes]:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        streams.add(queue)
        try:
            yield b'data: {"type":"server.connected","properties":{}}\n\n'
            while True:
                yield await queue.get()
        finally:
            streams.discard(queue)

    headers = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}
    return StreamingResponse(frames(), media_type="text/event-stream", headers=headers)


def announce(request: Request) -> str:
    """A ``question.asked``-shaped frame, encoded once, to every open stream; returns the question's id."""
    request_id = f"que_{next(asked):026d}"
    tool = {"messageID": "", "callID": request.query_params.get("callID", "")}
    properties = {"id": request_id, "sessionID": "ses_baseline", "questions": QUESTIONS, "tool": tool}
    event = {"id": f"evt_{request_id[4:]}", "type": "question.asked", "properties": properties}
    payload = json.dumps(event, separators=(",", ":"))
    frame = f"id: evt_{request_id[4:]}\ndata: {payload}\n\n".encode()
    for queue in streams:
        queue.put_nowait(frame)
    return request_id


async def ask(request: Request) -> JSONResponse:
    json.loads(await request.body())
    return JSONResponse({"id": announce(request), "status": "pending"}, status_code=201)


async def elicit(request: Request) -> JSONResponse:
    """Announce the question and wait for its reply (or ``?timeout=`` seconds, as the gateway does)."""
    json.loads(await request.body())
    request_id = announce(request)
    answered = asyncio.get_running_loop().create_future()
    waiting[request_id] = answered
    try:
        answers = await asyncio.wait_for(answered, float(request.query_params.get("timeout", 300)))
    except TimeoutError:
        return JSONResponse({"action": "cancel"})
    finally:
        waiting.pop(request_id, None)
    model, hours, note = (answer[0] for answer in answers)
    return JSONResponse({"action": "accept", "content": {"model": model, "hours": int(hours), "note": note}})


async def reply(request: Request) -> JSONResponse:
    answers = json.loads(await request.body())["answers"]
    answered = waiting.pop(request.path_params["id"], None)
    if answered is None or answered.done():
        return JSONResponse(False, status_code=404)
    answered.set_result(answers)
    return JSONResponse(True)


async def reject(request: Request) -> JSONResponse:
    return JSONResponse(True)


app = Starlette(
    routes=[
        Route("/echo", echo, methods=["POST"]),
        Route("/event", event, methods=["GET"]),
        Route("/elicitations", ask, methods=["POST"]),
        Route("/elicit", elicit, methods=["POST"]),
        Route("/question/{id}/reply", reply, methods=["POST"]),
        Route("/question/{id}/reject", reject, methods=["POST"]),
    ]
)


class BaselineServer(uvicorn.Server):
    async def startup(self, sockets: list | None = None) -> None:
        await super().startup(sockets)
        for server in self.servers:
            for listener in server.sockets:
                host, port = listener.getsockname()[:2]
                print(f"Baseline listening on http://{host}:{port}", flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.baseline", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    raise_open_file_limit()
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=os.environ.get("GATEWAY_LOG_LEVEL", "info"),
        timeout_graceful_shutdown=10,
        lifespan="on",
    )
    probed(BaselineServer)(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
