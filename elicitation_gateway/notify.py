"""Notifications of new questions (``GATEWAY_NOTIFY``), sent through Apprise off the request path.

Each URL of ``GATEWAY_NOTIFY`` is a target of its own, with its own queue, worker task, threads,
retries and metrics: a slow, failing or hostile target never delays, starves or repeats another's
notifications. :meth:`Notifier.submit` only queues, so asking never waits on a notifier.

Apprise's plugins send with blocking calls (``requests``, ``smtplib``). Each attempt runs one in a
thread of its target's own, never on the event loop's default executor (which everything else shares),
and ends at ``GATEWAY_NOTIFY_TIMEOUT``: the notifier stops waiting and shuts the attempt's sockets
down, which also ends a read that a target drips out a byte at a time (a socket timeout restarts with
every byte). What a shut socket cannot end (a name lookup, a plugin blocked elsewhere) keeps its
thread; a target has at most :data:`THREADS_PER_TARGET`, and an attempt that finds them all held fails
at once. Before each attempt the question is looked up: one already finished is not announced late.
"""

import asyncio
import contextlib
import logging
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from elicitation_gateway.display import safe
from elicitation_gateway.encoding import to_utf8
from elicitation_gateway.metrics import Metrics
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings

logger = logging.getLogger(__name__)

QUEUE_SIZE = 1000  # notifications waiting, per target
TITLE_LENGTH = 80
BACKOFF = 0.5  # seconds before the first retry, doubled after each
THREADS_PER_TARGET = 4  # sends running at once for one target, those held past their deadline included
CUT_GRACE = 1.0  # seconds a stopping notifier waits for the threads of sends it cut off
OUTCOMES = ("sent", "failed", "skipped", "dropped")


def _shorten(text: str, length: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= length else text[: length - 1].rstrip() + "…"


def _valid_text(text: str) -> str:
    """``text`` as valid UTF-8 (a lone surrogate becomes U+FFFD), whatever a store holds: a plugin
    would otherwise fail to encode it on every attempt."""
    return to_utf8(text).decode("utf-8")


def compose(record: Record, public_url: str | None, *, reminder: bool = False) -> tuple[str, str]:
    """The title and body of the notification of ``record``: the message, each question's header, and
    a link that opens the question on the page. Only what the page shows anyone; no credentials.
    A ``reminder`` says how long the question has left. Tool text is made safe to show
    (:func:`~elicitation_gateway.display.safe`): a notification may end up in a terminal too."""
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
    lines += [f"- {question.header}" for question in questions]
    if public_url:
        lines += ["", f"Answer: {public_url}/?question={record.id}"]
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


class _ThisThreadOnly(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread


@contextlib.contextmanager
def _apprise_quiet() -> Iterator[None]:
    """Apprise's own lines while it parses a URL: they may quote the URL, token and all
    (``Unsupported URL: <the whole value>``). The gateway says which URL failed by position instead."""
    apprise_logger = logging.getLogger("apprise")
    quiet = _ThisThreadOnly()
    apprise_logger.addFilter(quiet)
    try:
        yield
    finally:
        apprise_logger.removeFilter(quiet)


def load_plugin(url: str, timeout: float) -> Any | None:
    """The Apprise plugin of ``url`` with its connect and read timeouts (``cto``, ``rto``) set to
    ``timeout`` where the URL does not set them (Apprise's own are 4 s); None if Apprise cannot parse
    it."""
    import apprise  # only a gateway that notifies needs it (elicitation-gateway[notify])
    from apprise.plugins import url_to_dict

    with _apprise_quiet():
        try:
            parsed = url_to_dict(url)
            if not parsed:
                return None
            parsed.setdefault("cto", timeout)
            parsed.setdefault("rto", timeout)
            plugin = apprise.Apprise.instantiate(parsed)
        except Exception:  # a plugin that cannot take this URL
            return None
    return plugin if isinstance(plugin, apprise.NotifyBase) else None


def unusable_urls(urls: list[str], timeout: float) -> list[int]:
    """The positions (from 1) of the URLs Apprise cannot parse: the service refuses to start with any,
    naming them by position only (a URL may hold a token)."""
    return [position for position, url in enumerate(urls, 1) if load_plugin(url, timeout) is None]


# ---------------------------------------------------------------------------------------------------
# Sends: one attempt in a thread of its own, whose sockets can be shut from the loop


_sending = threading.local()
"""``sockets``: the list a send thread gathers the sockets it creates in (the audit hook fills it)."""
_watching = False
_watch_lock = threading.Lock()


def _note_socket(event: str, args: tuple[Any, ...]) -> None:
    """An audit hook: each socket a send thread creates, so that its send can be cut off. It runs on
    every audited event of the process, so it does one comparison for the others, and never raises."""
    if event == "socket.__new__":
        sockets = getattr(_sending, "sockets", None)
        if sockets is not None:
            sockets.append(args[0])


def _watch_sockets() -> None:
    """Install :func:`_note_socket`, once per process (an audit hook cannot be removed)."""
    global _watching
    with _watch_lock:
        if not _watching:
            sys.addaudithook(_note_socket)
            _watching = True


class _Send:
    """One call of a plugin's blocking ``notify``, in a daemon thread of its own (a thread that cannot
    be interrupted must never hold the process at exit); :meth:`cut` ends its network I/O."""

    def __init__(self, call: Callable[[], bool], name: str) -> None:
        self._call = call
        self._loop = asyncio.get_running_loop()
        self.finished = self._loop.create_future()
        self.running = True
        self.delivered = False
        self.error: BaseException | None = None
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        _sending.sockets = self._sockets
        try:
            self.delivered = bool(self._call())
        except Exception as error:  # a plugin's bug is a failed attempt
            self.error = error
        finally:
            _sending.sockets = None
            self.running = False
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
                self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        if not self.finished.done():
            self.finished.set_result(None)

    @property
    def alive(self) -> bool:
        """Whether its thread still runs (a little longer than the call itself)."""
        return self._thread.is_alive()

    def cut(self) -> None:
        """Shut down every socket the send opened that is still open: a blocked read or write in its
        thread ends at once with an error, and the plugin gives up."""
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):  # closed meanwhile, or detached into a TLS socket
                if sock.fileno() != -1:
                    sock.shutdown(socket.SHUT_RDWR)


# ---------------------------------------------------------------------------------------------------
# The notifier


@dataclass(frozen=True)
class _Notification:
    record: Record
    reminder: bool = False


class _Skipped(Exception):
    """The question was finished before an attempt: nothing to announce."""


class _Target:
    """One URL of ``GATEWAY_NOTIFY``: its queue, its worker, its threads, its retries, its counts."""

    def __init__(
        self,
        label: str,
        plugin: Any,
        settings: Settings,
        metrics: Metrics,
        still_pending: Callable[[str], Awaitable[bool]],
    ) -> None:
        self.label = label
        self._plugin = plugin
        self._settings = settings
        self._metrics = metrics
        self._still_pending = still_pending
        self.queue: asyncio.Queue[_Notification] = asyncio.Queue(QUEUE_SIZE)
        self.unsent = 0  # queued or being sent
        self.sends: set[_Send] = set()  # running in their threads, or held past their deadline
        self._worker: asyncio.Task[None] | None = None
        for outcome in OUTCOMES:  # every series from the start, at 0
            metrics.notifications.labels(target=label, outcome=outcome)
        metrics.notification_threads.labels(target=label).set_function(self.threads)

    def threads(self) -> int:
        self.sends = {send for send in self.sends if send.alive}
        return len(self.sends)

    def start(self) -> None:
        self._worker = asyncio.get_running_loop().create_task(
            self._run(), name=f"notifications to {self.label}"
        )

    def put(self, notification: _Notification) -> None:
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
        """Stop the worker and cut what it was sending; what is left unsent is dropped (counted)."""
        if self.unsent:
            logger.warning("%d notifications to target %s dropped at shutdown", self.unsent, self.label)
            self._count("dropped", self.unsent)
            self.unsent = 0
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        for send in self.sends:
            send.cut()

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

    async def _deliver(self, notification: _Notification) -> str:
        """Each attempt, then the backoff before the next: the outcome."""
        record = notification.record
        title, body = compose(record, self._settings.public_url, reminder=notification.reminder)
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
        """One attempt, the look-up of the question included, ended at ``notify_timeout``: what went
        wrong, or "" once the target took it."""
        timeout = self._settings.notify_timeout
        send: _Send | None = None
        try:
            async with asyncio.timeout(timeout):
                if not await self._pending(request_id):
                    raise _Skipped
                if self.threads() >= THREADS_PER_TARGET:
                    return (
                        f"all {THREADS_PER_TARGET} of its threads are still held by sends that "
                        "passed their deadline and could not be cut off; failing until one frees"
                    )
                send = _Send(lambda: self._plugin.notify(body=body, title=title), f"notify {self.label}")
                self.sends.add(send)
                await asyncio.shield(send.finished)
        except TimeoutError:
            return f"no answer within {timeout:g} s"
        finally:
            if send is not None and send.running:
                send.cut()  # past the deadline, or the notifier stops
        assert send is not None
        if send.error is not None:
            return f"the plugin failed: {type(send.error).__name__}"
        return "" if send.delivered else "not delivered (Apprise's log says why)"

    async def _pending(self, request_id: str) -> bool:
        """Whether ``request_id`` still waits for an answer; when the store cannot say, it does (better
        told twice than not at all)."""
        try:
            return await self._still_pending(request_id)
        except Exception as error:
            logger.debug("notification of %s: could not look it up: %r", request_id, error)
            return True


class Notifier:
    """``still_pending`` says whether a question is still unanswered, checked before every attempt
    (another replica, or an answerer on it, may have finished it)."""

    def __init__(
        self, settings: Settings, metrics: Metrics, still_pending: Callable[[str], Awaitable[bool]]
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self._reminders: dict[str, asyncio.TimerHandle] = {}
        self.targets: list[_Target] = []
        for position, url in enumerate(settings.notify, 1):
            plugin = load_plugin(url, settings.notify_timeout)
            if plugin is None:
                # The URL itself may hold a token: say which one by position only.
                logger.error(
                    "GATEWAY_NOTIFY URL number %d is not one Apprise understands: nothing is sent to it",
                    position,
                )
                continue
            label = target_label(position, plugin, url)
            self.targets.append(_Target(label, plugin, settings, metrics, still_pending))
        if self.targets:
            _watch_sockets()
            if not settings.public_url:
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
        then are cut off, and their threads waited for (a cut thread ends within milliseconds)."""
        for handle in self._reminders.values():
            handle.cancel()
        self._reminders.clear()
        timeout = self.settings.notify_timeout
        if flush and any(target.unsent for target in self.targets):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*(target.queue.join() for target in self.targets))
        for target in self.targets:
            await target.stop()
        loop = asyncio.get_running_loop()
        grace_ends = loop.time() + CUT_GRACE
        # A thread's end is no event the loop can await (it outlasts the call's ``finished``): polled.
        while any(target.threads() for target in self.targets) and loop.time() < grace_ends:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        if held := sum(target.threads() for target in self.targets):
            logger.warning(
                "%d notification threads could not be cut off and are left to end on their own", held
            )

    def submit(self, record: Record) -> None:
        """Queue ``record``'s notification for every target; never blocks."""
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
        for target in self.targets:
            target.put(notification)
