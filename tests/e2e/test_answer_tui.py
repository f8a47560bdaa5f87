"""``elicitation-gateway answer``: the terminal answerer, driven with keys against a real running gateway.

The app runs headless under Textual's pilot in the test's event loop; the gateway runs in its thread,
and tools ask through ``POST /elicit`` as they do for real.
"""

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static, Tabs

from elicitation_gateway.answerer import command as answer
from elicitation_gateway.answerer.app import AnswerApp
from elicitation_gateway.answerer.connection import Backoff, basic_auth
from elicitation_gateway.answerer.draft import Draft, RequestForm
from elicitation_gateway.answerer.widgets import ChoiceList, ConfirmPane, QuestionPane, RequestView
from tests.conftest import RunningServer, settings_for_tests
from tests.helpers import ask, form, pending, read_events

EVERY_KIND = {
    "type": "object",
    "properties": {
        "model": {
            "type": "string",
            "title": "Model",
            "description": "Which excavator?",
            "oneOf": [{"const": "sy215", "title": "SY215C"}, {"const": "sy235", "title": "SY235C"}],
        },
        "symptoms": {
            "type": "array",
            "title": "Symptoms",
            "description": "What do you notice?",
            "items": {"type": "string", "enum": ["Black smoke", "Noise", "Leak"]},
            "minItems": 1,
        },
        "urgent": {"type": "boolean", "title": "Urgent", "default": False},
        "hours": {"type": "integer", "title": "Hours", "minimum": 0, "maximum": 20000},
        "load": {"type": "number", "title": "Load", "description": "Load in tonnes"},
        "contact": {"type": "string", "title": "Contact", "format": "email"},
        "name": {"type": "string", "title": "Name", "default": "svc"},
        "priority": {
            "type": "string",
            "title": "Priority",
            "enum": ["low", "normal", "high"],
            "default": "normal",
        },
        "notes": {"title": "Notes", "description": "Anything else?"},
    },
    "required": ["model", "symptoms", "hours"],
}

GO = {"type": "object", "properties": {"go": {"type": "boolean", "title": "Go?"}}, "required": ["go"]}

HOURS = list(EVERY_KIND["properties"]).index("hours")


def answerer(server: RunningServer, **kwargs: Any) -> AnswerApp:
    return AnswerApp(server.url, **kwargs)


async def until(pilot: Pilot, condition: Callable[[], bool], what: str, timeout: float = 10) -> None:
    """Let the app run until ``condition`` holds."""
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                await pilot.pause(0.02)
    except TimeoutError:
        raise AssertionError(f"timed out waiting until {what}") from None


async def shown(pilot: Pilot, request_id: str) -> RequestView:
    """Wait until ``request_id`` is on screen with its first answer focused; return its view."""
    app = pilot.app
    await until(pilot, lambda: app.shown_id == request_id and app.view is not None, f"{request_id} is shown")
    await until(pilot, lambda: isinstance(app.focused, ChoiceList | Input), "an answer has the focus")
    view = app.view
    assert view is not None
    return view


async def on_tab(pilot: Pilot, view: RequestView, index: int) -> None:
    await until(pilot, lambda: view.active_index == index, f"tab {index} is active")
    await until(pilot, lambda: _focus_is_in_tab(pilot.app, view, index), f"tab {index} has the focus")


def _focus_is_in_tab(app: AnswerApp, view: RequestView, index: int) -> bool:
    focused = app.focused
    if index == len(view.draft.form.questions):
        return isinstance(focused, ConfirmPane)
    return focused is not None and focused.id == f"answer-{index}"


def status_text(app: AnswerApp) -> str:
    return text_of(app.query_one("#status", Static))


def text_of(widget: Static) -> str:
    return widget.visual.plain if hasattr(widget.visual, "plain") else str(widget.render())


def issue_text(view: RequestView, index: int) -> str:
    pane = view.query_one(f"#pane-{index}", QuestionPane)
    issue = pane.query_one(".issue", Static)
    return text_of(issue) if issue.display else ""


def tab_labels(view: RequestView) -> list[str]:
    return [tab.label.plain for tab in view.query_one(Tabs).query("Tab")]


def screen_lines(app: AnswerApp) -> list[str]:
    """The screen as a person sees it, one string per line."""
    return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]


async def test_a_draft_starts_from_the_gateways_defaults(client):
    await client.post("/elicitations", json=form(EVERY_KIND, "Excavator diagnosis"))
    [request] = await pending(client)
    described = (await client.get(f"/question/{request['id']}/form")).json()
    draft = Draft(RequestForm.from_form(described))
    assert draft.form.message == "Excavator diagnosis"
    assert draft.form.questions[0].text == "Which excavator?"  # the message has a line of its own
    assert [q.kind for q in draft.form.questions] == [
        "choice",
        "multi",
        "boolean",
        "integer",
        "number",
        "string",
        "string",
        "choice",
        "text",
    ]
    assert [q.required for q in draft.form.questions][:4] == [True, True, False, True]
    assert draft.answers() == [[], [], ["No"], [], [], [], ["svc"], ["normal"], []]
    draft.pick(1, 2)
    draft.pick(1, 0)
    draft.pick(2, 0)
    draft.set_text(3, "12")
    assert draft.answers()[:4] == [[], ["Black smoke", "Leak"], ["Yes"], ["12"]]


async def test_every_kind_answered_with_keys_reaches_the_tool_typed(server, client):
    tool = ask(client, form(EVERY_KIND, "Excavator diagnosis"))
    [request] = await pending(client)
    app = answerer(server)
    async with app.run_test(size=(100, 36)) as pilot:
        view = await shown(pilot, request["id"])
        assert text_of(view.query_one("#message", Static)) == "Excavator diagnosis"
        assert tab_labels(view) == [
            "Model*",
            "Symptoms*",
            "Urgent ✓",
            "Hours*",
            "Load",
            "Contact",
            "Name ✓",
            "Priority ✓",
            "Notes",
            "Confirm",
        ]
        first_question = view.query_one("#pane-0 .question-text", Static)
        assert text_of(first_question) == "Which excavator?"
        # Defaults are pre-selected and pre-filled.
        assert view.draft.answers()[2] == ["No"]
        assert view.query_one("#answer-6", Input).value == "svc"

        await pilot.press("2")  # Model: the second option; single choice moves on
        await on_tab(pilot, view, 1)
        await pilot.press("1", "down", "down", "enter")  # Symptoms: toggle the first and the third
        await pilot.press("tab")
        await on_tab(pilot, view, 2)
        await pilot.press("1")  # Urgent: Yes
        await on_tab(pilot, view, 3)
        await pilot.press(*"1200", "enter")
        await on_tab(pilot, view, 4)
        await pilot.press(*"2.5", "enter")
        await on_tab(pilot, view, 5)
        await pilot.press(*"ops@example.com", "enter")
        await on_tab(pilot, view, 6)
        await pilot.press("tab")  # Name: keep the default
        await on_tab(pilot, view, 7)
        await pilot.press("right")  # Priority: keep the default
        await on_tab(pilot, view, 8)
        await pilot.press(*"Loud at idle", "enter")
        await on_tab(pilot, view, 9)
        confirm = view.query_one(ConfirmPane)
        review = confirm.render().plain
        assert "Symptoms: Black smoke, Leak" in review
        assert "Hours: 1200" in review
        await pilot.press("enter")

        result = (await tool).json()
        await until(pilot, lambda: app.shown_id is None, "the answered request leaves the screen")
    assert result == {
        "action": "accept",
        "content": {
            "model": "sy235",
            "symptoms": ["Black smoke", "Leak"],
            "urgent": True,
            "hours": 1200,
            "load": 2.5,
            "contact": "ops@example.com",
            "name": "svc",
            "priority": "normal",
            "notes": "Loud at idle",
        },
    }
    assert type(result["content"]["hours"]) is int
    assert type(result["content"]["load"]) is float


async def test_a_refused_answer_shows_the_servers_message_and_stays_open(server, client):
    tool = ask(client, form(EVERY_KIND, "Excavator diagnosis"))
    [request] = await pending(client)
    app = answerer(server)
    async with app.run_test(size=(100, 36)) as pilot:
        view = await shown(pilot, request["id"])
        await pilot.press("1")
        await on_tab(pilot, view, 1)
        await pilot.press("2", "tab")
        view.go_to(HOURS)
        await on_tab(pilot, view, HOURS)
        await pilot.press(*"99999")
        view.go_to(len(EVERY_KIND["properties"]))
        await on_tab(pilot, view, len(EVERY_KIND["properties"]))
        await pilot.press("enter")

        await until(pilot, lambda: issue_text(view, HOURS) != "", "the Hours tab shows the issue")
        assert issue_text(view, HOURS) == "✗ 99999 is more than the maximum, 20000"
        assert view.active_index == HOURS
        assert tab_labels(view)[HOURS] == "Hours* ✗"
        assert "99999 is more than the maximum, 20000" in view.query_one(ConfirmPane).render().plain
        assert [r["id"] for r in (await client.get("/question")).json()] == [request["id"]]
        assert app.shown_id == request["id"]
        assert not tool.done()

        await on_tab(pilot, view, HOURS)  # the refused answer has the focus, ready to be corrected
        await pilot.press(*["backspace"] * 5, *"20000")
        assert issue_text(view, HOURS) == ""
        await pilot.press("enter")
        await pilot.press("tab", "tab", "tab", "tab", "tab")
        await on_tab(pilot, view, len(EVERY_KIND["properties"]))
        await pilot.press("enter")
        result = (await tool).json()
    assert result["action"] == "accept"
    assert result["content"]["hours"] == 20000
    assert result["content"]["symptoms"] == ["Noise"]


async def test_requests_show_oldest_first_and_vanish_when_finished_elsewhere(server, client):
    first = ask(client, form({"enum": ["a", "b"]}, "First"), timeout="600")
    [older] = await pending(client)
    second = ask(client, form({"enum": ["c", "d"]}, "Second"))
    [_, newer] = await pending(client, 2)
    app = answerer(server)
    async with app.run_test() as pilot:
        view = await shown(pilot, older["id"])
        assert text_of(view.query_one("#message", Static)) == "First"
        await until(pilot, lambda: "request 1 of 2" in status_text(app), "the status counts both")
        assert app.shown_id == older["id"]
        assert "expires in 10 min" in status_text(app)

        reply = await client.post(f"/question/{older['id']}/reply", json={"answers": [["b"]]})
        assert reply.status_code == 200
        view = await shown(pilot, newer["id"])
        assert text_of(view.query_one("#message", Static)) == "Second"

        await client.post(f"/question/{newer['id']}/reject")
        await until(pilot, lambda: app.shown_id is None and not app.drafts, "nothing is shown")
        assert app.query_one("#idle").display
        assert not app.query_one("#directory").display  # no directory: no filter line
        assert "nothing waiting" in status_text(app)
    assert (await first).json() == {"action": "accept", "content": {"value": "b"}}
    assert (await second).json() == {"action": "cancel"}


async def test_a_question_that_may_ask_for_a_secret_shows_the_gateways_warning_beside_it(server, client):
    """The form's ``warning`` under that question's own words, on its tab only; answering still works."""
    schema = {
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "title": "Verification code",
                "description": "The code from the text message we just sent",
            },
            "reason": {"type": "string", "title": "Reason", "description": "Why do you sign in?"},
        },
        "required": ["code"],
    }
    tool = ask(client, form(schema, "Sign in to the build server"))
    [request] = await pending(client)
    fields = (await client.get(f"/question/{request['id']}/form")).json()["fields"]
    warning = fields[0]["warning"]
    assert "may ask for a verification code" in warning
    assert fields[1].get("warning") is None
    app = answerer(server)
    async with app.run_test(size=(100, 30)) as pilot:
        view = await shown(pilot, request["id"])
        lines = screen_lines(app)
        question_line = lines.index(" The code from the text message we just sent")
        # Right under the question's own words, marked, wrapped to the pane's width, then a blank line.
        end = lines.index("", question_line)
        shown_warning = lines[question_line + 1 : end]
        assert shown_warning[0].lstrip().startswith("⚠ This question may ask for a verification code.")
        assert " ".join(" ".join(shown_warning).replace("⚠", "").split()) == warning
        assert lines[end + 1].startswith(" required · ")
        assert "\n".join(lines).count("may ask for") == 1  # the form's text does not repeat it
        await pilot.press(*"482913", "enter")
        await on_tab(pilot, view, 1)
        assert not any("may ask for" in line for line in screen_lines(app))
        await pilot.press(*"Release 4.2", "enter")
        await on_tab(pilot, view, 2)
        await pilot.press("enter")
        result = (await tool).json()
    assert result == {"action": "accept", "content": {"code": "482913", "reason": "Release 4.2"}}


async def test_escape_dismisses_and_ctrl_d_or_d_on_confirm_declines(server, client):
    dismissed = ask(client, form({"enum": ["a", "b"]}, "Dismiss me"))
    await pending(client)
    declined = ask(client, form({"enum": ["a", "b"]}, "Decline me"))
    await pending(client, 2)
    declined_on_confirm = ask(client, form({"enum": ["a", "b"]}, "Decline me too"))
    requests = await pending(client, 3)
    app = answerer(server)
    async with app.run_test() as pilot:
        await shown(pilot, requests[0]["id"])
        await pilot.press("escape")
        assert (await dismissed).json() == {"action": "cancel"}

        await shown(pilot, requests[1]["id"])
        await pilot.press("ctrl+d")
        assert (await declined).json() == {"action": "decline"}

        view = await shown(pilot, requests[2]["id"])
        await pilot.press("tab")
        await on_tab(pilot, view, 1)
        await pilot.press("d")
        assert (await declined_on_confirm).json() == {"action": "decline"}
        await until(pilot, lambda: app.shown_id is None, "nothing is shown")


async def test_reconnects_after_the_gateway_restarts_and_says_so_meanwhile():
    port = _free_port()
    gateway = _server_on(port)
    subscribed: list[str | None] = []
    try:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=10) as tool_client:
            tool = ask(tool_client, form({"enum": ["a", "b"]}, "Before the restart"))
            [before] = await pending(tool_client)
            app = answerer(gateway, backoff=Backoff(first=0.05, longest=0.2))
            async with app.run_test() as pilot, read_events(tool_client) as events:
                await shown(pilot, before["id"])
                assert "connected to" in status_text(app)

                await asyncio.to_thread(gateway.stop)  # the gateway gives the tool cancel on its way out
                rejected = await events.next("question.rejected")
                assert (await tool).json() == {"action": "cancel"}
                await until(pilot, lambda: app.shown_id is None, "the cancelled request leaves")
                await until(
                    pilot,
                    lambda: "disconnected, reconnecting…" in status_text(app),
                    "the status says the app is reconnecting",
                )
                assert app.stream.last_event_id == rejected.id

                gateway = _server_on(port, record_subscriptions=subscribed)
                await until(pilot, lambda: app.connected, "the app is connected again")
                assert subscribed[0] == rejected.id  # it came back with the last question event's id
                assert "connected to" in status_text(app)

                after = ask(tool_client, form({"enum": ["a", "b"]}, "After the restart"))
                [request] = await pending(tool_client)
                view = await shown(pilot, request["id"])
                assert text_of(view.query_one("#message", Static)) == "After the restart"
                await pilot.press("2", "enter")  # pick, then send from the Confirm tab
                assert (await after).json() == {"action": "accept", "content": {"value": "b"}}
    finally:
        gateway.stop()


async def test_answers_a_gateway_that_wants_the_answerers_password(make_server):
    server = make_server(OPENCODE_SERVER_PASSWORD="s3cret")
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as tool_client:
        tool = ask(tool_client, form(GO, "Proceed"))
        wrong = answerer(server, auth=basic_auth("opencode", "wrong"))
        async with wrong.run_test() as pilot:
            await until(pilot, lambda: "HTTP 401" in status_text(wrong), "the refusal shows")
            assert wrong.shown_id is None

        app = answerer(server, auth=basic_auth("opencode", "s3cret"))
        async with app.run_test() as pilot:
            await until(pilot, lambda: bool(app.drafts), "the request arrives")
            await shown(pilot, next(iter(app.drafts)))
            await pilot.press("1")  # Yes, and on to Confirm
            await pilot.press("enter")
            assert (await tool).json() == {"action": "accept", "content": {"go": True}}


def test_the_command_starts_and_explains_bad_addresses():
    environment = {**os.environ, "GATEWAY_URL": ""}
    shown = run_command("--help", env=environment)
    assert shown.returncode == 0
    for flag in ("--url", "--username", "--password", "--directory"):
        assert flag in shown.stdout

    unreachable = run_command("--url", f"http://127.0.0.1:{_free_port()}", env=environment)
    assert unreachable.returncode == 1
    assert unreachable.stderr.startswith(
        "elicitation-gateway answer: cannot reach the gateway at http://127.0.0.1:"
    )


def test_the_command_refuses_what_is_not_a_gateway(server, capsys):
    with pytest.raises(SystemExit) as malformed:
        answer.main(["--url", "localhost:4096"])
    assert malformed.value.code == 2
    assert "--url must be an http:// or https:// address" in capsys.readouterr().err

    assert answer.main(["--url", f"{server.url}/nowhere"]) == 1
    assert "does not answer GET /question as a gateway does (HTTP 404)" in capsys.readouterr().err


def test_the_command_takes_the_answerers_credentials_from_the_environment(make_server, monkeypatch, capsys):
    server = make_server(OPENCODE_SERVER_PASSWORD="s3cret")
    monkeypatch.delenv("OPENCODE_SERVER_PASSWORD", raising=False)
    assert answer.main(["--url", server.url]) == 1
    assert "wants the answerer's credentials: set OPENCODE_SERVER_PASSWORD" in capsys.readouterr().err

    monkeypatch.setenv("OPENCODE_SERVER_PASSWORD", "wrong")
    assert answer.main(["--url", server.url]) == 1
    assert "refused these credentials (HTTP 401)" in capsys.readouterr().err


async def test_with_a_directory_only_its_questions_and_those_that_name_none_come(server, client):
    """A proxied MCP server's questions carry ``mcp:NAME``; ``--directory mcp:NAME`` answers only those."""
    elsewhere = ask(client, form(GO, "Another server asks"), directory="mcp:tickets")
    [other] = await pending(client)
    weather = ask(client, form(GO, "The weather server asks"), directory="mcp:weather")
    unnamed = ask(client, form(GO, "A tool that names no directory asks"))
    [_, in_directory, unnamed_request] = await pending(client, 3)
    app = answerer(server, directory="mcp:weather")
    async with app.run_test(size=(100, 24)) as pilot:
        view = await shown(pilot, in_directory["id"])  # the oldest is another directory's: not shown
        assert text_of(view.query_one("#message", Static)) == "The weather server asks"
        await until(pilot, lambda: "request 1 of 2" in status_text(app), "the status counts the two")
        assert set(app.drafts) == {in_directory["id"], unnamed_request["id"]}
        line = text_of(app.query_one("#directory", Static))
        assert line == "only directory mcp:weather (and questions that name none)"
        assert screen_lines(app)[1].strip() == line  # right under the status line

        # Asked while the app follows the stream: another directory's question never arrives.
        later_elsewhere = ask(client, form(GO, "Another server asks again"), directory="mcp:tickets")
        await pending(client, 4)
        later = ask(client, form(GO, "The weather server asks again"), directory="mcp:weather/")
        listed = await pending(client, 5)
        later_ids = [r["id"] for r in listed[3:]]
        await until(pilot, lambda: later_ids[1] in app.drafts, "the later weather question arrives")
        assert later_ids[0] not in app.drafts
        assert other["id"] not in app.drafts
        assert await app.client.pending_ids() == {in_directory["id"], unnamed_request["id"], later_ids[1]}

        await pilot.press("1")  # Yes, and on to Confirm
        await on_tab(pilot, view, 1)
        await pilot.press("enter")
        assert (await weather).json() == {"action": "accept", "content": {"go": True}}
        for request_id in (unnamed_request["id"], later_ids[1]):
            await shown(pilot, request_id)
            await pilot.press("ctrl+d")
        assert (await unnamed).json() == {"action": "decline"}
        assert (await later).json() == {"action": "decline"}
        await until(pilot, lambda: app.query_one("#idle").display, "nothing is left to show")
        idle = text_of(app.query_one("#idle", Static))
        assert idle.startswith("No questions waiting in mcp:weather.")
        assert [r["id"] for r in await pending(client, 2)] == [other["id"], later_ids[0]]
    for request_id in (other["id"], later_ids[0]):
        await client.post(f"/question/{request_id}/reject")
    assert (await elsewhere).json() == {"action": "cancel"}
    assert (await later_elsewhere).json() == {"action": "cancel"}


async def test_a_directory_is_shown_as_text_not_markup(server):
    app = answerer(server, directory="/srv/[b]odd[/b]")
    async with app.run_test() as pilot:
        await until(pilot, lambda: app.connected, "the app is connected")
        assert text_of(app.query_one("#directory", Static)).startswith("only directory /srv/[b]odd[/b] (")
        assert text_of(app.query_one("#idle", Static)).startswith("No questions waiting in /srv/[b]odd[/b].")


def test_the_command_filters_by_its_directory_else_the_environments(server, monkeypatch, capsys):
    from elicitation_gateway.answerer.app import AnswerApp

    started: list[str | None] = []
    monkeypatch.setattr(AnswerApp, "run", lambda app: started.append(app.client.directory))
    monkeypatch.setenv("GATEWAY_ANSWER_DIRECTORY", "mcp:weather")
    assert answer.main(["--url", server.url]) == 0
    assert answer.main(["--url", server.url, "--directory", "/home/me/project"]) == 0
    monkeypatch.setenv("GATEWAY_ANSWER_DIRECTORY", "")
    assert answer.main(["--url", server.url]) == 0
    assert answer.main(["--url", server.url, "--directory", "  "]) == 0
    assert started == ["mcp:weather", "/home/me/project", None, None]

    with pytest.raises(SystemExit) as not_text:  # bytes that are not UTF-8 in the argument
        answer.main(["--url", server.url, "--directory", "/srv/\udcff"])
    assert not_text.value.code == 2
    assert "--directory '/srv/\\udcff' is not valid text (not UTF-8)" in capsys.readouterr().err
    assert started == ["mcp:weather", "/home/me/project", None, None]


def run_command(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "elicitation_gateway", "answer", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _server_on(port: int, record_subscriptions: list[str | None] | None = None) -> RunningServer:
    """A gateway on a fixed port, so that one can stop and another take its place."""
    gateway = RunningServer(settings_for_tests(), port=port)
    if record_subscriptions is not None:
        subscribe = gateway.gateway.store.subscribe

        async def recording(last_event_id: str | None = None) -> Any:
            record_subscriptions.append(last_event_id)
            return await subscribe(last_event_id)

        gateway.gateway.store.subscribe = recording  # type: ignore[method-assign]
    return gateway.start()


async def test_the_status_says_when_defaults_will_be_sent(server, client):
    tool = ask(
        client,
        form(GO | {"properties": {"go": {"type": "boolean", "default": True}}}),
        timeout="1800",
        onTimeout="default",
    )
    [request] = await pending(client)
    app = answerer(server)
    async with app.run_test() as pilot:
        await shown(pilot, request["id"])
        await until(pilot, lambda: "defaults sent in 30 min" in status_text(app), "the status says it")
        await client.post(f"/question/{request['id']}/reject")
        await until(pilot, lambda: not app.drafts, "the request leaves")
    assert (await tool).json() == {"action": "cancel"}


@pytest.mark.parametrize(
    ("key", "result"), [("1", {"action": "accept", "content": {}}), ("2", {"action": "decline"})]
)
async def test_a_plain_confirmation_is_sent_as_soon_as_yes_or_no_is_picked(server, client, key, result):
    """FastMCP 2.x's ``{"type": "object", "properties": {}}``: the message, one Yes/No question and no
    Confirm tab of its own; 1 (Yes) accepts with empty content, 2 (No) declines."""
    tool = ask(client, form({"type": "object", "properties": {}}, "Delete the old builds?"))
    [request] = await pending(client)
    app = answerer(server)
    async with app.run_test() as pilot:
        view = await shown(pilot, request["id"])
        assert view.draft.form.confirm
        assert tab_labels(view) == ["Confirm*"]
        assert not view.query(ConfirmPane)
        lines = "\n".join(screen_lines(app))
        assert "Delete the old builds?" in lines
        assert "Yes accepts, No declines" in lines
        await pilot.press(key)
        assert (await tool).json() == result
        await until(pilot, lambda: app.shown_id is None, "nothing is shown")


async def test_a_request_answered_by_someone_else_says_who(make_server, tmp_path):
    """alice's screen shows a question; carol answers it from elsewhere: alice is told it was carol,
    with the question's first line taken as text, not markup."""
    people = tmp_path / "people.toml"
    people.write_text('[people.alice]\npassword = "alice-pass"\n\n[people.carol]\npassword = "carol-pass"\n')
    server = make_server(people=people)
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=10) as tool_client,
        httpx.AsyncClient(base_url=server.url, timeout=10, auth=("carol", "carol-pass")) as carol,
    ):
        tool = ask(tool_client, form(GO, "Ship [b]it[/b]?\nSecond line"))
        app = answerer(server, auth=basic_auth("alice", "alice-pass"))
        async with app.run_test() as pilot:
            await until(pilot, lambda: bool(app.drafts), "the request arrives")
            await shown(pilot, next(iter(app.drafts)))
            [request] = await pending(carol)
            reply = await carol.post(f"/question/{request['id']}/reply", json={"answers": [["No"]]})
            assert reply.status_code == 200
            # Read as soon as it is shown: a toast leaves the screen after a few seconds.
            await until(pilot, lambda: bool(app._notifications), "alice is told who answered")
            told = [n.message for n in app._notifications]
            assert told == ["Answered by carol: Ship [b]it[/b]?"]
            await until(pilot, lambda: not app.drafts, "the request is gone")
        assert (await tool).json()["answeredBy"] == "carol"
