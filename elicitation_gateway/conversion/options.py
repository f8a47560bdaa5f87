"""A property's choices: read from ``enum`` (with ``enumNames``) or from ``oneOf``/``anyOf`` lists of
``{const, title}``, each labelled and described once, none two a person cannot tell apart (pure)."""

from typing import Any

from elicitation_gateway.conversion.fields import Option
from elicitation_gateway.conversion.form_model import SchemaError, json_type
from elicitation_gateway.display import safe, skeleton
from elicitation_gateway.encoding import shown


def _const_list(entries: Any) -> bool:
    return (
        isinstance(entries, list)
        and bool(entries)
        and all(isinstance(e, dict) and "const" in e for e in entries)
    )


def const_entries(schema: dict) -> list | None:
    """The ``oneOf`` (or ``anyOf``) list of ``{const, title}`` choices, if the schema has one."""
    for combiner in ("oneOf", "anyOf"):
        if _const_list(schema.get(combiner)):
            return schema[combiner]
    return None


def choice_items(items: Any) -> bool:
    if not isinstance(items, dict):
        return False
    return "enum" in items or const_entries(items) is not None


def enum_options(schema: dict, where: str, extra_descriptions: dict | None = None) -> tuple[Option, ...]:
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


def const_options(
    entries: list, schema: dict, where: str, extra_descriptions: dict | None = None
) -> tuple[Option, ...]:
    pairs = []
    for entry in entries:
        value = entry["const"]
        if not isinstance(value, str):
            raise SchemaError(f"{where} must hold only string consts, not {json_type(value)}")
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
        check_distinct(label, looks, where)
        description = descriptions.get(value, descriptions.get(label, ""))
        description = description if isinstance(description, str) else ""
        # Of checked strings: not validated again (a form may hold thousands of options).
        options.append(
            Option.model_construct(OPTION_FIELDS, value=value, label=label, description=description)
        )
    return tuple(options)


def check_distinct(label: str, looks: dict[tuple[str, str], str], where: str) -> None:
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


OPTION_FIELDS = {"value", "label", "description"}
"""Shared by the options built here: pydantic copies such a set before any change."""
