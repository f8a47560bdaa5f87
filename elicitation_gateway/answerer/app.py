"""The terminal answerer: follows a gateway's events and shows its pending requests, oldest first.

Requests are kept by id (ids sort in creation order); the screen shows the oldest with its own
:class:`~.draft.Draft`, so answers typed into one request survive while another comes and
goes. A request leaves when it is answered or rejected, here or anywhere else. With a directory, only
that directory's requests (and those that name none) come, and a line under the status says so.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import httpx
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from elicitation_gateway.answerer.connection import (
    AnswererClient,
    Backoff,
    EventStream,
    Gone,
    Refused,
    describe_error,
)
from elicitation_gateway.answerer.draft import Draft
from elicitation_gateway.answerer.widgets import DeclineRequested, RequestView, SendRequested
from elicitation_gateway.display import safe

KEYS = (
    ("←→/Tab", "question"),
    ("↑↓/1–9", "option"),
    ("Enter", "choose"),
    ("Esc", "dismiss"),
    ("^D", "decline"),
    ("^Q", "quit"),
)


class AnswerApp(App[None]):
    """Answer a gateway's questions from the terminal."""

    TITLE = "Elicitation Gateway"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { layout: vertical; }
    #status { height: 1; padding: 0 1; background: $panel; }
    #status.down { background: $error 40%; }
    #directory { height: 1; padding: 0 1; background: $panel; color: $text-muted; }
    #body { height: 1fr; padding: 1 1 0 1; }
    #idle { color: $text-muted; padding: 1 0; }
    #asker { width: auto; margin: 0 0 1 0; background: $accent-muted; color: $text-accent; }
    #message { padding: 0 0 1 0; text-style: bold; }
    #request Tabs { margin: 0 0 1 0; }
    .question-text { padding: 0 0 0 0; }
    .question-warning { color: $text-warning; background: $warning-muted; padding: 0 1; margin: 0 0 1 0; }
    .question-needs { color: $text-muted; padding: 0 0 1 0; }
    .question-pane ChoiceList { height: auto; max-height: 100%; border: none; padding: 0; }
    .question-pane Input { margin: 0; }
    .issue { color: $error; padding: 1 0 0 0; }
    ConfirmPane { height: auto; }
    #keys { height: 1; padding: 0 1; color: $text-muted; background: $panel; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss_request", "Dismiss", show=False, priority=True),
        Binding("ctrl+d", "decline_request", "Decline", show=False, priority=True),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(
        self,
        url: str,
        auth: httpx.Auth | None = None,
        *,
        directory: str | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        super().__init__()
        self.client = AnswererClient(url, auth, directory=directory)
        self.stream = EventStream(self.client, backoff=backoff)
        self.drafts: dict[str, Draft] = {}
        self.shown_id: str | None = None
        self.connected = False
        self.status_reason = ""
        self._view_lock = asyncio.Lock()
        self._busy: set[str] = set()

    # ---------------------------------------------------------------------------------------------
    # Screen

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        directory = self.client.directory
        filtering = Static(self._directory_line(directory) if directory else "", id="directory")
        filtering.display = bool(directory)
        yield filtering
        in_directory = f" in {safe(directory, oneline=True)}" if directory else ""
        with Vertical(id="body"):
            idle = f"No questions waiting{in_directory}. They appear here as tools ask them."
            yield Static(Content(idle), id="idle")  # Content: a directory's name is text, not markup
        yield Static(self._keys(), id="keys")

    def on_mount(self) -> None:
        self._show_status()
        self.set_interval(15, self._show_status)  # the time left, kept current
        self.run_worker(self.stream.follow(self._on_event, self._on_status), name="events", group="events")

    async def on_unmount(self) -> None:
        await self.client.aclose()

    @property
    def pending_ids(self) -> list[str]:
        return sorted(self.drafts)

    @property
    def view(self) -> RequestView | None:
        found = self.query(RequestView)
        return found.first() if found else None

    async def _show_oldest(self) -> None:
        """Put the oldest pending request on screen, unless it is there already."""
        async with self._view_lock:
            pending = self.pending_ids
            oldest = pending[0] if pending else None
            self._show_status()
            bodies = self.query("#body")
            if oldest == self.shown_id or not bodies:  # shown already, or the app is closing
                return
            body = bodies.first(Vertical)
            if self.view is not None:
                await self.view.remove()
            self.shown_id = oldest
            self._show_status()
            idle = self.query("#idle")
            if not idle:  # the app closed meanwhile
                return
            idle.first().display = oldest is None
            if oldest is not None:
                await body.mount(RequestView(self.drafts[oldest]))

    def _show_status(self) -> None:
        found = self.query("#status")
        if not found:  # the app is closing
            return
        status = found.first(Static)
        url = safe(self.client.url, oneline=True)
        if self.connected:
            line = Content.assemble(("● ", "bold"), "connected to ", url)
        elif self.status_reason:
            reason = (f"({safe(self.status_reason, oneline=True)})", "dim")
            line = Content.assemble(("○ ", "bold"), "disconnected, reconnecting… ", reason)
        else:
            line = Content.assemble("○ connecting to ", url, "…")
        count = len(self.drafts)
        waiting = f"request 1 of {count}" if count else "nothing waiting"
        shown = self.drafts.get(self.shown_id) if self.shown_id is not None else None
        expiry = shown.form.expiry(time.time()) if shown is not None else ""
        status.update(Content.assemble(line, "  ·  ", waiting, *(("  ·  ", expiry) if expiry else ())))
        status.set_class(not self.connected and bool(self.status_reason), "down")

    @staticmethod
    def _directory_line(directory: str) -> Content:
        shown = safe(directory, oneline=True)
        return Content.assemble("only directory ", (shown, "bold"), " (and questions that name none)")

    @staticmethod
    def _keys() -> Content:
        parts: list[Content] = [Content.assemble((key, "bold"), " ", what) for key, what in KEYS]
        return Content("  ").join(parts)

    # ---------------------------------------------------------------------------------------------
    # Events from the gateway

    async def _on_status(self, connected: bool, reason: str) -> None:
        self.connected = connected
        self.status_reason = reason
        self._show_status()

    async def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        properties = event.get("properties") or {}
        if kind == "server.connected":
            await self._drop_finished()
        elif kind == "question.asked":
            await self._add(str(properties.get("id")))
        elif kind in ("question.replied", "question.rejected"):
            request_id = str(properties.get("requestID"))
            self._say_who_finished(request_id, properties.get("answeredBy"), kind == "question.replied")
            await self._forget(request_id)

    def _say_who_finished(self, request_id: str, by: object, answered: bool) -> None:
        """A request on this screen was answered or declined by a person elsewhere: say who (not for an
        answer of this answerer's own, still in flight)."""
        draft = self.drafts.get(request_id)
        if draft is None or not isinstance(by, str) or request_id in self._busy:
            return
        what = "Answered" if answered else "Declined or dismissed"
        headline = draft.form.message.splitlines()[0] if draft.form.message else request_id
        self.notify(safe(f"{what} by {by}: {headline[:80]}", oneline=True), markup=False)

    async def _add(self, request_id: str) -> None:
        if request_id in self.drafts:
            return  # announced again after a reconnect: keep what was typed
        form = await self.client.form(request_id)
        if form is not None:
            self.drafts[request_id] = Draft(form)
            await self._show_oldest()

    async def _forget(self, request_id: str) -> None:
        if self.drafts.pop(request_id, None) is not None:
            await self._show_oldest()

    async def _drop_finished(self) -> None:
        """After a reconnect, requests finished meanwhile (or lost in a restart) are dropped."""
        if not self.drafts:
            return
        known = set(self.drafts)
        still_pending = await self.client.pending_ids()
        for request_id in known - still_pending:
            await self._forget(request_id)

    # ---------------------------------------------------------------------------------------------
    # Answering

    def on_send_requested(self, event: SendRequested) -> None:
        event.stop()
        if self.shown_id is not None:
            self._start(self.shown_id, self._send)

    def on_decline_requested(self, event: DeclineRequested) -> None:
        event.stop()
        self.action_decline_request()

    def action_dismiss_request(self) -> None:
        if self.shown_id is not None:
            self._start(self.shown_id, self._reject)

    def action_decline_request(self) -> None:
        if self.shown_id is not None:
            self._start(self.shown_id, self._decline)

    def _start(self, request_id: str, action: Callable[[str], Awaitable[None]]) -> None:
        """One call at a time per request, so a double Enter sends once."""
        if request_id in self._busy:
            return
        self._busy.add(request_id)

        async def run() -> None:
            try:
                await action(request_id)
            finally:
                self._busy.discard(request_id)

        self.run_worker(run(), group="answers")

    async def _send(self, request_id: str) -> None:
        draft = self.drafts.get(request_id)
        if draft is None:
            return
        try:
            await self.client.reply(request_id, draft.answers())
        except Refused as refused:
            draft.refused(refused.message, refused.issues)
            if self.view is not None and self.view.draft is draft:
                self.view.show_refusal()
            return
        except (Gone, httpx.HTTPError) as error:
            await self._failed(request_id, "send the answers", error)
            return
        await self._forget(request_id)

    async def _reject(self, request_id: str) -> None:
        await self._finish_with_reject(request_id, decline=False)

    async def _decline(self, request_id: str) -> None:
        await self._finish_with_reject(request_id, decline=True)

    async def _finish_with_reject(self, request_id: str, *, decline: bool) -> None:
        try:
            await self.client.reject(request_id, decline=decline)
        except (Gone, httpx.HTTPError) as error:
            await self._failed(request_id, "decline" if decline else "dismiss", error)
            return
        await self._forget(request_id)

    async def _failed(self, request_id: str, what: str, error: Exception) -> None:
        if isinstance(error, Gone):
            self.notify("That request was already answered elsewhere.", severity="warning")
            await self._forget(request_id)
            return
        self.notify(safe(f"Could not {what}: {describe_error(error)}"), severity="error")
