"""Finishes owed while the store could not take them (it was unreachable, or refused a write when they
were due): an expiry, a withdrawal, a shutdown's cancel, an ask to undo. Each is retried in the
background until the store takes it, and before anything else once the store answers again, so that no
person answers a question whose tool has stopped waiting."""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from elicitation_gateway.gateway.expiry import CANCEL, EXPIRY
from elicitation_gateway.records import Record
from elicitation_gateway.stores.base import StoreUnavailable

STORE_RETRY = 1.0
"""Seconds between two tries of a store that cannot be reached or written, for a tool waiting on it,
for owed finishes, and between two looks for questions abandoned by a gone replica."""


class Owed:
    """Owed finishes, by id, oldest first: each with its reason (:data:`.EXPIRY`, or why it is
    withdrawn). ``finish`` finishes a record, ``expire_now`` expires one, ``retract`` undoes an ask;
    ``settled`` is told of each id once its owed finish is made; ``closing`` says whether the gateway
    stops (the retries stop with it)."""

    def __init__(
        self,
        *,
        finish: Callable[..., Awaitable[Record | None]],
        expire_now: Callable[[str], Awaitable[None]],
        retract: Callable[[Record, str], Awaitable[None]],
        settled: Callable[[str], None],
        closing: Callable[[], bool],
    ) -> None:
        self.finish = finish
        self.expire_now = expire_now
        self.retract = retract
        self.settled = settled
        self.closing = closing
        self.reasons: dict[str, str] = {}
        self.retractions: dict[str, Record] = {}  # owed finishes of asks that failed: their records
        self._settler: asyncio.Task[None] | None = None

    def __contains__(self, request_id: str) -> bool:
        return request_id in self.reasons

    def __len__(self) -> int:
        return len(self.reasons)

    def owe(self, request_id: str, reason: str) -> None:
        """Owe ``request_id``'s finish (the first reason holds); made in the background."""
        self.reasons.setdefault(request_id, reason)
        if self._settler is None or self._settler.done():
            self._settler = asyncio.get_running_loop().create_task(self._settle())

    def owe_retraction(self, record: Record, reason: str) -> None:
        """Owe undoing the ask of ``record``, which the store may have kept or may yet keep."""
        self.retractions[record.id] = record
        self.owe(record.id, reason)

    def stop(self) -> None:
        """No more retries in the background (:meth:`settle_now` still makes them)."""
        if self._settler is not None:
            self._settler.cancel()

    async def _settle(self) -> None:
        """Until every owed finish is made: tried at once, then every second while the store cannot."""
        while self.reasons and not self.closing():
            try:
                await self.settle_now()
            except StoreUnavailable:
                await asyncio.sleep(STORE_RETRY)

    async def settle_now(self) -> None:
        """Make every owed finish, oldest first; raises :class:`StoreUnavailable` at the first the store
        cannot take yet."""
        for request_id, reason in list(self.reasons.items()):
            if (unsure := self.retractions.get(request_id)) is not None:
                await self.retract(unsure, reason)
                self.retractions.pop(request_id, None)
            elif reason == EXPIRY:
                await self.expire_now(request_id)
            else:
                await self.finish(request_id, "cancelled", {"action": CANCEL}, reason=reason)
            if self.reasons.pop(request_id, None) is not None:
                self.settled(request_id)

    async def first(self) -> None:
        """Owed finishes go before anything else once the store answers again; free while nothing is
        owed."""
        if self.reasons:
            with contextlib.suppress(StoreUnavailable):
                await self.settle_now()
