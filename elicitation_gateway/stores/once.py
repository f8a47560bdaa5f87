"""Work that one process of those sharing a store does for all of them, once: a webhook's delivery of an
event every replica sees (:meth:`Once.claim`), an escalation step's notifications
(:meth:`Once.mark_escalated`).

A store exposes its part as ``store.once``. :class:`ProcessOnce`, for a store of one process that
outlives nothing, claims everything and keeps the marks in the process. The SQLite store keeps its marks
in its file (:mod:`.sqlite_once`), so that a restart does not announce a step again; the Redis store
claims and marks with one ``SET NX`` across replicas (:mod:`.redis.once`).
"""

import time
from abc import ABC, abstractmethod


class Once(ABC):
    async def claim(self, name: str, seconds: float) -> bool:
        """Whether this call is the first, of every process sharing the store, to claim ``name`` in the
        next ``seconds``: work that one replica does for all of them, such as a webhook's delivery of an
        event every replica sees. A store of one process: always (every event it sees is its own)."""
        return True

    @abstractmethod
    async def mark_escalated(self, request_id: str, step: int, expires_at: float) -> bool:
        """Whether this call is the first to mark ``request_id``'s escalation ``step`` (counted from 0) as
        announced: once only, across restarts of a durable store and across replicas of a shared one.
        ``expires_at``: when the question expires, after which the mark may go."""


class ProcessOnce(Once):
    """A store of one process that outlives nothing: every claim is the first (every event it sees is its
    own), and the marks are kept in the process until their question expires."""

    def __init__(self) -> None:
        self._marks: dict[tuple[str, int], float] = {}

    async def mark_escalated(self, request_id: str, step: int, expires_at: float) -> bool:
        marks = self._marks
        now = time.time()
        for gone in [key for key, until in marks.items() if until < now]:
            del marks[gone]
        if (request_id, step) in marks:
            return False
        marks[request_id, step] = expires_at
        return True
