"""Every limit is a setting with a clear 4xx when hit, and hitting it changes nothing."""

import asyncio

import httpx
import pytest

from tests.helpers import form, read_events, text_properties


def choices(count: int) -> dict:
    return {
        "type": "object",
        "properties": {"pick": {"type": "string", "enum": [f"o{i}" for i in range(count)]}},
    }


async def assert_nothing_pending(client: httpx.AsyncClient, expected: int = 0) -> None:
    assert len((await client.get("/question")).json()) == expected


async def test_options_per_question(make_server):
    server = make_server(max_options=5)
    async with httpx.AsyncClient(base_url=server.url) as client:
        refused = await client.post("/elicitations", json=form(choices(6)))
        assert refused.status_code == 422
        assert refused.json()["error"] == "too_many_options"
        assert "requestedSchema.properties.pick" in refused.json()["message"]
        await assert_nothing_pending(client)
        assert (await client.post("/elicitations", json=form(choices(5)))).status_code == 201


@pytest.mark.parametrize(
    ("params", "where"),
    [
        (form(text_properties(1), "m" * 101), "message"),
        (
            form({"type": "object", "properties": {"a": {"type": "string", "description": "d" * 101}}}),
            "description",
        ),
        (form({"type": "object", "properties": {"a": {"type": "string", "title": "t" * 101}}}), "title"),
        (form(choices(1) | {"properties": {"pick": {"enum": ["x" * 101]}}}), "option"),
        (form({"type": "object", "properties": {"k" * 101: {"type": "string"}}}), "key"),
    ],
)
async def test_text_lengths(make_server, params, where):
    server = make_server(max_text_length=100)
    async with httpx.AsyncClient(base_url=server.url) as client:
        refused = await client.post("/elicitations", json=params)
        assert refused.status_code == 422
        assert refused.json()["error"] == "text_too_long"
        assert where in refused.json()["message"]
        await assert_nothing_pending(client)


async def test_answer_length(make_server):
    server = make_server(max_text_length=100)
    async with httpx.AsyncClient(base_url=server.url) as client:
        created = (await client.post("/elicitations", json=form(text_properties(1)))).json()
        refused = await client.post(f"/question/{created['id']}/reply", json={"answers": [["a" * 101]]})
        assert refused.status_code == 400
        assert refused.json()["data"]["kind"] == "Payload"
        await assert_nothing_pending(client, expected=1)


async def test_pending_in_all(make_server):
    server = make_server(max_pending=2)
    async with httpx.AsyncClient(base_url=server.url) as client:
        for _ in range(2):
            assert (await client.post("/elicitations", json=form(text_properties(1)))).status_code == 201
        refused = await client.post("/elicitations", json=form(text_properties(1)))
        assert refused.status_code == 429
        assert refused.json()["error"] == "too_many_pending"
        assert "GATEWAY_MAX_PENDING" in refused.json()["message"]
        await assert_nothing_pending(client, expected=2)
        first = (await client.get("/question")).json()[0]["id"]
        await client.post(f"/question/{first}/reject")
        assert (await client.post("/elicitations", json=form(text_properties(1)))).status_code == 201


async def test_pending_per_session(make_server):
    server = make_server(max_pending_per_session=1)
    async with httpx.AsyncClient(base_url=server.url) as client:
        ask = form(text_properties(1))
        assert (
            await client.post("/elicitations", json=ask, params={"sessionID": "ses_a"})
        ).status_code == 201
        refused = await client.post("/elicitations", json=ask, params={"sessionID": "ses_a"})
        assert refused.status_code == 429
        assert "ses_a" in refused.json()["message"]
        assert (
            await client.post("/elicitations", json=ask, params={"sessionID": "ses_b"})
        ).status_code == 201


async def test_subscribers(make_server):
    server = make_server(max_subscribers=1)
    async with httpx.AsyncClient(base_url=server.url) as client, read_events(client):
        refused = await client.get("/event")
        assert refused.status_code == 429
        assert refused.json()["error"] == "too_many_subscribers"
    async with httpx.AsyncClient(base_url=server.url) as client:
        for _ in range(50):  # the first stream's slot is freed once it closes
            if server.gateway.subscribers == 0:
                break
            await asyncio.sleep(0.02)
        async with read_events(client) as events:
            assert events.response is not None
            assert events.response.status_code == 200


@pytest.mark.parametrize(
    "prop",
    [
        ("password", {"type": "string"}),
        ("password", {}),
        ("apiKey", {"type": "string"}),
        ("x", {"type": "string", "title": "GitHub personal access token"}),
        ("card_number", {"type": "string"}),
        ("x", {"type": "string", "format": "password"}),
        ("x", {"anyOf": [{"type": "string", "title": "Private key"}, {"type": "null"}]}),
    ],
)
async def test_questions_asking_for_secrets_are_refused(client, prop):
    key, schema = prop
    refused = await client.post("/elicitations", json=form({"type": "object", "properties": {key: schema}}))
    assert refused.status_code == 422
    assert refused.json()["error"] == "sensitive_question"
    assert f"requestedSchema.properties.{key}" in refused.json()["message"]
    await assert_nothing_pending(client)


@pytest.mark.parametrize(
    ("key", "prop", "what"),
    [
        ("x", {"type": "string", "title": "GitHub token"}, "a token"),
        ("x", {"type": "string", "description": "Your credit card"}, "payment card details"),
        ("pin", {"type": "string"}, "a PIN"),
        ("code", {"type": "string", "title": "Verification code"}, "a verification code"),
    ],
)
async def test_questions_that_may_ask_for_secrets_are_asked_with_a_warning(client, key, prop, what):
    """Weaker signs, or a secret named only in the description: asked, and the person is warned, in
    the question's text (for OpenCode clients) and in its form (for the page and the terminal)."""
    created = await client.post("/elicitations", json=form({"type": "object", "properties": {key: prop}}))
    assert created.status_code == 201, created.text
    request_id = created.json()["id"]
    [listed] = (await client.get("/question")).json()
    assert f"may ask for {what}" in listed["questions"][0]["question"]
    [field] = (await client.get(f"/question/{request_id}/form")).json()["fields"]
    assert f"may ask for {what}" in field["warning"]


async def test_secrets_may_be_allowed_by_setting(make_server):
    server = make_server(allow_sensitive=True)
    async with httpx.AsyncClient(base_url=server.url) as client:
        allowed = await client.post(
            "/elicitations", json=form({"type": "object", "properties": {"password": {}}})
        )
        assert allowed.status_code == 201


async def test_harmless_words_are_not_mistaken_for_secrets(client):
    """Numbers, booleans and choices are never judged, whatever their words say; free text only by the
    words of its key and title, not by parts of words."""
    properties = {
        "max_tokens": {"type": "integer"},
        "budget": {"type": "integer", "title": "Token budget"},
        "favourite": {
            "type": "integer",
            "description": "Your favourite number (not your phone number, PIN or any other sensitive detail)",
        },
        "remember": {"type": "boolean", "title": "Remember my password"},
        "method": {"type": "string", "title": "Sign-in method", "enum": ["password", "passkey"]},
        "passport_country": {"type": "string"},
        "card_game": {"type": "string", "title": "Favourite card game"},
        "passwordless_email": {"type": "string"},
    }
    created = await client.post("/elicitations", json=form({"type": "object", "properties": properties}))
    assert created.status_code == 201, created.text
    fields = (await client.get(f"/question/{created.json()['id']}/form")).json()["fields"]
    assert [field.get("warning") for field in fields] == [None] * len(properties)
