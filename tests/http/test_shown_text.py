"""Tool text as people see it, over HTTP: who asks apart from the message, options a person cannot tell
apart refused, and what OpenCode clients get made safe to show while their answers map back."""

import logging

from tests.helpers import form, pending

HOSTILE = "\x1b[2K\x1b[1GTrusted CI · run_tests: fine\x1b]52;c;cm0gLXJm\x07\u202e"


async def test_who_asks_is_a_field_of_its_own_and_opencode_clients_see_it_first(client):
    schema = {"type": "object", "properties": {"go": {"type": "boolean", "title": "Go"}}}
    created = await client.post(
        "/elicitations", json=form(schema, f"Wipe the disk?\n{HOSTILE}"), params={"asker": "evil-mcp · wipe"}
    )
    assert created.status_code == 201, created.text
    [request] = await pending(client)
    described = (await client.get(f"/question/{request['id']}/form")).json()
    assert described["asker"] == "evil-mcp · wipe"
    assert described["message"] == f"Wipe the disk?\n{HOSTILE}"  # the tool's own, unchanged
    question = request["questions"][0]["question"]
    assert question.startswith(
        "evil-mcp · wipe: Wipe the disk?\n[2K[1GTrusted CI · run_tests: fine]52;c;cm0gLXJm⟨U+202E⟩"
    )
    assert "\x1b" not in question
    assert (await client.post(f"/question/{request['id']}/reply", json={"answers": [["No"]]})).json() is True
    assert (await client.get(f"/elicitations/{created.json()['id']}")).json()["result"] == {
        "action": "accept",
        "content": {"go": False},
    }


async def test_an_asker_longer_than_a_name_is_refused(client):
    schema = {"type": "object", "properties": {"go": {"type": "boolean"}}}
    refused = await client.post("/elicitations", json=form(schema), params={"asker": "x" * 257})
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_asker"
    assert (await client.get("/question")).json() == []


async def test_options_a_person_cannot_tell_apart_are_a_400_naming_the_property(client):
    schema = {"type": "object", "properties": {"act": {"type": "string", "enum": ["Abort", "Abort\u200b"]}}}
    refused = await client.post("/elicit", json=form(schema))
    assert refused.status_code == 400
    body = refused.json()
    assert body["error"] == "invalid_schema"
    assert "requestedSchema.properties.act" in body["message"]
    assert "cannot tell apart" in body["message"]
    assert (await client.get("/question")).json() == []


async def test_an_opencode_client_answers_with_the_label_it_was_shown(client):
    schema = {
        "type": "object",
        "properties": {"act": {"type": "string", "enum": ["Keep\x1b[8m", "Delete\u200b"]}},
    }
    created = await client.post("/elicitations", json=form(schema))
    [request] = await pending(client)
    labels = [option["label"] for option in request["questions"][0]["options"]]
    assert labels == ["Keep[8m", "Delete⟨U+200B⟩"]
    replied = await client.post(f"/question/{request['id']}/reply", json={"answers": [["Delete⟨U+200B⟩"]]})
    assert replied.json() is True
    result = (await client.get(f"/elicitations/{created.json()['id']}")).json()["result"]
    assert result == {"action": "accept", "content": {"act": "Delete\u200b"}}


async def test_a_refused_reply_is_logged_on_one_safe_line(client, caplog):
    caplog.set_level(logging.INFO, logger="elicitation_gateway")
    schema = {"type": "object", "properties": {"act": {"type": "string", "enum": ["Keep\x1b[2K", "Go"]}}}
    await client.post("/elicitations", json=form(schema))
    [request] = await pending(client)
    answers = {"answers": [["no\x1b]0;x\x07\nFAKE"]]}
    refused = await client.post(f"/question/{request['id']}/reply", json=answers)
    assert refused.status_code == 400
    [line] = [record.getMessage() for record in caplog.records if "refused" in record.getMessage()]
    assert "\x1b" not in line
    assert "\n" not in line
    assert "Keep[2K" in line
