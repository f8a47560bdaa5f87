"""Memory beside the baseline: the idle process, and what each held ``POST /elicit`` costs.

Both servers are measured alike, one after the other, in each run: started fresh, warmed by one round
trip, their idle RSS read once it has settled; then ``held`` tools each POST ``/elicit`` on a raw
connection of their own and wait, and the RSS is read again once every question is pending (the
gateway's ``/question`` lists them all; the baseline has announced them all on its stream). What a
held wait costs is the increase divided by ``held``: the connection, the request, the waiting task
and, in the gateway, the pending question.
"""

import asyncio
import json
import socket
import time
from typing import Any

import httpx

from bench import loads
from bench.process import ServerProcess
from bench.scenarios import BASELINE, GATEWAY, Options, Shared, median_of, progress

SETTLE = 0.5
"""Seconds the RSS must stay put to count as settled."""


def memory(options: Options, shared: Shared) -> dict[str, Any]:
    """Each run starts its own servers (idle memory is a fresh process's), but the quick run's shared
    ones, which it reuses to save time."""
    held = options.held
    runs = []
    for run in range(1, options.runs + 1):
        measured = {}
        for name, module in (("baseline", BASELINE), ("gateway", GATEWAY)):
            progress(f"memory: {name}, {held} held waits{options.run_label(run)}")
            with options.serving(module, shared) as server:
                measured[name] = asyncio.run(_measure(server, held, gateway=module == GATEWAY))
        runs.append(measured)
    result: dict[str, Any] = {"held": held}
    for name in ("baseline", "gateway"):
        result[name] = median_of([run[name] for run in runs])
    result["idle_ratio"] = round(result["gateway"]["idle_mb"] / result["baseline"]["idle_mb"], 2)
    result["held_ratio"] = round(result["gateway"]["kb_per_held"] / result["baseline"]["kb_per_held"], 2)
    result["each_run"] = runs
    return result


async def _measure(server: ServerProcess, held: int, *, gateway: bool) -> dict[str, float]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        await _one_round_trip(http)
        idle = await _settled(server)
        writers = [await _hold(server, n) for n in range(held)]
        try:
            if gateway:
                await _until_listed(http, held)
            held_rss = await _settled(server)
        finally:
            for writer in writers:
                writer.close()
    return {
        "idle_mb": round(idle / 2**20, 1),
        "held_mb": round(held_rss / 2**20, 1),
        "kb_per_held": round((held_rss - idle) / held / 1024, 1),
    }


async def _one_round_trip(http: httpx.AsyncClient) -> None:
    """Asked and answered once, so that lazy imports and first-use caches are in the idle figure."""
    async with http.stream("GET", "/event", timeout=httpx.Timeout(30, read=None)) as stream:
        lines = stream.aiter_lines()
        async for line in lines:  # the stream is open once its first event has come
            if line.startswith("data:"):
                break
        tool = asyncio.create_task(http.post("/elicit", content=loads.BODY, headers=loads.JSON_HEADERS))
        async for line in lines:
            if line.startswith("data:") and "question.asked" in line:
                request_id = json.loads(line[5:])["properties"]["id"]
                break
    answers = {"answers": [["SY215C"], ["1200"], ["warm"]]}
    (await http.post(f"/question/{request_id}/reply", json=answers)).raise_for_status()
    (await tool).raise_for_status()


async def _hold(server: ServerProcess, n: int) -> asyncio.StreamWriter:
    """One tool's ``POST /elicit``, sent whole and left waiting for its answer."""
    _, writer = await asyncio.open_connection(server.host, server.port, family=socket.AF_INET)
    head = (
        f"POST /elicit?callID=h{n} HTTP/1.1\r\nHost: {server.host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(loads.BODY)}\r\n\r\n"
    )
    writer.write(head.encode() + loads.BODY)
    await writer.drain()
    return writer


async def _until_listed(http: httpx.AsyncClient, count: int) -> None:
    deadline = time.monotonic() + 60
    while len((await http.get("/question")).json()) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {count} questions pending after 60 s")
        await asyncio.sleep(0.1)


async def _settled(server: ServerProcess) -> int:
    """The RSS once it has not moved for :data:`SETTLE` seconds (at most 20 s)."""
    deadline = time.monotonic() + 20
    last = server.rss_bytes()
    steady_since = time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        now = server.rss_bytes()
        if now != last:
            last, steady_since = now, time.monotonic()
        elif time.monotonic() - steady_since >= SETTLE:
            break
    return last
