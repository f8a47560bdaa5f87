"""Real servers for the tests: uvicorn on a free loopback port, in a thread, per test."""

import asyncio
import json
import signal
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sse_starlette.sse import AppStatus

from app.gateway import Gateway
from app.main import create_app
from app.server import GatewayServer
from app.settings import Settings

SHARED_SCHEMAS = Path(__file__).resolve().parents[2] / "shared" / "schemas"
TEST_DIRECTORY = "/srv/gateway-tests"


def shared_schema_files() -> list[Path]:
    files = sorted(SHARED_SCHEMAS.glob("*.json"))
    assert files, f"no captured schemas found in {SHARED_SCHEMAS}"
    return files


def load_params(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())["params"]


class RunningServer:
    """A gateway served by uvicorn in a background thread, stopped the way a signal stops it."""

    def __init__(self, settings: Settings, port: int = 0) -> None:
        """On ``port``, or a free one: a fixed port lets one server take another's place."""
        self.settings = settings
        self.gateway = Gateway(settings)
        self.app = create_app(settings, self.gateway)
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
        self.server = GatewayServer(config, self.gateway)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", port))
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            await self.server.serve(sockets=[self._socket])

        asyncio.run(main())

    def start(self) -> "RunningServer":
        self._thread.start()
        for _ in range(500):
            if self.server.started:
                return self
            if not self._thread.is_alive():
                break
            threading.Event().wait(0.01)
        raise RuntimeError("the test server did not start")

    def call(self, function: Callable[..., Any], *args: Any) -> None:
        """Run ``function`` on the server's own event loop."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(function, *args)

    def stop(self) -> None:
        """Stop as SIGTERM does: pending questions are finished first, then uvicorn exits."""
        if self._thread.is_alive() and self._loop is not None:
            self.call(self.server.handle_exit, signal.SIGTERM, None)
            self._thread.join(15)
        assert not self._thread.is_alive(), "the test server did not stop"


@pytest.fixture(autouse=True)
def _reset_sse_status() -> Iterator[None]:
    """The mcp SDK serves /mcp streams with sse-starlette, which keeps a process-wide shutdown flag
    that a stopped test server sets: no test may inherit another's."""
    AppStatus.should_exit = False
    yield
    AppStatus.should_exit = False


def settings_for_tests(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"directory": TEST_DIRECTORY, "heartbeat": 10, "timeout": 60}
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def make_server() -> Iterator[Callable[..., RunningServer]]:
    started: list[RunningServer] = []

    def make(**overrides: Any) -> RunningServer:
        server = RunningServer(settings_for_tests(**overrides)).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def server(make_server: Callable[..., RunningServer]) -> RunningServer:
    return make_server()


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        yield http
