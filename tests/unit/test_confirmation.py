"""A plain confirmation (docs/protocol.md, "A schema with no properties"): an object schema whose
``properties`` is empty, as FastMCP 2.x–3.4 send for ``ctx.elicit(message, response_type=None)``, is one
Yes/No question showing the message; Yes accepts with ``{}``, No declines."""

from typing import Any

import pytest

from elicitation_gateway.conversion.answers import AnswerError, answers_to_content, answers_to_result
from elicitation_gateway.conversion.forms import FormCache, Limits
from elicitation_gateway.conversion.schema import CONFIRM_TEXT, SchemaError, build_form

FASTMCP_2 = {"type": "object", "properties": {}}
"""Exactly what FastMCP 2.x–3.4 send for ``ctx.elicit(message, response_type=None)``."""
MESSAGE = "Delete the old builds?"


def test_an_empty_properties_schema_is_one_yes_no_question_showing_the_message() -> None:
    form = build_form(FASTMCP_2, MESSAGE)
    assert form.confirm is True
    assert form.legacy is False
    assert [question.wire() for question in form.questions] == [
        {
            "question": MESSAGE,
            "header": "Confirm",
            "options": [{"label": "Yes", "description": ""}, {"label": "No", "description": ""}],
            "custom": False,
        }
    ]
    [field] = form.fields
    assert (field.kind, field.required, field.has_default) == ("boolean", True, False)
    assert form.texts == ("",)  # the message is the whole question: no words of its own


@pytest.mark.parametrize(
    "schema",
    [
        FASTMCP_2,
        {"properties": {}},
        {"type": "object", "properties": {}, "required": []},
        {"type": "object", "properties": {}, "additionalProperties": False},
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {}},
    ],
    ids=["fastmcp-2", "no-type", "required-empty", "no-additional", "with-$schema"],
)
def test_every_empty_object_schema_is_a_confirmation(schema: dict[str, Any]) -> None:
    form = build_form(schema, MESSAGE)
    assert form.confirm
    assert answers_to_result(form, [["Yes"]]) == {"action": "accept", "content": {}}
    assert answers_to_result(form, [["No"]]) == {"action": "decline"}


@pytest.mark.parametrize(
    ("answer", "result"),
    [
        (["Yes"], {"action": "accept", "content": {}}),
        (["yes"], {"action": "accept", "content": {}}),
        (["true"], {"action": "accept", "content": {}}),
        (["No"], {"action": "decline"}),
        (["no"], {"action": "decline"}),
        (["false"], {"action": "decline"}),
    ],
)
def test_yes_accepts_with_empty_content_and_no_declines(answer: list[str], result: dict[str, Any]) -> None:
    assert answers_to_result(build_form(FASTMCP_2, MESSAGE), [answer]) == result


@pytest.mark.parametrize(
    ("answers", "says"),
    [
        ([], "an answer is required"),
        ([[]], "an answer is required"),
        ([[" "]], "an answer is required"),
        ([["Maybe"]], "'Maybe' is not Yes or No"),
        ([["Yes", "No"]], "expects one answer, not 2"),
        ([["Yes"], ["Yes"]], "2 answers for 1 question"),
    ],
)
def test_a_confirmation_must_be_answered_yes_or_no(answers: list[list[str]], says: str) -> None:
    with pytest.raises(AnswerError) as refused:
        answers_to_result(build_form(FASTMCP_2, MESSAGE), answers)
    assert says in refused.value.message


def test_a_form_with_properties_still_accepts_with_its_content() -> None:
    form = build_form({"type": "object", "properties": {"ok": {"type": "boolean"}}}, MESSAGE)
    assert not form.confirm
    assert answers_to_result(form, [["No"]]) == {"action": "accept", "content": {"ok": False}}
    assert answers_to_result(form, [[]]) == {"action": "accept", "content": {}}


def test_the_schemas_own_words_go_with_the_message() -> None:
    schema = {"type": "object", "title": "Clean up", "description": "Removes 3 GB.", "properties": {}}
    [question] = build_form(schema, MESSAGE).questions
    assert (question.question, question.header) == (f"{MESSAGE}\n\nRemoves 3 GB.", "Clean up")
    assert build_form(schema, "").questions[0].question == "Removes 3 GB."
    assert build_form(schema, "Removes 3 GB.").questions[0].question == "Removes 3 GB."


def test_without_a_message_the_question_still_has_words() -> None:
    [question] = build_form(FASTMCP_2, "").questions
    assert question.question == CONFIRM_TEXT
    assert build_form(FASTMCP_2, "   ").questions[0].question == CONFIRM_TEXT


def test_a_long_title_is_cut_to_the_header_length() -> None:
    schema = {"type": "object", "title": "Really delete everything", "properties": {}}
    assert build_form(schema, MESSAGE, header_length=12).questions[0].header == "Really…"


def test_the_message_is_made_safe_to_show() -> None:
    [question] = build_form(FASTMCP_2, "Delete\x1b[2J now?").questions
    assert "\x1b" not in question.question


@pytest.mark.parametrize("message", ["", MESSAGE, "Another question?"])
def test_a_confirmation_from_the_cache_is_the_form_of_a_conversion(message: str) -> None:
    cache = FormCache(Limits(), 1 << 20)
    cache.form(FASTMCP_2, "warm")
    assert cache.form(FASTMCP_2, message) == build_form(FASTMCP_2, message)
    assert len(cache) == 1


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "object", "properties": {}, "required": ["ok"]}, "requestedSchema.required names 'ok'"),
        ({"type": "object", "properties": {}, "required": "ok"}, "requestedSchema.required must be a list"),
        ({"type": "object", "properties": {}, "required": None}, "requestedSchema.required must be a list"),
        ({"type": "object"}, "requestedSchema must have properties"),
        ({}, "requestedSchema must have properties"),
        ({"type": "string", "properties": {}}, "not type 'string'"),
        ({"type": "object", "properties": []}, "requestedSchema.properties must be an object"),
        ({"type": "object", "properties": None}, "requestedSchema must have properties"),
    ],
)
def test_other_schemas_without_questions_are_still_refused(schema: Any, says: str) -> None:
    with pytest.raises(SchemaError) as refused:
        build_form(schema, MESSAGE)
    assert says in refused.value.message


def test_hostile_text_in_a_confirmation_is_still_refused() -> None:
    with pytest.raises(SchemaError) as refused:
        build_form({"type": "object", "title": "x\ud800", "properties": {}}, MESSAGE)
    assert refused.value.code == "invalid_text"
    with pytest.raises(SchemaError) as refused:
        build_form(
            {"type": "object", "description": "x" * 100, "properties": {}}, MESSAGE, max_text_length=50
        )
    assert refused.value.code == "text_too_long"
    with pytest.raises(SchemaError) as refused:
        build_form(FASTMCP_2, "x" * 100, max_text_length=50)
    assert refused.value.code == "text_too_long"


def test_a_confirmation_has_no_default_answer() -> None:
    """Nobody's silence is a Yes: the empty reply (what ``onTimeout=default`` would send) is refused."""
    with pytest.raises(AnswerError):
        answers_to_content(build_form(FASTMCP_2, MESSAGE), [[]])
