"""Notifications to people's own Apprise URLs (``notify`` in the people file), off the request path.

Each URL is a target as a ``GATEWAY_NOTIFY`` one is (:mod:`elicitation_gateway.notify`): its own queue,
worker task, retries and metrics, each attempt in a worker process killed at ``GATEWAY_NOTIFY_TIMEOUT``.
Targets are made the first time a person is notified, since the people file may change (SIGHUP); they
are named ``person:position`` in logs and metrics, never by their URL, which may hold a token.
"""

import logging
from collections.abc import Awaitable, Callable, Iterable

from elicitation_gateway import links
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.notify import Notification, Target, stop_targets
from elicitation_gateway.notify_workers import Pool
from elicitation_gateway.people import Person
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings

logger = logging.getLogger(__name__)

WORKERS = 8
"""Worker processes shared by every person's targets (started when first needed): a target sends one
at a time, so as many targets as this send at once; a target stuck until its deadline holds one."""


class PeopleNotifier:
    """``still_pending`` says whether a question is still unanswered, checked before every attempt;
    ``sent`` is told of each notification a target took (the question's id, the target's label)."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        still_pending: Callable[[str], Awaitable[bool]],
        *,
        worker_imports: tuple[str, ...] = (),
        sent: Callable[[str, str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.sent = sent
        self.link_secret = links.secret_of(settings.link_secret)
        """What the one-tap links in each person's notifications are signed with."""
        self.metrics = metrics
        self.still_pending = still_pending
        self.pool = Pool(WORKERS, [], worker_imports)
        self.targets: dict[tuple[str, str], Target] = {}

    def notify(self, record: Record, people: Iterable[Person], escalated_after: float | None = None) -> None:
        """Queue ``record``'s notification to every URL of each of ``people``; never blocks. People an
        escalation step reached are told nobody answered in its ``escalated_after`` seconds."""
        notification = Notification(record, escalated_after=escalated_after)
        for person in people:
            for position, url in enumerate(person.notify, 1):
                self._target(person.name, position, url).put(notification)

    def _target(self, name: str, position: int, url: str) -> Target:
        target = self.targets.get((name, url))
        if target is None:
            target = Target(
                f"{name}:{position}",
                url,
                self.pool,
                self.settings,
                self.metrics,
                self.still_pending,
                self.sent,
                person=name,
                link_secret=self.link_secret,
            )
            target.start()
            self.targets[name, url] = target
        return target

    async def stop(self, *, flush: bool = False) -> None:
        """Stop sending; with ``flush``, what is queued is sent first, for up to ``notify_timeout``."""
        targets = list(self.targets.values())
        await stop_targets(targets, self.pool, flush=flush, flush_seconds=self.settings.notify_timeout)
