"""Notifications of new questions (``GATEWAY_NOTIFY``), sent through Apprise off the request path.

Each URL of ``GATEWAY_NOTIFY`` is a target of its own, with its own queue, worker task, retries and
metrics: a slow, failing or hostile target never delays, starves or repeats another's notifications.
:meth:`Notifier.submit` only queues, so asking never waits on a notifier.

Apprise's plugins send with blocking calls (``requests``, ``smtplib``). Each attempt runs in a worker
process (:mod:`elicitation_gateway.notify_workers`), never in the gateway's own threads, and ends at
``GATEWAY_NOTIFY_TIMEOUT``: a worker still sending then is killed, which ends whatever it was blocked
on (a read that a target drips out a byte at a time, a name lookup, a plugin stuck elsewhere), and is
replaced. The pool has a worker for each target, and a target sends one notification at a time, so a
target never waits for another's worker. Before each attempt the question is looked up: one already
finished is not announced late.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from elicitation_gateway import links
from elicitation_gateway.display import safe
from elicitation_gateway.encoding import to_utf8
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.notify_workers import Pool, WorkerFailed, load_plugin
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings

logger = logging.getLogger(__name__)

QUEUE_SIZE = 1000  # notifications waiting, per target
TITLE_LENGTH = 80
BACKOFF = 0.5  # seconds before the first retry, doubled after each
OUTCOMES = ("sent", "failed", "skipped", "dropped")


def _shorten(text: str, length: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= length else text[: length - 1].rstrip() + "…"


def _valid_text(text: str) -> str:
    """``text`` as valid UTF-8 (a lone surrogate becomes U+FFFD), whatever a store holds: a plugin
    would otherwise fail to encode it on every attempt."""
    return to_utf8(text).decode("utf-8")


def compose(
    record: Record,
    public_url: str | None,
    *,
    reminder: bool = False,
    escalated_after: float | None = None,
    person: str | None = None,
    link_secret: bytes | None = None,
) -> tuple[str, str]:
    """The title and body of the notification of ``record``: the message, each question's header, and
    a link that opens the question on the page. Only what the page shows anyone; no credentials.
    A ``reminder`` says how long the question has left; a notification ``escalated_after`` so many
    seconds says nobody answered in that time (it reaches its person after others'). Tool text is
    made safe to show (:func:`~elicitation_gateway.display.safe`): a notification may end up in a
    terminal too.

    Composed for one ``person`` (with the ``link_secret``), a question with a single boolean or
    single-choice property carries one one-tap link per choice, signed for that person
    (:func:`.links.choices_for`), before the page's link."""
    questions = record.request.questions
    first_line = next((line for line in record.message.splitlines() if line.strip()), "")
    title = f"Question: {questions[0].header}" if questions else first_line or "Question"
    lines = [record.message.strip()] if record.message.strip() else []
    if record.asker:
        lines.insert(0, f"Asked by {safe(record.asker, oneline=True)}")
    if reminder:
        title = "Reminder: " + title.removeprefix("Question: ")
        outcome = "its defaults are sent" if record.on_timeout == "default" else "it is cancelled"
        lines.insert(0, f"Still unanswered: {outcome} in {time_left(record.expires_at - time.time())}.")
    elif escalated_after is not None:
        title = "Escalated: " + title.removeprefix("Question: ")
        lines.insert(0, f"Nobody answered in {time_left(escalated_after)}: it now reaches you too.")
    lines += [f"- {question.header}" for question in questions]
    if public_url:
        one_tap = []
        if person is not None and link_secret is not None:
            one_tap = links.choices_for(record, person, public_url, link_secret)
        lines.append("")
        lines += [f"{label}: {url}" for label, url in one_tap]
        lines.append(f"{'Or open it' if one_tap else 'Answer'}: {links.page_url(public_url, record.id)}")
    title = _shorten(safe(title, oneline=True), TITLE_LENGTH)
    return _valid_text(title), _valid_text(safe("\n".join(lines)))


def time_left(seconds: float) -> str:
    """``seconds`` as a person reads a deadline, to the nearest unit: seconds under two minutes (a
    reminder 20 s before expiry says 20 s, not a minute), whole minutes above."""
    if seconds < 119.5:
        return f"{max(1, round(seconds))} s"
    return f"{round(seconds / 60)} min"


def worst_case_seconds(timeout: float, retries: int) -> float:
    """The longest one notification can take one target, from the start of its first attempt: every
    attempt cut off at ``timeout``, with the backoff between them."""
    return (retries + 1) * timeout + BACKOFF * (2**retries - 1)


# ---------------------------------------------------------------------------------------------------
# Targets: one URL each, named without its secrets


def target_label(position: int, plugin: Any, url: str) -> str:
    """``position:scheme`` (``2:json``): the scheme is one of the plugin's own protocol names, never
    text of the URL's, which may hold a token anywhere (``https://discord.com/api/webhooks/…`` is
    ``discord``)."""
    names: list[str] = []
    for protocols in (plugin.protocol, plugin.secure_protocol):
        if isinstance(protocols, str):
            names.append(protocols)
        elif isinstance(protocols, list | tuple):
            names += [name for name in protocols if isinstance(name, str)]
    typed = url.split("://", 1)[0].lower() if "://" in url else ""
    scheme = typed if typed in names else (names[0] if names else "unknown")
    return f"{position}:{scheme}"


def unusable_urls(urls: list[str], timeout: float) -> list[int]:
    """The positions (from 1) of the URLs Apprise cannot parse: the service refuses to start with any,
    naming them by position only (a URL may hold a token)."""
    return [position for position, url in enumerate(urls, 1) if load_plugin(url, timeout) is None]


# ---------------------------------------------------------------------------------------------------
# The notifier


@dataclass(frozen=True)
class Notification:
    record: Record
    reminder: bool = False
    escalated_after: float | None = None
    """Seconds after the ask, for a person an escalation step reached."""


class _Skipped(Exception):
    """The question was finished before an attempt: nothing to announce."""


class Target:
    """One URL of ``GATEWAY_NOTIFY``: its queue, its worker task, its retries, its counts. Its attempts
    borrow a worker process from the notifier's pool."""

    def __init__(
        self,
        label: str,
        url: str,
        pool: Pool,
        settings: Settings,
        metrics: Metrics,
        still_pending: Callable[[str], Awaitable[bool]],
        sent: Callable[[str, str], None] | None = None,
        *,
        person: str | None = None,
        link_secret: bytes | None = None,
    ) -> None:
        """A ``person``'s target (with the ``link_secret``) composes each notification for them: one
        one-tap link per choice where the question allows."""
        self.label = label
        self._sent = sent
        self._person = person
        self._link_secret = link_secret
        self._url = url
        self._pool = pool
        self._settings = settings
        self._metrics = metrics
        self._still_pending = still_pending
        self.queue: asyncio.Queue[Notification] = asyncio.Queue(QUEUE_SIZE)
        self.unsent = 0  # queued or being sent
        self._worker: asyncio.Task[None] | None = None
        for outcome in OUTCOMES:  # every series from the start, at 0
            metrics.notifications.labels(target=label, outcome=outcome)

    def start(self) -> None:
        self._worker = asyncio.get_running_loop().create_task(
            self._run(), name=f"notifications to {self.label}"
        )

    def put(self, notification: Notification) -> None:
        """Queue ``notification``; never blocks: a full queue drops it (logged, counted)."""
        try:
            self.queue.put_nowait(notification)
            self.unsent += 1
        except asyncio.QueueFull:
            logger.warning(
                "notification of %s to target %s dropped: %d are already queued for it",
                notification.record.id,
                self.label,
                QUEUE_SIZE,
            )
            self._count("dropped")

    async def stop(self) -> None:
        """Stop the worker task and kill what it was sending; what is left unsent is dropped (counted)."""
        if self.unsent:
            logger.warning("%d notifications to target %s dropped at shutdown", self.unsent, self.label)
            self._count("dropped", self.unsent)
            self.unsent = 0
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None

    def _count(self, outcome: str, amount: int = 1) -> None:
        self._metrics.notifications.labels(target=self.label, outcome=outcome).inc(amount)

    async def _run(self) -> None:
        while True:
            notification = await self.queue.get()
            try:
                outcome = await self._deliver(notification)
            except Exception:  # a worker that stops would end every later notification of its target
                logger.exception("notification of %s to target %s failed", notification.record.id, self.label)
                outcome = "failed"
            self.unsent -= 1
            self.queue.task_done()
            self._count(outcome)
            if outcome == "sent" and self._sent is not None:
                self._sent(notification.record.id, self.label)

    async def _deliver(self, notification: Notification) -> str:
        """Each attempt, then the backoff before the next: the outcome."""
        record = notification.record
        title, body = compose(
            record,
            self._settings.public_url,
            reminder=notification.reminder,
            escalated_after=notification.escalated_after,
            person=self._person,
            link_secret=self._link_secret,
        )
        attempts = self._settings.notify_retries + 1
        problem = ""
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(BACKOFF * 2 ** (attempt - 1))
            try:
                problem = await self._attempt(record.id, title, body)
            except _Skipped:
                logger.debug("notification of %s to target %s: already finished", record.id, self.label)
                return "skipped"
            if not problem:
                logger.debug("notification of %s sent to target %s", record.id, self.label)
                return "sent"
            logger.info(
                "notification of %s to target %s, attempt %d of %d: %s",
                record.id,
                self.label,
                attempt + 1,
                attempts,
                problem,
            )
        logger.warning(
            "notification of %s to target %s failed after %d attempts: %s",
            record.id,
            self.label,
            attempts,
            problem,
        )
        return "failed"

    async def _attempt(self, request_id: str, title: str, body: str) -> str:
        """One attempt in a worker process, the look-up of the question included, ended at
        ``notify_timeout``: what went wrong, or "" once the target took it. A worker still sending at
        the deadline (or when the notifier stops) is killed and replaced. Starting a worker, when none
        is idle, comes before the deadline starts: it is the gateway's own time, not the target's."""
        timeout = self._settings.notify_timeout
        try:
            worker = await self._pool.borrow()
        except WorkerFailed as error:
            return str(error)
        pending, sending, delivered, error_type = True, False, False, None
        try:
            async with asyncio.timeout(timeout):
                pending = await self._pending(request_id)
                if pending:
                    sending = True
                    delivered, error_type = await worker.send(self._url, timeout, title, body)
        except TimeoutError:
            if sending:
                await self._pool.discard(worker)
            else:  # the look-up took the time: the worker never started on it
                self._pool.give_back(worker)
            return f"no answer within {timeout:g} s"
        except WorkerFailed as error:
            await self._pool.discard(worker)
            return str(error)
        except BaseException:  # the notifier stops: what the worker is sending ends with it
            await self._pool.discard(worker, replace=False)
            raise
        self._pool.give_back(worker)
        if not pending:
            raise _Skipped
        if error_type is not None:
            return f"the plugin failed: {error_type}"
        return "" if delivered else "not delivered (Apprise's log says why)"

    async def _pending(self, request_id: str) -> bool:
        """Whether ``request_id`` still waits for an answer; when the store cannot say, it does (better
        told twice than not at all)."""
        try:
            return await self._still_pending(request_id)
        except Exception as error:
            logger.debug("notification of %s: could not look it up: %r", request_id, error)
            return True


async def stop_targets(targets: Sequence[Target], pool: Pool, *, flush: bool, flush_seconds: float) -> None:
    """Stop ``targets``, then their ``pool``. With ``flush``, what is queued is sent first, for up to
    ``flush_seconds``; sends still running then are killed with their workers."""
    if flush and any(target.unsent for target in targets):
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(flush_seconds):
                await asyncio.gather(*(target.queue.join() for target in targets))
    for target in targets:
        await target.stop()
    await pool.close()


class Notifier:
    """``still_pending`` says whether a question is still unanswered, checked before every attempt
    (another replica, or an answerer on it, may have finished it)."""

    def __init__(
        self,
        settings: Settings,
        metrics: Metrics,
        still_pending: Callable[[str], Awaitable[bool]],
        *,
        worker_imports: tuple[str, ...] = (),
        sent: Callable[[str, str], None] | None = None,
    ) -> None:
        """``worker_imports``: modules each worker process imports before its first attempt (Apprise
        plugins of one's own, registered on import); ``sent`` is told of each notification a target
        took (the question's id, the target's label), for the audit trail."""
        self.settings = settings
        self.metrics = metrics
        self.link_secret = links.secret_of(settings.link_secret)
        """What one-tap links in a notification composed for one person are signed with."""
        self._reminders: dict[str, asyncio.TimerHandle] = {}
        self.targets: list[Target] = []
        urls: list[tuple[str, str]] = []
        for position, url in enumerate(settings.notify, 1):
            plugin = load_plugin(url, settings.notify_timeout)
            if plugin is None:
                # The URL itself may hold a token: say which one by position only.
                logger.error(
                    "GATEWAY_NOTIFY URL number %d is not one Apprise understands: nothing is sent to it",
                    position,
                )
                continue
            urls.append((target_label(position, plugin, url), url))
        # One worker for each target: a target sends one at a time, so none waits for another's.
        timeout = settings.notify_timeout
        self.pool = Pool(len(urls), [(url, timeout) for _, url in urls], worker_imports)
        for label, url in urls:
            self.targets.append(Target(label, url, self.pool, settings, metrics, still_pending, sent))
        if self.targets and not settings.public_url:
            logger.warning(
                "notifications carry no link to the question: set GATEWAY_PUBLIC_URL to the address "
                "people open the gateway at"
            )

    def start(self) -> None:
        for target in self.targets:
            target.start()

    async def stop(self, *, flush: bool = False) -> None:
        """Stop sending. With ``flush``, what is queued is sent first, for up to ``notify_timeout``
        seconds: the questions of a durable or shared store outlive this process. Sends still running
        then are killed, with their workers; the idle workers are told to exit; every one is reaped."""
        for handle in self._reminders.values():
            handle.cancel()
        self._reminders.clear()
        await stop_targets(self.targets, self.pool, flush=flush, flush_seconds=self.settings.notify_timeout)

    def submit(self, record: Record) -> None:
        """Queue ``record``'s notification for every target; never blocks."""
        self._put(Notification(record))
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
        self._put(Notification(record, reminder=True))

    def _put(self, notification: Notification) -> None:
        for target in self.targets:
            target.put(notification)
