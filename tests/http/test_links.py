"""One-tap links on a real gateway with people: ``GET /link/{token}`` shows the question and one
button and changes nothing; ``POST`` answers as the link's person, once; every other token, a
question that is over, and a browser's post from another site are refused with nothing changed."""

import asyncio
import math
import re
import time

import httpx
import pytest

from elicitation_gateway import links
from elicitation_gateway.links import Link
from tests.helpers import ask, form, pending, until

pytest_plugins = ["tests.redis_server"]

PEOPLE = """
[people.alice]
password = "alice-pass"
groups = ["oncall"]

[people.bob]
password = "bob-pass"
"""
SECRET = "a-link-secret-of-at-least-32-characters"
YES_NO = form(
    {"type": "object", "properties": {"go": {"type": "boolean", "title": "Roll back"}}},
    "Roll back <b>release</b> 4.2?",
)


@pytest.fixture
def team(make_server, tmp_path):
    path = tmp_path / "people.toml"
    path.write_text(PEOPLE)
    return make_server(people=path, answerer_password="shared-secret", link_secret=SECRET)


@pytest.fixture
async def alice(team):
    async with httpx.AsyncClient(base_url=team.url, timeout=30, auth=("alice", "alice-pass")) as client:
        yield client


@pytest.fixture
async def anyone(team):
    """No login at all: the link's signature is the credential."""
    async with httpx.AsyncClient(base_url=team.url, timeout=30) as client:
        yield client


def token_of(
    server, request_id: str, person: str = "alice", choice: int = 0, expires: int | None = None
) -> str:
    record = server.run(server.gateway.store.get(request_id))
    expires = math.ceil(record.expires_at) if expires is None else expires
    return links.make(Link(request_id, person, choice, expires), SECRET.encode())


async def asked(tool: httpx.AsyncClient, params=YES_NO, to=("alice",)) -> str:
    response = await tool.post("/elicitations", json={**params, "to": list(to)})
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def status_of(tool: httpx.AsyncClient, request_id: str) -> str:
    return (await tool.get(f"/elicitations/{request_id}")).json()["status"]


async def test_the_page_shows_the_question_and_one_button_and_changes_nothing(team, alice, anyone):
    request_id = await asked(anyone)
    urls = links.choices_for(team.run(team.gateway.store.get(request_id)), "alice", team.url, SECRET.encode())
    assert [label for label, _ in urls] == ["Yes", "No"]
    for _, url in urls:
        for _ in range(3):  # a preview, a scanner, the person: fetched again and again
            page = await anyone.get(url)
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            assert await status_of(anyone, request_id) == "pending"
    page = await anyone.get(urls[0][1])
    text = page.text
    assert "Roll back &lt;b&gt;release&lt;/b&gt; 4.2?" in text  # tool text stays text
    assert "<b>" not in text
    assert "Answering as alice." in text
    assert text.count("<button") == 1
    assert ">Answer Yes</button>" in text
    assert '<form method="post">' in text  # to the page's own address
    assert "<script" not in text
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp
    assert "form-action 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert "script-src" not in csp
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"
    assert [q["id"] for q in await pending(alice)] == [request_id]  # still there for alice
    head = await anyone.head(urls[0][1])
    assert head.status_code == 200
    assert await status_of(anyone, request_id) == "pending"


@pytest.mark.parametrize(("choice", "content"), [(0, {"go": True}), (1, {"go": False})])
async def test_the_post_answers_as_the_person_once(team, alice, anyone, choice, content):
    waiting = ask(anyone, {**YES_NO, "to": ["group:oncall"]})
    request_id = (await pending(alice))[0]["id"]
    token = token_of(team, request_id, choice=choice)
    answered = await anyone.post(f"/link/{token}")
    assert answered.status_code == 200, answered.text
    assert "You answered" in answered.text
    result = (await waiting).json()
    assert result == {"action": "accept", "content": content, "answeredBy": "alice"}
    again = await anyone.post(f"/link/{token}")
    assert again.status_code == 410
    assert "It was answered by alice. A link works once, and ends with its question." in again.text
    shown = await anyone.get(f"/link/{token}")
    assert shown.status_code == 410
    assert "answered by alice" in shown.text
    assert "<button" not in shown.text
    assert "<form" not in shown.text


async def test_a_confirmation_no_declines_as_the_person(team, anyone):
    request_id = await asked(anyone, form({"type": "object", "properties": {}}, "Go ahead?"))
    declined = await anyone.post(f"/link/{token_of(team, request_id, choice=1)}")
    assert declined.status_code == 200
    result = (await anyone.get(f"/elicitations/{request_id}")).json()
    assert result["status"] == "declined"
    assert result["result"] == {"action": "decline", "answeredBy": "alice"}


async def test_a_single_choice_answers_its_option(team, anyone):
    params = form(
        {
            "type": "object",
            "properties": {
                "env": {
                    "type": "string",
                    "oneOf": [{"const": "prod", "title": "Production"}, {"const": "stage"}],
                }
            },
        },
        "Where?",
    )
    request_id = await asked(anyone, params, to=())
    page = await anyone.get(f"/link/{token_of(team, request_id, choice=0)}")
    assert ">Answer Production</button>" in page.text
    assert (await anyone.post(f"/link/{token_of(team, request_id, choice=0)}")).status_code == 200
    result = (await anyone.get(f"/elicitations/{request_id}")).json()["result"]
    assert result == {"action": "accept", "content": {"env": "prod"}, "answeredBy": "alice"}


@pytest.mark.parametrize(
    ("ending", "said"),
    [
        ("decline", "It was declined by bob."),
        ("withdraw", "It was withdrawn or dismissed."),
        ("dismiss", "It was withdrawn or dismissed."),
    ],
)
async def test_a_question_over_says_what_happened(team, anyone, ending, said):
    request_id = await asked(anyone, to=("alice", "bob"))
    bob = httpx.AsyncClient(base_url=team.url, auth=("bob", "bob-pass"))
    async with bob:
        if ending == "decline":
            response = await bob.post(f"/question/{request_id}/reject", json={"action": "decline"})
        elif ending == "dismiss":
            response = await bob.post(f"/question/{request_id}/reject")
        else:
            response = await anyone.delete(f"/elicitations/{request_id}")
        assert response.status_code in (200, 204), response.text
    before = (await anyone.get(f"/elicitations/{request_id}")).json()
    token = token_of(team, request_id)
    for method in ("GET", "POST"):
        response = await anyone.request(method, f"/link/{token}")
        assert response.status_code == 410
        assert said in response.text
        assert "<button" not in response.text
    assert (await anyone.get(f"/elicitations/{request_id}")).json() == before


async def test_a_question_that_expired_says_so(team, anyone):
    response = await anyone.post("/elicitations", json={**YES_NO, "to": ["alice"]}, params={"timeout": "0.3"})
    request_id = response.json()["id"]
    token = token_of(team, request_id, expires=int(time.time()) + 60)  # a link that outlives it

    async def over() -> bool:
        return await status_of(anyone, request_id) != "pending"

    await until(over, what="the question expired")
    shown = await anyone.get(f"/link/{token}")
    assert shown.status_code == 410
    assert "expired unanswered" in shown.text
    posted = await anyone.post(f"/link/{token}")
    assert posted.status_code == 410
    assert "expired" in posted.text
    assert await status_of(anyone, request_id) == "expired"


def _tampered(token: str) -> str:
    payload, signature = token.split(".")
    return f"{payload}.{signature[:10]}{'A' if signature[10] != 'A' else 'B'}{signature[11:]}"


async def test_refused_tokens_change_nothing(team, anyone):
    request_id = await asked(anyone)
    other_id = await asked(anyone)
    good = token_of(team, request_id)
    other_secret = links.make(Link(request_id, "alice", 0, int(time.time()) + 60), b"another secret")
    refusals = {
        "not a token": (f"/link/{'x' * 20}", 400, "not a link the gateway made"),
        "tampered": (f"/link/{_tampered(good)}", 403, "signature does not match"),
        "another secret": (f"/link/{other_secret}", 403, "signature does not match"),
        "expired": (f"/link/{token_of(team, request_id, expires=int(time.time()) - 1)}", 410, "has expired"),
        "no such question": (
            f"/link/{links.make(Link('que_unknown', 'alice', 0, int(time.time()) + 60), SECRET.encode())}",
            404,
            "no such question",
        ),
        "person not listed": (f"/link/{token_of(team, request_id, person='mallory')}", 403, "no longer"),
        "person not addressed": (
            f"/link/{token_of(team, request_id, person='bob')}",
            404,
            "no such question",
        ),
        "no such choice": (f"/link/{token_of(team, request_id, choice=2)}", 400, "names no choice"),
    }
    for what, (path, status, said) in refusals.items():
        for method in ("POST", "GET"):
            response = await anyone.request(method, path)
            assert response.status_code == status, (what, method, response.text)
            assert said in response.text, (what, method)
            assert "<button" not in response.text
    assert await status_of(anyone, request_id) == "pending"
    assert await status_of(anyone, other_id) == "pending"
    # the link still works afterwards, for its own question only
    assert (await anyone.post(f"/link/{good}")).status_code == 200
    assert await status_of(anyone, request_id) == "answered"
    assert await status_of(anyone, other_id) == "pending"


async def test_a_person_moved_out_of_the_group_can_no_longer_answer(team, anyone, tmp_path):
    request_id = await asked(anyone, to=("group:oncall",))
    token = token_of(team, request_id)
    (tmp_path / "people.toml").write_text(PEOPLE.replace('groups = ["oncall"]', "groups = []"))

    async def reload() -> None:
        team.app.state.people.reload()

    await asyncio.to_thread(team.run, reload())  # done on the gateway's loop before this goes on
    assert (await anyone.post(f"/link/{token}")).status_code == 404
    assert await status_of(anyone, request_id) == "pending"


async def test_a_post_from_another_site_is_refused_and_the_own_page_is_not(team, anyone):
    request_id = await asked(anyone)
    token = token_of(team, request_id)
    forged = await anyone.post(
        f"/link/{token}",
        data={"x": "1"},
        headers={"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
    )
    assert forged.status_code == 403
    assert forged.json()["error"] == "cross_origin"
    assert await status_of(anyone, request_id) == "pending"
    own = await anyone.post(f"/link/{token}", headers={"Origin": team.url, "Sec-Fetch-Site": "same-origin"})
    assert own.status_code == 200
    assert await status_of(anyone, request_id) == "answered"


async def test_without_people_a_link_opens_nothing(make_server):
    server = make_server(link_secret=SECRET)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        request_id = (await client.post("/elicitations", json=YES_NO)).json()["id"]
        token = token_of(server, request_id)
        for method in ("GET", "POST"):
            response = await client.request(method, f"/link/{token}")
            assert response.status_code == 403
        assert await status_of(client, request_id) == "pending"


async def test_the_api_document_names_both_operations(team, anyone):
    paths = (await anyone.get("/doc")).json()["paths"]
    assert paths["/link/{token}"]["get"]["operationId"] == "link.show"
    assert paths["/link/{token}"]["post"]["operationId"] == "link.answer"
    assert paths["/link/{token}"]["get"]["security"] == []
    assert re.search("changes nothing", paths["/link/{token}"]["get"]["summary"], re.IGNORECASE)


async def test_a_link_made_on_one_replica_answers_on_another_with_the_same_secret(
    make_server, redis_url, tmp_path
):
    path = tmp_path / "people.toml"
    path.write_text(PEOPLE)
    first, second = (make_server(people=path, link_secret=SECRET, store=redis_url) for _ in range(2))
    stranger = make_server(people=path, store=redis_url)  # no GATEWAY_LINK_SECRET: its own secret
    async with httpx.AsyncClient(base_url=first.url, timeout=30) as tool:
        waiting = ask(tool, {**YES_NO, "to": ["alice"]})
        async with httpx.AsyncClient(base_url=first.url, auth=("alice", "alice-pass")) as alice:
            request_id = (await pending(alice))[0]["id"]
        token = token_of(first, request_id)
        async with httpx.AsyncClient(base_url=stranger.url, timeout=30) as other:
            assert (await other.post(f"/link/{token}")).status_code == 403
        async with httpx.AsyncClient(base_url=second.url, timeout=30) as replica:
            assert (await replica.get(f"/link/{token}")).status_code == 200
            assert (await replica.post(f"/link/{token}")).status_code == 200
        result = (await waiting).json()
        assert result == {"action": "accept", "content": {"go": True}, "answeredBy": "alice"}
