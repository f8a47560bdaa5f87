"""Property-based tests of the conversion: schema to questions and answers to content.

Restricted schemas (random mixes of every property kind that docs/protocol.md's "From schema to
questions" lists, with random constraints, defaults and ``required``) always convert, one question per
property; any reply either becomes content that validates against the schema (``jsonschema``, Draft
2020-12) or is refused with an AnswerError naming real questions; garbage schemas are refused with
SchemaError only.
"""

import math
import string
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from elicitation_gateway.conversion.answers import AnswerError, answers_to_content
from elicitation_gateway.conversion.schema import Form, SchemaError, build_form, shorten

FAST = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])

WORD = st.text(alphabet=string.ascii_letters + string.digits + " _-", min_size=1, max_size=12)
LABEL = st.text(min_size=0, max_size=10)
FORMAT_EXAMPLES = {
    "email": ["ada@example.org", "x.y+z@mail.example.co"],
    "uri": ["https://example.org/a?b=c", "urn:isbn:0451450523", "mailto:ada@example.org"],
    "date": ["2024-02-29", "1999-12-31"],
    "date-time": ["2024-01-01T10:00:00Z", "2024-06-30T23:59:59.125+02:00"],
}
PATTERNS = {"^[a-z]+$": "[a-z]{1,6}", "^[0-9]{3}$": "[0-9]{3}", "^x": "x[a-z]{0,4}"}
JUNK_DEFAULTS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.text(max_size=4),
    st.lists(st.text(max_size=2), max_size=2),
)


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def inner(prop: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of an mcp 1.x optional property (as generated here), else the property."""
    if "anyOf" in prop and prop["anyOf"][-1] == {"type": "null"}:
        return prop["anyOf"][0]
    return prop


def tellable(schema: dict[str, Any]) -> bool:
    """Whether a person can tell the options of ``schema`` (one property, or a legacy schema) apart:
    the conversion refuses options that differ only in invisible characters, look-alikes or spaces."""
    try:
        legacy = "enum" in schema and "properties" not in schema
        build_form(schema if legacy else {"properties": {"p": schema}})
    except SchemaError as error:
        return "tell apart" not in error.message
    return True


# ---------------------------------------------------------------------------------------------------
# Restricted property schemas


@st.composite
def choice_property(draw: st.DrawFn, junk: bool) -> dict[str, Any]:
    values = draw(st.lists(LABEL, min_size=1, max_size=5, unique=True))
    prop: dict[str, Any]
    if draw(st.booleans()):
        prop = {"enum": values}
        if draw(st.booleans()):
            prop["type"] = "string"
        if draw(st.booleans()):
            prop["enumNames"] = draw(st.lists(LABEL, min_size=len(values), max_size=len(values)))
    else:
        entries = [{"const": v, **({"title": draw(LABEL)} if draw(st.booleans()) else {})} for v in values]
        prop = {draw(st.sampled_from(["oneOf", "anyOf"])): entries}
        if draw(st.booleans()):
            prop["type"] = "string"
    if draw(st.booleans()):
        prop["x-option-descriptions"] = {v: draw(LABEL) for v in draw(st.lists(st.sampled_from(values)))}
    if draw(st.booleans()):
        prop["default"] = draw(
            st.one_of(st.sampled_from(values), JUNK_DEFAULTS) if junk else st.sampled_from(values)
        )
    assume(tellable(prop))
    return prop


@st.composite
def multi_property(draw: st.DrawFn, junk: bool) -> dict[str, Any]:
    values = draw(st.lists(LABEL, min_size=1, max_size=5, unique=True))
    if draw(st.booleans()):
        items: dict[str, Any] = {"type": "string", "enum": values}
    else:
        entries = [{"const": v, **({"title": draw(LABEL)} if draw(st.booleans()) else {})} for v in values]
        items = {draw(st.sampled_from(["anyOf", "oneOf"])): entries}
    if draw(st.booleans()):
        items["x-option-descriptions"] = {v: draw(LABEL) for v in draw(st.lists(st.sampled_from(values)))}
    prop: dict[str, Any] = {"type": "array", "items": items}
    low = draw(st.none() | st.integers(0, len(values)))
    high = draw(st.none() | st.integers(max(low or 0, 1), len(values) + 1))
    if low is not None:
        prop["minItems"] = low
    if high is not None:
        prop["maxItems"] = high
    if draw(st.booleans()):
        prop["uniqueItems"] = True
    if draw(st.booleans()):
        size = draw(st.integers(low or 0, min(high if high is not None else len(values), len(values))))
        default = draw(st.permutations(values))[:size]
        prop["default"] = draw(st.one_of(st.just(default), JUNK_DEFAULTS)) if junk else default
    assume(tellable(prop))
    return prop


@st.composite
def boolean_property(draw: st.DrawFn, junk: bool) -> dict[str, Any]:
    prop: dict[str, Any] = {"type": "boolean"}
    if draw(st.booleans()):
        prop["default"] = draw(st.one_of(st.booleans(), JUNK_DEFAULTS) if junk else st.booleans())
    return prop


@st.composite
def integer_property(draw: st.DrawFn, junk: bool) -> dict[str, Any]:
    low = draw(st.integers(-(10**6), 10**6))
    high = draw(st.integers(low, low + 10**6))
    prop: dict[str, Any] = {"type": "integer"}
    lower = draw(st.sampled_from(["minimum", "exclusiveMinimum", None]))
    upper = draw(st.sampled_from(["maximum", "exclusiveMaximum", None]))
    if lower:
        prop[lower] = low if lower == "minimum" else low - 1
    if upper:
        prop[upper] = high if upper == "maximum" else high + 1
    if draw(st.booleans()):
        valid = st.integers(low if lower else -(10**9), high if upper else 10**9)
        prop["default"] = draw(st.one_of(valid, JUNK_DEFAULTS) if junk else valid)
    return prop


@st.composite
def number_property(draw: st.DrawFn, junk: bool) -> dict[str, Any]:
    low = draw(st.floats(-1e6, 1e6))
    high = low + draw(st.floats(1, 1e6))
    prop: dict[str, Any] = {"type": "number"}
    lower = draw(st.sampled_from(["minimum", "exclusiveMinimum", None]))
    upper = draw(st.sampled_from(["maximum", "exclusiveMaximum", None]))
    if lower:
        prop[lower] = low
    if upper:
        prop[upper] = high
    if draw(st.booleans()):
        valid = st.floats(
            low if lower else -1e9,
            high if upper else 1e9,
            exclude_min=lower == "exclusiveMinimum",
            exclude_max=upper == "exclusiveMaximum",
        )
        prop["default"] = draw(st.one_of(valid, JUNK_DEFAULTS) if junk else valid)
    return prop


@st.composite
def string_property(draw: st.DrawFn, junk: bool) -> dict[str, Any]:
    prop: dict[str, Any] = {"type": "string"}
    style = draw(st.sampled_from(["plain", "format", "pattern"]))
    valid: st.SearchStrategy[str]
    if style == "format":
        prop["format"] = draw(st.sampled_from(sorted(FORMAT_EXAMPLES)))
        valid = st.sampled_from(FORMAT_EXAMPLES[prop["format"]])
    elif style == "pattern":
        prop["pattern"] = draw(st.sampled_from(sorted(PATTERNS)))
        valid = st.from_regex(PATTERNS[prop["pattern"]], fullmatch=True)
    else:
        low = draw(st.none() | st.integers(0, 6))
        high = draw(st.none() | st.integers(max(low or 0, 1), 12))
        if low is not None:
            prop["minLength"] = low
        if high is not None:
            prop["maxLength"] = high
        valid = st.text(min_size=low or 0, max_size=high if high is not None else 12)
    if draw(st.booleans()):
        prop["default"] = draw(st.one_of(valid, JUNK_DEFAULTS) if junk else valid)
    return prop


@st.composite
def free_property(draw: st.DrawFn, junk: bool) -> dict[str, Any]:
    """No type: free text (any JSON value fits its schema)."""
    prop: dict[str, Any] = {}
    if draw(st.booleans()):
        prop["default"] = draw(st.text(max_size=6))
    return prop


KINDS = [
    choice_property,
    multi_property,
    boolean_property,
    integer_property,
    number_property,
    string_property,
]


@st.composite
def restricted_property(draw: st.DrawFn, junk: bool = True) -> dict[str, Any]:
    kind = draw(st.sampled_from([*KINDS, free_property]))
    prop = draw(kind(junk))
    if kind is not free_property and kind is not multi_property and draw(st.integers(0, 4)) == 0:
        prop.pop("default", None)  # mcp 1.x optional: anyOf [T, null] with a null default
        prop = {"anyOf": [prop, {"type": "null"}], "default": None}
    if draw(st.booleans()):
        prop["title"] = draw(WORD)
    if draw(st.booleans()):
        prop["description"] = draw(st.text(max_size=30))
    return prop


@st.composite
def restricted_schema(draw: st.DrawFn, junk: bool = True, max_properties: int = 8) -> dict[str, Any]:
    keys = draw(st.lists(WORD, min_size=1, max_size=max_properties, unique=True))
    properties = {key: draw(restricted_property(junk)) for key in keys}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = draw(st.lists(st.sampled_from(keys), unique=True))
    if required or draw(st.booleans()):
        schema["required"] = required
    return schema


# ---------------------------------------------------------------------------------------------------
# Replies


@st.composite
def valid_answer(draw: st.DrawFn, prop: dict[str, Any], question: dict[str, Any]) -> list[str]:
    """An answer the schema allows, written as a person would (option labels, Yes/No, numbers)."""
    spec = inner(prop)
    labels = [option["label"] for option in question["options"]]
    if spec.get("type") == "array":
        low = spec.get("minItems", 0)
        high = min(spec.get("maxItems", len(labels)), len(labels))
        return draw(st.permutations(labels))[: draw(st.integers(low, high))]
    if labels:  # choices and Yes/No
        return [draw(st.sampled_from(labels))]
    if spec.get("type") == "integer":
        low = spec.get("minimum", spec.get("exclusiveMinimum", -(10**9) - 1) + 1)
        high = spec.get("maximum", spec.get("exclusiveMaximum", 10**9 + 1) - 1)
        return [str(draw(st.integers(low, high)))]
    if spec.get("type") == "number":
        number = draw(
            st.floats(
                spec.get("minimum", spec.get("exclusiveMinimum", -1e9)),
                spec.get("maximum", spec.get("exclusiveMaximum", 1e9)),
                exclude_min="exclusiveMinimum" in spec,
                exclude_max="exclusiveMaximum" in spec,
            )
        )
        return [repr(number)]
    if "format" in spec:
        return [draw(st.sampled_from(FORMAT_EXAMPLES[spec["format"]]))]
    if "pattern" in spec:
        return [draw(st.from_regex(PATTERNS[spec["pattern"]], fullmatch=True))]
    low, high = max(spec.get("minLength", 0), 1), spec.get("maxLength", 12)
    return [draw(st.text(min_size=low, max_size=high).filter(str.strip))]


RANDOM_TEXT = st.one_of(
    st.text(max_size=8),
    st.sampled_from(
        ["", " ", "Yes", "No", "yes", "true", "0", "-1", "3.5", "1e400", "nan", "a@b.co", "2024-02-30"]
    ),
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@st.composite
def any_reply(draw: st.DrawFn, schema: dict[str, Any], form: Form) -> list[list[str]]:
    """Answers mixing valid ones, option labels in wrong places, and random strings."""
    all_labels = [option.label for question in form.questions for option in question.options]
    pool = st.one_of(RANDOM_TEXT, st.sampled_from(all_labels)) if all_labels else RANDOM_TEXT
    props = list(schema["properties"].values()) if not form.legacy else [schema]
    answers = []
    for prop, question in zip(props, form.questions, strict=True):
        if draw(st.booleans()):
            answers.append(draw(valid_answer(prop, question.wire())))
        else:
            answers.append(draw(st.lists(pool, max_size=3)))
    count = draw(st.integers(0, len(answers) + 1))
    extra = [draw(st.lists(pool, max_size=2))] if count > len(answers) else []
    return (answers + extra)[:count]


def convert(form: Form, answers: list[list[str]]) -> dict[str, Any] | AnswerError:
    """The content, or the AnswerError refusing the reply (any other exception propagates)."""
    try:
        return answers_to_content(form, answers)
    except AnswerError as error:
        return error


def check_reply(schema: dict[str, Any], form: Form, answers: list[list[str]]) -> dict[str, Any] | AnswerError:
    """Convert; content must validate, a refusal must name real questions; nothing else may be raised."""
    outcome = convert(form, answers)
    if isinstance(outcome, AnswerError):
        indexes = [issue.index for issue in outcome.issues]
        assert all(0 <= index < len(form.questions) for index in indexes)
        assert indexes == sorted(set(indexes))
        for issue in outcome.issues:
            assert issue.header == form.questions[issue.index].header
            assert issue.message
        assert outcome.issues or len(answers) > len(form.questions)
        return outcome
    assert None not in outcome.values()
    if form.legacy:
        assert set(outcome) <= {"value"}
        if "value" in outcome:
            validator(schema).validate(outcome["value"])
    else:
        assert set(outcome) <= set(schema["properties"])
        validator(schema).validate(outcome)
    return outcome


# ---------------------------------------------------------------------------------------------------
# Properties


@FAST
@given(schema=restricted_schema(), header_length=st.integers(1, 40), message=st.text(max_size=20))
def test_restricted_schemas_convert_one_question_per_property(
    schema: dict[str, Any], header_length: int, message: str
) -> None:
    form = build_form(schema, message, header_length=header_length, allow_sensitive=True)
    assert not form.legacy
    assert [field.key for field in form.fields] == list(schema["properties"])
    assert len(form.questions) == len(schema["properties"])
    for prop, field, question in zip(schema["properties"].values(), form.fields, form.questions, strict=True):
        wire = question.wire()
        assert len(wire["header"]) <= header_length
        assert None not in wire.values()
        spec = inner(prop)
        closed = (
            "enum" in spec or "oneOf" in spec or "anyOf" in spec or spec.get("type") in ("array", "boolean")
        )
        assert wire.get("custom") is (False if closed else None)
        assert wire.get("multiple") is (True if spec.get("type") == "array" else None)
        assert (field.key in schema.get("required", [])) == field.required
        if not closed:
            assert wire["options"] == []


@FAST
@given(data=st.data(), schema=restricted_schema(junk=False))
def test_valid_answers_are_accepted_and_validate(data: st.DataObject, schema: dict[str, Any]) -> None:
    """Answers built from the options and constraints (some questions left unanswered where allowed)
    always give content that validates; answered keys are present, defaults fill the rest."""
    form = build_form(schema, "m", allow_sensitive=True)
    required = set(schema.get("required", []))
    answers: list[list[str]] = []
    skipped: set[str] = set()
    for (key, prop), question, field in zip(
        schema["properties"].items(), form.questions, form.fields, strict=True
    ):
        has_default = prop.get("default") is not None
        if (key not in required or has_default) and data.draw(st.integers(0, 3)) == 0:
            # An option shown as "" (a label of control characters only) is picked by "", as it is shown.
            blank_is_option = any("" in (option.label, option.value) for option in field.options) or any(
                option["label"] == "" for option in question.wire()["options"]
            )
            answers.append([] if blank_is_option else data.draw(st.sampled_from([[], [""]])))
            skipped.add(key)
        else:
            answers.append(data.draw(valid_answer(prop, question.wire())))
    content = check_reply(schema, form, answers)
    assert isinstance(content, dict), content
    for key, prop in schema["properties"].items():
        default = prop.get("default")
        answer = answers[list(schema["properties"]).index(key)]
        if key in skipped or answer == []:
            if default is not None:
                assert content[key] == default
            elif key not in required:
                assert key not in content
        else:
            assert key in content
        if key in content and inner(prop).get("type") == "integer":
            assert type(content[key]) is int
        if key in content and inner(prop).get("type") == "number":
            assert type(content[key]) is float


@FAST
@given(data=st.data(), schema=restricted_schema())
def test_any_reply_gives_valid_content_or_names_real_questions(
    data: st.DataObject, schema: dict[str, Any]
) -> None:
    """Replies mixing valid answers, misplaced labels and random strings (or entirely random lists
    of lists of strings): validating content or an AnswerError naming real questions, nothing else."""
    form = build_form(schema, "m", allow_sensitive=True)
    random_lists = st.lists(st.lists(RANDOM_TEXT, max_size=3), max_size=len(form.questions) + 2)
    answers = data.draw(st.one_of(any_reply(schema, form), random_lists))
    check_reply(schema, form, answers)


@st.composite
def legacy_schema(draw: st.DrawFn) -> dict[str, Any]:
    values = draw(st.lists(LABEL, min_size=1, max_size=5, unique=True))
    if draw(st.booleans()):
        schema: dict[str, Any] = {"enum": values}
        if draw(st.booleans()):
            schema["enumNames"] = draw(st.lists(LABEL, min_size=len(values), max_size=len(values)))
        assume(tellable(schema))
        return schema
    assume(tellable({"enum": values}))
    return {"type": "array", "items": {"enum": values}, "uniqueItems": True}


@FAST
@given(data=st.data(), schema=legacy_schema())
def test_legacy_replies_give_valid_value_or_name_the_question(
    data: st.DataObject, schema: dict[str, Any]
) -> None:
    form = build_form(schema, "Pick")
    assert form.legacy
    assert len(form.questions) == 1
    outcome = check_reply(schema, form, data.draw(any_reply(schema, form)))
    if isinstance(outcome, dict):
        assert set(outcome) == {"value"}


# ---------------------------------------------------------------------------------------------------
# Garbage schemas


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([0, 1, -1, 10**400, -(10**400), 2.5, math.inf, -math.inf, math.nan]),
    st.floats(),
    st.text(max_size=6),
    st.sampled_from(["object", "string", "integer", "number", "boolean", "array", "null", "email", "date"]),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)
TRICKY_VALUES = st.sampled_from(
    [math.inf, math.nan, 10**400, -1, 1.5, True, "x", [], [1], ["email"], {"a": 1}]
)
TEMPLATES: list[tuple[dict[str, Any], list[str]]] = [
    ({"type": "string"}, ["format", "minLength", "maxLength", "pattern", "default"]),
    ({"type": "integer"}, ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "default"]),
    ({"type": "number"}, ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "default"]),
    ({"type": "array", "items": {"enum": ["a", "b"]}}, ["minItems", "maxItems", "items", "default"]),
    ({"type": "array", "items": {"anyOf": [{"const": "a"}]}}, ["items", "minItems", "default"]),
    ({"enum": ["a", "b"]}, ["enum", "enumNames", "default", "x-option-descriptions", "type"]),
    ({"oneOf": [{"const": "a", "title": "A"}]}, ["oneOf", "anyOf", "default", "x-option-descriptions"]),
    ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, ["anyOf", "oneOf", "default", "minimum", "type"]),
]


@st.composite
def broken_property(draw: st.DrawFn) -> dict[str, Any]:
    """A property of a known kind with one or two of its keywords set to a strange JSON value."""
    template, keywords = draw(st.sampled_from(TEMPLATES))
    prop = dict(template)
    for keyword in draw(st.lists(st.sampled_from(keywords), min_size=1, max_size=2, unique=True)):
        prop[keyword] = draw(st.one_of(TRICKY_VALUES, JSON_VALUES))
    return prop


KEYWORDS = [
    "type",
    "enum",
    "enumNames",
    "oneOf",
    "anyOf",
    "const",
    "title",
    "description",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "format",
    "pattern",
    "default",
    "x-option-descriptions",
    "properties",
    "required",
]


def schema_like(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(KEYWORDS), st.one_of(JSON_VALUES, children), max_size=5)


GARBAGE_PROPERTY = st.recursive(
    schema_like(JSON_SCALARS), lambda children: schema_like(children), max_leaves=6
)
SCHEMA_SHAPED_GARBAGE = st.fixed_dictionaries(
    {"type": st.one_of(st.just("object"), JSON_SCALARS)},
    optional={
        "properties": st.one_of(
            st.dictionaries(WORD, st.one_of(GARBAGE_PROPERTY, JSON_VALUES), max_size=4), JSON_VALUES
        ),
        "required": st.one_of(st.lists(WORD, max_size=3), JSON_VALUES),
    },
)


@st.composite
def mutated_schema(draw: st.DrawFn) -> dict[str, Any]:
    """A restricted schema with one to three keywords of its properties (or their items) set to junk."""
    schema = draw(restricted_schema(max_properties=4))
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(list(schema["properties"])))
        target = schema["properties"][key]
        if isinstance(target.get("items"), dict) and draw(st.booleans()):
            target = target["items"]
        elif isinstance(branches := target.get("anyOf"), list) and branches and isinstance(branches[0], dict):
            target = branches[0] if draw(st.booleans()) else target
        keyword = draw(
            st.sampled_from(sorted(target)) | st.sampled_from(KEYWORDS)
            if target
            else st.sampled_from(KEYWORDS)
        )
        target[keyword] = draw(st.one_of(TRICKY_VALUES, JSON_VALUES))
    return schema


def convert_schema(schema: Any, max_questions: int) -> Form | SchemaError:
    """The form, or the SchemaError refusing the schema (any other exception propagates)."""
    try:
        return build_form(schema, "m", max_questions=max_questions, allow_sensitive=True)
    except SchemaError as error:
        return error


GARBAGE = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])


def assert_form_or_schema_error(schema: Any, max_questions: int) -> None:
    outcome = convert_schema(schema, max_questions)
    if isinstance(outcome, SchemaError):
        assert outcome.code in ("invalid_schema", "too_many_questions")
        assert outcome.message
    else:
        assert 1 <= len(outcome.questions) <= max_questions
        assert len(outcome.questions) == len(outcome.fields)


@GARBAGE
@given(
    schema=st.one_of(JSON_VALUES, GARBAGE_PROPERTY, SCHEMA_SHAPED_GARBAGE, mutated_schema()),
    max_questions=st.integers(1, 8),
)
def test_garbage_schemas_are_refused_only_with_schema_error(schema: Any, max_questions: int) -> None:
    """Any JSON a tool may send either converts or is refused with SchemaError; never another
    exception (which would be a 500 instead of the contract's 400/422)."""
    assert_form_or_schema_error(schema, max_questions)


@GARBAGE
@given(properties=st.dictionaries(WORD, broken_property(), min_size=1, max_size=3))
def test_strange_keyword_values_are_refused_only_with_schema_error(properties: dict[str, Any]) -> None:
    """Known property kinds whose keywords hold strange JSON (Python's json also yields NaN,
    Infinity and huge integers, lists where strings belong): converted or SchemaError, nothing else."""
    assert_form_or_schema_error({"type": "object", "properties": properties}, 50)


@settings(deadline=None, max_examples=300)
@given(text=st.text(max_size=60), limit=st.integers(1, 40))
def test_shorten_never_exceeds_the_limit_and_keeps_a_prefix(text: str, limit: int) -> None:
    result = shorten(text, limit)
    normal = " ".join(text.split())
    assert len(result) <= limit
    if len(normal) <= limit:
        assert result == normal
    else:
        assert result.endswith("…")
        assert normal.startswith(result[:-1])
