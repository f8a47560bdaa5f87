"""What finishing a question changes in this process, however it finishes (a reply, a rejection, a
withdrawal, its expiry, a shutdown, an ask undone): its charge, its timer, its notification, the
metrics and one line of the log. The store decides who finishes first; this part only follows."""

import logging
from collections.abc import Callable, Iterable
from typing import Any

from elicitation_gateway.budget import PendingBytes
from elicitation_gateway.gateway.auditing import Auditing
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.notify import Notifier
from elicitation_gateway.records import Record, Status
from elicitation_gateway.stores.base import Store, StoreUnavailable

logger = logging.getLogger(__package__)


class Finishing:
    """``forget``: drops a question's timer; ``notifier``: the notifier, once there is one; ``auditing``:
    the audit trail, told of each finish made here."""

    def __init__(
        self,
        store: Store,
        metrics: Metrics,
        budget: PendingBytes,
        *,
        forget: Callable[[str], None],
        notifier: Callable[[], Notifier | None],
        auditing: Auditing | None = None,
    ) -> None:
        self.auditing = auditing
        self.store = store
        self.metrics = metrics
        self.budget = budget
        self.forget = forget
        self.notifier = notifier
        self._outcomes: dict[str, Any] = {}  # status -> its child of metrics.finished, once it has one

    async def finish(
        self,
        request_id: str,
        status: Status,
        result: dict[str, Any],
        *,
        answers: list[list[str]] | None = None,
        reason: str,
        defaulted: bool = False,
        via: str | None = None,
    ) -> Record | None:
        """The record, finished; None if it was no longer pending (someone else finished it first).
        ``defaulted``: answered with the defaults at the timeout, not by a person (not timed).
        ``via``: the way a reply or rejection came (:data:`.auditing.ANSWERER_VIAS`), for the audit
        trail; None: as the reason says (:func:`.auditing.event_of`)."""
        record = await self.store.finish(request_id, status, result, answers)
        if record is None:
            return None
        self.finished(record, reason, defaulted=defaulted)
        if self.auditing is not None:
            self.auditing.finished(record, reason, via=via, answers=answers)
        return record

    async def retract(self, record: Record, reason: str) -> None:
        """Undo an ask whose store write failed (:meth:`.Store.retract`)."""
        finished = await self.store.retract(record)
        if finished is not None:
            self.finished(finished, reason)
            if self.auditing is not None:
                self.auditing.finished(finished, reason, via="gateway", answers=None)

    def finished(self, record: Record, reason: str, *, defaulted: bool = False) -> None:
        """What finishing a record changes here: its charge, its timer, metrics and the log."""
        request_id, status = record.id, record.status
        self.budget.remove(request_id)
        self.forget(request_id)
        if (notifier := self.notifier()) is not None:
            notifier.forget(request_id)
        duration = (record.finished_at or record.created_at) - record.created_at
        if (outcome := self._outcomes.get(status)) is None:  # the counter's child, looked up once
            outcome = self._outcomes[status] = self.metrics.finished.labels(status)
        outcome.inc()
        if status == "answered" and not defaulted:
            self.metrics.time_to_answer.observe(duration)
        logger.info(
            "elicitation %s %s (%s) after %.1f s",
            request_id,
            status,
            reason,
            duration,
            extra={"elicitation": request_id, "outcome": status, "duration": round(duration, 3)},
        )

    async def cancel_at_shutdown(self, request_ids: Iterable[str], owe: Callable[[str, str], None]) -> None:
        """Each question ``cancelled`` for a shutdown, its store told no tool waits; one the store
        cannot take now is ``owe``d, and its waits woken: its tool gets ``cancel`` all the same."""
        unfinished: list[str] = []
        for request_id in request_ids:
            try:
                await self.finish(request_id, "cancelled", {"action": "cancel"}, reason="shutdown")
                self.store.tool_liveness.done(request_id)  # now, while the store is still open
            except StoreUnavailable as error:
                unfinished.append(f"{request_id}: {error}")
                owe(request_id, "shutdown")
                self.store.wake(request_id)
        if unfinished:
            logger.warning("shutdown could not finish %d questions (%s)", len(unfinished), unfinished[0])
