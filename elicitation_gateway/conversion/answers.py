"""Where a person's answers become schema-typed ``content``, and the ``ElicitResult`` a reply makes.

``answers[i]`` answers ``questions[i]``, which shows the i-th property. Each answer is a list of option
labels (raw values are accepted too) or of free text; ``[]`` means unanswered. A confirmation (a schema
with no properties) has one Yes/No question: Yes accepts with ``{}``, No declines.
"""

import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from elicitation_gateway.conversion.fields import BOOLEAN_LABELS, Field, ValueProblem, check_value
from elicitation_gateway.conversion.schema import CONFIRM_KEY, Form
from elicitation_gateway.display import safe


class Issue(BaseModel):
    """Why one answer does not fit its question."""

    model_config = ConfigDict(frozen=True)

    index: int
    header: str
    message: str


class AnswerError(ValueError):
    """A reply that does not fit the schema; the question stays pending so the person can fix it."""

    def __init__(self, message: str, issues: tuple[Issue, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.issues = issues


UNANSWERED = object()

_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_NUMBER = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$")
r"""Unambiguous, so that a failing match is linear (``[0-9]+\.?[0-9]*`` was quadratic on long digit runs)."""
MAX_NUMBER_LENGTH = 300
_TRUE = {BOOLEAN_LABELS[0].casefold(), "true"}
_FALSE = {BOOLEAN_LABELS[1].casefold(), "false"}


def answers_to_result(form: Form, answers: list[list[str]]) -> dict[str, Any]:
    """Turn a reply into the tool's ``ElicitResult``: ``accept`` with typed content, or, for a
    confirmation answered No, ``decline``; raise :class:`AnswerError` naming each bad answer."""
    content = answers_to_content(form, answers)
    if form.confirm:
        return {"action": "accept", "content": {}} if content.get(CONFIRM_KEY) else {"action": "decline"}
    return {"action": "accept", "content": content}


def answers_to_content(form: Form, answers: list[list[str]]) -> dict[str, Any]:
    """Turn a reply into ``ElicitResult.content``, or raise :class:`AnswerError` naming each bad answer."""
    if len(answers) > len(form.fields):
        raise AnswerError(
            f"{len(answers)} answers for {len(form.fields)} question{'s' * (len(form.fields) != 1)}"
        )
    content: dict[str, Any] = {}
    issues: list[Issue] = []
    for index, field in enumerate(form.fields):
        picked = answers[index] if index < len(answers) else []
        try:
            value = answer_value(field, picked)
        except ValueProblem as problem:
            issues.append(Issue(index=index, header=form.questions[index].header, message=str(problem)))
            continue
        if value is not UNANSWERED:
            content[field.key] = value
    if issues:
        summary = "; ".join(f"{issue.header}: {issue.message}" for issue in issues)
        if len(issues) == 1:
            raise AnswerError(f"1 answer does not fit its question: {summary}", tuple(issues))
        raise AnswerError(f"{len(issues)} answers do not fit their questions: {summary}", tuple(issues))
    return content


def answer_value(field: Field, picked: list[str]) -> Any:
    """The typed value of one answer; ``UNANSWERED`` leaves an optional question out of the content."""
    if _is_unanswered(field, picked):
        if field.has_default:
            return field.default
        if field.kind == "multi" and field.required and not field.min_items:
            return []
        if field.required:
            raise ValueProblem("an answer is required")
        return UNANSWERED
    if field.kind == "multi":
        return check_value(field, [_option_value(field, item) for item in picked])
    if len(picked) > 1:
        raise ValueProblem(f"expects one answer, not {len(picked)}")
    return check_value(field, _parse(field, picked[0]))


def _is_unanswered(field: Field, picked: list[str]) -> bool:
    if not picked:
        return True
    if len(picked) != 1 or picked[0].strip():
        return False
    blank_is_option = any(picked[0] in (o.label, o.value, safe(o.label, oneline=True)) for o in field.options)
    return not blank_is_option


def _parse(field: Field, text: str) -> Any:
    if field.kind == "choice":
        return _option_value(field, text)
    if field.kind == "boolean":
        word = text.strip().casefold()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ValueProblem(f"'{_clip(text)}' is not Yes or No")
    if field.kind == "integer":
        return _parse_integer(text)
    if field.kind == "number":
        return _parse_number(text)
    return text


def _option_value(field: Field, text: str) -> str:
    """A label wins over a value: ``text`` names the option it labels, else the option whose label is
    shown as ``text`` (OpenCode clients answer with the label they were sent, made safe to show; the
    schema refuses options whose shown labels are alike), else the option it is. What a person was
    shown comes before values: ``""`` picks the option shown as nothing, not another whose value is
    ``""``."""
    for option in field.options:
        if option.label == text:
            return option.value
    for option in field.options:
        if safe(option.label, oneline=True) == text:
            return option.value
    for option in field.options:
        if option.value == text:
            return option.value
    labels = ", ".join(o.label for o in field.options)
    raise ValueProblem(f"'{_clip(text)}' is not one of the options ({labels})")


def _parse_integer(text: str) -> int:
    stripped = text.strip()
    if len(stripped) > MAX_NUMBER_LENGTH:
        raise ValueProblem(f"'{_clip(text)}' is not a whole number the gateway reads (too long)")
    if _INTEGER.match(stripped):
        return int(stripped)
    if _NUMBER.match(stripped):
        number = _parse_number(stripped)
        if number.is_integer():
            return int(number)
    raise ValueProblem(f"'{_clip(text)}' is not a whole number")


def _parse_number(text: str) -> float:
    stripped = text.strip()
    if len(stripped) <= MAX_NUMBER_LENGTH and _NUMBER.match(stripped):
        number = float(stripped)
        if number not in (float("inf"), float("-inf")):
            return number
    raise ValueProblem(f"'{_clip(text)}' is not a number")


def _clip(text: str) -> str:
    return text if len(text) <= 40 else text[:39] + "…"
