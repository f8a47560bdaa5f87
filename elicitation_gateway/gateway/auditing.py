"""The audit trail the gateway keeps: an entry for each question asked, notified, escalated, replied
to, rejected, expired or withdrawn, appended to the store's trail (:mod:`.stores.audit_trail`) by the
process that made the change (the one whose ``Store.finish`` finished the record), so that each is
recorded once, even with several replicas; the answers counted by the way they came; and the
retention (``GATEWAY_AUDIT_RETENTION``), applied every minute.

Entries are appended by one task in the order they were made here, off the request's path: those
made while it waits on the store go together in its next append (one write however many). One that
cannot be kept (the store unreachable) is logged, not retried: the change it records has been made.
"""

import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from elicitation_gateway.audit import AuditEntry, rfc3339
from elicitation_gateway.gateway.expiry import EXPIRY
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.records import Record
from elicitation_gateway.stores.base import Store, StoreUnavailable

logger = logging.getLogger(__name__)

ANSWERER_VIAS = ("page", "terminal", "opencode", "api", "link", "webhook")
"""The ways a person's reply or rejection may come."""
PRUNE_EVERY = 60.0
"""Seconds between two applications of the retention."""
BATCH = 500
"""Entries one append takes at most."""
STOP_SECONDS = 5.0
"""What a shutdown waits at most for the entries still queued."""

_ANSWERED = ("answered", "answered no")
_EXPIRED = (EXPIRY, "timed out, defaults")
_GATEWAY_WITHDREW = ("shutdown", "its ask failed")
"""Reasons of a finish the gateway made on its own; any other withdrawal is the tool's going away."""


def event_of(reason: str) -> tuple[str, str]:
    """A finish's audit event, and its way when the caller names none, from the finish's reason."""
    if reason in _ANSWERED:
        return "replied", "api"
    if reason == "rejected":
        return "rejected", "api"
    if reason in _EXPIRED:
        return "expired", "gateway"
    if reason in _GATEWAY_WITHDREW:
        return "withdrawn", "gateway"
    return "withdrawn", "tool"


class Auditing:
    """Entries are appended in the order they are made here, by one task, off the path of the request
    that made the change: a reply does not wait for the trail. :meth:`flush` waits for those made so
    far (``GET /audit`` does, so that a reader sees this process's changes; so does the shutdown)."""

    def __init__(self, store: Store, metrics: Metrics, retention: float) -> None:
        self.store = store
        self.metrics = metrics
        self.retention = retention
        # Entries made and not yet handed to the store, in order: a list the writer takes whole, and
        # two signals, where a queue would cost a handful of calls per entry on every round trip.
        self._made: list[dict[str, Any]] = []
        self._more: asyncio.Future[None] | None = None  # what the writer, idle, waits on
        self._written = asyncio.Event()  # set while nothing made waits to be appended
        self._written.set()
        self._writer: asyncio.Task[None] | None = None
        self._pruning: asyncio.Task[None] | None = None

    def record(
        self,
        event: str,
        question: str,
        *,
        via: str,
        who: str | None = None,
        answers: list[list[str]] | None = None,
    ) -> None:
        """Append one entry (soon, in order), at this moment; one the store cannot keep is logged."""
        at = datetime.now(UTC)
        self._made.append(
            {"event": event, "question": question, "via": via, "who": who, "answers": answers, "at": at}
        )
        self._written.clear()
        if self._more is not None and not self._more.done():
            self._more.set_result(None)
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write(), name="audit trail")

    async def _write(self) -> None:
        while True:
            if not self._made:
                self._written.set()
                self._more = asyncio.get_running_loop().create_future()
                await self._more
                continue
            batch, self._made = self._made[:BATCH], self._made[BATCH:]
            try:
                await self.store.audit_trail.append_many(batch)
            except StoreUnavailable as error:
                for fields in batch:
                    logger.error(  # noqa: TRY400  (the store's fault, said in one line)
                        "audit entry %s of %s (via %s) not kept: %s",
                        fields["event"],
                        fields["question"],
                        fields["via"],
                        error,
                    )
            except Exception:
                kinds = ", ".join(f"{fields['event']} of {fields['question']}" for fields in batch)
                logger.exception("audit entries not kept: %s", kinds)

    async def flush(self) -> None:
        """Wait until the entries made so far are appended (or logged as not kept)."""
        if self._writer is not None:
            await self._written.wait()

    def asked(self, record: Record) -> None:
        self.record("asked", record.id, via="tool", who=record.asker)

    def finished(
        self, record: Record, reason: str, *, via: str | None, answers: list[list[str]] | None
    ) -> None:
        """``record`` was finished here (``reason``, as :class:`.Finishing` has it), ``via`` a way."""
        event, usual = event_of(reason)
        via = via or usual
        result: dict[str, Any] = record.result or {}
        if event in ("replied", "rejected"):
            self.metrics.answers.labels(via=via, action=str(result.get("action"))).inc()
        who = result.get("answeredBy")
        self.record(event, record.id, via=via, who=who, answers=answers if event == "replied" else None)

    def notified(self, question: str, target: str) -> None:
        """A notification of ``question`` reached ``target`` (its label): ``who`` names it."""
        self.record("notified", question, via="gateway", who=target)

    def escalated(self, question: str, who: str | None = None, *, via: str = "gateway") -> None:
        """``question`` was escalated (to ``who``, a person or ``group:…``, where known)."""
        self.record("escalated", question, via=via, who=who)

    async def entries(self, since: str | None = None, question: str | None = None) -> list[AuditEntry]:
        """The entries kept: at or after ``since`` (as :func:`.audit.parse_since` writes it), of
        ``question``; raises :class:`.StoreUnavailable`."""
        await self.flush()
        return await self.store.audit_trail.entries(since, question)

    async def prune(self) -> int:
        """Drop the entries past the retention now; how many went."""
        if not self.retention:
            return 0
        before = rfc3339(datetime.now(UTC) - timedelta(seconds=self.retention))
        return await self.store.audit_trail.prune(before)

    def start(self) -> None:
        if self.retention and self._pruning is None:
            self._pruning = asyncio.get_running_loop().create_task(
                self._prune_often(), name="audit retention"
            )

    async def stop(self) -> None:
        """Append what is queued (for a few seconds at most), then stop."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STOP_SECONDS):
                await self.flush()
        for task in (self._pruning, self._writer):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._pruning = self._writer = self._more = None

    async def _prune_often(self) -> None:
        while True:
            try:
                if dropped := await self.prune():
                    logger.info("audit trail: %d entries past the retention dropped", dropped)
            except StoreUnavailable as error:
                logger.warning("audit trail retention not applied now: %s", error)
            except Exception:
                logger.exception("audit trail retention failed")
            await asyncio.sleep(min(PRUNE_EVERY, self.retention))
