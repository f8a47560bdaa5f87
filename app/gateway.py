"""The service: asks elicitations, finishes them (reply, reject, withdraw, timeout, shutdown).

Routes call this; it calls the pure conversion (:mod:`app.schema`, :mod:`app.answers`) and the
:class:`~app.store.Store`. Nothing here knows HTTP.
"""

import asyncio
import logging
import posixpath
import time
from dataclasses import dataclass
from typing import Any

from app import ids
from app.answers import answers_to_content
from app.memory import MemoryStore
from app.models import QuestionRequest, QuestionTool
from app.schema import SOFT_QUESTION_LIMIT, build_form
from app.settings import Settings
from app.store import Record, Status, Store

logger = logging.getLogger("app.gateway")

ACCEPT, DECLINE, CANCEL = "accept", "decline", "cancel"


class NotFound(LookupError):
    """No pending (or, where it matters, no finished) record with this id."""


class AlreadyFinished(Exception):
    def __init__(self, record: Record) -> None:
        super().__init__(f"{record.id} is already {record.status}")
        self.record = record


class ShuttingDown(Exception):
    """The gateway is stopping and takes no new questions."""


@dataclass(frozen=True)
class AskOptions:
    session_id: str | None = None
    directory: str | None = None
    tool: QuestionTool | None = None
    timeout: float | None = None


def normalize_directory(directory: str | None) -> str | None:
    """Directories compare as paths: ``/a/b/`` and ``/a/b`` are the same project."""
    if not directory or not directory.strip():
        return None
    directory = directory.strip()
    return (
        posixpath.normpath(directory) if directory.startswith("/") else directory.rstrip("/\\") or directory
    )


def describe_form(record: Record) -> dict[str, Any]:
    """A pending request with what each question accepts: kind, limits, default, option values."""
    fields = []
    for field, question in zip(record.form.fields, record.request.questions, strict=True):
        described = field.model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude={"has_default", "default"}
        )
        if field.has_default:
            described["default"] = field.default
        if not field.options:
            described.pop("options", None)
        fields.append({**described, "header": question.header, "question": question.question})
    return {
        "id": record.id,
        "sessionID": record.request.sessionID,
        "message": record.message,
        "legacy": record.form.legacy,
        "expiresAt": record.expires_at,
        "fields": fields,
    }


class Gateway:
    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        self.settings = settings
        self.store = store or MemoryStore(
            history_size=settings.history_size,
            result_ttl=settings.result_ttl,
            subscriber_queue=settings.subscriber_queue,
        )
        self.default_directory = normalize_directory(settings.directory) or settings.directory
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False

    async def start(self) -> None:
        await self.store.start()

    async def shutdown(self) -> None:
        """Give every pending tool ``cancel`` (answerers see ``question.rejected``), then end streams."""
        if self._closing:
            return
        self._closing = True
        for record in await self.store.pending():
            await self._finish(record.id, "cancelled", {"action": CANCEL}, reason="shutdown")
        await self.store.close()
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    @property
    def closing(self) -> bool:
        return self._closing

    # ---------------------------------------------------------------------------------------------
    # Tool side

    async def ask(self, message: str, schema: Any, options: AskOptions = AskOptions()) -> Record:
        """Create a pending record; raises :class:`~app.schema.SchemaError` for a schema it cannot ask."""
        if self._closing:
            raise ShuttingDown("the gateway is shutting down")
        form = build_form(
            schema,
            message,
            header_length=self.settings.header_length,
            max_questions=self.settings.max_questions,
        )
        request = QuestionRequest(
            id=ids.question_id(),
            sessionID=options.session_id or self.settings.session_id,
            questions=list(form.questions),
            tool=options.tool,
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
        record = Record(
            request=request,
            form=form,
            message=message,
            directory=normalize_directory(options.directory),
            created_at=now,
            expires_at=now + timeout,
        )
        await self.store.add(record)
        loop = asyncio.get_running_loop()
        self._timers[record.id] = loop.call_later(timeout, self._spawn_expiry, record.id)
        logger.debug("elicitation %s asked: %d questions", record.id, len(form.fields))
        return record

    async def result(self, request_id: str, wait: float | None = None) -> Record:
        record = await self.store.get(request_id)
        if record is None:
            raise NotFound(request_id)
        if record.pending and wait:
            record = await self.store.wait(request_id, min(wait, self.settings.max_timeout)) or record
        return record

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

    async def pending_requests(self, directory: str | None = None) -> list[dict[str, Any]]:
        directory = normalize_directory(directory)
        return [
            record.request.wire()
            for record in await self.store.pending()
            if directory is None or record.directory is None or record.directory == directory
        ]

    async def pending_record(self, request_id: str) -> Record:
        record = await self.store.get(request_id)
        if record is None or not record.pending:
            raise NotFound(request_id)
        return record

    async def reply(self, request_id: str, answers: list[list[str]]) -> Record:
        """Accept with typed content; raises :class:`~app.answers.AnswerError` when answers do not fit."""
        record = await self.pending_record(request_id)
        content = answers_to_content(record.form, answers)
        result = {"action": ACCEPT, "content": content}
        finished = await self._finish(request_id, "answered", result, answers=answers, reason="answered")
        if finished is None:  # another answerer got there first
            raise NotFound(request_id)
        return finished

    async def reject(self, request_id: str, action: str = CANCEL) -> Record:
        status: Status = "declined" if action == DECLINE else "cancelled"
        finished = await self._finish(request_id, status, {"action": action}, reason="rejected")
        if finished is None:
            raise NotFound(request_id)
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
    ) -> Record | None:
        record = await self.store.finish(request_id, status, result, answers)
        if record is None:
            return None
        timer = self._timers.pop(request_id, None)
        if timer is not None:
            timer.cancel()
        logger.info(
            "elicitation %s %s (%s) after %.1f s",
            request_id,
            status,
            reason,
            (record.finished_at or record.created_at) - record.created_at,
        )
        return record

    def _spawn_expiry(self, request_id: str) -> None:
        self._timers.pop(request_id, None)
        task = asyncio.get_running_loop().create_task(
            self._finish(request_id, "expired", {"action": CANCEL}, reason="timed out")
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
