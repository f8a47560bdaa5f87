"""The real OpenCode TUI shows the gateway's questions: ``opencode attach`` (the published CLI pinned in
tests/e2e/opencode/) runs in tmux against a gateway in bridge mode in front of a real
``opencode serve``. A tool asks the README's excavator questionnaire into a real session; the TUI
draws the form; keys answer it, and the tool gets typed content. Esc gives the tool ``cancel``. An
answer the gateway refuses leaves the form as it was (the TUI shows nothing), and the log says why.

``OPENCODE_TUI_CAPTURE=<directory>`` keeps the screens it saw there (docs/opencode-tui.txt is one).
"""

import asyncio
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer
from tests.e2e.opencode_server import OpenCodeServer, tmux_binary
from tests.e2e.test_bridge import EXCAVATOR, EXCAVATOR_CONTENT
from tests.helpers import ask, until

pytestmark = pytest.mark.timeout(180)

WIDTH, HEIGHT = 110, 36
SCREEN_TIMEOUT = 30.0
LISTED, EDITING = "\x1b[38;5;8m", "\x1b[38;5;255m"
"""How the TUI colours a typed answer listed under its question (grey) and while it is edited (bright)."""


class Tui:
    """One program in a detached tmux session of its own server (``-L``): keys in, screens out."""

    def __init__(self, tmux: str, environment: dict[str, str], directory: Path) -> None:
        self.tmux = tmux
        self.socket = f"gateway-tui-{uuid.uuid4().hex[:8]}"
        self.environment = {k: v for k, v in environment.items() if k not in ("TMUX", "TMUX_PANE")}
        self.environment["TERM"] = "xterm-256color"
        self.directory = directory
        self.last = ""

    def _run(self, *arguments: str) -> str:
        done = subprocess.run(
            [self.tmux, "-L", self.socket, "-f", "/dev/null", *arguments],
            env=self.environment,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout

    def start(self, command: list[str]) -> None:
        # When the program exits, its last words stay on the screen for the failure message.
        script = " ".join(_quote(part) for part in command) + '; echo "[exited with $?]"; sleep 600'
        self._run(
            "new-session", "-d", "-s", "tui", "-x", str(WIDTH), "-y", str(HEIGHT),
            "-c", str(self.directory), "sh", "-c", script,
        )  # fmt: skip

    def screen(self, *, colours: bool = False) -> str:
        self.last = self._run("capture-pane", "-p", *(["-e"] if colours else []), "-t", "tui")
        return self.last

    def keys(self, *keys: str) -> None:
        self._run("send-keys", "-t", "tui", *keys)

    def type(self, text: str) -> None:
        self._run("send-keys", "-t", "tui", "-l", text)

    async def shows(
        self,
        *texts: str,
        gone: str | None = None,
        twice: str | None = None,
        timeout: float = SCREEN_TIMEOUT,
        colours: bool = False,
    ) -> str:
        """Wait until the screen shows every one of ``texts`` (and no longer ``gone``; ``twice`` at least
        twice); ``colours``: the screen with its colour escapes."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    screen = await asyncio.to_thread(self.screen, colours=colours)
                    if "[exited with" in screen:
                        raise AssertionError(f"the TUI exited:\n{screen}")
                    if (
                        all(text in screen for text in texts)
                        and (gone is None or gone not in screen)
                        and (twice is None or screen.count(twice) >= 2)
                    ):
                        return screen
                    await asyncio.sleep(0.1)
        except TimeoutError:
            wanted = (*texts, *([f"{twice} (twice)"] if twice else []))
            raise AssertionError(f"the TUI did not show {wanted} within {timeout} s:\n{self.last}") from None

    async def types(self, text: str, *, placeholder: str) -> str:
        """Type ``text`` into a field just drawn. A field can be on the screen a moment before it takes
        keys; while its placeholder still shows and ``text`` does not, the keys were lost: type again."""
        for _ in range(3):
            self.type(text)
            try:
                return await self.shows(text, timeout=5)
            except AssertionError:
                if self.last.count(placeholder) < 2 or text in self.last:
                    raise
        return await self.shows(text)

    async def edits(self, answer: str) -> None:
        """Press Enter on a typed answer until it is being edited. Listed and being edited, it reads the
        same but for its colour (grey, then bright), and a key sent the moment a view is drawn can be
        lost: Enter is pressed again while the answer is still listed."""
        editing = EDITING + answer
        for _ in range(3):
            self.keys("Enter")
            try:
                await self.shows(editing, colours=True, timeout=5)
                return
            except AssertionError:
                if LISTED + answer not in self.last:
                    raise
        await self.shows(editing, colours=True)

    def stop(self) -> None:
        subprocess.run(
            [self.tmux, "-L", self.socket, "kill-server"],
            env=self.environment,
            capture_output=True,
            timeout=10,
        )


def _quote(part: str) -> str:
    return "'" + part.replace("'", "'\\''") + "'"


@pytest.fixture
def opencode(tmp_path: Path) -> Iterator[OpenCodeServer]:
    server = OpenCodeServer(tmp_path / "opencode").start()
    yield server
    server.stop()


@pytest.fixture
def tui(opencode: OpenCodeServer) -> Iterator[Tui]:
    screen = Tui(tmux_binary(), opencode.environment, opencode.project)
    yield screen
    screen.stop()


def keep(name: str, screen: str) -> None:
    directory = os.environ.get("OPENCODE_TUI_CAPTURE")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / name).write_text(screen, encoding="utf-8")


async def test_the_opencode_tui_shows_a_gateway_question_and_answers_it_with_keys(
    make_server: Callable[..., RunningServer], opencode: OpenCodeServer, tui: Tui
):
    gateway = make_server(opencode_url=opencode.url)
    async with httpx.AsyncClient(base_url=gateway.url, timeout=20) as client:
        # A real session, made through the gateway as any OpenCode client makes one.
        created = await client.post("/session", json={"title": "Excavator diagnosis"})
        session = created.json()["id"]
        tui.start([str(opencode.binary), "attach", gateway.url, "--session", session])
        ready = await tui.shows("ctrl+p commands")
        assert "Connect a provider" not in ready, ready

        tool = ask(client, EXCAVATOR, sessionID=session, directory=str(opencode.project))
        asked = await tui.shows(
            "Model", "Symptoms", "Hours", "Confirm", "Excavator diagnosis", "SY215C", "SY235C"
        )
        keep("question.txt", asked)
        keep("question.ansi", tui.screen(colours=True))

        tui.keys("Enter")  # Model: SY215C (the first option), then on to Symptoms
        await tui.shows("Select symptoms:", "Black smoke", "Noise")
        tui.keys("Enter")  # Black smoke
        await tui.shows("[✓] Black smoke")
        tui.keys("Down", "Enter")  # Noise
        await tui.shows("[✓] Noise")
        tui.keys("Tab")  # on to Hours
        await tui.shows("Hours (a whole number from 0 to 20000)")
        tui.keys("Enter")  # "Type your own answer": a field opens under it, its placeholder the same words
        await tui.shows(twice="Type your own answer")
        await tui.types("1200", placeholder="Type your own answer")
        tui.keys("Enter")
        review = await tui.shows("Review", "Model: SY215C", "Symptoms: Black smoke, Noise", "Hours: 1200")
        keep("review.txt", review)
        tui.keys("Enter")  # submit

        result = await asyncio.wait_for(tool, 20)
        assert result.json() == {"action": "accept", "content": EXCAVATOR_CONTENT}
        await tui.shows("ctrl+p commands", gone="Review")  # the TUI cleared its prompt

        # Esc dismisses: the tool gets cancel.
        dismissed = ask(client, EXCAVATOR, sessionID=session)
        await tui.shows("SY215C", "Confirm")
        tui.keys("Escape")
        assert (await asyncio.wait_for(dismissed, 20)).json() == {"action": "cancel"}
        await tui.shows("ctrl+p commands", gone="SY215C")


async def test_an_unsessioned_question_opens_in_the_gateways_session(
    make_server: Callable[..., RunningServer], opencode: OpenCodeServer, tui: Tui
):
    """A tool that names no session: the README's curl. Its question is in the "Elicitation Gateway"
    session, which the TUI opens with --session."""
    gateway = make_server(opencode_url=opencode.url)
    session = gateway.gateway.default_session_id
    async with httpx.AsyncClient(base_url=gateway.url, timeout=20) as client:
        tool = ask(client, EXCAVATOR)  # asked before the TUI is there: announced when it connects
        tui.start([str(opencode.binary), "attach", gateway.url, "--session", session])
        await tui.shows("Excavator diagnosis", "SY215C", "Confirm")
        tui.keys("Escape")
        assert (await asyncio.wait_for(tool, 20)).json() == {"action": "cancel"}


async def test_a_refused_answer_leaves_the_form_as_it_was_and_the_reason_in_the_log(
    make_server: Callable[..., RunningServer], opencode: OpenCodeServer, tui: Tui, caplog
):
    """The TUI shows nothing of the gateway's 400 (docs/opencode-bridge.md says so): Submit seems to do
    nothing, the Review stays, and the log says why. Going back to the question, the answer is fixed."""
    caplog.set_level("INFO", logger="elicitation_gateway")
    gateway = make_server(opencode_url=opencode.url)
    async with httpx.AsyncClient(base_url=gateway.url, timeout=20) as client:
        session = (await client.post("/session", json={"title": "Excavator diagnosis"})).json()["id"]
        tui.start([str(opencode.binary), "attach", gateway.url, "--session", session])
        await tui.shows("ctrl+p commands")
        tool = ask(client, EXCAVATOR, sessionID=session, directory=str(opencode.project))
        await tui.shows("Excavator diagnosis", "SY215C", "Confirm")
        tui.keys("Enter")  # Model: SY215C
        await tui.shows("Select symptoms:")
        tui.keys("Tab")  # no symptoms; on to Hours
        await tui.shows("Hours (a whole number from 0 to 20000)")
        tui.keys("Enter")
        await tui.shows(twice="Type your own answer")
        await tui.types("99999", placeholder="Type your own answer")
        tui.keys("Enter")
        await tui.shows("Review", "Hours: 99999")
        tui.keys("Enter")  # submit: refused
        refused = "Hours: 99999 is more than the maximum, 20000"
        await until(lambda: any(refused in record.getMessage() for record in caplog.records))
        assert [record.levelname for record in caplog.records if refused in record.getMessage()] == ["INFO"]
        await asyncio.sleep(1)  # had the TUI anything to show of it, it would be on the screen by now
        screen = await tui.shows("Review", "Hours: 99999", "enter submit")
        assert "99999 is more than" not in screen
        assert not tool.done()

        tui.keys("Left")  # back to Hours, the typed answer kept
        await tui.shows("Hours (a whole number from 0 to 20000)", "99999")
        await tui.edits("99999")
        tui.keys(*["BSpace"] * 5)
        await tui.types("1200", placeholder="Type your own answer")
        tui.keys("Enter")
        await tui.shows("Review", "Hours: 1200")
        tui.keys("Enter")
        result = await asyncio.wait_for(tool, 20)
        assert result.json() == {"action": "accept", "content": {"model": "SY215C", "hours": 1200}}


async def test_the_opencode_tui_signed_in_as_a_person_shows_their_questions_alone(
    make_server: Callable[..., RunningServer], opencode: OpenCodeServer, tui: Tui, tmp_path: Path
):
    """With GATEWAY_PEOPLE, ``opencode attach`` signs in as a person through OpenCode's own settings
    (``OPENCODE_SERVER_USERNAME`` / ``OPENCODE_SERVER_PASSWORD``): it shows the questions addressed to
    them, not another's, and what they do is on record as theirs."""
    people = tmp_path / "people.toml"
    people.write_text('[people.alice]\npassword = "alice-pass"\n\n[people.carol]\npassword = "carol-pass"\n')
    gateway = make_server(opencode_url=opencode.url, people=people)
    alice = httpx.BasicAuth("alice", "alice-pass")
    async with httpx.AsyncClient(base_url=gateway.url, timeout=20) as client:
        created = await client.post("/session", json={"title": "Release"}, auth=alice)
        session = created.json()["id"]
        tui.environment.update(OPENCODE_SERVER_USERNAME="alice", OPENCODE_SERVER_PASSWORD="alice-pass")
        tui.start([str(opencode.binary), "attach", gateway.url, "--session", session])
        await tui.shows("ctrl+p commands")

        carols = {**EXCAVATOR, "message": "For carol alone", "to": ["carol"]}
        for_carol = ask(client, carols, sessionID=session, directory=str(opencode.project))
        carol = httpx.BasicAuth("carol", "carol-pass")

        async def listed_for_carol() -> bool:
            return bool((await client.get("/question", auth=carol)).json())

        await until(listed_for_carol, what="carol's question listed")
        alices = {**EXCAVATOR, "message": "For alice", "to": ["alice"]}
        for_alice = ask(client, alices, sessionID=session, directory=str(opencode.project))
        screen = await tui.shows("For alice", "SY215C", "Confirm")
        assert "For carol alone" not in screen
        tui.keys("Escape")
        assert (await asyncio.wait_for(for_alice, 20)).json() == {"action": "cancel", "answeredBy": "alice"}
        await tui.shows("ctrl+p commands", gone="SY215C")
        assert not for_carol.done()  # still carol's to answer, and never shown here
        assert "For carol alone" not in tui.screen()
        [request_id] = [question["id"] for question in (await client.get("/question", auth=carol)).json()]
        await client.post(f"/question/{request_id}/reject", auth=carol)
        assert (await asyncio.wait_for(for_carol, 20)).json() == {"action": "cancel", "answeredBy": "carol"}
