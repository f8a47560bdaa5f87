"""The Redis store itself, a composition of its parts: the records, kept by the scripts; the loop that
follows the event stream and fans it out (:mod:`.follower`), the replicas' liveness (:mod:`.liveness`),
what it keeps of callers (:mod:`.callers`), and the work one replica does for all (:mod:`.once`).
"""

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import socket
import time
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from elicitation_gateway import events
from elicitation_gateway.records import Record, Status
from elicitation_gateway.stores.audit_trail import AuditTrail
from elicitation_gateway.stores.base import Store, StoreUnavailable
from elicitation_gateway.stores.redis.audit import RedisAuditTrail
from elicitation_gateway.stores.redis.cache import PendingCache
from elicitation_gateway.stores.redis.callers import RedisHeldKeys, RedisOrphans
from elicitation_gateway.stores.redis.codec import encode, entry
from elicitation_gateway.stores.redis.connection import UNREACHABLE, Connection, reachable
from elicitation_gateway.stores.redis.follower import RedisSubscription, StreamFollower
from elicitation_gateway.stores.redis.keys import Keys
from elicitation_gateway.stores.redis.liveness import Liveness
from elicitation_gateway.stores.redis.once import RedisOnce
from elicitation_gateway.stores.redis.scripts import ADD, FINISH, RETRACT
from elicitation_gateway.stores.redis.waiters import Waiters

logger = logging.getLogger(__name__)

__all__ = ["RedisStore", "RedisSubscription"]

MIN_STREAM_LENGTH = 1000
"""The stream keeps at least this many entries, so that every replica's loop reads each one in time,
even when the replay history (``history_size``) is smaller."""

CLOSE_DRAIN_SECONDS = 2.0
REPLICA_LIVENESS = 10.0
"""Seconds a replica's liveness entry lasts unless refreshed (``GATEWAY_REPLICA_LIVENESS``)."""


class RedisStore(Store):
    questions_outlive_process = True
    others_publish = True

    def __init__(
        self,
        url: str,
        *,
        history_size: int = 1000,
        result_ttl: float = 600,
        subscriber_queue: int = 1000,
        prefix: str = "gateway",
        replica_liveness: float = REPLICA_LIVENESS,
    ) -> None:
        self.replica_id = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self._result_ttl_ms = max(1, round(result_ttl * 1000))
        self._stream_length = max(history_size, MIN_STREAM_LENGTH)
        self._keys = Keys(prefix)
        self._connection = Connection(url)
        # Pending records never change until they finish: keep the parsed ones (dropped when they
        # finish), so that listing thousands costs one ZRANGE, and reading one no JSON parse.
        self._cache = PendingCache()
        self._waiters = Waiters()
        self._follower = StreamFollower(
            self._connection,
            self._keys,
            self._cache,
            self._waiters,
            history_size=history_size,
            subscriber_queue=subscriber_queue,
        )
        self.orphans = RedisOrphans(self._connection, self._keys)
        self.once = RedisOnce(self._connection, self._keys)
        self.held_keys = RedisHeldKeys(self._connection, self._keys, replica_liveness)
        self.tool_liveness = Liveness(
            self._connection, self._keys, self.replica_id, replica_liveness, self.held_keys.renew
        )

    @functools.cached_property
    def audit_trail(self) -> AuditTrail:
        """The audit trail, one chain for every replica (:mod:`.audit`)."""
        return RedisAuditTrail(self._connection, self._keys.prefix)

    # ---------------------------------------------------------------------------------------------
    # Life cycle

    async def start(self) -> None:
        """Connect and start following the stream; an unreachable Redis is retried in the background."""
        self._connection.open(self._follower.stream_timeout())
        failures = 0
        try:
            await self._follower.follow_from_tail()
        except UNREACHABLE as error:
            # One line that says what a newcomer sees next: the gateway runs, but is not ready.
            logger.warning(
                "Redis is unreachable at start-up (%s); waiting for it: asks get 503 and /readyz says "
                "not ready until it answers",
                error,
            )
            failures = 1
        self._follower.start(failures)
        self.tool_liveness.start()

    async def close(self) -> None:
        if not self._connection.opened:
            return
        with contextlib.suppress(*UNREACHABLE, TimeoutError):
            async with asyncio.timeout(CLOSE_DRAIN_SECONDS):
                await self._follower.deliver_everything_published()
        self._follower.end()
        self._waiters.wake_all()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_DRAIN_SECONDS):
                await self._waiters.gone()  # woken waiters read their records before the pool closes
        await self._follower.stop()
        await self.tool_liveness.stop()
        with contextlib.suppress(*UNREACHABLE, ResponseError, TimeoutError):
            async with asyncio.timeout(CLOSE_DRAIN_SECONDS):
                await self.tool_liveness.leave()
        await self._connection.close(CLOSE_DRAIN_SECONDS)

    async def problem(self) -> str | None:
        if not self._follower.reading:
            return "the question store (Redis) is unreachable: not following its event stream"
        try:
            with reachable():
                await self._client.ping()
        except StoreUnavailable as error:
            cause = error.__cause__
            return f"the question store (Redis) is unreachable: {cause}" if cause else str(error)
        return None

    # ---------------------------------------------------------------------------------------------
    # Records

    async def add(self, record: Record) -> None:
        session_id = record.request.sessionID
        with reachable():
            appended = await self._connection.scripts.run(
                ADD,
                self._keys.changed(record.id),
                [
                    record.id,
                    record.model_dump_json(),
                    record.created_at,
                    session_id,
                    entry(events.ASKED, record.request.wire_json, record.directory),
                    self._stream_length,
                ],
            )
        # None: the record was there already: a retry, after a lost reply, of this add (the loop counts
        # it), or an add that comes after its retraction (kept finished: not pending, never cached).
        if appended is not None:
            self._cache.keep(record)
            self._follower.count_own(appended, session_id)

    async def get(self, request_id: str) -> Record | None:
        if self._follower.reading and (known := self._cache.get(request_id)) is not None:
            # Pending as far as the events this replica has read say; the finish script checks again
            # in Redis, so a reply racing another replica's still ends it once.
            return known
        with reachable():
            raw = await self._client.get(self._keys.record(request_id))
        return None if raw is None else Record.model_validate_json(raw)

    async def pending(self) -> list[Record]:
        with reachable():
            request_ids = await self._client.zrange(self._keys.pending, 0, -1)
            return await self._follower.pending_records(request_ids)

    async def count_pending(self, session_id: str | None = None) -> int:
        """Counted as of the stream entries this replica has read and its own changes, without a
        round trip. Another replica's ask counts here once the loop reads it, a moment later: limits
        were never exact for asks racing on several replicas anyway (each counts, then adds)."""
        if self._follower.reading and self._follower.counts is not None:
            return self._follower.counts.count(session_id)
        with reachable():
            if session_id is None:
                return int(await self._client.zcard(self._keys.pending))
            return int(await self._client.hget(self._keys.sessions, session_id) or 0)

    async def finish(
        self,
        request_id: str,
        status: Status,
        result: dict[str, Any],
        answers: list[list[str]] | None = None,
    ) -> Record | None:
        record = await self.get(request_id)
        if record is None or not record.pending:
            return None
        finished = record.finished(status, result)
        session_id = record.request.sessionID
        with reachable():
            appended = await self._connection.scripts.run(
                FINISH,
                self._keys.changed(request_id),
                [
                    request_id,
                    finished.model_dump_json(),
                    self._result_ttl_ms,
                    session_id,
                    encode(finished.finished_event(answers)),
                    self._stream_length,
                ],
            )
        self._cache.finished(request_id)  # by this call or another replica's
        if appended is None:  # not pending any more: another replica finished it
            return None
        if appended != 0:  # 0: a retry, after a lost reply, of this finish; the loop counts it
            self._follower.count_own(appended, session_id)
        self._waiters.hand(finished)  # now, rather than when the loop reads the finish back
        return finished

    async def retract(self, record: Record) -> Record | None:
        """In one script, whichever comes first, the add or this: a pending record is finished, and
        one not there yet is kept finished, so that its add never makes it pending. That finished
        record lasts at least until the question would have expired: an add that arrives even later
        is expired at once by every replica's timer."""
        finished = record.finished("cancelled", {"action": "cancel"})
        session_id = record.request.sessionID
        retention = max(self._result_ttl_ms, round((record.expires_at - time.time()) * 1000))
        with reachable():
            appended = await self._connection.scripts.run(
                RETRACT,
                self._keys.changed(record.id),
                [
                    record.id,
                    finished.model_dump_json(),
                    retention,
                    session_id,
                    encode(finished.finished_event(None)),
                    self._stream_length,
                ],
            )
        self._cache.finished(record.id)
        if appended is None or appended == 1:  # answered first, or the add never made it pending
            return None
        if appended != 0:
            self._follower.count_own(appended, session_id)
        self._waiters.hand(finished)
        return finished

    def publish_here(self, event: events.Event) -> None:
        self._follower.publish_here(event)

    async def wait(self, request_id: str, seconds: float) -> Record | None:
        with self._waiters.waiting(request_id) as woken:
            record = await self.get(request_id)
            if record is None or not record.pending:
                return record
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):  # unlike wait_for, no task of its own
                    await woken.wait()
            # Woken by its finish, which brought the finished record; or by a lost stream, or the time
            # is up: then Redis says.
            finished = self._waiters.result(request_id)
            return finished if finished is not None else await self.get(request_id)

    def wake(self, request_id: str) -> None:
        self._waiters.wake(request_id)

    # ---------------------------------------------------------------------------------------------
    # Events

    async def subscribe(self, last_event_id: str | None = None) -> RedisSubscription:
        return await self._follower.subscribe(last_event_id)

    # ---------------------------------------------------------------------------------------------

    @property
    def _client(self) -> Redis:
        return self._connection.client
