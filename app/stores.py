"""Choosing the store from the ``store`` setting: in memory (the default) or a Redis URL."""

from app.memory import MemoryStore
from app.settings import Settings
from app.store import Store


def make_store(settings: Settings) -> Store:
    if settings.store == "memory":
        return MemoryStore(
            history_size=settings.history_size,
            result_ttl=settings.result_ttl,
            subscriber_queue=settings.subscriber_queue,
        )
    from app.redis_store import RedisStore  # imported here: the in-memory store needs no Redis client

    return RedisStore(
        settings.store,
        history_size=settings.history_size,
        result_ttl=settings.result_ttl,
        subscriber_queue=settings.subscriber_queue,
    )
