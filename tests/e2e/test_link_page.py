"""A one-tap link in headless Chromium against a real gateway with people: the link opens a page
that changes nothing, its button answers as the link's person (the tool's blocking ``/elicit``
returns the choice with ``answeredBy``), and a second press says the question is over."""

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright, expect

from elicitation_gateway import links
from tests.e2e.test_web_page import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, require_chromium
from tests.helpers import ask, form, pending

pytestmark = pytest.mark.asyncio(loop_scope="module")

PEOPLE = """
[people.alice]
password = "alice-pass"

[people.bob]
password = "bob-pass"
"""
SECRET = "a-link-secret-of-at-least-32-characters"
ROLL_BACK = form(
    {"type": "object", "properties": {"rollback": {"type": "boolean", "title": "Roll back"}}},
    "Roll back <img src=x onerror=alert(1)> release 4.2?",
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    require_chromium()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        await launched.close()


@pytest.fixture
def team(make_server, tmp_path):
    path = tmp_path / "people.toml"
    path.write_text(PEOPLE)
    return make_server(people=path, answerer_password="shared-secret", link_secret=SECRET)


async def new_tab(browser: Browser, problems: list[str]) -> Page:
    """A tab of its own, no login; what its console reports as an error (a style the CSP refused, a
    script) is kept, but a status the test expects (``410``)."""
    context = await browser.new_context(locale="en-US")
    page = await context.new_page()

    def console(kind: str, text: str) -> None:
        if kind == "error" and not text.startswith("Failed to load resource"):
            problems.append(text)

    page.on("console", lambda message: console(message.type, message.text))
    page.on("pageerror", lambda error: problems.append(str(error)))
    return page


async def test_a_link_answers_with_one_press_as_its_person_and_only_once(team, browser):
    problems: list[str] = []
    async with (
        httpx.AsyncClient(base_url=team.url, timeout=30) as tool,
        httpx.AsyncClient(base_url=team.url, timeout=30, auth=("alice", "alice-pass")) as alice,
    ):
        waiting = ask(tool, {**ROLL_BACK, "to": ["alice"]})
        request_id = (await pending(alice))[0]["id"]
        record = team.run(team.gateway.store.get(request_id))
        (yes_label, yes_url), (no_label, _) = links.choices_for(record, "alice", team.url, SECRET.encode())
        assert (yes_label, no_label) == ("Yes", "No")

        first, second = await new_tab(browser, problems), await new_tab(browser, problems)
        for page in (first, second):
            response = await page.goto(yes_url)
            assert response is not None
            assert response.status == 200
        # Opening the link (twice) changed nothing.
        assert (await tool.get(f"/elicitations/{request_id}")).json()["status"] == "pending"
        assert not waiting.done()

        await expect(first.get_by_text("Roll back <img src=x onerror=alert(1)> release 4.2?")).to_be_visible()
        await expect(first.get_by_text("Answering as alice.")).to_be_visible()
        button = first.get_by_role("button", name="Answer Yes")
        await expect(button).to_have_count(1)
        assert await first.locator("img").count() == 0  # the tool's text is text
        ARTIFACTS.mkdir(exist_ok=True)
        await first.screenshot(path=str(ARTIFACTS / "one-tap-link.png"), full_page=True)

        await button.click()
        await expect(first.get_by_role("heading", name="Answered")).to_be_visible()
        await expect(first.get_by_text("You answered Yes.", exact=False)).to_be_visible()
        result = (await asyncio.wait_for(waiting, 30)).json()
        assert result == {"action": "accept", "content": {"rollback": True}, "answeredBy": "alice"}

        # The second tab, opened before: its press says it is over, and changes nothing.
        async with second.expect_response(lambda r: r.request.method == "POST") as posted:
            await second.get_by_role("button", name="Answer Yes").click()
        assert (await posted.value).status == 410
        await expect(second.get_by_role("heading", name="This question is over")).to_be_visible()
        await expect(second.get_by_text("It was answered by alice.", exact=False)).to_be_visible()

        # Opening the link again: what happened, and no button.
        response = await first.goto(yes_url)
        assert response is not None
        assert response.status == 410
        await expect(first.get_by_text("It was answered by alice.", exact=False)).to_be_visible()
        await expect(first.get_by_role("button")).to_have_count(0)
        final = (await tool.get(f"/elicitations/{request_id}")).json()
        assert final["result"] == result
    assert problems == []
