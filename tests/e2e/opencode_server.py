"""A real ``opencode serve`` for the bridge's tests: the published CLI pinned in tests/e2e/opencode/,
on a free loopback port, with HOME and the XDG folders in a temporary directory and start-up kept
offline (no models fetch, no plugins, no update check).

``make test`` installs the CLI (``npm ci --prefix tests/e2e/opencode``). Locally a missing CLI skips the
tests that need it, with the reason; under ``CI=true`` it fails them.
"""

import base64
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.processes import child_setup, free_port, stop

OPENCODE_PACKAGE = Path(__file__).resolve().parent / "opencode"
PLATFORM_BINARY = OPENCODE_PACKAGE / "node_modules" / "opencode-linux-x64" / "bin" / "opencode"
WRAPPER = OPENCODE_PACKAGE / "node_modules" / ".bin" / "opencode"
START_TIMEOUT = 30.0

OFFLINE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",  # else the first /provider waits on models.dev
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
}


def basic_auth(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(problem: str) -> None:
    """Skip locally, fail under CI: CI must run every test."""
    if in_ci():
        pytest.fail(problem)
    pytest.skip(problem)


def opencode_binary() -> Path:
    """The pinned CLI, or skip (fail under CI) saying how to install it."""
    for candidate in (PLATFORM_BINARY, WRAPPER):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    unavailable(
        f"the OpenCode CLI is not installed in {OPENCODE_PACKAGE}: run `npm ci --prefix tests/e2e/opencode`"
    )
    raise AssertionError("unreachable")


def tmux_binary() -> str:
    tmux = shutil.which("tmux")
    if tmux is None:
        unavailable("tmux is not installed; the TUI test drives the OpenCode TUI in it: apt-get install tmux")
    assert tmux is not None
    return tmux


def isolated_environment(root: Path) -> dict[str, str]:
    """HOME and every XDG folder inside ``root``: OpenCode writes nothing elsewhere."""
    home = root / "home"
    folders = {
        "HOME": home,
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_STATE_HOME": home / ".local" / "state",
    }
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENCODE_", "XDG_")) and name not in ("GATEWAY_URL",)
    }
    environment.update({name: str(path) for name, path in folders.items()})
    environment.update(OFFLINE)
    return environment


class OpenCodeServer:
    """``opencode serve`` in ``root``: its data there survives :meth:`stop`, so a restart (same port)
    finds its sessions again, as a user's restarted server does."""

    def __init__(
        self,
        root: Path,
        *,
        port: int | None = None,
        password: str | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.binary = opencode_binary()
        self.root = root
        self.project = root / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.password = password
        self.environment = isolated_environment(root)
        if password is not None:
            self.environment["OPENCODE_SERVER_PASSWORD"] = password
        if config is not None:
            config_file = Path(self.environment["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json"
            config_file.parent.mkdir(parents=True, exist_ok=True)
            config_file.write_text(json.dumps(config))
        self.output: list[str] = []
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> "OpenCodeServer":
        """Start and wait for its "listening" line (a request sent before it may never be answered)."""
        self._process = subprocess.Popen(
            [str(self.binary), "serve", "--pure", "--hostname", "127.0.0.1", "--port", str(self.port)],
            cwd=self.project,
            env=self.environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=child_setup,
        )
        listening = threading.Event()
        threading.Thread(target=self._drain, args=(self._process, listening), daemon=True).start()
        if not listening.wait(START_TIMEOUT):
            self.stop()
            raise RuntimeError(f"opencode serve did not start in {START_TIMEOUT} s:\n" + "".join(self.output))
        self._wait_healthy()
        return self

    def _drain(self, process: subprocess.Popen[str], listening: threading.Event) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.output.append(line)
            if "listening on" in line:
                listening.set()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/global/health", headers=self.auth(), timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("opencode serve is not healthy:\n" + "".join(self.output))

    def auth(self) -> dict[str, str]:
        """The Authorization header its clients need (none without a password)."""
        if self.password is None:
            return {}
        return {"Authorization": basic_auth("opencode", self.password)}

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        stop(process)

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        """Straight to OpenCode, not through the gateway: what the bridge's answers are compared with."""
        return httpx.get(self.url + path, headers=self.auth(), timeout=20, **kwargs)
