"""The liveness of replicas: each keeps an entry that lapses unless refreshed, and a set of the
questions its tools wait for; a replica that finds another's entry lapsed claims that one's set, and
the gateway withdraws those questions (nobody can collect their answers)."""

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from redis.exceptions import ResponseError

from elicitation_gateway.stores.base import StoreUnavailable
from elicitation_gateway.stores.redis.connection import UNREACHABLE, Connection, cancel, reachable
from elicitation_gateway.stores.redis.keys import Keys
from elicitation_gateway.stores.redis.scripts import CLAIM_WAITS
from elicitation_gateway.stores.tool_liveness import ToolLiveness

logger = logging.getLogger("elicitation_gateway.stores.redis.store")  # the store's lines, as before


class Liveness(ToolLiveness):
    """This replica's liveness entry and waits set, refreshed on a task of its own
    (:meth:`start`), which also runs ``renew`` each time (what else must be refreshed as long as the
    replica lives)."""

    def __init__(
        self,
        connection: Connection,
        keys: Keys,
        replica_id: str,
        seconds: float,
        renew: Callable[[], Awaitable[None]],
    ) -> None:
        self._connection = connection
        self._keys = keys
        self.replica_id = replica_id
        self.seconds = seconds
        self._renew = renew
        self._own_waits_key = keys.waits(replica_id)
        self._waiting: set[str] = set()  # ids whose tool waits on this replica now
        self._waits_to_add: set[str] = set()  # changes of this replica's waits set, not sent yet
        self._waits_to_remove: set[str] = set()
        self._waits_sender: asyncio.Task[None] | None = None
        self._waits_lock = asyncio.Lock()
        self._listed = False  # this replica is in the replicas set (said once, again after a lapse)
        self._claimed: set[str] = set()  # gone replicas' waited-on ids, until the gateway finishes them
        self._alive_since: float | None = None  # refreshing without a miss since (monotonic)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._keep_alive())

    async def stop(self) -> None:
        await cancel(self._task)
        await cancel(self._waits_sender)

    def waits(self, request_id: str) -> None:
        self._waiting.add(request_id)
        self._waits_to_remove.discard(request_id)
        self._waits_to_add.add(request_id)
        self._send_waits_soon()

    def done(self, request_id: str) -> None:
        self._waiting.discard(request_id)
        self._claimed.discard(request_id)
        # Removed even if its addition seems not sent yet: a refresh may have queued it again.
        self._waits_to_remove.add(request_id)
        self._send_waits_soon()

    async def abandoned(self) -> list[str]:
        return list(self._claimed)

    def _send_waits_soon(self) -> None:
        """The changes of this replica's waits set go out on a task of their own, all those made
        meanwhile together; failing, the liveness loop sends them once Redis is back."""
        if self._waits_sender is None or self._waits_sender.done():
            self._waits_sender = asyncio.get_running_loop().create_task(self._send_waits())

    async def _send_waits(self) -> None:
        # One sender at a time: an id added and then removed must reach Redis in that order.
        async with self._waits_lock:
            await self._send_waits_now()

    async def _send_waits_now(self) -> None:
        with contextlib.suppress(*UNREACHABLE, ResponseError, StoreUnavailable):
            while self._waits_to_add or self._waits_to_remove:
                adds, self._waits_to_add = self._waits_to_add, set()
                removes, self._waits_to_remove = self._waits_to_remove, set()
                try:
                    async with self._connection.client.pipeline(transaction=False) as pipe:
                        if adds:  # before the removals: an id in both was added, then removed
                            if not self._listed:
                                pipe.sadd(self._keys.replicas, self.replica_id)
                            pipe.sadd(self._own_waits_key, *adds)
                        if removes:
                            pipe.srem(self._own_waits_key, *removes)
                        await pipe.execute()
                    self._listed = self._listed or bool(adds)
                except BaseException:
                    self._waits_to_add |= adds
                    self._waits_to_remove |= removes
                    raise

    async def _keep_alive(self) -> None:
        """Refresh this replica's liveness entry, send what its waits set still lacks, and claim the
        waited-on questions of replicas whose entry lapsed."""
        while True:
            try:
                with reachable():
                    await self._refresh()
                    await self._send_waits()
                    await self._renew()
                    now = time.monotonic()
                    self._alive_since = self._alive_since or now
                    if now - self._alive_since >= self.seconds:
                        await self._claim_orphans()
            except asyncio.CancelledError:
                raise
            except (StoreUnavailable, ResponseError):
                self._alive_since = None
            except Exception:
                logger.exception("unexpected error while keeping this replica's liveness entry")
                self._alive_since = None
            await asyncio.sleep(self.seconds / 3)

    async def _refresh(self) -> None:
        lived = await self._connection.client.set(
            self._keys.replica(self.replica_id), "1", px=max(1, round(self.seconds * 1000)), get=True
        )
        if lived is None:
            # The entry had lapsed (Redis lost it, or this replica was cut off for long): another
            # replica may have claimed this one's set meanwhile. What its tools wait for goes again.
            self._listed = False
            self._waits_to_add |= self._waiting - self._waits_to_remove

    async def _claim_orphans(self) -> None:
        client = self._connection.client
        replicas = [r for r in await client.smembers(self._keys.replicas) if r != self.replica_id]
        if not replicas:
            return
        async with client.pipeline(transaction=False) as pipe:
            for replica in replicas:
                pipe.exists(self._keys.replica(replica))
            alive = await pipe.execute()
        gone = [replica for replica, exists in zip(replicas, alive, strict=True) if not exists]
        for replica in gone:
            keys = [
                self._keys.replicas,
                self._keys.replica(replica),
                self._keys.waits(replica),
                self._own_waits_key,
            ]
            moved = await self._connection.scripts.run(CLAIM_WAITS, keys, [replica, self.replica_id])
            if moved:
                logger.warning(
                    "replica %s is gone: withdrawing the %d questions its tools waited for", replica, moved
                )
        if gone:
            # Whatever this replica's set holds that none of its tools waits for is a claimed orphan
            # (read from Redis: a claim sent again after a lost reply says 0).
            members = await client.smembers(self._own_waits_key)
            self._claimed |= set(members) - self._waiting - self._waits_to_remove - self._waits_to_add

    async def leave(self) -> None:
        """On close: the liveness entry goes, so that what tools still waited for here (the store was
        unreachable at shutdown) is claimed at once; with nothing left, so does the waits set."""
        await self._send_waits()
        async with self._connection.client.pipeline(transaction=False) as pipe:
            pipe.delete(self._keys.replica(self.replica_id))
            pipe.scard(self._own_waits_key)
            _, left = await pipe.execute()
        if not left:
            await self._connection.client.srem(self._keys.replicas, self.replica_id)
