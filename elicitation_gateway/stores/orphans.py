"""Questions whose caller went away, kept for a while so that the same caller can come back to them.

A caller is a fingerprint the gateway makes of who asked and what (credentials, session, directory, the
arguments or an ``Idempotency-Key``); ``digest`` tells two requests under one ``Idempotency-Key`` apart.
An orphan is claimed once: by a call from the same caller within its window, or by the window's end.

A store exposes its part as ``store.orphans``. :class:`LocalOrphans`, the default, keeps them in this
process (the embedded stores'); the Redis store keeps the same in Redis, where any replica may take them
(:mod:`.redis.callers`).
"""

import time
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass


class DigestMismatch(Exception):
    """The caller's oldest orphan, or the question its key is held for, was asked with another body:
    an ``Idempotency-Key`` reused."""


@dataclass
class _Orphan:
    request_id: str
    digest: str
    until: float


class Orphans(ABC):
    @abstractmethod
    async def orphan(self, caller: str, request_id: str, digest: str, seconds: float) -> None:
        """``request_id``'s caller went away: for ``seconds``, a call from the same caller may claim it."""

    @abstractmethod
    async def claim(self, caller: str, digest: str) -> str | None:
        """The caller's oldest orphan, now claimed, or None. Raises :class:`DigestMismatch`, claiming
        nothing, when that orphan was asked with another ``digest``."""

    @abstractmethod
    async def end(self, request_id: str) -> bool:
        """Whether ``request_id`` was still orphaned, unclaimed (its window ended); it is not any more."""

    def holds(self, request_id: str) -> bool:
        """Whether ``request_id`` is orphaned, within its window, in this process: its finished record is
        then kept for its caller's return (a shared store keeps orphans and records elsewhere)."""
        return False


class LocalOrphans(Orphans):
    """Orphans kept in this process: a queue per caller, oldest first."""

    def __init__(self) -> None:
        self._by_caller: dict[str, deque[_Orphan]] = {}
        self._callers: dict[str, str] = {}  # request id -> caller, while orphaned

    async def orphan(self, caller: str, request_id: str, digest: str, seconds: float) -> None:
        self._drop_lapsed(caller)
        self._by_caller.setdefault(caller, deque()).append(
            _Orphan(request_id, digest, time.monotonic() + seconds)
        )
        self._callers[request_id] = caller

    async def claim(self, caller: str, digest: str) -> str | None:
        self._drop_lapsed(caller)
        waiting = self._by_caller.get(caller)
        if not waiting:
            return None
        if waiting[0].digest != digest:
            raise DigestMismatch(waiting[0].request_id)
        orphan = waiting.popleft()
        if not waiting:
            del self._by_caller[caller]
        del self._callers[orphan.request_id]
        return orphan.request_id

    async def end(self, request_id: str) -> bool:
        caller = self._callers.pop(request_id, None)
        if caller is None:
            return False
        waiting = self._by_caller.get(caller, deque())
        for orphan in list(waiting):
            if orphan.request_id == request_id:
                waiting.remove(orphan)
        if not waiting:
            self._by_caller.pop(caller, None)
        return True

    def holds(self, request_id: str) -> bool:
        caller = self._callers.get(request_id)
        now = time.monotonic()
        return caller is not None and any(
            orphan.request_id == request_id and orphan.until > now
            for orphan in self._by_caller.get(caller, ())
        )

    def _drop_lapsed(self, caller: str) -> None:
        waiting = self._by_caller.get(caller)
        now = time.monotonic()
        while waiting and waiting[0].until <= now:
            self._callers.pop(waiting.popleft().request_id, None)
        if waiting is not None and not waiting:
            del self._by_caller[caller]

    def __len__(self) -> int:
        return len(self._callers)
