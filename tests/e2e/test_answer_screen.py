"""The screens docs/answering.md shows are the terminal answerer's real screens.

A gateway process (as ``make run`` starts it) is asked the README walkthrough's question, with the
README's own JSON body; ``elicitation-gateway answer`` runs in an 80×22 tmux pane; the test sends the
keys the page names and compares ``tmux capture-pane -p`` with docs/answer-screen.txt, and each
snippet the page shows of that request with the screen it was taken from. Only what differs from run
to run is put back as the page writes it: the gateway's port and the minutes left.

``ANSWER_SCREEN_CAPTURE=<directory>`` keeps the screens it saw there, as the page writes them
(``answer-screen.txt`` is the one in docs/).
"""

import asyncio
import contextlib
import difflib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.opencode_server import tmux_binary
from tests.e2e.test_opencode_tui import Tui
from tests.e2e.test_readme import block
from tests.helpers import ask
from tests.processes import ROOT, GatewayProcess, child_setup, stop

pytestmark = pytest.mark.timeout(120)

WIDTH, HEIGHT = 80, 22
PAGE = ROOT / "docs" / "answering.md"
FULL_SCREEN = ROOT / "docs" / "answer-screen.txt"
SHOWN = 30.0
"""How long the test waits for text to appear: a safety net a passing run never reaches."""
SETTLED = 10.0
"""How long, once the text is there, the screen may take to settle (the tab underline slides)."""

PORT = re.compile(r"(http://127\.0\.0\.1):\d+")
COUNTDOWN = re.compile(r"\b(expires|defaults sent) in (?:\d+ min|under a minute)")


def as_documented(screen: str) -> list[str]:
    """The screen's lines as the page writes them: port 4096, 5 minutes left, no trailing blanks."""
    screen = PORT.sub(r"\1:4096", screen)
    screen = COUNTDOWN.sub(r"\1 in 5 min", screen)
    return [line.rstrip() for line in screen.splitlines()]


def walkthrough_question() -> dict[str, object]:
    """The JSON body terminal 2 of the README's curl walkthrough posts to /elicit."""
    body = re.search(r" -d '(.*)'\s*$", block("/elicit"), re.DOTALL)
    assert body, "the README's /elicit example posts its body with -d '...'"
    return json.loads(body.group(1))


def snippet_after(page: str, words: str) -> list[str]:
    """The lines of the first code block after ``words`` on the page, without the block's own indent."""
    assert words in page, f"docs/answering.md no longer says {words!r}"
    fence = re.compile(r"^( *)```[a-z]*\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
    found = fence.search(page, page.index(words))
    assert found, f"no code block after {words!r}"
    indent = len(found.group(1))
    return as_documented("\n".join(line[indent:] for line in found.group(2).splitlines()))


def not_shown(snippet: list[str], screen: list[str]) -> list[str]:
    """The snippet's lines from the first one the screen does not have, in order (none: all there)."""
    position = 0
    for number, line in enumerate(snippet):
        try:
            position = screen.index(line, position) + 1
        except ValueError:
            return snippet[number:]
    return []


def keep(name: str, screen: list[str]) -> None:
    directory = os.environ.get("ANSWER_SCREEN_CAPTURE")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / name).write_text("\n".join(screen) + "\n", encoding="utf-8")


class Pane(Tui):
    """A :class:`Tui` of ``WIDTH`` × ``HEIGHT`` whose tmux server is the test's own child (``tmux -D``)
    and whose program is the pane's own process (no shell): :meth:`stop` ends the program and waits
    until tmux has reaped it, then ends the server and reaps it, however the test ended."""

    server: "subprocess.Popen[bytes] | None" = None
    program: int | None = None
    socket_path = ""

    def start(self, command: list[str]) -> None:
        self.server = subprocess.Popen(
            [self.tmux, "-L", self.socket, "-f", "/dev/null", "-D"],
            env=self.environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_setup,
        )
        deadline = time.monotonic() + SHOWN
        while True:
            try:
                self._run("set-option", "-g", "remain-on-exit", "on")  # a program that exits leaves its words
                break
            except subprocess.CalledProcessError:
                assert self.server.poll() is None, "the tmux server exited"
                assert time.monotonic() < deadline, "the tmux server did not start"
                time.sleep(0.05)
        self._run(
            "new-session", "-d", "-s", "tui", "-x", str(WIDTH), "-y", str(HEIGHT),
            "-c", str(self.directory), "--", *command,
        )  # fmt: skip
        shown = self._run("display-message", "-p", "-t", "tui", "#{pane_pid} #{socket_path}").strip()
        program, _, self.socket_path = shown.partition(" ")
        self.program = int(program)

    def screen(self, *, colours: bool = False) -> str:
        shown = super().screen(colours=colours)
        state = self._run("display-message", "-p", "-t", "tui", "#{pane_dead} #{pane_dead_status}")
        dead, _, status = state.partition(" ")
        if dead == "1":  # what Tui.shows fails on at once
            self.last = shown = f"{shown}\n[exited with {status.strip()}]"
        return shown

    def stop(self) -> None:
        if self.server is None:
            return
        try:
            if self.program is not None and self.server.poll() is None:
                subprocess.run(
                    [self.tmux, "-L", self.socket, "kill-session", "-t", "tui"],
                    env=self.environment,
                    capture_output=True,
                    timeout=10,
                )  # the program gets SIGHUP
                self._until_reaped(self.program)
        finally:
            super().stop()  # kill-server
            stop(self.server)
            if self.socket_path:  # tmux leaves its socket behind
                Path(self.socket_path).unlink(missing_ok=True)

    def _until_reaped(self, pid: int) -> None:
        """Until tmux has reaped ``pid``, its child: killed if SIGHUP has not ended it within 5 s."""
        for patience in (5, 10):
            deadline = time.monotonic() + patience
            while _child_of(pid, self.server.pid if self.server else -1):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            else:
                return
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # still tmux's child, so the pid is not another's yet
        raise AssertionError(f"the answerer (pid {pid}) did not end")

    async def settles(self, fits: Callable[[list[str]], bool], timeout: float = SETTLED) -> list[str]:
        """The screen as the page writes it, once ``fits`` holds (or as it is when ``timeout`` ends)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = as_documented(await asyncio.to_thread(self.screen))
            if fits(screen) or time.monotonic() > deadline:
                return screen
            await asyncio.sleep(0.1)


def _child_of(pid: int, parent: int) -> bool:
    """Whether ``pid`` is still ``parent``'s child, running or not yet reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return int(stat.rsplit(")", 1)[1].split()[1]) == parent


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    with GatewayProcess("answer-screen", tmp_path) as process:
        yield process.start()


@pytest.fixture
def pane() -> Iterator[Pane]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "OPENCODE_"))}
    screen = Pane(tmux_binary(), environment, ROOT)  # in the checkout, as the page runs the command
    try:
        yield screen
    finally:
        screen.stop()


@contextlib.asynccontextmanager
async def asking(client: httpx.AsyncClient) -> AsyncIterator["asyncio.Task[httpx.Response]"]:
    """The walkthrough's tool, waiting on /elicit; cancelled if the test ends first."""
    tool = ask(client, walkthrough_question())
    try:
        yield tool
    finally:
        tool.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await tool


async def test_the_answer_screen_is_the_one_the_docs_show(gateway: GatewayProcess, pane: Pane) -> None:
    page = PAGE.read_text(encoding="utf-8")
    prose = " ".join(page.split())
    for words in ("after pressing `2`", "and then `1` on *Symptoms*", "The full 80×22 screen"):
        assert words in prose, f"docs/answering.md no longer says {words!r}: which keys does the test send?"
    full_screen = as_documented(FULL_SCREEN.read_text(encoding="utf-8"))
    assert len(full_screen) == HEIGHT, "docs/answer-screen.txt is the whole screen, 22 lines"
    assert max(map(len, full_screen)) <= WIDTH, "docs/answer-screen.txt is 80 columns wide"
    picked = snippet_after(page, "Here is the screen after pressing `2`")
    refused = snippet_after(page, "After typing `99999` for *Hours* and pressing Enter on Confirm")

    pane.start([sys.executable, "-m", "elicitation_gateway", "answer", "--url", gateway.url])
    await pane.shows("No questions waiting", timeout=SHOWN)
    async with gateway.client() as client, asking(client) as tool:
        await pane.shows("Excavator diagnosis", "› 1. ○ SY215C", timeout=SHOWN)
        pane.keys("2")  # SY235C, and on to Symptoms
        await pane.shows("Model* ✓", "› 1. [ ] Black smoke", timeout=SHOWN)
        pane.keys("1")  # Black smoke
        await pane.shows("Symptoms ✓", "[✓] Black smoke", timeout=SHOWN)
        screen = await pane.settles(lambda shown: shown == full_screen)
        keep("answer-screen.txt", screen)
        assert screen == full_screen, differences(full_screen, screen)
        assert not not_shown(picked, screen), mismatch("after `2` and `1`", picked, screen)

        pane.keys("Tab")  # on to Hours
        await pane.shows("type the answer, Enter moves on", timeout=SHOWN)
        pane.type("99999")
        await pane.shows("99999", timeout=SHOWN)
        pane.keys("Enter")  # on to Confirm
        await pane.shows("Review your answers", timeout=SHOWN)
        pane.keys("Enter")  # send: the gateway refuses the hours
        await pane.shows("✗ 99999 is more than the maximum, 20000", "Hours* ✗", timeout=SHOWN)
        screen = await pane.settles(lambda shown: not not_shown(refused, shown))
        keep("answer-screen-refused.txt", screen)
        assert not not_shown(refused, screen), mismatch("after typing 99999", refused, screen)

        pane.keys("C-d")  # decline, as the hint line says
        await pane.shows("No questions waiting", timeout=SHOWN)
        assert (await tool).json() == {"action": "decline"}


def differences(documented: list[str], screen: list[str]) -> str:
    """How the screen differs from docs/answer-screen.txt, as a unified diff."""
    lines = difflib.unified_diff(documented, screen, "docs/answer-screen.txt", "the screen", lineterm="")
    return "\n".join(lines)


def mismatch(what: str, snippet: list[str], screen: list[str]) -> str:
    missing = not_shown(snippet, screen)
    return (
        f"docs/answering.md's screen {what} is not on the screen; from this line on it is not:\n"
        + "\n".join(missing)
        + "\n--- the screen:\n"
        + "\n".join(screen)
    )
