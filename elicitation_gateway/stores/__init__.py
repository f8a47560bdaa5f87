"""Choosing the store from the ``store`` setting: in memory (the default) or a Redis URL."""

from elicitation_gateway.settings import Settings
from elicitation_gateway.stores.base import Store
from elicitation_gateway.stores.memory import MemoryStore


def make_store(settings: Settings) -> Store:
    if settings.store == "memory":
        return MemoryStore(
            history_size=settings.history_size,
            result_ttl=settings.result_ttl,
            subscriber_queue=settings.subscriber_queue,
        )
    from elicitation_gateway.stores.redis import (
        RedisStore,
    )  # imported here: the in-memory store needs no Redis client

    return RedisStore(
        settings.store,
        history_size=settings.history_size,
        result_ttl=settings.result_ttl,
        subscriber_queue=settings.subscriber_queue,
    )
