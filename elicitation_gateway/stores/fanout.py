"""Fan-out inside one process: each subscriber's queue, and handing every event to all of them.

Both stores use it: the in-memory store publishes into it directly, and every Redis replica feeds
it from the shared event stream.
"""

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence

from elicitation_gateway import events
from elicitation_gateway.stores.base import Subscription

FAN_OUT_BATCH = 256
"""Subscribers woken per loop iteration when an event goes to more of them."""


class LocalSubscription(Subscription):
    """One stream's queue of events, fed by :class:`Subscribers`; dropped when it falls ``limit``
    events behind."""

    def __init__(self, members: "Subscribers", backlog: Sequence[events.Event], limit: int) -> None:
        self.backlog = backlog
        self._members = members
        self._queue: deque[events.Event] = deque()
        self._wakeup = asyncio.Event()
        self._limit = limit
        self._ending = False

    def push(self, event: events.Event) -> None:
        if self._ending:
            return
        if len(self._queue) >= self._limit:  # too far behind: drop it, it replays on reconnect
            self._queue.clear()
            self.close()
            return
        self._queue.append(event)
        self._wakeup.set()

    def take_queued(self) -> list[events.Event]:
        if not self._queue:  # the usual case: one event at a time
            return []
        taken = list(self._queue)
        self._queue.clear()
        return taken

    def end(self) -> None:
        """Stop after what is already queued."""
        self._ending = True
        self._wakeup.set()

    def close(self) -> None:
        self._members.discard(self)
        self.end()

    async def __aiter__(self) -> AsyncIterator[events.Event]:
        while True:
            while self._queue:
                yield self._queue.popleft()
            if self._ending:
                return
            self._wakeup.clear()
            await self._wakeup.wait()


class Subscribers:
    """This process's subscribers, and the fan-out of each event to them.

    A few hundred are pushed at once. Thousands are pushed a batch per loop iteration, so that the
    loop (other requests, timers) is never held for the whole fan-out; later events queue behind the
    first, so every subscriber still gets them in order."""

    def __init__(self) -> None:
        self._members: set[LocalSubscription] = set()
        self._queued: deque[tuple[events.Event, list[LocalSubscription], int]] = deque()

    def __iter__(self) -> Iterator[LocalSubscription]:
        return iter(list(self._members))

    def __len__(self) -> int:
        return len(self._members)

    def add(self, subscription: LocalSubscription) -> None:
        self._members.add(subscription)

    def discard(self, subscription: LocalSubscription) -> None:
        self._members.discard(subscription)

    def publish(self, event: events.Event) -> None:
        members = list(self._members)
        if not self._queued and len(members) <= FAN_OUT_BATCH:
            for subscription in members:
                subscription.push(event)
            return
        self._queued.append((event, members, 0))
        if len(self._queued) == 1:
            asyncio.get_running_loop().call_soon(self._step)

    def end_all(self) -> None:
        """Deliver what was published, then end every stream (its client reconnects)."""
        while self._queued:
            self._step()
        for subscription in list(self._members):
            subscription.end()
        self._members.clear()

    def _step(self) -> None:
        if not self._queued:
            return
        event, members, start = self._queued[0]
        end = start + FAN_OUT_BATCH
        for subscription in members[start:end]:
            subscription.push(event)
        if end < len(members):
            self._queued[0] = (event, members, end)
        else:
            self._queued.popleft()
        if self._queued:
            asyncio.get_running_loop().call_soon(self._step)
