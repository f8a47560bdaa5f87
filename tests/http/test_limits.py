"""Every limit is a setting with a clear 4xx when hit, and hitting it changes nothing."""

import httpx
import pytest

from tests.helpers import form, read_events, text_properties, until


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
        # The first stream's slot is freed once it closes.
        await until(lambda: server.gateway.subscribers == 0, what="the first stream's slot freed")
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


def big_choices(questions: int, options: int, seed: str) -> dict:
    return {
        "type": "object",
        "properties": {
            f"q{i}": {
                "type": "string",
                "enum": [f"{seed} option {i}-{j} with a longer label" for j in range(options)],
            }
            for i in range(questions)
        },
    }


async def test_pending_questions_are_bounded_by_the_bytes_they_hold(make_server):
    """Within the count limits, a few big questions fill the byte budget: the next is a 429 that names
    the setting, nothing is asked, and answering one makes room again."""
    server = make_server(max_pending_bytes_per_session=2 * 1024 * 1024)
    session = {"sessionID": "ses_a"}
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        created = []
        for number in range(50):
            response = await client.post(
                "/elicitations", json=form(big_choices(10, 50, str(number))), params=session
            )
            if response.status_code != 201:
                break
            created.append(response.json()["id"])
        assert 2 <= len(created) < 50
        assert response.status_code == 429, response.text
        assert response.json()["error"] == "too_many_pending"
        assert "GATEWAY_MAX_PENDING_BYTES_PER_SESSION" in response.json()["message"]
        await assert_nothing_pending(client, len(created))
        assert server.gateway.pending_bytes.total <= 2 * 1024 * 1024

        assert (await client.post(f"/question/{created[0]}/reject")).status_code == 200
        again = await client.post("/elicitations", json=form(big_choices(10, 50, "again")), params=session)
        assert again.status_code == 201, again.text
        other = await client.post(
            "/elicitations", json=form(big_choices(10, 50, "other")), params={"sessionID": "ses_other"}
        )
        assert other.status_code == 201, other.text  # another session has its own budget


async def test_the_gateways_byte_budget_holds_across_sessions(make_server):
    server = make_server(max_pending_bytes=2 * 1024 * 1024)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        statuses = []
        for number in range(30):
            response = await client.post(
                "/elicitations",
                json=form(big_choices(10, 50, str(number))),
                params={"sessionID": f"ses_{number}"},
            )
            statuses.append(response.status_code)
        assert statuses[0] == 201
        assert statuses[-1] == 429
        assert "GATEWAY_MAX_PENDING_BYTES" in response.json()["message"]
        assert server.gateway.pending_bytes.total <= 2 * 1024 * 1024


async def test_a_question_larger_than_a_session_may_hold_is_413(make_server):
    server = make_server(max_pending_bytes_per_session=1024 * 1024, max_pending_bytes=2 * 1024 * 1024)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        big = form(big_choices(30, 200, "x"))
        refused = await client.post("/elicitations", json=big, params={"sessionID": "ses_a"})
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"] == "question_too_large"
        assert "GATEWAY_MAX_PENDING_BYTES_PER_SESSION" in refused.json()["message"]
        await assert_nothing_pending(client)
        assert server.gateway.pending_bytes.total == 0
        # without a session, only the gateway's budget bounds it
        refused = await client.post("/elicitations", json=form(big_choices(50, 200, "x")))
        assert refused.status_code == 413, refused.text
        assert "GATEWAY_MAX_PENDING_BYTES," in refused.json()["message"]
        await assert_nothing_pending(client)


async def test_questions_without_a_session_are_charged_to_the_gateways_budget_only(make_server):
    """Questions whose tool names no session all land in the default session, from any number of tools:
    they are bounded by the gateway's byte budget, not by one session's, so they do not crowd each
    other out at a session's budget; a session's own questions still stop at theirs."""
    server = make_server(max_pending_bytes_per_session=1024 * 1024, max_pending_bytes=3 * 1024 * 1024)
    gateway = server.gateway
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:

        async def fill(params: dict[str, str]) -> httpx.Response:
            for number in range(100):
                response = await client.post(
                    "/elicitations", json=form(big_choices(10, 50, f"{params}{number}")), params=params
                )
                if response.status_code != 201:
                    return response
            raise AssertionError("the budget never filled")

        refused = await fill({"sessionID": "ses_a"})
        assert refused.status_code == 429
        assert "GATEWAY_MAX_PENDING_BYTES_PER_SESSION" in refused.json()["message"]
        in_session = gateway.pending_bytes.total
        assert in_session <= 1024 * 1024

        refused = await fill({})
        assert refused.status_code == 429
        assert "GATEWAY_MAX_PENDING_BYTES," in refused.json()["message"]
        without = gateway.pending_bytes.total - in_session
        assert without > 1024 * 1024  # more than a session's budget, within the gateway's
        assert gateway.pending_bytes.total <= 3 * 1024 * 1024
        assert gateway.pending_bytes.session(gateway.default_session_id) == 0


async def test_finished_questions_give_their_bytes_back(client, server):
    for number in range(3):
        created = (await client.post("/elicitations", json=form(big_choices(5, 20, str(number))))).json()
        assert server.gateway.pending_bytes.total > 0
        assert (await client.post(f"/question/{created['id']}/reject")).status_code == 200
    assert server.gateway.pending_bytes.total == 0


async def test_a_long_listing_is_written_in_chunks(client):
    """Pending questions may hold many megabytes: the listing goes out in pieces, each encoded as it is
    written, and is the same JSON as a short one."""
    asked = []
    for number in range(6):
        created = await client.post("/elicitations", json=form(big_choices(10, 100, str(number))))
        asked.append(created.json()["id"])
    async with client.stream("GET", "/question") as response:
        assert "content-length" not in response.headers
        pieces = [piece async for piece in response.aiter_raw()]
    assert len(b"".join(pieces)) > 256 * 1024
    listed = (await client.get("/question")).json()
    assert [request["id"] for request in listed] == asked
    assert len(listed[0]["questions"]) == 10
