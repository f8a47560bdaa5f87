"""Admission: what the gateway takes on before it says yes. Event streams (``/event``, and ``/mcp``
streams) up to ``GATEWAY_MAX_SUBSCRIBERS``; questions up to the pending counts
(``GATEWAY_MAX_PENDING``, per session) and the memory budget (``GATEWAY_MAX_PENDING_BYTES``, per
session), each charged what it holds while pending."""

from collections.abc import Callable

from elicitation_gateway.budget import PendingBytes, charge
from elicitation_gateway.gateway.errors import LimitExceeded, TooLarge, TooManySubscribers
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores.base import Store, StoreUnavailable, Subscription


class Admission:
    """``default_session``: the ``sessionID`` of questions whose tool names none (it may change: the
    OpenCode bridge sets a real session's)."""

    def __init__(
        self, settings: Settings, store: Store, metrics: Metrics, default_session: Callable[[], str]
    ) -> None:
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.default_session = default_session
        self.subscribers = 0
        self.mcp_streams = 0  # /mcp responses that may stream: counted against the same limit
        self.pending_bytes = PendingBytes()

    # Event streams

    async def subscribe(self, last_event_id: str | None = None) -> Subscription:
        """Admit one event stream; :meth:`unsubscribe` gives its place back.

        Raises :class:`StoreUnavailable` (the client retries) or :class:`TooManySubscribers`.
        """
        # Where other processes publish, the events come from the store; a local store's streams work
        # while its file cannot be written (answers then get 503, but people still see what is asked).
        if self.store.others_publish and not await self.store.healthy():
            raise StoreUnavailable("the question store is unreachable; reconnect shortly")
        self._check_stream_room()
        # Counted with no await between the check and the count, so that streams opening at once
        # cannot overshoot the limit.
        self.subscribers += 1
        self.metrics.subscribers.inc()
        try:
            return await self.store.subscribe(last_event_id)
        except BaseException:
            self._release_subscriber()
            raise

    def unsubscribe(self, subscription: Subscription) -> None:
        subscription.close()
        self._release_subscriber()

    def _release_subscriber(self) -> None:
        self.subscribers -= 1
        self.metrics.subscribers.dec()

    def admit_mcp_stream(self) -> None:
        """Count an open ``/mcp`` stream against ``GATEWAY_MAX_SUBSCRIBERS`` with the event streams (not
        as an answerer); :meth:`release_mcp_stream` gives its place back. Raises
        :class:`TooManySubscribers`."""
        self._check_stream_room()
        self.mcp_streams += 1

    def release_mcp_stream(self) -> None:
        self.mcp_streams -= 1

    def _check_stream_room(self) -> None:
        limit = self.settings.max_subscribers
        if self.subscribers + self.mcp_streams >= limit:
            raise TooManySubscribers(limit)

    # Questions

    async def check_count(self, session_id: str) -> None:
        """Raises :class:`LimitExceeded` when the gateway, or ``session_id``, has all it may pending."""
        limit = self.settings.max_pending
        if await self.store.count_pending() >= limit:
            raise LimitExceeded(
                f"{limit} questions are pending, the most the gateway keeps (GATEWAY_MAX_PENDING)"
            )
        limit = self.settings.max_pending_per_session
        if await self.store.count_pending(session_id) >= limit:
            raise LimitExceeded(
                f"session {session_id} has {limit} questions pending, the most one session may have "
                "(GATEWAY_MAX_PENDING_PER_SESSION)"
            )

    def charge(self, record: Record) -> None:
        """Charge ``record`` to the memory budget, or refuse it (nothing is charged then)."""
        held, session_id = charge(record), self.budget_session(record)
        settings, budget = self.settings, self.pending_bytes
        size = held.whole
        limit, name, whose = settings.max_pending_bytes, "GATEWAY_MAX_PENDING_BYTES", "the gateway"
        if session_id is not None and settings.max_pending_bytes_per_session < limit:
            limit, name = settings.max_pending_bytes_per_session, "GATEWAY_MAX_PENDING_BYTES_PER_SESSION"
            whose = "a session"
        if size > limit:
            raise TooLarge(
                f"the question would hold about {size} bytes of memory while pending, more than {whose} "
                f"may hold ({name}, {limit}): ask fewer or shorter options"
            )
        in_all, in_session = budget.cost(held, session_id)
        if budget.total + in_all > settings.max_pending_bytes:
            raise LimitExceeded(
                f"pending questions hold {budget.total} bytes of memory, and this one about {in_all} more: "
                f"over the gateway's budget (GATEWAY_MAX_PENDING_BYTES, {settings.max_pending_bytes})"
            )
        if (
            session_id is not None
            and budget.session(session_id) + in_session > settings.max_pending_bytes_per_session
        ):
            raise LimitExceeded(
                f"session {session_id}'s pending questions hold {budget.session(session_id)} bytes of "
                f"memory, and this one about {in_session} more: over a session's budget "
                f"(GATEWAY_MAX_PENDING_BYTES_PER_SESSION, {settings.max_pending_bytes_per_session})"
            )
        budget.add(record.id, session_id, held)

    def carry(self, record: Record) -> None:
        """Charge a question asked before (found at restart, or asked on another replica), unchecked."""
        self.pending_bytes.add(record.id, self.budget_session(record), charge(record))

    def discharge(self, request_id: str) -> None:
        self.pending_bytes.remove(request_id)

    def budget_session(self, record: Record) -> str | None:
        """Whose session budget ``record`` is charged to: its session's, or none for a question in the
        default session (whose tool named none): those come from any number of tools."""
        session_id = record.request.sessionID
        return None if session_id == self.default_session() else session_id
