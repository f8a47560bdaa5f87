"""Escalation: a question that nobody has answered after a while also reaches more people (pure).

An ask's ``"escalate"`` lists steps beside its ``"to"``: ``[{"after": 600, "to": ["group:leads"]}]``.
``after`` seconds after the ask, the step's people are added to the question's audience. The audience
is a function of the record and the time alone (:func:`audience`): every process, replica or
restarted one, computes the same without keeping anything. Only the announcement of a step (its
``question.asked`` to the people it adds, and their notification) happens once, at its time.
"""

import argparse
import math
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from elicitation_gateway.models import QuestionRequest
from elicitation_gateway.people import parsed_to

MAX_STEPS = 10
"""Steps in one ``escalate``."""
MAX_AFTER = 366 * 24 * 3600.0
"""The longest ``after``, in seconds: beyond any question's timeout."""


class Step(BaseModel):
    """One step: ``after`` seconds after the ask, the question also reaches ``to``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    after: float
    to: tuple[str, ...]


def parsed_escalate(value: object) -> tuple[Step, ...]:
    """An ask's ``"escalate"``: a list of ``{"after": seconds, "to": [names]}``, at most
    :data:`MAX_STEPS`, ordered by ``after``; raises :class:`ValueError` saying what is wrong. Whether
    the names are people of the file is checked when asked."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(  # noqa: TRY004  (a refusal of what a client sent, said as parsed_to says it)
            '"escalate" must be a list of steps, such as [{"after": 600, "to": ["group:leads"]}]'
        )
    if len(value) > MAX_STEPS:
        raise ValueError(f'"escalate" has {len(value)} steps; at most {MAX_STEPS}')
    steps = []
    for number, step in enumerate(value):
        where = f'"escalate"[{number}]'
        if not isinstance(step, dict) or set(step) != {"after", "to"}:
            raise ValueError(f'{where} must be an object with exactly "after" (seconds) and "to" (names)')
        after = step["after"]
        if (
            isinstance(after, bool)
            or not isinstance(after, int | float)
            or not math.isfinite(after)
            or not 0 < after <= MAX_AFTER
        ):
            raise ValueError(f"{where}.after must be a positive number of seconds, at most {MAX_AFTER:g}")
        try:
            to = parsed_to(step["to"])
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        if not to:
            raise ValueError(f"{where}.to names nobody: a step must name the people or groups it reaches")
        steps.append(Step(after=float(after), to=to))
    return tuple(sorted(steps, key=lambda step: step.after))


def names_of(steps: Iterable[Step]) -> tuple[str, ...]:
    """Every name the steps hold, each once, in order."""
    return tuple(dict.fromkeys(name for step in steps for name in step.to))


def due(steps: Sequence[Step], created_at: float, now: float) -> int:
    """How many steps (ordered by ``after``) are due at ``now``."""
    return sum(1 for step in steps if created_at + step.after <= now)


def audience(to: Sequence[str], steps: Sequence[Step], created_at: float, now: float) -> tuple[str, ...]:
    """Whom a question is for at ``now``: its ``to`` and the ``to`` of every step due, each name once.
    A question with no ``to`` is everyone's, and stays so (its steps only notify)."""
    if not to:
        return ()
    return tuple(dict.fromkeys([*to, *names_of(steps[: due(steps, created_at, now)])]))


def next_at(steps: Sequence[Step], created_at: float, now: float) -> float | None:
    """When the next step not yet due at ``now`` is due (a time), or None when none is left."""
    return next((created_at + step.after for step in steps if created_at + step.after > now), None)


def current_to(record: Any, now: float) -> Sequence[str]:
    """A record's audience at ``now`` (:func:`audience` of its ``to`` and ``escalate``); its own ``to``
    as it is, where it has no steps."""
    to = record.request.to or ()
    if not record.escalate:
        return to
    return audience(to, record.escalate, record.created_at, now)


def request_now(record: Any, now: float) -> QuestionRequest:
    """A record's request with its ``to`` as it is at ``now`` (the same request while no step is due)."""
    request: QuestionRequest = record.request
    if not record.escalate or not request.to or not due(record.escalate, record.created_at, now):
        return request
    to = list(current_to(record, now))
    return QuestionRequest.new(request.id, request.sessionID, request.questions, request.tool, to)


FLAG_FORM = "SECONDS:NAME[,NAME...]"
"""How a command's ``--escalate`` names one step: ``600:group:leads,carol``."""


def step_of_flag(text: str) -> dict[str, Any]:
    """One ``--escalate SECONDS:NAME[,NAME...]`` as the step it stands for on the wire; raises
    :class:`ValueError` saying the form."""
    after, _, names = text.partition(":")
    try:
        seconds = float(after)
    except ValueError:
        seconds = math.nan
    to = [name.strip() for name in names.split(",") if name.strip()]
    if not math.isfinite(seconds) or seconds <= 0 or not to:
        raise ValueError(f"{text!r} is not {FLAG_FORM} (for example 600:group:leads,carol)")
    return {"after": int(seconds) if seconds.is_integer() else seconds, "to": to}


def escalate_flag(text: str) -> dict[str, Any]:
    """:func:`step_of_flag` as an ``argparse`` type."""
    try:
        return step_of_flag(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
