"""Answers to content (docs/protocol.md, From answers to content): ``answers_to_content`` and its checks."""

from typing import Any

import pytest

from elicitation_gateway.conversion.answers import (
    UNANSWERED,
    AnswerError,
    Issue,
    answer_value,
    answers_to_content,
)
from elicitation_gateway.conversion.fields import Field, Option, ValueProblem, check_value
from elicitation_gateway.conversion.schema import Form, SchemaError, build_form


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return schema


def form_of(properties: dict[str, Any], required: list[str] | None = None) -> Form:
    return build_form(obj(properties, required), "Please answer")


def single(prop: dict[str, Any], answer: list[str], *, required: bool = False) -> dict[str, Any]:
    """The content for one property ``k`` answered with ``answer``."""
    return answers_to_content(form_of({"k": prop}, ["k"] if required else None), [answer])


def refusal(form: Form, answers: list[list[str]]) -> AnswerError:
    with pytest.raises(AnswerError) as caught:
        answers_to_content(form, answers)
    return caught.value


def only_issue(form: Form, answers: list[list[str]]) -> Issue:
    error = refusal(form, answers)
    assert len(error.issues) == 1, error.issues
    return error.issues[0]


# ---------------------------------------------------------------------------------------------------
# Every kind's answer becomes the schema's type


def test_integer_answer_becomes_int() -> None:
    content = single({"type": "integer"}, ["42"])
    assert content == {"k": 42}
    assert type(content["k"]) is int


@pytest.mark.parametrize(("text", "value"), [("-7", -7), ("+3", 3), (" 12 ", 12), ("3.0", 3), ("1e3", 1000)])
def test_integer_answers_in_their_written_forms(text: str, value: int) -> None:
    content = single({"type": "integer"}, [text])
    assert content["k"] == value
    assert type(content["k"]) is int


@pytest.mark.parametrize(("text", "value"), [("3", 3.0), ("2.5", 2.5), ("-1e3", -1000.0), (".5", 0.5)])
def test_number_answer_becomes_float(text: str, value: float) -> None:
    content = single({"type": "number"}, [text])
    assert content == {"k": value}
    assert type(content["k"]) is float


@pytest.mark.parametrize(("text", "value"), [("Yes", True), ("No", False)])
def test_boolean_answer_from_yes_no(text: str, value: bool) -> None:
    content = single({"type": "boolean"}, [text])
    assert content["k"] is value


def test_string_answer_is_the_text() -> None:
    assert single({"type": "string"}, ["Loud at idle"]) == {"k": "Loud at idle"}


def test_free_text_of_unknown_kind_is_the_text() -> None:
    assert single({}, ["42"]) == {"k": "42"}
    assert single({"type": "null"}, ["anything"]) == {"k": "anything"}


@pytest.mark.parametrize(
    ("prop", "said"),
    [
        ({"type": "object", "properties": {"a": {"type": "string"}}}, "is a nested object"),
        ({"type": "object"}, "is a nested object"),
        ({"type": "array", "items": {"type": "integer"}}, "is a list of anything but enum choices"),
        ({"type": "array", "items": {"type": "string"}}, "is a list of anything but enum choices"),
        ({"type": "array"}, "is a list of anything but enum choices"),
    ],
)
def test_a_property_no_question_can_give_the_value_of_is_refused_naming_it(prop, said) -> None:
    """MCP's schemas are flat: a field whose value no answer could be is refused, never asked as text."""
    with pytest.raises(SchemaError, match=f"properties.k {said}: elicitation schemas are flat"):
        build_form({"type": "object", "properties": {"k": prop}}, "Nested?")


def test_enum_answer_is_the_enum_value_for_its_label() -> None:
    prop = {"type": "string", "enum": ["dev", "prod"], "enumNames": ["Development", "Production"]}
    assert single(prop, ["Production"]) == {"k": "prod"}


def test_one_of_answer_is_the_const_for_its_title() -> None:
    prop = {"oneOf": [{"const": "eu", "title": "Europe"}, {"const": "us", "title": "US"}]}
    assert single(prop, ["Europe"]) == {"k": "eu"}


def test_multi_select_answer_is_a_list_of_values() -> None:
    prop = {
        "type": "array",
        "items": {"anyOf": [{"const": "t1", "title": "Team 1"}, {"const": "t2", "title": "Team 2"}]},
    }
    content = single(prop, ["Team 2", "Team 1"])
    assert content == {"k": ["t2", "t1"]}
    plain = single({"type": "array", "items": {"enum": ["a", "b", "c"]}}, ["a", "c"])
    assert plain == {"k": ["a", "c"]}


def test_optional_any_of_null_answer_has_the_inner_type() -> None:
    prop = {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": None}
    content = single(prop, ["5"])
    assert content == {"k": 5}
    assert type(content["k"]) is int


def test_mixed_form_gives_each_key_its_type() -> None:
    form = form_of(
        {
            "model": {"type": "string", "enum": ["SY215C", "SY235C"]},
            "symptoms": {"type": "array", "items": {"enum": ["Black smoke", "Noise"]}},
            "hours": {"type": "integer"},
            "budget": {"type": "number"},
            "urgent": {"type": "boolean"},
            "notes": {"type": "string"},
        }
    )
    content = answers_to_content(form, [["SY215C"], ["Black smoke"], ["1200"], ["3"], ["No"], ["ok"]])
    assert content == {
        "model": "SY215C",
        "symptoms": ["Black smoke"],
        "hours": 1200,
        "budget": 3.0,
        "urgent": False,
        "notes": "ok",
    }
    assert [type(v) for v in content.values()] == [str, list, int, float, bool, str]


# ---------------------------------------------------------------------------------------------------
# Labels or values


def test_raw_values_are_accepted_as_well_as_labels() -> None:
    prop = {"type": "string", "enum": ["dev", "prod"], "enumNames": ["Development", "Production"]}
    assert single(prop, ["dev"]) == {"k": "dev"}
    titled = {"oneOf": [{"const": "eu", "title": "Europe"}, {"const": "us", "title": "US"}]}
    assert single(titled, ["us"]) == {"k": "us"}
    multi = {"type": "array", "items": {"enum": ["a", "b"]}}
    assert single(multi, ["b"]) == {"k": ["b"]}


def test_a_label_wins_over_another_options_value() -> None:
    """Option 1 is labelled "y"; option 2's value is "y": the reply "y" means option 1."""
    prop = {"oneOf": [{"const": "x", "title": "y"}, {"const": "y", "title": "z"}]}
    assert single(prop, ["y"]) == {"k": "x"}
    assert single(prop, ["z"]) == {"k": "y"}
    assert single(prop, ["x"]) == {"k": "x"}


def test_a_label_wins_in_multi_select_too() -> None:
    prop = {"type": "array", "items": {"anyOf": [{"const": "x", "title": "y"}, {"const": "y", "title": "z"}]}}
    assert single(prop, ["y"]) == {"k": ["x"]}
    assert single(prop, ["y", "z"]) == {"k": ["x", "y"]}


def test_a_label_wins_with_enum_names() -> None:
    prop = {"enum": ["a", "b"], "enumNames": ["b", "a"]}
    assert single(prop, ["a"]) == {"k": "b"}
    assert single(prop, ["b"]) == {"k": "a"}


def test_boolean_accepts_true_false_words() -> None:
    assert single({"type": "boolean"}, ["true"]) == {"k": True}
    assert single({"type": "boolean"}, ["false"]) == {"k": False}


# ---------------------------------------------------------------------------------------------------
# Checks: each refusal names the question's index and header


@pytest.mark.parametrize(
    ("prop", "answer", "words"),
    [
        ({"type": "integer", "minimum": 1, "maximum": 12}, "0", "minimum"),
        ({"type": "integer", "minimum": 1, "maximum": 12}, "13", "maximum"),
        ({"type": "integer"}, "2.5", "whole number"),
        ({"type": "integer"}, "twelve", "whole number"),
        ({"type": "number", "minimum": 0.5}, "0.25", "minimum"),
        ({"type": "number", "maximum": 1}, "1.5", "maximum"),
        ({"type": "number", "exclusiveMinimum": 0}, "0", "greater than 0"),
        ({"type": "number", "exclusiveMaximum": 1}, "1", "less than 1"),
        ({"type": "number"}, "lots", "not a number"),
        ({"type": "number"}, "1e999", "not a number"),
        ({"type": "boolean"}, "maybe", "Yes or No"),
        ({"type": "string", "minLength": 3}, "ab", "at least 3"),
        ({"type": "string", "maxLength": 3}, "abcd", "at most 3"),
        ({"type": "string", "format": "email"}, "not-an-email", "email"),
        ({"type": "string", "format": "uri"}, "not a url", "URL"),
        ({"type": "string", "format": "date"}, "2024-02-30", "date"),
        ({"type": "string", "format": "date"}, "31/12/2024", "date"),
        ({"type": "string", "format": "date-time"}, "2024-01-01", "date and time"),
        ({"type": "string", "pattern": "^[A-Z]+$"}, "abc", "pattern"),
        ({"type": "string", "enum": ["a", "b"]}, "c", "not one of the options"),
        ({"oneOf": [{"const": "a", "title": "A"}]}, "B", "not one of the options"),
    ],
)
def test_an_answer_that_does_not_fit_is_refused_naming_its_question(
    prop: dict[str, Any], answer: str, words: str
) -> None:
    form = form_of({"first": {"type": "string"}, "hours": {**prop, "title": "Hours"}})
    issue = only_issue(form, [["fine"], [answer]])
    assert issue.index == 1
    assert issue.header == "Hours"
    assert words in issue.message


@pytest.mark.parametrize(
    ("prop", "answer", "value"),
    [
        ({"type": "string", "format": "email"}, "ada@example.org", "ada@example.org"),
        ({"type": "string", "format": "uri"}, "https://example.org/x", "https://example.org/x"),
        ({"type": "string", "format": "date"}, "2024-02-29", "2024-02-29"),
        ({"type": "string", "format": "date-time"}, "2024-01-01T10:00:00Z", "2024-01-01T10:00:00Z"),
        (
            {"type": "string", "format": "date-time"},
            "2024-01-01T10:00:00.5+02:00",
            "2024-01-01T10:00:00.5+02:00",
        ),
        ({"type": "string", "minLength": 2, "maxLength": 3}, "abc", "abc"),
        ({"type": "string", "pattern": "^[A-Z]+$"}, "ABC", "ABC"),
        ({"type": "integer", "minimum": 1, "maximum": 12}, "12", 12),
        ({"type": "integer", "exclusiveMinimum": 0}, "1", 1),
        ({"type": "number", "exclusiveMinimum": 0}, "0.001", 0.001),
        ({"type": "number", "minimum": 0, "maximum": 1}, "1", 1.0),
    ],
)
def test_an_answer_that_fits_is_kept(prop: dict[str, Any], answer: str, value: Any) -> None:
    content = single(prop, [answer])
    assert content == {"k": value}
    assert type(content["k"]) is type(value)


@pytest.mark.parametrize(
    ("items", "extra", "answer", "words"),
    [
        ({"enum": ["a", "b", "c"]}, {"minItems": 2}, ["a"], "at least 2"),
        ({"enum": ["a", "b", "c"]}, {"maxItems": 2}, ["a", "b", "c"], "at most 2"),
        ({"enum": ["a", "b", "c"]}, {}, ["a", "a"], "more than once"),
        ({"enum": ["a", "b", "c"]}, {}, ["a", "d"], "not one of the options"),
        ({"anyOf": [{"const": "x", "title": "X"}]}, {}, ["X", "x"], "more than once"),
    ],
)
def test_multi_select_checks(
    items: dict[str, Any], extra: dict[str, Any], answer: list[str], words: str
) -> None:
    form = form_of(
        {"note": {"type": "string"}, "tags": {"type": "array", "items": items, "title": "Tags", **extra}}
    )
    issue = only_issue(form, [["n"], answer])
    assert (issue.index, issue.header) == (1, "Tags")
    assert words in issue.message


def test_multi_select_within_item_counts_is_kept() -> None:
    prop = {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2}
    assert single(prop, ["c", "a"]) == {"k": ["c", "a"]}


def test_single_answer_questions_refuse_several_answers() -> None:
    form = form_of({"k": {"type": "string", "enum": ["a", "b"], "title": "Pick"}})
    issue = only_issue(form, [["a", "b"]])
    assert (issue.index, issue.header) == (0, "Pick")
    assert "one answer" in issue.message


def test_several_failing_answers_give_one_issue_each() -> None:
    form = form_of(
        {
            "name": {"type": "string", "title": "Name", "minLength": 2},
            "ok": {"type": "string", "title": "Fine"},
            "hours": {"type": "integer", "title": "Hours"},
            "mail": {"type": "string", "format": "email", "title": "Mail"},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 1, "title": "Tags"},
            "pick": {"enum": ["x", "y"], "title": "Pick"},
            "flag": {"type": "boolean", "title": "Flag"},
        }
    )
    error = refusal(form, [["a"], ["fine"], ["many"], ["nope"], ["a", "b"], ["z"], ["maybe"]])
    assert [(issue.index, issue.header) for issue in error.issues] == [
        (0, "Name"),
        (2, "Hours"),
        (3, "Mail"),
        (4, "Tags"),
        (5, "Pick"),
        (6, "Flag"),
    ]
    assert all(issue.message for issue in error.issues)
    assert error.message.startswith("6 answers do not fit")
    for issue in error.issues:
        assert issue.header in error.message


def test_issue_headers_are_the_shown_headers() -> None:
    form = form_of({"long": {"type": "integer", "title": "Number of operating hours"}})
    issue = only_issue(form, [["x"]])
    assert issue.header == form.questions[0].header
    assert issue.header != "Number of operating hours"


# ---------------------------------------------------------------------------------------------------
# Unanswered questions


UNANSWERED_REPLIES = [pytest.param([], id="empty"), pytest.param([""], id="blank")]


@pytest.mark.parametrize("blank", UNANSWERED_REPLIES)
@pytest.mark.parametrize(
    ("prop", "default"),
    [
        ({"type": "string", "default": "svc"}, "svc"),
        ({"type": "integer", "default": 2}, 2),
        ({"type": "number", "default": 100}, 100.0),
        ({"type": "boolean", "default": False}, False),
        ({"enum": ["S", "M", "L"], "default": "M"}, "M"),
        ({"oneOf": [{"const": "eu", "title": "Europe"}], "default": "eu"}, "eu"),
        ({"type": "array", "items": {"enum": ["a", "b"]}, "default": ["b"]}, ["b"]),
    ],
)
@pytest.mark.parametrize("required", [False, True])
def test_unanswered_uses_the_default(
    prop: dict[str, Any], default: Any, blank: list[str], required: bool
) -> None:
    content = single(prop, blank, required=required)
    assert content == {"k": default}
    assert type(content["k"]) is type(default)


@pytest.mark.parametrize("blank", UNANSWERED_REPLIES)
@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string"},
        {"type": "integer"},
        {"type": "number"},
        {"type": "boolean"},
        {"enum": ["a", "b"]},
        {"type": "array", "items": {"enum": ["a", "b"]}},
        {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1},
        {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        {},
    ],
)
def test_unanswered_optional_is_left_out(prop: dict[str, Any], blank: list[str]) -> None:
    form = form_of({"a": {"type": "string"}, "k": prop})
    assert answers_to_content(form, [["x"], blank]) == {"a": "x"}


@pytest.mark.parametrize("blank", UNANSWERED_REPLIES)
@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string"},
        {"type": "integer"},
        {"type": "number"},
        {"type": "boolean"},
        {"enum": ["a", "b"]},
        {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1},
        {},
    ],
)
def test_unanswered_required_is_refused(prop: dict[str, Any], blank: list[str]) -> None:
    form = form_of({"a": {"type": "string"}, "k": {**prop, "title": "Needed"}}, required=["k"])
    issue = only_issue(form, [["x"], blank])
    assert (issue.index, issue.header) == (1, "Needed")
    assert "required" in issue.message


@pytest.mark.parametrize("blank", UNANSWERED_REPLIES)
@pytest.mark.parametrize("extra", [{}, {"minItems": 0}], ids=["no-minItems", "minItems-0"])
def test_unanswered_required_multi_select_allowing_none_is_an_empty_list(
    extra: dict[str, Any], blank: list[str]
) -> None:
    content = single({"type": "array", "items": {"enum": ["a", "b"]}, **extra}, blank, required=True)
    assert content == {"k": []}


def test_blank_is_an_answer_when_it_is_an_option() -> None:
    assert single({"enum": ["", "x"]}, [""], required=True) == {"k": ""}


def test_a_default_that_does_not_fit_is_not_used() -> None:
    form = form_of({"k": {"type": "integer", "minimum": 1, "default": 0}}, required=["k"])
    assert "required" in only_issue(form, [[]]).message
    assert answers_to_content(form_of({"k": {"type": "integer", "minimum": 1, "default": 0}}), [[]]) == {}


def test_answer_value_reports_unanswered_optional() -> None:
    field = Field(key="k", kind="string")
    assert answer_value(field, []) is UNANSWERED
    assert answer_value(field, [""]) is UNANSWERED
    with pytest.raises(ValueProblem, match="required"):
        answer_value(field.model_copy(update={"required": True}), [])


# ---------------------------------------------------------------------------------------------------
# Legacy content, answer counts, positions


def test_legacy_single_choice_content_is_value() -> None:
    form = build_form({"enum": ["PostgreSQL", "SQLite", "MySQL"]}, "Which database?")
    assert answers_to_content(form, [["SQLite"]]) == {"value": "SQLite"}


def test_legacy_multi_choice_content_is_value_list() -> None:
    form = build_form({"type": "array", "items": {"enum": ["Auth", "Admin", "Billing"]}}, "Which features?")
    assert answers_to_content(form, [["Billing", "Auth"]]) == {"value": ["Billing", "Auth"]}
    assert answers_to_content(form, [[]]) == {"value": []}


def test_legacy_single_choice_must_be_answered() -> None:
    form = build_form({"enum": ["a", "b"]}, "Pick")
    issue = only_issue(form, [[]])
    assert issue.index == 0
    assert "required" in issue.message


def test_legacy_single_choice_refuses_a_non_option() -> None:
    form = build_form({"enum": ["a", "b"]}, "Pick")
    assert only_issue(form, [["c"]]).index == 0


def test_too_many_answers_are_refused() -> None:
    form = form_of({"a": {"type": "string"}, "b": {"type": "string"}})
    error = refusal(form, [["1"], ["2"], ["3"]])
    assert "3 answers" in error.message
    assert "2 questions" in error.message


def test_fewer_answers_leave_the_rest_unanswered() -> None:
    form = form_of(
        {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "integer", "default": 4}},
        required=["a"],
    )
    assert answers_to_content(form, [["x"]]) == {"a": "x", "c": 4}
    assert answers_to_content(form, [["x"], ["y"]]) == {"a": "x", "b": "y", "c": 4}


def test_no_answers_at_all_refuse_the_required_ones() -> None:
    form = form_of({"a": {"type": "string"}, "b": {"type": "string", "title": "B"}}, required=["b"])
    issue = only_issue(form, [])
    assert (issue.index, issue.header) == (1, "B")


@pytest.mark.parametrize("count", [1, 2, 10, 11])
def test_answer_i_fills_the_ith_key(count: int) -> None:
    keys = [f"key_{(7 * i) % count}_{chr(122 - i)}" for i in range(count)]  # deliberately not sorted
    form = form_of({key: {"type": "string"} for key in keys})
    answers = [[f"answer {i}"] for i in range(count)]
    content = answers_to_content(form, answers)
    assert list(content) == keys
    assert content == {key: f"answer {i}" for i, key in enumerate(keys)}


def test_answer_i_fills_the_ith_key_with_mixed_kinds() -> None:
    form = form_of(
        {
            "zebra": {"type": "integer"},
            "apple": {"type": "boolean"},
            "mango": {"enum": ["a", "b"]},
        }
    )
    assert answers_to_content(form, [["5"], ["Yes"], ["b"]]) == {"zebra": 5, "apple": True, "mango": "b"}


def test_content_never_holds_none() -> None:
    form = form_of(
        {
            "email": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "count": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "note": {"type": "string", "default": None},
            "pick": {"enum": ["a"], "default": None},
        }
    )
    assert answers_to_content(form, [[], [""], [], []]) == {}
    content = answers_to_content(form, [["a@b.co"], ["3"], ["n"], ["a"]])
    assert None not in content.values()
    assert content == {"email": "a@b.co", "count": 3, "note": "n", "pick": "a"}


# ---------------------------------------------------------------------------------------------------
# check_value: typed values against a field


def test_check_value_types() -> None:
    assert check_value(Field(key="k", kind="integer"), 3.0) == 3
    assert type(check_value(Field(key="k", kind="integer"), 3.0)) is int
    assert type(check_value(Field(key="k", kind="number"), 3)) is float
    assert check_value(Field(key="k", kind="boolean"), True) is True
    options = (Option(value="a", label="A"), Option(value="b", label="B"))
    assert check_value(Field(key="k", kind="multi", options=options), ["b", "a"]) == ["b", "a"]
    assert check_value(Field(key="k", kind="choice", options=options), "a") == "a"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (Field(key="k", kind="integer"), True),
        (Field(key="k", kind="integer"), "3"),
        (Field(key="k", kind="integer"), 2.5),
        (Field(key="k", kind="integer", minimum=1), 0),
        (Field(key="k", kind="number"), float("nan")),
        (Field(key="k", kind="number"), float("inf")),
        (Field(key="k", kind="number", maximum=1), 1.5),
        (Field(key="k", kind="boolean"), 1),
        (Field(key="k", kind="string"), 5),
        (Field(key="k", kind="string", min_length=2), "a"),
        (Field(key="k", kind="string", format="email"), "nope"),
        (Field(key="k", kind="choice", options=(Option(value="a", label="A"),)), "A"),
        (Field(key="k", kind="multi", options=(Option(value="a", label="A"),)), "a"),
        (Field(key="k", kind="multi", options=(Option(value="a", label="A"),)), ["a", "a"]),
        (Field(key="k", kind="multi", options=(Option(value="a", label="A"),), min_items=1), []),
    ],
)
def test_check_value_refuses_values_that_do_not_fit(field: Field, value: Any) -> None:
    with pytest.raises(ValueProblem):
        check_value(field, value)
