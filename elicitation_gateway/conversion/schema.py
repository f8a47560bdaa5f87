"""Where a ``requestedSchema`` becomes questions: one question per property, in the schema's order.

Plain functions over plain data. ``build_form`` returns a :class:`Form`, which keeps both what the
person sees (``questions``, OpenCode's ``QuestionInfo``) and what the answers are checked against
(``fields``, one per question), so that :mod:`.answers` can turn replies back into typed content.
"""

import math
import re
from fractions import Fraction
from typing import Any

from pydantic import BaseModel, ConfigDict

from elicitation_gateway.conversion import sensitive
from elicitation_gateway.conversion.fields import (
    BOOLEAN_LABELS,
    STRING_FORMATS,
    Field,
    Option,
    ValueProblem,
    check_value,
    describe_value,
)
from elicitation_gateway.conversion.patterns import PatternError, compile_pattern, pattern_shape
from elicitation_gateway.display import safe, skeleton
from elicitation_gateway.encoding import InvalidText, check_text, shown, valid_text
from elicitation_gateway.models import QuestionInfo, QuestionOption

SOFT_QUESTION_LIMIT = 10
"""More questions than this still work, but are hard to answer well; the gateway logs a warning."""
CONFIRM_KEY = "confirm"
"""The key of a confirmation's only field: the content never holds it."""
CONFIRM_HEADER = "Confirm"
CONFIRM_TEXT = "Do you confirm?"
"""A confirmation's question when neither the message nor the schema has words for it."""


class SchemaError(ValueError):
    """A ``requestedSchema`` the gateway cannot ask; ``code`` goes on the wire."""

    def __init__(self, message: str, code: str = "invalid_schema") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class Form(BaseModel):
    """A converted schema: ``questions[i]`` shows ``fields[i]``."""

    model_config = ConfigDict(frozen=True)

    fields: tuple[Field, ...]
    questions: tuple[QuestionInfo, ...]
    texts: tuple[str, ...] = ()
    """Each question's own words (its title or description), without the message or the hints that
    ``questions[i].question`` adds for clients that show only the question: for forms that show them
    apart."""
    legacy: bool = False
    """A top-level enum or array of enum: the content is ``{"value": ...}``."""
    confirm: bool = False
    """A schema with no properties: one Yes/No question, the message. Yes accepts with ``{}`` as the
    content, No declines (:func:`.answers.answers_to_result`)."""


# ---------------------------------------------------------------------------------------------------
# The entry point


def build_form(
    schema: Any,
    message: str = "",
    *,
    header_length: int = 12,
    max_questions: int = 50,
    max_options: int | None = None,
    max_text_length: int | None = None,
    allow_sensitive: bool = False,
) -> Form:
    """Convert a ``requestedSchema`` into questions; raise :class:`SchemaError` naming the bad part.

    A free-text question that plainly asks for a secret is refused (MCP forbids it) unless
    ``allow_sensitive``; then, as any that may ask for one, it carries a warning for the person.
    """
    _check_message(message, max_text_length)
    _check_text_and_sizes(schema, max_questions, max_options, max_text_length)
    form = _convert(schema, message, header_length, max_questions, allow_sensitive)
    return form if form.legacy else with_message(form, message)


def with_message(form: Form, message: str, max_text_length: int | None = None) -> Form:
    """The form of a schema asked without a message (``build_form(schema)``), asked with ``message``:
    only the first question changes, everything else is shared. Not for legacy (top-level enum)
    forms, whose only question is worded from the message."""
    assert not form.legacy, "a legacy form is built with its message"
    _check_message(message, max_text_length)
    message = message.strip()
    if not message:
        return form
    own = form.texts[0]
    if message == own.strip():  # the message already says it
        text, own = own, ""
    elif not own.strip():  # a confirmation: the message is the question
        text = message
    else:
        text = f"{message}\n\n{own}"
    plain = form.questions[0]
    first = _question(form.fields[0], text, plain.header, plain.options)  # its options shared too
    return Form.model_construct(
        _FORM_FIELDS,
        fields=form.fields,
        questions=(first, *form.questions[1:]),
        texts=(own, *form.texts[1:]),
        legacy=False,
        confirm=form.confirm,
    )


_FORM_FIELDS = {"fields", "questions", "texts", "legacy", "confirm"}


def _check_message(message: str, max_text_length: int | None) -> None:
    if not valid_text(message):
        raise SchemaError(InvalidText("message", "is not valid Unicode").message, code="invalid_text")
    if max_text_length is not None and len(message) > max_text_length:
        raise SchemaError(
            f"message is {len(message)} characters long; at most {max_text_length} are allowed",
            code="text_too_long",
        )


def _convert(
    schema: Any, message: str, header_length: int, max_questions: int, allow_sensitive: bool
) -> Form:
    where = "requestedSchema"
    if not isinstance(schema, dict):
        raise SchemaError(f"{where} must be a JSON object, not {_json_type(schema)}")
    if _is_legacy(schema):
        field = _parse_property("value", schema, required=True, where=where)
        if field.kind in ("string", "text"):
            field = _judged(field, schema, allow_sensitive, where)
        title = schema.get("title") if isinstance(schema.get("title"), str) else None
        header = shorten(safe(title or message or "Question"), header_length)
        question = _question(field, message or title or "Choose", header)
        own = (title or "") if message else (title or "Choose")
        return Form(fields=(field,), questions=(question,), texts=(own,), legacy=True)

    if schema.get("type", "object") != "object":
        raise SchemaError(
            f"{where} must be an object schema with properties (or a top-level enum), "
            f"not type {schema.get('type')!r}"
        )
    properties = schema.get("properties")
    if properties is None:
        raise SchemaError(f"{where} must have properties: one per question")
    if not isinstance(properties, dict):
        raise SchemaError(
            f"{where}.properties must be an object mapping keys to property schemas, "
            f"not {_json_type(properties)}"
        )
    if len(properties) > max_questions:
        raise SchemaError(
            f"{where} has {len(properties)} properties; at most {max_questions} questions may be "
            "asked at once",
            code="too_many_questions",
        )
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise SchemaError(f"{where}.required must be a list of property names")
    if missing := [name for name in required if name not in properties]:
        raise SchemaError(
            f"{where}.required names {shown(missing[0])!r}, which is not one of its properties: no answer "
            "could ever hold it"
        )
    if not properties:
        return _confirmation(schema, header_length)

    fields: list[Field] = []
    questions: list[QuestionInfo] = []
    texts: list[str] = []
    for key, prop in properties.items():
        field = _parse_property(key, prop, required=key in required, where=f"{where}.properties.{key}")
        if field.kind in ("string", "text"):
            field = _judged(field, _unwrap_optional(prop), allow_sensitive, f"{where}.properties.{key}")
        title = _text(prop, "title")
        description = _text(prop, "description")
        header = shorten(safe(title or description or readable(key)), header_length)
        text = description or title or readable(key)
        fields.append(field)
        questions.append(_question(field, text, header))
        texts.append(text)
    return Form(fields=tuple(fields), questions=tuple(questions), texts=tuple(texts))


def _confirmation(schema: dict, header_length: int) -> Form:
    """An object schema with no properties asks nothing but yes or no (FastMCP's ``ctx.elicit(message,
    response_type=None)``): one closed Yes/No question whose words are the message (and the schema's
    description, if any), headed by the schema's title or "Confirm". It must be answered: Yes accepts
    with empty content, No declines."""
    field = Field(kind="boolean", key=CONFIRM_KEY, required=True)
    header = shorten(safe(_text(schema, "title") or CONFIRM_HEADER), header_length)
    own = _text(schema, "description")
    question = _question(field, own or CONFIRM_TEXT, header)
    return Form(fields=(field,), questions=(question,), texts=(own,), confirm=True)


OPTION_LISTS = frozenset({"enum", "enumNames", "oneOf", "anyOf"})
MAX_PROPERTY_DEPTH = 8
"""Levels of objects and lists in one property schema (``items.anyOf[2].title`` is four)."""


def _check_text_and_sizes(
    schema: Any, max_questions: int, max_options: int | None, max_text_length: int | None
) -> None:
    """Refuse text that is not valid Unicode, and what no person could read (too many questions or
    options, texts longer than the limit), before anything is built: one pass over the JSON in document
    order, so a refusal costs little whatever is sent and names the first offending part."""
    if not isinstance(schema, dict):
        return  # _convert names what is wrong
    properties = schema.get("properties")
    if isinstance(properties, dict) and len(properties) > max_questions:
        raise SchemaError(
            f"requestedSchema has {len(properties)} properties; at most {max_questions} questions may be "
            "asked at once",
            code="too_many_questions",
        )
    stack: list[tuple[Any, str, int]] = [(schema, "requestedSchema", 0)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, str):
            if not valid_text(value):
                raise _text_error(value, where)
            if max_text_length is not None and len(value) > max_text_length:
                what = "the option" if where.endswith("]") and "enum" in where.rsplit(".", 1)[-1] else ""
                raise SchemaError(
                    f"{where}{f' ({what})' if what else ''} is {len(value)} characters long; at most "
                    f"{max_text_length} are allowed",
                    code="text_too_long",
                )
            continue
        if depth > MAX_PROPERTY_DEPTH + 2:  # the schema, its properties, then one property's levels
            raise SchemaError(f"{where} nests deeper than a property schema needs")
        if isinstance(value, dict):
            children = []
            for key, child in value.items():
                if not valid_text(key):
                    raise _text_error({key: None}, where)
                if max_text_length is not None and len(key) > max_text_length:
                    raise SchemaError(
                        f"{where} has a key {len(key)} characters long; at most {max_text_length} are "
                        "allowed",
                        code="text_too_long",
                    )
                children.append((child, f"{where}.{key}", depth + 1))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            owner, _, name = where.rpartition(".")
            if max_options is not None and name in OPTION_LISTS and len(value) > max_options:
                raise SchemaError(
                    f"{owner} offers {len(value)} options; at most {max_options} are allowed",
                    code="too_many_options",
                )
            stack.extend(
                (child, f"{where}[{index}]", depth + 1) for index, child in reversed(list(enumerate(value)))
            )


def _text_error(value: Any, where: str) -> SchemaError:
    """The refusal of ``value`` (found not valid Unicode), worded as the body's check words it."""
    try:
        check_text(value, where)
    except InvalidText as error:
        return SchemaError(error.message, code="invalid_text")
    return SchemaError(f"{where} is not valid Unicode", code="invalid_text")


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


# ---------------------------------------------------------------------------------------------------
# Properties


def _is_legacy(schema: dict) -> bool:
    if "properties" in schema:
        return False
    if "enum" in schema:
        return True
    return schema.get("type") == "array" and isinstance(schema.get("items"), dict)


def _parse_property(key: str, prop: Any, *, required: bool, where: str) -> Field:
    if not isinstance(prop, dict):
        raise SchemaError(f"{where} must be a JSON object (a property schema), not {_json_type(prop)}")
    prop = _unwrap_optional(prop)
    base: dict[str, Any] = {"key": key, "required": required}

    if "enum" in prop:
        options = _enum_options(prop, where)
        _check_options_fit(options, prop, where)
        field = Field(kind="choice", options=options, **base)
    elif (consts := _const_entries(prop)) is not None:
        options = _const_options(consts, prop, f"{where}.oneOf")
        _check_options_fit(options, prop, where)
        field = Field(kind="choice", options=options, **base)
    elif prop.get("type") == "array" and _choice_items(prop.get("items")):
        items = prop["items"]
        if "enum" in items:
            options = _enum_options(items, f"{where}.items", extra_descriptions=prop)
        else:
            entries = _const_entries(items) or []
            options = _const_options(entries, items, f"{where}.items.anyOf", extra_descriptions=prop)
        _check_options_fit(options, items, f"{where}.items")
        min_items = _count(prop, "minItems", where)
        max_items = _count(prop, "maxItems", where)
        if min_items is not None and max_items is not None and min_items > max_items:
            raise SchemaError(f"{where}.minItems is larger than its maxItems")
        if min_items is not None and min_items > len(options):
            raise SchemaError(
                f"{where}: no answer can satisfy it: it needs at least {min_items} choices of "
                f"{len(options)} options"
            )
        field = Field(kind="multi", options=options, min_items=min_items, max_items=max_items, **base)
    elif prop.get("type") == "boolean":
        field = Field(kind="boolean", **base)
    elif prop.get("type") in ("integer", "number"):
        bounds = {name: _bound(prop, alias, where) for name, alias in _BOUNDS}
        multiple_of = _multiple_of(prop, where)
        field = Field(kind=prop["type"], **bounds, multiple_of=multiple_of, **base)
        _check_range_satisfiable(field, where)
    elif prop.get("type") == "string":
        field = _string_field(prop, base, where)
    elif prop.get("type") in ("object", "array"):
        # MCP's requested schemas are flat: a nested object (or a list of anything but choices) has no
        # question that could give the tool the value it names, so it is refused, not asked as text.
        kind = "a nested object" if prop["type"] == "object" else "a list of anything but enum choices"
        raise SchemaError(
            f"{where} is {kind}: elicitation schemas are flat (strings, numbers, integers, booleans, "
            "single or multiple choices)"
        )
    else:
        field = Field(kind="text", **base)

    if "default" in prop and prop["default"] is not None:
        default = _checked_default(field, prop["default"])
        if default is not None:
            field = field.model_copy(update={"has_default": True, "default": default})
    return field


def _string_field(prop: dict, base: dict[str, Any], where: str) -> Field:
    """A string property's checks, refused when no text can pass them all."""
    min_length = _count(prop, "minLength", where)
    max_length = _count(prop, "maxLength", where)
    if min_length is not None and max_length is not None and min_length > max_length:
        raise SchemaError(f"{where}.minLength is larger than its maxLength")
    fmt = prop.get("format")
    fmt = fmt if isinstance(fmt, str) and fmt in STRING_FORMATS else None
    pattern = _pattern(prop.get("pattern"), where)
    field = Field(
        kind="string", min_length=min_length, max_length=max_length, format=fmt, pattern=pattern, **base
    )
    _check_format_length(field, where)
    _check_pattern_satisfiable(field, where)
    return field


_STRING_CHECKS = ("minLength", "maxLength", "format", "pattern")


def _check_options_fit(options: tuple[Option, ...], schema: dict, where: str) -> None:
    """Choices are strings, and the tool's client holds the chosen one against the rest of the schema
    too (its ``type``, ``pattern``, lengths, ``format``): a choice that fails them is refused when asked,
    not when the person picks it."""
    kind = schema.get("type")
    if kind is not None and "string" not in (kind if isinstance(kind, list) else [kind]):
        raise SchemaError(
            f"{where}: no answer can satisfy it: its choices are strings, and its type is {shown(str(kind))}"
        )
    if not any(name in schema for name in _STRING_CHECKS):
        return
    checks = _string_field(schema, {"key": "choice"}, where)
    for option in options:
        try:
            check_value(checks, option.value)
        except ValueProblem as problem:
            text = str(problem)
            subject = "" if text.startswith("'") else f"{shown(option.value)!r} "
            raise SchemaError(
                f"{where}: the choice {shown(option.value)!r} fails the property's own checks "
                f"({subject}{text}): the tool would refuse it"
            ) from None


_BOUNDS = (
    ("minimum", "minimum"),
    ("maximum", "maximum"),
    ("exclusive_minimum", "exclusiveMinimum"),
    ("exclusive_maximum", "exclusiveMaximum"),
)


def _judged(field: Field, prop: dict, allow_sensitive: bool, where: str) -> Field:
    judgement = sensitive.judge(field.key, prop)
    if judgement.refusal is not None and not allow_sensitive:
        raise SchemaError(
            f"{where} looks like it asks for {judgement.refusal}; MCP "
            "forbids asking for secrets in form mode (GATEWAY_ALLOW_SENSITIVE=true allows it)",
            code="sensitive_question",
        )
    return field if judgement.warning is None else field.model_copy(update={"warning": judgement.warning})


def _check_range_satisfiable(field: Field, where: str) -> None:
    """A number range with no number in it (or an integer range with no integer) cannot be answered."""
    lower = _tighter(field.minimum, field.exclusive_minimum, max)
    upper = _tighter(field.maximum, field.exclusive_maximum, min)
    if lower is None or upper is None:
        return
    (low, low_open), (high, high_open) = lower, upper
    if field.kind == "integer":
        first = math.floor(low) + 1 if low_open else math.ceil(low)
        last = math.ceil(high) - 1 if high_open else math.floor(high)
        if first > last:
            raise SchemaError(f"{where}: no answer can satisfy it: there is no whole number in its range")
    elif low > high or (low == high and (low_open or high_open)):
        raise SchemaError(f"{where}: no answer can satisfy it: there is no number in its range")
    if field.multiple_of is not None and not _has_multiple(field.kind, field.multiple_of, low, high):
        raise SchemaError(
            f"{where}: no answer can satisfy it: there is no multiple of {field.multiple_of} in its range"
        )


_SLACK = Fraction(1, 10**9)
"""How far, in steps, a bound may lie from a multiple and still be taken to reach it: floating point
division (as validators check ``multipleOf``) may round a number near a multiple onto it."""


def _has_multiple(kind: str, step: float, low: float, high: float) -> bool:
    """Whether some multiple of ``step`` lies in ``[low, high]`` (exclusive bounds taken as inclusive,
    and for integers only whole steps checked: it refuses only what surely has none)."""
    exact = Fraction(step)
    if kind == "integer":
        if exact.denominator != 1:
            return True
        whole = exact.numerator
        return -(-math.ceil(low) // whole) <= math.floor(high) // whole
    return math.ceil(Fraction(low) / exact - _SLACK) <= math.floor(Fraction(high) / exact + _SLACK)


def _tighter(inclusive: float | None, exclusive: float | None, pick: Any) -> tuple[float, bool] | None:
    """The bound that binds, as ``(value, open)``: ``pick`` is max for lower bounds, min for upper."""
    if inclusive is None and exclusive is None:
        return None
    if exclusive is None:
        return inclusive, False  # type: ignore[return-value]
    if inclusive is None or pick(inclusive, exclusive) == exclusive:
        return exclusive, True
    return inclusive, False


FORMAT_LENGTHS = {"date": (10, 10), "date-time": (20, None), "email": (5, None), "uri": (3, None)}
"""The shortest (and longest) text each format accepts: ``2024-01-31``, ``2024-01-31T09:00:00Z``,
``a@b.c``, ``a:b``."""


def _check_format_length(field: Field, where: str) -> None:
    if field.format is None:
        return
    shortest, longest = FORMAT_LENGTHS[field.format]
    if field.max_length is not None and field.max_length < shortest:
        raise SchemaError(
            f"{where}: no answer can satisfy it: {STRING_FORMATS[field.format]} has at least {shortest} "
            f"characters, and maxLength is {field.max_length}"
        )
    if longest is not None and field.min_length is not None and field.min_length > longest:
        raise SchemaError(
            f"{where}: no answer can satisfy it: {STRING_FORMATS[field.format]} has at most {longest} "
            f"characters, and minLength is {field.min_length}"
        )


def _check_pattern_satisfiable(field: Field, where: str) -> None:
    """A pattern no text matches, or whose matches cannot have a length the property allows."""
    if field.pattern is None:
        return
    found = pattern_shape(field.pattern)
    no_answer = f"{where}: no answer can satisfy it: its pattern {shown(field.pattern)!r}"
    if not found.matchable:
        raise SchemaError(f"{no_answer} can match nothing")
    shortest, longest = field.min_length or 0, field.max_length
    if field.format is not None:
        format_shortest, format_longest = FORMAT_LENGTHS[field.format]
        shortest = max(shortest, format_shortest)
        if format_longest is not None:
            longest = format_longest if longest is None else min(longest, format_longest)
    if longest is not None and found.min_length > longest:
        raise SchemaError(
            f"{no_answer} needs at least {found.min_length} characters, and the answer may have at most "
            f"{longest}"
        )
    if found.whole and found.max_length is not None and found.max_length < shortest:
        raise SchemaError(
            f"{no_answer} matches whole answers of at most {found.max_length} characters, and the answer "
            f"needs at least {shortest}"
        )


def _unwrap_optional(prop: dict) -> dict:
    """``anyOf: [{type: T, ...}, {type: "null"}]`` (and ``type: [T, "null"]``) is asked as T."""
    for combiner in ("anyOf", "oneOf"):
        branches = prop.get(combiner)
        if not isinstance(branches, list) or len(branches) != 2:
            continue
        real = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        if len(real) == 1 and isinstance(real[0], dict):
            merged = {k: v for k, v in prop.items() if k != combiner}
            return {**real[0], **merged}
    kind = prop.get("type")
    if isinstance(kind, list):
        real = [t for t in kind if t != "null"]
        if len(real) == 1:
            return {**prop, "type": real[0]}
    return prop


def _const_list(entries: Any) -> bool:
    return (
        isinstance(entries, list)
        and bool(entries)
        and all(isinstance(e, dict) and "const" in e for e in entries)
    )


def _const_entries(schema: dict) -> list | None:
    """The ``oneOf`` (or ``anyOf``) list of ``{const, title}`` choices, if the schema has one."""
    for combiner in ("oneOf", "anyOf"):
        if _const_list(schema.get(combiner)):
            return schema[combiner]
    return None


def _choice_items(items: Any) -> bool:
    if not isinstance(items, dict):
        return False
    return "enum" in items or _const_entries(items) is not None


def _enum_options(schema: dict, where: str, extra_descriptions: dict | None = None) -> tuple[Option, ...]:
    values = schema["enum"]
    if not isinstance(values, list) or not values:
        raise SchemaError(f"{where}.enum must be a non-empty list of choices")
    if not all(isinstance(v, str) for v in values):
        raise SchemaError(f"{where}.enum must hold only strings")
    names = schema.get("enumNames")
    if names is not None and (
        not isinstance(names, list) or len(names) != len(values) or not all(isinstance(n, str) for n in names)
    ):
        raise SchemaError(f"{where}.enumNames must be a list of strings, one per enum value")
    labels = names or values
    return _options(list(zip(values, labels, strict=True)), schema, extra_descriptions, where)


def _const_options(
    entries: list, schema: dict, where: str, extra_descriptions: dict | None = None
) -> tuple[Option, ...]:
    pairs = []
    for entry in entries:
        value = entry["const"]
        if not isinstance(value, str):
            raise SchemaError(f"{where} must hold only string consts, not {_json_type(value)}")
        title = entry.get("title")
        pairs.append((value, title if isinstance(title, str) and title else value))
    return _options(pairs, schema, extra_descriptions, where)


def _options(
    pairs: list[tuple[str, str]], schema: dict, extra_descriptions: dict | None, where: str
) -> tuple[Option, ...]:
    descriptions: dict[str, Any] = {}
    for source in (extra_descriptions, schema):
        found = (source or {}).get("x-option-descriptions")
        if isinstance(found, dict):
            descriptions.update(found)
    options: list[Option] = []
    seen_values: set[str] = set()
    seen_labels: set[str] = set()
    looks: dict[tuple[str, str], str] = {}
    for value, label in pairs:
        if value in seen_values:
            raise SchemaError(f"{where} lists the choice {value!r} twice")
        seen_values.add(value)
        if label in seen_labels:  # two options must never share a label
            label = f"{label} ({value})"
        seen_labels.add(label)
        _check_distinct(label, looks, where)
        description = descriptions.get(value, descriptions.get(label, ""))
        description = description if isinstance(description, str) else ""
        # Of checked strings: not validated again (a form may hold thousands of options).
        options.append(
            Option.model_construct(_OPTION_FIELDS, value=value, label=label, description=description)
        )
    return tuple(options)


def _check_distinct(label: str, looks: dict[tuple[str, str], str], where: str) -> None:
    """Two options a person cannot tell apart (``Abort`` and ``Abort\\u200b``, a Cyrillic ``А``, a
    trailing space) would let a person pick one while seeing the other: the schema is refused. Labels
    are compared as they read and as the answerers show them."""
    for look in (("reads", skeleton(label)), ("shown", safe(label, oneline=True))):
        other = looks.setdefault(look, label)
        if other != label:
            raise SchemaError(
                f"{where} has the options {shown(other)!r} and {shown(label)!r}, which a person cannot "
                "tell apart (they differ only in invisible characters, look-alike letters or spaces)"
            )


_OPTION_FIELDS = {"value", "label", "description"}
_QUESTION_OPTION_FIELDS = {"label", "description"}
"""Shared by the options built here: pydantic copies such a set before any change."""


def _count(prop: dict, name: str, where: str) -> int | None:
    value = prop.get(name)
    if value is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or value < 0:
        raise SchemaError(f"{where}.{name} must be a non-negative whole number")
    return int(value)


def _bound(prop: dict, name: str, where: str) -> float | None:
    value = prop.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
        raise SchemaError(f"{where}.{name} must be a finite number")
    return value


def _multiple_of(prop: dict, where: str) -> float | None:
    value = _bound(prop, "multipleOf", where)
    if value is not None and value <= 0:
        raise SchemaError(f"{where}.multipleOf must be a number greater than 0, not {value}")
    return value


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _pattern(pattern: Any, where: str) -> str | None:
    """Patterns are ECMA-262 regexes, run in linear time (:mod:`.patterns`): one that cannot be is
    refused when asked, never found out when a person answers."""
    if not isinstance(pattern, str):
        return None
    try:
        compile_pattern(pattern)
    except PatternError as error:
        raise SchemaError(f"{where}.pattern {error}") from None
    return pattern


def _checked_default(field: Field, default: Any) -> Any:
    """The default as the content would carry it, or None when it does not fit the property."""
    try:
        return check_value(field, default)
    except ValueProblem:
        return None


# ---------------------------------------------------------------------------------------------------
# What the person sees


def _question(
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
        _QUESTION_FIELDS,
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
                _QUESTION_OPTION_FIELDS, label=safe(o.label, oneline=True), description=safe(o.description)
            )
            for o in field.options
        ]
    if field.kind == "boolean":
        return list(_BOOLEAN_OPTIONS)
    return []


_QUESTION_FIELDS = {"question", "header", "options", "multiple", "custom"}
_BOOLEAN_OPTIONS = tuple(QuestionOption(label=label) for label in BOOLEAN_LABELS)
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


def _text(prop: Any, name: str) -> str:
    value = prop.get(name) if isinstance(prop, dict) else None
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(prop, dict):  # an optional property keeps its words on the non-null branch
        unwrapped = _unwrap_optional(prop)
        if unwrapped is not prop:
            return _text(unwrapped, name)
    return ""


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"
