"""The store's connections to Redis: a pool for commands, a connection of its own for the blocking
reads of the event stream, the scripts sent in batches; and what an unreachable Redis raises."""

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from elicitation_gateway.stores.base import StoreUnavailable
from elicitation_gateway.stores.redis.scripts import HeldConnection, ScriptBatches

UNREACHABLE = (RedisConnectionError, RedisTimeoutError, ReadOnlyError, OSError)
"""Errors that mean Redis cannot serve us now (down, restarting, loading, read-only replica)."""

POOL_SIZE = 50
"""Connections for commands (the loop's blocking reads of the stream have one of their own). Each
command in flight holds one, and a burst of requests would open one per
request: past the pool's size they wait for a free one (up to ``POOL_WAIT`` seconds) instead of
failing. Redis runs commands one at a time, so more connections would not make it faster. The URL's
``?max_connections=`` and ``?timeout=`` override both."""
POOL_WAIT = 5.0


class Connection:
    def __init__(self, url: str) -> None:
        self._url = url
        self._redis: Redis | None = None
        self._stream_pool: ConnectionPool | None = None
        self._stream: HeldConnection | None = None  # the loop's blocking reads of the stream
        self._scripts: ScriptBatches | None = None  # the add and finish scripts of every request

    def open(self, stream_timeout: float) -> None:
        """Make the pools (connecting as commands need); the stream's reads may block for
        ``stream_timeout`` seconds."""
        options: dict[str, Any] = {
            "decode_responses": True,
            "socket_connect_timeout": 2,
            "retry": Retry(ExponentialBackoff(cap=0.2, base=0.02), 2),
            "client_name": "elicitation-gateway",
            "protocol": 2,
        }
        pool = BlockingConnectionPool.from_url(
            self._url, max_connections=POOL_SIZE, timeout=POOL_WAIT, socket_timeout=5, **options
        )
        self._redis = Redis.from_pool(pool)  # closing the client closes the pool
        self._stream_pool = ConnectionPool.from_url(self._url, socket_timeout=stream_timeout, **options)
        self._stream = HeldConnection(self._stream_pool)
        self._scripts = ScriptBatches(self._redis)

    @property
    def opened(self) -> bool:
        return self._redis is not None

    @property
    def client(self) -> Redis:
        if self._redis is None:
            raise StoreUnavailable("the question store (Redis) is closed")
        return self._redis

    @property
    def scripts(self) -> ScriptBatches:
        if self._scripts is None:
            raise StoreUnavailable("the question store (Redis) is closed")
        return self._scripts

    async def read_stream(self, *args: Any) -> Any:
        """A command on the stream's own connection (a blocking read)."""
        if self._stream is None:
            raise RedisConnectionError("the store is closed")
        return await self._stream.execute(*args)

    async def close(self, drain_seconds: float) -> None:
        if self._scripts is not None:
            await self._scripts.close(drain_seconds)
        if self._stream is not None and self._stream_pool is not None:
            await self._stream.close()
            await self._stream_pool.aclose()
        if self._redis is not None:
            with contextlib.suppress(*UNREACHABLE):
                await self._redis.aclose()
        self._redis = self._stream = self._stream_pool = self._scripts = None


@contextlib.contextmanager
def reachable() -> Iterator[None]:
    """Redis unreachable, or refusing writes for now, raises :class:`.StoreUnavailable`."""
    try:
        yield
    except UNREACHABLE as error:
        raise StoreUnavailable("the question store (Redis) is unreachable; retry shortly") from error
    except ResponseError as error:
        if str(error).startswith(("MISCONF", "MASTERDOWN", "TRYAGAIN")):
            raise StoreUnavailable(f"the question store (Redis) refuses writes: {error}") from error
        raise


async def cancel(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` and wait for it to end."""
    # redis-py can swallow a cancellation that lands just as a reply arrives: insist.
    while task is not None and not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
