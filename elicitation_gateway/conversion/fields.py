"""What one question accepts: a property of the schema reduced to a kind and its checks.

``check_value`` is the single place where a typed value (an answer already parsed, or a schema's
``default``) is held against the property's constraints.
"""

import math
import re
from datetime import date, datetime
from fractions import Fraction
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from elicitation_gateway.conversion.patterns import PatternError, matches

Kind = Literal["choice", "multi", "boolean", "integer", "number", "string", "text"]

STRING_FORMATS = {
    "email": "an email address",
    "uri": "a URL",
    "date": "a date, YYYY-MM-DD",
    "date-time": "a date and time, YYYY-MM-DDTHH:MM:SSZ",
}

BOOLEAN_LABELS = ("Yes", "No")


class ValueProblem(ValueError):
    """A value that does not fit its question; the message is written for the person answering."""


class Option(BaseModel):
    model_config = ConfigDict(frozen=True)

    value: str
    label: str
    description: str = ""


class Field(BaseModel):
    """One property of the schema, reduced to what answering it needs (camelCase on the wire)."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    key: str
    kind: Kind
    required: bool = False
    options: tuple[Option, ...] = ()
    has_default: bool = False
    default: Any = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    exclusive_minimum: int | float | None = None
    exclusive_maximum: int | float | None = None
    multiple_of: int | float | None = None
    """Positive; an answer fits when ``value / multiple_of`` is a whole number (:func:`is_multiple`)."""
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None
    pattern: str | None = None
    min_items: int | None = None
    max_items: int | None = None
    warning: str | None = None
    """Shown to the person beside the question: it may ask for something secret
    (:mod:`.sensitive`)."""


def check_value(field: Field, value: Any) -> Any:
    """Return ``value`` as the content carries it, or raise :class:`ValueProblem`."""
    checker = _CHECKERS[field.kind]
    return checker(field, value)


def describe_value(field: Field, value: Any) -> str:
    """A content value in the words the person sees (option labels, Yes/No)."""
    labels = {o.value: o.label for o in field.options}
    if field.kind == "boolean":
        return BOOLEAN_LABELS[0] if value else BOOLEAN_LABELS[1]
    if field.kind == "multi":
        return ", ".join(labels.get(v, v) for v in value) or "none"
    if field.kind == "choice":
        return labels.get(value, value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value == "":
        return "empty"  # "default: " with nothing after it reads as a cut sentence
    return str(value)


def _choice(field: Field, value: Any) -> str:
    if not isinstance(value, str) or value not in {o.value for o in field.options}:
        raise ValueProblem(f"{_shown(value)} is not one of the options ({_labels(field)})")
    return value


def _multi(field: Field, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise ValueProblem("expects a list of options")
    chosen = [_choice(field, item) for item in value]
    if len(set(chosen)) != len(chosen):
        raise ValueProblem("names an option more than once")
    if field.min_items is not None and len(chosen) < field.min_items:
        raise ValueProblem(f"needs at least {field.min_items} choice{'s' * (field.min_items != 1)}")
    if field.max_items is not None and len(chosen) > field.max_items:
        raise ValueProblem(f"allows at most {field.max_items} choice{'s' * (field.max_items != 1)}")
    return chosen


def _boolean(field: Field, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueProblem("expects Yes or No")
    return value


def _integer(field: Field, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueProblem("expects a whole number")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueProblem(f"{_number(value)} is not a whole number")
        value = int(value)
    _check_range(field, value)
    _check_multiple(field, value)
    return value


def _number_value(field: Field, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueProblem("expects a number")
    try:
        number = float(value)
    except OverflowError:
        raise ValueProblem("is too large a number") from None
    if not math.isfinite(number):
        raise ValueProblem("expects a finite number")
    _check_range(field, number)
    _check_multiple(field, number)
    return number


def _check_range(field: Field, value: float) -> None:
    if field.minimum is not None and value < field.minimum:
        raise ValueProblem(f"{_number(value)} is less than the minimum, {_number(field.minimum)}")
    if field.maximum is not None and value > field.maximum:
        raise ValueProblem(f"{_number(value)} is more than the maximum, {_number(field.maximum)}")
    if field.exclusive_minimum is not None and value <= field.exclusive_minimum:
        raise ValueProblem(f"{_number(value)} must be greater than {_number(field.exclusive_minimum)}")
    if field.exclusive_maximum is not None and value >= field.exclusive_maximum:
        raise ValueProblem(f"{_number(value)} must be less than {_number(field.exclusive_maximum)}")


def _check_multiple(field: Field, value: float) -> None:
    step = field.multiple_of
    if step is None or is_multiple(value, step):
        return
    if (Fraction(repr(value)) / Fraction(repr(step))).denominator == 1:  # a multiple as written, in decimal
        raise ValueProblem(
            f"{_number(value)} is not a multiple of {_number(step)} as the tool's validator computes it "
            f"({_number(value)} / {_number(step)} = {value / step!r} in floating point), so the tool would "
            "refuse it"
        )
    raise ValueProblem(f"{_number(value)} is not a multiple of {_number(step)}")


MAX_QUOTIENT = 1e21
"""Past this, JavaScript writes a number with an exponent, and ajv's ``parseInt`` check fails."""


def is_multiple(value: float, step: float) -> bool:
    """Whether ``value`` is a multiple of ``step`` as the tool's validator decides it.

    Whole numbers are divided exactly. Otherwise the quotient is computed in floating point and must be
    a whole number, as ajv (``value / step === parseInt(value / step)``) and Python's ``jsonschema``
    check it: content the gateway accepts passes them, and the more tolerant validators (pydantic,
    @cfworker/json-schema) too. So ``0.5`` is a multiple of ``0.25``, but ``0.3`` is not one of ``0.1``
    (``0.3 / 0.1`` is ``2.9999999999999996``): a tool's validator would refuse it.
    """
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    try:
        quotient = value / step
    except OverflowError:  # a whole number too large for a float
        return False
    return math.isfinite(quotient) and quotient.is_integer() and abs(quotient) < MAX_QUOTIENT


def _string(field: Field, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueProblem("expects text")
    if field.min_length is not None and len(value) < field.min_length:
        raise ValueProblem(f"is {len(value)} characters long; at least {field.min_length} are needed")
    if field.max_length is not None and len(value) > field.max_length:
        raise ValueProblem(f"is {len(value)} characters long; at most {field.max_length} are allowed")
    if field.format and not _FORMAT_CHECKS[field.format](value):
        raise ValueProblem(f"{_shown(value)} is not {STRING_FORMATS[field.format]}")
    if field.pattern and not _matches(field.pattern, value):
        raise ValueProblem(f"{_shown(value)} does not match the pattern {field.pattern}")
    return value


def _matches(pattern: str, value: str) -> bool:
    try:
        return matches(pattern, value)
    except PatternError:  # kept from before patterns were checked when asked: not checkable
        return True


def _text(field: Field, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueProblem("expects text")
    return value


_CHECKERS = {
    "choice": _choice,
    "multi": _multi,
    "boolean": _boolean,
    "integer": _integer,
    "number": _number_value,
    "string": _string,
    "text": _text,
}


_EMAIL = re.compile(r"^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$")
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_DATE_TIME = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")


def _is_email(text: str) -> bool:
    return bool(_EMAIL.match(text))


def _is_uri(text: str) -> bool:
    if not text or any(c.isspace() for c in text):
        return False
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return bool(_SCHEME.match(parts.scheme)) and bool(parts.netloc or parts.path)


def _is_date(text: str) -> bool:
    if not _DATE.match(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_date_time(text: str) -> bool:
    if not _DATE_TIME.match(text):
        return False
    try:
        datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return False
    return True


_FORMAT_CHECKS = {"email": _is_email, "uri": _is_uri, "date": _is_date, "date-time": _is_date_time}


def _labels(field: Field) -> str:
    return ", ".join(o.label for o in field.options)


def _number(value: float) -> str:
    """A number as people write it: ``3`` rather than ``3.0``, long ones shortened."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        value = int(value)
    text = str(value)
    return text if len(text) <= 24 else f"{text[:10]}…({len(text)} digits)"


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    if len(text) > 40:
        text = text[:39] + "…"
    return f"'{text}'"
