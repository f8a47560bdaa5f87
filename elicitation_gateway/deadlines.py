"""Deadlines: many timeouts on one timer of the event loop.

Every pending question has a timeout, and every finished one a time to be forgotten. A timer of the
event loop for each costs about 600 bytes with uvloop (a handle and a libuv timer), a scheduling and
a cancellation per question, and most are cancelled long before they are due. Here each deadline is
an entry in a dict and a heap (about 140 bytes), and only the earliest one has a timer.
"""

import asyncio
import heapq
import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

EARLY = 0.001
"""Seconds before its time at which a deadline counts as due: the loop's timers can fire that early
(uvloop keeps milliseconds), and waiting for less than that would wake the loop for nothing."""

COMPACT_ABOVE = 64
"""Heaps smaller than this keep their discarded entries until they come up."""


class Deadlines:
    """Calls ``on_due(key)`` once each key's deadline has passed, unless it was discarded first.

    Setting a key again moves its deadline. Discarded entries stay in the heap until they come up, or
    until they outnumber the live ones, when the heap is rebuilt from the live ones: so memory follows
    the keys that are set, and every operation is O(log n) amortized.
    """

    def __init__(self, on_due: Callable[[str], object]) -> None:
        self._on_due = on_due
        self._due: dict[str, float] = {}  # key -> loop time
        self._heap: list[tuple[float, str]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def __contains__(self, key: str) -> bool:
        return key in self._due

    def __len__(self) -> int:
        return len(self._due)

    def set(self, key: str, delay: float) -> None:
        """``on_due(key)`` in ``delay`` seconds (at once, on the next turn of the loop, when ≤ 0)."""
        loop = asyncio.get_running_loop()
        when = loop.time() + max(delay, 0.0)
        self._due[key] = when
        heapq.heappush(self._heap, (when, key))
        if self._timer is None or when < self._timer_at:
            self._arm(loop, when)

    def discard(self, key: str) -> None:
        if self._due.pop(key, None) is not None and len(self._heap) > max(COMPACT_ABOVE, 2 * len(self._due)):
            self._heap = [(when, key) for key, when in self._due.items()]
            heapq.heapify(self._heap)

    def clear(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._due.clear()
        self._heap.clear()

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._fire)
        self._timer_at = when

    def _fire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        heap, due = self._heap, self._due
        now = loop.time() + EARLY
        while heap and heap[0][0] <= now:
            when, key = heapq.heappop(heap)
            if due.get(key) != when:  # discarded, or set again to another time
                continue
            del due[key]
            try:
                self._on_due(key)
            except Exception:  # one failing callback must not keep the others from their time
                logger.exception("a deadline's callback failed for %s", key)
        while heap and due.get(heap[0][1]) != heap[0][0]:  # drop what is stale at the top
            heapq.heappop(heap)
        if heap:
            self._arm(loop, heap[0][0])
