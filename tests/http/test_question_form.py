"""``GET /question/{id}/form``: what each question accepts, for answerers that render real forms."""

import time

from tests.conftest import captured_schema_files, load_params
from tests.helpers import form, pending


def spec_params():
    return load_params(next(p for p in captured_schema_files() if p.name.startswith("spec-2025-11-25")))


async def test_form_describes_every_question(client):
    params = spec_params()
    await client.post("/elicitations", json=params)
    [request] = await pending(client)
    described = (await client.get(f"/question/{request['id']}/form")).json()
    assert described["id"] == request["id"]
    assert described["message"] == "Configure the deployment"
    fields = {f["key"]: f for f in described["fields"]}
    assert list(fields) == list(params["requestedSchema"]["properties"])
    assert [f["header"] for f in described["fields"]] == [q["header"] for q in request["questions"]]
    assert fields["name"] | {"question": "", "text": "", "hints": []} == {
        "key": "name",
        "kind": "string",
        "required": True,
        "minLength": 2,
        "maxLength": 50,
        "default": "svc",
        "header": "Name",
        "question": "",
        "text": "",
        "hints": [],
    }
    assert (fields["replicas"]["minimum"], fields["replicas"]["maximum"], fields["replicas"]["default"]) == (
        1,
        10,
        2,
    )
    assert fields["email"]["format"] == "email"
    assert fields["confirm"]["kind"] == "boolean"
    assert fields["confirm"]["default"] is False
    assert fields["env"]["options"] == [
        {"value": "dev", "label": "Development", "description": ""},
        {"value": "prod", "label": "Production", "description": ""},
    ]
    assert (fields["features"]["kind"], fields["features"]["minItems"], fields["features"]["maxItems"]) == (
        "multi",
        1,
        2,
    )
    assert "default" not in fields["teams"]
    assert "options" not in fields["email"]


async def test_form_gives_each_questions_own_words_apart_from_message_and_hints(client):
    schema = {
        "type": "object",
        "properties": {
            "hours": {"type": "integer", "title": "Hours", "description": "Operating hours?", "maximum": 99},
            "name": {"type": "string", "description": "Your name", "minLength": 2, "default": "Ann"},
            "plain": {"type": "string"},
        },
    }
    await client.post("/elicitations", json=form(schema, "Excavator diagnosis"))
    [request] = await pending(client)
    fields = (await client.get(f"/question/{request['id']}/form")).json()["fields"]
    assert [q["question"] for q in request["questions"]] == [f["question"] for f in fields]
    assert fields[0]["question"].startswith("Excavator diagnosis\n\nOperating hours? (")
    assert [f["text"] for f in fields] == ["Operating hours?", "Your name", "Plain"]
    assert fields[0]["hints"] == ["a whole number at most 99"]
    assert fields[1]["hints"] == ["at least 2 characters", "default: Ann"]
    assert fields[2]["hints"] == []
    for field in fields:  # the question as OpenCode shows it is the words plus the hints in parentheses
        suffix = f" ({'; '.join(field['hints'])})" if field["hints"] else ""
        assert field["question"].endswith(field["text"] + suffix)


async def test_form_of_a_legacy_schema_leaves_the_message_to_the_message(client):
    await client.post("/elicitations", json=form({"type": "string", "enum": ["a", "b"]}, "Pick one"))
    [request] = await pending(client)
    described = (await client.get(f"/question/{request['id']}/form")).json()
    assert described["legacy"] is True
    assert described["message"] == "Pick one"
    assert [f["text"] for f in described["fields"]] == [""]


async def test_form_of_unknown_finished_or_malformed_ids(client):
    created = (await client.post("/elicitations", json=form({"enum": ["a"]}))).json()
    await client.post(f"/question/{created['id']}/reject")
    for request_id in (created["id"], "que_000000000000unknownunknown"):
        missing = await client.get(f"/question/{request_id}/form")
        assert missing.status_code == 404
        assert missing.json()["_tag"] == "QuestionNotFoundError"
    malformed = await client.get("/question/abc/form")
    assert malformed.status_code == 400
    assert malformed.json()["data"]["kind"] == "Params"


async def test_form_says_when_the_question_expires(client):
    """``expiresAt`` is the question's deadline in seconds since the epoch: now plus its ``timeout``."""
    before = time.time()
    await client.post("/elicitations", json=spec_params(), params={"timeout": "120"})
    [request] = await pending(client)
    described = (await client.get(f"/question/{request['id']}/form")).json()
    assert before + 120 <= described["expiresAt"] <= time.time() + 120
    assert described["onTimeout"] == "cancel"


async def test_form_says_what_the_tool_gets_at_expiry(client):
    """``onTimeout``: answerers can say that the defaults will be sent when nobody answers."""
    with_defaults = {"type": "object", "properties": {"go": {"type": "boolean", "default": True}}}
    await client.post("/elicitations", json=form(with_defaults), params={"onTimeout": "default"})
    [request] = await pending(client)
    described = (await client.get(f"/question/{request['id']}/form")).json()
    assert described["onTimeout"] == "default"
