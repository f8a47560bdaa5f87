"""Schema to questions (docs/protocol.md, "From schema to questions"): the pure conversion done by
``build_form``."""

from pathlib import Path
from typing import Any

import pytest

from elicitation_gateway.conversion.answers import answers_to_content
from elicitation_gateway.conversion.schema import (
    SOFT_QUESTION_LIMIT,
    Form,
    SchemaError,
    build_form,
    readable,
    shorten,
)
from tests.conftest import captured_schema_files, load_params

YES_NO = [{"label": "Yes", "description": ""}, {"label": "No", "description": ""}]


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """An object ``requestedSchema`` with the given properties."""
    schema: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    if required is not None:
        schema["required"] = required
    return schema


def one(prop: dict[str, Any], key: str = "field", **kwargs: Any) -> dict[str, Any]:
    """The wire ``QuestionInfo`` of a one-property schema (no request message)."""
    return build_form(obj({key: prop}), "", **kwargs).questions[0].wire()


def labels(question: dict[str, Any]) -> list[str]:
    return [option["label"] for option in question["options"]]


def schema_error(schema: Any, **kwargs: Any) -> SchemaError:
    with pytest.raises(SchemaError) as caught:
        build_form(schema, "msg", **kwargs)
    return caught.value


def convert_or_refusal(schema: Any) -> Form | SchemaError:
    """The form, or the SchemaError refusing the schema (any other exception propagates)."""
    try:
        return build_form(schema, "m")
    except SchemaError as error:
        return error


# ---------------------------------------------------------------------------------------------------
# Legacy top-level schemas


def test_legacy_top_level_enum_is_one_single_choice_question() -> None:
    """``{"enum": [...]}`` at the top: one single-choice question, content under ``value``."""
    form = build_form({"enum": ["PostgreSQL", "SQLite"]}, "Which database?")
    assert form.legacy is True
    assert len(form.questions) == 1
    question = form.questions[0].wire()
    assert labels(question) == ["PostgreSQL", "SQLite"]
    assert "multiple" not in question
    assert question["custom"] is False
    assert question["question"] == "Which database?"
    assert form.fields[0].key == "value"
    assert form.fields[0].kind == "choice"


def test_legacy_top_level_enum_with_enum_names_labels_options() -> None:
    form = build_form({"type": "string", "enum": ["pg", "lite"], "enumNames": ["Postgres", "SQLite"]}, "DB?")
    assert form.legacy is True
    assert labels(form.questions[0].wire()) == ["Postgres", "SQLite"]
    assert answers_to_content(form, [["SQLite"]]) == {"value": "lite"}


def test_legacy_top_level_array_of_enum_is_one_multi_choice_question() -> None:
    form = build_form({"type": "array", "items": {"enum": ["Auth", "Admin", "Billing"]}}, "Which features?")
    assert form.legacy is True
    assert len(form.questions) == 1
    question = form.questions[0].wire()
    assert question["multiple"] is True
    assert question["custom"] is False
    assert labels(question) == ["Auth", "Admin", "Billing"]
    assert form.fields[0].kind == "multi"


def test_legacy_header_is_title_else_message_shortened() -> None:
    titled = build_form({"title": "Database", "enum": ["a", "b"]}, "Which database do you want to use?")
    assert titled.questions[0].header == "Database"
    untitled = build_form({"enum": ["a", "b"]}, "Which database do you want to use?")
    assert untitled.questions[0].header == shorten("Which database do you want to use?", 12)
    assert len(untitled.questions[0].header) <= 12


def test_object_schema_is_not_legacy() -> None:
    form = build_form(obj({"value": {"type": "string", "enum": ["a"]}}), "m")
    assert form.legacy is False


# ---------------------------------------------------------------------------------------------------
# Objects: one question per property, in schema order, keys kept


def test_object_with_one_property_gives_one_question() -> None:
    form = build_form(obj({"name": {"type": "string", "title": "Name"}}), "")
    assert len(form.questions) == 1
    assert form.fields[0].key == "name"
    assert form.questions[0].header == "Name"


def test_properties_become_questions_in_schema_order_with_keys_kept() -> None:
    keys = ["zeta", "alpha", "q0", "Middle Name", "b"]
    form = build_form(obj({key: {"type": "string"} for key in keys}), "")
    assert [field.key for field in form.fields] == keys
    assert [question.header for question in form.questions] == ["Zeta", "Alpha", "Q0", "Middle Name", "B"]
    assert len(form.questions) == len(keys)


def test_required_marks_fields() -> None:
    form = build_form(obj({"a": {"type": "string"}, "b": {"type": "string"}}, required=["b"]), "")
    assert [field.required for field in form.fields] == [False, True]


# ---------------------------------------------------------------------------------------------------
# Property kinds


def test_enum_property_is_single_choice_labelled_by_value() -> None:
    question = one({"type": "string", "enum": ["S", "M", "L"]})
    assert labels(question) == ["S", "M", "L"]
    assert question["custom"] is False
    assert "multiple" not in question


def test_enum_names_become_labels() -> None:
    question = one({"type": "string", "enum": ["dev", "prod"], "enumNames": ["Development", "Production"]})
    assert labels(question) == ["Development", "Production"]
    assert question["custom"] is False


def test_one_of_const_title_labels_are_titles_else_consts() -> None:
    form = build_form(
        obj({"region": {"type": "string", "oneOf": [{"const": "eu", "title": "Europe"}, {"const": "us"}]}}),
        "",
    )
    question = form.questions[0].wire()
    assert labels(question) == ["Europe", "us"]
    assert question["custom"] is False
    assert "multiple" not in question
    assert [option.value for option in form.fields[0].options] == ["eu", "us"]


def test_array_of_items_enum_is_multi_choice() -> None:
    question = one({"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}})
    assert question["multiple"] is True
    assert question["custom"] is False
    assert labels(question) == ["a", "b", "c"]


def test_array_of_items_any_of_const_title_is_multi_choice() -> None:
    form = build_form(
        obj(
            {
                "teams": {
                    "type": "array",
                    "items": {"anyOf": [{"const": "t1", "title": "Team 1"}, {"const": "t2"}]},
                }
            }
        ),
        "",
    )
    question = form.questions[0].wire()
    assert question["multiple"] is True
    assert question["custom"] is False
    assert labels(question) == ["Team 1", "t2"]
    assert [option.value for option in form.fields[0].options] == ["t1", "t2"]


def test_multi_choice_item_count_is_stated() -> None:
    prop = {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2}
    assert "choose 1 to 2" in one(prop)["question"]
    assert "choose at least 2" in one({**prop, "minItems": 2, "maxItems": None})["question"]


def test_boolean_is_yes_no_choice_without_custom() -> None:
    question = one({"type": "boolean", "title": "Vip"})
    assert question["options"] == YES_NO
    assert question["custom"] is False
    assert "multiple" not in question


@pytest.mark.parametrize(
    ("prop", "expected"),
    [
        ({"type": "integer", "minimum": 1, "maximum": 12}, "from 1 to 12"),
        ({"type": "integer", "minimum": 0}, "at least 0"),
        ({"type": "integer", "maximum": 99}, "at most 99"),
        ({"type": "number", "minimum": 0.5, "maximum": 2.5}, "from 0.5 to 2.5"),
        ({"type": "number", "exclusiveMinimum": 0}, "greater than 0"),
        ({"type": "number", "exclusiveMaximum": 1}, "less than 1"),
    ],
)
def test_numbers_are_free_text_stating_the_range(prop: dict[str, Any], expected: str) -> None:
    question = one(prop)
    assert question["options"] == []
    assert "custom" not in question
    assert "multiple" not in question
    assert expected in question["question"]


def test_integer_and_number_say_which_kind_of_number() -> None:
    assert "whole number" in one({"type": "integer"})["question"]
    assert "a number" in one({"type": "number"})["question"]


@pytest.mark.parametrize(
    ("prop", "expected"),
    [
        ({"type": "string", "minLength": 2, "maxLength": 40}, "2–40 characters"),
        ({"type": "string", "minLength": 3}, "at least 3 characters"),
        ({"type": "string", "maxLength": 5}, "at most 5 characters"),
        ({"type": "string", "format": "email"}, "an email address"),
        ({"type": "string", "format": "uri"}, "a URL"),
        ({"type": "string", "format": "date"}, "YYYY-MM-DD"),
        ({"type": "string", "format": "date-time"}, "a date and time"),
    ],
)
def test_strings_are_free_text_with_their_constraints(prop: dict[str, Any], expected: str) -> None:
    question = one(prop)
    assert question["options"] == []
    assert "custom" not in question
    assert expected in question["question"]


def test_string_constraints_are_kept_on_the_field() -> None:
    form = build_form(obj({"s": {"type": "string", "minLength": 2, "maxLength": 9, "format": "email"}}), "")
    field = form.fields[0]
    assert (field.kind, field.min_length, field.max_length, field.format) == ("string", 2, 9, "email")


@pytest.mark.parametrize(
    ("inner", "kind"),
    [
        ({"type": "string"}, "string"),
        ({"type": "integer", "minimum": 1, "maximum": 5}, "integer"),
        ({"type": "number"}, "number"),
        ({"type": "boolean"}, "boolean"),
        ({"type": "string", "enum": ["a", "b"]}, "choice"),
        ({"type": "array", "items": {"enum": ["a", "b"]}}, "multi"),
    ],
)
def test_any_of_with_null_is_asked_as_the_non_null_type(inner: dict[str, Any], kind: str) -> None:
    """mcp 1.x sends optional fields as ``anyOf: [{type: T}, {type: "null"}]``: asked exactly as T."""
    wrapped = {"anyOf": [inner, {"type": "null"}], "default": None, "title": "Opt"}
    form = build_form(obj({"opt": wrapped}), "")
    plain = build_form(obj({"opt": {**inner, "title": "Opt"}}), "")
    assert form.fields[0].kind == kind
    assert form.questions[0].wire() == plain.questions[0].wire()
    assert form.fields[0].has_default is False


def test_any_of_with_null_first_and_words_on_the_branch() -> None:
    prop = {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 2, "description": "How many?"}]}
    question = one(prop)
    assert question["question"].startswith("How many?")
    assert "from" not in question["question"]
    assert "at least 2" in question["question"]


def test_type_list_with_null_is_asked_as_the_non_null_type() -> None:
    assert one({"type": ["boolean", "null"]})["options"] == YES_NO


@pytest.mark.parametrize(
    "prop",
    [
        {},
        {"title": "Anything"},
        {"type": "null"},
        {"type": ["string", "integer"]},
        {"type": "uuid"},
    ],
)
def test_unknown_kinds_are_plain_free_text(prop: dict[str, Any]) -> None:
    form = build_form(obj({"x": prop}), "")
    question = form.questions[0].wire()
    assert form.fields[0].kind == "text"
    assert question["options"] == []
    assert "custom" not in question
    assert "multiple" not in question


def test_custom_false_exactly_on_closed_questions() -> None:
    form = build_form(
        obj(
            {
                "choice": {"type": "string", "enum": ["a"]},
                "titled": {"oneOf": [{"const": "a", "title": "A"}]},
                "multi": {"type": "array", "items": {"enum": ["a"]}},
                "flag": {"type": "boolean"},
                "int": {"type": "integer"},
                "num": {"type": "number"},
                "str": {"type": "string"},
                "mail": {"type": "string", "format": "email"},
                "other": {"type": "null"},
                "untyped": {},
            }
        ),
        "",
    )
    custom = {field.key: q.wire().get("custom") for field, q in zip(form.fields, form.questions, strict=True)}
    assert custom == {
        "choice": False,
        "titled": False,
        "multi": False,
        "flag": False,
        "int": None,
        "num": None,
        "str": None,
        "mail": None,
        "other": None,
        "untyped": None,
    }


# ---------------------------------------------------------------------------------------------------
# Header, question text, message


def test_header_is_title_else_description_else_the_key_in_words() -> None:
    form = build_form(
        obj(
            {
                "k1": {"type": "string", "title": "Name", "description": "Your name"},
                "k2": {"type": "string", "description": "Special requests or notes"},
                "special_requests": {"type": "string"},
                "partySize": {"type": "integer"},
                "value": {"type": "string"},
                "HTTP-port_ID": {"type": "integer"},
            }
        ),
        "",
        header_length=40,
    )
    headers = [q.header for q in form.questions]
    assert headers == [
        "Name",
        "Special requests or notes",
        "Special requests",
        "Party size",
        "Value",
        "HTTP port ID",
    ]


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("value", "Value"),
        ("special_requests", "Special requests"),
        ("specialRequests", "Special requests"),
        ("party-size", "Party size"),
        ("HTTPPort", "HTTPPort"),
        ("userID", "User ID"),
        ("Middle Name", "Middle Name"),
        ("  spaced   out ", "Spaced out"),
        ("_", "_"),
        ("x", "X"),
        ("é_à", "É à"),
    ],
)
def test_readable_turns_a_key_into_words(key: str, words: str) -> None:
    assert readable(key) == words


@pytest.mark.parametrize(
    ("title", "length", "expected"),
    [
        ("Preferred contact method", 12, "Preferred…"),
        ("Preferred contact method", 20, "Preferred contact…"),
        ("Preferred contact method", 30, "Preferred contact method"),
        ("Preferred contact method", 24, "Preferred contact method"),
        ("Preferred contact method", 23, "Preferred contact…"),
        ("Supercalifragilistic", 12, "Supercalifr…"),
        ("Hello world again and again and again", 30, "Hello world again and again…"),
        ("Short", 12, "Short"),
        ("Exactly12chr", 12, "Exactly12chr"),
    ],
)
def test_header_is_shortened_at_a_word_boundary(title: str, length: int, expected: str) -> None:
    question = one({"type": "string", "title": title}, header_length=length)
    assert question["header"] == expected
    assert len(question["header"]) <= length


def test_header_uses_the_key_when_shortening_too() -> None:
    question = one({"type": "string"}, key="preferred_contact_method_for_you")
    assert question["header"] == "Preferred…"


def test_default_header_length_is_twelve() -> None:
    form = build_form(obj({"k": {"type": "string", "title": "A rather long header title"}}), "")
    assert form.questions[0].header == "A rather…"


@pytest.mark.parametrize("length", [5, 8, 12, 16, 30, 40])
def test_headers_never_exceed_the_configured_length(length: int) -> None:
    titles = ["Equipment model number", "x" * 50, "a b c d e f g h i j k l m n", "Notes"]
    form = build_form(
        obj({f"k{i}": {"type": "string", "title": t} for i, t in enumerate(titles)}), "", header_length=length
    )
    for title, question in zip(titles, form.questions, strict=True):
        assert len(question.header) <= length
        if len(title) <= length:
            assert question.header == title
        else:
            assert question.header.endswith("…")
            assert title.startswith(question.header[:-1])


def test_shorten_collapses_whitespace_and_keeps_short_texts() -> None:
    assert shorten("  two   words ", 12) == "two words"
    assert shorten("abc", 3) == "abc"
    assert shorten("abcd", 3) == "ab…"


def test_question_is_description_else_title_else_the_key_in_words() -> None:
    form = build_form(
        obj(
            {
                "a": {"type": "string", "title": "Title A", "description": "Describe A"},
                "b": {"type": "string", "title": "Title B"},
                "c": {"type": "string"},
            }
        ),
        "",
    )
    assert [q.question for q in form.questions] == ["Describe A", "Title B", "C"]


def test_message_is_prepended_to_the_first_question_only() -> None:
    form = build_form(
        obj(
            {
                "a": {"type": "string", "description": "First?"},
                "b": {"type": "string", "description": "Next?"},
            }
        ),
        "Please fill in the booking",
    )
    first, second = (q.question for q in form.questions)
    assert first.startswith("Please fill in the booking")
    assert first.endswith("First?")
    assert second == "Next?"
    assert "Please fill in" not in second


def test_message_shown_on_the_first_of_many_questions() -> None:
    form = build_form(obj({f"k{i}": {"type": "string"} for i in range(5)}), "Intro text")
    assert "Intro text" in form.questions[0].question
    assert all("Intro text" not in q.question for q in form.questions[1:])


# ---------------------------------------------------------------------------------------------------
# Option descriptions and defaults


def test_option_descriptions_on_the_property() -> None:
    question = one(
        {"type": "string", "enum": ["a", "b"], "x-option-descriptions": {"b": "The second one"}},
    )
    assert question["options"] == [
        {"label": "a", "description": ""},
        {"label": "b", "description": "The second one"},
    ]


def test_option_descriptions_on_one_of() -> None:
    question = one(
        {
            "oneOf": [{"const": "now", "title": "Now"}, {"const": "later", "title": "Later"}],
            "x-option-descriptions": {"now": "Machine is down"},
        }
    )
    assert question["options"][0] == {"label": "Now", "description": "Machine is down"}
    assert question["options"][1]["description"] == ""


def test_option_descriptions_on_items() -> None:
    question = one(
        {
            "type": "array",
            "items": {
                "type": "string",
                "enum": ["Black smoke", "Noise"],
                "x-option-descriptions": {"Noise": "Abnormal"},
            },
        }
    )
    assert question["options"] == [
        {"label": "Black smoke", "description": ""},
        {"label": "Noise", "description": "Abnormal"},
    ]


def test_option_descriptions_on_the_array_property() -> None:
    question = one(
        {
            "type": "array",
            "items": {"enum": ["a", "b"]},
            "x-option-descriptions": {"a": "First"},
        }
    )
    assert question["options"][0] == {"label": "a", "description": "First"}


@pytest.mark.parametrize(
    ("prop", "shown"),
    [
        ({"type": "string", "default": "svc"}, "default: svc"),
        ({"type": "string", "default": ""}, "(default: empty)"),
        ({"type": "integer", "default": 2}, "default: 2"),
        ({"type": "number", "default": 100.0}, "default: 100"),
        ({"type": "number", "default": 2.5}, "default: 2.5"),
        ({"type": "boolean", "default": False}, "default: No"),
        ({"type": "boolean", "default": True}, "default: Yes"),
        ({"enum": ["eu", "us"], "enumNames": ["Europe", "US"], "default": "eu"}, "default: Europe"),
        ({"oneOf": [{"const": "eu", "title": "Europe"}, {"const": "us"}], "default": "us"}, "default: us"),
        ({"type": "array", "items": {"enum": ["a", "b", "c"]}, "default": ["a", "c"]}, "default: a, c"),
    ],
)
def test_defaults_are_shown_in_the_question(prop: dict[str, Any], shown: str) -> None:
    form = build_form(obj({"k": prop}), "")
    assert shown in form.questions[0].question
    assert form.fields[0].has_default is True


def test_a_default_that_does_not_fit_is_not_shown() -> None:
    form = build_form(obj({"k": {"type": "integer", "minimum": 1, "default": 0}}), "")
    assert "default" not in form.questions[0].question
    assert form.fields[0].has_default is False


# ---------------------------------------------------------------------------------------------------
# Limits


def test_more_than_the_soft_limit_still_converts() -> None:
    count = SOFT_QUESTION_LIMIT + 1
    assert count == 11
    form = build_form(obj({f"k{i}": {"type": "string"} for i in range(count)}), "")
    assert len(form.questions) == count


def test_exactly_the_hard_limit_converts() -> None:
    form = build_form(obj({f"k{i}": {"type": "string"} for i in range(50)}), "")
    assert len(form.questions) == 50


@pytest.mark.parametrize("limit", [3, 50])
def test_above_the_hard_limit_is_too_many_questions(limit: int) -> None:
    error = schema_error(obj({f"k{i}": {"type": "string"} for i in range(limit + 1)}), max_questions=limit)
    assert error.code == "too_many_questions"
    assert str(limit + 1) in error.message
    assert str(limit) in error.message


# ---------------------------------------------------------------------------------------------------
# Schemas that cannot be asked


@pytest.mark.parametrize(
    ("schema", "part"),
    [
        ("a string", "requestedSchema must be a JSON object"),
        (["a", "list"], "requestedSchema must be a JSON object"),
        (None, "requestedSchema must be a JSON object"),
        (42, "requestedSchema must be a JSON object"),
        ({}, "requestedSchema must have properties"),
        ({"type": "object"}, "requestedSchema must have properties"),
        ({"type": "string"}, "'string'"),
        ({"type": "object", "properties": {}, "required": ["ok"]}, "requestedSchema.required names 'ok'"),
        ({"type": "object", "properties": {}, "required": "ok"}, "requestedSchema.required must be a list"),
        ({"type": "array", "properties": {}}, "'array'"),
        ({"type": "object", "properties": ["a", "b"]}, "requestedSchema.properties must be an object"),
        ({"type": "object", "properties": "a"}, "requestedSchema.properties must be an object"),
        (obj({"color": {"enum": []}}), "requestedSchema.properties.color.enum"),
        (obj({"color": {"enum": "red"}}), "requestedSchema.properties.color.enum"),
        (obj({"color": {"enum": [1, 2]}}), "requestedSchema.properties.color.enum must hold only strings"),
        (
            obj({"color": {"enum": ["a", None]}}),
            "requestedSchema.properties.color.enum must hold only strings",
        ),
        (obj({"color": {"enum": ["a", "a"]}}), "requestedSchema.properties.color"),
        (
            obj({"color": {"enum": ["a", "b"], "enumNames": ["A"]}}),
            "requestedSchema.properties.color.enumNames",
        ),
        (obj({"color": {"oneOf": [{"const": 1, "title": "One"}]}}), "requestedSchema.properties.color.oneOf"),
        (obj({"color": "string"}), "requestedSchema.properties.color must be a JSON object"),
        (obj({"color": ["string"]}), "requestedSchema.properties.color must be a JSON object"),
        (obj({"color": None}), "requestedSchema.properties.color must be a JSON object"),
        (obj({"a": {"type": "string"}}, required="a"), "requestedSchema.required"),
        (obj({"a": {"type": "string"}}, required=[1]), "requestedSchema.required"),
        (obj({"a": {"type": "string"}}, required={"a": True}), "requestedSchema.required"),
        (
            obj({"tags": {"type": "array", "items": {"enum": []}}}),
            "requestedSchema.properties.tags.items.enum",
        ),
        (
            obj({"tags": {"type": "array", "items": {"enum": ["a"]}, "minItems": 2, "maxItems": 1}}),
            "requestedSchema.properties.tags.minItems",
        ),
        (
            obj({"tags": {"type": "array", "items": {"enum": ["a"]}, "minItems": -1}}),
            "requestedSchema.properties.tags.minItems",
        ),
        (
            obj({"s": {"type": "string", "minLength": 5, "maxLength": 2}}),
            "requestedSchema.properties.s.minLength",
        ),
        (obj({"s": {"type": "string", "maxLength": 1.5}}), "requestedSchema.properties.s.maxLength"),
        (obj({"s": {"type": "string", "minLength": "2"}}), "requestedSchema.properties.s.minLength"),
        (obj({"n": {"type": "integer", "minimum": "zero"}}), "requestedSchema.properties.n.minimum"),
        (obj({"n": {"type": "number", "maximum": True}}), "requestedSchema.properties.n.maximum"),
        ({"enum": []}, "requestedSchema.enum"),
        ({"enum": [1]}, "requestedSchema.enum"),
    ],
)
def test_bad_schemas_are_refused_naming_the_offending_part(schema: Any, part: str) -> None:
    error = schema_error(schema)
    assert error.code == "invalid_schema"
    assert part in error.message
    assert str(error) == error.message


UNANSWERABLE = {
    "minimum-above-maximum": {"type": "number", "minimum": 10, "maximum": 5},
    "exclusive-bounds-meet": {"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1},
    "exclusive-minimum-at-maximum": {"type": "number", "exclusiveMinimum": 5, "maximum": 5},
    "minimum-at-exclusive-maximum": {"type": "number", "minimum": 5, "exclusiveMaximum": 5},
    "no-integer-between": {"type": "integer", "minimum": 1.2, "maximum": 1.8},
    "no-integer-between-exclusive": {"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2},
    "integer-minimum-above-maximum": {"type": "integer", "minimum": 3, "maximum": 2},
    "more-selections-than-options": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 3},
    "date-longer-than-a-date": {"type": "string", "format": "date", "minLength": 50},
    "date-shorter-than-a-date": {"type": "string", "format": "date", "maxLength": 9},
    "date-time-too-short": {"type": "string", "format": "date-time", "maxLength": 10},
    "email-too-short": {"type": "string", "format": "email", "maxLength": 4},
    "uri-too-short": {"type": "string", "format": "uri", "maxLength": 2},
    "pattern-empty-class": {"type": "string", "pattern": "[]"},
    "pattern-negated-everything": {"type": "string", "pattern": r"^[^\s\S]+x"},
    "pattern-start-after-a-character": {"type": "string", "pattern": "a^"},
    "pattern-every-branch-impossible": {"type": "string", "pattern": "(?:$a|b[])"},
    "pattern-longer-than-max-length": {"type": "string", "pattern": "abc", "maxLength": 2},
    "pattern-whole-shorter-than-min-length": {"type": "string", "pattern": "^(?:ab|c)$", "minLength": 3},
    "pattern-longer-than-a-date": {"type": "string", "format": "date", "pattern": "[0-9]{11}"},
    "pattern-shorter-than-a-date-time": {"type": "string", "format": "date-time", "pattern": "^.{0,19}$"},
    "multiple-with-no-integer-in-range": {"type": "integer", "minimum": 6, "maximum": 9, "multipleOf": 5},
    "multiple-with-no-number-in-range": {"type": "number", "minimum": 0.1, "maximum": 0.2, "multipleOf": 0.5},
    "choices-of-a-number-type": {"type": "number", "enum": ["1"]},
}

ANSWERABLE_EDGES = {
    "one-number": {"type": "number", "minimum": 5, "maximum": 5},
    "one-integer": {"type": "integer", "minimum": 1.5, "maximum": 2.5},
    "one-integer-exclusive": {"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 3},
    "tighter-exclusive-wins": {"type": "number", "minimum": 0, "exclusiveMinimum": 0, "maximum": 1},
    "all-options": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2},
    "date-exactly": {"type": "string", "format": "date", "minLength": 10, "maxLength": 10},
    "email-shortest": {"type": "string", "format": "email", "maxLength": 5},
    "pattern-as-long-as-allowed": {"type": "string", "pattern": "abc", "maxLength": 3},
    "pattern-whole-as-long-as-needed": {"type": "string", "pattern": "^(?:ab|cde)$", "minLength": 3},
    "pattern-unanchored-longer-text": {"type": "string", "pattern": "^ab", "minLength": 30},
    "pattern-one-branch-possible": {"type": "string", "pattern": "$a|b"},
    "pattern-star-of-nothing": {"type": "string", "pattern": "^[]*$"},
    "multiple-at-the-bounds": {"type": "number", "minimum": 0.25, "maximum": 0.25, "multipleOf": 0.25},
    "multiple-in-an-exclusive-range": {
        "type": "integer",
        "exclusiveMinimum": 4,
        "maximum": 5,
        "multipleOf": 5,
    },
    "choices-of-a-nullable-string": {"type": ["string", "null"], "enum": ["a"], "pattern": "^a$"},
}


@pytest.mark.parametrize("prop", list(UNANSWERABLE.values()), ids=list(UNANSWERABLE))
def test_questions_no_answer_can_satisfy_are_refused(prop: dict[str, Any]) -> None:
    error = schema_error(obj({"k": prop}))
    assert error.code == "invalid_schema"
    assert "requestedSchema.properties.k: no answer can satisfy it" in error.message


@pytest.mark.parametrize(
    ("prop", "says"),
    [
        ({"type": "string", "minLength": 3, "maxLength": 2}, "minLength is larger than its maxLength"),
        ({"type": "array", "items": {"enum": ["a"]}, "minItems": 2, "maxItems": 1}, "minItems is larger"),
        ({"type": "string", "enum": ["ab", "abc"], "minLength": 3}, "the choice 'ab' fails"),
        ({"type": "string", "enum": ["x"], "pattern": "^y"}, "'x' does not match the pattern ^y"),
        (
            {"type": "string", "oneOf": [{"const": "2024-01-31"}, {"const": "soon"}], "format": "date"},
            "'soon'",
        ),
        ({"type": "array", "items": {"enum": ["a", "bb"], "maxLength": 1}}, "k.items: the choice 'bb'"),
        ({"type": "number", "multipleOf": 0}, "multipleOf must be a number greater than 0"),
        ({"type": "number", "multipleOf": float("inf")}, "multipleOf must be a finite number"),
    ],
)
def test_contradictory_constraints_are_refused(prop: dict[str, Any], says: str) -> None:
    error = schema_error(obj({"k": prop}))
    assert error.code == "invalid_schema"
    assert "requestedSchema.properties.k" in error.message
    assert says in error.message


@pytest.mark.parametrize("prop", list(ANSWERABLE_EDGES.values()), ids=list(ANSWERABLE_EDGES))
def test_the_narrowest_answerable_questions_are_asked(prop: dict[str, Any]) -> None:
    assert len(build_form(obj({"k": prop})).questions) == 1


def test_required_must_name_properties_that_exist() -> None:
    error = schema_error(obj({"a": {"type": "string"}}, required=["a", "b"]))
    assert error.code == "invalid_schema"
    assert "requestedSchema.required names 'b'" in error.message


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("(a)\\1", "backreference"),
        ("x(?=y)", "lookaround"),
        ("(", "is not valid ECMAScript"),
        ("(?i)x", "is not valid ECMAScript"),
    ],
)
def test_patterns_that_are_not_ecmascript_or_cannot_run_in_linear_time_are_refused(
    pattern: str, says: str
) -> None:
    error = schema_error(obj({"code": {"type": "string", "pattern": pattern}}))
    assert error.code == "invalid_schema"
    assert "requestedSchema.properties.code.pattern" in error.message
    assert says in error.message


MALFORMED_PROPERTIES = {
    "format-list": {"type": "string", "format": ["email"]},
    "format-object": {"type": "string", "format": {"kind": "email"}},
    "oneOf-not-consts-anyOf-consts": {"oneOf": [1], "anyOf": [{"const": "x"}]},
    "oneOf-without-const-anyOf-consts": {"oneOf": [{"type": "string"}], "anyOf": [{"const": "x"}]},
    "items-anyOf-not-consts-oneOf-consts": {
        "type": "array",
        "items": {"anyOf": [1], "oneOf": [{"const": "x"}]},
    },
    "minLength-Infinity": {"type": "string", "minLength": float("inf")},
    "maxLength-NaN": {"type": "string", "maxLength": float("nan")},
    "maxItems-Infinity": {"type": "array", "items": {"enum": ["a"]}, "maxItems": float("inf")},
    "minimum-huge-integer": {"type": "integer", "minimum": 10**400},
    "number-default-huge-integer": {"type": "number", "default": 10**400},
    "integer-default-huge-over-maximum": {"type": "integer", "maximum": 10, "default": 10**400},
}


@pytest.mark.parametrize(
    "prop",
    list(MALFORMED_PROPERTIES.values()),
    ids=list(MALFORMED_PROPERTIES),
)
def test_malformed_keyword_values_never_crash_the_conversion(prop: dict[str, Any]) -> None:
    """Whatever JSON a tool sends (Python's json accepts NaN, Infinity and huge integers), the
    conversion either asks it or refuses it with a SchemaError (a 4xx), never another exception."""
    outcome = convert_or_refusal(obj({"k": prop}))
    if isinstance(outcome, SchemaError):
        assert outcome.code == "invalid_schema"
        assert "requestedSchema.properties.k" in outcome.message
    else:
        assert len(outcome.questions) == 1


# ---------------------------------------------------------------------------------------------------
# Real-world requests


@pytest.mark.parametrize("path", captured_schema_files(), ids=lambda p: p.stem)
def test_every_captured_schema_converts(path: Path) -> None:
    params = load_params(path)
    schema = params["requestedSchema"]
    form = build_form(schema, params.get("message", ""))
    assert form.questions
    assert len(form.questions) == len(form.fields)
    if form.legacy:
        assert len(form.questions) == 1
        assert [f.key for f in form.fields] == ["value"]
    elif form.confirm:  # no properties: one Yes/No question
        assert schema["properties"] == {}
        assert [f.kind for f in form.fields] == ["boolean"]
    else:
        assert [f.key for f in form.fields] == list(schema["properties"])
    for question in form.questions:
        wire = question.wire()
        assert wire["header"]
        assert len(wire["header"]) <= 12
        assert wire["question"]
        assert None not in wire.values()


def test_captured_mcp_1x_optional_email_is_plain_string() -> None:
    path = next(p for p in captured_schema_files() if p.stem == "mcp-1.30-ctx-elicit-booking")
    form = build_form(load_params(path)["requestedSchema"], "")
    email = next(f for f in form.fields if f.key == "email")
    assert email.kind == "string"
    assert email.has_default is False
    assert form.questions[-1].question == "Contact email"
    assert form.questions[-1].header == "Email"


def test_a_top_level_list_of_free_text_is_refused_as_not_flat() -> None:
    """The legacy top-level form takes a list of choices; a list of free strings has no question."""
    error = schema_error({"type": "array", "title": "Token", "items": {"type": "string"}})
    assert str(error).startswith("requestedSchema is a list of anything but enum choices")


def test_text_that_is_not_valid_unicode_is_refused_naming_the_first_place() -> None:
    """For callers in the process (the /mcp tool, Python): the body's own check does not reach them."""
    schema = obj(
        {"a": {"type": "string", "title": "x\ud800"}, "b": {"enum": ["ok", "\udc00"]}},
        description="\ud801",
    )
    error = schema_error(schema)
    assert error.code == "invalid_text"
    assert error.message.startswith("requestedSchema.properties.a.title is not valid Unicode")
    key_error = schema_error(obj({"k\ud800": {"type": "string"}}))
    assert key_error.message.startswith("requestedSchema.properties has a key that is not valid Unicode")
    with pytest.raises(SchemaError) as message_error:
        build_form(obj({"a": {"type": "string"}}), "m\ud800")
    assert message_error.value.code == "invalid_text"


# ---------------------------------------------------------------------------------------------------
# Options a person cannot tell apart; tool text made safe for OpenCode clients


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Abort", "Abort\u200b"),  # a zero-width space
        ("Abort", "Ab\u00adort"),  # a soft hyphen
        ("Abort", "\u202dAbort"),  # a bidi override
        ("Abort", "Аbort"),  # a Cyrillic А
        ("Abort", "Ａｂｏｒｔ"),  # fullwidth
        ("Abort", "Abort "),  # a trailing space
        ("Abort", "Abort\x1b"),  # a control character
        ("ﬁle", "file"),  # NFKC
    ],
)
def test_options_a_person_cannot_tell_apart_are_refused_naming_the_property(first: str, second: str) -> None:
    for prop in (
        {"type": "string", "enum": [first, second]},
        {"type": "string", "oneOf": [{"const": "a", "title": first}, {"const": "b", "title": second}]},
        {"type": "string", "enum": ["a", "b"], "enumNames": [first, second]},
        {"type": "array", "items": {"enum": [first, second]}},
    ):
        with pytest.raises(SchemaError, match="cannot tell apart") as refused:
            build_form({"type": "object", "properties": {"choice": prop}})
        assert refused.value.code == "invalid_schema"
        assert "requestedSchema.properties.choice" in refused.value.message


def test_options_that_read_differently_are_asked() -> None:
    form = build_form({"properties": {"c": {"enum": ["Abort", "abort", "Abort!", "Сок", "👍", "👍🏽"]}}})
    assert len(form.fields[0].options) == 6


def test_options_shown_alike_are_refused() -> None:
    """A label holding a marker's text and one holding the character it stands for are shown alike."""
    with pytest.raises(SchemaError, match="cannot tell apart"):
        build_form({"properties": {"c": {"enum": ["A⟨U+200B⟩", "A\u200b"]}}})


def test_opencode_clients_get_the_questions_words_made_safe_and_the_answers_map_back() -> None:
    """The OpenCode TUI is a terminal too: ``question``, ``header`` and option labels carry no control
    character and no invisible one; its reply, with the labels it was sent, is the tool's own values."""
    schema = {
        "type": "object",
        "properties": {
            "go": {
                "type": "string",
                "title": "Ship\x1b]0;pwned\x07 it",
                "description": "Deploy \x1b[2Know?\u202e",
                "oneOf": [
                    {"const": "yes", "title": "Yes\x1b[31m, ship"},
                    {"const": "no", "title": "No\u200b\nway"},
                ],
            }
        },
    }
    form = build_form(schema, "tool · deploy: \x1b[1GTrusted")
    question = form.questions[0]
    wire = question.wire_json()
    assert "\\u001b" not in wire
    assert "\u202e" not in wire
    assert "\u200b" not in wire
    assert question.question.startswith("tool · deploy: [1GTrusted\n\nDeploy [2Know?⟨U+202E⟩")
    assert question.header == "Ship]0;pwne…"
    assert [o.label for o in question.options] == ["Yes[31m, ship", "No⟨U+200B⟩ way"]
    assert [o.label for o in form.fields[0].options] == ["Yes\x1b[31m, ship", "No\u200b\nway"]
    assert answers_to_content(form, [["No⟨U+200B⟩ way"]]) == {"go": "no"}
    assert answers_to_content(form, [["Yes\x1b[31m, ship"]]) == {"go": "yes"}
    assert form.texts[0] == "Deploy \x1b[2Know?\u202e"  # the form's own words, as written


def test_an_answer_names_the_option_it_was_shown_as_before_one_whose_value_it_is() -> None:
    """An option of control characters only is shown as nothing; a client answering with the shown
    label "" picks it, not another option whose value is ""."""
    schema = {
        "type": "object",
        "properties": {"pick": {"oneOf": [{"const": "", "title": "Blank"}, {"const": "\x1f"}]}},
        "required": ["pick"],
    }
    form = build_form(schema, "m")
    assert [o.label for o in form.questions[0].options] == ["Blank", ""]
    assert answers_to_content(form, [[""]]) == {"pick": "\x1f"}
    assert answers_to_content(form, [["Blank"]]) == {"pick": ""}
