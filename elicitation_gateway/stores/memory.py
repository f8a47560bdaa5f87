"""The embedded store: records, history and subscribers in this process's memory.

:class:`MemoryIndex` holds them; :class:`MemoryStore` is the store made of it alone, and the SQLite
store (:mod:`elicitation_gateway.stores.sqlite`) serves its reads from one while it keeps a file.
Every call runs on the event loop without awaiting in the middle of a change, so each one is atomic.
"""

import asyncio
import itertools
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from elicitation_gateway import events
from elicitation_gateway.deadlines import Deadlines
from elicitation_gateway.records import Record, Status
from elicitation_gateway.sizes import held, utf8_length
from elicitation_gateway.stores.base import Store
from elicitation_gateway.stores.fanout import LocalSubscription, Subscribers


class MemoryIndex:
    """Pending and finished records, the replay history and this process's subscribers.

    A change comes whole, made by its caller: a record with its ``question.asked``, a finished record
    with its end. So a store that must keep a change elsewhere first (a file) keeps exactly what is
    then published here. Finished records are forgotten after ``result_ttl``, or sooner once more than
    ``max_finished`` are kept (the oldest first, except one ``wanted`` still: a question whose caller
    went away and may come back for it), and ``forgotten`` is told of each.
    """

    def __init__(
        self,
        *,
        history_size: int = 1000,
        result_ttl: float = 600,
        subscriber_queue: int = 1000,
        history_bytes: int = 64 * 1024 * 1024,
        max_finished: int = 10_000,
        forgotten: Callable[[str], None] | None = None,
        wanted: Callable[[str], bool] = lambda request_id: False,
    ):
        self._history_size = history_size
        self._max_finished = max_finished
        self._wanted = wanted
        self._history_bytes = history_bytes
        self._result_ttl = result_ttl
        self._subscriber_queue = subscriber_queue
        self._forgotten = forgotten
        self._pending: dict[str, Record] = {}  # insertion order is creation order
        self._pending_by_session: Counter[str] = Counter()
        # In the order they finished: the oldest is taken first, in constant time (a dict would step over
        # the places of all those taken before it).
        self._finished: OrderedDict[str, Record] = OrderedDict()
        self._spared: dict[str, Record] = {}  # over max_finished, but wanted: kept for their retention
        # Only for records someone waits on; a finish hands each waiter the finished record.
        self._waiters: dict[str, list[asyncio.Future[Record | None]]] = {}
        self._announcements: dict[str, events.Event] = {}  # question.asked for (re)subscribers
        self._announced_snapshot: tuple[events.Event, ...] = ()
        self._announced_version = (0, 0)
        self._forget_at = Deadlines(self._forget)  # finished records, kept for ``result_ttl``
        self._history: deque[tuple[events.Event, int]] = deque()  # each kept event, and what it holds
        self._history_seq: dict[str, int] = {}
        self._history_held = 0  # bytes the history's events hold (their JSON and frames)
        self._seq = 0
        self._subscribers = Subscribers()

    @property
    def seq(self) -> int:
        """The sequence number of the last event published (or restored): events are numbered 1, 2, …"""
        return self._seq

    def close(self) -> None:
        self._subscribers.end_all()
        self._forget_at.clear()

    # Reads

    def get(self, request_id: str) -> Record | None:
        return self._pending.get(request_id) or self._finished.get(request_id) or self._spared.get(request_id)

    def pending_record(self, request_id: str) -> Record | None:
        return self._pending.get(request_id)

    def pending(self) -> list[Record]:
        return list(self._pending.values())

    def count_pending(self, session_id: str | None = None) -> int:
        if session_id is None:
            return len(self._pending)
        return self._pending_by_session.get(session_id, 0)

    def count_finished(self) -> int:
        return len(self._finished) + len(self._spared)

    # Changes

    def add(self, record: Record, asked: events.Event) -> None:
        """Keep a new pending record and publish its ``question.asked``."""
        self._keep_pending(record)
        self._publish(asked)

    def finish(self, finished: Record, ended: events.Event) -> None:
        """Move a pending record to ``finished`` (its finished form) and publish how it ended; those
        waiting on it wake."""
        request_id = finished.id
        record = self._pending.pop(request_id)
        session = record.request.sessionID
        self._pending_by_session[session] -= 1
        if not self._pending_by_session[session]:
            del self._pending_by_session[session]
        self._keep_finished(finished, self._result_ttl)
        self._announcements.pop(request_id, None)
        self._publish(ended)
        self._wake_with(request_id, finished)
        self._trim_finished()  # after: a store's forgetting (a SQLite delete) does not delay the answer

    # Restoring what a previous process kept (before anyone subscribes)

    def restore(self, record: Record) -> None:
        """A record as it was kept: pending (announced to subscribers), or finished (forgotten when its
        retention ends, counted from when it finished)."""
        if record.pending:
            self._keep_pending(record)
            return
        now = time.time()
        self._keep_finished(record, (record.finished_at or now) + self._result_ttl - now)
        self._trim_finished()

    def restore_history(self, kept: Iterable[tuple[int, events.Event]], seq: int) -> None:
        """Events kept for replay with their sequence numbers, oldest first; ``seq``: the last number
        given, from which new events count on."""
        for number, event in kept:
            self._remember(event, number)
        self._seq = seq

    # Waiting and subscribing

    async def wait(self, request_id: str, seconds: float) -> Record | None:
        if request_id in self._pending:
            # A future of its own, woken by the finish or by its timer: a held request's wait is one
            # future and one timer, where an Event and a timeout context would make several of each.
            loop = asyncio.get_running_loop()
            woken: asyncio.Future[Record | None] = loop.create_future()
            waiters = self._waiters.setdefault(request_id, [])
            waiters.append(woken)
            timer = loop.call_later(seconds, _wake, woken)
            try:
                finished = await woken
            finally:
                timer.cancel()
                if waiters is self._waiters.get(request_id):  # not woken by wake(), which takes the list
                    waiters.remove(woken)
                    if not waiters:
                        self._waiters.pop(request_id, None)
            if finished is not None:  # handed over by its finish: even if forgotten since
                return finished
        return self.get(request_id)

    def wake(self, request_id: str) -> None:
        self._wake_with(request_id, None)

    def _wake_with(self, request_id: str, finished: Record | None) -> None:
        for woken in self._waiters.pop(request_id, ()):
            _wake(woken, finished)

    def subscribe(self, last_event_id: str | None = None) -> LocalSubscription:
        seq = self._history_seq.get(last_event_id) if last_event_id else None
        if seq is None:
            backlog = self._announced()
        else:
            first = self._seq - len(self._history) + 1
            backlog = [event for event, _ in itertools.islice(self._history, seq - first + 1, None)]
        subscription = LocalSubscription(self._subscribers, backlog, self._subscriber_queue)
        self._subscribers.add(subscription)
        return subscription

    def publish_here(self, event: events.Event) -> None:
        """Give ``event`` to the subscribers, neither numbered nor kept for replay."""
        self._subscribers.publish(event)

    def _announced(self) -> Sequence[events.Event]:
        """Every pending question's ``question.asked``, in the order asked: one tuple shared by every
        subscriber until the next change (a list of each, for thousands of pending questions and
        thousands of streams opening at once, would hold megabytes until every one was written)."""
        version = (self._seq, len(self._announcements))  # every change publishes, or restores one
        if self._announced_version != version:
            self._announced_snapshot = tuple(self._announcements.values())
            self._announced_version = version
        return self._announced_snapshot

    # ---------------------------------------------------------------------------------------------

    def _keep_pending(self, record: Record) -> None:
        self._pending[record.id] = record
        self._pending_by_session[record.request.sessionID] += 1
        # Made now, a few microseconds each, rather than all at once for the first subscriber, which
        # would hold the loop for as long as thousands of them take.
        self._announcements[record.id] = record.asked_event(replayable=False)

    def _publish(self, event: events.Event) -> None:
        self._seq += 1
        self._remember(event, self._seq)
        self._subscribers.publish(event)

    def _remember(self, event: events.Event, seq: int) -> None:
        """Keep ``event`` for replay; the oldest go once there are more than ``history_size`` or they
        hold more than ``history_bytes`` (a client asking for them gets the pending questions again)."""
        size = _held(event)  # kept beside it: measured once, not again when it goes
        self._history.append((event, size))
        self._history_seq[event.id] = seq
        self._history_held += size
        while self._history and (
            len(self._history) > self._history_size or self._history_held > self._history_bytes
        ):
            dropped, dropped_size = self._history.popleft()
            self._history_seq.pop(dropped.id, None)
            self._history_held -= dropped_size

    def _keep_finished(self, record: Record, seconds: float) -> None:
        """Keep a finished record for ``seconds`` (:meth:`_trim_finished` may forget it sooner)."""
        self._finished[record.id] = record
        self._forget_at.set(record.id, seconds)

    def _trim_finished(self) -> None:
        """Beyond ``max_finished``, the oldest go now, but one still ``wanted``, which stays for its
        retention. A busy gateway would otherwise hold every result of the last ``result_ttl``: without
        bound, and every collection of the garbage collector walking their objects."""
        while len(self._finished) > self._max_finished:
            oldest, record = self._finished.popitem(last=False)
            if self._wanted(oldest):
                self._spared[oldest] = record
            else:
                self._forget_at.discard(oldest)
                self._forget(oldest)

    def _forget(self, request_id: str) -> None:
        self._finished.pop(request_id, None)
        self._spared.pop(request_id, None)
        if self._forgotten is not None:
            self._forgotten(request_id)


class MemoryStore(Store):
    def __init__(
        self,
        *,
        history_size: int = 1000,
        result_ttl: float = 600,
        subscriber_queue: int = 1000,
        history_bytes: int = 64 * 1024 * 1024,
        max_finished: int = 10_000,
    ):
        self._index = MemoryIndex(
            history_size=history_size,
            result_ttl=result_ttl,
            subscriber_queue=subscriber_queue,
            history_bytes=history_bytes,
            max_finished=max_finished,
            wanted=lambda request_id: self.orphans.holds(request_id),
        )

    async def close(self) -> None:
        self._index.close()

    async def add(self, record: Record) -> None:
        self._index.add(record, record.asked_event())

    async def get(self, request_id: str) -> Record | None:
        return self._index.get(request_id)

    async def pending(self) -> list[Record]:
        return self._index.pending()

    async def count_pending(self, session_id: str | None = None) -> int:
        return self._index.count_pending(session_id)

    async def finish(
        self,
        request_id: str,
        status: Status,
        result: dict[str, Any],
        answers: list[list[str]] | None = None,
    ) -> Record | None:
        record = self._index.pending_record(request_id)
        if record is None:
            return None
        finished = record.finished(status, result)
        self._index.finish(finished, finished.finished_event(answers))
        return finished

    async def wait(self, request_id: str, seconds: float) -> Record | None:
        return await self._index.wait(request_id, seconds)

    def wake(self, request_id: str) -> None:
        self._index.wake(request_id)

    async def subscribe(self, last_event_id: str | None = None) -> LocalSubscription:
        return self._index.subscribe(last_event_id)

    def publish_here(self, event: events.Event) -> None:
        self._index.publish_here(event)


EVENT_BYTES = 500
"""What a kept event holds besides its JSON and its frames' bytes: the event, its id, its frames' dict,
the history's entries for it."""
FRAME_BYTES = 200
"""What the two frames of an event add to its JSON: their ``bytes`` headers, ``id:`` and ``data:``
lines, the payload's id and type, and ``/global/event``'s wrapping."""


def _wake(woken: "asyncio.Future[Record | None]", finished: Record | None = None) -> None:
    if not woken.done():  # a waiter cancelled meanwhile has its future cancelled
        woken.set_result(finished)


def _held(event: events.Event) -> int:
    """What a kept event holds: its JSON (each character at its width) and the two frames of it that
    streams may make (``/event`` and ``/global/event``, UTF-8)."""
    data = event.properties_json()
    return EVENT_BYTES + held(data) + FRAME_BYTES + 2 * utf8_length(data)
