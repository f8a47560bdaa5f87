"""The service: asks elicitations, finishes them (reply, reject, withdraw, timeout, shutdown).

Routes call this; it calls the pure conversion (:mod:`.conversion`) and the
:class:`~elicitation_gateway.stores.base.Store`. Nothing here knows HTTP.
"""

import asyncio
import contextlib
import logging
import math
import posixpath
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

from elicitation_gateway import events, ids
from elicitation_gateway.budget import PendingBytes, charge
from elicitation_gateway.conversion.answers import AnswerError, answers_to_content, answers_to_result
from elicitation_gateway.conversion.forms import FormCache, Limits
from elicitation_gateway.conversion.schema import SOFT_QUESTION_LIMIT, Form, SchemaError
from elicitation_gateway.deadlines import Deadlines
from elicitation_gateway.encoding import to_utf8
from elicitation_gateway.gateway.errors import (
    AlreadyFinished,
    KeyReused,
    LimitExceeded,
    NotFound,
    ShuttingDown,
    TooLarge,
    TooManySubscribers,
)
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.models import QuestionRequest, QuestionTool
from elicitation_gateway.notify import Notifier
from elicitation_gateway.records import OnTimeout, Record, Status
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores import make_store
from elicitation_gateway.stores.base import Store, StoreUnavailable, Subscription
from elicitation_gateway.stores.orphans import DigestMismatch, HeldKey

__all__ = [
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

ACCEPT, DECLINE, CANCEL = "accept", "decline", "cancel"
FORM_CACHE_BYTES = 32 * 1024 * 1024
"""Forms of schemas asked before (:mod:`.conversion.forms`)."""
CONVERT_ON_LOOP_BYTES = 64 * 1024
"""A schema whose JSON is longer is converted in a worker thread, one at a time, so that no ask holds
the event loop for long (a schema near the body limit takes some 100 ms to convert)."""
STORE_RETRY = 1.0
"""Seconds between two tries of a store that cannot be reached or written, for a tool waiting on it,
for owed finishes, and between two looks for questions abandoned by a gone replica."""
EXPIRY = "timed out"
KEY_POLL = 0.05
"""Seconds between two looks at a question that a call of the same Idempotency-Key on another replica
is asking."""
"""An owed finish that is the question's expiry (``cancel``, or the defaults), not a withdrawal."""


@dataclass(frozen=True)
class AskOptions:
    session_id: str | None = None
    directory: str | None = None
    tool: QuestionTool | None = None
    timeout: float | None = None
    on_timeout: OnTimeout = "cancel"
    asker: str | None = None
    """Who asks (``?asker=``): shown apart from the message, and before it to OpenCode clients."""


@dataclass(frozen=True)
class Caller:
    """Who asks what, as far as coming back to a question goes: a call from the same ``key`` (the same
    credentials, session, directory and arguments, or ``Idempotency-Key``) attaches to the question a
    call of that key left orphaned. ``digest`` is the request's own (an ``Idempotency-Key`` reused with
    another body is refused)."""

    key: str
    digest: str = ""
    exclusive: bool = False
    """Whether ``key`` names one question from the start of the first call (an ``Idempotency-Key`` on
    ``POST /elicit``): calls of that key at once, or while it waits, wait on that one question, where
    two identical MCP calls, both connected, are two questions."""
    proven: bool = False
    """Whether ``key`` holds something only this caller has (an ``Idempotency-Key``), not only what
    any caller with the same credentials could send: only then is an answer given while the caller was
    away handed to the call that comes back."""


@dataclass
class _Hold:
    """An ``Idempotency-Key`` held on this process, from the start of its first call until the last
    call waiting under it is gone: its question (None: the call asking went away first; ask again)."""

    digest: str
    record: "asyncio.Future[Record | None]"
    holders: int = 1
    orphaning: bool = False
    """The last call went away; the key is free once its question is kept for it (see ``gone``)."""
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    shared: HeldKey | None = None
    """The key as held in the store, across processes, by this process's calls."""


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


MAX_ID_LENGTH = 200


def printable_id(value: str) -> bool:
    """A short id a tool names things by: printable, without whitespace, at most 200 characters."""
    return 0 < len(value) <= MAX_ID_LENGTH and value.isprintable() and not any(c.isspace() for c in value)


def valid_session_id(session_id: str) -> bool:
    """What a tool may name as its question's ``sessionID`` (OpenCode's ids start with ``ses``): the
    same rule for ``POST /elicit`` and ``/mcp``."""
    return session_id.startswith("ses") and printable_id(session_id)


def normalize_directory(directory: str | None) -> str | None:
    """Directories compare as paths: ``/a/b/`` and ``/a/b`` are the same project."""
    if not directory or not directory.strip():
        return None
    directory = directory.strip()
    return (
        posixpath.normpath(directory) if directory.startswith("/") else directory.rstrip("/\\") or directory
    )


class Gateway:
    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        self.settings = settings
        self.store = store or make_store(settings)
        self.default_directory = normalize_directory(settings.directory) or settings.directory
        self.metrics = Metrics()
        self.subscribers = 0
        self.mcp_streams = 0  # /mcp responses that may stream: counted against the same limit
        # of the pending questions this process times, and of those orphaned here
        self._timeouts = Deadlines(lambda request_id: self._spawn(self._expire(request_id)))
        self._orphan_windows = Deadlines(lambda request_id: self._spawn(self._end_orphan(request_id)))
        limits = Limits(
            header_length=settings.header_length,
            max_questions=settings.max_questions,
            max_options=settings.max_options,
            max_text_length=settings.max_text_length,
            allow_sensitive=settings.allow_sensitive,
        )
        self.forms = FormCache(limits, FORM_CACHE_BYTES)
        self._converting = asyncio.Semaphore(1)  # big schemas, converted off the loop one at a time
        self.pending_bytes = PendingBytes()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        # questions whose tool waits on this process (``POST /elicit``, ``/mcp``)
        self._waiting: dict[str, int] = {}  # -> how many wait (calls of one Idempotency-Key share one)
        self._beaten: dict[str, float] = {}  # when each waiting caller was last told how it stands
        self._holds: dict[str, _Hold] = {}  # Idempotency-Keys of calls asking or waiting here
        self._orphaned: set[str] = set()  # questions whose caller went away, kept for it to come back
        self._watcher: asyncio.Task[None] | None = None
        # Finishes the store could not take when they were due (it was unreachable): id -> the reason
        # (EXPIRY, or why it is withdrawn). Retried in the background, and before anything else.
        self._owed: dict[str, str] = {}
        self._retractions: dict[str, Record] = {}  # owed finishes of asks that failed: their records
        self._settler: asyncio.Task[None] | None = None
        self._orphan_watch: asyncio.Task[None] | None = None
        self.notifier: Notifier | None = None
        self.default_session_id = settings.session_id
        """``sessionID`` of questions whose tool names none; the OpenCode bridge sets a real session's."""

    async def start(self) -> None:
        await self.store.start()
        if self.settings.notify:
            self.notifier = Notifier(self.settings, self.metrics, self._still_pending)
            self.notifier.start()
        if self.store.shared:
            loop = asyncio.get_running_loop()
            self._watcher = loop.create_task(self._watch_shared_questions())
            self._orphan_watch = loop.create_task(self._watch_abandoned())
            return
        # A durable store finds what the last process left: questions whose tool waited on a blocking
        # request to it have nobody to collect their answer (withdrawn); the others resume their timers
        # (those that expired meanwhile expire now).
        for request_id in await self.store.abandoned():
            await self._finish(request_id, "cancelled", {"action": CANCEL}, reason="tool gone at restart")
        for record in await self.store.pending():
            self.pending_bytes.add(record.id, self._budget_session(record), charge(record))
            self._schedule_expiry(record.id, record.expires_at - time.time())

    async def shutdown(self) -> None:
        """Give every pending tool ``cancel`` (answerers see ``question.rejected``), then end streams."""
        if self._closing:
            return
        self._closing = True
        for task in (self._watcher, self._orphan_watch):
            if task is not None:
                task.cancel()
        # A shared or durable store's questions outlive this process; only tools waiting on it need
        # an answer.
        outlive = self.store.shared or self.store.durable
        try:
            ids_ = list(self._waiting) if outlive else [r.id for r in await self.store.pending()]
        except StoreUnavailable as error:  # those waiting here get cancel all the same
            logger.warning("shutdown could not list the pending questions: %s", error)
            ids_ = list(self._waiting)
        unfinished: list[str] = []
        for request_id in ids_:
            try:
                await self._finish(request_id, "cancelled", {"action": CANCEL}, reason="shutdown")
                self.store.tool_done(request_id)  # now, while the store is still open
            except StoreUnavailable as error:
                unfinished.append(f"{request_id}: {error}")
                self._owe(request_id, "shutdown")  # its tool gets cancel all the same
                self.store.wake(request_id)
        if unfinished:
            logger.warning("shutdown could not finish %d questions (%s)", len(unfinished), unfinished[0])
        if self._settler is not None:
            self._settler.cancel()
        if self._owed:
            try:
                await self._settle_owed_now()
            except StoreUnavailable as error:
                logger.warning("%d questions stay pending, their finish owed: %s", len(self._owed), error)
        if self.notifier is not None:
            await self.notifier.stop(flush=outlive)
        await self.store.close()
        self._timeouts.clear()
        self._orphan_windows.clear()

    @property
    def closing(self) -> bool:
        return self._closing

    async def healthy(self) -> bool:
        return await self.store.healthy()

    async def store_problem(self) -> str | None:
        """Why the store cannot serve now (for ``/readyz``); None when it can."""
        return await self.store.problem()

    async def _still_pending(self, request_id: str) -> bool:
        try:
            record = await self.store.get(request_id)
        except StoreUnavailable:
            return True  # better told twice than not at all
        return record is not None and record.pending

    async def count_pending(self) -> int:
        return await self.store.count_pending()

    async def knows(self, request_id: str) -> bool:
        """Whether this gateway asked ``request_id`` (pending, or finished and still kept)."""
        return await self.store.get(request_id) is not None

    # ---------------------------------------------------------------------------------------------
    # Event streams

    async def subscribe(self, last_event_id: str | None = None) -> Subscription:
        """Admit one event stream; :meth:`unsubscribe` gives its place back.

        Raises :class:`StoreUnavailable` (the client retries) or :class:`TooManySubscribers`.
        """
        # A shared store's events come from it; a local store's streams work while its file cannot be
        # written (answers then get 503, but people still see what is asked).
        if self.store.shared and not await self.store.healthy():
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

    # ---------------------------------------------------------------------------------------------
    # Tool side

    async def ask(
        self, message: str, schema: Any, options: AskOptions = AskOptions(), request_id: str | None = None
    ) -> Record:
        """Create a pending record (``request_id``: chosen already); raises :class:`.SchemaError` for a
        schema it cannot ask, :class:`LimitExceeded` when the pending limits are full,
        :class:`TooLarge` for a question larger than a session may hold."""
        if self._closing:
            raise ShuttingDown("the gateway is shutting down")
        form = await self._form(schema, f"{options.asker}: {message}" if options.asker else message)
        if options.on_timeout == "default":
            _check_defaults(form)
        session_id = options.session_id or self.default_session_id
        await self._check_count(session_id)
        request = QuestionRequest.new(
            request_id or ids.question_id(), session_id, list(form.questions), options.tool
        )
        if len(form.fields) > SOFT_QUESTION_LIMIT:
            logger.warning(
                "elicitation %s asks %d questions; more than %d are hard to answer well",
                request.id,
                len(form.fields),
                SOFT_QUESTION_LIMIT,
            )
        timeout = min(options.timeout or self.settings.timeout, self.settings.max_timeout)
        now = time.time()
        directory = normalize_directory(options.directory)
        record = Record.new(
            request, form, message, directory, now, now + timeout, options.on_timeout, options.asker
        )
        self._charge(record)  # with no await since the check: asks at once cannot overshoot the budget
        try:
            await self.store.add(record)
        except BaseException:
            # The store may have kept it all the same (a write whose reply never came: Redis stalled)
            # or may yet (a write still on its way): the ask is refused, so it is undone, now or as soon
            # as the store answers, and a question.asked it made is followed by question.rejected.
            self.pending_bytes.remove(record.id)
            self._retractions[record.id] = record
            self._owe(record.id, "its ask failed")
            raise
        self.metrics.asked.inc()
        self._schedule_expiry(record.id, timeout)
        if self.notifier is not None:
            # Only the replica whose ask created the record notifies, and never for records it adopts
            # from a shared store (_adopt) or finds at restart: once per question, also in a cluster.
            self.notifier.submit(record)
        logger.debug("elicitation %s asked: %d questions", record.id, len(form.fields))
        return record

    async def _check_count(self, session_id: str) -> None:
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

    def _charge(self, record: Record) -> None:
        """Charge ``record`` to the memory budget, or refuse it (nothing is charged then)."""
        held, session_id = charge(record), self._budget_session(record)
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

    def _budget_session(self, record: Record) -> str | None:
        """Whose session budget ``record`` is charged to: its session's, or none for a question in the
        default session (whose tool named none): those come from any number of tools."""
        session_id = record.request.sessionID
        return None if session_id == self.default_session_id else session_id

    async def _form(self, schema: Any, message: str) -> Form:
        """The form for ``schema`` (:class:`.FormCache`); a big one is converted in a worker thread,
        one at a time, and its questions encoded there too, so that the loop goes on serving everyone
        else meanwhile."""
        key = self.forms.key(schema)
        if key is None or len(key) <= CONVERT_ON_LOOP_BYTES:
            return self.forms.form(schema, message, key)
        async with self._converting:
            return await asyncio.to_thread(self._encoded_form, schema, message, key)

    def _encoded_form(self, schema: Any, message: str, key: str) -> Form:
        form = self.forms.form(schema, message, key)
        for question in form.questions:  # encoded once, here: its request's JSON is spliced of them
            question.shared()
        return form

    async def result(self, request_id: str, wait: float | None = None) -> Record:
        record = await self.store.get(request_id)
        if record is None:
            raise NotFound(request_id)
        if record.pending and wait:
            record = await self.store.wait(request_id, min(wait, self.settings.max_timeout)) or record
        return record

    async def ask_or_attach(
        self, message: str, schema: Any, options: AskOptions, caller: Caller | None = None
    ) -> Record:
        """:meth:`ask`, unless ``caller`` left a question orphaned within the re-attach window: then that
        question, pending (its wait goes on) or, for a ``proven`` caller, finished while the caller was
        away (its result, once). An ``exclusive`` caller's key is held from the start: calls of that key
        meanwhile wait for its question and attach to it. Raises :class:`KeyReused` when the key's
        question was asked with another body. The :meth:`final_result` of an ``exclusive`` caller
        must follow (it gives the hold back)."""
        if caller is None:
            return await self.ask(message, schema, options)
        if not caller.exclusive:
            return await self._claim_or_ask(message, schema, options, caller)
        while (hold := self._holds.get(caller.key)) is not None:
            if hold.digest != caller.digest:
                raise KeyReused("this Idempotency-Key was used with another body")
            if hold.orphaning:  # the last call under it went away: its question is being orphaned
                await hold.gone.wait()
                continue
            hold.holders += 1
            try:
                record = await asyncio.shield(hold.record)
            except BaseException:
                self._release(caller, hold)
                raise
            if record is not None:
                logger.info("elicitation %s attached to by a call of the same Idempotency-Key", record.id)
                return record
            self._release(caller, hold)  # the call asking went away before its question was made: ask
        hold = self._holds[caller.key] = _Hold(caller.digest, asyncio.get_running_loop().create_future())
        try:
            record = await self._join_and_ask(message, schema, options, caller, hold)
        except BaseException as error:
            # The key is free at once; those waiting on it get the same refusal, or ask again.
            del self._holds[caller.key]
            hold.gone.set()
            self._let_go(caller, hold, free=True)
            if isinstance(error, asyncio.CancelledError):
                hold.record.set_result(None)
            else:
                hold.record.set_exception(error)
                hold.record.exception()  # retrieved: nobody else may be waiting
            raise
        hold.record.set_result(record)
        return record

    async def _join_and_ask(
        self, message: str, schema: Any, options: AskOptions, caller: Caller, hold: _Hold
    ) -> Record:
        """The question of ``caller``'s key, held in the store across processes: asked (or an orphan
        claimed) by the call that holds it first, waited for by those that join."""
        while True:
            request_id = ids.question_id()
            try:
                joined = await self.store.join_key(caller.key, caller.digest, request_id)
            except DigestMismatch:
                raise KeyReused("this Idempotency-Key was used with another body") from None
            if joined is None:  # its last call went away on another replica: its question is being kept
                await asyncio.sleep(KEY_POLL)
                continue
            hold.shared = joined
            if joined.first:
                break
            if (record := await self._asked_elsewhere(caller, joined)) is not None:
                logger.info("elicitation %s attached to by a call of the same Idempotency-Key", record.id)
                return record
            hold.shared = None  # freed with no question (its ask was refused): hold it anew
        record = await self._claim_or_ask(message, schema, options, caller, request_id)
        if record.id != request_id:
            await self.store.rekey(caller.key, joined.epoch, record.id)
        return record

    async def _asked_elsewhere(self, caller: Caller, joined: HeldKey) -> Record | None:
        """The question a call of the key on another replica asks, once asked; None if that call lets
        go of the key without one."""
        request_id = joined.request_id
        while (record := await self.store.get(request_id)) is None:
            held = await self.store.held_key(caller.key)
            if held is None or held.epoch != joined.epoch:
                return None
            if held.request_id == request_id:
                await asyncio.sleep(KEY_POLL)
            request_id = held.request_id
        return record

    def _let_go(self, caller: Caller, hold: _Hold, *, free: bool = False) -> None:
        """This process's calls of the key are gone: the store hears it (on a task of its own, since
        they may be cancelled); ``free`` frees the key if this process took it."""
        shared, hold.shared = hold.shared, None
        if shared is not None:
            self._spawn(self._leave_key(caller, shared, free=free and shared.first))

    async def _leave_key(self, caller: Caller, shared: HeldKey, *, free: bool) -> None:
        with contextlib.suppress(StoreUnavailable):  # its lease lapses
            if free:
                await self.store.free_key(caller.key, shared.epoch)
            else:
                await self.store.leave_key(caller.key, shared.epoch)

    async def _claim_or_ask(
        self, message: str, schema: Any, options: AskOptions, caller: Caller, request_id: str | None = None
    ) -> Record:
        while True:
            try:
                claimed = await self.store.claim_orphan(caller.key, caller.digest)
            except DigestMismatch:
                raise KeyReused("this Idempotency-Key was used with another body") from None
            if claimed is None:
                return await self.ask(message, schema, options, request_id)
            record = await self.store.get(claimed)
            if record is None:
                continue
            if record.pending or caller.proven:
                logger.info("elicitation %s attached to again by its caller", record.id)
                return record
            # Finished while its caller was away, and nothing shows this call is that caller (another
            # agent with the same credentials asks the same): its answer goes to nobody.
            logger.info("elicitation %s finished while its caller was away; asked anew", record.id)

    def _release(self, caller: Caller | None, hold: _Hold | None) -> None:
        """One call under ``caller``'s key, ``hold``, is done; the key is free once the last one is."""
        if caller is None or hold is None:
            return
        hold.holders -= 1
        if hold.holders <= 0 and self._holds.get(caller.key) is hold:
            del self._holds[caller.key]
            hold.gone.set()
            self._let_go(caller, hold)

    async def final_result(
        self,
        record: Record,
        *,
        caller: Caller | None = None,
        heartbeat: Callable[[WaitStatus], Awaitable[None]] | None = None,
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
        hold = self._holds.get(caller.key) if caller is not None and caller.exclusive else None
        if record.result is not None:  # finished while its caller was away: the result, once
            self._release(caller, hold)
            return record.result
        orphaning = False
        try:
            with self.tool_waiting(record.id):
                try:
                    return await self._wait_for_result(record, heartbeat)
                except asyncio.CancelledError:
                    # No await here: the cancelled caller could be cancelled again at the next one.
                    if hold is not None and hold.holders > 1:
                        pass  # other calls of its key still wait on the question
                    elif hold is not None:  # unless calls of its key on other replicas still wait
                        orphaning = hold.orphaning = True  # calls of its key here wait until it is kept
                        self._orphaned.add(record.id)
                        self._spawn(self._leave_last(record, caller, hold))
                    elif caller is not None and self.settings.reattach_window > 0:
                        self._orphan_later(record, caller, None)
                    else:
                        self._owe(record.id, "withdrawn")
                    raise
                finally:
                    self._beaten.pop(record.id, None)
        finally:
            if not orphaning:
                self._release(caller, hold)

    async def _wait_for_result(
        self, record: Record, heartbeat: Callable[[WaitStatus], Awaitable[None]] | None
    ) -> dict[str, Any]:
        request_id = record.id
        slice_ = self.settings.mcp_progress_interval if heartbeat is not None else self.settings.max_timeout
        while True:
            try:
                finished = await self.result(request_id, wait=slice_)
            except NotFound:  # forgotten after its retention period: nothing came back in time
                return {"action": CANCEL}
            except StoreUnavailable:
                if self._closing:  # shutdown could not finish it either
                    self._owe(request_id, "shutdown")
                    return {"action": CANCEL}
                left = record.expires_at - time.time()
                if left <= 0:
                    self._owe(request_id, EXPIRY)
                    return _expiry_result(record)
                await asyncio.sleep(min(STORE_RETRY, left))
                await self._beat(record, heartbeat)
                continue
            if finished.result is not None:
                return finished.result
            if self._closing:  # woken by a shutdown that could not finish it
                self._owe(request_id, "shutdown")
                return {"action": CANCEL}
            await self._beat(record, heartbeat)

    async def _beat(self, record: Record, heartbeat: Callable[[WaitStatus], Awaitable[None]] | None) -> None:
        """Tell the caller how the wait stands, at most once an interval (a store outage wakes the wait
        every second)."""
        if heartbeat is None:
            return
        now = time.time()
        last = self._beaten.get(record.id, record.created_at)
        if now - last < self.settings.mcp_progress_interval * 0.9:
            return
        self._beaten[record.id] = now
        status = WaitStatus(now - record.created_at, record.expires_at - now, self.subscribers)
        try:
            await heartbeat(status)
        except Exception as error:  # a caller that cannot be told is cancelled by its transport, if gone
            logger.debug("elicitation %s: could not tell its caller how it stands: %s", record.id, error)

    async def _leave_last(self, record: Record, caller: Caller, hold: _Hold) -> None:
        """The last call of an Idempotency-Key on this process went away: its question is kept for the
        key (or withdrawn, without a window) unless calls of the key on other replicas still wait."""
        keep = self.settings.reattach_window > 0
        shared, hold.shared = hold.shared, None
        try:
            left = 0 if shared is None else await self.store.leave_key(caller.key, shared.epoch, keep=keep)
        except StoreUnavailable:
            left = 0
        if left > 0 or not keep:
            self._orphaned.discard(record.id)
            if left == 0:
                self._owe(record.id, "withdrawn")
            elif record.id not in self._waiting:
                self.store.tool_done(record.id)
            self._release(caller, hold)
            return
        try:
            await self._orphan(record, caller, hold)
        finally:
            if shared is not None:
                with contextlib.suppress(StoreUnavailable):  # its lease lapses
                    await self.store.free_key(caller.key, shared.epoch)

    def _orphan_later(self, record: Record, caller: Caller, hold: _Hold | None) -> None:
        """Keep ``record`` for its caller to come back to (made on a task: its caller is cancelled).
        Calls of its key meanwhile wait for ``hold`` to be gone, and then claim it."""
        self._orphaned.add(record.id)
        self._spawn(self._orphan(record, caller, hold))

    async def _orphan(self, record: Record, caller: Caller, hold: _Hold | None) -> None:
        window = self.settings.reattach_window
        try:
            await self.store.orphan(caller.key, record.id, caller.digest, window)
        except StoreUnavailable:
            self._orphaned.discard(record.id)
            self._owe(record.id, "withdrawn")
            return
        finally:
            self._release(caller, hold)  # the key is free: the next call of it claims the orphan
        self._orphan_windows.set(record.id, window)
        logger.info("elicitation %s: its caller went away; kept for it for %g s", record.id, window)

    async def _end_orphan(self, request_id: str) -> None:
        """The re-attach window ended: withdrawn if nobody came back for it (and it is still pending)."""
        try:
            unclaimed = await self.store.end_orphan(request_id)
        except StoreUnavailable:
            self._orphan_windows.set(request_id, STORE_RETRY)
            return
        self._orphaned.discard(request_id)
        if unclaimed:
            await self._withdraw_owed(request_id, "nobody came back for it")
        elif request_id not in self._waiting:
            self.store.tool_done(request_id)

    async def _withdraw_owed(self, request_id: str, reason: str) -> None:
        record = await self.store.get(request_id)
        if record is not None and record.pending:
            self._owe(request_id, reason)
        elif request_id not in self._waiting:
            self.store.tool_done(request_id)

    @contextlib.contextmanager
    def tool_waiting(self, request_id: str) -> Iterator[None]:
        """A tool waits on this process for the answer: shutdown gives it ``cancel``. The store hears
        when it stops, unless the question's finish is still owed (after a crash, the store must
        still name it abandoned)."""
        self._waiting[request_id] = self._waiting.get(request_id, 0) + 1
        self.store.tool_waits(request_id)
        try:
            yield
        finally:
            if self._waiting[request_id] > 1:
                self._waiting[request_id] -= 1
            else:
                del self._waiting[request_id]
                if request_id not in self._owed and request_id not in self._orphaned:
                    self.store.tool_done(request_id)

    async def withdraw(self, request_id: str) -> Record:
        """The tool no longer wants an answer: ``cancelled``, and answerers see ``question.rejected``."""
        finished = await self._finish(request_id, "cancelled", {"action": CANCEL}, reason="withdrawn")
        if finished is not None:
            return finished
        record = await self.store.get(request_id)
        if record is None:
            raise NotFound(request_id)
        raise AlreadyFinished(record)

    # ---------------------------------------------------------------------------------------------
    # Answerer side

    async def pending_listing(self, directory: str | None = None) -> list[str]:
        """``GET /question``'s items: each request's JSON, encoded once, when it was asked."""
        await self._owed_first()
        directory = normalize_directory(directory)
        return [
            record.request.wire_json
            for record in await self.store.pending()
            if directory is None or record.directory is None or record.directory == directory
        ]

    async def pending_json(self, directory: str | None = None) -> bytes:
        """``GET /question``'s body, whole."""
        return to_utf8("[" + ",".join(await self.pending_listing(directory)) + "]")

    async def _gone(self, request_id: str) -> NotFound:
        """What to say of a record someone else finished first: how it finished, if still known."""
        record = await self.store.get(request_id)
        return NotFound(request_id, None if record is None or record.pending else record.status)

    async def pending_record(self, request_id: str) -> Record:
        """The pending record; one past its expiry is expired now (its timer may be late, or the store
        was unreachable when it was due) and not found: its tool has stopped waiting."""
        await self._owed_first()
        record = await self.store.get(request_id)
        if record is None or not record.pending:
            raise NotFound(request_id, None if record is None else record.status)
        if record.expires_at <= time.time():
            await self._expire_now(request_id)
            raise NotFound(request_id, "expired")
        return record

    async def reply(self, request_id: str, answers: list[list[str]]) -> Record:
        """Accept with typed content (a confirmation answered No: decline); raises :class:`.AnswerError`
        when answers do not fit."""
        record = await self.pending_record(request_id)
        result = answers_to_result(record.form, answers)
        status: Status = "answered" if result["action"] == ACCEPT else "declined"
        reason = "answered" if status == "answered" else "answered no"
        finished = await self._finish(request_id, status, result, answers=answers, reason=reason)
        if finished is None:  # another answerer got there first
            raise await self._gone(request_id)
        return finished

    async def reject(self, request_id: str, action: str = CANCEL) -> Record:
        await self.pending_record(request_id)  # past its expiry: expired, not rejected
        status: Status = "declined" if action == DECLINE else "cancelled"
        finished = await self._finish(request_id, status, {"action": action}, reason="rejected")
        if finished is None:
            raise await self._gone(request_id)
        return finished

    # ---------------------------------------------------------------------------------------------

    async def _finish(
        self,
        request_id: str,
        status: Status,
        result: dict[str, Any],
        *,
        answers: list[list[str]] | None = None,
        reason: str,
        defaulted: bool = False,
    ) -> Record | None:
        """``defaulted``: answered with the defaults at the timeout, not by a person (not timed)."""
        record = await self.store.finish(request_id, status, result, answers)
        if record is None:
            return None
        self._finished(record, reason, defaulted=defaulted)
        return record

    async def _retract(self, record: Record, reason: str) -> None:
        """Undo an ask whose store write failed (:meth:`.Store.retract`)."""
        finished = await self.store.retract(record)
        if finished is not None:
            self._finished(finished, reason)

    def _finished(self, record: Record, reason: str, *, defaulted: bool = False) -> None:
        """What finishing a record changes here: its charge, its timer, metrics and the log."""
        request_id, status = record.id, record.status
        self.pending_bytes.remove(request_id)
        self._timeouts.discard(request_id)
        if self.notifier is not None:
            self.notifier.forget(request_id)
        duration = (record.finished_at or record.created_at) - record.created_at
        self.metrics.finished.labels(status).inc()
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

    def _schedule_expiry(self, request_id: str, delay: float) -> None:
        self._timeouts.set(request_id, delay)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` on a task of its own, kept until it ends."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _expire(self, request_id: str) -> None:
        try:
            await self._expire_now(request_id)
        except StoreUnavailable as error:  # owed: once the store is back (the store logs its fault once)
            logger.debug("elicitation %s could not expire now: %s", request_id, error)
            self._owe(request_id, EXPIRY)

    async def _expire_now(self, request_id: str) -> None:
        record = await self.store.get(request_id)
        if record is None or not record.pending:
            return
        result = _expiry_result(record)
        if result["action"] == ACCEPT:
            # The person's empty reply, given on their behalf, so answerers see question.replied like
            # any other answer.
            answers: list[list[str]] = [[] for _ in record.form.fields]
            await self._finish(
                request_id, "answered", result, answers=answers, reason="timed out, defaults", defaulted=True
            )
            return
        await self._finish(request_id, "expired", result, reason="timed out")

    # ---------------------------------------------------------------------------------------------
    # Finishes owed while the store could not take them

    def _owe(self, request_id: str, reason: str) -> None:
        self._owed.setdefault(request_id, reason)
        if self._settler is None or self._settler.done():
            self._settler = asyncio.get_running_loop().create_task(self._settle_owed())

    async def _settle_owed(self) -> None:
        """Until every owed finish is made: tried at once, then every second while the store cannot."""
        while self._owed and not self._closing:
            try:
                await self._settle_owed_now()
            except StoreUnavailable:
                await asyncio.sleep(STORE_RETRY)

    async def _settle_owed_now(self) -> None:
        """Make every owed finish, oldest first; raises :class:`StoreUnavailable` at the first the store
        cannot take yet."""
        for request_id, reason in list(self._owed.items()):
            if (unsure := self._retractions.get(request_id)) is not None:
                await self._retract(unsure, reason)
                self._retractions.pop(request_id, None)
            elif reason == EXPIRY:
                await self._expire_now(request_id)
            else:
                await self._finish(request_id, "cancelled", {"action": CANCEL}, reason=reason)
            if self._owed.pop(request_id, None) is not None and request_id not in self._waiting:
                self.store.tool_done(request_id)

    async def _owed_first(self) -> None:
        """Owed finishes go before anything else once the store answers again (so that no person
        answers a question whose tool has stopped waiting); free while nothing is owed."""
        if self._owed:
            with contextlib.suppress(StoreUnavailable):
                await self._settle_owed_now()

    async def _watch_abandoned(self) -> None:
        """With a shared store: the questions whose tool waited on a replica found gone are withdrawn."""
        while not self._closing:
            with contextlib.suppress(StoreUnavailable):
                for request_id in await self.store.abandoned():
                    self._owe(request_id, "its tool's replica is gone")
            await asyncio.sleep(STORE_RETRY)

    async def _watch_shared_questions(self) -> None:
        """With a shared store, every replica keeps a timer for every pending question, so a timeout
        fires even when the replica that asked is gone; the store lets only the first one finish it.

        Subscribing announces every pending question (also after Redis comes back); then each new one
        is announced as it is asked.
        """
        while not self._closing:
            try:
                subscription = await self.store.subscribe()
                try:
                    for event in subscription.backlog:
                        await self._adopt(event)
                    async for event in subscription:
                        await self._adopt(event)
                finally:
                    subscription.close()
            except StoreUnavailable:
                pass
            await asyncio.sleep(1)

    async def _adopt(self, event: events.Event) -> None:
        if event.type in (events.REPLIED, events.REJECTED):
            self._timeouts.discard(event.properties["requestID"])
            self.pending_bytes.remove(event.properties["requestID"])
            return
        if event.type == events.ASKED and event.properties["id"] not in self._timeouts:
            record = await self.store.get(event.properties["id"])
            if record is not None and record.pending:
                self._schedule_expiry(record.id, record.expires_at - time.time())
                self.pending_bytes.add(record.id, self._budget_session(record), charge(record))


def _expiry_result(record: Record) -> dict[str, Any]:
    """What a tool gets when its question expires: ``cancel``, or with ``onTimeout=default`` the
    schema's defaults (checked when asked: every required field has one)."""
    if record.on_timeout == "default":
        return {
            "action": ACCEPT,
            "content": answers_to_content(record.form, [[] for _ in record.form.fields]),
        }
    return {"action": CANCEL}


def _check_defaults(form: Form) -> None:
    """``onTimeout=default`` needs a default for every required field: refused when asked, not at expiry."""
    if form.confirm:
        raise SchemaError(
            "onTimeout=default needs a default answer, and a confirmation (a schema with no properties) "
            "has none: only a person says yes",
            code="invalid_timeout_choice",
        )
    try:
        answers_to_content(form, [[] for _ in form.fields])
    except AnswerError as error:
        keys = ", ".join(repr(form.fields[issue.index].key) for issue in error.issues) or error.message
        raise SchemaError(
            f"onTimeout=default needs a default for every required field; {keys} has none",
            code="invalid_timeout_choice",
        ) from None
