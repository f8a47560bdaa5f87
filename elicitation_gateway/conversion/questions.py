"""Where questions in OpenCode's shape (the ``/mcp`` tool's arguments) become a form, with no schema.

Each question is asked as :func:`.schema.build_form` asks the one optional property that would stand
for it in a ``requestedSchema`` (key ``q<i>``, ``title`` the header, ``description`` the question;
options a single choice, or with ``multiple`` a multiple choice, each option's ``const`` and ``title``
its label; no options, free text): the same limits, the same refusals in the same order with the same
messages (naming the parts of that schema, ``requestedSchema.properties.q0.oneOf`` and so on), and the
same :class:`~.schema.Form`, down to which strings its parts share. Only the words of the tool's
questions are held against the text limit, not that schema's own keywords. Plain functions over plain
data.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from elicitation_gateway.conversion.fields import Field, Option
from elicitation_gateway.conversion.form_model import Form, SchemaError
from elicitation_gateway.conversion.options import OPTION_FIELDS, check_distinct
from elicitation_gateway.conversion.properties import judged
from elicitation_gateway.conversion.schema import with_message
from elicitation_gateway.conversion.schema_checks import check_message, text_error
from elicitation_gateway.conversion.wording import question_of, readable, shorten
from elicitation_gateway.display import safe
from elicitation_gateway.encoding import valid_text
from elicitation_gateway.models import QuestionInfo


class AskedOption(Protocol):
    """One option of a question: what the person picks (``label``) and what it means."""

    @property
    def label(self) -> str: ...
    @property
    def description(self) -> str: ...


class AskedQuestion(Protocol):
    """One question as OpenCode's question tool takes it."""

    @property
    def question(self) -> str: ...
    @property
    def header(self) -> str: ...
    @property
    def options(self) -> Sequence[AskedOption]: ...
    @property
    def multiple(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Questions:
    """Questions asked in OpenCode's shape rather than as a ``requestedSchema``: what
    :meth:`.Gateway.ask` takes in place of a schema (the form cache knows them by :meth:`key`)."""

    items: tuple[AskedQuestion, ...]

    def key(self) -> str:
        """What the form cache knows these questions by: never the key of a schema (JSON text, which
        never starts with ``q``)."""
        plain = [
            [q.question, q.header, [[o.label, o.description] for o in q.options], q.multiple]
            for q in self.items
        ]
        return "questions:" + json.dumps(plain, separators=(",", ":"))


SCHEMA = "requestedSchema"


def form_from_questions(
    questions: Sequence[AskedQuestion],
    message: str = "",
    *,
    header_length: int = 12,
    max_questions: int = 50,
    max_options: int | None = None,
    max_text_length: int | None = None,
    allow_sensitive: bool = False,
) -> Form:
    """The form that asks ``questions`` (at least one, labels within a question distinct), with the
    limits :func:`.schema.build_form` takes; raise :class:`.SchemaError` naming the bad part."""
    if not questions:
        raise ValueError("form_from_questions needs at least one question")
    check_message(message, max_text_length)
    _check_text_and_sizes(questions, max_questions, max_options, max_text_length)
    fields: list[Field] = []
    shown: list[QuestionInfo] = []
    texts: list[str] = []
    for index, asked in enumerate(questions):
        key = f"q{index}"
        where = f"{SCHEMA}.properties.{key}"
        title, description = asked.header.strip(), asked.question.strip()
        # Each field is given the keywords the schema path gives it: what it holds is the same too.
        if asked.options:
            options = _options(asked.options, f"{where}.items.anyOf" if asked.multiple else f"{where}.oneOf")
            if asked.multiple:
                field = Field(
                    kind="multi", options=options, min_items=None, max_items=None, key=key, required=False
                )
            else:
                field = Field(kind="choice", options=options, key=key, required=False)
        else:
            field = Field(
                kind="string",
                min_length=None,
                max_length=None,
                format=None,
                pattern=None,
                key=key,
                required=False,
            )
            field = judged(
                field, {"title": asked.header, "description": asked.question}, allow_sensitive, where
            )
        header = shorten(safe(title or description or readable(key)), header_length)
        text = description or title or readable(key)
        fields.append(field)
        shown.append(question_of(field, text, header))
        texts.append(text)
    form = Form(fields=tuple(fields), questions=tuple(shown), texts=tuple(texts))
    return with_message(form, message)


def _options(asked: Sequence[AskedOption], where: str) -> tuple[Option, ...]:
    """A question's options: each label is also its value (the same string)."""
    options: list[Option] = []
    seen: set[str] = set()
    looks: dict[tuple[str, str], str] = {}
    for option in asked:
        label = option.label
        if label in seen:
            raise SchemaError(f"{where} lists the choice {label!r} twice")
        seen.add(label)
        check_distinct(label, looks, where)
        options.append(
            Option.model_construct(
                OPTION_FIELDS, value=label, label=label, description=option.description or ""
            )
        )
    return tuple(options)


def _check_text_and_sizes(
    questions: Sequence[AskedQuestion],
    max_questions: int,
    max_options: int | None,
    max_text_length: int | None,
) -> None:
    """Refuse text that is not valid Unicode, too many questions or options and texts over the limit,
    before anything is built, naming the first offending part in the order of the schema's JSON: per
    question its header, its question, the labels with a description and those descriptions, the
    number of options, then the labels."""
    if len(questions) > max_questions:
        raise SchemaError(
            f"{SCHEMA} has {len(questions)} properties; at most {max_questions} questions may be asked "
            "at once",
            code="too_many_questions",
        )

    def check(text: str, where: str) -> None:
        if not valid_text(text):
            raise text_error(text, where)
        if max_text_length is not None and len(text) > max_text_length:
            raise SchemaError(
                f"{where} is {len(text)} characters long; at most {max_text_length} are allowed",
                code="text_too_long",
            )

    for index, asked in enumerate(questions):
        where = f"{SCHEMA}.properties.q{index}"
        check(asked.header, f"{where}.title")
        check(asked.question, f"{where}.description")
        if not asked.options:
            continue
        described = {o.label: o.description for o in asked.options if o.description}
        if described:
            within = f"{where}.x-option-descriptions"
            for label in described:
                if not valid_text(label):
                    raise text_error({label: None}, within)
                if max_text_length is not None and len(label) > max_text_length:
                    raise SchemaError(
                        f"{within} has a key {len(label)} characters long; at most {max_text_length} are "
                        "allowed",
                        code="text_too_long",
                    )
            for label, description in described.items():
                check(description, f"{within}.{label}")
        owner = f"{where}.items" if asked.multiple else where
        if max_options is not None and len(asked.options) > max_options:
            raise SchemaError(
                f"{owner} offers {len(asked.options)} options; at most {max_options} are allowed",
                code="too_many_options",
            )
        listed = f"{owner}.anyOf" if asked.multiple else f"{owner}.oneOf"
        for position, option in enumerate(asked.options):
            check(option.label, f"{listed}[{position}].const")
