"""What the store keeps of callers across replicas: questions whose caller went away (orphans), and
the Idempotency-Keys callers hold."""

import secrets

from elicitation_gateway.stores.held_keys import HeldKey, HeldKeys
from elicitation_gateway.stores.orphans import DigestMismatch, Orphans
from elicitation_gateway.stores.redis.connection import Connection, reachable
from elicitation_gateway.stores.redis.keys import Keys
from elicitation_gateway.stores.redis.scripts import CLAIM_ORPHAN, JOIN_KEY, LEAVE_KEY, REKEY


class RedisOrphans(Orphans):
    """A list of ids per caller, and a key per orphaned id (its digest) that lasts its window;
    claiming an id deletes its key, so that it is claimed once, by a call or by the window's end."""

    def __init__(self, connection: Connection, keys: Keys) -> None:
        self._connection = connection
        self._keys = keys

    async def orphan(self, caller: str, request_id: str, digest: str, seconds: float) -> None:
        window = max(1, round(seconds * 1000))
        callers = self._keys.orphans(caller)
        with reachable():
            async with self._connection.client.pipeline(transaction=True) as pipe:
                pipe.set(self._keys.orphaned(request_id), digest, px=window)
                pipe.rpush(callers, request_id)
                pipe.pexpire(callers, window)
                await pipe.execute()

    async def claim(self, caller: str, digest: str) -> str | None:
        keys = [self._keys.orphans(caller)]
        with reachable():
            claimed = await self._connection.scripts.run(
                CLAIM_ORPHAN, keys, [self._keys.orphaned_prefix, digest]
            )
        if not claimed:
            return None
        if len(claimed) > 1:
            raise DigestMismatch(claimed[0])
        return claimed[0]

    async def end(self, request_id: str) -> bool:
        with reachable():
            return bool(await self._connection.client.delete(self._keys.orphaned(request_id)))


class RedisHeldKeys(HeldKeys):
    """Idempotency-Keys held across replicas: a hash per key, leased for three liveness periods and
    renewed by each replica that holds it (:meth:`renew`), so that a replica gone lets go of it within
    that time."""

    def __init__(self, connection: Connection, keys: Keys, liveness: float) -> None:
        self._connection = connection
        self._keys = keys
        self._lease_ms = max(1, round(3 * liveness * 1000))
        self._joined: dict[str, str] = {}  # holds of Idempotency-Keys this replica joined -> epoch
        self._unsure_joins: dict[str, str] = {}  # joins whose reply never came -> their epoch

    async def join(self, caller: str, digest: str, request_id: str) -> HeldKey | None:
        key = self._keys.held(caller)
        args = [secrets.token_hex(8), request_id, digest, self._lease_ms]
        try:
            with reachable():
                if (unsure := self._unsure_joins.get(key)) is not None:
                    await self._connection.scripts.run(REKEY, [key], [unsure])
                    self._unsure_joins.pop(key, None)
                held = await self._connection.scripts.run(JOIN_KEY, [key], args)
        except BaseException:
            # Its reply never came, but the join may have landed, or may yet: freed once Redis answers
            # (by the caller's retry, or within a liveness period), so that the retry need not wait for
            # the lease to lapse.
            self._unsure_joins.setdefault(key, args[0])
            raise
        if not held:
            return None
        if not held[0]:
            raise DigestMismatch(held[1])
        epoch, request_id, first = held
        self._joined[key] = epoch
        return HeldKey(epoch, request_id, first=bool(first))

    async def held(self, caller: str) -> HeldKey | None:
        with reachable():
            epoch, request_id = await self._connection.client.hmget(self._keys.held(caller), "e", "q")
        return None if epoch is None else HeldKey(epoch, request_id, first=False)

    async def rekey(self, caller: str, epoch: str, request_id: str) -> None:
        with reachable():
            await self._connection.scripts.run(REKEY, [self._keys.held(caller)], [epoch, "q", request_id])

    async def leave(self, caller: str, epoch: str, *, keep: bool = False) -> int:
        key = self._keys.held(caller)
        if self._joined.get(key) == epoch:  # renewed by this replica no more, unless kept by it
            del self._joined[key]
        with reachable():
            left = int(await self._connection.scripts.run(LEAVE_KEY, [key], [epoch, "1" if keep else "0"]))
        if keep and left == 0:
            self._joined[key] = epoch
        return max(0, left)

    async def free(self, caller: str, epoch: str) -> None:
        key = self._keys.held(caller)
        if self._joined.get(key) == epoch:
            del self._joined[key]
        with reachable():
            await self._connection.scripts.run(REKEY, [key], [epoch])

    async def renew(self) -> None:
        """Renew the leases of the keys this replica holds; free the joins whose reply never came."""
        for key, epoch in list(self._unsure_joins.items()):
            await self._connection.scripts.run(REKEY, [key], [epoch])
            del self._unsure_joins[key]
        if not self._joined:
            return
        async with self._connection.client.pipeline(transaction=False) as pipe:
            for key in self._joined:
                pipe.pexpire(key, self._lease_ms)
            await pipe.execute()
