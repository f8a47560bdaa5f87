"""The hostile tier: one real gateway process, a stall probe beside it, an answerer's event stream held
open throughout, and after each hostile request the checks that nothing else was affected."""

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.helpers import EventReader, ask, form, read_events
from tests.processes import ROOT, GatewayProcess, child_setup, reap

STALL_LIMIT_MS = 100.0
"""No input may hold the event loop longer than this: /livez answers within it throughout."""

NOTE: dict[str, Any] = {"type": "object", "properties": {"note": {"type": "string", "title": "Note"}}}


class StallProbe:
    """``python -m tests.stall_probe`` beside the gateway; ``worst_since(mark)`` is the slowest /livez
    answer seen after ``mark`` (waiting for two answers that started after it), less the time the
    machine kept the gateway and the probe waiting for a CPU."""

    def __init__(self, gateway: GatewayProcess) -> None:
        self.latencies: list[float] = []
        self.problems: list[str] = []
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.stall_probe", gateway.url, str(gateway.pid)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=child_setup,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            with self._lock:
                try:
                    self.latencies.append(float(line))
                except ValueError:
                    self.problems.append(line.strip())

    def mark(self) -> int:
        with self._lock:
            return len(self.latencies)

    def worst_since(self, mark: int) -> float:
        deadline = time.monotonic() + 10
        while self.mark() < mark + 2:  # answers that began after the work ended
            assert self._process.poll() is None, "the stall probe stopped"
            assert time.monotonic() < deadline, "the stall probe got no answer for 10 s"
            time.sleep(0.01)
        with self._lock:
            return max(self.latencies[mark:])

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            assert self._process.stdin is not None
            self._process.stdin.close()
        try:
            self._process.wait(10)
        finally:
            reap(self._process)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    process = GatewayProcess("hostile", tmp_path_factory.mktemp("hostile"), env={"GATEWAY_TIMEOUT": "60"})
    process.start()
    yield process
    process.terminate()


@pytest.fixture(scope="module")
def probe(gateway: GatewayProcess) -> Iterator[StallProbe]:
    stall_probe = StallProbe(gateway)
    yield stall_probe
    stall_probe.stop()
    assert not stall_probe.problems, stall_probe.problems


@dataclass
class Watch:
    """What every hostile request is checked against: an answerer's stream, a question already pending."""

    client: httpx.AsyncClient
    events: EventReader
    pending_id: str
    listed: list[dict[str, Any]]


@contextlib.asynccontextmanager
async def watching(
    gateway: GatewayProcess, probe: StallProbe, schema: dict[str, Any] = NOTE
) -> AsyncIterator[Watch]:
    """Around hostile requests: one question pending and an event stream open before; after, the
    stream is still open and saw nothing asked, ``GET /question`` lists exactly what it did, a normal
    round trip succeeds, and the event loop never stalled for ``STALL_LIMIT_MS``."""
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
        for left in (await client.get("/question")).json():  # by a test that failed before its end
            await client.post(f"/question/{left['id']}/reject")
        async with read_events(client) as events:
            created = await client.post("/elicitations", json=form(schema, "Already pending"))
            assert created.status_code == 201, created.text
            pending_id = created.json()["id"]
            assert (await events.next("question.asked")).properties["id"] == pending_id
            listed = (await client.get("/question")).json()
            mark = probe.mark()

            yield Watch(client, events, pending_id, listed)

            worst = probe.worst_since(mark)
            assert worst < STALL_LIMIT_MS, f"/livez took {worst:.0f} ms"
            assert not events.closed.is_set(), "the answerer's event stream was cut"
            await events.no_frame(within=0.05, type="question.asked")
            listing = await client.get("/question")
            assert listing.status_code == 200
            assert listing.json() == listed
            await round_trip(client, events)
            assert (await client.post(f"/question/{pending_id}/reject")).status_code == 200
            assert (await events.next("question.rejected")).properties["requestID"] == pending_id


async def round_trip(client: httpx.AsyncClient, events: EventReader) -> None:
    """A normal ask, answer and result."""
    tool = ask(client, form(NOTE, "Round trip"))
    asked = await events.next("question.asked")
    reply = await client.post(f"/question/{asked.properties['id']}/reply", json={"answers": [["fine"]]})
    assert reply.status_code == 200, reply.text
    assert (await tool).json() == {"action": "accept", "content": {"note": "fine"}}
    assert (await events.next("question.replied")).properties["requestID"] == asked.properties["id"]
