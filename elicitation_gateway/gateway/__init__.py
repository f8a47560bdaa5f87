"""The service: asks elicitations, finishes them (reply, reject, withdraw, timeout, shutdown).

Routes call :class:`Gateway`, a facade over the parts of this package: asking (:mod:`.asking`),
answering (:mod:`.answering`), admission and the budget (:mod:`.admission`), waiting for results
(:mod:`.waiting`), re-attaching callers who went away (:mod:`.reattach`), finishes owed during store
outages (:mod:`.owed`), expiry (:mod:`.expiry`), finishing (:mod:`.finishing`), following a shared
or durable store (:mod:`.following`), escalation steps (:mod:`.escalating`), people's own
notifications (:mod:`.reaching`) and the audit trail (:mod:`.auditing`); their refusals are in
:mod:`.errors`. It calls the pure conversion (:mod:`elicitation_gateway.conversion`) and the
:class:`~elicitation_gateway.stores.base.Store`. Nothing here knows HTTP.
"""

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from elicitation_gateway.gateway.admission import Admission
from elicitation_gateway.gateway.answering import DECLINE, Answering
from elicitation_gateway.gateway.asking import (
    Asking,
    AskOptions,
    normalize_directory,
    printable_id,
    valid_session_id,
)
from elicitation_gateway.gateway.auditing import Auditing
from elicitation_gateway.gateway.errors import (
    AlreadyFinished,
    KeyReused,
    LimitExceeded,
    NotFound,
    ShuttingDown,
    TooLarge,
    TooManySubscribers,
)
from elicitation_gateway.gateway.escalating import Escalating
from elicitation_gateway.gateway.expiry import ACCEPT, CANCEL, Expiry
from elicitation_gateway.gateway.finishing import Finishing
from elicitation_gateway.gateway.following import Following
from elicitation_gateway.gateway.owed import STORE_RETRY, Owed
from elicitation_gateway.gateway.reaching import Reaching, pending_check
from elicitation_gateway.gateway.reattach import Caller, Reattach
from elicitation_gateway.gateway.waiting import Heartbeat, Waiting, WaitStatus
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.notify import Notifier
from elicitation_gateway.people import People, PeopleFile
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores import make_store
from elicitation_gateway.stores.base import Store, StoreUnavailable

__all__ = [
    "ACCEPT",
    "CANCEL",
    "DECLINE",
    "STORE_RETRY",
    "AlreadyFinished",
    "AskOptions",
    "Caller",
    "Gateway",
    "KeyReused",
    "LimitExceeded",
    "NotFound",
    "ShuttingDown",
    "TooLarge",
    "TooManySubscribers",
    "WaitStatus",
    "normalize_directory",
    "printable_id",
    "valid_session_id",
]

logger = logging.getLogger(__name__)


class Gateway:
    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        self.settings = settings
        self.store = store = store or make_store(settings)
        self.people: PeopleFile | None = None
        """The people file (``GATEWAY_PEOPLE``), set by the app: whom a ``to`` may name."""
        self.default_directory = normalize_directory(settings.directory) or settings.directory
        self.default_session_id = settings.session_id
        """``sessionID`` of questions whose tool names none; the OpenCode bridge sets a real session's."""
        self.metrics = Metrics()
        self._still_pending = pending_check(store)
        self.notifier: Notifier | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        closing, notifier = (lambda: self._closing), (lambda: self.notifier)
        default_session = lambda: self.default_session_id  # noqa: E731
        self.admission = Admission(settings, store, self.metrics, default_session)
        # The parts, each given what it works with; those that need one another are bound late.
        self.expiry = Expiry(
            store, finish=lambda *a, **k: self.finishing.finish(*a, **k), owe=self._owe, spawn=self._spawn
        )
        self.auditing = Auditing(store, self.metrics, settings.audit_retention)
        """The audit trail; ``auditing.escalated(question, who)`` records an escalation."""
        self.escalating = Escalating(
            store, people=self._people, notify=lambda *a: self.reaching.notify(*a), spawn=self._spawn
        )
        self.reaching = Reaching(
            settings, self.metrics, self.escalating, self.auditing, self._people, self._still_pending
        )
        self.finishing = Finishing(
            store,
            self.metrics,
            self.admission.pending_bytes,
            forget=self._forget,
            notifier=notifier,
            auditing=self.auditing,
        )
        finish = self.finishing.finish
        self.owed = Owed(
            finish=finish,
            expire_now=self.expiry.expire_now,
            retract=self.finishing.retract,
            settled=self._tool_may_be_done,
            closing=closing,
        )
        self.asking = Asking(
            settings,
            store,
            self.metrics,
            self.admission,
            schedule=self.expiry.schedule,
            owe_retraction=self.owed.owe_retraction,
            notifier=notifier,
            closing=closing,
            default_session=default_session,
            people=self._people,
            asked=self.reaching.asked,
            audited=self.auditing.asked,
        )
        self.waiting = Waiting(
            settings,
            store,
            owe=self._owe,
            closing=closing,
            answerers=lambda: self.admission.subscribers,
            released=self._tool_may_be_done,
        )
        self.reattach = Reattach(
            settings,
            store,
            ask=self.asking.ask,
            owe=self._owe,
            spawn=self._spawn,
            released=self._tool_may_be_done,
        )
        self.following = Following(
            store,
            self.expiry,
            self.admission,
            finish=finish,
            owe=self._owe,
            closing=closing,
            follow=self.escalating.follow,
        )
        # What the routes call that one part does alone (each documented there).
        self.subscribe, self.unsubscribe = self.admission.subscribe, self.admission.unsubscribe
        self.admit_mcp_stream = self.admission.admit_mcp_stream
        self.release_mcp_stream = self.admission.release_mcp_stream
        self.pending_bytes, self.forms = self.admission.pending_bytes, self.asking.forms
        self.ask, self.ask_or_attach = self.asking.ask, self.reattach.ask_or_attach
        self.result, self.tool_waiting = self.waiting.result, self.waiting.tool_waiting
        self.answering = answering = Answering(
            store, finish=finish, expire_now=self.expiry.expire_now, owed_first=self.owed.first
        )
        self.pending_listing, self.pending_json = answering.pending_listing, answering.pending_json
        self.pending_record, self.reply = answering.pending_record, answering.reply
        self.reject = answering.reject
        self.on_escalated, self.audience_of = self.escalating.on_escalated, self.escalating.audience_of

    async def start(self) -> None:
        await self.store.start()
        if self.settings.notify:
            self.notifier = Notifier(
                self.settings, self.metrics, self._still_pending, sent=self.auditing.notified
            )
            self.notifier.start()
        self.reaching.start()
        self.auditing.start()
        await self.following.start()

    async def shutdown(self) -> None:
        """Give every pending tool ``cancel`` (answerers see ``question.rejected``), then end streams."""
        if self._closing:
            return
        self._closing = True
        self.following.stop()
        self.escalating.clear()
        # Where questions outlive this process, only tools waiting on it need an answer.
        outlive = self.store.questions_outlive_process
        try:
            ids_ = self.waiting.waiting() if outlive else [r.id for r in await self.store.pending()]
        except StoreUnavailable as error:  # those waiting here get cancel all the same
            logger.warning("shutdown could not list the pending questions: %s", error)
            ids_ = self.waiting.waiting()
        await self.finishing.cancel_at_shutdown(ids_, self._owe)
        self.owed.stop()
        if self.owed:
            try:
                await self.owed.settle_now()
            except StoreUnavailable as error:
                logger.warning("%d questions stay pending, their finish owed: %s", len(self.owed), error)
        if self.notifier is not None:
            await self.notifier.stop(flush=outlive)
        await self.reaching.stop(flush=outlive)
        await self.auditing.stop()
        await self.store.close()
        self.expiry.clear()
        self.reattach.stop()

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def subscribers(self) -> int:
        """Answerers' event streams open."""
        return self.admission.subscribers

    @property
    def mcp_streams(self) -> int:
        return self.admission.mcp_streams

    async def healthy(self) -> bool:
        return await self.store.healthy()

    async def store_problem(self) -> str | None:
        """Why the store cannot serve now (for ``/readyz``); None when it can."""
        return await self.store.problem()

    async def count_pending(self) -> int:
        return await self.store.count_pending()

    async def knows(self, request_id: str) -> bool:
        """Whether this gateway asked ``request_id`` (pending, or finished and still kept)."""
        return await self.store.get(request_id) is not None

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` on a task of its own, kept until it ends."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _people(self) -> People | None:
        return None if self.people is None else self.people.current

    def _forget(self, request_id: str) -> None:
        """``request_id`` is finished: no timer of its own is left."""
        self.expiry.discard(request_id)
        self.escalating.discard(request_id)

    def _owe(self, request_id: str, reason: str) -> None:
        self.owed.owe(request_id, reason)

    def _tool_may_be_done(self, request_id: str) -> None:
        """The store hears that no tool waits on ``request_id`` here once none does: no call waits on it
        here, it is not kept for a caller that went away, and its finish is not owed (after a crash,
        the store must still name it abandoned)."""
        if not (self.waiting.waits(request_id) or request_id in self.owed or self.reattach.keeps(request_id)):
            self.store.tool_liveness.done(request_id)

    # ---------------------------------------------------------------------------------------------
    # Tool side

    async def final_result(
        self, record: Record, *, caller: Caller | None = None, heartbeat: Heartbeat | None = None
    ) -> dict[str, Any]:
        """The result a tool waiting on this process gets (:meth:`.Waiting.final_result`)."""
        return await self.waiting.final_result(record, self.reattach, caller, heartbeat)

    async def withdraw(self, request_id: str) -> Record:
        """The tool no longer wants an answer: ``cancelled``, and answerers see ``question.rejected``."""
        finished = await self.finishing.finish(
            request_id, "cancelled", {"action": CANCEL}, reason="withdrawn"
        )
        if finished is not None:
            return finished
        record = await self.store.get(request_id)
        if record is None:
            raise NotFound(request_id)
        raise AlreadyFinished(record)
