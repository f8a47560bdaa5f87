"""A real ``redis-server`` for the tests, on a free loopback port (a pytest plugin: fixtures below).

Test modules that need Redis say ``pytest_plugins = ["tests.redis_server"]``. Without a
``redis-server`` binary the Redis tests skip, except under ``CI=true``, where they fail.
"""

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.processes import child_setup, free_port, stop


def require_redis_server() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server is not installed (apt-get install redis-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return binary


class RedisServer:
    """One ``redis-server`` process; ``persistent`` keeps an append-only file, so a restart keeps data."""

    def __init__(self, directory: Path, *, persistent: bool = False) -> None:
        self.binary = require_redis_server()
        self.directory = directory
        self.persistent = persistent
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> "RedisServer":
        self.directory.mkdir(parents=True, exist_ok=True)
        arguments = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "yes" if self.persistent else "no",
            "--appendfsync", "always",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            arguments, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=child_setup
        )
        client = self.client()
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"redis-server did not start:\n{log}") from None
                time.sleep(0.02)
        client.close()
        return self

    def stop(self) -> None:
        """Stop as an operator does (SIGTERM): a persistent server writes its data first."""
        if self.process is not None:
            stop(self.process)
        self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, decode_responses=True, socket_timeout=5)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The shared server, emptied for this test."""
    with redis_server.client() as client:
        client.flushall()
    return redis_server.url


@pytest.fixture
def make_redis_server(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """``make_redis_server(persistent=...)``: a server of the test's own, not started yet; stopped after."""
    made: list[RedisServer] = []

    def make(*, persistent: bool = False) -> RedisServer:
        server = RedisServer(tmp_path / f"redis{len(made)}", persistent=persistent)
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()
