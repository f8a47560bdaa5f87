"""Every captured real-world elicitation request, end to end through real HTTP.

For each file in tests/fixtures/schemas: ``POST /elicit`` converts it (one question per property, or one
for the legacy top-level forms), an answerer answers with valid answers derived generically from the
announced questions and the original schema, and the tool's ``content`` validates against the schema
(``jsonschema``, Draft 2020-12), with JSON-typed values, no nulls, and defaults where a question was
left unanswered. For the captures of the Python SDKs (mcp 2.3, mcp 1.30, FastMCP), the content is also
checked the way the sending SDK checks it: against the equivalent pydantic model.
"""

import json
import math
from dataclasses import dataclass, make_dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from jsonschema import Draft202012Validator
from mcp.server.elicitation import render_elicitation_schema
from pydantic import BaseModel, Field, TypeAdapter

from elicitation_gateway.conversion.schema import readable
from tests.conftest import captured_schema_files, load_params
from tests.helpers import ask, read_events

ALL_FILES = captured_schema_files()
CONFIRM_FILES = [p for p in ALL_FILES if load_params(p)["requestedSchema"].get("properties") == {}]
"""Plain confirmations (no properties): one Yes/No question, no content to check (tests/http/
test_confirmation.py and the test at the end here)."""
SCHEMA_FILES = [p for p in ALL_FILES if p not in CONFIRM_FILES]

# ---------------------------------------------------------------------------------------------------
# Reading a captured schema


@dataclass(frozen=True)
class Prop:
    """One asked property: its content key, its schema (optional ``anyOf`` null unwrapped), required."""

    key: str
    schema: dict[str, Any]
    required: bool
    legacy: bool = False


def is_legacy(schema: dict[str, Any]) -> bool:
    """A top-level enum or array-of-enum schema: one question, content ``{"value": ...}``."""
    return "properties" not in schema


def unwrap_optional(prop: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [{type: T, ...}, {type: "null"}]`` (mcp 1.x optional fields) is asked as T."""
    branches = prop.get("anyOf")
    if isinstance(branches, list) and len(branches) == 2:
        real = [b for b in branches if b.get("type") != "null"]
        if len(real) == 1 and "const" not in real[0]:
            return {**real[0], **{k: v for k, v in prop.items() if k != "anyOf"}}
    return prop


def props_of(schema: dict[str, Any]) -> list[Prop]:
    if is_legacy(schema):
        return [Prop("value", schema, required=True, legacy=True)]
    required = set(schema.get("required", []))
    return [Prop(key, unwrap_optional(p), key in required) for key, p in schema["properties"].items()]


def choice_values(schema: dict[str, Any]) -> list[str] | None:
    """The values of a single-choice schema (``enum``, or ``oneOf``/``anyOf`` of consts), else None."""
    if "enum" in schema:
        return list(schema["enum"])
    for combiner in ("oneOf", "anyOf"):
        entries = schema.get(combiner)
        if isinstance(entries, list) and entries and all("const" in e for e in entries):
            return [e["const"] for e in entries]
    return None


def choice_labels(schema: dict[str, Any]) -> list[str]:
    """The labels a person sees: ``enumNames``, else ``oneOf`` titles, else the values."""
    if "enum" in schema:
        return list(schema.get("enumNames") or schema["enum"])
    entries = schema.get("oneOf") or schema.get("anyOf")
    return [e.get("title") or e["const"] for e in entries]


def has_default(prop: Prop) -> bool:
    return prop.schema.get("default") is not None


# ---------------------------------------------------------------------------------------------------
# Checking each question against its property, and building a valid answer for it


def check_question(prop: Prop, question: dict[str, Any]) -> None:
    """The announced question has the shape that docs/protocol.md ("From schema to questions") gives
    the property's kind."""
    schema = prop.schema
    labels = [option["label"] for option in question["options"]]
    assert question["question"].strip()
    assert 0 < len(question["header"]) <= 12
    title = schema.get("title") or schema.get("description") or readable(prop.key)
    if not prop.legacy and len(title) <= 12:
        assert question["header"] == title
    if schema.get("type") == "array":
        assert question.get("multiple") is True
        assert question.get("custom") is False
        assert labels == choice_labels(schema["items"])
    elif choice_values(schema) is not None:
        assert "multiple" not in question
        assert question.get("custom") is False
        assert labels == choice_labels(schema)
    elif schema.get("type") == "boolean":
        assert "multiple" not in question
        assert question.get("custom") is False
        assert labels == ["Yes", "No"]
    else:
        assert labels == []
        assert "multiple" not in question
        assert question.get("custom") is not False


def pick_number(schema: dict[str, Any], integer: bool) -> int | float:
    """A number strictly inside the property's bounds (inclusive or exclusive), or a plain one."""
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if integer:
        low = None if low is None else math.floor(low) + 1 if "exclusiveMinimum" in schema else math.ceil(low)
        high = (
            None
            if high is None
            else math.ceil(high) - 1
            if "exclusiveMaximum" in schema
            else math.floor(high)
        )
    if low is not None and high is not None:
        return (low + high) // 2 if integer else (low + high) / 2
    if low is not None:
        return low + (1 if integer else 1.5)
    if high is not None:
        return high - (1 if integer else 1.5)
    return 3 if integer else 4  # a whole number: "4" must still come back as the JSON number 4.0


STRING_BY_FORMAT = {
    "email": "ada@example.com",
    "uri": "https://example.com/page",
    "date": "2024-05-17",
    "date-time": "2024-05-17T10:30:00Z",
}


def pick_text(schema: dict[str, Any]) -> str:
    """A string that satisfies ``format``, ``minLength`` and ``maxLength``."""
    if schema.get("format") in STRING_BY_FORMAT:
        return STRING_BY_FORMAT[schema["format"]]
    text = "Sample answer"
    if schema.get("maxLength") is not None:
        text = text[: schema["maxLength"]]
    if schema.get("minLength") is not None and len(text) < schema["minLength"]:
        text += "x" * (schema["minLength"] - len(text))
    return text


def build_answer(prop: Prop, question: dict[str, Any]) -> tuple[list[str], Any]:
    """A valid answer for ``question`` (labels or text) and the content value it must become."""
    schema = prop.schema
    labels = [option["label"] for option in question["options"]]
    if question.get("multiple"):
        values = choice_values(schema["items"])
        assert values is not None
        count = max(schema.get("minItems", 1), 1)
        count = min(count, schema.get("maxItems", count), len(labels))
        return labels[:count], values[:count]
    if schema.get("type") == "boolean":
        return ["Yes"], True
    values = choice_values(schema)
    if values is not None:
        return [labels[0]], values[0]
    if schema.get("type") == "integer":
        number = int(pick_number(schema, integer=True))
        return [str(number)], number
    if schema.get("type") == "number":
        number = float(pick_number(schema, integer=False))
        return [str(int(number)) if number.is_integer() else repr(number)], number
    if schema.get("type") == "string":
        text = pick_text(schema)
        return [text], text
    return ["free text"], "free text"


# ---------------------------------------------------------------------------------------------------
# Checking content


def assert_no_nulls(value: Any) -> None:
    assert value is not None, "content holds a null"
    if isinstance(value, dict):
        for item in value.values():
            assert_no_nulls(item)
    elif isinstance(value, list):
        for item in value:
            assert_no_nulls(item)


def assert_typed(prop: Prop, value: Any) -> None:
    """The content value has the JSON type the property asks for."""
    kind = prop.schema.get("type")
    if kind == "integer":
        assert type(value) is int, f"{prop.key}: {value!r} is not a JSON integer"
    elif kind == "number":
        assert type(value) is float, f"{prop.key}: {value!r} is not a JSON number (float)"
    elif kind == "boolean":
        assert type(value) is bool, f"{prop.key}: {value!r} is not true/false"
    elif kind == "array":
        assert type(value) is list, f"{prop.key}: {value!r} is not a list"
        assert all(type(item) is str for item in value)
    else:
        assert type(value) is str, f"{prop.key}: {value!r} is not a string"


def assert_typed_equal(actual: Any, expected: Any) -> None:
    assert type(actual) is type(expected), f"{actual!r} is not of the type of {expected!r}"
    assert actual == expected


def validate_content(schema: dict[str, Any], content: dict[str, Any]) -> None:
    """Validate against the schema with format checks; legacy forms validate ``content["value"]``."""
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    if is_legacy(schema):
        assert list(content) == ["value"]
        validator.validate(content["value"])
    else:
        validator.validate(content)


async def elicit_and_answer(
    client: httpx.AsyncClient, params: dict[str, Any], answer_for: Any
) -> tuple[list[dict[str, Any]], list[list[str]], httpx.Response]:
    """Post the captured params; answer each announced question with ``answer_for(prop, question)``."""
    props = props_of(params["requestedSchema"])
    async with read_events(client) as events:
        tool = ask(client, params)
        asked = await events.next("question.asked")
        questions = asked.properties["questions"]
        assert len(questions) == len(props)
        assert params["message"] in questions[0]["question"]
        listed = (await client.get("/question")).json()
        assert listed == [asked.properties]
        answers = [answer_for(prop, question) for prop, question in zip(props, questions, strict=True)]
        reply = await client.post(f"/question/{asked.properties['id']}/reply", json={"answers": answers})
        assert reply.status_code == 200, reply.text
        replied = await events.next("question.replied")
        assert replied.properties["answers"] == answers
        response = await tool
    assert response.status_code == 200, response.text
    assert response.json()["action"] == "accept"
    return questions, answers, response


def expected_when_optional_left_empty(prop: Prop, question: dict[str, Any]) -> tuple[list[str], Any]:
    """Required: a valid answer. Optional: ``[]``, expecting the default (or nothing)."""
    if prop.required:
        return build_answer(prop, question)
    return [], prop.schema.get("default")


# ---------------------------------------------------------------------------------------------------
# Every capture: converted, answerable, content valid


def test_captures_are_present():
    """The captured schemas are there and each holds form params with an object or legacy schema."""
    assert len(SCHEMA_FILES) >= 10
    for path in SCHEMA_FILES:
        params = load_params(path)
        assert isinstance(params["requestedSchema"], dict), path.name


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.stem)
async def test_capture_converts_and_answers_validate_against_the_schema(client, path: Path):
    """One question per property (one for legacy), each of the right kind; answering every one gives
    content that validates against the schema, has typed values and no nulls."""
    params = load_params(path)
    schema = params["requestedSchema"]
    props = props_of(schema)
    expected: dict[str, Any] = {}

    def answer_for(prop: Prop, question: dict[str, Any]) -> list[str]:
        check_question(prop, question)
        answer, value = build_answer(prop, question)
        expected[prop.key] = value
        return answer

    _, _, response = await elicit_and_answer(client, params, answer_for)
    content = response.json()["content"]
    assert_no_nulls(content)
    assert set(content) == set(expected)
    for prop in props:
        assert_typed(prop, content[prop.key])
        assert_typed_equal(content[prop.key], expected[prop.key])
    validate_content(schema, content)


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.stem)
async def test_capture_with_optional_questions_unanswered_fills_defaults(client, path: Path):
    """Required questions answered, every optional one left ``[]``: content still validates, defaults
    fill in, and an optional question without a default is left out (never null)."""
    params = load_params(path)
    schema = params["requestedSchema"]
    props = props_of(schema)
    expected: dict[str, Any] = {}

    def answer_for(prop: Prop, question: dict[str, Any]) -> list[str]:
        answer, value = expected_when_optional_left_empty(prop, question)
        if value is not None:
            expected[prop.key] = value
        return answer

    _, _, response = await elicit_and_answer(client, params, answer_for)
    content = response.json()["content"]
    assert_no_nulls(content)
    assert set(content) == set(expected)
    for prop in props:
        if prop.key in content:
            assert_typed(prop, content[prop.key])
            assert_typed_equal(content[prop.key], expected[prop.key])
    validate_content(schema, content)


# ---------------------------------------------------------------------------------------------------
# The sending SDK accepts the content: the equivalent pydantic models


# No docstrings on these models: pydantic would render them as the schema's description.


class Booking(BaseModel):  # mcp 2.3 and 1.30: ctx.elicit("Please fill in booking", Booking)
    name: str = Field(description="Your full name", min_length=2, max_length=40)
    guests: int = Field(description="How many guests?", ge=1, le=12)
    budget: float = Field(100.0, description="Budget per night")
    newsletter: bool = Field(False, description="Subscribe to news?")
    email: str | None = Field(None, description="Contact email")


class Choices(BaseModel):  # mcp 2.3: ctx.elicit("Please fill in choices", Choices)
    size: Literal["S", "M", "L"] = "M"
    toppings: list[Literal["cheese", "ham", "olives"]] = Field(default_factory=list)
    note: str | None = None


@dataclass
class Contact:  # FastMCP: ctx.elicit(..., response_type=Contact)
    name: str
    age: int
    vip: bool = False


def fastmcp_scalar(response_type: Any) -> type:
    """FastMCP wraps a scalar ``response_type`` in a one-field dataclass named ``value``."""
    return make_dataclass("ScalarElicitationType", [("value", response_type)])


SDK_MODELS: dict[str, Any] = {
    "mcp-2.3-ctx-elicit-booking": Booking,
    "mcp-1.30-ctx-elicit-booking": Booking,
    "mcp-2.3-ctx-elicit-choices": Choices,
    "fastmcp-4.2-choice-list": fastmcp_scalar(Literal["low", "medium", "high"]),
    "fastmcp-4.2-dataclass": Contact,
    "fastmcp-4.2-literal": fastmcp_scalar(Literal["yes", "no"]),
    "fastmcp-4.2-multi-choice": fastmcp_scalar(list[Literal["auth", "billing", "search"]]),
    "fastmcp-4.2-scalar-bool": fastmcp_scalar(bool),
    "fastmcp-4.2-scalar-int": fastmcp_scalar(int),
    "fastmcp-4.2-scalar-str": fastmcp_scalar(str),
    "fastmcp-4.2-titled-choice": fastmcp_scalar(Literal["low", "high"]),
}
SDK_FILES = [path for path in SCHEMA_FILES if path.stem in SDK_MODELS]


def test_every_sdk_capture_has_its_model():
    """Each mcp/FastMCP capture is covered by a model, and each model matches the schema it sent."""
    sdk_stems = {p.stem for p in SCHEMA_FILES if p.stem.startswith(("mcp-", "fastmcp-"))}
    assert {p.stem for p in CONFIRM_FILES} == {"fastmcp-2.x-confirm"}
    assert sdk_stems == set(SDK_MODELS)
    by_stem = {p.stem: load_params(p)["requestedSchema"] for p in SDK_FILES}
    # mcp renders the model itself: the equivalence is exact.
    assert render_elicitation_schema(Booking) == by_stem["mcp-2.3-ctx-elicit-booking"]
    assert render_elicitation_schema(Choices) == by_stem["mcp-2.3-ctx-elicit-choices"]
    # mcp 1.30 sent pydantic's plain rendering of the same model (anyOf with null for the optional email).
    assert Booking.model_json_schema() == by_stem["mcp-1.30-ctx-elicit-booking"]
    for stem, model in SDK_MODELS.items():
        rendered = TypeAdapter(model).json_schema()
        assert list(rendered["properties"]) == list(by_stem[stem]["properties"]), stem
        assert sorted(rendered.get("required", [])) == sorted(by_stem[stem].get("required", [])), stem


@pytest.mark.parametrize("optional_unanswered", [False, True], ids=["all-answered", "optional-unanswered"])
@pytest.mark.parametrize("path", SDK_FILES, ids=lambda p: p.stem)
async def test_sending_sdk_validates_the_content(client, path: Path, optional_unanswered: bool):
    """The content passes ``Model.model_validate(content)`` as the SDK runs it, and also strict JSON
    validation (so numbers and booleans sent as strings would fail); values survive validation."""
    params = load_params(path)
    adapter = TypeAdapter(SDK_MODELS[path.stem])

    def answer_for(prop: Prop, question: dict[str, Any]) -> list[str]:
        if optional_unanswered:
            return expected_when_optional_left_empty(prop, question)[0]
        return build_answer(prop, question)[0]

    _, _, response = await elicit_and_answer(client, params, answer_for)
    content = response.json()["content"]
    model = SDK_MODELS[path.stem]
    if isinstance(model, type) and issubclass(model, BaseModel):
        validated = model.model_validate(content)  # exactly what mcp's elicit_with_validation does
    else:
        validated = adapter.validate_python(content)  # what FastMCP's type adapter does
    strict = adapter.validate_json(json.dumps(content), strict=True)
    assert adapter.dump_python(strict, mode="json") == adapter.dump_python(validated, mode="json")
    dumped = adapter.dump_python(validated, mode="json")
    for key, value in content.items():
        assert dumped[key] == value


@pytest.mark.parametrize("path", CONFIRM_FILES, ids=lambda p: p.stem)
@pytest.mark.parametrize(("answer", "result"), [("Yes", {"action": "accept"}), ("No", {"action": "decline"})])
async def test_a_captured_confirmation_is_one_yes_no_question(client, path: Path, answer, result):
    """A schema with no properties: the message as one Yes/No question; Yes accepts with content that
    validates against the schema (``{}``), No declines."""
    params = load_params(path)
    async with read_events(client) as events:
        tool = ask(client, params)
        [question] = (await events.next("question.asked")).properties["questions"]
        assert question["question"] == params["message"]
        assert [option["label"] for option in question["options"]] == ["Yes", "No"]
        assert question.get("custom") is False
        request_id = (await client.get("/question")).json()[0]["id"]
        reply = await client.post(f"/question/{request_id}/reply", json={"answers": [[answer]]})
        assert reply.status_code == 200, reply.text
        response = await tool
    if answer == "Yes":
        result = {**result, "content": {}}
        validate_content(params["requestedSchema"], response.json()["content"])
    assert response.json() == result
