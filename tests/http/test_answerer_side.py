"""The answerer side in OpenCode's shapes (docs/protocol.md, Answerer side): list, reply, reject, and
their errors."""

import asyncio
import logging
import re
from typing import Any

import httpx
import pytest

from tests.helpers import RFC0010_SCHEMA, ask, form, pending, read_events, text_properties

QUESTION_ID = re.compile(r"^que_[0-9a-f]{12}[0-9A-Za-z]{14}$")

FIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "title": "Model", "enum": ["SY215C", "SY235C"]},
        "hours": {"type": "integer", "title": "Hours", "minimum": 0},
        "symptoms": {
            "type": "array",
            "title": "Symptoms",
            "items": {"type": "string", "enum": ["Smoke", "Noise", "Leak"]},
            "maxItems": 2,
        },
        "notes": {"type": "string", "title": "Notes"},
    },
    "required": ["model", "hours", "notes"],
}
FIT_ANSWERS = [["SY215C"], ["1200"], ["Smoke"], ["runs hot"]]
FIT_CONTENT = {"model": "SY215C", "hours": 1200, "symptoms": ["Smoke"], "notes": "runs hot"}


async def create(client: httpx.AsyncClient, params: dict[str, Any], **query: Any) -> str:
    """Ask without waiting (``POST /elicitations``); return the question id."""
    response = await client.post("/elicitations", json=params, params=query)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def status_of(client: httpx.AsyncClient, request_id: str) -> str:
    return (await client.get(f"/elicitations/{request_id}")).json()["status"]


async def listed_ids(client: httpx.AsyncClient, **kwargs: Any) -> list[str]:
    response = await client.get("/question", **kwargs)
    assert response.status_code == 200
    return [request["id"] for request in response.json()]


def assert_no_nulls(value: Any) -> None:
    if isinstance(value, dict):
        for item in value.values():
            assert item is not None, value
            assert_no_nulls(item)
    elif isinstance(value, list):
        for item in value:
            assert_no_nulls(item)


def assert_bad_request(response: httpx.Response, kind: str) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["name"] == "BadRequest"
    assert body["data"]["kind"] == kind
    assert isinstance(body["data"]["message"], str)
    assert body["data"]["message"]
    return body["data"]


def assert_not_found(response: httpx.Response, request_id: str, became: str = "") -> None:
    """OpenCode's 404; ``became``, what the message says happened to a finished question."""
    assert response.status_code == 404, response.text
    assert response.json() == {
        "_tag": "QuestionNotFoundError",
        "requestID": request_id,
        "message": f"Question request not found: {request_id}" + (f" ({became})" if became else ""),
    }


# ---------------------------------------------------------------------------------------------------
# GET /question


@pytest.mark.parametrize("path", ["/question", "/question/"])
async def test_list_is_an_empty_array_when_nothing_is_pending(client, path):
    response = await client.get(path)
    assert response.status_code == 200
    assert response.json() == []


@pytest.mark.parametrize("path", ["/question", "/question/"])
async def test_list_shows_pending_requests_in_the_model_shapes(client, path):
    """QuestionRequest/QuestionInfo/QuestionOption/QuestionTool, nulls omitted, flags only where set."""
    schema = {
        **RFC0010_SCHEMA,
        "properties": {
            **RFC0010_SCHEMA["properties"],
            "ok": {"type": "boolean", "title": "Running", "description": "Does it run?"},
        },
    }
    with_tool = await create(
        client,
        form(schema, "Excavator diagnosis"),
        sessionID="ses_0193a1c2b3d4AbCdEfGhIjKlMn",
        messageID="msg_1",
        callID="call_1",
    )
    without_tool = await create(client, form(text_properties(1), "Plain"))

    listed = (await client.get(path)).json()
    assert [request["id"] for request in listed] == [with_tool, without_tool]
    assert_no_nulls(listed)

    first, second = listed
    assert first == {
        "id": with_tool,
        "sessionID": "ses_0193a1c2b3d4AbCdEfGhIjKlMn",
        "questions": [
            {
                "question": "Excavator diagnosis\n\nEquipment model?",
                "header": "Model",
                "options": [
                    {"label": "SY215C", "description": ""},
                    {"label": "SY235C", "description": ""},
                ],
                "custom": False,
            },
            {
                "question": "Select symptoms:",
                "header": "Symptoms",
                "options": [
                    {"label": "Black smoke", "description": ""},
                    {"label": "Noise", "description": "Abnormal noise"},
                ],
                "multiple": True,
                "custom": False,
            },
            {
                "question": "Anything else? (at least 1 character)",
                "header": "Notes",
                "options": [],
            },
            {
                "question": "Does it run?",
                "header": "Running",
                "options": [{"label": "Yes", "description": ""}, {"label": "No", "description": ""}],
                "custom": False,
            },
        ],
        "tool": {"messageID": "msg_1", "callID": "call_1"},
    }
    assert set(second) == {"id", "sessionID", "questions"}  # no tool: the key is left out
    assert second["sessionID"].startswith("ses")
    assert set(second["questions"][0]) == {"question", "header", "options"}


async def test_list_is_oldest_first_with_ids_that_sort_in_creation_order(client):
    created = [await create(client, form(text_properties(1), f"Q{i}")) for i in range(12)]
    assert all(QUESTION_ID.match(request_id) for request_id in created), created
    assert created == sorted(created)
    assert await listed_ids(client) == created


async def test_ids_of_questions_created_concurrently_sort_in_listing_order(client):
    created = await asyncio.gather(*(create(client, form(text_properties(1), f"Q{i}")) for i in range(25)))
    assert len(set(created)) == len(created)
    assert all(QUESTION_ID.match(request_id) for request_id in created), created
    listed = await listed_ids(client)
    assert sorted(listed) == sorted(created)
    assert listed == sorted(listed)  # oldest first, and ids sort in creation order


async def test_directory_filters_the_list_by_query_and_header(client):
    """A directory keeps that directory's questions and those that name none."""
    in_a = await create(client, form(text_properties(1)), directory="/srv/p/a")
    in_b = await create(client, form(text_properties(1)), directory="/srv/p/b")
    anywhere = await create(client, form(text_properties(1)))

    assert await listed_ids(client) == [in_a, in_b, anywhere]
    assert await listed_ids(client, params={"directory": "/srv/p/a"}) == [in_a, anywhere]
    assert await listed_ids(client, headers={"x-opencode-directory": "/srv/p/b"}) == [in_b, anywhere]
    assert await listed_ids(client, params={"directory": "/srv/p/c"}) == [anywhere]
    assert await listed_ids(client, params={"directory": "/srv/p/a", "workspace": "w1"}) == [in_a, anywhere]


async def test_finished_questions_leave_the_list(client):
    answered = await create(client, form(text_properties(1)))
    rejected = await create(client, form(text_properties(1)))
    left = await create(client, form(text_properties(1)))
    assert (await client.post(f"/question/{answered}/reply", json={"answers": [["x"]]})).json() is True
    assert (await client.post(f"/question/{rejected}/reject")).json() is True
    assert await listed_ids(client) == [left]


# ---------------------------------------------------------------------------------------------------
# POST /question/{id}/reply


async def test_reply_returns_true_and_the_tool_gets_typed_content(client):
    tool = ask(client, form(FIT_SCHEMA))
    (request,) = await pending(client)
    response = await client.post(f"/question/{request['id']}/reply", json={"answers": FIT_ANSWERS})
    assert response.status_code == 200
    assert response.json() is True
    assert (await tool).json() == {"action": "accept", "content": FIT_CONTENT}
    assert await listed_ids(client) == []


async def test_an_id_not_starting_with_que_is_a_params_error(client):
    request_id = await create(client, form(text_properties(1)))
    for action in ("reply", "reject"):
        for bad_id in ("abc_0193a1c2b3d4AbCdEfGhIjKlMn", "ses_0193a1c2b3d4AbCdEfGhIjKlMn", "x"):
            response = await client.post(f"/question/{bad_id}/{action}", json={"answers": [["x"]]})
            assert_bad_request(response, "Params")
    assert await listed_ids(client) == [request_id]


MALFORMED_REPLIES = [
    b"not json",
    b"",
    b"[]",
    b'"answers"',
    b"null",
    b"{}",
    b'{"answer": [["x"]]}',
    b'{"answers": "x"}',
    b'{"answers": ["x"]}',
    b'{"answers": [[1]]}',
    b'{"answers": [[null]]}',
    b'{"answers": [["x"], "y"]}',
    b'{"answers": {"0": ["x"]}}',
]


async def test_a_malformed_reply_body_is_a_payload_error_and_changes_nothing(client):
    """Not JSON, not an object, answers missing or not a list of lists of strings: 400 Payload."""
    tool = ask(client, form(text_properties(1)))
    (request,) = await pending(client)
    for body in MALFORMED_REPLIES:
        response = await client.post(
            f"/question/{request['id']}/reply", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 400, body
        assert_bad_request(response, "Payload")
        assert await listed_ids(client) == [request["id"]], body
    ok = await client.post(f"/question/{request['id']}/reply", json={"answers": [["fine"]]})
    assert ok.json() is True
    assert (await tool).json() == {"action": "accept", "content": {"k0": "fine"}}


@pytest.mark.parametrize("action", ["decline", "cancel", "accept"])
async def test_an_action_posted_to_reply_is_told_where_declining_goes(client, action):
    tool = ask(client, form(text_properties(1)))
    (request,) = await pending(client)
    response = await client.post(f"/question/{request['id']}/reply", json={"action": action})
    data = assert_bad_request(response, "Payload")
    assert "to decline, POST /question/{id}/reject" in data["message"]
    assert '{"action": "decline"}' in data["message"]
    assert await listed_ids(client) == [request["id"]]
    declined = await client.post(f"/question/{request['id']}/reject", json={"action": "decline"})
    assert declined.json() is True
    assert (await tool).json() == {"action": "decline"}


@pytest.mark.parametrize("action", ["reply", "reject"])
async def test_unknown_question_is_not_found(client, action):
    unknown = "que_0193a1c2b3d4AbCdEfGhIjKlMn"
    response = await client.post(f"/question/{unknown}/{action}", json={"answers": [["x"]]})
    assert_not_found(response, unknown)


@pytest.mark.parametrize("first", ["reply", "reject"])
@pytest.mark.parametrize("second", ["reply", "reject"])
async def test_a_finished_question_is_not_found(client, first, second):
    tool = ask(client, form(text_properties(1)))
    (request,) = await pending(client)
    request_id = request["id"]
    done = await client.post(f"/question/{request_id}/{first}", json={"answers": [["x"]]})
    assert done.json() is True
    result = (await tool).json()
    again = await client.post(f"/question/{request_id}/{second}", json={"answers": [["y"]]})
    dismissed = "it was dismissed, or its tool stopped waiting"
    became = "it was already answered" if first == "reply" else dismissed
    assert_not_found(again, request_id, became)
    assert (await client.get(f"/elicitations/{request_id}")).json()["result"] == result


async def test_a_declined_or_expired_question_says_so_when_answered(client):
    tool = ask(client, form(text_properties(1)))
    (request,) = await pending(client)
    await client.post(f"/question/{request['id']}/reject", json={"action": "decline"})
    await tool
    late = await client.post(f"/question/{request['id']}/reply", json={"answers": [["x"]]})
    assert_not_found(late, request["id"], "it was declined")

    tool = ask(client, form(text_properties(1)), timeout="1")
    (request,) = await pending(client)
    assert (await tool).json() == {"action": "cancel"}
    late = await client.post(f"/question/{request['id']}/reply", json={"answers": [["x"]]})
    assert_not_found(late, request["id"], "it expired")


@pytest.mark.parametrize(
    ("answers", "failing"),
    [
        pytest.param([["SY215C"], ["lots"], [], ["n"]], [(1, "Hours")], id="word-for-integer"),
        pytest.param([["SY999"], ["3"], [], ["n"]], [(0, "Model")], id="label-not-an-option"),
        pytest.param([["SY215C"], ["3"], [], []], [(3, "Notes")], id="required-left-empty"),
        pytest.param([["SY215C"], [], [], ["n"]], [(1, "Hours")], id="required-integer-empty"),
        pytest.param([["SY215C"], ["3"]], [(3, "Notes")], id="required-missing-at-end"),
        pytest.param(
            [["SY215C"], ["3"], ["Smoke", "Noise", "Leak"], ["n"]],
            [(2, "Symptoms")],
            id="too-many-selections",
        ),
        pytest.param(
            [["SY215C", "SY235C"], ["3"], [], ["n"]], [(0, "Model")], id="two-answers-to-one-choice"
        ),
        pytest.param([["nope"], ["many"], [], []], [(0, "Model"), (1, "Hours"), (3, "Notes")], id="several"),
    ],
)
async def test_answers_that_do_not_fit_are_refused_per_question_and_stay_pending(client, answers, failing):
    tool = ask(client, form(FIT_SCHEMA))
    (request,) = await pending(client)
    request_id = request["id"]

    response = await client.post(f"/question/{request_id}/reply", json={"answers": answers})
    data = assert_bad_request(response, "Payload")
    issues = data["issues"]
    assert [(issue["index"], issue["header"]) for issue in issues] == failing
    for issue in issues:
        assert set(issue) == {"index", "header", "message"}
        assert isinstance(issue["message"], str)
        assert issue["message"]

    assert await listed_ids(client) == [request_id]
    assert await status_of(client, request_id) == "pending"
    fixed = await client.post(f"/question/{request_id}/reply", json={"answers": FIT_ANSWERS})
    assert fixed.status_code == 200
    assert fixed.json() is True
    assert (await tool).json() == {"action": "accept", "content": FIT_CONTENT}


async def test_more_answers_than_questions_are_refused_and_stay_pending(client):
    tool = ask(client, form(FIT_SCHEMA))
    (request,) = await pending(client)
    response = await client.post(
        f"/question/{request['id']}/reply", json={"answers": [*FIT_ANSWERS, ["extra"]]}
    )
    data = assert_bad_request(response, "Payload")
    assert isinstance(data.get("issues"), list)
    assert await listed_ids(client) == [request["id"]]
    fixed = await client.post(f"/question/{request['id']}/reply", json={"answers": FIT_ANSWERS})
    assert fixed.json() is True
    assert (await tool).json() == {"action": "accept", "content": FIT_CONTENT}


# ---------------------------------------------------------------------------------------------------
# POST /question/{id}/reject


@pytest.mark.parametrize(
    ("body", "result"),
    [
        pytest.param(None, {"action": "cancel"}, id="no-body"),
        pytest.param(b"{}", {"action": "cancel"}, id="empty-object"),
        pytest.param(b'{"action": "decline"}', {"action": "decline"}, id="decline"),
        pytest.param(b'{"action": "cancel"}', {"action": "cancel"}, id="cancel"),
    ],
)
async def test_reject_gives_the_tool_cancel_or_decline(client, body, result):
    tool = ask(client, form(FIT_SCHEMA))
    (request,) = await pending(client)
    kwargs: dict[str, Any] = {}
    if body is not None:
        kwargs = {"content": body, "headers": {"content-type": "application/json"}}
    response = await client.post(f"/question/{request['id']}/reject", **kwargs)
    assert response.status_code == 200
    assert response.json() is True
    assert (await tool).json() == result
    assert await listed_ids(client) == []


async def test_reject_with_another_action_or_a_non_object_body_is_refused(client):
    tool = ask(client, form(text_properties(1)))
    (request,) = await pending(client)
    for body in (
        b'{"action": "accept"}',
        b'{"action": "nope"}',
        b'{"action": 5}',
        b'{"action": null}',
        b"[]",
        b'"decline"',
        b"not json",
    ):
        response = await client.post(
            f"/question/{request['id']}/reject", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 400, body
        assert response.json()["name"] == "BadRequest"
        assert await listed_ids(client) == [request["id"]], body
    assert (await client.post(f"/question/{request['id']}/reject")).json() is True
    assert (await tool).json() == {"action": "cancel"}


# ---------------------------------------------------------------------------------------------------
# Races between answerers


async def _finishing_events(events, request_id: str) -> list[str]:
    """Wait for the first finishing event of ``request_id``, then make sure no second one follows."""
    first = await events.next()
    while first.type not in ("question.replied", "question.rejected"):
        first = await events.next()
    assert first.properties["requestID"] == request_id
    await events.no_frame(within=0.3)
    return [
        frame.type
        for frame in events.seen
        if frame.type in ("question.replied", "question.rejected")
        and frame.properties["requestID"] == request_id
    ]


async def test_two_answerers_replying_at_once_one_wins(server):
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as first,
        httpx.AsyncClient(base_url=server.url, timeout=10) as second,
    ):
        for attempt in range(5):
            async with read_events(first) as events:
                tool = ask(first, form(text_properties(1)))
                asked = await events.next("question.asked")
                request_id = asked.properties["id"]
                responses = await asyncio.gather(
                    first.post(f"/question/{request_id}/reply", json={"answers": [["one"]]}),
                    second.post(f"/question/{request_id}/reply", json={"answers": [["two"]]}),
                )
                assert sorted(r.status_code for r in responses) == [200, 404], attempt
                winner = next(r for r in responses if r.status_code == 200)
                loser = next(r for r in responses if r.status_code == 404)
                assert winner.json() is True
                assert_not_found(loser, request_id, "it was already answered")
                assert await _finishing_events(events, request_id) == ["question.replied"]
                content = (await tool).json()["content"]
                assert content["k0"] == ("one" if responses[0] is winner else "two")


async def test_reply_racing_reject_one_wins(server):
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as first,
        httpx.AsyncClient(base_url=server.url, timeout=10) as second,
    ):
        for attempt in range(5):
            async with read_events(first) as events:
                tool = ask(first, form(text_properties(1)))
                asked = await events.next("question.asked")
                request_id = asked.properties["id"]
                replied, rejected = await asyncio.gather(
                    first.post(f"/question/{request_id}/reply", json={"answers": [["one"]]}),
                    second.post(f"/question/{request_id}/reject"),
                )
                assert sorted([replied.status_code, rejected.status_code]) == [200, 404], attempt
                result = (await tool).json()
                finished = await _finishing_events(events, request_id)
                if replied.status_code == 200:
                    assert_not_found(rejected, request_id, "it was already answered")
                    assert result == {"action": "accept", "content": {"k0": "one"}}
                    assert finished == ["question.replied"]
                else:
                    assert_not_found(replied, request_id, "it was dismissed, or its tool stopped waiting")
                    assert result == {"action": "cancel"}
                    assert finished == ["question.rejected"]


async def test_a_refused_reply_is_logged_with_its_reason(client, caplog):
    """The OpenCode TUI shows nothing of a 400 on its reply: the log is where the reason is found."""
    caplog.set_level(logging.INFO, logger="elicitation_gateway")
    tool = ask(client, form(FIT_SCHEMA))
    (request,) = await pending(client)
    response = await client.post(
        f"/question/{request['id']}/reply", json={"answers": [["nope"], ["3"], [], []]}
    )
    message = assert_bad_request(response, "Payload")["message"]
    [line] = [record for record in caplog.records if "refused" in record.getMessage()]
    assert line.levelno == logging.INFO
    assert line.getMessage() == f"reply to {request['id']} refused: {message}"
    await client.post(f"/question/{request['id']}/reject")
    await tool
