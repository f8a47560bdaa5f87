"""Client-side helpers the tests share: an SSE reader and tools that ask in the background."""

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

SAFETY_NET = 15.0
"""How long a wait for an event goes on before the test fails: only a safety net, which a test that
passes never reaches, so it is generous enough for a machine loaded many times over."""

COLOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "color": {"type": "string", "title": "Color", "enum": ["red", "green"]},
        "count": {"type": "integer", "title": "Count", "minimum": 1, "maximum": 9},
    },
    "required": ["color"],
}
"""Two questions, one required; answered with ``[["green"], ["3"]]`` it gives ``COLOR_ACCEPTED``."""
COLOR_ACCEPTED = {"action": "accept", "content": {"color": "green", "count": 3}}

RFC0010_SCHEMA = {
    "type": "object",
    "properties": {
        "q0": {
            "type": "string",
            "title": "Model",
            "description": "Equipment model?",
            "enum": ["SY215C", "SY235C"],
        },
        "q1": {
            "type": "array",
            "title": "Symptoms",
            "description": "Select symptoms:",
            "items": {
                "type": "string",
                "enum": ["Black smoke", "Noise"],
                "x-option-descriptions": {"Noise": "Abnormal noise"},
            },
            "uniqueItems": True,
        },
        "q2": {"type": "string", "title": "Notes", "description": "Anything else?", "minLength": 1},
    },
    "required": ["q0", "q1"],
}


def form(schema: dict[str, Any], message: str = "Please answer") -> dict[str, Any]:
    return {"mode": "form", "message": message, "requestedSchema": schema}


def text_properties(count: int) -> dict[str, Any]:
    """An object schema with ``count`` free-text questions named k0, k1, ..."""
    return {
        "type": "object",
        "properties": {f"k{i}": {"type": "string", "title": f"Question {i}"} for i in range(count)},
    }


@dataclass
class Frame:
    """One SSE frame as a client sees it."""

    id: str
    data: dict[str, Any]

    @property
    def type(self) -> str:
        payload = self.data.get("payload", self.data)
        return payload["type"]

    @property
    def properties(self) -> dict[str, Any]:
        payload = self.data.get("payload", self.data)
        return payload["properties"]


@dataclass
class EventReader:
    """Reads an SSE stream in the background; ``next()`` returns frames in order."""

    frames: asyncio.Queue[Frame] = field(default_factory=asyncio.Queue)
    seen: list[Frame] = field(default_factory=list)
    response: httpx.Response | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)

    async def next(self, type: str | None = None, timeout: float = SAFETY_NET) -> Frame:
        """The next frame (of ``type``, skipping heartbeats and other types)."""
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.frames.get()
                if type is None or frame.type == type:
                    return frame

    async def through(self, type: str, timeout: float = SAFETY_NET) -> list[Frame]:
        """Every frame up to the next of ``type``, that one included: what came before a later event,
        to check that something did not come, whatever the time it takes."""
        frames: list[Frame] = []
        async with asyncio.timeout(timeout):
            while not frames or frames[-1].type != type:
                frames.append(await self.frames.get())
        return frames

    async def no_frame(self, within: float = 0.3, type: str | None = None) -> None:
        """Assert that no frame (of ``type``) arrives in ``within`` seconds."""
        with contextlib.suppress(TimeoutError):
            frame = await self.next(type=type, timeout=within)
            raise AssertionError(f"unexpected frame {frame}")


@contextlib.asynccontextmanager
async def read_events(
    client: httpx.AsyncClient,
    path: str = "/event",
    *,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    skip_connected: bool = True,
) -> AsyncIterator[EventReader]:
    """Subscribe, wait for ``server.connected`` (so nothing published after is missed), yield a reader."""
    reader = EventReader()
    ready = asyncio.Event()

    async def pump() -> None:
        try:
            async with aconnect_sse(
                client,
                "GET",
                path,
                headers=dict(headers or {}),
                params=params,
                timeout=httpx.Timeout(10, read=None),
            ) as source:
                reader.response = source.response
                async for sse in source.aiter_sse():
                    frame = Frame(id=sse.id, data=json.loads(sse.data))
                    reader.seen.append(frame)
                    if not ready.is_set():
                        ready.set()
                        if skip_connected and frame.type == "server.connected":
                            continue
                    await reader.frames.put(frame)
        finally:
            reader.closed.set()
            ready.set()

    task = asyncio.create_task(pump())
    try:
        async with asyncio.timeout(SAFETY_NET):
            await ready.wait()
        yield reader
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await task


def ask(client: httpx.AsyncClient, params: Any, **query: Any) -> asyncio.Task[httpx.Response]:
    """A tool posting ``/elicit`` in the background; the task's result is the HTTP response."""
    return asyncio.create_task(
        client.post("/elicit", json=params, params=query, timeout=httpx.Timeout(10, read=60))
    )


async def pending(
    client: httpx.AsyncClient, count: int = 1, timeout: float = SAFETY_NET
) -> list[dict[str, Any]]:
    """Wait until ``GET /question`` lists ``count`` requests; return them."""
    async with asyncio.timeout(timeout):
        while True:
            listed = (await client.get("/question")).json()
            if len(listed) >= count:
                return listed
            await asyncio.sleep(0.02)


async def until(
    condition: Callable[[], bool | Awaitable[bool]], timeout: float = SAFETY_NET, what: str = ""
) -> None:
    """Wait for a condition rather than for a fixed time: checked every 10 ms, failing after ``timeout``."""
    async with asyncio.timeout(timeout):
        while True:
            met = condition()
            if not isinstance(met, bool):
                met = await met
            if met:
                return
            await asyncio.sleep(0.01)
    raise AssertionError(f"not met in {timeout} s: {what}")  # pragma: no cover (timeout raises first)


def waited_on(store: Any, request_id: str) -> bool:
    """Whether something (a long poll, ``POST /elicit``) waits on ``request_id`` in this store now."""
    local = getattr(store, "_index", None)  # the in-memory and SQLite stores' records in memory
    return request_id in getattr(local, "_waiters", {}) or request_id in getattr(store, "_waiters", {})


def child_processes() -> set[int]:
    """The pids of this process's children, those not reaped yet (zombies) included."""
    children: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            children |= {int(pid) for pid in (task / "children").read_text().split()}
    return children
