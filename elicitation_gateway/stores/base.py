"""The one interface behind which pending questions are kept and their events fanned out.

Routes and the gateway speak only to :class:`Store`. The in-memory implementation
(:mod:`elicitation_gateway.stores.memory`) is the default; SQLite (:mod:`.sqlite`) and Redis
(:mod:`.redis`) implement the same calls.

Every state change is atomic and publishes its event: :meth:`Store.add` publishes
``question.asked``, :meth:`Store.finish` moves a pending record to a finished status exactly once and
publishes ``question.replied`` or ``question.rejected``. That is how every ``question.asked`` ends in
exactly one of the two, whoever finishes it.

A :class:`Store`'s abstract calls are its records and their events (add, get, pending, finish, wait,
subscribe). What else the gateway keeps in the store is a part of its own, an attribute with a default
for a store of one process that a backend overrides: ``audit_trail`` (:mod:`.audit_trail`),
``held_keys`` (:mod:`.held_keys`), ``tool_liveness`` (:mod:`.tool_liveness`), ``orphans``
(:mod:`.orphans`) and ``once`` (:mod:`.once`).
"""

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from functools import cached_property
from typing import Any

from elicitation_gateway import events
from elicitation_gateway.records import Record, Status
from elicitation_gateway.stores.audit_trail import AuditTrail, MemoryAuditTrail
from elicitation_gateway.stores.held_keys import HeldKeys, ProcessHeldKeys
from elicitation_gateway.stores.once import Once, ProcessOnce
from elicitation_gateway.stores.orphans import LocalOrphans, Orphans
from elicitation_gateway.stores.tool_liveness import ProcessToolLiveness, ToolLiveness


class Subscription(ABC):
    """A subscriber's view of the event stream.

    ``backlog`` is what the subscriber missed: the events after its ``Last-Event-ID`` when the history
    still holds that id, otherwise a fresh ``question.asked`` for every pending question. Iterating
    yields the events published after the subscription started; it ends when the store closes, or
    when the subscriber fell too far behind (it reconnects and replays).
    """

    backlog: Sequence[events.Event]

    @abstractmethod
    def __aiter__(self) -> AsyncIterator[events.Event]: ...

    def take_queued(self) -> list[events.Event]:
        """The events already waiting to be yielded, taken at once (iterating would yield them one at a
        time, in this order): a stream writes them together. None, where nothing waits in a queue."""
        return []

    @abstractmethod
    def close(self) -> None: ...


class StoreUnavailable(Exception):
    """The store cannot be reached or written now (a remote backend down, a file gone, a full disk);
    the request may be retried."""


class Store(ABC):
    questions_outlive_process = False
    """Whether pending questions outlive this process (in a file, or in a store other processes share):
    a graceful shutdown leaves them pending, and withdraws only those whose tool waits here."""
    others_publish = False
    """Whether other processes publish into this store (replicas sharing it): the gateway follows it for
    their questions, and an event stream needs it reachable, its events coming from it."""

    @cached_property
    def audit_trail(self) -> AuditTrail:
        """Where this store keeps the audit trail (:mod:`.audit_trail`); in this process by default."""
        return MemoryAuditTrail()

    @cached_property
    def held_keys(self) -> HeldKeys:
        """Where Idempotency-Keys are held across processes (:mod:`.held_keys`); nowhere by default."""
        return ProcessHeldKeys()

    @cached_property
    def tool_liveness(self) -> ToolLiveness:
        """Which tools wait on this process, and whose process died (:mod:`.tool_liveness`); by default
        nothing outlives the process, so nothing is noted."""
        return ProcessToolLiveness()

    @cached_property
    def orphans(self) -> Orphans:
        """Questions whose caller went away, kept for a while for the same caller to come back to
        (:mod:`.orphans`); in this process by default. With a shared store, any replica may take them."""
        return LocalOrphans()

    @cached_property
    def once(self) -> Once:
        """Work one process of those sharing the store does for all of them, once: claims, and escalation
        steps marked announced (:mod:`.once`). By default every claim is the first, and the marks are
        kept in the process, for a store of one process that outlives nothing."""
        return ProcessOnce()

    async def start(self) -> None:  # noqa: B027  (optional hook)
        """Open connections, start background work."""

    async def close(self) -> None:  # noqa: B027  (optional hook)
        """End every subscription (after what is queued for it) and release resources."""

    async def healthy(self) -> bool:
        """Whether the store can serve requests now (a remote store may be unreachable)."""
        return await self.problem() is None

    async def problem(self) -> str | None:
        """Why the store cannot serve requests now (unreachable, its file gone, its disk full), said
        for an operator; None when it can. A store that failed to write tries a write here (as large
        as the refused one), so that it recovers without waiting for traffic."""
        return None

    async def count_pending(self, session_id: str | None = None) -> int:
        """How many records are pending (in one session, if given); backends may do it faster."""
        return sum(1 for r in await self.pending() if session_id is None or r.request.sessionID == session_id)

    @abstractmethod
    async def add(self, record: Record) -> None:
        """Keep a new pending record and publish its ``question.asked``."""

    @abstractmethod
    async def get(self, request_id: str) -> Record | None:
        """The record, pending or finished (finished ones are kept for a retention period)."""

    @abstractmethod
    async def pending(self) -> list[Record]:
        """Every pending record, oldest first."""

    @abstractmethod
    async def finish(
        self,
        request_id: str,
        status: Status,
        result: dict[str, Any],
        answers: list[list[str]] | None = None,
    ) -> Record | None:
        """Finish a pending record once: return it finished, or None if it was not pending.

        Publishes ``question.replied`` with ``answers``, or ``question.rejected`` when they are None.
        """

    async def retract(self, record: Record) -> Record | None:
        """Undo an :meth:`add` of ``record`` whose outcome is unknown (it raised: the store may have
        kept the record, or may still): a pending record is finished ``cancelled`` (publishing
        ``question.rejected``) and returned; one never kept stays so. An embedded store keeps nothing
        when its add fails, so a record it does not hold is simply not there. A remote store must
        also make sure that the add, should it still arrive, keeps nothing (the Redis store does)."""
        current = await self.get(record.id)
        if current is None or not current.pending:
            return None
        return await self.finish(record.id, "cancelled", {"action": "cancel"})

    @abstractmethod
    async def wait(self, request_id: str, seconds: float) -> Record | None:
        """The record as soon as it is finished, or as it is after ``seconds``."""

    def wake(self, request_id: str) -> None:  # noqa: B027  (optional hook)
        """End the waits on this record now (they return it as it is): for a shutdown that could not
        finish it."""

    def publish_here(self, event: events.Event) -> None:  # noqa: B027  (optional hook)
        """Give ``event`` (not replayable) to this process's subscribers alone, not kept: every process
        that follows a question makes its own (an escalation's ``question.asked``)."""

    @abstractmethod
    async def subscribe(self, last_event_id: str | None = None) -> Subscription:
        """Start a subscription; the caller must :meth:`Subscription.close` it."""
