"""The Redis store itself: records kept by the scripts, the loop that follows the event stream and
fans it out, the replicas' liveness entries, and orphans.
"""

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Iterator
from typing import Any

from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from elicitation_gateway import events
from elicitation_gateway.records import Record, Status
from elicitation_gateway.stores.base import Store, StoreUnavailable
from elicitation_gateway.stores.fanout import LocalSubscription, Subscribers
from elicitation_gateway.stores.orphans import DigestMismatch, HeldKey
from elicitation_gateway.stores.redis.cache import SLICE, PendingCache
from elicitation_gateway.stores.redis.codec import (
    decode,
    encode,
    entry,
    event_id_of,
    stream_id_of,
    stream_order,
)
from elicitation_gateway.stores.redis.counts import PendingCounts
from elicitation_gateway.stores.redis.scripts import (
    ADD,
    CLAIM_ORPHAN,
    CLAIM_WAITS,
    FINISH,
    JOIN_KEY,
    LEAVE_KEY,
    REKEY,
    RETRACT,
    HeldConnection,
    ScriptBatches,
)

logger = logging.getLogger(__name__)

UNREACHABLE = (RedisConnectionError, RedisTimeoutError, ReadOnlyError, OSError)
"""Errors that mean Redis cannot serve us now (down, restarting, loading, read-only replica)."""

MIN_STREAM_LENGTH = 1000
"""The stream keeps at least this many entries, so that every replica's loop reads each one in time,
even when the replay history (``history_size``) is smaller."""

POOL_SIZE = 50
"""Connections for commands (the loop's blocking reads of the stream have one of their own). Each
command in flight holds one, and a burst of requests would open one per
request: past the pool's size they wait for a free one (up to ``POOL_WAIT`` seconds) instead of
failing. Redis runs commands one at a time, so more connections would not make it faster. The URL's
``?max_connections=`` and ``?timeout=`` override both."""
POOL_WAIT = 5.0
READ_BLOCK_MS = 5000
READ_BATCH = 500
RETRY_DELAYS = (0.1, 0.25, 0.5, 1.0, 2.0)
CLOSE_DRAIN_SECONDS = 2.0
REPLICA_LIVENESS = 10.0
"""Seconds a replica's liveness entry lasts unless refreshed (``GATEWAY_REPLICA_LIVENESS``)."""


class RedisSubscription(LocalSubscription):
    """A local subscriber fed by this replica's loop; it skips what its backlog already holds."""

    def __init__(self, members: Subscribers, limit: int) -> None:
        super().__init__(members, [], limit)
        self._after: str | None = None

    def begin(self, backlog: list[events.Event], after: str | None) -> None:
        """Events up to ``after`` (an event id) are in the backlog, or were before this subscription."""
        self.backlog = backlog
        self._after = after
        if after is not None:
            kept = [event for event in self._queue if event.id > after]
            self._queue.clear()
            self._queue.extend(kept)

    def push(self, event: events.Event) -> None:
        if self._after is not None and event.id <= self._after:
            return
        super().push(event)


class RedisStore(Store):
    shared = True

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
        self._url = url
        self.replica_id = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self._liveness = replica_liveness
        self._replicas_key = f"{prefix}:replicas"
        self._replica_prefix = f"{prefix}:replica:"
        self._waits_prefix = f"{prefix}:waits:"
        self._own_waits_key = self._waits_prefix + self.replica_id
        self._waiting: set[str] = set()  # ids whose tool waits on this replica now
        self._waits_to_add: set[str] = set()  # changes of this replica's waits set, not sent yet
        self._waits_to_remove: set[str] = set()
        self._waits_sender: asyncio.Task[None] | None = None
        self._waits_lock = asyncio.Lock()
        self._listed = False  # this replica is in the replicas set (said once, again after a lapse)
        self._claimed: set[str] = set()  # gone replicas' waited-on ids, until the gateway finishes them
        self._alive_since: float | None = None  # refreshing without a miss since (monotonic)
        self._liveness_task: asyncio.Task[None] | None = None
        self._history_size = history_size
        self._result_ttl_ms = max(1, round(result_ttl * 1000))
        self._subscriber_queue = subscriber_queue
        self._stream_length = max(history_size, MIN_STREAM_LENGTH)
        self._pending_key = f"{prefix}:pending"
        self._sessions_key = f"{prefix}:sessions"
        self._events_key = f"{prefix}:events"
        self._record_prefix = f"{prefix}:record:"
        self._orphans_prefix = f"{prefix}:orphans:"
        self._orphaned_prefix = f"{prefix}:orphaned:"
        self._held_prefix = f"{prefix}:held:"
        self._joined: dict[str, str] = {}  # holds of Idempotency-Keys this replica joined -> epoch
        self._unsure_joins: dict[str, str] = {}  # joins whose reply never came -> their epoch
        self._redis: Redis | None = None
        self._stream_pool: ConnectionPool | None = None
        self._stream: HeldConnection | None = None  # the loop's blocking reads of the stream
        self._reader_task: asyncio.Task[None] | None = None
        self._cursor: str | None = None  # the last stream entry handed to local subscribers
        self._reading = False  # the loop is connected and following the stream
        self._position: int | None = None  # entries ever added to the stream, up to the cursor
        self._subscribers = Subscribers()
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._results: dict[str, Record] = {}  # finished records for those waiting on them
        self._counts: PendingCounts | None = None  # None: count in Redis until the loop has them again
        # Pending records never change until they finish: keep the parsed ones (dropped when they
        # finish), so that listing thousands costs one ZRANGE, and reading one no JSON parse.
        self._cache = PendingCache()
        self._progress = asyncio.Event()  # set when the loop hands out entries, or fails
        self._no_waiters = asyncio.Event()
        self._scripts: ScriptBatches | None = None  # the add and finish scripts of every request

    # ---------------------------------------------------------------------------------------------
    # Life cycle

    async def start(self) -> None:
        """Connect and start following the stream; an unreachable Redis is retried in the background."""
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
        self._stream_pool = ConnectionPool.from_url(
            self._url, socket_timeout=READ_BLOCK_MS / 1000 + 5, **options
        )
        self._stream = HeldConnection(self._stream_pool)
        self._scripts = ScriptBatches(self._redis)
        failures = 0
        try:
            await self._follow_from_tail()
        except UNREACHABLE as error:
            # One line that says what a newcomer sees next: the gateway runs, but is not ready.
            logger.warning(
                "Redis is unreachable at start-up (%s); waiting for it: asks get 503 and /readyz says "
                "not ready until it answers",
                error,
            )
            failures = 1
        self._reader_task = asyncio.get_running_loop().create_task(self._read_events(failures))
        self._liveness_task = asyncio.get_running_loop().create_task(self._keep_alive())

    async def close(self) -> None:
        if self._redis is None:
            return
        with contextlib.suppress(*UNREACHABLE, TimeoutError):
            async with asyncio.timeout(CLOSE_DRAIN_SECONDS):
                await self._deliver_everything_published()
        self._subscribers.end_all()
        self._wake_all_waiters()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_DRAIN_SECONDS):
                while self._waiters:  # let woken waiters read their records before the pool closes
                    self._no_waiters.clear()
                    await self._no_waiters.wait()
        for task in (self._reader_task, self._liveness_task, self._waits_sender):
            # redis-py can swallow a cancellation that lands just as a reply arrives: insist.
            while task is not None and not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=0.1)
        with contextlib.suppress(*UNREACHABLE, ResponseError, TimeoutError):
            async with asyncio.timeout(CLOSE_DRAIN_SECONDS):
                await self._leave()
        if self._scripts is not None:
            await self._scripts.close(CLOSE_DRAIN_SECONDS)
        if self._stream is not None and self._stream_pool is not None:
            await self._stream.close()
            await self._stream_pool.aclose()
        if self._redis is not None:
            with contextlib.suppress(*UNREACHABLE):
                await self._redis.aclose()
        self._redis = self._stream = self._stream_pool = self._scripts = None

    async def problem(self) -> str | None:
        if not self._reading:
            return "the question store (Redis) is unreachable: not following its event stream"
        try:
            with self._reachable():
                await self._client.ping()
        except StoreUnavailable as error:
            cause = error.__cause__
            return f"the question store (Redis) is unreachable: {cause}" if cause else str(error)
        return None

    # ---------------------------------------------------------------------------------------------
    # Tools waiting on this replica, and those of replicas gone

    def tool_waits(self, request_id: str) -> None:
        self._waiting.add(request_id)
        self._waits_to_remove.discard(request_id)
        self._waits_to_add.add(request_id)
        self._send_waits_soon()

    def tool_done(self, request_id: str) -> None:
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
                    async with self._client.pipeline(transaction=False) as pipe:
                        if adds:  # before the removals: an id in both was added, then removed
                            if not self._listed:
                                pipe.sadd(self._replicas_key, self.replica_id)
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
                with self._reachable():
                    await self._refresh()
                    await self._send_waits()
                    await self._renew_keys()
                    now = time.monotonic()
                    self._alive_since = self._alive_since or now
                    if now - self._alive_since >= self._liveness:
                        await self._claim_orphans()
            except asyncio.CancelledError:
                raise
            except (StoreUnavailable, ResponseError):
                self._alive_since = None
            except Exception:
                logger.exception("unexpected error while keeping this replica's liveness entry")
                self._alive_since = None
            await asyncio.sleep(self._liveness / 3)

    async def _refresh(self) -> None:
        lived = await self._client.set(
            self._replica_prefix + self.replica_id, "1", px=max(1, round(self._liveness * 1000)), get=True
        )
        if lived is None:
            # The entry had lapsed (Redis lost it, or this replica was cut off for long): another
            # replica may have claimed this one's set meanwhile. What its tools wait for goes again.
            self._listed = False
            self._waits_to_add |= self._waiting - self._waits_to_remove

    async def _claim_orphans(self) -> None:
        replicas = [r for r in await self._client.smembers(self._replicas_key) if r != self.replica_id]
        if not replicas:
            return
        async with self._client.pipeline(transaction=False) as pipe:
            for replica in replicas:
                pipe.exists(self._replica_prefix + replica)
            alive = await pipe.execute()
        gone = [replica for replica, exists in zip(replicas, alive, strict=True) if not exists]
        for replica in gone:
            keys = [
                self._replicas_key,
                self._replica_prefix + replica,
                self._waits_prefix + replica,
                self._own_waits_key,
            ]
            moved = await self._scripts_batched.run(CLAIM_WAITS, keys, [replica, self.replica_id])
            if moved:
                logger.warning(
                    "replica %s is gone: withdrawing the %d questions its tools waited for", replica, moved
                )
        if gone:
            # Whatever this replica's set holds that none of its tools waits for is a claimed orphan
            # (read from Redis: a claim sent again after a lost reply says 0).
            members = await self._client.smembers(self._own_waits_key)
            self._claimed |= set(members) - self._waiting - self._waits_to_remove - self._waits_to_add

    async def _leave(self) -> None:
        """On close: the liveness entry goes, so that what tools still waited for here (the store was
        unreachable at shutdown) is claimed at once; with nothing left, so does the waits set."""
        await self._send_waits()
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.delete(self._replica_prefix + self.replica_id)
            pipe.scard(self._own_waits_key)
            _, left = await pipe.execute()
        if not left:
            await self._client.srem(self._replicas_key, self.replica_id)

    # ---------------------------------------------------------------------------------------------
    # Orphans: a list of ids per caller, and a key per orphaned id (its digest) that lasts its window;
    # claiming an id deletes its key, so that it is claimed once, by a call or by the window's end.

    async def orphan(self, caller: str, request_id: str, digest: str, seconds: float) -> None:
        window = max(1, round(seconds * 1000))
        callers = self._orphans_prefix + _hashed(caller)
        with self._reachable():
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.set(self._orphaned_prefix + request_id, digest, px=window)
                pipe.rpush(callers, request_id)
                pipe.pexpire(callers, window)
                await pipe.execute()

    async def claim_orphan(self, caller: str, digest: str) -> str | None:
        keys = [self._orphans_prefix + _hashed(caller)]
        with self._reachable():
            claimed = await self._scripts_batched.run(CLAIM_ORPHAN, keys, [self._orphaned_prefix, digest])
        if not claimed:
            return None
        if len(claimed) > 1:
            raise DigestMismatch(claimed[0])
        return claimed[0]

    async def end_orphan(self, request_id: str) -> bool:
        with self._reachable():
            return bool(await self._client.delete(self._orphaned_prefix + request_id))

    # ---------------------------------------------------------------------------------------------
    # Idempotency-Keys held across replicas: a hash per key, leased for three liveness periods and
    # renewed by each replica that holds it, so that a replica gone lets go of it within that time.

    @property
    def _key_lease_ms(self) -> int:
        return max(1, round(3 * self._liveness * 1000))

    async def join_key(self, caller: str, digest: str, request_id: str) -> HeldKey | None:
        key = self._held_prefix + _hashed(caller)
        args = [secrets.token_hex(8), request_id, digest, self._key_lease_ms]
        try:
            with self._reachable():
                if (unsure := self._unsure_joins.get(key)) is not None:
                    await self._scripts_batched.run(REKEY, [key], [unsure])
                    self._unsure_joins.pop(key, None)
                held = await self._scripts_batched.run(JOIN_KEY, [key], args)
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

    async def held_key(self, caller: str) -> HeldKey | None:
        with self._reachable():
            epoch, request_id = await self._client.hmget(self._held_prefix + _hashed(caller), "e", "q")
        return None if epoch is None else HeldKey(epoch, request_id, first=False)

    async def rekey(self, caller: str, epoch: str, request_id: str) -> None:
        with self._reachable():
            await self._scripts_batched.run(
                REKEY, [self._held_prefix + _hashed(caller)], [epoch, "q", request_id]
            )

    async def leave_key(self, caller: str, epoch: str, *, keep: bool = False) -> int:
        key = self._held_prefix + _hashed(caller)
        if self._joined.get(key) == epoch:  # renewed by this replica no more, unless kept by it
            del self._joined[key]
        with self._reachable():
            left = int(await self._scripts_batched.run(LEAVE_KEY, [key], [epoch, "1" if keep else "0"]))
        if keep and left == 0:
            self._joined[key] = epoch
        return max(0, left)

    async def free_key(self, caller: str, epoch: str) -> None:
        key = self._held_prefix + _hashed(caller)
        if self._joined.get(key) == epoch:
            del self._joined[key]
        with self._reachable():
            await self._scripts_batched.run(REKEY, [key], [epoch])

    async def _renew_keys(self) -> None:
        for key, epoch in list(self._unsure_joins.items()):
            await self._scripts_batched.run(REKEY, [key], [epoch])
            del self._unsure_joins[key]
        if not self._joined:
            return
        async with self._client.pipeline(transaction=False) as pipe:
            for key in self._joined:
                pipe.pexpire(key, self._key_lease_ms)
            await pipe.execute()

    # ---------------------------------------------------------------------------------------------
    # Records

    async def add(self, record: Record) -> None:
        session_id = record.request.sessionID
        with self._reachable():
            appended = await self._scripts_batched.run(
                ADD,
                self._keys(record.id),
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
            self._count_own(appended, session_id)

    async def get(self, request_id: str) -> Record | None:
        if self._reading and (known := self._cache.get(request_id)) is not None:
            # Pending as far as the events this replica has read say; the finish script checks again
            # in Redis, so a reply racing another replica's still ends it once.
            return known
        with self._reachable():
            raw = await self._client.get(self._record_key(request_id))
        return None if raw is None else Record.model_validate_json(raw)

    async def pending(self) -> list[Record]:
        with self._reachable():
            request_ids = await self._client.zrange(self._pending_key, 0, -1)
            return await self._cache.records(request_ids, self._read_records)

    async def count_pending(self, session_id: str | None = None) -> int:
        """Counted as of the stream entries this replica has read and its own changes, without a
        round trip. Another replica's ask counts here once the loop reads it, a moment later: limits
        were never exact for asks racing on several replicas anyway (each counts, then adds)."""
        if self._reading and self._counts is not None:
            return self._counts.count(session_id)
        with self._reachable():
            if session_id is None:
                return int(await self._client.zcard(self._pending_key))
            return int(await self._client.hget(self._sessions_key, session_id) or 0)

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
        with self._reachable():
            appended = await self._scripts_batched.run(
                FINISH,
                self._keys(request_id),
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
            self._count_own(appended, session_id)
        self._hand_to_waiters(finished)  # now, rather than when the loop reads the finish back
        return finished

    async def retract(self, record: Record) -> Record | None:
        """In one script, whichever comes first, the add or this: a pending record is finished, and
        one not there yet is kept finished, so that its add never makes it pending. That finished
        record lasts at least until the question would have expired: an add that arrives even later
        is expired at once by every replica's timer."""
        finished = record.finished("cancelled", {"action": "cancel"})
        session_id = record.request.sessionID
        retention = max(self._result_ttl_ms, round((record.expires_at - time.time()) * 1000))
        with self._reachable():
            appended = await self._scripts_batched.run(
                RETRACT,
                self._keys(record.id),
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
            self._count_own(appended, session_id)
        self._hand_to_waiters(finished)
        return finished

    async def wait(self, request_id: str, seconds: float) -> Record | None:
        woken = asyncio.Event()
        waiters = self._waiters.setdefault(request_id, set())
        waiters.add(woken)
        try:
            record = await self.get(request_id)
            if record is None or not record.pending:
                return record
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):  # unlike wait_for, no task of its own
                    await woken.wait()
            # Woken by its finish, which brought the finished record; or by a lost stream, or the time
            # is up: then Redis says.
            finished = self._results.get(request_id)
            return finished if finished is not None else await self.get(request_id)
        finally:
            waiters.discard(woken)
            if not waiters:
                self._waiters.pop(request_id, None)
                self._results.pop(request_id, None)
                if not self._waiters:
                    self._no_waiters.set()

    def wake(self, request_id: str) -> None:
        for woken in self._waiters.get(request_id, ()):
            woken.set()

    # ---------------------------------------------------------------------------------------------
    # Events

    async def subscribe(self, last_event_id: str | None = None) -> RedisSubscription:
        if self._cursor is None:  # not following the stream yet: a subscriber could miss events
            raise StoreUnavailable("the question store (Redis) is not reachable yet; retry shortly")
        subscription = RedisSubscription(self._subscribers, self._subscriber_queue)
        self._subscribers.add(subscription)  # before reading the backlog, so nothing falls in between
        try:
            with self._reachable():
                replay = await self._replay(last_event_id) if last_event_id else None
                backlog, after = replay or await self._reannouncement()
        except BaseException:
            subscription.close()
            raise
        subscription.begin(backlog, after)
        return subscription

    async def _replay(self, last_event_id: str) -> tuple[list[events.Event], str] | None:
        """The events after ``last_event_id`` if it is one of the last ``history_size``; else None."""
        stream_id = stream_id_of(last_event_id)
        if stream_id is None or self._history_size == 0:
            return None
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.xrange(self._events_key, stream_id, stream_id, count=1)
            pipe.xrange(self._events_key, f"({stream_id}", "+", count=self._history_size)
            found, after = await pipe.execute()
        if not found or len(after) >= self._history_size:
            return None
        missed = [event for entry_id, fields in after if (event := decode(entry_id, fields))]
        return missed, event_id_of(after[-1][0] if after else stream_id)

    async def _reannouncement(self) -> tuple[list[events.Event], str | None]:
        """A fresh ``question.asked`` for every question pending as of the stream's last entry."""
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.zrange(self._pending_key, 0, -1)
            pipe.xrevrange(self._events_key, "+", "-", count=1)
            request_ids, last = await pipe.execute()
        # A record that finishes meanwhile may be announced or not; its end comes after ``last``.
        records = await self._cache.records(request_ids, self._read_records)
        announcements = []
        for start in range(0, len(records), SLICE):  # thousands: not all in one stretch of the loop
            if start:
                await asyncio.sleep(0)
            announcements += [r.asked_event(replayable=False) for r in records[start : start + SLICE]]
        return announcements, (event_id_of(last[0][0]) if last else None)

    async def _read_events(self, failures: int = 0) -> None:
        """Follow the stream and fan each entry out to this replica's subscribers and waiters;
        ``failures`` counts the failed reads before (start-up's), which were already said."""
        while True:
            try:
                if self._cursor is None or not self._reading:
                    # Listeners were dropped meanwhile (they replay from Redis when they reconnect), so
                    # this replica starts again from the stream's end, knowing its position there.
                    await self._follow_from_tail()
                elif self._counts is None:
                    await self._count_again()
                if failures:
                    logger.info("Redis is reachable again; event streams resume")
                    failures = 0
                read = 0
                for stream_id, fields in await self._read_stream():
                    self._cursor = stream_id
                    read += 1
                    if event := decode(stream_id, fields):
                        self._take_in(stream_id, fields, event)
                        self._dispatch(event)
                if self._position is not None:
                    self._position += read
                if read == READ_BATCH:  # behind: check that the cap has not trimmed what is unread
                    await self._check_nothing_trimmed_unread()
                self._progress.set()
            except asyncio.CancelledError:
                raise
            except UNREACHABLE as error:
                if failures == 0:
                    logger.error(  # noqa: TRY400  (an outage, not a bug: no traceback)
                        "Redis is unreachable (%s); event streams end until it is back", error
                    )
                self._reading = False
                self._progress.set()
                self._drop_local_listeners()
                await asyncio.sleep(RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)])
                failures += 1
            except Exception:
                logger.exception("unexpected error while following the Redis event stream")
                self._reading = False
                self._progress.set()
                self._drop_local_listeners()
                await asyncio.sleep(RETRY_DELAYS[-1])

    async def _read_stream(self) -> list[tuple[str, dict[str, str]]]:
        """The entries after the cursor, as soon as there are some (none after ``READ_BLOCK_MS``)."""
        if self._stream is None:
            raise RedisConnectionError("the store is closed")
        reply = await self._stream.execute(
            "XREAD", "COUNT", READ_BATCH, "BLOCK", READ_BLOCK_MS, "STREAMS", self._events_key, self._cursor
        )
        if not reply:
            return []
        [[_key, entries]] = reply
        # An entry without fields comes back as nothing: kept, so that the cursor passes it.
        return [
            (stream_id, dict(zip(flat[::2], flat[1::2], strict=True)) if flat else {})
            for stream_id, flat in entries
        ]

    async def _follow_from_tail(self) -> None:
        # Finishes published while the loop was not following are never read: what was cached
        # meanwhile may be stale, so pending records are read from Redis again.
        self._cache.clear()
        info = await self._count_again()
        if info is None:
            self._cursor, self._position = "0-0", 0
        else:
            self._cursor = info["last-generated-id"]
            self._position = info.get("entries-added")  # absent before Redis 7: not checked then
        self._reading = True
        # Those who began waiting while the loop was not following may have missed their finish.
        self._wake_all_waiters()

    async def _count_again(self) -> dict[str, Any] | None:
        """Take the pending counts from Redis, as of the stream's last entry (read together with them):
        the loop has not read past it, and the entries up to it change nothing. Returns the stream's
        info (None: there is no stream yet)."""
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.xinfo_stream(self._events_key)
            pipe.zcard(self._pending_key)
            pipe.hgetall(self._sessions_key)
            info, pending, sessions = await pipe.execute(raise_on_error=False)
        for reply in (pending, sessions):
            if isinstance(reply, Exception):
                raise reply
        info = _stream_info_or_none(info)
        since = stream_order(info["last-generated-id"]) if info is not None else (0, 0)
        self._counts = PendingCounts(since, int(pending), {s: int(n) for s, n in sessions.items()})
        return info

    async def _stream_info(self) -> dict[str, Any] | None:
        try:
            return await self._client.xinfo_stream(self._events_key)
        except ResponseError as error:
            return _stream_info_or_none(error)

    async def _check_nothing_trimmed_unread(self) -> None:
        """A replica that reads more slowly than others write could find the capped stream trimmed
        past what it has read: those events would be lost to its subscribers and waiters.

        ``_position`` counts the entries ever added up to the cursor; the stream has trimmed
        ``entries-added - length`` of them. If that is more, entries after the cursor are gone: the
        listeners are dropped (clients reconnect and replay or get every pending question afresh;
        waiters read their records again), and reading goes on from the oldest entry left."""
        info = await self._stream_info()
        if info is None or self._position is None or "entries-added" not in info:
            return
        trimmed = info["entries-added"] - info["length"]
        if trimmed > self._position:
            logger.warning(
                "this replica fell %d events behind the capped event stream; its event streams end so "
                "that clients reconnect (GATEWAY_HISTORY_SIZE sets the cap)",
                trimmed - self._position,
            )
            self._position = trimmed
            self._drop_local_listeners()

    async def _deliver_everything_published(self) -> None:
        """Wait until the loop has handed out every entry the stream holds now."""
        last = await self._client.xrevrange(self._events_key, "+", "-", count=1)
        if not last or self._cursor is None:
            return
        target = stream_order(last[0][0])
        while self._reading and stream_order(self._cursor) < target:
            self._progress.clear()
            await self._progress.wait()

    def _take_in(self, stream_id: str, fields: dict[str, str], event: events.Event) -> None:
        """What an entry says besides its event: the pending counts, and a finished record."""
        if event.type not in (events.ASKED, events.REPLIED, events.REJECTED):
            return
        properties = event.properties
        counts = self._counts
        if counts is not None:
            try:
                session_id, pending, in_session = properties["sessionID"], int(fields["n"]), int(fields["s"])
            except (KeyError, TypeError, ValueError):
                # Written by a replica that does not count (an older version): count in Redis again.
                self._counts = None
            else:
                counts.update(stream_order(stream_id), pending, str(session_id), in_session, read=True)
        request_id = properties.get("requestID")
        if request_id in self._waiters and request_id not in self._results and "r" in fields:
            with contextlib.suppress(ValueError):  # else the waiters read it from Redis
                self._results[request_id] = Record.model_validate_json(fields["r"])

    def _dispatch(self, event: events.Event) -> None:
        self._subscribers.publish(event)
        if event.type in (events.REPLIED, events.REJECTED):
            self._cache.finished(event.properties["requestID"])
            for woken in self._waiters.get(event.properties["requestID"], ()):
                woken.set()

    def _drop_local_listeners(self) -> None:
        """Streams end so that clients reconnect (and replay); waiters look at their records again."""
        self._cache.clear()  # finishes may be missed meanwhile: read records from Redis until then
        self._counts = None  # and so may changes of the counts
        self._subscribers.end_all()
        self._wake_all_waiters()

    def _wake_all_waiters(self) -> None:
        for waiters in self._waiters.values():
            for woken in waiters:
                woken.set()

    # ---------------------------------------------------------------------------------------------

    @property
    def _client(self) -> Redis:
        if self._redis is None:
            raise StoreUnavailable("the question store (Redis) is closed")
        return self._redis

    @property
    def _scripts_batched(self) -> ScriptBatches:
        if self._scripts is None:
            raise StoreUnavailable("the question store (Redis) is closed")
        return self._scripts

    def _record_key(self, request_id: str) -> str:
        return self._record_prefix + request_id

    def _keys(self, request_id: str) -> list[str]:
        """The keys the add and finish scripts touch."""
        return [self._record_key(request_id), self._pending_key, self._sessions_key, self._events_key]

    def _count_own(self, appended: list[Any], session_id: str) -> None:
        """Count this replica's own change before the loop reads it back; if the loop has read it
        already, its counts are as new or newer."""
        counts, cursor = self._counts, self._cursor
        if counts is None or cursor is None:
            return
        stream_id, pending, in_session = appended
        at = stream_order(stream_id)
        if at > stream_order(cursor):
            counts.update(at, int(pending), session_id, int(in_session), read=False)

    def _hand_to_waiters(self, finished: Record) -> None:
        if (waiters := self._waiters.get(finished.id)) is not None:
            self._results[finished.id] = finished
            for woken in waiters:
                woken.set()

    async def _read_records(self, request_ids: list[str]) -> list[str | None]:
        return await self._client.mget([self._record_key(request_id) for request_id in request_ids])

    @contextlib.contextmanager
    def _reachable(self) -> Iterator[None]:
        try:
            yield
        except UNREACHABLE as error:
            raise StoreUnavailable("the question store (Redis) is unreachable; retry shortly") from error
        except ResponseError as error:
            if str(error).startswith(("MISCONF", "MASTERDOWN", "TRYAGAIN")):
                raise StoreUnavailable(f"the question store (Redis) refuses writes: {error}") from error
            raise


def _hashed(caller: str) -> str:
    """A caller's fingerprint as a key: short, and holding none of what it was made of."""
    return hashlib.sha256(caller.encode()).hexdigest()[:32]


def _stream_info_or_none(reply: Any) -> dict[str, Any] | None:
    """XINFO STREAM's reply; None when there is no stream yet."""
    if isinstance(reply, ResponseError):
        if "no such key" in str(reply):
            return None
        raise reply
    return reply
