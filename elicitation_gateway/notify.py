"""Notifications of new questions (``GATEWAY_NOTIFY``), sent through Apprise off the request path.

:meth:`Notifier.submit` only queues the record: asking never waits on a notifier. One worker task sends
each notification, every attempt bounded by ``GATEWAY_NOTIFY_TIMEOUT``, retried up to
``GATEWAY_NOTIFY_RETRIES`` times; what still fails is logged and counted, never a failed ask.
"""

import asyncio
import contextlib
import logging
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


def compose(record: Record, public_url: str | None) -> tuple[str, str]:
    """The title and body of the notification of ``record``: the message, each question's header, and
    a link that opens the question on the page. Only what the page shows anyone; no credentials."""
    questions = record.request.questions
    first_line = next((line for line in record.message.splitlines() if line.strip()), "")
    title = f"Question: {questions[0].header}" if questions else first_line or "Question"
    lines = [record.message.strip()] if record.message.strip() else []
    lines += [f"- {question.header}" for question in questions]
    if public_url:
        lines += ["", f"Answer: {public_url}/?question={record.id}"]
    return _shorten(title, TITLE_LENGTH), "\n".join(lines)


class Notifier:
    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        import apprise  # only a gateway that notifies needs it (elicitation-gateway[notify])

        self.settings = settings
        self.metrics = metrics
        self._apprise = apprise.Apprise()
        for number, url in enumerate(settings.notify, 1):
            if not self._apprise.add(url):
                # The URL itself may hold a token: say which one by position only.
                logger.error("GATEWAY_NOTIFY URL number %d is not one Apprise understands; skipped", number)
        self._queue: asyncio.Queue[Record] = asyncio.Queue(QUEUE_SIZE)
        self._worker: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._worker = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None

    def submit(self, record: Record) -> None:
        """Queue ``record``'s notification; never blocks: a full queue drops it (logged, counted)."""
        try:
            self._queue.put_nowait(record)
        except asyncio.QueueFull:
            logger.warning("notification of %s dropped: %d are already queued", record.id, QUEUE_SIZE)
            self.metrics.notifications_failed.inc()

    async def _run(self) -> None:
        while True:
            record = await self._queue.get()
            try:
                await self._send(record)
            except Exception:  # a worker that stops would end every later notification
                logger.exception("notification of %s failed", record.id)
                self.metrics.notifications_failed.inc()

    async def _send(self, record: Record) -> None:
        title, body = compose(record, self.settings.public_url)
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
