"""Reaching the people a question is for, on their own notification URLs (``notify`` in the people
file): when it is asked, and at each escalation step (:mod:`.escalating`), which the audit trail
records."""

from collections.abc import Awaitable, Callable, Sequence

from elicitation_gateway.gateway.auditing import Auditing
from elicitation_gateway.gateway.escalating import Escalating
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.notify_people import PeopleNotifier
from elicitation_gateway.people import People, UnknownRecipient
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores.base import Store, StoreUnavailable


class Reaching:
    """``people`` gives the people file as it is now (None without one)."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        escalating: Escalating,
        auditing: Auditing,
        people: Callable[[], People | None],
        still_pending: Callable[[str], Awaitable[bool]],
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.auditing = auditing
        self.people = people
        self.still_pending = still_pending
        self.notifier: PeopleNotifier | None = None
        self.escalating = escalating
        escalating.on_escalated(self._escalated)

    def start(self) -> None:
        """Notify people from now on, if there is a people file."""
        if self.people() is not None:
            self.notifier = PeopleNotifier(
                self.settings, self.metrics, self.still_pending, sent=self.auditing.notified
            )

    async def stop(self, *, flush: bool) -> None:
        if self.notifier is not None:
            await self.notifier.stop(flush=flush)

    def asked(self, record: Record) -> None:
        """A question this process asked: its escalation timed, and the people it is for notified on
        their own URLs (everyone with URLs, for a question with no ``to``)."""
        self.escalating.follow(record)
        if (people := self.people()) is None or self.notifier is None:
            return
        try:
            names = people.reached_by(record.request.to) if record.request.to else people.persons
        except UnknownRecipient:  # the file changed since the ask was checked
            return
        self.notify(record, list(names))

    def notify(self, record: Record, names: Sequence[str], escalated_after: float | None = None) -> None:
        """Queue ``record``'s notification to the own URLs of the people ``names`` names (reached by an
        escalation step ``escalated_after`` seconds after the ask, if so)."""
        if (people := self.people()) is None or self.notifier is None:
            return
        reached = [people.persons[name] for name in names if name in people.persons]
        self.notifier.notify(record, reached, escalated_after)

    def _escalated(self, request_id: str, names: Sequence[str]) -> None:
        """A step reached ``names``: one audit entry, ``who`` the people it reached, comma-separated."""
        self.auditing.escalated(request_id, ",".join(names) or None)


def pending_check(store: Store) -> Callable[[str], Awaitable[bool]]:
    """Whether a question is still unanswered, asked before each notification attempt."""

    async def still_pending(request_id: str) -> bool:
        try:
            record = await store.get(request_id)
        except StoreUnavailable:
            return True  # better told twice than not at all
        return record is not None and record.pending

    return still_pending
