"""The checks made before anything of a schema is built: its message, and one pass over the whole
schema for text that is not valid Unicode, and for sizes no person could read (pure)."""

from typing import Any

from elicitation_gateway.conversion.form_model import SchemaError
from elicitation_gateway.encoding import InvalidText, check_text, valid_text


def check_message(message: str, max_text_length: int | None) -> None:
    if not valid_text(message):
        raise SchemaError(InvalidText("message", "is not valid Unicode").message, code="invalid_text")
    if max_text_length is not None and len(message) > max_text_length:
        raise SchemaError(
            f"message is {len(message)} characters long; at most {max_text_length} are allowed",
            code="text_too_long",
        )


OPTION_LISTS = frozenset({"enum", "enumNames", "oneOf", "anyOf"})
MAX_PROPERTY_DEPTH = 8
"""Levels of objects and lists in one property schema (``items.anyOf[2].title`` is four)."""


def check_text_and_sizes(
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
                raise text_error(value, where)
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
                    raise text_error({key: None}, where)
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


def text_error(value: Any, where: str) -> SchemaError:
    """The refusal of ``value`` (found not valid Unicode), worded as the body's check words it."""
    try:
        check_text(value, where)
    except InvalidText as error:
        return SchemaError(error.message, code="invalid_text")
    return SchemaError(f"{where} is not valid Unicode", code="invalid_text")
