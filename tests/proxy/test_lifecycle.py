"""The proxy's start and end, as the process its client starts: an upstream that never answers the
handshake is given up after ``--connect-timeout``, one that crashes is started and said once, and the
client closing the proxy's stdin ends the proxy and its upstream, whatever the proxy was doing.

The client here is a raw one (JSON-RPC lines on the proxy's stdin and stdout): the ``mcp`` client
terminates the process it started when it leaves, which would hide a proxy that does not end itself."""

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import RunningServer
from tests.helpers import until
from tests.processes import ROOT
from tests.proxy.conftest import UPSTREAM, HttpUpstream, nothing_pending, question
from tests.proxy.odd_upstream import CRASH_OUTPUT

pytestmark = pytest.mark.timeout(120)
ODD = [sys.executable, "-m", "tests.proxy.odd_upstream"]
GATEWAY_DOWN = "http://127.0.0.1:9"
SAFETY = 60  # seconds: only a safety net; every wait below ends on an event


class RawClient:
    """The proxy as a subprocess, and its client's end of the pipes."""

    def __init__(self, process: asyncio.subprocess.Process, stderr: Path) -> None:
        self.process = process
        self.stderr_path = stderr
        self._ids = 0

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        await self.process.stdin.drain()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        self._ids += 1
        await self.send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params or {}})
        return self._ids

    async def response(self, request_id: int) -> dict[str, Any]:
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), SAFETY)
            assert line, f"the proxy closed its stdout:\n{self.stderr()}"
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    async def initialize(self) -> dict[str, Any]:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw-test-client", "version": "1"},
        }
        result = await self.response(await self.request("initialize", params))
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def close_stdin(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    async def exit_status(self) -> int:
        return await asyncio.wait_for(self.process.wait(), SAFETY)

    def children(self) -> list[int]:
        """The proxy's child processes now (its stdio upstream), from /proc."""
        found: list[int] = []
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            found += [int(pid) for pid in (task / "children").read_text().split()]
        return found

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


@pytest.fixture
async def start_proxy(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    started: list[asyncio.subprocess.Process] = []

    async def start(*args: str, gateway: str = GATEWAY_DOWN) -> RawClient:
        stderr = tmp_path / f"proxy-{len(started)}-stderr.txt"
        environment = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
        with stderr.open("wb") as errors:
            process = await asyncio.create_subprocess_exec(
                *[sys.executable, "-m", "elicitation_gateway", "proxy", "--gateway", gateway, *args],
                cwd=ROOT,
                env=environment,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=errors,
            )
        started.append(process)
        return RawClient(process, stderr)

    yield start
    for process in started:
        if process.returncode is None:
            process.kill()
            await process.wait()


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, exited but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def gone(pid: int) -> None:
    await until(lambda: not alive(pid), timeout=SAFETY, what=f"process {pid} gone")


def noted(starts: Path) -> list[int]:
    """The pids of the odd upstream's starts so far."""
    return [int(pid) for pid in starts.read_text().split()] if starts.exists() else []


async def started_pids(starts: Path, count: int = 1) -> list[int]:
    """The pids of the odd upstream's starts, once there are ``count``."""
    await until(lambda: len(noted(starts)) >= count, timeout=SAFETY, what=f"{count} upstream start(s)")
    return noted(starts)


async def test_an_upstream_that_never_answers_the_handshake_is_given_up_after_the_connect_timeout(
    start_proxy: Callable[..., Any], tmp_path: Path
):
    starts = tmp_path / "starts"
    silent = [*ODD, "silent", str(starts)]
    proxy = await start_proxy("--connect-timeout", "1", "--", *silent)
    (upstream,) = await started_pids(starts)
    assert await proxy.exit_status() == 1  # stdin still open: the timeout alone ends it
    said = proxy.stderr()
    assert f"the upstream MCP server ({' '.join(silent)}) did not answer" in said, said
    assert "within 1 s (--connect-timeout)" in said, said
    await gone(upstream)
    assert len(noted(starts)) == 1  # not tried again in the other era


def test_the_connect_timeout_must_be_positive():
    from elicitation_gateway.proxy.command import parse

    for bad in ("0", "-1", "nan"):
        with pytest.raises(SystemExit) as refused:
            parse(["--connect-timeout", bad, "--", "true"])
        assert refused.value.code == 2
    assert parse(["--", "true"])[0].connect_timeout == 30


async def test_a_crashing_upstream_is_started_once_and_its_output_said_once(
    start_proxy: Callable[..., Any], tmp_path: Path
):
    """Under the default ``--upstream-era auto``: a crash is not a version refusal, so there is no
    second attempt in the other era."""
    starts = tmp_path / "starts"
    crashing = [*ODD, "crash", str(starts)]
    proxy = await start_proxy("--", *crashing)
    assert await proxy.exit_status() == 1
    said = proxy.stderr()
    assert said.count(CRASH_OUTPUT) == 1, said
    assert f"cannot connect to the upstream MCP server ({' '.join(crashing)})" in said, said
    assert len(noted(starts)) == 1


async def test_an_upstream_that_refuses_the_handshake_version_is_connected_in_the_newer_era(
    start_proxy: Callable[..., Any], tmp_path: Path
):
    starts = tmp_path / "starts"
    proxy = await start_proxy("--", *ODD, "modern-only", str(starts))
    await until(lambda: "protocol 2026-07-28" in proxy.stderr(), timeout=SAFETY, what="connected")
    first, second = await started_pids(starts, 2)
    await gone(first)  # the refused attempt's process ended
    await proxy.initialize()
    proxy.close_stdin()
    assert await proxy.exit_status() == 0
    await gone(second)


async def test_closing_stdin_while_the_upstream_connects_stops_it_and_exits(
    start_proxy: Callable[..., Any], tmp_path: Path
):
    """The client gave up before the upstream answered (default ``--connect-timeout``: 30 s)."""
    starts = tmp_path / "starts"
    proxy = await start_proxy("--", *ODD, "silent", str(starts))
    (upstream,) = await started_pids(starts)
    proxy.close_stdin()
    assert await asyncio.wait_for(proxy.exit_status(), 20) == 0, proxy.stderr()
    await gone(upstream)


async def test_closing_stdin_ends_the_proxy_and_its_stdio_upstream(start_proxy: Callable[..., Any]):
    proxy = await start_proxy("--", *UPSTREAM)
    await proxy.initialize()
    (upstream,) = proxy.children()
    tools = await proxy.response(await proxy.request("tools/list"))
    assert "quote" in [tool["name"] for tool in tools["result"]["tools"]]
    proxy.close_stdin()
    assert await proxy.exit_status() == 0, proxy.stderr()
    await gone(upstream)


async def test_closing_stdin_ends_the_proxy_in_front_of_an_http_upstream(
    start_proxy: Callable[..., Any], http_upstream: Callable[..., HttpUpstream]
):
    remote = http_upstream()
    proxy = await start_proxy("--upstream", remote.url)
    await proxy.initialize()
    proxy.close_stdin()
    assert await proxy.exit_status() == 0, proxy.stderr()
    assert remote.process.poll() is None  # a server of its own: only the proxy's connection ends


@pytest.mark.parametrize("tool", ["order_part", "stubborn_order"])
async def test_closing_stdin_while_a_call_waits_on_a_person_withdraws_the_question(
    server: RunningServer, start_proxy: Callable[..., Any], tool: str
):
    proxy = await start_proxy("--", *UPSTREAM, gateway=server.url)
    await proxy.initialize()
    (upstream,) = proxy.children()
    await proxy.request("tools/call", {"name": tool, "arguments": {}})
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as gateway:
        await question(gateway)
        proxy.close_stdin()
        assert await proxy.exit_status() == 0, proxy.stderr()
        await nothing_pending(gateway)
    await gone(upstream)
