"""The Redis store: one set of questions for every replica, and one event stream they all send.

Keys (``prefix`` is ``gateway`` unless told otherwise)::

    {prefix}:record:{id}    the Record as JSON; a finished one expires after the retention period
                            (a pending one leaves by finishing: every replica times it out)
    {prefix}:pending        sorted set of pending ids, scored by creation time (oldest first)
    {prefix}:sessions       hash: pending questions per session
    {prefix}:events         stream of events, capped (``XADD MAXLEN ~``)

Every change is one atomic step in Redis that also appends its event to the stream: ``add`` is a
MULTI/EXEC block, ``finish`` a Lua script that moves a record out of the pending set only if it is
still there. So a record finishes once in the whole cluster, and its ``question.replied`` or
``question.rejected`` goes out exactly once.

Each replica runs one ``XREAD`` loop that decodes every stream entry once and hands the same event to
all of its local subscribers. An event's id is derived from its stream entry's id (see
:func:`event_id_of`), so every replica sends the same ids, in the same order, and a ``Last-Event-ID``
from any replica leads back to the same place in the stream.

When Redis cannot be reached, calls raise :class:`.StoreUnavailable`, local streams end
(clients reconnect and replay), and the loop keeps retrying until Redis is back.
"""

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from elicitation_gateway import events, ids
from elicitation_gateway.stores.base import Record, Status, Store, StoreUnavailable
from elicitation_gateway.stores.fanout import LocalSubscription, Subscribers

logger = logging.getLogger(__name__)

UNREACHABLE = (RedisConnectionError, RedisTimeoutError, ReadOnlyError, OSError)
"""Errors that mean Redis cannot serve us now (down, restarting, loading, read-only replica)."""

MIN_STREAM_LENGTH = 1000
"""The stream keeps at least this many entries, so that every replica's loop reads each one in time,
even when the replay history (``history_size``) is smaller."""

POOL_SIZE = 50
"""Connections for commands. Each command in flight holds one, and a burst of requests would open one
per request: past the pool's size they wait for a free one (up to ``POOL_WAIT`` seconds) instead of
failing. Redis runs commands one at a time, so more connections would not make it faster. The URL's
``?max_connections=`` and ``?timeout=`` override both."""
POOL_WAIT = 5.0
SLICE = 500
"""Records parsed, or announcements made, between two turns of the loop when there are thousands."""
READ_BLOCK_MS = 5000
READ_BATCH = 500
RETRY_DELAYS = (0.1, 0.25, 0.5, 1.0, 2.0)
CLOSE_DRAIN_SECONDS = 2.0

_FINISH = """
-- KEYS: record, pending set, sessions hash, events stream
-- ARGV: request id, finished record, retention (ms), session id, event, stream length
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then
  return false
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
if redis.call('HINCRBY', KEYS[3], ARGV[4], -1) <= 0 then
  redis.call('HDEL', KEYS[3], ARGV[4])
end
return redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*', 'e', ARGV[5])
"""

# ---------------------------------------------------------------------------------------------------
# Event ids <-> stream ids

_SEQ_DIGITS = 14
_SEQ_LIMIT = 2**64


def event_id_of(stream_id: str) -> str:
    """``<ms>-<seq>`` as an OpenCode event id: ``evt_`` + 12 hex digits of ms + 14 base62 of seq.

    The mapping is one-to-one and keeps the order, so ids sort as the stream does.
    """
    millis, seq = (int(part) for part in stream_id.split("-"))
    digits = []
    for _ in range(_SEQ_DIGITS):
        seq, digit = divmod(seq, 62)
        digits.append(ids.BASE62[digit])
    return f"evt_{millis:012x}{''.join(reversed(digits))}"


def stream_id_of(event_id: str) -> str | None:
    """The stream id an event id was derived from; None when it cannot have come from a stream."""
    if not event_id.startswith("evt_") or not ids.ID_PATTERN.match(event_id):
        return None
    seq = 0
    for char in event_id[16:]:
        seq = seq * 62 + ids.BASE62.index(char)
    if seq >= _SEQ_LIMIT:
        return None
    return f"{int(event_id[4:16], 16)}-{seq}"


def _stream_order(stream_id: str) -> tuple[int, int]:
    millis, seq = stream_id.split("-")
    return int(millis), int(seq)


def _encode(event: events.Event) -> str:
    """What the stream keeps of an event: its id comes from the entry."""
    head = '{"type":' + events.to_json(event.type) + ',"properties":' + event.properties_json()
    return head + ',"directory":' + events.to_json(event.directory) + "}"


def _decode(stream_id: str, fields: dict[str, str]) -> events.Event | None:
    """The event an entry holds; None (and a warning) for an entry that is not one."""
    try:
        body = json.loads(fields["e"])
        return events.Event(
            body["type"],
            body["properties"],
            directory=body.get("directory"),
            replayable=True,
            id=event_id_of(stream_id),
        )
    except (KeyError, TypeError, ValueError):
        logger.warning("skipping stream entry %s: not an event", stream_id)
        return None


# ---------------------------------------------------------------------------------------------------


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
    ) -> None:
        self._url = url
        self._history_size = history_size
        self._result_ttl_ms = max(1, round(result_ttl * 1000))
        self._subscriber_queue = subscriber_queue
        self._stream_length = max(history_size, MIN_STREAM_LENGTH)
        self._pending_key = f"{prefix}:pending"
        self._sessions_key = f"{prefix}:sessions"
        self._events_key = f"{prefix}:events"
        self._record_prefix = f"{prefix}:record:"
        self._redis: Redis | None = None
        self._reader: Redis | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._cursor: str | None = None  # the last stream entry handed to local subscribers
        self._reading = False  # the loop is connected and following the stream
        self._position: int | None = None  # entries ever added to the stream, up to the cursor
        self._subscribers = Subscribers()
        self._waiters: dict[str, set[asyncio.Event]] = {}
        # Pending records never change until they finish: keep the parsed ones (dropped when they
        # finish), so that listing thousands costs one ZRANGE, and reading one no JSON parse.
        self._known: dict[str, Record] = {}
        self._finishes = 0  # finish events seen: a listing that raced one is not cached
        self._progress = asyncio.Event()  # set when the loop hands out entries, or fails
        self._no_waiters = asyncio.Event()
        self._finish_script: Any = None

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
        self._reader = Redis.from_url(self._url, socket_timeout=READ_BLOCK_MS / 1000 + 5, **options)
        self._finish_script = self._redis.register_script(_FINISH)
        with contextlib.suppress(*UNREACHABLE):
            await self._follow_from_tail()
        self._reader_task = asyncio.get_running_loop().create_task(self._read_events())

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
        if self._reader_task is not None:
            # redis-py can swallow a cancellation that lands just as a reply arrives: insist.
            while not self._reader_task.done():
                self._reader_task.cancel()
                await asyncio.wait({self._reader_task}, timeout=0.1)
        for client in (self._reader, self._redis):
            if client is not None:
                with contextlib.suppress(*UNREACHABLE):
                    await client.aclose()
        self._redis = self._reader = None

    async def healthy(self) -> bool:
        if not self._reading:
            return False
        try:
            with self._reachable():
                return bool(await self._client.ping())
        except StoreUnavailable:
            return False

    # ---------------------------------------------------------------------------------------------
    # Records

    async def add(self, record: Record) -> None:
        with self._reachable():
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.set(self._record_key(record.id), record.model_dump_json())
                pipe.zadd(self._pending_key, {record.id: record.created_at})
                pipe.hincrby(self._sessions_key, record.request.sessionID, 1)
                self._append(pipe, record.asked_event())
                await pipe.execute()
        self._known[record.id] = record

    async def get(self, request_id: str) -> Record | None:
        if self._reading and (known := self._known.get(request_id)) is not None:
            # Pending as far as the events this replica has read say; the finish script checks again
            # in Redis, so a reply racing another replica's still ends it once.
            return known
        with self._reachable():
            raw = await self._client.get(self._record_key(request_id))
        return None if raw is None else Record.model_validate_json(raw)

    async def pending(self) -> list[Record]:
        with self._reachable():
            request_ids = await self._client.zrange(self._pending_key, 0, -1)
            return await self._pending_records(request_ids)

    async def count_pending(self, session_id: str | None = None) -> int:
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
        with self._reachable():
            appended = await self._finish_script(
                keys=[self._record_key(request_id), self._pending_key, self._sessions_key, self._events_key],
                args=[
                    request_id,
                    finished.model_dump_json(),
                    self._result_ttl_ms,
                    record.request.sessionID,
                    _encode(finished.finished_event(answers)),
                    self._stream_length,
                ],
            )
        self._finishes += 1
        self._known.pop(request_id, None)  # finished, by this call or another replica's
        return finished if appended else None  # not pending any more: another replica finished it

    async def wait(self, request_id: str, seconds: float) -> Record | None:
        woken = asyncio.Event()
        waiters = self._waiters.setdefault(request_id, set())
        waiters.add(woken)
        try:
            record = await self.get(request_id)
            if record is None or not record.pending:
                return record
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), seconds)
            return await self.get(request_id)
        finally:
            waiters.discard(woken)
            if not waiters:
                self._waiters.pop(request_id, None)
                if not self._waiters:
                    self._no_waiters.set()

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
        missed = [event for entry_id, fields in after if (event := _decode(entry_id, fields))]
        return missed, event_id_of(after[-1][0] if after else stream_id)

    async def _reannouncement(self) -> tuple[list[events.Event], str | None]:
        """A fresh ``question.asked`` for every question pending as of the stream's last entry."""
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.zrange(self._pending_key, 0, -1)
            pipe.xrevrange(self._events_key, "+", "-", count=1)
            request_ids, last = await pipe.execute()
        # A record that finishes meanwhile may be announced or not; its end comes after ``last``.
        records = await self._pending_records(request_ids)
        announcements = []
        for start in range(0, len(records), SLICE):  # thousands: not all in one stretch of the loop
            if start:
                await asyncio.sleep(0)
            announcements += [r.asked_event(replayable=False) for r in records[start : start + SLICE]]
        return announcements, (event_id_of(last[0][0]) if last else None)

    async def _read_events(self) -> None:
        """Follow the stream and fan each entry out to this replica's subscribers and waiters."""
        failures = 0
        while True:
            try:
                if self._cursor is None or not self._reading:
                    # Listeners were dropped meanwhile (they replay from Redis when they reconnect), so
                    # this replica starts again from the stream's end, knowing its position there.
                    await self._follow_from_tail()
                if failures:
                    logger.warning("Redis is reachable again; event streams resume")
                    failures = 0
                reply = await self._reader.xread(  # type: ignore[union-attr]
                    {self._events_key: self._cursor}, count=READ_BATCH, block=READ_BLOCK_MS
                )
                read = 0
                for _stream, entries in reply:
                    for stream_id, fields in entries:
                        self._cursor = stream_id
                        read += 1
                        if event := _decode(stream_id, fields):
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
                    logger.warning("Redis is unreachable (%s); event streams end until it is back", error)
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

    async def _follow_from_tail(self) -> None:
        # Finishes published while the loop was not following are never read: what was cached
        # meanwhile may be stale, so pending records are read from Redis again.
        self._known.clear()
        info = await self._stream_info()
        if info is None:
            self._cursor, self._position = "0-0", 0
        else:
            self._cursor = info["last-generated-id"]
            self._position = info.get("entries-added")  # absent before Redis 7: not checked then
        self._reading = True

    async def _stream_info(self) -> dict[str, Any] | None:
        try:
            return await self._reader.xinfo_stream(self._events_key)  # type: ignore[union-attr]
        except ResponseError as error:
            if "no such key" in str(error):
                return None
            raise

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
        target = _stream_order(last[0][0])
        while self._reading and _stream_order(self._cursor) < target:
            self._progress.clear()
            await self._progress.wait()

    def _dispatch(self, event: events.Event) -> None:
        self._subscribers.publish(event)
        if event.type in (events.REPLIED, events.REJECTED):
            self._finishes += 1
            self._known.pop(event.properties["requestID"], None)
            for woken in self._waiters.get(event.properties["requestID"], ()):
                woken.set()

    def _drop_local_listeners(self) -> None:
        """Streams end so that clients reconnect (and replay); waiters look at their records again."""
        self._known.clear()  # finishes may be missed meanwhile: read records from Redis until then
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

    def _record_key(self, request_id: str) -> str:
        return self._record_prefix + request_id

    async def _pending_records(self, request_ids: list[str]) -> list[Record]:
        """The records of ids just listed as pending, in that order: parsed ones from memory."""
        known = self._known
        if len(known) > len(request_ids):  # forget those finished while the loop was not following
            listed = set(request_ids)
            for request_id in [request_id for request_id in known if request_id not in listed]:
                del known[request_id]
        found = {request_id: known[request_id] for request_id in request_ids if request_id in known}
        if missing := [request_id for request_id in request_ids if request_id not in known]:
            finishes = self._finishes
            for start in range(0, len(missing), SLICE):  # each slice parsed between two awaits
                keys = [self._record_key(request_id) for request_id in missing[start : start + SLICE]]
                for raw in await self._client.mget(keys):
                    if raw is not None and (record := Record.model_validate_json(raw)).pending:
                        found[record.id] = record
            if finishes == self._finishes:  # else one of them may have finished meanwhile: not cached
                known.update(found)
        return [found[request_id] for request_id in request_ids if request_id in found]

    def _append(self, pipe: Any, event: events.Event) -> None:
        pipe.xadd(self._events_key, {"e": _encode(event)}, maxlen=self._stream_length, approximate=True)

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
