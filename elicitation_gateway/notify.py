"""Notifications of new questions (``GATEWAY_NOTIFY``), sent through Apprise off the request path.

:meth:`Notifier.submit` only queues the record: asking never waits on a notifier. One worker task sends
each notification, every attempt bounded by ``GATEWAY_NOTIFY_TIMEOUT``, retried up to
``GATEWAY_NOTIFY_RETRIES`` times; what still fails is logged and counted, never a failed ask. With
``GATEWAY_NOTIFY_REMIND`` a question still unanswered that long before it expires is notified again.
"""

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from elicitation_gateway.metrics import Metrics
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores.base import Record

logger = logging.getLogger(__name__)

QUEUE_SIZE = 1000
TITLE_LENGTH = 80
BACKOFF = 0.5  # seconds before the first retry, doubled after each


def _shorten(text: str, length: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= length else text[: length - 1].rstrip() + "…"


def compose(record: Record, public_url: str | None, *, reminder: bool = False) -> tuple[str, str]:
    """The title and body of the notification of ``record``: the message, each question's header, and
    a link that opens the question on the page. Only what the page shows anyone; no credentials.
    A ``reminder`` says how long the question has left."""
    questions = record.request.questions
    first_line = next((line for line in record.message.splitlines() if line.strip()), "")
    title = f"Question: {questions[0].header}" if questions else first_line or "Question"
    lines = [record.message.strip()] if record.message.strip() else []
    if reminder:
        title = "Reminder: " + title.removeprefix("Question: ")
        minutes = max(1, math.ceil((record.expires_at - time.time()) / 60))
        outcome = "its defaults are sent" if record.on_timeout == "default" else "it is cancelled"
        lines.insert(0, f"Still unanswered: {outcome} in {minutes} min.")
    lines += [f"- {question.header}" for question in questions]
    if public_url:
        lines += ["", f"Answer: {public_url}/?question={record.id}"]
    return _shorten(title, TITLE_LENGTH), "\n".join(lines)


@dataclass(frozen=True)
class _Notification:
    record: Record
    reminder: bool = False


class Notifier:
    """``still_pending`` says whether a question is still unanswered, checked before a reminder is sent
    (another replica, or an answerer on it, may have finished it)."""

    def __init__(
        self, settings: Settings, metrics: Metrics, still_pending: Callable[[str], Awaitable[bool]]
    ) -> None:
        import apprise  # only a gateway that notifies needs it (elicitation-gateway[notify])

        self.settings = settings
        self.metrics = metrics
        self._still_pending = still_pending
        self._reminders: dict[str, asyncio.TimerHandle] = {}
        self._apprise = apprise.Apprise()
        for number, url in enumerate(settings.notify, 1):
            if not self._apprise.add(url):
                # The URL itself may hold a token: say which one by position only.
                logger.error("GATEWAY_NOTIFY URL number %d is not one Apprise understands; skipped", number)
        self._queue: asyncio.Queue[_Notification] = asyncio.Queue(QUEUE_SIZE)
        self._worker: asyncio.Task[None] | None = None
        self._unsent = 0  # queued or being sent

    def start(self) -> None:
        self._worker = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, *, flush: bool = False) -> None:
        """Stop sending. With ``flush``, what is queued is sent first, for up to ``notify_timeout``
        seconds: the questions of a durable or shared store outlive this process."""
        for handle in self._reminders.values():
            handle.cancel()
        self._reminders.clear()
        if self._worker is None:
            return
        if flush and self._unsent:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.notify_timeout):
                    await self._queue.join()
        if self._unsent:
            logger.warning("%d notifications dropped at shutdown", self._unsent)
        self._worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._worker
        self._worker = None

    def submit(self, record: Record) -> None:
        """Queue ``record``'s notification; never blocks: a full queue drops it (logged, counted)."""
        self._put(_Notification(record))
        remind = self.settings.notify_remind
        delay = record.expires_at - remind - time.time()
        if remind and delay > 0:
            loop = asyncio.get_running_loop()
            self._reminders[record.id] = loop.call_later(delay, self._remind, record)

    def forget(self, request_id: str) -> None:
        """``request_id`` is finished: no reminder."""
        if (handle := self._reminders.pop(request_id, None)) is not None:
            handle.cancel()

    def _remind(self, record: Record) -> None:
        self._reminders.pop(record.id, None)
        self._put(_Notification(record, reminder=True))

    def _put(self, notification: _Notification) -> None:
        try:
            self._queue.put_nowait(notification)
            self._unsent += 1
        except asyncio.QueueFull:
            request_id = notification.record.id
            logger.warning("notification of %s dropped: %d are already queued", request_id, QUEUE_SIZE)
            self.metrics.notifications_failed.inc()

    async def _run(self) -> None:
        while True:
            notification = await self._queue.get()
            try:
                if not notification.reminder or await self._still_pending(notification.record.id):
                    await self._send(notification)
            except Exception:  # a worker that stops would end every later notification
                logger.exception("notification of %s failed", notification.record.id)
                self.metrics.notifications_failed.inc()
            finally:
                self._unsent -= 1
                self._queue.task_done()

    async def _send(self, notification: _Notification) -> None:
        record = notification.record
        title, body = compose(record, self.settings.public_url, reminder=notification.reminder)
        timeout = self.settings.notify_timeout
        attempts = self.settings.notify_retries + 1
        problem = ""
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(BACKOFF * 2 ** (attempt - 1))
            try:
                async with asyncio.timeout(timeout):
                    result: Any = await self._apprise.async_notify(body=body, title=title, timeout=timeout)
                if result:
                    self.metrics.notifications_sent.inc()
                    logger.debug("notification of %s sent", record.id)
                    return
                problem = "not delivered"
            except TimeoutError:
                problem = f"no answer within {timeout:g} s"
            logger.info("notification of %s, attempt %d of %d: %s", record.id, attempt + 1, attempts, problem)
        logger.warning("notification of %s failed after %d attempts: %s", record.id, attempts, problem)
        self.metrics.notifications_failed.inc()
