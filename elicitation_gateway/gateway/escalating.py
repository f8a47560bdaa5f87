"""Escalating: each pending question's escalation steps announced at their time.

Whom a question is for is a function of its record and the time (:mod:`elicitation_gateway.escalation`),
so listing, showing and answering need nothing from here. What happens at a step's time: every process
that follows the question (the one that asked it, every replica with a shared store, a restarted one
with a durable store) gives its own event streams a ``question.asked`` with the audience as it is now,
which the people the step adds are shown; and the first process to mark the step in the store
(``store.once``, :meth:`.Once.mark_escalated`: once across replicas and restarts) notifies the step's
people and tells the listeners of :meth:`Escalating.on_escalated`.
"""

import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from elicitation_gateway import events
from elicitation_gateway.deadlines import Deadlines
from elicitation_gateway.escalation import current_to, due, next_at, request_now
from elicitation_gateway.gateway.owed import STORE_RETRY
from elicitation_gateway.people import People, UnknownRecipient
from elicitation_gateway.records import Record
from elicitation_gateway.stores.base import Store, StoreUnavailable

logger = logging.getLogger(__package__)

Escalated = Callable[[str, tuple[str, ...]], None]
"""A listener of escalations: the question's id and the names of the people a step reached."""


class Escalating:
    """``people`` gives the people file's current reading; ``notify`` notifies people of a question;
    ``spawn`` runs a coroutine on a task of its own."""

    def __init__(
        self,
        store: Store,
        *,
        people: Callable[[], People | None],
        notify: Callable[[Record, Sequence[str], float], None],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.store = store
        self.people = people
        self.notify = notify
        self.followed: dict[str, Record] = {}
        self.handled: dict[str, int] = {}
        """Steps this process has announced, per question."""
        self.listeners: list[Escalated] = []
        self.timers = Deadlines(lambda request_id: spawn(self.fire(request_id)))

    def on_escalated(self, listener: Escalated) -> None:
        """``listener(request_id, names)`` once per step, across replicas and restarts, when it is
        announced: the names of the people it reached (the audit trail's hook)."""
        self.listeners.append(listener)

    def follow(self, record: Record) -> None:
        """Time ``record``'s steps (a step due already is announced now, unless it was before)."""
        if not record.escalate or not record.pending or record.id in self.followed:
            return
        self.followed[record.id] = record
        self._schedule(record)

    def discard(self, request_id: str) -> None:
        """``request_id`` is finished."""
        self.followed.pop(request_id, None)
        self.handled.pop(request_id, None)
        self.timers.discard(request_id)

    def clear(self) -> None:
        self.timers.clear()
        self.followed.clear()
        self.handled.clear()

    def audience_of(self, properties: dict[str, Any]) -> Sequence[str] | None:
        """Whom the question of a ``question.asked`` is for now: its ``to`` and the steps due since."""
        record = self.followed.get(properties.get("id", ""))
        if record is None:
            return properties.get("to")
        return current_to(record, time.time())

    def _schedule(self, record: Record) -> None:
        now = time.time()
        if self.handled.get(record.id, 0) < due(record.escalate, record.created_at, now):
            self.timers.set(record.id, 0)
        elif (at := next_at(record.escalate, record.created_at, now)) is not None:
            self.timers.set(record.id, at - now)

    async def fire(self, request_id: str) -> None:
        record = self.followed.get(request_id)
        if record is None:
            return
        try:
            await self._announce(record)
        except StoreUnavailable as error:
            logger.debug("escalation of %s waits for the store: %s", request_id, error)
            self.timers.set(request_id, STORE_RETRY)
            return
        if request_id in self.followed:
            self._schedule(record)

    async def _announce(self, record: Record) -> None:
        current = await self.store.get(record.id)
        if current is None or not current.pending:
            self.discard(record.id)
            return
        now = time.time()
        handled, count = self.handled.get(record.id, 0), due(record.escalate, record.created_at, now)
        if count <= handled:
            return
        if record.request.to:  # everyone's question is shown to everyone already
            request = request_now(record, now)
            self.store.publish_here(
                events.asked(None, record.directory, replayable=False, request_json=request.wire_json)
            )
        for step in range(handled, count):
            first = await self.store.once.mark_escalated(record.id, step, record.expires_at)
            self.handled[record.id] = step + 1
            if first:
                self._escalated(record, step)

    def _escalated(self, record: Record, step: int) -> None:
        people = self.people()
        names: set[str] = set()
        for name in record.escalate[step].to:
            if people is None:
                break
            try:  # the file may have lost a name since the ask: the others are reached all the same
                names |= people.reached_by([name])
            except UnknownRecipient:
                continue
        reached = tuple(sorted(names))
        logger.info(
            "elicitation %s escalated (step %d) to %s", record.id, step + 1, ", ".join(reached) or "nobody"
        )
        self.notify(record, reached, record.escalate[step].after)
        for listener in self.listeners:
            try:
                listener(record.id, reached)
            except Exception:
                logger.exception("a listener of escalations failed")
