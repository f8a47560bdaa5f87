"""A question's record: what a tool asked, and once finished, what it gets.

The service's central noun: the gateway makes records, the stores keep them, the routes show them.
"""

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from elicitation_gateway import events
from elicitation_gateway.conversion.schema import Form
from elicitation_gateway.escalation import Step, current_to
from elicitation_gateway.models import QuestionRequest

Status = Literal["pending", "answered", "declined", "cancelled", "expired"]
OnTimeout = Literal["cancel", "default"]

FINISHED_FORM = Form(fields=(), questions=())


class Record(BaseModel):
    """One elicitation: what was asked, and once finished, what the tool gets."""

    model_config = ConfigDict(frozen=True)

    request: QuestionRequest
    form: Form
    message: str
    asker: str | None = None
    """Who asks, as the tool that asked says it (the proxy: the MCP server and its tool): the answerers
    show it apart from the message, which cannot imitate it."""
    directory: str | None = None
    created_at: float
    expires_at: float
    on_timeout: OnTimeout = "cancel"
    """At expiry: ``cancel``, or ``default`` (accept the schema's defaults, checked when asked)."""
    status: Status = "pending"
    result: dict[str, Any] | None = None
    """The MCP ``ElicitResult`` on the wire, once finished."""
    finished_at: float | None = None
    escalate: tuple[Step, ...] = ()
    """Steps that widen its audience while nobody answers (:mod:`elicitation_gateway.escalation`)."""

    @classmethod
    def new(
        cls,
        request: QuestionRequest,
        form: Form,
        message: str,
        directory: str | None,
        created_at: float,
        expires_at: float,
        on_timeout: OnTimeout,
        asker: str | None = None,
        escalate: tuple[Step, ...] = (),
    ) -> "Record":
        """A pending record of parts the gateway made and checked, so not validated again; all of them
        share one set of field names, where pydantic would keep a set (~500 bytes) per record."""
        return cls.model_construct(
            _NEW_RECORD_FIELDS,
            request=request,
            form=form,
            message=message,
            asker=asker,
            directory=directory,
            created_at=created_at,
            expires_at=expires_at,
            on_timeout=on_timeout,
            status="pending",  # every field given: pydantic looks up no default
            result=None,
            finished_at=None,
            escalate=escalate,
        )

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    def finished(self, status: Status, result: dict[str, Any]) -> "Record":
        """The record as kept once it ends (for ``result_ttl``): what ``GET /elicitations/{id}`` shows,
        without the questions and the form that only answering needed."""
        # A copy and a validated request: for models this small, pydantic's own code is quicker
        # than model_construct's loop over the fields.
        return self.model_copy(
            update={
                "status": status,
                "result": result,
                "finished_at": time.time(),
                "request": QuestionRequest(
                    id=self.id, sessionID=self.request.sessionID, questions=[], to=self.request.to
                ),
                "form": FINISHED_FORM,
            }
        )

    def asked_event(self, *, replayable: bool = True) -> events.Event:
        return events.asked(None, self.directory, replayable=replayable, request_json=self.request.wire_json)

    def finished_event(self, answers: list[list[str]] | None) -> events.Event:
        """Its ``question.replied`` (``question.rejected`` without ``answers``), with ``to`` as it was
        when it finished: a stream that replays it after a reconnect shows it to that audience."""
        answered_by = (self.result or {}).get("answeredBy")
        to = list(current_to(self, self.finished_at or time.time())) or None
        if answers is None:
            return events.rejected(self.request.sessionID, self.id, self.directory, answered_by, to)
        return events.replied(self.request.sessionID, self.id, answers, self.directory, answered_by, to)


_NEW_RECORD_FIELDS = {
    *("request", "form", "message", "asker", "directory", "created_at", "expires_at", "on_timeout"),
    "escalate",
}
"""Shared by every record ``Record.new`` makes: pydantic copies it before any change."""
