"""Answering: what answerers see and do. The pending questions listed (owed finishes made first, so
that nobody answers a question whose tool has stopped waiting), one past its expiry expired when it is
asked for, a reply turned into typed content, a rejection; a question someone else finished first is
not found, saying how it finished."""

import time
from collections.abc import Awaitable, Callable
from typing import Any

from elicitation_gateway.conversion.answers import answers_to_result
from elicitation_gateway.encoding import to_utf8
from elicitation_gateway.escalation import current_to, request_now
from elicitation_gateway.gateway.asking import normalize_directory
from elicitation_gateway.gateway.auditing import ANSWERER_VIAS
from elicitation_gateway.gateway.errors import NotFound
from elicitation_gateway.gateway.expiry import ACCEPT, CANCEL
from elicitation_gateway.people import Viewer
from elicitation_gateway.records import Record, Status
from elicitation_gateway.stores.base import Store

DECLINE = "decline"


class Answering:
    """``finish`` finishes a record (:meth:`.Finishing.finish`), ``expire_now`` expires one
    (:meth:`.Expiry.expire_now`), ``owed_first`` makes the owed finishes the store takes now
    (:meth:`.Owed.first`)."""

    def __init__(
        self,
        store: Store,
        *,
        finish: Callable[..., Awaitable[Record | None]],
        expire_now: Callable[[str], Awaitable[None]],
        owed_first: Callable[[], Awaitable[None]],
    ) -> None:
        self.store = store
        self.finish = finish
        self.expire_now = expire_now
        self.owed_first = owed_first

    async def pending_listing(self, directory: str | None = None, viewer: Viewer | None = None) -> list[str]:
        """``GET /question``'s items: each request's JSON, encoded once, when it was asked (its ``to`` as
        it is now, once an escalation step is due); for a ``viewer``, only those addressed to them or
        to nobody in particular."""
        await self.owed_first()
        directory = normalize_directory(directory)
        now = time.time()
        return [
            request_now(record, now).wire_json
            for record in await self.store.pending()
            if (directory is None or record.directory is None or record.directory == directory)
            and (viewer is None or viewer.sees(current_to(record, now)))
        ]

    async def pending_json(self, directory: str | None = None, viewer: Viewer | None = None) -> bytes:
        """``GET /question``'s body, whole."""
        return to_utf8("[" + ",".join(await self.pending_listing(directory, viewer)) + "]")

    async def _gone(self, request_id: str) -> NotFound:
        """What to say of a record someone else finished first: how it finished, if still known."""
        record = await self.store.get(request_id)
        return NotFound(request_id, None if record is None or record.pending else record.status)

    async def pending_record(self, request_id: str, viewer: Viewer | None = None) -> Record:
        """The pending record; one past its expiry is expired now (its timer may be late, or the store
        was unreachable when it was due) and not found: its tool has stopped waiting. For a ``viewer``
        it is not addressed to, it does not exist."""
        await self.owed_first()
        record = await self.store.get(request_id)
        if record is not None and viewer is not None and not viewer.sees(current_to(record, time.time())):
            raise NotFound(request_id)
        if record is None or not record.pending:
            raise NotFound(request_id, None if record is None else record.status)
        if record.expires_at <= time.time():
            await self.expire_now(request_id)
            raise NotFound(request_id, "expired")
        return record

    async def reply(
        self,
        request_id: str,
        answers: list[list[str]],
        viewer: Viewer | None = None,
        *,
        via: str = "api",
    ) -> Record:
        """Accept with typed content (a confirmation answered No: decline); raises :class:`.AnswerError`
        when answers do not fit. ``via``: the way the reply came (:data:`.auditing.ANSWERER_VIAS`), as
        the audit trail and the metrics record it."""
        _check_via(via)
        record = await self.pending_record(request_id, viewer)
        result = _signed(answers_to_result(record.form, answers), viewer)
        status: Status = "answered" if result["action"] == ACCEPT else "declined"
        reason = "answered" if status == "answered" else "answered no"
        finished = await self.finish(request_id, status, result, answers=answers, reason=reason, via=via)
        if finished is None:  # another answerer got there first
            raise await self._gone(request_id)
        return finished

    async def reject(
        self, request_id: str, action: str = CANCEL, viewer: Viewer | None = None, *, via: str = "api"
    ) -> Record:
        _check_via(via)
        await self.pending_record(request_id, viewer)  # past its expiry: expired, not rejected
        status: Status = "declined" if action == DECLINE else "cancelled"
        result = _signed({"action": action}, viewer)
        finished = await self.finish(request_id, status, result, reason="rejected", via=via)
        if finished is None:
            raise await self._gone(request_id)
        return finished


def _check_via(via: str) -> None:
    if via not in ANSWERER_VIAS:
        raise ValueError(f"{via!r} is not a way to answer ({', '.join(ANSWERER_VIAS)})")


def _signed(result: dict[str, Any], viewer: Viewer | None) -> dict[str, Any]:
    """The result with ``answeredBy``: the person who answered or declined, where one signed in."""
    if viewer is None or viewer.person is None:
        return result
    return {**result, "answeredBy": viewer.person}
