"""Where a ``requestedSchema`` becomes questions: one question per property, in the schema's order.

Plain functions over plain data. ``build_form`` returns a :class:`Form`, which keeps both what the
person sees (``questions``, OpenCode's ``QuestionInfo``) and what the answers are checked against
(``fields``, one per question), so that :mod:`.answers` can turn replies back into typed content.

This module puts the parts together: the checks made before anything is built
(:mod:`.schema_checks`), each property read into a field (:mod:`.properties`, its choices by
:mod:`.options`), and each field's question (:mod:`.wording`), into a :class:`~.form_model.Form`.
"""

from typing import Any

from elicitation_gateway.conversion.fields import Field
from elicitation_gateway.conversion.form_model import (
    CONFIRM_HEADER,
    CONFIRM_KEY,
    CONFIRM_TEXT,
    FORM_FIELDS,
    SOFT_QUESTION_LIMIT,
    Form,
    SchemaError,
    json_type,
)
from elicitation_gateway.conversion.properties import (
    is_legacy,
    judged,
    parse_property,
    text_of,
    unwrap_optional,
)
from elicitation_gateway.conversion.schema_checks import check_message, check_text_and_sizes
from elicitation_gateway.conversion.wording import hints, question_of, readable, shorten
from elicitation_gateway.display import safe
from elicitation_gateway.encoding import shown
from elicitation_gateway.models import QuestionInfo

__all__ = [
    "CONFIRM_HEADER",
    "CONFIRM_KEY",
    "CONFIRM_TEXT",
    "SOFT_QUESTION_LIMIT",
    "Form",
    "SchemaError",
    "build_form",
    "hints",
    "readable",
    "shorten",
    "with_message",
]


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
    check_message(message, max_text_length)
    check_text_and_sizes(schema, max_questions, max_options, max_text_length)
    form = _convert(schema, message, header_length, max_questions, allow_sensitive)
    return form if form.legacy else with_message(form, message)


def with_message(form: Form, message: str, max_text_length: int | None = None) -> Form:
    """The form of a schema asked without a message (``build_form(schema)``), asked with ``message``:
    only the first question changes, everything else is shared. Not for legacy (top-level enum)
    forms, whose only question is worded from the message."""
    assert not form.legacy, "a legacy form is built with its message"
    check_message(message, max_text_length)
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
    first = question_of(form.fields[0], text, plain.header, plain.options)  # its options shared too
    return Form.model_construct(
        FORM_FIELDS,
        fields=form.fields,
        questions=(first, *form.questions[1:]),
        texts=(own, *form.texts[1:]),
        legacy=False,
        confirm=form.confirm,
    )


def _convert(
    schema: Any, message: str, header_length: int, max_questions: int, allow_sensitive: bool
) -> Form:
    where = "requestedSchema"
    if not isinstance(schema, dict):
        raise SchemaError(f"{where} must be a JSON object, not {json_type(schema)}")
    if is_legacy(schema):
        field = parse_property("value", schema, required=True, where=where)
        if field.kind in ("string", "text"):
            field = judged(field, schema, allow_sensitive, where)
        title = schema.get("title") if isinstance(schema.get("title"), str) else None
        header = shorten(safe(title or message or "Question"), header_length)
        question = question_of(field, message or title or "Choose", header)
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
            f"not {json_type(properties)}"
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
        field = parse_property(key, prop, required=key in required, where=f"{where}.properties.{key}")
        if field.kind in ("string", "text"):
            field = judged(field, unwrap_optional(prop), allow_sensitive, f"{where}.properties.{key}")
        title = text_of(prop, "title")
        description = text_of(prop, "description")
        header = shorten(safe(title or description or readable(key)), header_length)
        text = description or title or readable(key)
        fields.append(field)
        questions.append(question_of(field, text, header))
        texts.append(text)
    return Form(fields=tuple(fields), questions=tuple(questions), texts=tuple(texts))


def _confirmation(schema: dict, header_length: int) -> Form:
    """An object schema with no properties asks nothing but yes or no (FastMCP's ``ctx.elicit(message,
    response_type=None)``): one closed Yes/No question whose words are the message (and the schema's
    description, if any), headed by the schema's title or "Confirm". It must be answered: Yes accepts
    with empty content, No declines."""
    field = Field(kind="boolean", key=CONFIRM_KEY, required=True)
    header = shorten(safe(text_of(schema, "title") or CONFIRM_HEADER), header_length)
    own = text_of(schema, "description")
    question = question_of(field, own or CONFIRM_TEXT, header)
    return Form(fields=(field,), questions=(question,), texts=(own,), confirm=True)
