"""The proxy as clients meet it: ``python -m elicitation_gateway proxy`` started over stdio by a real
``mcp`` client, in front of the upstream of :mod:`tests.proxy.upstream` (over stdio, or over Streamable
HTTP in a process of its own), asking a real gateway on a loopback port."""

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client

from tests.helpers import until
from tests.processes import ROOT, child_setup, free_port, reap, wait_for_port

UPSTREAM = [sys.executable, "-m", "tests.proxy.upstream"]
DIRECTORY = "mcp:Excavator Service"
WHO = "Excavator Service (spare parts)"


class HttpUpstream:
    """A test upstream (``command``, by default :mod:`tests.proxy.upstream`) over Streamable HTTP, in a
    process of its own."""

    def __init__(self, *args: str, command: list[str] = UPSTREAM) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = subprocess.Popen(
            [*command, "--http", str(self.port), *args],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_setup,
        )
        try:
            wait_for_port(self.port, self.process, "the HTTP upstream")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        reap(self.process)


@pytest.fixture
def http_upstream() -> Iterator[Callable[..., HttpUpstream]]:
    started: list[HttpUpstream] = []

    def start(*args: str, command: list[str] = UPSTREAM) -> HttpUpstream:
        started.append(HttpUpstream(*args, command=command))
        return started[-1]

    yield start
    for upstream in started:
        upstream.stop()


class Proxy:
    """How a test starts the proxy: its arguments, the upstream's, and where its stderr goes."""

    def __init__(self, directory: Path) -> None:
        self.stderr_path = directory / "proxy-stderr.txt"

    def parameters(
        self,
        gateway: str,
        *options: str,
        upstream: list[str] | str | None = None,
        env: dict[str, str] | None = None,
    ) -> StdioServerParameters:
        args = ["-m", "elicitation_gateway", "proxy", "--gateway", gateway, *options]
        if isinstance(upstream, str):
            args += ["--upstream", upstream]
        else:
            args += ["--", *(upstream or UPSTREAM)]
        environment = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
        return StdioServerParameters(
            command=sys.executable, args=args, cwd=ROOT, env={**environment, **(env or {})}
        )

    @contextlib.asynccontextmanager
    async def client(
        self,
        gateway: str,
        *options: str,
        era: str = "legacy",
        upstream: list[str] | str | None = None,
        env: dict[str, str] | None = None,
        **client_options: Any,
    ) -> AsyncIterator[Client]:
        with self.stderr_path.open("a", encoding="utf-8") as errlog:
            transport = stdio_client(
                self.parameters(gateway, *options, upstream=upstream, env=env), errlog=errlog
            )
            async with Client(transport, mode=era, **client_options) as client:  # type: ignore[arg-type]
                yield client

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8") if self.stderr_path.exists() else ""


@pytest.fixture
def proxy(tmp_path: Path) -> Proxy:
    return Proxy(tmp_path)


async def question(
    gateway: httpx.AsyncClient, directory: str = DIRECTORY, timeout: float = 20
) -> dict[str, Any]:
    """The one question pending in ``directory``, once the proxy has asked it."""
    listed: list[dict[str, Any]] = []

    async def asked() -> bool:
        nonlocal listed
        listed = (await gateway.get("/question", params={"directory": directory})).json()
        return bool(listed)

    await until(asked, timeout=timeout, what="the proxy's question")
    assert len(listed) == 1, listed
    return listed[0]


async def nothing_pending(gateway: httpx.AsyncClient, timeout: float = 10) -> None:
    async def empty() -> bool:
        return (await gateway.get("/question")).json() == []

    await until(empty, timeout=timeout, what="no question left pending")
