"""The checks on a person's answers mean what they mean to the tool's client: a ``pattern`` as a
JavaScript engine reads it, ``multipleOf`` as JSON Schema validators compute it; and a question no
answer can satisfy is refused when asked, naming the property, with nothing asked."""

from typing import Any

import pytest

from tests.helpers import ask, form, pending
from tests.http.test_answerer_side import assert_bad_request
from tests.http.test_bad_input import PATHS, assert_tool_error, leaves_no_trace

CHECKED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "title": "Code", "pattern": r"^\S+$"},
        "line": {"type": "string", "title": "Line", "pattern": "^.+$"},
        "amount": {"type": "number", "title": "Amount", "minimum": 0, "maximum": 10, "multipleOf": 0.25},
        "count": {"type": "integer", "title": "Count", "multipleOf": 5},
    },
    "required": ["code", "line", "amount", "count"],
}


async def test_answers_are_held_to_pattern_and_multiple_of_as_the_client_holds_them(client):
    tool = ask(client, form(CHECKED_SCHEMA, "Fill in the form"))
    (request,) = await pending(client)
    questions = [question["question"] for question in request["questions"]]
    assert questions[2].endswith("(a number from 0 to 10, a multiple of 0.25)")
    assert questions[3].endswith("(a whole number, a multiple of 5)")

    # \S does not take a vertical tab nor U+FEFF, . does not take \r nor U+2028 (as in JavaScript)
    for code, line, amount, count in [
        ("a\vb", "one\rtwo", "0.3", "12"),
        ("a\ufeffb", "one\u2028two", "1.1", "-7"),
    ]:
        response = await client.post(
            f"/question/{request['id']}/reply", json={"answers": [[code], [line], [amount], [count]]}
        )
        issues = assert_bad_request(response, "Payload")["issues"]
        assert [issue["header"] for issue in issues] == ["Code", "Line", "Amount", "Count"]
        assert "does not match the pattern" in issues[0]["message"]
        assert "is not a multiple of 0.25" in issues[2]["message"]
        assert f"{count} is not a multiple of 5" in issues[3]["message"]

    fixed = await client.post(
        f"/question/{request['id']}/reply",
        json={"answers": [["a\u200bb"], ["one\u0085two"], ["7.75"], ["-15"]]},
    )
    assert fixed.status_code == 200, fixed.text
    assert (await tool).json() == {
        "action": "accept",
        "content": {"code": "a\u200bb", "line": "one\u0085two", "amount": 7.75, "count": -15},
    }


# (id, property, what the message must say besides the property's name)
NEVER_ANSWERABLE: list[tuple[str, dict[str, Any], str]] = [
    ("pattern-not-ecmascript", {"type": "string", "pattern": "(?i)yes"}, "is not valid ECMAScript"),
    ("pattern-posix-class", {"type": "string", "pattern": "[[:alpha:]]+"}, "is not valid ECMAScript"),
    ("pattern-backreference", {"type": "string", "pattern": r"(a)\1"}, "backreference"),
    ("pattern-empty-class", {"type": "string", "pattern": "^[]$"}, "can match nothing"),
    ("pattern-end-then-more", {"type": "string", "pattern": "a$b"}, "can match nothing"),
    ("pattern-longer-than-max-length", {"type": "string", "pattern": r"\d{6}", "maxLength": 5}, "at least 6"),
    (
        "pattern-shorter-than-min-length",
        {"type": "string", "pattern": "^[a-z]{2}$", "minLength": 3},
        "at most 2",
    ),
    (
        "pattern-longer-than-a-date",
        {"type": "string", "format": "date", "pattern": r"^\d{11}"},
        "at least 11",
    ),
    ("multiple-of-zero", {"type": "number", "multipleOf": 0}, "multipleOf must be a number greater than 0"),
    (
        "multiple-of-negative",
        {"type": "integer", "multipleOf": -5},
        "multipleOf must be a number greater than 0",
    ),
    ("multiple-of-string", {"type": "integer", "multipleOf": "5"}, "multipleOf must be a finite number"),
    (
        "no-multiple-in-range",
        {"type": "integer", "minimum": 1, "maximum": 4, "multipleOf": 5},
        "no multiple of 5",
    ),
    (
        "no-multiple-in-number-range",
        {"type": "number", "minimum": 0.3, "maximum": 0.4, "multipleOf": 0.25},
        "no multiple of 0.25",
    ),
    ("choice-not-matching-pattern", {"type": "string", "enum": ["red", "blue"], "pattern": "^r"}, "'blue'"),
    ("choice-too-long", {"type": "string", "enum": ["red", "green"], "maxLength": 4}, "'green'"),
    ("choice-not-a-format", {"type": "string", "enum": ["red"], "format": "email"}, "'red'"),
    ("choice-of-a-number-type", {"type": "integer", "enum": ["1", "2"]}, "its type is integer"),
    (
        "const-not-matching-pattern",
        {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "b"}], "pattern": "^r$"},
        "'b'",
    ),
]


@pytest.mark.parametrize(
    ("prop", "says"), [case[1:] for case in NEVER_ANSWERABLE], ids=[case[0] for case in NEVER_ANSWERABLE]
)
async def test_questions_the_client_would_never_accept_an_answer_to_are_refused(server, client, prop, says):
    body = form(
        {"type": "object", "properties": {"ok": {"type": "string"}, "color": prop}, "required": ["color"]}
    )
    async with leaves_no_trace(server, client):
        responses = [await client.post(path, json=body) for path in PATHS]
    for response in responses:
        message = assert_tool_error(response, 400, "requestedSchema.properties.color")["message"]
        assert response.json()["error"] == "invalid_schema"
        assert says in message, message


async def test_a_choice_list_whose_items_fail_their_pattern_is_refused(server, client):
    items = {"type": "string", "enum": ["a", "b"], "pattern": "^a$"}
    body = form({"type": "object", "properties": {"tags": {"type": "array", "items": items}}})
    async with leaves_no_trace(server, client):
        response = await client.post("/elicitations", json=body)
    assert "requestedSchema.properties.tags.items" in assert_tool_error(response, 400, "'b'")["message"]
