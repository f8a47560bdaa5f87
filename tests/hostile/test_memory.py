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
