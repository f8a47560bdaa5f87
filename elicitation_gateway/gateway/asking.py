"""Asking: a tool's message and schema become a pending record, its form converted (a big schema in a
worker thread, one at a time), checked against the limits, charged, stored, timed and notified; and
what a tool may name its question by (session, directory)."""

import asyncio
import logging
import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elicitation_gateway import ids
from elicitation_gateway.conversion.forms import FormCache, Limits
from elicitation_gateway.conversion.schema import SOFT_QUESTION_LIMIT, Form
from elicitation_gateway.escalation import Step, names_of
from elicitation_gateway.gateway.admission import Admission
from elicitation_gateway.gateway.errors import ShuttingDown
from elicitation_gateway.gateway.expiry import check_defaults
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.models import QuestionRequest, QuestionTool
from elicitation_gateway.notify import Notifier
from elicitation_gateway.people import NoPeople, People
from elicitation_gateway.records import OnTimeout, Record
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores.base import Store

logger = logging.getLogger(__package__)

FORM_CACHE_BYTES = 32 * 1024 * 1024
"""Forms of schemas asked before (:mod:`.conversion.forms`)."""
CONVERT_ON_LOOP_BYTES = 64 * 1024
"""A schema whose JSON is longer is converted in a worker thread, one at a time, so that no ask holds
the event loop for long (a schema near the body limit takes some 100 ms to convert)."""
MAX_ID_LENGTH = 200


@dataclass(frozen=True)
class AskOptions:
    session_id: str | None = None
    directory: str | None = None
    tool: QuestionTool | None = None
    timeout: float | None = None
    on_timeout: OnTimeout = "cancel"
    asker: str | None = None
    """Who asks (``?asker=``): shown apart from the message, and before it to OpenCode clients."""
    to: tuple[str, ...] = ()
    """Whom it is for (``"to"``: people and ``group:`` names of ``GATEWAY_PEOPLE``); empty: everyone."""
    escalate: tuple[Step, ...] = ()
    """Whom it also reaches while nobody answers (``"escalate"``, :mod:`elicitation_gateway.escalation`)."""


NO_OPTIONS = AskOptions()


def printable_id(value: str) -> bool:
    """A short id a tool names things by: printable, without whitespace, at most 200 characters."""
    # Of the whitespace characters, only the space is printable (a unit test checks every code point).
    return 0 < len(value) <= MAX_ID_LENGTH and value.isprintable() and " " not in value


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


class NoEscalation(NoPeople):
    """An ``escalate`` on a gateway without a people file."""

    def __init__(self) -> None:
        ValueError.__init__(
            self, "'escalate' names people, but the gateway has no people file (GATEWAY_PEOPLE)"
        )
        self.name = ""


class Asking:
    """``schedule`` times a new question (:meth:`.Expiry.schedule`); ``owe_retraction`` owes undoing
    an ask the store may have kept (:meth:`.Owed.owe_retraction`); ``notifier``, ``closing`` and
    ``default_session`` are read at each ask."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        metrics: Metrics,
        admission: Admission,
        *,
        schedule: Callable[[str, float], None],
        owe_retraction: Callable[[Record, str], None],
        notifier: Callable[[], Notifier | None],
        closing: Callable[[], bool],
        default_session: Callable[[], str],
        people: Callable[[], People | None] = lambda: None,
        asked: Callable[[Record], None] = lambda record: None,
        audited: Callable[[Record], None] | None = None,
    ) -> None:
        self.asked = asked
        """Told of each question once it is stored and timed: its escalation, its people's notifications."""
        self.audited = audited
        """Told of each record asked here, for the audit trail (:meth:`.Auditing.asked`)."""
        self.settings = settings
        self.people = people
        self.store = store
        self.metrics = metrics
        self.admission = admission
        self.schedule = schedule
        self.owe_retraction = owe_retraction
        self.notifier = notifier
        self.closing = closing
        self.default_session = default_session
        limits = Limits(
            header_length=settings.header_length,
            max_questions=settings.max_questions,
            max_options=settings.max_options,
            max_text_length=settings.max_text_length,
            allow_sensitive=settings.allow_sensitive,
        )
        self.forms = FormCache(limits, FORM_CACHE_BYTES)
        self.converting = asyncio.Semaphore(1)  # big schemas, converted off the loop one at a time

    async def ask(
        self, message: str, schema: Any, options: AskOptions = NO_OPTIONS, request_id: str | None = None
    ) -> Record:
        """Create a pending record (``request_id``: chosen already); raises :class:`.SchemaError` for a
        schema it cannot ask, :class:`LimitExceeded` when the pending limits are full,
        :class:`TooLarge` for a question larger than a session may hold."""
        if self.closing():
            raise ShuttingDown("the gateway is shutting down")
        if options.to or options.escalate:
            if (people := self.people()) is None:
                raise NoPeople(options.to[0]) if options.to else NoEscalation()
            people.check_known(options.to)
            people.check_known(names_of(options.escalate))
        form = await self.form(schema, f"{options.asker}: {message}" if options.asker else message)
        if options.on_timeout == "default":
            check_defaults(form)
        session_id = options.session_id or self.default_session()
        await self.admission.check_count(session_id)
        request = QuestionRequest.new(
            request_id or ids.question_id(), session_id, list(form.questions), options.tool, list(options.to)
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
            request,
            form,
            message,
            directory,
            now,
            now + timeout,
            options.on_timeout,
            options.asker,
            options.escalate,
        )
        self.admission.charge(record)  # with no await since the check: asks at once cannot overshoot
        try:
            await self.store.add(record)
        except BaseException:
            # The store may have kept it all the same (a write whose reply never came: Redis stalled)
            # or may yet (a write still on its way): the ask is refused, so it is undone, now or as soon
            # as the store answers, and a question.asked it made is followed by question.rejected.
            self.admission.discharge(record.id)
            self.owe_retraction(record, "its ask failed")
            raise
        self.metrics.asked.inc()
        self.schedule(record.id, timeout)
        if self.audited is not None:
            self.audited(record)
        if (notifier := self.notifier()) is not None and not options.to:
            # A question for some people only is never sent to the targets everyone's questions go to.
            # Only the replica whose ask created the record notifies, and never for records it adopts
            # from a shared store or finds at restart: once per question, also in a cluster.
            notifier.submit(record)
        self.asked(record)
        logger.debug("elicitation %s asked: %d questions", record.id, len(form.fields))
        return record

    async def form(self, schema: Any, message: str) -> Form:
        """The form for ``schema`` (:class:`.FormCache`); a big one is converted in a worker thread,
        one at a time, and its questions encoded there too, so that the loop goes on serving everyone
        else meanwhile."""
        key = self.forms.key(schema)
        if key is None or len(key) <= CONVERT_ON_LOOP_BYTES:
            return self.forms.form(schema, message, key)
        async with self.converting:
            return await asyncio.to_thread(self._encoded_form, schema, message, key)

    def _encoded_form(self, schema: Any, message: str, key: str) -> Form:
        form = self.forms.form(schema, message, key)
        for question in form.questions:  # encoded once, here: its request's JSON is spliced of them
            question.shared()
        return form
