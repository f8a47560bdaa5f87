"""Talking to a running gateway as an answerer: its HTTP routes, and its event stream kept open.

The stream is followed by :meth:`EventStream.follow`, which never returns: when the connection drops
it says so, waits a little longer each time, and comes back with the id of the last question event it
saw (``Last-Event-ID``), so that the gateway replays what was missed.
"""

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import httpx
from httpx_sse import aconnect_sse

from elicitation_gateway.answerer.draft import RequestForm

EventHandler = Callable[[dict[str, Any]], Awaitable[None]]
StatusHandler = Callable[[bool, str], Awaitable[None]]

VIA = {"X-Gateway-Via": "terminal"}
"""Said on each reply and rejection: the audit trail records that they came from the terminal."""


class Refused(Exception):
    """The gateway refused a reply (400): the request stays open with these reasons."""

    def __init__(self, message: str, issues: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.message = message
        self.issues = issues


class Gone(Exception):
    """The request is no longer pending: answered, rejected or withdrawn elsewhere (404)."""


def basic_auth(username: str, password: str | None) -> httpx.BasicAuth | None:
    """HTTP Basic, as the OpenCode server asks for it, only when a password is set."""
    return httpx.BasicAuth(username, password) if password else None


def describe_error(error: BaseException) -> str:
    """A connection problem in a few words for the status line."""
    if isinstance(error, httpx.HTTPStatusError):
        return f"the gateway answered HTTP {error.response.status_code}"
    if isinstance(error, httpx.ConnectError):
        return "cannot connect"
    if isinstance(error, httpx.TimeoutException):
        return "no answer in time"
    if isinstance(error, httpx.RemoteProtocolError | httpx.ReadError):
        return "the connection was cut"
    return str(error) or type(error).__name__


class AnswererClient:
    """The answerer-side routes of one gateway, with its credentials.

    With a ``directory``, the list and the event stream carry ``?directory=``, so the gateway sends
    only that directory's questions and those that name none.
    """

    def __init__(self, url: str, auth: httpx.Auth | None = None, *, directory: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.directory = directory
        self.filter = {"directory": directory} if directory else {}
        self.http = httpx.AsyncClient(base_url=self.url, auth=auth, timeout=httpx.Timeout(10))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def pending_ids(self) -> set[str]:
        response = await self.http.get("/question", params=self.filter)
        response.raise_for_status()
        return {request["id"] for request in response.json()}

    async def form(self, request_id: str) -> RequestForm | None:
        """What each question of a pending request accepts; ``None`` once it is no longer pending."""
        response = await self.http.get(f"/question/{request_id}/form")
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return RequestForm.from_form(response.json())

    async def reply(self, request_id: str, answers: list[list[str]]) -> None:
        response = await self.http.post(
            f"/question/{request_id}/reply", json={"answers": answers}, headers=VIA
        )
        if response.status_code == 400:
            data = _json(response).get("data") or {}
            message = str(data.get("message") or "the gateway refused the answers")
            raise Refused(message, data.get("issues") or [])
        self._raise_for(response)

    async def reject(self, request_id: str, *, decline: bool = False) -> None:
        """Dismiss (the tool gets ``cancel``), or decline (an explicit no)."""
        body = {"json": {"action": "decline"}} if decline else {}
        response = await self.http.post(f"/question/{request_id}/reject", headers=VIA, **body)
        self._raise_for(response)

    @staticmethod
    def _raise_for(response: httpx.Response) -> None:
        if response.status_code == 404:
            raise Gone(str(_json(response).get("message") or "no longer pending"))
        response.raise_for_status()


@dataclass
class Backoff:
    """Waits between reconnects: ``first``, then doubling up to ``longest``; reset once connected."""

    first: float = 0.5
    longest: float = 10.0
    _next: float = field(default=0.0, init=False, repr=False)

    def reset(self) -> None:
        self._next = self.first

    def next_delay(self) -> float:
        delay = self._next or self.first
        self._next = min(delay * 2, self.longest)
        return delay


class EventStream:
    """``GET /event``, followed for as long as the app runs."""

    def __init__(self, client: AnswererClient, *, backoff: Backoff | None = None, stall: float = 60) -> None:
        self.client = client
        self.backoff = backoff or Backoff()
        self.stall = stall
        """Seconds without a byte (the gateway sends a heartbeat every 10 s) before reconnecting."""
        self.last_event_id: str | None = None

    async def follow(self, on_event: EventHandler, on_status: StatusHandler) -> NoReturn:
        self.backoff.reset()
        while True:
            try:
                await self._read(on_event, on_status)
                reason = "the gateway closed the stream"
            except (httpx.HTTPError, ValueError) as error:  # ValueError: a frame that is not JSON
                reason = describe_error(error)
            await on_status(False, reason)
            await asyncio.sleep(self.backoff.next_delay())

    async def _read(self, on_event: EventHandler, on_status: StatusHandler) -> None:
        headers = {"Last-Event-ID": self.last_event_id} if self.last_event_id else {}
        timeout = httpx.Timeout(10, read=self.stall)
        http, only = self.client.http, self.client.filter
        async with aconnect_sse(
            http, "GET", "/event", params=only, headers=headers, timeout=timeout
        ) as source:
            source.response.raise_for_status()
            async for sse in source.aiter_sse():
                event = json.loads(sse.data)
                if event.get("type") == "server.connected":
                    self.backoff.reset()
                    await on_status(True, "")
                await on_event(event)
                # Only question events carry an ``id:`` line; httpx-sse repeats the last one it saw.
                if sse.id:
                    self.last_event_id = sse.id


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
