"""Memory under big asks: many asks near the body limit, in several sessions at once, take a gateway
process no further than its byte budget allows, and rejecting them gives the budget back."""

import asyncio
import re
from pathlib import Path

import httpx
import pytest

from tests.helpers import form
from tests.hostile.conftest import STALL_LIMIT_MS, StallProbe
from tests.processes import GatewayProcess

BUDGET_MB = 96
SESSION_BUDGET_MB = 48
SLACK_MB = 160
"""Beyond the budget: request bodies being parsed (a 0.9 MB body is some 5 MB of Python objects, eight at a
time), the forms cache, the event history, and the allocator's own rounding."""


def big_ask(seed: str) -> dict:
    """About 0.9 MB of JSON: 50 choice questions of 200 options each."""
    return form(
        {
            "type": "object",
            "properties": {
                f"q{i}": {
                    "type": "string",
                    "title": f"Question {i}",
                    "enum": [f"{seed} option {i}-{j} with a label long enough to count" for j in range(200)],
                }
                for i in range(50)
            },
        }
    )


def memory_mb(pid: int, field: str) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
    assert found is not None
    return int(found.group(1)) / 1024


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, name
    return float(found.group(1))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
async def test_big_asks_take_memory_only_up_to_the_budget(tmp_path):
    gateway = GatewayProcess(
        "memory",
        tmp_path,
        env={
            "GATEWAY_MAX_PENDING_BYTES": str(BUDGET_MB << 20),
            "GATEWAY_MAX_PENDING_BYTES_PER_SESSION": str(SESSION_BUDGET_MB << 20),
            "GATEWAY_LOG_LEVEL": "error",
        },
    ).start()
    probe = StallProbe(gateway)
    try:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as client:
            await client.post("/elicitations", json=form({"type": "object", "properties": {"a": {}}}))
            before = memory_mb(gateway.pid, "VmRSS")
            mark = probe.mark()
            statuses: list[int] = []
            limiter = asyncio.Semaphore(8)

            async def one(number: int) -> None:
                async with limiter:
                    response = await client.post(
                        "/elicitations", json=big_ask(str(number)), params={"sessionID": f"ses_{number % 4}"}
                    )
                    statuses.append(response.status_code)

            await asyncio.gather(*(one(number) for number in range(60)))
            worst = probe.worst_since(mark)
            peak = memory_mb(gateway.pid, "VmHWM") - before
            metrics = (await client.get("/metrics")).text
            held = metric(metrics, "gateway_pending_bytes") / (1 << 20)

            assert set(statuses) == {201, 429}, statuses
            assert held <= BUDGET_MB
            assert peak < BUDGET_MB + SLACK_MB, f"peak {peak:.0f} MB above the start"
            assert worst < STALL_LIMIT_MS, f"/livez took {worst:.0f} ms"

            for request in (await client.get("/question")).json():
                assert (await client.post(f"/question/{request['id']}/reject")).status_code == 200
            metrics = (await client.get("/metrics")).text
            assert metric(metrics, "gateway_pending_bytes") == 0
            again = await client.post("/elicitations", json=big_ask("again"))
            assert again.status_code == 201
    finally:
        probe.stop()
        gateway.terminate()


EMOJI_BUDGET_MB = 64
EMOJI_HISTORY_MB = 16
BODIES_MB = 40
"""Besides what the budgets bound: eight bodies being parsed at once (about 6 MB of Python objects each
for these), and the allocator's own rounding."""


def emoji_ask(seed: int) -> dict:
    """About 0.6 MB of JSON, nearly all emoji: 50 questions of 100 options of 24 emoji each. A ``str``
    holds them at 4 bytes each, UTF-8 frames at 4 bytes each: 4 times what counting characters says."""
    faces = [chr(0x1F600 + (seed * 7 + i) % 80) for i in range(24)]
    return form(
        {
            "type": "object",
            "properties": {
                f"q{i}": {
                    "type": "string",
                    "title": "".join(faces[:8]),
                    "enum": [f"{''.join(faces[j % 24 :] + faces[: j % 24])}{i}-{j}" for j in range(100)],
                }
                for i in range(50)
            },
        }
    )


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
async def test_emoji_asks_are_refused_before_memory_outgrows_the_budgets(tmp_path):
    """Text of emoji holds 4 bytes a character in the process and in its frames: asks of it, with two
    answerers connected (on ``/event`` and ``/global/event``), are refused with 429 while the process
    holds no more than its pending and history budgets (and the bodies being read)."""
    gateway = GatewayProcess(
        "memory",
        tmp_path,
        env={
            "GATEWAY_MAX_PENDING_BYTES": str(EMOJI_BUDGET_MB << 20),
            "GATEWAY_MAX_PENDING_BYTES_PER_SESSION": str(EMOJI_BUDGET_MB << 19),
            "GATEWAY_HISTORY_BYTES": str(EMOJI_HISTORY_MB << 20),
            "GATEWAY_LOG_LEVEL": "error",
        },
    ).start()
    received = [0, 0]
    both_reading = asyncio.Event()

    async def answerer(client: httpx.AsyncClient, path: str, index: int) -> None:
        async with client.stream("GET", path) as response:
            assert response.status_code == 200
            async for chunk in response.aiter_raw():
                received[index] += len(chunk)
                if all(received):
                    both_reading.set()

    try:
        async with (
            httpx.AsyncClient(base_url=gateway.url, timeout=60) as client,
            httpx.AsyncClient(base_url=gateway.url, timeout=None) as streams,
        ):
            readers = [
                asyncio.create_task(answerer(streams, "/event", 0)),
                asyncio.create_task(answerer(streams, "/global/event", 1)),
            ]
            await client.post("/elicitations", json=form({"type": "object", "properties": {"a": {}}}))
            async with asyncio.timeout(30):  # both streams open, and the first question on each
                await both_reading.wait()
            before = memory_mb(gateway.pid, "VmRSS")
            statuses: list[int] = []
            limiter = asyncio.Semaphore(8)

            async def one(number: int) -> None:
                async with limiter:
                    response = await client.post(
                        "/elicitations", json=emoji_ask(number), params={"sessionID": f"ses_{number % 4}"}
                    )
                    statuses.append(response.status_code)

            await asyncio.gather(*(one(number) for number in range(40)))
            peak = memory_mb(gateway.pid, "VmHWM") - before
            held = metric((await client.get("/metrics")).text, "gateway_pending_bytes") / (1 << 20)
            for task in readers:
                task.cancel()
            await asyncio.gather(*readers, return_exceptions=True)

            assert set(statuses) == {201, 429}, statuses
            assert held <= EMOJI_BUDGET_MB
            limit = EMOJI_BUDGET_MB + EMOJI_HISTORY_MB + BODIES_MB
            assert peak < limit, f"peak {peak:.0f} MB above the start, {held:.0f} MiB charged"
    finally:
        gateway.terminate()
