"""Choosing the store from the ``store`` setting: in memory (the default), a SQLite file, or a Redis URL."""

from elicitation_gateway.settings import Settings
from elicitation_gateway.stores.base import Store
from elicitation_gateway.stores.memory import MemoryStore


def make_store(settings: Settings) -> Store:
    options = {
        "history_size": settings.history_size,
        "result_ttl": settings.result_ttl,
        "subscriber_queue": settings.subscriber_queue,
    }
    if settings.store == "memory":
        return MemoryStore(**options)
    if settings.store.startswith("sqlite:"):
        from elicitation_gateway.stores.sqlite import SqliteStore

        return SqliteStore.from_url(settings.store, **options)
    from elicitation_gateway.stores.redis import RedisStore  # imported here: the others need no Redis client

    return RedisStore(settings.store, replica_liveness=settings.replica_liveness, **options)
