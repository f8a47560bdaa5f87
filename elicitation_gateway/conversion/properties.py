"""One property schema read into a :class:`~.fields.Field`: its kind and checks, refused where no
answer could satisfy it, or where it asks for a secret (pure)."""

import math
from fractions import Fraction
from typing import Any

from elicitation_gateway.conversion import sensitive
from elicitation_gateway.conversion.fields import STRING_FORMATS, Field, Option, ValueProblem, check_value
from elicitation_gateway.conversion.form_model import SchemaError, json_type
from elicitation_gateway.conversion.options import choice_items, const_entries, const_options, enum_options
from elicitation_gateway.conversion.patterns import PatternError, compile_pattern, pattern_shape
from elicitation_gateway.encoding import shown


def is_legacy(schema: dict) -> bool:
    if "properties" in schema:
        return False
    if "enum" in schema:
        return True
    return schema.get("type") == "array" and isinstance(schema.get("items"), dict)


def parse_property(key: str, prop: Any, *, required: bool, where: str) -> Field:
    if not isinstance(prop, dict):
        raise SchemaError(f"{where} must be a JSON object (a property schema), not {json_type(prop)}")
    prop = unwrap_optional(prop)
    base: dict[str, Any] = {"key": key, "required": required}

    if "enum" in prop:
        options = enum_options(prop, where)
        _check_options_fit(options, prop, where)
        field = Field(kind="choice", options=options, **base)
    elif (consts := const_entries(prop)) is not None:
        options = const_options(consts, prop, f"{where}.oneOf")
        _check_options_fit(options, prop, where)
        field = Field(kind="choice", options=options, **base)
    elif prop.get("type") == "array" and choice_items(prop.get("items")):
        items = prop["items"]
        if "enum" in items:
            options = enum_options(items, f"{where}.items", extra_descriptions=prop)
        else:
            entries = const_entries(items) or []
            options = const_options(entries, items, f"{where}.items.anyOf", extra_descriptions=prop)
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


def judged(field: Field, prop: dict, allow_sensitive: bool, where: str) -> Field:
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


def unwrap_optional(prop: dict) -> dict:
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


def text_of(prop: Any, name: str) -> str:
    value = prop.get(name) if isinstance(prop, dict) else None
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(prop, dict):  # an optional property keeps its words on the non-null branch
        unwrapped = unwrap_optional(prop)
        if unwrapped is not prop:
            return text_of(unwrapped, name)
    return ""
