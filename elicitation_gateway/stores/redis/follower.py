"""Following the event stream: one loop per replica reads every entry once and hands its event to the
replica's subscribers and waiters, with the pending counts and finished records the entry carries;
subscriptions begin with a replay from the stream, or a fresh announcement of what is pending."""

import asyncio
import contextlib
import logging
from typing import Any

from redis.exceptions import ResponseError

from elicitation_gateway import events
from elicitation_gateway.records import Record
from elicitation_gateway.stores.base import StoreUnavailable
from elicitation_gateway.stores.fanout import LocalSubscription, Subscribers
from elicitation_gateway.stores.redis.cache import SLICE, PendingCache
from elicitation_gateway.stores.redis.codec import decode, event_id_of, stream_id_of, stream_order
from elicitation_gateway.stores.redis.connection import UNREACHABLE, Connection, cancel, reachable
from elicitation_gateway.stores.redis.counts import PendingCounts
from elicitation_gateway.stores.redis.keys import Keys
from elicitation_gateway.stores.redis.waiters import Waiters

logger = logging.getLogger("elicitation_gateway.stores.redis.store")  # the store's lines, as before

READ_BLOCK_MS = 5000
READ_BATCH = 500
RETRY_DELAYS = (0.1, 0.25, 0.5, 1.0, 2.0)


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


class StreamFollower:
    """The loop that follows the stream (:meth:`start`), and what it keeps: where it is, the pending
    counts as of there, this replica's subscribers; it drops the cache's records and wakes the waiters
    whenever it may miss entries."""

    def __init__(
        self,
        connection: Connection,
        keys: Keys,
        cache: PendingCache,
        waiters: Waiters,
        *,
        history_size: int,
        subscriber_queue: int,
    ) -> None:
        self._connection = connection
        self._keys = keys
        self._cache = cache
        self._waiters = waiters
        self._history_size = history_size
        self._subscriber_queue = subscriber_queue
        self.task: asyncio.Task[None] | None = None
        self.cursor: str | None = None  # the last stream entry handed to local subscribers
        self.reading = False  # the loop is connected and following the stream
        self._position: int | None = None  # entries ever added to the stream, up to the cursor
        self.counts: PendingCounts | None = None  # None: count in Redis until the loop has them again
        self._subscribers = Subscribers()
        self._progress = asyncio.Event()  # set when the loop hands out entries, or fails

    @staticmethod
    def stream_timeout() -> float:
        """Seconds a read of the stream may take: it blocks for up to ``READ_BLOCK_MS``."""
        return READ_BLOCK_MS / 1000 + 5

    def start(self, failures: int = 0) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run(failures))

    async def stop(self) -> None:
        await cancel(self.task)

    def end(self) -> None:
        """Local streams end (the store closes)."""
        self._subscribers.end_all()

    async def subscribe(self, last_event_id: str | None = None) -> RedisSubscription:
        if self.cursor is None:  # not following the stream yet: a subscriber could miss events
            raise StoreUnavailable("the question store (Redis) is not reachable yet; retry shortly")
        subscription = RedisSubscription(self._subscribers, self._subscriber_queue)
        self._subscribers.add(subscription)  # before reading the backlog, so nothing falls in between
        try:
            with reachable():
                replay = await self._replay(last_event_id) if last_event_id else None
                backlog, after = replay or await self._reannouncement()
        except BaseException:
            subscription.close()
            raise
        subscription.begin(backlog, after)
        return subscription

    async def pending_records(self, request_ids: list[str]) -> list[Record]:
        """The records of ids just listed as pending, in that order (those still pending)."""
        return await self._cache.records(request_ids, self._read_records)

    def count_own(self, appended: list[Any], session_id: str) -> None:
        """Count this replica's own change before the loop reads it back; if the loop has read it
        already, its counts are as new or newer."""
        counts, cursor = self.counts, self.cursor
        if counts is None or cursor is None:
            return
        stream_id, pending, in_session = appended
        at = stream_order(stream_id)
        if at > stream_order(cursor):
            counts.update(at, int(pending), session_id, int(in_session), read=False)

    async def _replay(self, last_event_id: str) -> tuple[list[events.Event], str] | None:
        """The events after ``last_event_id`` if it is one of the last ``history_size``; else None."""
        stream_id = stream_id_of(last_event_id)
        if stream_id is None or self._history_size == 0:
            return None
        async with self._connection.client.pipeline(transaction=True) as pipe:
            pipe.xrange(self._keys.events, stream_id, stream_id, count=1)
            pipe.xrange(self._keys.events, f"({stream_id}", "+", count=self._history_size)
            found, after = await pipe.execute()
        if not found or len(after) >= self._history_size:
            return None
        missed = [event for entry_id, fields in after if (event := decode(entry_id, fields))]
        return missed, event_id_of(after[-1][0] if after else stream_id)

    async def _reannouncement(self) -> tuple[list[events.Event], str | None]:
        """A fresh ``question.asked`` for every question pending as of the stream's last entry."""
        async with self._connection.client.pipeline(transaction=True) as pipe:
            pipe.zrange(self._keys.pending, 0, -1)
            pipe.xrevrange(self._keys.events, "+", "-", count=1)
            request_ids, last = await pipe.execute()
        # A record that finishes meanwhile may be announced or not; its end comes after ``last``.
        records = await self._cache.records(request_ids, self._read_records)
        announcements = []
        for start in range(0, len(records), SLICE):  # thousands: not all in one stretch of the loop
            if start:
                await asyncio.sleep(0)
            announcements += [r.asked_event(replayable=False) for r in records[start : start + SLICE]]
        return announcements, (event_id_of(last[0][0]) if last else None)

    async def run(self, failures: int = 0) -> None:
        """Follow the stream and fan each entry out to this replica's subscribers and waiters;
        ``failures`` counts the failed reads before (start-up's), which were already said."""
        while True:
            try:
                if self.cursor is None or not self.reading:
                    # Listeners were dropped meanwhile (they replay from Redis when they reconnect), so
                    # this replica starts again from the stream's end, knowing its position there.
                    await self.follow_from_tail()
                elif self.counts is None:
                    await self._count_again()
                if failures:
                    logger.info("Redis is reachable again; event streams resume")
                    failures = 0
                read = 0
                for stream_id, fields in await self._read_stream():
                    self.cursor = stream_id
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
                self.reading = False
                self._progress.set()
                self._drop_local_listeners()
                await asyncio.sleep(RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)])
                failures += 1
            except Exception:
                logger.exception("unexpected error while following the Redis event stream")
                self.reading = False
                self._progress.set()
                self._drop_local_listeners()
                await asyncio.sleep(RETRY_DELAYS[-1])

    async def _read_stream(self) -> list[tuple[str, dict[str, str]]]:
        """The entries after the cursor, as soon as there are some (none after ``READ_BLOCK_MS``)."""
        reply = await self._connection.read_stream(
            "XREAD", "COUNT", READ_BATCH, "BLOCK", READ_BLOCK_MS, "STREAMS", self._keys.events, self.cursor
        )
        if not reply:
            return []
        [[_key, entries]] = reply
        # An entry without fields comes back as nothing: kept, so that the cursor passes it.
        return [
            (stream_id, dict(zip(flat[::2], flat[1::2], strict=True)) if flat else {})
            for stream_id, flat in entries
        ]

    async def follow_from_tail(self) -> None:
        # Finishes published while the loop was not following are never read: what was cached
        # meanwhile may be stale, so pending records are read from Redis again.
        self._cache.clear()
        info = await self._count_again()
        if info is None:
            self.cursor, self._position = "0-0", 0
        else:
            self.cursor = info["last-generated-id"]
            self._position = info.get("entries-added")  # absent before Redis 7: not checked then
        self.reading = True
        # Those who began waiting while the loop was not following may have missed their finish.
        self._waiters.wake_all()

    async def _count_again(self) -> dict[str, Any] | None:
        """Take the pending counts from Redis, as of the stream's last entry (read together with them):
        the loop has not read past it, and the entries up to it change nothing. Returns the stream's
        info (None: there is no stream yet)."""
        async with self._connection.client.pipeline(transaction=True) as pipe:
            pipe.xinfo_stream(self._keys.events)
            pipe.zcard(self._keys.pending)
            pipe.hgetall(self._keys.sessions)
            info, pending, sessions = await pipe.execute(raise_on_error=False)
        for reply in (pending, sessions):
            if isinstance(reply, Exception):
                raise reply
        info = _stream_info_or_none(info)
        since = stream_order(info["last-generated-id"]) if info is not None else (0, 0)
        self.counts = PendingCounts(since, int(pending), {s: int(n) for s, n in sessions.items()})
        return info

    async def _stream_info(self) -> dict[str, Any] | None:
        try:
            return await self._connection.client.xinfo_stream(self._keys.events)
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

    async def deliver_everything_published(self) -> None:
        """Wait until the loop has handed out every entry the stream holds now."""
        last = await self._connection.client.xrevrange(self._keys.events, "+", "-", count=1)
        if not last or self.cursor is None:
            return
        target = stream_order(last[0][0])
        while self.reading and stream_order(self.cursor) < target:
            self._progress.clear()
            await self._progress.wait()

    def _take_in(self, stream_id: str, fields: dict[str, str], event: events.Event) -> None:
        """What an entry says besides its event: the pending counts, and a finished record."""
        if event.type not in (events.ASKED, events.REPLIED, events.REJECTED):
            return
        properties = event.properties
        counts = self.counts
        if counts is not None:
            try:
                session_id, pending, in_session = properties["sessionID"], int(fields["n"]), int(fields["s"])
            except (KeyError, TypeError, ValueError):
                # Written by a replica that does not count (an older version): count in Redis again.
                self.counts = None
            else:
                counts.update(stream_order(stream_id), pending, str(session_id), in_session, read=True)
        request_id = properties.get("requestID")
        if self._waiters.wants(request_id) and "r" in fields:
            with contextlib.suppress(ValueError):  # else the waiters read it from Redis
                self._waiters.keep(request_id, Record.model_validate_json(fields["r"]))

    def publish_here(self, event: events.Event) -> None:
        """An event of this replica's own, not in the stream, to its subscribers."""
        self._subscribers.publish(event)

    def _dispatch(self, event: events.Event) -> None:
        self._subscribers.publish(event)
        if event.type in (events.REPLIED, events.REJECTED):
            self._cache.finished(event.properties["requestID"])
            self._waiters.wake(event.properties["requestID"])

    def _drop_local_listeners(self) -> None:
        """Streams end so that clients reconnect (and replay); waiters look at their records again."""
        self._cache.clear()  # finishes may be missed meanwhile: read records from Redis until then
        self.counts = None  # and so may changes of the counts
        self._subscribers.end_all()
        self._waiters.wake_all()

    async def _read_records(self, request_ids: list[str]) -> list[str | None]:
        return await self._connection.client.mget(
            [self._keys.record(request_id) for request_id in request_ids]
        )


def _stream_info_or_none(reply: Any) -> dict[str, Any] | None:
    """XINFO STREAM's reply; None when there is no stream yet."""
    if isinstance(reply, ResponseError):
        if "no such key" in str(reply):
            return None
        raise reply
    return reply
