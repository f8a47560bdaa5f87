"""The kinds of store ``GATEWAY_STORE`` may name, each told by how the value starts.

One table that the settings check, the start command (does the kind need an extra that is not
installed?) and :func:`elicitation_gateway.stores.make_store` all read, so that a new kind of store
is added in one place. Each kind's module is imported only when that kind is used: the others need
no SQLite or Redis code.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from elicitation_gateway.stores.base import Store


class StoreSettings(Protocol):
    """The settings a store is made from (:class:`elicitation_gateway.settings.Settings` has them)."""

    store: str
    history_size: int
    history_bytes: int
    result_ttl: float
    max_finished: int
    subscriber_queue: int
    replica_liveness: float


@dataclass(frozen=True)
class Scheme:
    """One kind of store: the values that name it, their check, and how it is made."""

    name: str
    """The kind's name, as its package extra and its module are named."""
    title: str
    """Its name in a sentence: "the Redis store"."""
    described: str
    """What the value is, with examples: for the error that lists every kind."""
    check: Callable[[str], None]
    """Raises ValueError saying what is wrong with a value of this kind (before start)."""
    make: "Callable[[StoreSettings], Store]"
    whole: tuple[str, ...] = ()
    """Values that name this kind alone."""
    starts: tuple[str, ...] = ()
    """How the URLs of this kind start."""
    needs: str | None = None
    """The package the kind needs, which its extra installs; None: the service's own packages."""

    def matches(self, value: str) -> bool:
        return value in self.whole or value.startswith(self.starts)


def _check_nothing(value: str) -> None:
    pass


def _check_sqlite(url: str) -> None:
    from elicitation_gateway.stores.sqlite import check_url

    check_url(url)  # a ValueError that says what is wrong


def _check_redis(url: str) -> None:
    from redis.connection import parse_url  # only a Redis URL needs the Redis client

    try:
        parse_url(url)
    except ValueError as error:
        raise ValueError(f"not a usable Redis URL: {error}") from None


def _options(settings: StoreSettings) -> dict[str, float | int]:
    return {
        "history_size": settings.history_size,
        "result_ttl": settings.result_ttl,
        "subscriber_queue": settings.subscriber_queue,
    }


def _make_memory(settings: StoreSettings) -> "Store":
    from elicitation_gateway.stores.memory import MemoryStore

    return MemoryStore(
        history_bytes=settings.history_bytes, max_finished=settings.max_finished, **_options(settings)
    )


def _make_sqlite(settings: StoreSettings) -> "Store":
    from elicitation_gateway.stores.sqlite import SqliteStore

    return SqliteStore.from_url(
        settings.store,
        history_bytes=settings.history_bytes,
        max_finished=settings.max_finished,
        **_options(settings),
    )


def _make_redis(settings: StoreSettings) -> "Store":
    from elicitation_gateway.stores.redis import RedisStore

    return RedisStore(settings.store, replica_liveness=settings.replica_liveness, **_options(settings))


SCHEMES = (
    Scheme("memory", "in-memory", "'memory'", _check_nothing, _make_memory, whole=("memory",)),
    Scheme(
        "sqlite",
        "SQLite",
        "a SQLite file (sqlite:///relative.db, sqlite:////absolute/path.db)",
        _check_sqlite,
        _make_sqlite,
        starts=("sqlite:",),
    ),
    Scheme(
        "redis",
        "Redis",
        "a Redis URL (redis://host:6379/0, rediss://... for TLS, unix:///path/to/redis.sock)",
        _check_redis,
        _make_redis,
        starts=("redis://", "rediss://", "unix://"),
        needs="redis",
    ),
)


def scheme_of(value: str) -> Scheme:
    """The kind of store ``value`` names; a ValueError that lists the kinds when it names none."""
    for scheme in SCHEMES:
        if scheme.matches(value):
            return scheme
    *first, last = (scheme.described for scheme in SCHEMES)
    raise ValueError(f"must be {', '.join(first)} or {last}")


def check(value: str) -> None:
    """Raises ValueError saying what is wrong with ``value`` as a store."""
    scheme_of(value).check(value)
