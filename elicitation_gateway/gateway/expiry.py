"""Expiry: each pending question's deadline on one timer of the event loop, and what its tool gets
when it passes (``cancel``, or with ``onTimeout=default`` the schema's defaults)."""

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from elicitation_gateway.conversion.answers import AnswerError, answers_to_content
from elicitation_gateway.conversion.schema import Form, SchemaError
from elicitation_gateway.deadlines import Deadlines
from elicitation_gateway.records import Record
from elicitation_gateway.stores.base import Store, StoreUnavailable

logger = logging.getLogger(__package__)

ACCEPT, CANCEL = "accept", "cancel"
EXPIRY = "timed out"
"""An owed finish that is the question's expiry (``cancel``, or the defaults), not a withdrawal."""


def expiry_result(record: Record) -> dict[str, Any]:
    """What a tool gets when its question expires: ``cancel``, or with ``onTimeout=default`` the
    schema's defaults (checked when asked: every required field has one)."""
    if record.on_timeout == "default":
        return {
            "action": ACCEPT,
            "content": answers_to_content(record.form, [[] for _ in record.form.fields]),
        }
    return {"action": CANCEL}


def check_defaults(form: Form) -> None:
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


class Expiry:
    """The deadlines of the pending questions this process times. ``finish`` finishes a record (see
    :meth:`.Finishing.finish`); ``owe`` owes a finish the store cannot take now; ``spawn`` runs a
    coroutine on a task of its own."""

    def __init__(
        self,
        store: Store,
        *,
        finish: Callable[..., Awaitable[Record | None]],
        owe: Callable[[str, str], None],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.store = store
        self.finish = finish
        self.owe = owe
        self.timers = Deadlines(lambda request_id: spawn(self.expire(request_id)))

    def schedule(self, request_id: str, delay: float) -> None:
        """``request_id`` expires in ``delay`` seconds (at once if that is not positive)."""
        self.timers.set(request_id, delay)

    def discard(self, request_id: str) -> None:
        self.timers.discard(request_id)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self.timers

    def clear(self) -> None:
        self.timers.clear()

    async def expire(self, request_id: str) -> None:
        """The deadline passed: expired now, or owed once the store is back."""
        try:
            await self.expire_now(request_id)
        except StoreUnavailable as error:  # the store logs its fault once
            logger.debug("elicitation %s could not expire now: %s", request_id, error)
            self.owe(request_id, EXPIRY)

    async def expire_now(self, request_id: str) -> None:
        """Expire ``request_id`` if it is still pending; raises :class:`StoreUnavailable`."""
        record = await self.store.get(request_id)
        if record is None or not record.pending:
            return
        result = expiry_result(record)
        if result["action"] == ACCEPT:
            # The person's empty reply, given on their behalf, so answerers see question.replied like
            # any other answer.
            answers: list[list[str]] = [[] for _ in record.form.fields]
            await self.finish(
                request_id, "answered", result, answers=answers, reason="timed out, defaults", defaulted=True
            )
            return
        await self.finish(request_id, "expired", result, reason="timed out")
