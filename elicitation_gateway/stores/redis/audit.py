"""The audit trail in Redis: one chain for every replica.

``{prefix}:audit`` is the list of entries (one JSON line each, oldest first) and ``{prefix}:audit:last``
the last entry appended. An append may hold many entries (a batch), pushed at once. An entry's hash
covers the previous one's, which a Lua script cannot compute (Redis has no SHA-256 for scripts), so an
append is an optimistic transaction: ``WATCH`` the last entry, read it, make the next one here, then
``MULTI``/``EXEC`` writes it as the new last and pushes it on the list. If another replica appended
meanwhile, ``EXEC`` does nothing and the append starts again from the new last entry: two replicas never
chain to the same one. One replica's own appends take turns (a lock), so only other replicas can make
one start again, and each time one does, that replica's append went in: the chain always moves on. A
short random pause after each lost turn keeps two replicas from meeting again in step.

Retention drops entries from the head, in a script (so that two replicas pruning at once never drop one
too many), compared by ``at``; the last entry stays in ``{prefix}:audit:last`` for the next append to
follow.
"""

import asyncio
import logging
import random
from collections.abc import Sequence
from typing import Any

from redis.exceptions import WatchError

from elicitation_gateway.audit import AuditEntry, parse_line
from elicitation_gateway.stores.audit_trail import AuditTrail, chained, selected
from elicitation_gateway.stores.base import StoreUnavailable
from elicitation_gateway.stores.redis.connection import Connection, reachable

logger = logging.getLogger(__name__)

RETRIES = 100
"""Appends started again after another replica's before giving up (each costs a round trip or two)."""
PAUSE = 0.002
"""Seconds, at most, of the random pause after the first lost turn; it grows with each one after."""
PRUNE = """
local dropped = 0
while dropped < tonumber(ARGV[2]) do
    local head = redis.call('LINDEX', KEYS[1], 0)
    if not head then break end
    if cjson.decode(head)['at'] >= ARGV[1] then break end
    redis.call('LPOP', KEYS[1])
    dropped = dropped + 1
end
return dropped
"""
PRUNE_AT_ONCE = 10_000
"""Entries one run of the pruning script drops at most: Redis runs nothing else meanwhile."""


class RedisAuditTrail(AuditTrail):
    def __init__(self, connection: Connection, prefix: str) -> None:
        self._connection = connection
        self.key = f"{prefix}:audit"
        self.last_key = f"{prefix}:audit:last"
        self._turn = asyncio.Lock()

    async def append_many(self, batch: Sequence[dict[str, Any]]) -> list[AuditEntry]:
        if not batch:
            return []
        with reachable():
            async with self._turn, self._connection.client.pipeline(transaction=True) as pipe:
                for lost in range(RETRIES):
                    try:
                        await pipe.watch(self.last_key)
                        raw = await pipe.get(self.last_key)
                        made = chained(None if raw is None else parse_line(raw), batch)
                        lines = [entry.line().decode() for entry in made]
                        pipe.multi()
                        pipe.set(self.last_key, lines[-1])
                        pipe.rpush(self.key, *lines)
                        await pipe.execute()
                        return made
                    except WatchError:
                        await pipe.reset()
                        await asyncio.sleep(random.uniform(0, PAUSE * min(lost + 1, 10)))
        raise StoreUnavailable(f"the audit trail could not be appended to after {RETRIES} tries")

    async def entries(self, since: str | None = None, question: str | None = None) -> list[AuditEntry]:
        with reachable():
            lines = await self._connection.client.lrange(self.key, 0, -1)  # one consistent reading
        return selected(map(parse_line, lines), since, question)

    async def prune(self, before: str) -> int:
        dropped = 0
        with reachable():
            client = self._connection.client
            while True:
                count = int(await client.eval(PRUNE, 1, self.key, before, PRUNE_AT_ONCE))
                dropped += count
                if count < PRUNE_AT_ONCE:
                    return dropped
