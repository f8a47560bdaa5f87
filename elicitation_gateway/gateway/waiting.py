"""Waiting for results: a tool that waits on this process (``POST /elicit``, the ``/mcp`` ``question``
tool) waits through store outages until its question's own expiry, and hears how its wait stands
(heartbeats); the store hears which questions have a tool waiting here."""

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elicitation_gateway.gateway.errors import NotFound
from elicitation_gateway.gateway.expiry import CANCEL, EXPIRY, expiry_result
from elicitation_gateway.gateway.owed import STORE_RETRY
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores.base import Store, StoreUnavailable

if TYPE_CHECKING:
    from elicitation_gateway.gateway.reattach import Caller, Reattach

logger = logging.getLogger(__package__)


@dataclass(frozen=True)
class WaitStatus:
    """What a waiting caller is told while a person takes their time."""

    elapsed: float
    expires_in: float
    answerers: int

    def describe(self) -> str:
        """``waiting for an answer, 2 answerers connected, expires in 41 min``"""
        answerers = f"{self.answerers} answerer{'s' * (self.answerers != 1)} connected"
        left = max(0.0, self.expires_in)
        expires = f"{math.ceil(left / 60)} min" if left >= 60 else f"{math.ceil(left)} s"
        return f"waiting for an answer, {answerers}, expires in {expires}"


Heartbeat = Callable[[WaitStatus], Awaitable[None]]


class Waiting:
    """``owe`` owes a finish the store cannot take now; ``closing`` says whether the gateway stops;
    ``answerers`` counts the answerers connected (for heartbeats); ``released`` is told when the last
    tool waiting here on a question stops (the store may hear it)."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        owe: Callable[[str, str], None],
        closing: Callable[[], bool],
        answerers: Callable[[], int],
        released: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.store = store
        self.owe = owe
        self.closing = closing
        self.answerers = answerers
        self.released = released
        self.counts: dict[str, int] = {}  # -> how many wait (calls of one Idempotency-Key share one)
        self._beaten: dict[str, float] = {}  # when each waiting caller was last told how it stands

    def waits(self, request_id: str) -> bool:
        """Whether a tool waits on this process for ``request_id``."""
        return request_id in self.counts

    def waiting(self) -> list[str]:
        """The questions tools wait on here."""
        return list(self.counts)

    @contextlib.contextmanager
    def tool_waiting(self, request_id: str) -> Iterator[None]:
        """A tool waits on this process for the answer (shutdown gives it ``cancel``)."""
        self._starts_waiting(request_id)
        try:
            yield
        finally:
            self._stops_waiting(request_id)

    def _starts_waiting(self, request_id: str) -> None:
        self.counts[request_id] = self.counts.get(request_id, 0) + 1
        self.store.tool_liveness.waits(request_id)

    def _stops_waiting(self, request_id: str) -> None:
        if self.counts[request_id] > 1:
            self.counts[request_id] -= 1
        else:
            del self.counts[request_id]
            self.released(request_id)

    async def result(self, request_id: str, wait: float | None = None) -> Record:
        """The record, once finished or after ``wait`` seconds; raises :class:`NotFound`."""
        record = await self.store.get(request_id)
        if record is None:
            raise NotFound(request_id)
        if record.pending and wait:
            record = await self.store.wait(request_id, min(wait, self.settings.max_timeout)) or record
        return record

    async def wait_for_result(self, record: Record, heartbeat: Heartbeat | None) -> dict[str, Any]:
        """The result of ``record``, waited for through store outages (see :meth:`.Gateway.final_result`)."""
        try:
            return await self._wait(record, heartbeat)
        finally:
            self._beaten.pop(record.id, None)

    async def _wait(self, record: Record, heartbeat: Heartbeat | None) -> dict[str, Any]:
        request_id = record.id
        slice_ = self.settings.mcp_progress_interval if heartbeat is not None else self.settings.max_timeout
        while True:
            try:
                finished = await self.result(request_id, wait=slice_)
            except NotFound:  # forgotten after its retention period: nothing came back in time
                return {"action": CANCEL}
            except StoreUnavailable:
                if self.closing():  # shutdown could not finish it either
                    self.owe(request_id, "shutdown")
                    return {"action": CANCEL}
                left = record.expires_at - time.time()
                if left <= 0:
                    self.owe(request_id, EXPIRY)
                    return expiry_result(record)
                await asyncio.sleep(min(STORE_RETRY, left))
                await self._beat(record, heartbeat)
                continue
            if finished.result is not None:
                return finished.result
            if self.closing():  # woken by a shutdown that could not finish it
                self.owe(request_id, "shutdown")
                return {"action": CANCEL}
            await self._beat(record, heartbeat)

    async def _beat(self, record: Record, heartbeat: Heartbeat | None) -> None:
        """Tell the caller how the wait stands, at most once an interval (a store outage wakes the wait
        every second)."""
        if heartbeat is None:
            return
        now = time.time()
        last = self._beaten.get(record.id, record.created_at)
        if now - last < self.settings.mcp_progress_interval * 0.9:
            return
        self._beaten[record.id] = now
        status = WaitStatus(now - record.created_at, record.expires_at - now, self.answerers())
        try:
            await heartbeat(status)
        except Exception as error:  # a caller that cannot be told is cancelled by its transport, if gone
            logger.debug("elicitation %s: could not tell its caller how it stands: %s", record.id, error)

    async def final_result(
        self, record: Record, reattach: "Reattach", caller: "Caller | None", heartbeat: Heartbeat | None
    ) -> dict[str, Any]:
        """The result of a question whose tool waits on this process (``POST /elicit``, the ``/mcp``
        ``question`` tool), as the MCP ``ElicitResult`` on the wire: the one wait of such a tool.

        ``heartbeat`` is told how the wait stands every ``GATEWAY_MCP_PROGRESS_INTERVAL`` seconds.

        While the store cannot be reached (or written) the tool keeps waiting, trying again every
        second, until the question's own expiry; then it gets what expiry gives (``cancel``, or the
        defaults) and the expiry is owed to the store. Cancelling this wait (the tool went away)
        withdraws the question, or, if the store cannot be reached, owes the withdrawal; with a
        ``caller``, the question is orphaned instead, for the same caller to come back to within
        ``GATEWAY_REATTACH_WINDOW``. Owed finishes are retried in the background and go before anything
        else once the store answers, and a reply after ``expires_at`` is refused: no answer arrives that
        nobody collects.
        """
        hold = reattach.hold_of(caller)
        if record.result is not None:  # finished while its caller was away: the result, once
            reattach.release(caller, hold)
            return record.result
        orphaning = False
        try:
            self._starts_waiting(record.id)  # as tool_waiting does, without a generator per wait
            try:
                return await self.wait_for_result(record, heartbeat)
            except asyncio.CancelledError:
                orphaning = reattach.went_away(record, caller, hold)
                raise
            finally:
                self._stops_waiting(record.id)
        finally:
            if not orphaning:
                reattach.release(caller, hold)
