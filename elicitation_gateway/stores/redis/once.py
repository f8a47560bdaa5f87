"""Work one replica does for all of them, once (:mod:`..once`): a claim and an escalation step's mark
are each one ``SET NX`` across replicas, kept for a while."""

import time

from elicitation_gateway.stores.once import Once
from elicitation_gateway.stores.redis.connection import Connection, reachable
from elicitation_gateway.stores.redis.keys import Keys


class RedisOnce(Once):
    def __init__(self, connection: Connection, keys: Keys) -> None:
        self._connection = connection
        self._keys = keys

    async def claim(self, name: str, seconds: float) -> bool:
        """One ``SET NX`` across replicas, kept for ``seconds``."""
        with reachable():
            claimed = await self._connection.client.set(
                self._keys.claimed(name), 1, nx=True, px=max(1, round(seconds * 1000))
            )
        return bool(claimed)

    async def mark_escalated(self, request_id: str, step: int, expires_at: float) -> bool:
        """One ``SET NX`` across replicas, kept until a minute after the question expires."""
        keep_ms = max(1000, round((expires_at - time.time() + 60) * 1000))
        with reachable():
            marked = await self._connection.client.set(
                self._keys.escalated(request_id, step), 1, nx=True, px=keep_ms
            )
        return bool(marked)
