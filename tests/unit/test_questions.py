"""Questions in OpenCode's shape to a form (``conversion/questions.py``): the same form, limits and
refusals as the ``requestedSchema`` of one optional property per question that ``/mcp`` once built,
kept here as the reference (``reference_schema``)."""

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elicitation_gateway.conversion.answers import answers_to_content
from elicitation_gateway.conversion.forms import FormCache, Limits, footprint
from elicitation_gateway.conversion.questions import Questions, form_from_questions
from elicitation_gateway.conversion.schema import Form, SchemaError, build_form


@dataclass(frozen=True)
class Option:
    label: str
    description: str = ""


@dataclass(frozen=True)
class Question:
    question: str
    header: str
    options: tuple[Option, ...] = ()
    multiple: bool = False


def reference_schema(questions: list[Question]) -> dict[str, Any]:
    """The schema ``/mcp`` built for its questions before it built forms from them directly."""
    properties: dict[str, Any] = {}
    for index, question in enumerate(questions):
        prop: dict[str, Any] = {"title": question.header, "description": question.question}
        if question.options:
            choices = [{"const": option.label, "title": option.label} for option in question.options]
            descriptions = {o.label: o.description for o in question.options if o.description}
            if descriptions:
                prop["x-option-descriptions"] = descriptions
            if question.multiple:
                prop |= {"type": "array", "items": {"anyOf": choices}, "uniqueItems": True}
            else:
                prop |= {"type": "string", "oneOf": choices}
        else:
            prop["type"] = "string"
        properties[f"q{index}"] = prop
    return {"type": "object", "properties": properties}


def outcome(build: Any, *args: Any, **limits: Any) -> Form | tuple[str, str]:
    try:
        return build(*args, **limits)
    except SchemaError as error:
        return (error.code, error.message)


def both(questions: list[Question], message: str = "", **limits: Any) -> tuple[Any, Any]:
    """The new path's form (or refusal) and the reference path's."""
    new = outcome(form_from_questions, questions, message, **limits)
    old = outcome(build_form, reference_schema(questions), message, **limits)
    return new, old


def assert_same(new: Any, old: Any) -> None:
    """The same refusal, or the same form: equal, with the same wire output, the same sharing of strings
    between its parts and the same footprint (what the memory budget charges)."""
    if isinstance(old, tuple) or isinstance(new, tuple):
        assert new == old
        return
    assert new == old
    assert [q.wire_json() for q in new.questions] == [q.wire_json() for q in old.questions]
    assert [f.model_dump() for f in new.fields] == [f.model_dump() for f in old.fields]
    assert [f.model_fields_set for f in new.fields] == [f.model_fields_set for f in old.fields]
    assert new.texts == old.texts
    for new_field, old_field in zip(new.fields, old.fields, strict=True):
        for a, b in zip(new_field.options, old_field.options, strict=True):
            assert (a.value is a.label) == (b.value is b.label)
    assert footprint(new) == footprint(old)


EXCAVATOR = [
    Question(
        "Which model is it?",
        "Model",
        (Option("SY215C", "21 t class"), Option("SY235C", "23 t class")),
    ),
    Question(
        "Which symptoms do you see?", "Symptoms", (Option("Black smoke"), Option("Noise")), multiple=True
    ),
    Question("Anything else?", "Notes"),
]
LIMITS: dict[str, Any] = {
    "header_length": 12,
    "max_questions": 50,
    "max_options": 200,
    "max_text_length": 10_000,
    "allow_sensitive": False,
}


# ---------------------------------------------------------------------------------------------------
# Examples


def test_questions_become_a_choice_a_multiple_choice_and_free_text() -> None:
    form = form_from_questions(EXCAVATOR, **LIMITS)
    assert [q.wire() for q in form.questions] == [
        {
            "question": "Which model is it?",
            "header": "Model",
            "options": [
                {"label": "SY215C", "description": "21 t class"},
                {"label": "SY235C", "description": "23 t class"},
            ],
            "custom": False,
        },
        {
            "question": "Which symptoms do you see?",
            "header": "Symptoms",
            "options": [{"label": "Black smoke", "description": ""}, {"label": "Noise", "description": ""}],
            "multiple": True,
            "custom": False,
        },
        {"question": "Anything else?", "header": "Notes", "options": []},
    ]
    assert [(f.key, f.kind, f.required) for f in form.fields] == [
        ("q0", "choice", False),
        ("q1", "multi", False),
        ("q2", "string", False),
    ]
    content = answers_to_content(form, [["SY235C"], ["Noise", "Black smoke"], ["Loud"]])
    assert content == {"q0": "SY235C", "q1": ["Noise", "Black smoke"], "q2": "Loud"}
    assert_same(*both(EXCAVATOR, **LIMITS))


def test_a_message_goes_before_the_first_question() -> None:
    form = form_from_questions(EXCAVATOR, "Excavator diagnosis", **LIMITS)
    assert form.questions[0].question == "Excavator diagnosis\n\nWhich model is it?"
    assert form.texts[0] == "Which model is it?"
    assert_same(*both(EXCAVATOR, "Excavator diagnosis", **LIMITS))


def test_long_headers_are_shortened_and_blank_ones_take_the_question() -> None:
    questions = [
        Question("Which deployment region should we use?", "Deployment region for the release"),
        Question("Which one?", "   "),
        Question("  ", "  "),
    ]
    form = form_from_questions(questions, **LIMITS)
    assert [q.header for q in form.questions] == ["Deployment…", "Which one?", "Q2"]
    assert form.texts[2] == "Q2"
    assert_same(*both(questions, **LIMITS))


@pytest.mark.parametrize(
    ("questions", "limits", "code", "message"),
    [
        (
            [Question("q", "h")] * 3,
            {"max_questions": 2},
            "too_many_questions",
            "requestedSchema has 3 properties; at most 2 questions may be asked at once",
        ),
        (
            [Question("Pick", "Pick", tuple(Option(str(n)) for n in range(4)), multiple=True)],
            {"max_options": 3},
            "too_many_options",
            "requestedSchema.properties.q0.items offers 4 options; at most 3 are allowed",
        ),
        (
            [Question("Pick", "Pick", (Option("a", "x" * 30),))],
            {"max_text_length": 25},
            "text_too_long",
            "requestedSchema.properties.q0.x-option-descriptions.a is 30 characters long; at most 25 are "
            "allowed",
        ),
        (
            [Question("Pick", "Pick", (Option("y" * 30, "why"),))],
            {"max_text_length": 25},
            "text_too_long",
            "requestedSchema.properties.q0.x-option-descriptions has a key 30 characters long; at most 25 "
            "are allowed",
        ),
        (
            [Question("Pick", "Pick", (Option("y" * 30),))],
            {"max_text_length": 25},
            "text_too_long",
            "requestedSchema.properties.q0.oneOf[0].const is 30 characters long; at most 25 are allowed",
        ),
        (
            [Question("Pick", "Pick", (Option("Abort"), Option("Abort\u200b")))],
            {},
            "invalid_schema",
            "requestedSchema.properties.q0.oneOf has the options 'Abort' and 'Abort\\u200b', which a person "
            "cannot tell apart (they differ only in invisible characters, look-alike letters or spaces)",
        ),
        (
            [Question("Fine", "Fine"), Question("Your password?", "Password")],
            {},
            "sensitive_question",
            "requestedSchema.properties.q1 looks like it asks for a password; MCP forbids asking for secrets "
            "in form mode (GATEWAY_ALLOW_SENSITIVE=true allows it)",
        ),
        (
            [Question("Pick", "Pick", (Option("a"), Option("a")))],
            {},
            "invalid_schema",
            "requestedSchema.properties.q0.oneOf lists the choice 'a' twice",
        ),
        (
            [Question("Bad \ud800", "Bad")],
            {},
            "invalid_text",
            "requestedSchema.properties.q0.description is not valid Unicode: it holds a lone surrogate "
            "(\\ud800) at character 4",
        ),
    ],
    ids=[
        "questions",
        "options",
        "description",
        "described-label",
        "label",
        "look-alike",
        "secret",
        "twice",
        "text",
    ],
)
def test_refusals_name_the_part_as_the_schema_did(
    questions: list[Question], limits: dict[str, Any], code: str, message: str
) -> None:
    with pytest.raises(SchemaError) as caught:
        form_from_questions(questions, **limits)
    assert (caught.value.code, caught.value.message) == (code, message)
    assert_same(*both(questions, **limits))


def test_a_weaker_sign_of_a_secret_is_asked_with_a_warning() -> None:
    form = form_from_questions([Question("Which PIN did you choose?", "PIN")], **LIMITS)
    assert form.fields[0].warning is not None
    assert form.questions[0].question.endswith(form.fields[0].warning)
    allowed = form_from_questions([Question("Password?", "Password")], **LIMITS | {"allow_sensitive": True})
    assert allowed.fields[0].warning is not None


def test_no_questions_is_a_mistake_of_the_caller() -> None:
    with pytest.raises(ValueError, match="at least one question"):
        form_from_questions([])


def test_the_form_cache_knows_questions_apart_from_schemas_and_shares_their_form() -> None:
    cache = FormCache(Limits(), max_bytes=1 << 20)
    asked = Questions(tuple(EXCAVATOR))
    key = cache.key(asked)
    assert key is not None
    assert key.startswith("questions:")
    assert key != cache.key(reference_schema(EXCAVATOR))
    assert key == cache.key(Questions(tuple(EXCAVATOR)))
    assert key != cache.key(Questions(tuple(EXCAVATOR[:2])))
    first, second = cache.form(asked, ""), cache.form(Questions(tuple(EXCAVATOR)), "m")
    assert len(cache) == 1
    assert second.fields is first.fields
    assert second.questions[1:] == first.questions[1:]
    assert first == build_form(reference_schema(EXCAVATOR), "", **vars(Limits()))


# ---------------------------------------------------------------------------------------------------
# Generated questions: the same form, or the same refusal, as the reference schema


WORDS = st.sampled_from(["Yes", "No", "Model", "Which one?", "é", "\U0001f600", " ", "\u202e", "\x07", "a b"])
TEXT = st.one_of(
    WORDS,
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12),
    st.lists(WORDS, min_size=1, max_size=4).map(" ".join),
)
LOOK_ALIKES = st.sampled_from(["A", "\u0410", "Abort", "Abort\u200b", "Abort ", "\u200b", "a", "b"])
"""Labels a person cannot always tell apart (a Cyrillic A, a zero-width space, a trailing space)."""
SECRETS = st.sampled_from(["Password", "api key", "PIN", "token", "What is your passphrase?", "Card number"])
HOSTILE = st.sampled_from(["\ud800", "y\udfff", "x" * 25, "x" * 30, "x" * 45])
"""A lone surrogate, or a text longer than the text limits drawn below."""


@st.composite
def question_lists(draw: st.DrawFn) -> list[Question]:
    """One to seven questions; in some lists, texts that name secrets, look alike, are not valid
    Unicode or are too long."""
    text = st.one_of(*[TEXT] * 8, HOSTILE) if draw(st.booleans()) else TEXT
    label = st.one_of(LOOK_ALIKES, LOOK_ALIKES, text)
    words = st.one_of(text, SECRETS)
    option = st.builds(Option, label, st.one_of(st.just(""), text))
    question = st.builds(
        Question,
        words,
        words,
        st.lists(option, max_size=draw(st.sampled_from([0, 3, 8]))).map(tuple),
        st.booleans(),
    )
    return draw(st.lists(question, min_size=1, max_size=7))


LIMIT_SETS = st.fixed_dictionaries(
    {
        "header_length": st.integers(2, 40),
        "max_questions": st.one_of(st.just(50), st.integers(1, 6)),
        "max_options": st.one_of(st.none(), st.just(200), st.integers(1, 6)),
        # Not below 21: the reference schema's own keywords (``x-option-descriptions``) would count.
        "max_text_length": st.one_of(st.none(), st.just(10_000), st.integers(21, 40), st.integers(21, 40)),
        "allow_sensitive": st.booleans(),
    }
)


@settings(deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    questions=question_lists(),
    message=st.one_of(*[st.just("")] * 4, TEXT, HOSTILE),
    limits=LIMIT_SETS,
)
def test_any_questions_give_the_reference_form_or_its_refusal(
    questions: list[Question], message: str, limits: dict[str, Any]
) -> None:
    assert_same(*both(questions, message, **limits))


@settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    questions=st.lists(
        st.builds(
            Question,
            TEXT,
            TEXT,
            st.lists(st.builds(Option, TEXT, TEXT), unique_by=lambda o: o.label, max_size=5).map(tuple),
            st.booleans(),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_valid_questions_through_the_cache_give_the_reference_form(questions: list[Question]) -> None:
    cache = FormCache(Limits(max_text_length=10_000, max_options=200), max_bytes=1 << 20)
    new = outcome(cache.form, Questions(tuple(questions)), "")
    old = outcome(cache.form, reference_schema(questions), "")
    assert_same(new, old)
