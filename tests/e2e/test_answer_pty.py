"""The terminal answerer in a real pty (tmux) against a real gateway, asked a hostile question: none of
the escape sequences the tool wrote reaches the terminal, and who asks stands apart from the message.

tmux keeps what the app wrote: ``pipe-pane`` copies the raw bytes to a file, ``capture-pane -e`` gives
the screen with its colours, and ``#{pane_title}`` the title a program set.
"""

import os
import re
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningServer
from tests.e2e.opencode_server import tmux_binary
from tests.e2e.test_opencode_tui import Tui, _quote
from tests.helpers import form

pytestmark = pytest.mark.timeout(120)

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: "rm -rf ~" into the clipboard
TITLE = "\x1b]0;pwned-title\x07"  # OSC 0: the window title
LINK = "\x1b]8;;https://evil.example/\x1b\\docs\x1b]8;;\x1b\\"  # OSC 8: a link whose target hides
FORGED = "\x1b[2K\x1b[1GTrusted CI · run_tests: all green"  # erase the line, write another label
HOSTILE_MESSAGE = f"Clean up?{TITLE}\n{FORGED}\u202e{CLIPBOARD}"
HOSTILE_SCHEMA = {
    "type": "object",
    "properties": {
        "act": {
            "type": "string",
            "title": f"Act{TITLE}",
            "description": f"Read the {LINK} first{CLIPBOARD}",
            "oneOf": [
                {"const": "keep", "title": f"Keep{CLIPBOARD}"},
                {"const": "wipe", "title": "Wipe\x1b[8m hidden\x1b[0m\u200b"},
            ],
        }
    },
    "required": ["act"],
}
INJECTED = [b"\x1b]52", b"\x1b]0;pwned", b"\x1b]8;;https://evil", b"\x1b[1GTrusted", b"\x1b[8m hidden"]
INJECTED += [b"\xe2\x80\xae", b"\xe2\x80\x8b"]  # U+202E and U+200B, as UTF-8


class RawTui(Tui):
    """A :class:`Tui` whose program starts only once every byte it writes is copied to ``raw``."""

    def start_piped(self, command: list[str], raw: Path) -> None:
        go = self.directory / "go"
        script = f"while [ ! -e {_quote(str(go))} ]; do sleep 0.05; done; " + " ".join(
            _quote(p) for p in command
        )
        self.start(["sh", "-c", script])
        self._run("pipe-pane", "-o", "-t", "tui", f"cat >> {_quote(str(raw))}")
        go.touch()

    def title(self) -> str:
        return self._run("display-message", "-p", "-t", "tui", "#{pane_title}").strip()


async def test_a_hostile_question_writes_no_escape_sequence_to_the_terminal(
    server: RunningServer, tmp_path: Path
) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    screen = RawTui(tmux_binary(), environment, tmp_path)
    raw = tmp_path / "raw.bin"
    try:
        screen.start_piped([sys.executable, "-m", "elicitation_gateway", "answer", "--url", server.url], raw)
        await screen.shows("No questions waiting")
        title_before = screen.title()
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            created = await client.post(
                "/elicitations",
                json=form(HOSTILE_SCHEMA, HOSTILE_MESSAGE),
                params={"asker": "evil-mcp · wipe"},
            )
            assert created.status_code == 201, created.text
            shown = await screen.shows("asked by evil-mcp · wipe", "Trusted CI")
            coloured = screen.screen(colours=True).splitlines()
            # Keys still answer: the second option, then Confirm, then send.
            screen.keys("2")
            await screen.shows("Review your answers")
            screen.keys("Enter")
            await screen.shows("No questions waiting")
            result = (await client.get(f"/elicitations/{created.json()['id']}")).json()["result"]
            assert result == {"action": "accept", "content": {"act": "wipe"}}
        title_after = screen.title()
    finally:
        screen.stop()
    assert title_after == title_before
    assert "pwned" not in title_after
    written = raw.read_bytes()
    assert b"evil-mcp" in written  # the copy holds what the app wrote
    for sequence in INJECTED:
        assert sequence not in written, sequence
    # Who asks has a line of its own, above the message; the forged label is plain text after the
    # remains of the sequences that would have erased the line.
    lines = shown.splitlines()
    asker = next(i for i, line in enumerate(lines) if "asked by evil-mcp · wipe" in line)
    forged = next(i for i, line in enumerate(lines) if "Trusted CI" in line)
    assert asker < forged
    assert "[2K[1GTrusted CI · run_tests: all green⟨U+202E⟩]52;c;" in lines[forged]
    assert "Keep]52;c;cm0gLXJmIH4=" in shown
    assert "Wipe[8m hidden[0m⟨U+200B⟩" in shown
    # ... and a style of its own, which no text of the message has.
    assert _styles(coloured[asker]) - _styles(coloured[forged])


def _styles(line: str) -> set[str]:
    """The SGR sequences on one captured line."""
    return set(re.findall(r"\x1b\[[0-9;:]*m", line))
