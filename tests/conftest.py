"""Real servers for the tests: uvicorn on a free loopback port, in a thread, per test."""

import asyncio
import contextlib
import json
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from sse_starlette.sse import AppStatus

from elicitation_gateway.gateway import AlreadyFinished, Gateway
from elicitation_gateway.server.app import create_app
from elicitation_gateway.server.runner import GatewayServer, uvicorn_config
from elicitation_gateway.settings import Settings

CAPTURED_SCHEMAS = Path(__file__).resolve().parent / "fixtures" / "schemas"
TEST_DIRECTORY = "/srv/gateway-tests"
T = TypeVar("T")


def captured_schema_files() -> list[Path]:
    files = sorted(CAPTURED_SCHEMAS.glob("*.json"))
    assert files, f"no captured schemas found in {CAPTURED_SCHEMAS}"
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
        config = uvicorn_config(self.app, settings, log_level="warning")
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

        # The loop uvicorn itself would choose (uvloop where installed), as the service runs.
        with asyncio.Runner(loop_factory=self.server.config.get_loop_factory()) as runner:
            runner.run(main())

    def start(self) -> "RunningServer":
        self._thread.start()
        deadline = time.monotonic() + 30  # a safety net: a loaded machine takes seconds to start one
        while time.monotonic() < deadline and self._thread.is_alive():
            if self.server.started:
                return self
            threading.Event().wait(0.01)
        raise RuntimeError("the test server did not start")

    def call(self, function: Callable[..., Any], *args: Any) -> None:
        """Run ``function`` on the server's own event loop."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(function, *args)

    def run(self, work: Coroutine[Any, Any, T], timeout: float = 10) -> T:
        """Run a coroutine on the server's own event loop and return its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def reset(self) -> None:
        """Withdraw what a test left pending, so that the next test on this server starts clean."""

        async def withdraw_all() -> None:
            for record in await self.gateway.store.pending():
                with contextlib.suppress(LookupError, AlreadyFinished):
                    await self.gateway.withdraw(record.id)

        if self._thread.is_alive():
            self.run(withdraw_all())

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
    with contextlib.ExitStack() as stopping:  # every server is stopped, even if one fails to stop
        for server in started:
            stopping.callback(server.stop)


@pytest.fixture(scope="module")
def shared_server() -> Iterator[RunningServer]:
    """One gateway with the test settings for a whole test module: starting one per test costs more
    than most tests do."""
    server = RunningServer(settings_for_tests()).start()
    yield server
    server.stop()


@pytest.fixture
def server(shared_server: RunningServer) -> Iterator[RunningServer]:
    """The module's gateway, left clean after the test; a test that changes the server's settings,
    patches it or stops it makes its own with ``make_server``."""
    assert shared_server.running, "a test stopped the module's shared server: give it make_server()"
    yield shared_server
    shared_server.reset()


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        yield http
