"""The built-in page at ``/``, driven in headless Chromium against a real gateway, as a person uses it."""

import asyncio
import json
import os
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, Locator, Page, Route, async_playwright, expect

from elicitation_gateway.display import safe
from tests.conftest import RunningServer, settings_for_tests
from tests.helpers import ask, form, pending

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TIMEZONE = "Europe/Berlin"  # UTC+01:00 in January: date-times must carry that offset

QUESTIONNAIRE = {
    "type": "object",
    "properties": {
        "model": {
            "type": "string",
            "title": "Model",
            "description": "Which machine is it?",
            "enum": ["sy215c", "sy235c", "sy365h"],
            "enumNames": ["SY215C", "SY235C", "SY365H"],
            "x-option-descriptions": {
                "sy215c": "21-tonne crawler",
                "sy235c": "23-tonne crawler",
                "sy365h": "36-tonne, heavy duty",
            },
        },
        "symptoms": {
            "type": "array",
            "title": "Symptoms",
            "description": "What do you notice?",
            "minItems": 1,
            "maxItems": 2,
            "items": {"type": "string", "enum": ["Black smoke", "Noise", "Overheating"]},
            "x-option-descriptions": {"Noise": "Knocking or whining"},
            "default": ["Noise"],
        },
        "hours": {
            "type": "integer",
            "title": "Engine hours",
            "description": "Hours on the meter",
            "minimum": 0,
            "maximum": 20000,
        },
        "load": {
            "type": "number",
            "title": "Load",
            "description": "Bucket load when it happens, in percent",
            "exclusiveMinimum": 0,
            "maximum": 100,
            "default": 50,
        },
        "warranty": {"type": "boolean", "title": "Warranty", "description": "Still under warranty?"},
        "stopped": {
            "type": "boolean",
            "title": "Stopped",
            "description": "Is the machine out of service?",
            "default": True,
        },
        "region": {
            "type": "string",
            "title": "Region",
            "oneOf": [{"const": "eu", "title": "Europe"}, {"const": "apac", "title": "Asia-Pacific"}],
            "default": "eu",
        },
        "contact": {"type": "string", "title": "Contact", "format": "email"},
        "manual": {"type": "string", "title": "Manual", "format": "uri"},
        "since": {"type": "string", "title": "Since", "description": "First noticed on", "format": "date"},
        "visit": {
            "type": "string",
            "title": "Visit",
            "description": "When can a technician come?",
            "format": "date-time",
        },
        "serial": {"type": "string", "title": "Serial", "minLength": 6, "maxLength": 12},
        "notes": {"title": "Notes", "description": "Anything else the technician should know?"},
    },
    "required": ["model", "symptoms", "hours", "warranty", "contact"],
}


# ---------------------------------------------------------------------------------------------------
# The browser


def require_chromium() -> None:
    """Skip without Chromium on a workstation; in CI a missing browser is a failure, never a skip."""
    if CHROMIUM.exists():
        return
    message = f"{CHROMIUM} is missing: install Debian's chromium package (bash .ci/run does)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    require_chromium()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        await launched.close()


@dataclass
class Tab:
    """One open page, with every script error and request it made."""

    page: Page
    origin: str
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def card(self, title: str | None = None) -> Locator:
        cards = self.page.locator("article.card")
        return cards.filter(has=self.page.get_by_role("heading", name=title, exact=True)) if title else cards

    def console(self, kind: str, text: str) -> None:
        # A refused reply is the server's answer, not a fault of the page.
        if kind == "error" and not text.startswith("Failed to load resource"):
            self.errors.append(text)

    def check_clean(self) -> None:
        assert self.errors == []
        foreign = [url for url in self.requests if not url.startswith(self.origin)]
        assert foreign == [], "the page must load everything from the gateway itself"


@pytest_asyncio.fixture(loop_scope="module")
async def open_page(browser: Browser) -> AsyncIterator[Any]:
    tabs: list[Tab] = []
    contexts = []

    async def open_at(
        url: str,
        *,
        width: int = 960,
        height: int = 900,
        prepare: Callable[[Page], Awaitable[None]] | None = None,
        credentials: dict[str, str] | None = None,
    ) -> Tab:
        context = await browser.new_context(
            viewport={"width": width, "height": height},
            timezone_id=TIMEZONE,
            locale="en-US",
            http_credentials=credentials,
        )
        contexts.append(context)
        page = await context.new_page()
        address = urlsplit(url)
        tab = Tab(page=page, origin=f"{address.scheme}://{address.netloc}/")
        page.on("pageerror", lambda error: tab.errors.append(str(error)))
        page.on("console", lambda message: tab.console(message.type, message.text))
        page.on("request", lambda request: tab.requests.append(request.url))
        tabs.append(tab)
        if prepare is not None:
            await prepare(page)
        await page.goto(url)
        if prepare is None:
            await expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        return tab

    yield open_at
    for context in contexts:
        await context.close()
    for tab in tabs:
        tab.check_clean()


def question(card: Locator, key: str) -> Locator:
    return card.locator(f'.question[data-key="{key}"]')


async def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / name), full_page=True)


# ---------------------------------------------------------------------------------------------------
# The tests


async def test_every_kind_is_rendered_answered_and_typed(server, open_page):
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        tab = await open_page(server.url)
        page = tab.page
        await expect(page.get_by_text("Nothing to answer right now")).to_be_visible()

        tool = ask(client, form(QUESTIONNAIRE, "Excavator diagnosis"))
        card = tab.card("Excavator diagnosis")
        await expect(card).to_be_visible()
        await expect(page.locator("#summary")).to_have_text("1 request waiting for an answer")
        await expect(card.locator(".card-meta")).to_contain_text("13 questions")
        await expect(card.locator(".card-meta .expires")).to_have_text(re.compile(r"^expires (in|at) "))

        # Single choice: radio buttons with descriptions; multi: check boxes with the allowed count.
        model = question(card, "model")
        await expect(model.get_by_role("radio")).to_have_count(3)
        await expect(model.get_by_role("radio", name="SY235C")).to_have_accessible_description(
            "23-tonne crawler"
        )
        await expect(model.locator(".question-text")).to_have_text("Which machine is it?")
        symptoms = question(card, "symptoms")
        await expect(symptoms.get_by_role("checkbox")).to_have_count(3)
        await expect(symptoms.locator(".hint")).to_contain_text("Choose 1 to 2")
        await expect(symptoms.get_by_text("Knocking or whining")).to_be_visible()
        await expect(symptoms.get_by_role("checkbox", name="Noise")).to_be_checked()  # default
        # Yes/No for booleans, defaults pre-filled.
        await expect(question(card, "warranty").get_by_role("radio")).to_have_count(2)
        await expect(question(card, "stopped").get_by_role("radio", name="Yes")).to_be_checked()
        await expect(question(card, "region").get_by_role("radio", name="Europe")).to_be_checked()
        # Number inputs with their range.
        hours = question(card, "hours").locator("input")
        assert (await hours.get_attribute("type"), await hours.get_attribute("step")) == ("number", "1")
        assert (await hours.get_attribute("min"), await hours.get_attribute("max")) == ("0", "20000")
        await expect(question(card, "hours").locator(".hint")).to_have_text("A whole number from 0 to 20000")
        load = question(card, "load").locator("input")
        await expect(load).to_have_value("50")
        await expect(question(card, "load").locator(".hint")).to_have_text(
            "A number greater than 0, at most 100"
        )
        # Text inputs with their format and length; free text in a text area.
        formats = {"contact": "email", "manual": "url", "since": "date", "visit": "datetime-local"}
        for key, kind in formats.items():
            assert await question(card, key).locator("input").get_attribute("type") == kind
        serial = question(card, "serial").locator("input")
        assert await serial.get_attribute("minlength") == "6"
        assert await serial.get_attribute("maxlength") == "12"
        await expect(question(card, "serial").locator(".hint")).to_contain_text("6–12 characters")
        await expect(question(card, "notes").locator("textarea")).to_be_visible()
        # Required questions are marked, the others are not.
        required = card.locator(".question:has(.badge)")
        assert await required.evaluate_all("nodes => nodes.map(n => n.dataset.key)") == [
            "model",
            "symptoms",
            "hours",
            "warranty",
            "contact",
        ]
        await screenshot(page, "web-page-questionnaire.png")

        await model.get_by_role("radio", name="SY235C").check()
        await symptoms.get_by_role("checkbox", name="Black smoke").check()
        await expect(symptoms.locator(".counter")).to_have_text("2 chosen")
        await hours.fill("1200")
        await load.fill("72.5")
        await question(card, "warranty").get_by_role("radio", name="No").check()
        await question(card, "contact").locator("input").fill("ops@example.com")
        await question(card, "manual").locator("input").fill("https://example.com/manuals/sy235c")
        await question(card, "since").locator("input").fill("2026-01-12")
        await question(card, "visit").locator("input").fill("2026-01-15T09:30")
        await serial.fill("SY2350042")
        await question(card, "notes").locator("textarea").fill("Started after refuelling.\nCold mornings.")
        await screenshot(page, "web-page-filled.png")
        await card.get_by_role("button", name="Submit").click()

        result = (await tool).json()
        await expect(tab.card()).to_have_count(0)
        await expect(page.locator("#notices")).to_contain_text("Answer sent")
    assert result == {
        "action": "accept",
        "content": {
            "model": "sy235c",
            "symptoms": ["Black smoke", "Noise"],
            "hours": 1200,
            "load": 72.5,
            "warranty": False,
            "stopped": True,
            "region": "eu",
            "contact": "ops@example.com",
            "manual": "https://example.com/manuals/sy235c",
            "since": "2026-01-12",
            "visit": "2026-01-15T09:30:00+01:00",
            "serial": "SY2350042",
            "notes": "Started after refuelling.\nCold mornings.",
        },
    }


async def test_wrong_answers_show_the_servers_messages_next_to_their_questions(server, open_page):
    schema = {
        "type": "object",
        "properties": {
            "model": {"type": "string", "title": "Model", "enum": ["SY215C", "SY235C"]},
            "hours": {"type": "integer", "title": "Hours", "minimum": 0, "maximum": 20000},
            "serial": {"type": "string", "title": "Serial", "minLength": 6},
            "contact": {"type": "string", "title": "Contact", "format": "email"},
        },
        "required": ["model", "hours"],
    }
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        tool = ask(client, form(schema, "Service request"))
        [request] = await pending(client)
        wrong = [[], ["50000"], ["abc"], ["not-an-email"]]
        refused = await client.post(f"/question/{request['id']}/reply", json={"answers": wrong})
        issues = {issue["index"]: issue["message"] for issue in refused.json()["data"]["issues"]}
        assert sorted(issues) == [0, 1, 2, 3]

        tab = await open_page(server.url)
        card = tab.card("Service request")
        await question(card, "hours").locator("input").fill("50000")
        await question(card, "serial").locator("input").fill("abc")
        await question(card, "contact").locator("input").fill("not-an-email")
        await card.get_by_role("button", name="Submit").click()

        for index, key in enumerate(["model", "hours", "serial", "contact"]):
            issue = question(card, key).locator(".issue")
            await expect(issue).to_have_text(issues[index][0].upper() + issues[index][1:])
        await expect(card.locator(".form-error")).to_have_text("Please check 4 answers.")
        await expect(question(card, "hours").locator("input")).to_have_attribute("aria-invalid", "true")
        await expect(question(card, "model").get_by_role("radio").first).to_be_focused()  # the first issue
        await screenshot(tab.page, "web-page-issues.png")
        assert not tool.done()

        # The card stays open with what was typed; fixing one answer clears its message.
        await question(card, "model").get_by_role("radio", name="SY215C").check()
        await expect(question(card, "model").locator(".issue")).to_be_hidden()
        await question(card, "hours").locator("input").fill("1200")
        await question(card, "serial").locator("input").fill("SN-000123")
        await question(card, "contact").locator("input").fill("")
        await card.get_by_role("button", name="Submit").click()
        result = (await tool).json()
        await expect(tab.card()).to_have_count(0)
    assert result == {
        "action": "accept",
        "content": {"model": "SY215C", "hours": 1200, "serial": "SN-000123"},
    }


async def test_questions_finished_elsewhere_vanish(server, open_page):
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        tab = await open_page(server.url)
        created = {}
        for title in ("Answered by API", "Withdrawn by tool", "Still waiting"):
            reply = await client.post("/elicitations", json=form({"enum": ["a", "b"]}, title))
            created[title] = reply.json()["id"]
        await expect(tab.card()).to_have_count(3)
        titles = tab.page.locator("article.card h2")
        await expect(titles).to_have_text(["Answered by API", "Withdrawn by tool", "Still waiting"])

        await client.post(f"/question/{created['Answered by API']}/reply", json={"answers": [["b"]]})
        await expect(tab.card("Answered by API")).to_have_count(0)
        await expect(tab.page.locator("#notices")).to_contain_text("Answered elsewhere")
        await client.delete(f"/elicitations/{created['Withdrawn by tool']}")
        await expect(tab.card("Withdrawn by tool")).to_have_count(0)
        await expect(tab.page.locator("#notices")).to_contain_text("Closed elsewhere or timed out")
        await expect(titles).to_have_text(["Still waiting"])
        await expect(tab.page.locator("#summary")).to_have_text("1 request waiting for an answer")


async def test_each_card_says_how_long_it_has_left_and_what_happens_then(server, open_page):
    """The deadline on every card, and whether the tool then gets the defaults (``?onTimeout=default``)."""
    with_default = {"type": "object", "properties": {"go": {"type": "boolean", "default": True}}}
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        await client.post(
            "/elicitations", json=form({"enum": ["a", "b"]}, "Ten minutes"), params={"timeout": 600}
        )
        await client.post(
            "/elicitations",
            json=form(with_default, "Half an hour"),
            params={"timeout": 1800, "onTimeout": "default"},
        )
        soon = ask(client, form(with_default, "Two seconds"), timeout="2", onTimeout="default")
        tab = await open_page(server.url)
        await expect(tab.card("Ten minutes").locator(".expires")).to_have_text("expires in 10 min")
        await expect(tab.card("Half an hour").locator(".expires")).to_have_text("defaults sent in 30 min")
        await expect(tab.card("Two seconds").locator(".expires")).to_have_text(
            "defaults sent in under a minute"
        )
        await expect(tab.card("Two seconds")).to_have_count(0, timeout=10_000)
        assert (await soon).json() == {"action": "accept", "content": {"go": True}}


async def test_decline_and_dismiss_reach_the_tool(server, open_page):
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        declined = ask(client, form({"enum": ["a", "b"]}, "Delete the branch?"))
        dismissed = ask(client, form({"enum": ["a", "b"]}, "Pick a colour"))
        await pending(client, 2)
        tab = await open_page(server.url)
        await tab.card("Delete the branch?").get_by_role("button", name="Decline").click()
        await tab.card("Pick a colour").get_by_role("button", name="Dismiss").click()
        assert (await declined).json() == {"action": "decline"}
        assert (await dismissed).json() == {"action": "cancel"}
        await expect(tab.card()).to_have_count(0)
        await expect(tab.page.locator("#empty")).to_be_visible()
        # The page says it is the page: the audit trail records the way both came.
        trail = [json.loads(line) for line in (await client.get("/audit")).content.splitlines()]
        assert [entry["via"] for entry in trail if entry["event"] == "rejected"][-2:] == ["page", "page"]


async def test_a_plain_confirmation_is_the_message_with_yes_and_no(server, open_page):
    """FastMCP 2.x's ``{"type": "object", "properties": {}}``: no form of questions, the message and two
    buttons; Yes accepts with empty content, No declines."""
    schema = {"type": "object", "properties": {}}
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        accepted = ask(client, form(schema, "Delete the old builds?"))
        await pending(client)
        declined = ask(client, form(schema, "Wipe the fault log?"))
        await pending(client, 2)
        tab = await open_page(server.url)
        card = tab.card("Delete the old builds?")
        await expect(card.locator(".card-meta")).to_contain_text("Yes or no")
        await expect(card.locator(".question")).to_have_count(0)
        await expect(card.get_by_role("button", name="Decline")).to_have_count(0)
        await card.get_by_role("button", name="Yes").click()
        assert (await accepted).json() == {"action": "accept", "content": {}}
        await expect(tab.page.locator(".notice").last).to_contain_text("Answer sent")
        await tab.card("Wipe the fault log?").get_by_role("button", name="No").click()
        assert (await declined).json() == {"action": "decline"}
        await expect(tab.page.locator(".notice").last).to_contain_text("Declined")
        await expect(tab.card()).to_have_count(0)


async def test_text_from_tools_is_shown_as_text(server, open_page):
    message = '<img src="x" onerror="window.injected = 1"><b>Bold?</b>'
    schema = {
        "type": "object",
        "properties": {
            "pick": {
                "type": "string",
                "title": "<i>Pick</i>",
                "description": "<script>window.injected = 2</script>Pick & <u>choose</u>",
                "enum": ["<b>one</b>", "two & <em>three</em>"],
                "x-option-descriptions": {"<b>one</b>": "<img src=y onerror='window.injected = 3'>"},
            },
            "note": {"type": "string", "title": "Note", "default": "</textarea><s>struck</s>"},
        },
        "required": ["pick"],
    }
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        tool = ask(client, form(schema, message))
        tab = await open_page(server.url)
        card = tab.card(message)
        await expect(card).to_have_count(1)
        await expect(question(card, "pick").locator(".question-text")).to_have_text(
            "<script>window.injected = 2</script>Pick & <u>choose</u>"
        )
        await expect(question(card, "pick").get_by_role("radio", name="<b>one</b>")).to_be_visible()
        await expect(question(card, "pick").locator(".option-description")).to_have_text(
            "<img src=y onerror='window.injected = 3'>"
        )
        await expect(question(card, "note").locator("input")).to_have_value("</textarea><s>struck</s>")
        assert await card.locator("b, i, u, em, s, img, script").count() == 0
        assert await tab.page.evaluate("window.injected") is None

        await question(card, "pick").get_by_role("radio", name="two & <em>three</em>").check()
        await card.get_by_role("button", name="Submit").click()
        assert (await tool).json() == {
            "action": "accept",
            "content": {"pick": "two & <em>three</em>", "note": "</textarea><s>struck</s>"},
        }


async def test_a_question_that_may_ask_for_a_secret_shows_the_gateways_warning_beside_it(server, open_page):
    """The form's ``warning``, between that question's words and its input, read with the input, and
    on no other question; the page shows it once (the form's ``question`` carries it too)."""
    schema = {
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "title": "Verification code",
                "description": "The code from the text message we just sent",
            },
            "method": {
                "type": "string",
                "title": "Method",
                "description": "How do you sign in: with a password or a passkey?",
                "enum": ["Password", "Passkey"],
            },
            "reason": {"type": "string", "title": "Reason", "description": "Why do you sign in?"},
        },
        "required": ["code", "method"],
    }
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        tool = ask(client, form(schema, "Sign in to the build server"))
        [request] = await pending(client)
        fields = (await client.get(f"/question/{request['id']}/form")).json()["fields"]
        warning = fields[0]["warning"]
        assert "may ask for a verification code" in warning
        assert f"⚠ {warning}" in fields[0]["question"]
        assert [field.get("warning") for field in fields[1:]] == [None, None]

        tab = await open_page(server.url)
        card = tab.card("Sign in to the build server")
        code = question(card, "code")
        shown = code.get_by_role("note")
        await expect(shown).to_have_text(warning)
        await expect(shown).to_be_visible()
        await expect(code.locator("input")).to_have_accessible_description(re.compile(re.escape(warning)))
        # Beside its question: under the question's words, above the input; marked apart from them.
        words, note, entry = [
            await part.bounding_box()
            for part in (code.locator(".question-text"), shown, code.locator("input"))
        ]
        assert words is not None
        assert note is not None
        assert entry is not None
        assert words["y"] + words["height"] <= note["y"] < entry["y"]
        border, mark = await shown.evaluate(
            "node => [getComputedStyle(node).borderLeftWidth, getComputedStyle(node, '::before').content]"
        )
        assert border == "4px"
        assert "⚠" in mark
        await expect(card.get_by_role("note")).to_have_count(1)  # no other question has one
        assert (await card.inner_text()).count("may ask for") == 1
        await screenshot(tab.page, "web-page-warning.png")

        await code.locator("input").fill("482913")
        await question(card, "method").get_by_role("radio", name="Passkey").check()
        await card.get_by_role("button", name="Submit").click()
        assert (await tool).json() == {"action": "accept", "content": {"code": "482913", "method": "Passkey"}}
        await expect(tab.card()).to_have_count(0)


async def test_keyboard_alone_answers(server, open_page):
    schema = {
        "type": "object",
        "properties": {
            "env": {"type": "string", "title": "Environment", "enum": ["dev", "staging", "prod"]},
            "confirm": {"type": "boolean", "title": "Confirm"},
            "replicas": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 9},
        },
        "required": ["env", "confirm", "replicas"],
    }
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        tool = ask(client, form(schema, "Deploy"))
        tab = await open_page(server.url)
        page = tab.page
        card = tab.card("Deploy")
        await expect(card).to_be_visible()

        await page.keyboard.press("Tab")
        await expect(page.get_by_role("link", name="Skip to the questions")).to_be_focused()
        await page.keyboard.press("Tab")
        first = question(card, "env").get_by_role("radio", name="dev")
        await expect(first).to_be_focused()
        # The focus is visible on the option's whole row.
        row = question(card, "env").locator(".option").first
        assert await row.evaluate("node => getComputedStyle(node).boxShadow") != "none"
        await page.keyboard.press("ArrowDown")
        await expect(question(card, "env").get_by_role("radio", name="staging")).to_be_checked()
        await page.keyboard.press("Tab")
        await expect(question(card, "confirm").get_by_role("radio", name="Yes")).to_be_focused()
        await page.keyboard.press("Space")
        await page.keyboard.press("Tab")
        await expect(question(card, "replicas").locator("input")).to_be_focused()
        await page.keyboard.type("3")
        await page.keyboard.press("Enter")
        assert (await tool).json() == {
            "action": "accept",
            "content": {"env": "staging", "confirm": True, "replicas": 3},
        }


async def test_phone_width_fits_without_sideways_scrolling(server, open_page):
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        await client.post("/elicitations", json=form(QUESTIONNAIRE, "Excavator diagnosis"))
        tab = await open_page(server.url, width=390, height=844)
        card = tab.card("Excavator diagnosis")
        await expect(card).to_be_visible()
        overflow = await tab.page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0
        for name in ("Submit", "Decline", "Dismiss"):
            box = await card.get_by_role("button", name=name).bounding_box()
            assert box is not None
            assert box["x"] >= 0
            assert box["x"] + box["width"] <= 390
            assert box["height"] >= 40  # a comfortable target for a thumb
        await screenshot(tab.page, "web-page-phone.png")


async def test_a_link_to_one_question_opens_the_page_at_it_on_a_phone(server, open_page):
    """What a notification links to (``/?question=que_…``): that question in view, its heading focused."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        for number in range(6):
            await client.post("/elicitations", json=form(QUESTIONNAIRE, f"Earlier {number}"))
        response = await client.post("/elicitations", json=form(QUESTIONNAIRE, "The linked one"))
        linked = response.json()["id"]
        tab = await open_page(f"{server.url}/?question={linked}", width=390, height=844)
        card = tab.card("The linked one")
        await expect(card.locator("h2")).to_be_focused()
        await expect(card.locator("h2")).to_be_in_viewport()
        await expect(tab.card("Earlier 0").locator("h2")).not_to_be_in_viewport()
        await screenshot(tab.page, "web-page-linked-question.png")


async def test_page_recovers_after_the_server_restarts(make_server, open_page):
    first = make_server()
    async with httpx.AsyncClient(base_url=first.url, timeout=10) as client:
        await client.post("/elicitations", json=form({"enum": ["a", "b"]}, "Before the restart"))
    tab = await open_page(first.url)
    await expect(tab.card("Before the restart")).to_be_visible()

    first.stop()  # pending questions are cancelled on the way down, and the streams end
    await expect(tab.card()).to_have_count(0)
    await expect(tab.page.locator("#connection")).to_have_attribute("data-state", "reconnecting")
    await expect(tab.page.locator("#offline")).to_be_visible()

    second = start_on_port(first.port)
    try:
        async with httpx.AsyncClient(base_url=second.url, timeout=10) as client:
            await client.post("/elicitations", json=form({"enum": ["a", "b"]}, "After the restart"))
            await expect(tab.page.locator("#connection")).to_have_attribute(
                "data-state", "live", timeout=20000
            )
            await expect(tab.card("After the restart")).to_be_visible()
            await expect(tab.page.locator("#offline")).to_be_hidden()
            await client.post("/elicitations", json=form({"enum": ["a", "b"]}, "Once live again"))
            await expect(tab.card("Once live again")).to_be_visible()
    finally:
        second.stop()


async def test_page_retries_a_stream_the_server_refused(server, open_page):
    """A stream answered with an error status is given up by the browser; the page tries again."""
    refused: list[str] = []
    retried = asyncio.Event()

    async def refuse_stream(page: Page) -> None:
        async def unavailable(route: Route) -> None:
            refused.append(route.request.url)
            if len(refused) > 1:  # the browser gave up on the first; the page asked again
                retried.set()
            await route.fulfill(status=503, body="busy")

        await page.route("**/event*", unavailable)

    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        await client.post("/elicitations", json=form({"enum": ["a", "b"]}, "Asked before the page opened"))
        tab = await open_page(server.url, prepare=refuse_stream)
        await expect(tab.page.locator("#offline")).to_have_text(
            "The gateway cannot be reached yet. Trying again by itself."
        )
        await expect(tab.page.locator("#connection")).to_have_attribute("data-state", "reconnecting")
        await expect(tab.page.locator("#empty")).to_be_hidden()  # nothing is known yet
        async with asyncio.timeout(10):
            await retried.wait()

        await tab.page.unroute("**/event*")
        await expect(tab.page.locator("#connection")).to_have_attribute("data-state", "live")
        await expect(tab.card("Asked before the page opened")).to_be_visible()
        await expect(tab.page.locator("#offline")).to_be_hidden()


async def test_directory_in_the_page_address_filters_questions(server, open_page):
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        for title, directory in [
            ("For alpha", "/srv/alpha"),
            ("For beta", "/srv/beta"),
            ("For anyone", None),
        ]:
            params = {"directory": directory} if directory else {}
            await client.post("/elicitations", json=form({"enum": ["a"]}, title), params=params)
        tab = await open_page(f"{server.url}/?directory=/srv/alpha")
        await expect(tab.page.locator("article.card h2")).to_have_text(["For alpha", "For anyone"])
        await client.post(
            "/elicitations", json=form({"enum": ["a"]}, "Later for beta"), params={"directory": "/srv/beta"}
        )
        await client.post(
            "/elicitations", json=form({"enum": ["a"]}, "Later for alpha"), params={"directory": "/srv/alpha"}
        )
        await expect(tab.page.locator("article.card h2")).to_have_text(
            ["For alpha", "For anyone", "Later for alpha"]
        )


async def test_page_works_behind_answerer_authentication(make_server, open_page):
    """With answerer auth on, the browser sends the person's credentials on every same-origin request."""
    server = make_server(answerer_password="s3cret")
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        assert (await client.get("/")).status_code == 401
        tool = ask(client, form({"enum": ["Blue", "Green"]}, "Pick a colour"))
        tab = await open_page(server.url, credentials={"username": "opencode", "password": "s3cret"})
        card = tab.card("Pick a colour")
        await card.get_by_role("radio", name="Green").check()
        await card.get_by_role("button", name="Submit").click()
        assert (await tool).json() == {"action": "accept", "content": {"value": "Green"}}
        await expect(tab.card()).to_have_count(0)


async def test_a_person_sees_their_own_questions_and_whom_each_is_for(make_server, open_page, tmp_path):
    """Signed in as a person of the people file: the card of a question addressed to them says whom it
    is for; one addressed to someone else never shows; the tool learns who answered."""
    people = tmp_path / "people.toml"
    people.write_text(
        '[people.alice]\npassword = "a-pass"\ngroups = ["oncall"]\n[people.bob]\npassword = "b"\n'
    )
    server = make_server(people=people)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        for_bob = await client.post(
            "/elicitations", json={**form({"enum": ["Up"]}, "For Bob"), "to": ["bob"]}
        )
        assert for_bob.status_code == 201
        tool = ask(client, {**form({"enum": ["Blue", "Green"]}, "Pick a colour"), "to": ["group:oncall"]})
        tab = await open_page(server.url, credentials={"username": "alice", "password": "a-pass"})
        card = tab.card("Pick a colour")
        await expect(card.locator(".card-to")).to_have_text("For group:oncall")
        await expect(tab.card()).to_have_count(1)  # Bob's question does not exist for Alice
        await card.get_by_role("radio", name="Green").check()
        await card.get_by_role("button", name="Submit").click()
        assert (await tool).json() == {
            "action": "accept",
            "content": {"value": "Green"},
            "answeredBy": "alice",
        }
        await expect(tab.card()).to_have_count(0)

        # bob answers one alice sees: her page says it was bob
        for_both = await client.post(
            "/elicitations", json={**form({"enum": ["Up"]}, "Scale up?"), "to": ["alice", "bob"]}
        )
        await expect(tab.card("Scale up?")).to_have_count(1)
        reply = await client.post(
            f"/question/{for_both.json()['id']}/reply", json={"answers": [["Up"]]}, auth=("bob", "b")
        )
        assert reply.status_code == 200
        await expect(tab.card("Scale up?")).to_have_count(0)
        await expect(tab.page.locator("#notices")).to_contain_text("Answered by bob: “Scale up?”")


async def test_page_and_its_files_are_served_by_the_gateway(server):
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        page = await client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        linked = re.findall(r'(?:src|href)="(static/[^"]+)"', page.text)
        assert sorted(linked) == ["static/app.js", "static/icon.svg", "static/icon.svg", "static/style.css"]
        types = {"app.js": "javascript", "style.css": "text/css", "icon.svg": "image/svg+xml"}
        for name, kind in types.items():
            asset = await client.get(f"/static/{name}")
            assert asset.status_code == 200
            assert kind in asset.headers["content-type"]
            assert asset.headers["cache-control"] == "no-cache"
        assert (await client.get("/static/missing.js")).status_code == 404


def start_on_port(port: int) -> RunningServer:
    """A new gateway on the port an earlier one used, as after a restart (of a fresh process)."""
    return RunningServer(settings_for_tests(), port=port).start()


HOSTILE_MESSAGE = "Clean up?\n\x1b[2K\x1b[1GAsked by Trusted CI · run_tests\u202e\x1b]52;c;cm0=\x07"
HOSTILE_SCHEMA = {
    "type": "object",
    "properties": {
        "act": {
            "type": "string",
            "title": "Act\u2067now\u2069",
            "description": "Read\u200b this\x1b]8;;https://evil.example/\x1b\\ first",
            "oneOf": [{"const": "keep", "title": "Keep\u202e"}, {"const": "wipe", "title": "Wipe\u200b all"}],
        },
        "note": {"type": "string", "title": "Note", "default": "fine\u202etxt.exe"},
    },
    "required": ["act"],
}
# Bidi controls, invisible format characters and controls but the newline: none may reach the page's text.
DISGUISING = (
    r"/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b\u200c\u200e\u200f"
    r"\u202a-\u202e\u2060-\u2069\ufeff\u00ad]/u"
)


async def test_hostile_tool_text_is_shown_safe_and_who_asks_stands_apart(server, open_page):
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        tab = await open_page(server.url)
        created = await client.post(
            "/elicitations", json=form(HOSTILE_SCHEMA, HOSTILE_MESSAGE), params={"asker": "evil-mcp · wipe"}
        )
        assert created.status_code == 201, created.text
        card = tab.page.locator("article.card")
        await expect(card).to_have_count(1)
        asker = card.locator(".card-asker")
        await expect(asker).to_have_text("Asked byevil-mcp · wipe")
        # Above the message, in a style no text of the message has.
        assert await asker.evaluate("node => node.nextElementSibling.matches('.card-title')")
        title = card.locator(".card-title")
        await expect(title).to_have_text("Clean up?\n[2K[1GAsked by Trusted CI · run_tests⟨U+202E⟩]52;c;cm0=")
        assert await title.locator(".card-asker, .asker-name").count() == 0
        header = question(card, "act").locator(".question-header > span").first
        await expect(header).to_have_text("Act⟨U+2067⟩…")  # cut to the header's 12 characters
        await expect(question(card, "act").locator(".question-text")).to_have_text(
            "Read⟨U+200B⟩ this]8;;https://evil.example/\\ first"
        )
        await expect(question(card, "act").get_by_role("radio", name="Keep⟨U+202E⟩")).to_be_visible()
        await expect(question(card, "note").locator("input")).to_have_value("fine⟨U+202E⟩txt.exe")
        assert not await card.evaluate(f"node => {DISGUISING}.test(node.textContent)")

        await question(card, "act").get_by_role("radio", name="Wipe⟨U+200B⟩ all").check()
        await card.get_by_role("button", name="Submit").click()
        await expect(card).to_have_count(0)
        result = (await client.get(f"/elicitations/{created.json()['id']}")).json()["result"]
        assert result == {"action": "accept", "content": {"act": "wipe", "note": "fine⟨U+202E⟩txt.exe"}}


async def test_the_pages_rules_for_showing_text_are_display_pys(server, open_page):
    """The page's copy of the rules (``shown`` in app.js) gives what ``display.safe`` gives, on
    examples and on random text mixing controls, bidi, invisibles, emoji pieces and letters."""
    tab = await open_page(server.url)
    pieces = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]]
    pieces += list("\u202a\u202e\u2066\u2069\u200e\u200f\u061c\u200b\u200c\u200d\u2060\u2064\ufeff\u00ad")
    pieces += ["\u180e", "\U000e0001", "\U000e0041", "\u3164", "\u034f", "\ufe0f", "\ufe01", "\U000e0100"]
    pieces += ["\u2028", "\u2029", "a", "Р", "👩", "💻", "❤", "🏽", "⟩", " ", "\n", "\u0600", "日", "\ud7ff"]
    generator = random.Random(20260101)
    samples = ["👩\u200d💻", "❤\ufe0f", "a\ufe0f\ufe01", "Ab\u200dort", "x\u202ey", "e\u0301"]
    samples += ["".join(generator.choices(pieces, k=generator.randint(0, 12))) for _ in range(400)]
    shown = await tab.page.evaluate(
        "samples => samples.map(s => [window.gatewayShown(s), window.gatewayShown(s, true)])", samples
    )
    for sample, (multiline, oneline) in zip(samples, shown, strict=True):
        assert multiline == safe(sample), sample
        assert oneline == safe(sample, oneline=True), sample
