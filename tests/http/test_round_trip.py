"""A question's round trip through real HTTP, from the tool's schema to the typed result.

A tool posts ``/elicit``, an answerer reads ``/event`` and replies on ``/question/{id}/reply`` (or
rejects), and the tool receives the MCP ``ElicitResult``: one question per property, each kind typed,
answers in order, legacy schemas, the RFC-0010 questionnaire, and the edge cases (empty answers,
reject, decline, timeout, disconnect, racing answerers, many questions, reconnects), as
docs/protocol.md states them ("From schema to questions", "From answers to content"). The sections
follow RFC-0015's success criteria.
"""

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import CAPTURED_SCHEMAS, RunningServer, load_params
from tests.helpers import (
    RFC0010_SCHEMA,
    ask,
    form,
    pending,
    read_events,
    text_properties,
)

# ---------------------------------------------------------------------------------------------------
# Helpers


def assert_typed_equal(actual: Any, expected: Any) -> None:
    """Equal as JSON values *and* of the same JSON types (``7`` is not ``7.0`` and not ``true``)."""
    assert type(actual) is type(expected), f"{actual!r} is {type(actual).__name__}, expected {expected!r}"
    if isinstance(expected, dict):
        assert set(actual) == set(expected), (actual, expected)
        for key in expected:
            assert_typed_equal(actual[key], expected[key])
    elif isinstance(expected, list):
        assert len(actual) == len(expected), (actual, expected)
        for got, want in zip(actual, expected, strict=True):
            assert_typed_equal(got, want)
    else:
        assert actual == expected


async def post_reply(client: httpx.AsyncClient, request_id: str, answers: Any) -> httpx.Response:
    return await client.post(f"/question/{request_id}/reply", json={"answers": answers})


async def round_trip(
    client: httpx.AsyncClient,
    schema: dict[str, Any],
    answers: list[list[str]],
    message: str = "Please answer",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Ask ``schema``, answer the announced request with ``answers``; return (request, ElicitResult)."""
    async with read_events(client) as events:
        tool = ask(client, form(schema, message))
        asked = await events.next("question.asked")
        request = asked.properties
        reply = await post_reply(client, request["id"], answers)
        assert reply.status_code == 200, reply.text
        assert reply.json() is True
        replied = await events.next("question.replied")
        assert replied.properties["requestID"] == request["id"]
        assert replied.properties["answers"] == answers
        response = await tool
    assert response.status_code == 200, response.text
    return request, response.json()


def labels(question: dict[str, Any]) -> list[str]:
    return [option["label"] for option in question["options"]]


def assert_free_text(question: dict[str, Any]) -> None:
    """A free-text question: no options, single answer, typing allowed."""
    assert question["options"] == []
    assert "multiple" not in question
    assert question.get("custom") is not False


def assert_free_text_with_range_1_to_12(question: dict[str, Any]) -> None:
    """A number question says its allowed range."""
    assert_free_text(question)
    assert "1" in question["question"]
    assert "12" in question["question"]


def assert_single_choice(question: dict[str, Any], expected_labels: list[str]) -> None:
    assert labels(question) == expected_labels
    assert "multiple" not in question
    assert question["custom"] is False


def assert_multi_choice(question: dict[str, Any], expected_labels: list[str]) -> None:
    assert labels(question) == expected_labels
    assert question["multiple"] is True
    assert question["custom"] is False


def assert_not_found(response: httpx.Response, request_id: str) -> None:
    assert response.status_code == 404, response.text
    body = response.json()
    assert body["_tag"] == "QuestionNotFoundError"
    assert body["requestID"] == request_id


def object_schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return schema


# ---------------------------------------------------------------------------------------------------
# Criterion 1: an object schema with 2+ properties creates that many questions, in one request


@pytest.mark.parametrize("count", [2, 3, 7])
async def test_object_schema_asks_one_question_per_property_in_one_request(client, count):
    """N properties give exactly one ``question.asked`` holding N questions (one pending record)."""
    async with read_events(client) as events:
        tool = ask(client, form(text_properties(count)))
        asked = await events.next("question.asked")
        assert len(asked.properties["questions"]) == count
        await events.no_frame(within=0.3, type="question.asked")
        listed = (await client.get("/question")).json()
        assert [request["id"] for request in listed] == [asked.properties["id"]]
        assert len(listed[0]["questions"]) == count

        answers = [[f"answer {i}"] for i in range(count)]
        assert (await post_reply(client, asked.properties["id"], answers)).status_code == 200
        result = (await tool).json()
    assert result == {"action": "accept", "content": {f"k{i}": f"answer {i}" for i in range(count)}}


# ---------------------------------------------------------------------------------------------------
# Criterion 2: each property kind is rendered right and its answer comes back typed

KIND_CASES: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], None], list[str], Any]] = [
    ("string", {"type": "string", "title": "Name"}, assert_free_text, ["Ada Lovelace"], "Ada Lovelace"),
    (
        "enum",
        {"type": "string", "enum": ["S", "M", "L"]},
        lambda q: assert_single_choice(q, ["S", "M", "L"]),
        ["M"],
        "M",
    ),
    (
        "enum-with-enumNames",
        {"type": "string", "enum": ["dev", "prod"], "enumNames": ["Development", "Production"]},
        lambda q: assert_single_choice(q, ["Development", "Production"]),
        ["Production"],
        "prod",
    ),
    (
        "titled-oneOf",
        {
            "type": "string",
            "oneOf": [{"const": "eu", "title": "Europe"}, {"const": "us", "title": "United States"}],
        },
        lambda q: assert_single_choice(q, ["Europe", "United States"]),
        ["United States"],
        "us",
    ),
    (
        "array-multi-select",
        {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
        lambda q: assert_multi_choice(q, ["a", "b", "c"]),
        ["a", "c"],
        ["a", "c"],
    ),
    (
        "array-titled-anyOf",
        {
            "type": "array",
            "items": {"anyOf": [{"const": "t1", "title": "Team 1"}, {"const": "t2", "title": "Team 2"}]},
        },
        lambda q: assert_multi_choice(q, ["Team 1", "Team 2"]),
        ["Team 2"],
        ["t2"],
    ),
    (
        "boolean-yes",
        {"type": "boolean"},
        lambda q: assert_single_choice(q, ["Yes", "No"]),
        ["Yes"],
        True,
    ),
    (
        "boolean-no",
        {"type": "boolean"},
        lambda q: assert_single_choice(q, ["Yes", "No"]),
        ["No"],
        False,
    ),
    (
        "integer",
        {"type": "integer", "minimum": 1, "maximum": 12},
        assert_free_text_with_range_1_to_12,
        ["7"],
        7,
    ),
    ("number-whole", {"type": "number"}, assert_free_text, ["3"], 3.0),
    ("number-fraction", {"type": "number", "minimum": 0}, assert_free_text, ["2.5"], 2.5),
    (
        "optional-anyOf-null-integer",
        {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        assert_free_text,
        ["4"],
        4,
    ),
    ("unknown-type", {"type": "uuid"}, assert_free_text, ["3f2a-77"], "3f2a-77"),
    ("unknown-no-type", {"description": "Anything at all"}, assert_free_text, ["whatever"], "whatever"),
]


@pytest.mark.parametrize(
    ("prop", "check_question", "answer", "expected"),
    [case[1:] for case in KIND_CASES],
    ids=[case[0] for case in KIND_CASES],
)
async def test_each_property_kind_becomes_the_right_question_and_typed_value(
    client, prop, check_question, answer, expected
):
    """The property's question has the right options/multiple/custom; its answer the right JSON type."""
    schema = object_schema({"first": {"type": "string", "title": "First"}, "subject": prop})
    request, result = await round_trip(client, schema, [["one"], answer])
    assert len(request["questions"]) == 2
    check_question(request["questions"][1])
    assert result["action"] == "accept"
    assert_typed_equal(result["content"], {"first": "one", "subject": expected})


async def test_all_kinds_in_one_schema_give_typed_content_in_raw_json(client):
    """Every kind side by side; the raw JSON the tool receives has integers, floats, booleans, lists."""
    schema = object_schema(
        {
            "name": {"type": "string"},
            "size": {"type": "string", "enum": ["S", "M", "L"]},
            "region": {"type": "string", "oneOf": [{"const": "eu", "title": "Europe"}]},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}},
            "ok": {"type": "boolean"},
            "count": {"type": "integer"},
            "price": {"type": "number"},
            "extra": {},
        }
    )
    answers = [["Ada"], ["L"], ["Europe"], ["b", "a"], ["Yes"], ["42"], ["10"], ["free"]]
    async with read_events(client) as events:
        tool = ask(client, form(schema))
        asked = await events.next("question.asked")
        assert (await post_reply(client, asked.properties["id"], answers)).status_code == 200
        response = await tool
    raw = json.loads(response.text)
    assert raw == {
        "action": "accept",
        "content": {
            "name": "Ada",
            "size": "L",
            "region": "eu",
            "tags": ["b", "a"],
            "ok": True,
            "count": 42,
            "price": 10.0,
            "extra": "free",
        },
    }
    content = raw["content"]
    assert type(content["count"]) is int
    assert type(content["price"]) is float
    assert content["ok"] is True
    assert '"ok":true' in response.text.replace(" ", "")
    assert '"count":42' in response.text.replace(" ", "")


# ---------------------------------------------------------------------------------------------------
# Criterion 3: answers[i] maps to questions[i] and to the i-th property key

KEY_NAMES = [
    "zulu",
    "alpha",
    "mike",
    "bravo",
    "yankee",
    "charlie",
    "xray",
    "delta",
    "whiskey",
    "echo",
    "victor",
]


@pytest.mark.parametrize("count", [1, 2, 10, 11])
async def test_answer_i_goes_to_question_i_and_property_key_i(client, count):
    """Question order is schema order (not sorted), and each key gets its own, distinct answer."""
    keys = KEY_NAMES[:count]
    schema = object_schema(
        {
            key: {"type": "string", "title": f"{key} {i}", "description": f"Question about {key}?"}
            for i, key in enumerate(keys)
        }
    )
    answers = [[f"answer for {key}"] for key in keys]
    request, result = await round_trip(client, schema, answers, message="")
    assert [q["header"] for q in request["questions"]] == [f"{key} {i}" for i, key in enumerate(keys)]
    assert [q["question"] for q in request["questions"]] == [f"Question about {key}?" for key in keys]
    assert result == {"action": "accept", "content": {key: f"answer for {key}" for key in keys}}


async def test_answer_mapping_holds_across_mixed_kinds(client):
    """Answers that only fit their own question (a number, a yes/no, a choice) land on the right key."""
    schema = object_schema(
        {
            "hours": {"type": "integer", "title": "Hours"},
            "urgent": {"type": "boolean", "title": "Urgent"},
            "model": {"type": "string", "enum": ["SY215C", "SY235C"], "title": "Model"},
            "ratio": {"type": "number", "title": "Ratio"},
            "symptoms": {"type": "array", "items": {"enum": ["Smoke", "Noise"]}, "title": "Symptoms"},
            "note": {"type": "string", "title": "Note"},
        }
    )
    answers = [["1200"], ["No"], ["SY235C"], ["0.75"], ["Noise"], ["leaks oil"]]
    request, result = await round_trip(client, schema, answers)
    assert [q["header"] for q in request["questions"]] == [
        "Hours",
        "Urgent",
        "Model",
        "Ratio",
        "Symptoms",
        "Note",
    ]
    assert_typed_equal(
        result["content"],
        {
            "hours": 1200,
            "urgent": False,
            "model": "SY235C",
            "ratio": 0.75,
            "symptoms": ["Noise"],
            "note": "leaks oil",
        },
    )


# ---------------------------------------------------------------------------------------------------
# Criterion 4: legacy single-question schemas work as before


async def test_legacy_top_level_enum_gives_value_content(client):
    """``{"enum": [...]}`` at the top: one single-choice question; content ``{"value": choice}``."""
    schema = {"enum": ["PostgreSQL", "SQLite", "MySQL"]}
    request, result = await round_trip(client, schema, [["SQLite"]], message="Which database?")
    assert len(request["questions"]) == 1
    assert_single_choice(request["questions"][0], ["PostgreSQL", "SQLite", "MySQL"])
    assert "Which database?" in request["questions"][0]["question"]
    assert result == {"action": "accept", "content": {"value": "SQLite"}}


async def test_legacy_top_level_array_enum_gives_value_list_content(client):
    """``{"type": "array", "items": {"enum": [...]}}`` at the top: one multi-choice; ``{"value": [...]}``."""
    schema = {"type": "array", "items": {"enum": ["Auth", "Admin", "Billing"]}}
    request, result = await round_trip(client, schema, [["Auth", "Billing"]], message="Which features?")
    assert len(request["questions"]) == 1
    assert_multi_choice(request["questions"][0], ["Auth", "Admin", "Billing"])
    assert result == {"action": "accept", "content": {"value": ["Auth", "Billing"]}}


async def test_legacy_captures_from_real_tools(client):
    """The captured agentpool legacy requests give ``{"value": ...}`` content."""
    single = load_params(CAPTURED_SCHEMAS / "agentpool-legacy-single-enum.json")
    multi = load_params(CAPTURED_SCHEMAS / "agentpool-legacy-array-enum.json")
    _, result = await round_trip(client, single["requestedSchema"], [["MySQL"]], single["message"])
    assert result == {"action": "accept", "content": {"value": "MySQL"}}
    _, result = await round_trip(client, multi["requestedSchema"], [["Admin"]], multi["message"])
    assert result == {"action": "accept", "content": {"value": ["Admin"]}}


async def test_single_property_object_keeps_its_key(client):
    """An object with one property is one question; the content keeps the property's key."""
    schema = object_schema({"database": {"type": "string", "enum": ["PostgreSQL", "SQLite"]}})
    request, result = await round_trip(client, schema, [["PostgreSQL"]])
    assert len(request["questions"]) == 1
    assert result == {"action": "accept", "content": {"database": "PostgreSQL"}}


# ---------------------------------------------------------------------------------------------------
# Criterion 5: the RFC-0010 question_for_user questionnaire works


async def test_rfc0010_questionnaire_renders_headers_options_and_descriptions(client):
    """Headers from titles, the message with the first question, x-option-descriptions on options."""
    request, result = await round_trip(
        client, RFC0010_SCHEMA, [["SY235C"], ["Noise"], ["Leaks at idle"]], message="Excavator diagnosis"
    )
    questions = request["questions"]
    assert [q["header"] for q in questions] == ["Model", "Symptoms", "Notes"]
    assert "Excavator diagnosis" in questions[0]["question"]
    assert "Equipment model?" in questions[0]["question"]
    assert "Select symptoms:" in questions[1]["question"]
    assert "Anything else?" in questions[2]["question"]
    assert questions[0]["options"] == [
        {"label": "SY215C", "description": ""},
        {"label": "SY235C", "description": ""},
    ]
    assert_single_choice(questions[0], ["SY215C", "SY235C"])
    assert questions[1]["options"] == [
        {"label": "Black smoke", "description": ""},
        {"label": "Noise", "description": "Abnormal noise"},
    ]
    assert_multi_choice(questions[1], ["Black smoke", "Noise"])
    assert_free_text(questions[2])
    assert result == {"action": "accept", "content": {"q0": "SY235C", "q1": ["Noise"], "q2": "Leaks at idle"}}


async def test_rfc0010_required_handling(client):
    """Required q0 left empty is refused (400, index 0 only); the optional q2 is left out of content;
    the required multi-select q1 (no minItems) left empty is an empty list."""
    async with read_events(client) as events:
        tool = ask(client, form(RFC0010_SCHEMA, "Excavator diagnosis"))
        asked = await events.next("question.asked")
        request_id = asked.properties["id"]

        refused = await post_reply(client, request_id, [[], [], []])
        assert refused.status_code == 400
        issues = refused.json()["data"]["issues"]
        assert [(issue["index"], issue["header"]) for issue in issues] == [(0, "Model")]

        accepted = await post_reply(client, request_id, [["SY215C"], [], []])
        assert accepted.status_code == 200, accepted.text
        result = (await tool).json()
    assert result == {"action": "accept", "content": {"q0": "SY215C", "q1": []}}


async def test_rfc0010_captured_questionnaire_end_to_end(client):
    """The captured RFC-0010 request: titled oneOf labels, x-option-descriptions, typed content."""
    params = load_params(CAPTURED_SCHEMAS / "rfc0010-questionnaire.json")
    async with read_events(client) as events:
        tool = ask(client, params)
        asked = await events.next("question.asked")
        request = asked.properties
        questions = request["questions"]
        assert [q["header"] for q in questions] == ["Model", "Urgency", "Symptoms", "Notes"]
        assert_single_choice(questions[0], ["SY215C", "SY235C"])
        assert_single_choice(questions[1], ["Machine is down", "Within a week"])
        assert_multi_choice(questions[2], ["Black smoke", "Noise"])
        assert questions[2]["options"][1]["description"] == "Abnormal noise"
        assert questions[2]["options"][0]["description"] == ""
        assert_free_text(questions[3])

        # q0 and q1 are required single choices; q2 is a required multi-select without minItems.
        refused = await post_reply(client, request["id"], [[], [], [], []])
        assert refused.status_code == 400
        assert [issue["index"] for issue in refused.json()["data"]["issues"]] == [0, 1]
        assert (await client.get("/question")).json()[0]["id"] == request["id"]

        answers = [["SY215C"], ["Machine is down"], ["Black smoke", "Noise"], ["Hydraulic leak"]]
        assert (await post_reply(client, request["id"], answers)).status_code == 200
        result = (await tool).json()
    assert result == {
        "action": "accept",
        "content": {"q0": "SY215C", "q1": "Now", "q2": ["Black smoke", "Noise"], "q3": "Hydraulic leak"},
    }


# ---------------------------------------------------------------------------------------------------
# Edge cases: empty answers


@pytest.mark.parametrize("empty", [[], [[], [], []]], ids=["no-lists", "empty-lists"])
async def test_required_questions_left_empty_are_refused_then_corrected(client, empty):
    """All-empty answers: 400 BadRequest listing each required question; it stays pending; fixable."""
    schema = object_schema(
        {
            "name": {"type": "string", "title": "Name"},
            "age": {"type": "integer", "title": "Age"},
            "note": {"type": "string", "title": "Note"},
        },
        required=["name", "age"],
    )
    async with read_events(client) as events:
        tool = ask(client, form(schema))
        asked = await events.next("question.asked")
        request_id = asked.properties["id"]

        refused = await post_reply(client, request_id, empty)
        assert refused.status_code == 400
        body = refused.json()
        assert body["name"] == "BadRequest"
        assert body["data"]["kind"] == "Payload"
        assert [(i["index"], i["header"]) for i in body["data"]["issues"]] == [(0, "Name"), (1, "Age")]
        assert all(issue["message"] for issue in body["data"]["issues"])
        await events.no_frame(within=0.2, type="question.replied")
        assert [r["id"] for r in (await client.get("/question")).json()] == [request_id]
        assert not tool.done()

        fixed = await post_reply(client, request_id, [["Ada"], ["36"], []])
        assert fixed.status_code == 200, fixed.text
        result = (await tool).json()
    assert_typed_equal(result, {"action": "accept", "content": {"name": "Ada", "age": 36}})


@pytest.mark.parametrize("empty", [[], [[], [], [], []]], ids=["no-lists", "empty-lists"])
async def test_all_optional_schema_accepts_empty_answers_with_defaults(client, empty):
    """Nothing answered, nothing required: accept; defaults fill in, questions without one are left out."""
    schema = object_schema(
        {
            "note": {"type": "string"},
            "count": {"type": "integer", "default": 3},
            "confirm": {"type": "boolean", "default": False},
            "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "default": ["x"]},
        }
    )
    _, result = await round_trip(client, schema, empty)
    assert_typed_equal(result, {"action": "accept", "content": {"count": 3, "confirm": False, "tags": ["x"]}})


async def test_all_optional_schema_without_defaults_accepts_with_empty_content(client):
    """Nothing answered, nothing required, no defaults: accept with ``content: {}`` (never nulls)."""
    schema = object_schema({"a": {"type": "string"}, "b": {"type": "number"}})
    _, result = await round_trip(client, schema, [[], []])
    assert result == {"action": "accept", "content": {}}


# ---------------------------------------------------------------------------------------------------
# Edge cases: reject, decline, timeout, tool disconnect


async def test_reject_without_body_gives_cancel(client):
    """The person dismisses: the tool gets ``cancel`` (no content); ``question.rejected`` goes out."""
    async with read_events(client) as events:
        tool = ask(client, form(RFC0010_SCHEMA))
        asked = await events.next("question.asked")
        request_id = asked.properties["id"]
        rejected = await client.post(f"/question/{request_id}/reject")
        assert rejected.status_code == 200
        assert rejected.json() is True
        event = await events.next("question.rejected")
        assert event.properties["requestID"] == request_id
        result = (await tool).json()
    assert result == {"action": "cancel"}
    assert (await client.get("/question")).json() == []
    assert_not_found(await post_reply(client, request_id, [["SY215C"], [], []]), request_id)


async def test_reject_with_decline_gives_decline(client):
    """``{"action": "decline"}`` on reject: the tool gets ``decline`` (an explicit no)."""
    async with read_events(client) as events:
        tool = ask(client, form(RFC0010_SCHEMA))
        asked = await events.next("question.asked")
        request_id = asked.properties["id"]
        rejected = await client.post(f"/question/{request_id}/reject", json={"action": "decline"})
        assert rejected.status_code == 200
        assert (await events.next("question.rejected")).properties["requestID"] == request_id
        result = (await tool).json()
    assert result == {"action": "decline"}


async def test_timeout_gives_cancel_and_rejected_event(make_server):
    """Unanswered past the timeout: the tool gets ``cancel``, answerers ``question.rejected``; a late
    reply finds no question."""
    server: RunningServer = make_server(timeout=0.3)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        async with read_events(client) as events:
            tool = ask(client, form(text_properties(2)))
            asked = await events.next("question.asked")
            request_id = asked.properties["id"]
            event = await events.next("question.rejected")
            assert event.properties["requestID"] == request_id
            result = (await tool).json()
        assert result == {"action": "cancel"}
        assert_not_found(await post_reply(client, request_id, [["a"], ["b"]]), request_id)
        assert (await client.get("/question")).json() == []


async def test_tool_disconnect_withdraws_the_question(server, client):
    """A tool that hangs up: its question is withdrawn (``question.rejected``) and cannot be answered."""
    async with read_events(client) as events:
        tool_client = httpx.AsyncClient(base_url=server.url, timeout=10)
        try:
            tool = ask(tool_client, form(text_properties(3)))
            asked = await events.next("question.asked")
            request_id = asked.properties["id"]
            tool.cancel()
            with pytest.raises(asyncio.CancelledError):
                await tool
        finally:
            await tool_client.aclose()
        event = await events.next("question.rejected")
        assert event.properties["requestID"] == request_id
    assert (await client.get("/question")).json() == []
    assert_not_found(await post_reply(client, request_id, [["a"], ["b"], ["c"]]), request_id)


async def test_two_answerers_racing_exactly_one_wins(server, client):
    """Two replies at once: one ``200``, the other ``404``; the tool gets the winner's answers and
    exactly one ``question.replied`` goes out."""
    schema = object_schema({"pick": {"type": "string", "enum": ["left", "right"]}, "why": {"type": "string"}})
    async with read_events(client) as events:
        tool = ask(client, form(schema))
        asked = await events.next("question.asked")
        request_id = asked.properties["id"]
        bodies = {"left": [["left"], ["first answerer"]], "right": [["right"], ["second answerer"]]}
        async with (
            httpx.AsyncClient(base_url=server.url, timeout=10) as one,
            httpx.AsyncClient(base_url=server.url, timeout=10) as two,
        ):
            responses = await asyncio.gather(
                post_reply(one, request_id, bodies["left"]), post_reply(two, request_id, bodies["right"])
            )
        assert sorted(r.status_code for r in responses) == [200, 404]
        winner = "left" if responses[0].status_code == 200 else "right"
        loser = responses[1] if winner == "left" else responses[0]
        assert_not_found(loser, request_id)

        replied = await events.next("question.replied")
        assert replied.properties["answers"] == bodies[winner]
        await events.no_frame(within=0.3, type="question.replied")
        result = (await tool).json()
    assert result == {
        "action": "accept",
        "content": {"pick": winner, "why": bodies[winner][1][0]},
    }


# ---------------------------------------------------------------------------------------------------
# Edge cases: many questions


@pytest.mark.parametrize("count", [11, 50])
async def test_many_questions_are_accepted_up_to_the_hard_limit(client, count):
    """Above the soft limit of 10 and up to the hard limit of 50: asked and answered in full."""
    answers = [[f"answer {i}"] for i in range(count)]
    request, result = await round_trip(client, text_properties(count), answers)
    assert len(request["questions"]) == count
    assert [q["header"] for q in request["questions"]][-1] == f"Question {count - 1}"
    assert result == {"action": "accept", "content": {f"k{i}": f"answer {i}" for i in range(count)}}


async def test_more_than_fifty_questions_are_refused_with_422(client):
    """51 questions: ``422`` with an error naming the problem, and nothing is asked."""
    async with read_events(client) as events:
        response = await client.post("/elicit", json=form(text_properties(51)))
        assert response.status_code == 422
        body = response.json()
        assert body["error"] == "too_many_questions"
        assert "51" in body["message"]
        await events.no_frame(within=0.3, type="question.asked")
    assert (await client.get("/question")).json() == []


# ---------------------------------------------------------------------------------------------------
# Edge cases: reconnecting answerers


@pytest.mark.parametrize("how", ["header", "query"])
async def test_reconnect_with_last_event_id_replays_missed_events(client, how):
    """Back with ``Last-Event-ID`` (or ``last_event_id``): exactly the events missed, in order, with
    their ids; the question pending throughout is not re-announced and is still answerable."""
    async with read_events(client) as first:
        tool_a = ask(client, form(text_properties(2), "first"))
        asked_a = await first.next("question.asked")
    assert asked_a.id == asked_a.data["id"]
    request_a = asked_a.properties["id"]

    # While the answerer is away: B is asked (and stays pending), C is asked and rejected.
    tool_b = ask(client, form(RFC0010_SCHEMA, "second"))
    request_b = (await pending(client, 2))[1]["id"]
    tool_c = ask(client, form(text_properties(1), "third"))
    request_c = (await pending(client, 3))[2]["id"]
    assert (await client.post(f"/question/{request_c}/reject")).status_code == 200
    assert (await tool_c).json() == {"action": "cancel"}

    if how == "header":
        reconnect = {"headers": {"Last-Event-ID": asked_a.id}}
    else:
        reconnect = {"params": {"last_event_id": asked_a.id}}
    async with read_events(client, **reconnect) as second:
        missed = [await second.next() for _ in range(3)]
        assert [(f.type, f.properties.get("requestID", f.properties.get("id"))) for f in missed] == [
            ("question.asked", request_b),
            ("question.asked", request_c),
            ("question.rejected", request_c),
        ]
        assert all(f.id and f.id == f.data["id"] for f in missed)
        await second.no_frame(within=0.3, type="question.asked")

        assert (await post_reply(client, request_a, [["a0"], ["a1"]])).status_code == 200
        assert (await second.next("question.replied")).properties["requestID"] == request_a
        assert (await post_reply(client, request_b, [["SY215C"], ["Noise"], []])).status_code == 200
        assert (await second.next("question.replied")).properties["requestID"] == request_b
    assert (await tool_a).json() == {"action": "accept", "content": {"k0": "a0", "k1": "a1"}}
    assert (await tool_b).json() == {"action": "accept", "content": {"q0": "SY215C", "q1": ["Noise"]}}


async def test_reconnect_without_last_event_id_reannounces_pending_question(client):
    """Back without ``Last-Event-ID``: the pending question is re-announced right after
    ``server.connected`` (no ``id:`` line), unchanged, and is still answerable."""
    async with read_events(client) as first:
        tool = ask(client, form(RFC0010_SCHEMA, "Excavator diagnosis"))
        asked = await first.next("question.asked")

    async with read_events(client, skip_connected=False) as second:
        assert (await second.next()).type == "server.connected"
        again = await second.next()
        assert again.type == "question.asked"
        assert again.id == ""
        assert again.properties == asked.properties
        await second.no_frame(within=0.3, type="question.asked")

        answers = [["SY215C"], ["Black smoke"], ["Runs hot"]]
        assert (await post_reply(client, asked.properties["id"], answers)).status_code == 200
        assert (await second.next("question.replied")).properties["requestID"] == asked.properties["id"]
    assert (await tool).json() == {
        "action": "accept",
        "content": {"q0": "SY215C", "q1": ["Black smoke"], "q2": "Runs hot"},
    }


async def test_reconnect_with_an_id_older_than_the_history_reannounces_pending(make_server):
    """A ``Last-Event-ID`` that fell out of the bounded history counts as none: every pending question
    is re-announced, and each is still answerable."""
    server: RunningServer = make_server(history_size=1)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        async with read_events(client) as first:
            tool_a = ask(client, form(text_properties(2)))
            asked_a = await first.next("question.asked")
            tool_b = ask(client, form(text_properties(3)))
            asked_b = await first.next("question.asked")

        async with read_events(client, headers={"Last-Event-ID": asked_a.id}) as second:
            again = [await second.next(), await second.next()]
            assert [(f.type, f.properties["id"], f.id) for f in again] == [
                ("question.asked", asked_a.properties["id"], ""),
                ("question.asked", asked_b.properties["id"], ""),
            ]
            assert (await post_reply(client, asked_a.properties["id"], [["x"], ["y"]])).status_code == 200
            assert (
                await post_reply(client, asked_b.properties["id"], [["1"], ["2"], ["3"]])
            ).status_code == 200
        assert (await tool_a).json() == {"action": "accept", "content": {"k0": "x", "k1": "y"}}
        assert (await tool_b).json() == {"action": "accept", "content": {"k0": "1", "k1": "2", "k2": "3"}}
