"""What the person sees of a field: its question as OpenCode clients show it (words made safe to
show, hints of the checks in parentheses, options), and headers made of keys and titles (pure)."""

import re

from elicitation_gateway.conversion.fields import BOOLEAN_LABELS, STRING_FORMATS, Field, describe_value
from elicitation_gateway.display import safe
from elicitation_gateway.models import QuestionInfo, QuestionOption


def readable(key: str) -> str:
    """A property's key as a person reads it: ``special_requests`` and ``specialRequests`` become
    ``Special requests`` (a tool without titles still gets headers in words)."""
    if " " in key.strip():  # already words: only the first letter changes
        text = " ".join(key.split())
    else:
        words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", key).replace("_", " ").replace("-", " ").split()
        text = " ".join(word.lower() if word[1:].islower() else word for word in words)  # keeps ID, HTTP
    return text[:1].upper() + text[1:] if text else key


def shorten(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters at a word boundary, marking the cut with ``…``."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    if limit <= 1:
        return "…"[:limit]
    cut = text[: limit - 1]
    boundary = cut.rfind(" ")
    if text[limit - 1] != " " and boundary >= (limit - 1) // 2:  # a word cut in two reads worse
        cut = cut[:boundary]
    return cut.rstrip() + "…"


QUESTION_OPTION_FIELDS = {"label", "description"}
"""Shared by the options built here: pydantic copies such a set before any change."""


def question_of(
    field: Field, text: str, header: str, options: list[QuestionOption] | None = None
) -> QuestionInfo:
    """The question that shows ``field``, as OpenCode clients show it, in a terminal too: its words made
    safe to show (:func:`~elicitation_gateway.display.safe`); the field keeps the labels as the tool
    wrote them (:mod:`.answers` takes either). ``options``: those of another question of it, shared.

    Of checked parts, so not validated again, with one shared set of field names: a derived first
    question is made for every ask, and pydantic's validation would copy its options and keep a set of
    its own (together some 1 KB per ask)."""
    if words := hints(field):
        text = f"{text} ({'; '.join(words)})"
    if field.warning:  # clients that show only the question see it there
        text = f"{text}\n\n⚠ {field.warning}"
    if options is None:
        options = _question_options(field)
    closed = field.kind in ("choice", "multi", "boolean")
    return QuestionInfo.model_construct(
        QUESTION_FIELDS,
        question=safe(text),
        header=safe(header, oneline=True),
        options=options,
        multiple=True if field.kind == "multi" else None,
        custom=False if closed else None,
    )


def _question_options(field: Field) -> list[QuestionOption]:
    if field.kind in ("choice", "multi"):
        return [
            QuestionOption.model_construct(
                QUESTION_OPTION_FIELDS, label=safe(o.label, oneline=True), description=safe(o.description)
            )
            for o in field.options
        ]
    if field.kind == "boolean":
        return list(BOOLEAN_OPTIONS)
    return []


QUESTION_FIELDS = {"question", "header", "options", "multiple", "custom"}
BOOLEAN_OPTIONS = tuple(QuestionOption(label=label) for label in BOOLEAN_LABELS)
"""Shared by every Yes/No question (frozen, like every option)."""


def hints(field: Field) -> list[str]:
    """What the question's text adds in parentheses: the kind, range, format, count, default."""
    hints: list[str] = []
    if field.kind in ("integer", "number"):
        what = "a whole number" if field.kind == "integer" else "a number"
        words = " ".join([what, *_range_words(field)])
        if field.multiple_of is not None:
            words += f", a multiple of {_num(field.multiple_of)}"
        hints.append(words)
    elif field.kind == "string":
        if field.format:
            hints.append(STRING_FORMATS[field.format])
        if field.min_length is not None and field.max_length is not None:
            hints.append(f"{field.min_length}–{field.max_length} characters")
        elif field.min_length:
            hints.append(f"at least {field.min_length} character{'s' * (field.min_length != 1)}")
        elif field.max_length is not None:
            hints.append(f"at most {field.max_length} characters")
    elif field.kind == "multi":
        low, high = field.min_items, field.max_items
        if low and high is not None:
            hints.append(f"choose {low}" if low == high else f"choose {low} to {high}")
        elif low:
            hints.append(f"choose at least {low}")
        elif high is not None:
            hints.append(f"choose at most {high}")
    if field.has_default:
        hints.append(f"default: {describe_value(field, field.default)}")
    return hints


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _range_words(field: Field) -> list[str]:
    num = _num
    if field.minimum is not None and field.maximum is not None:
        return [f"from {num(field.minimum)} to {num(field.maximum)}"]
    words = []
    if field.minimum is not None:
        words.append(f"at least {num(field.minimum)}")
    if field.exclusive_minimum is not None:
        words.append(f"greater than {num(field.exclusive_minimum)}")
    if field.maximum is not None:
        words.append(f"at most {num(field.maximum)}")
    if field.exclusive_maximum is not None:
        words.append(f"less than {num(field.exclusive_maximum)}")
    return [", ".join(words)] if words else []
