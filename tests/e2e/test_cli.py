"""``elicitation-gateway`` (run as ``python -m elicitation_gateway``) as operators run it: a real process,
flags, environment, signals."""

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from elicitation_gateway import __version__
from elicitation_gateway.__main__ import COMMANDS
from elicitation_gateway.settings import Settings
from tests.helpers import ask, form, read_events, text_properties
from tests.processes import child_setup, free_port, reaped

LISTENING = re.compile(r"listening on (http://\S+)")


@contextmanager
def gateway_process(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[subprocess.Popen, str]]:
    """Start ``python -m elicitation_gateway`` and yield it with the URL it printed."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    environment.update(env or {})
    process = subprocess.Popen(
        [sys.executable, "-m", "elicitation_gateway", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
        preexec_fn=child_setup,
    )
    with reaped(process):
        url = None
        assert process.stdout is not None
        process.startup_output = ""  # type: ignore[attr-defined]
        for line in process.stdout:
            process.startup_output += line  # type: ignore[attr-defined]
            found = LISTENING.search(line)
            if found:
                url = found.group(1)
                break
        assert url, f"the gateway printed no URL (exit {process.poll()})"
        yield process, url


def test_defaults_are_loopback_port_4096(monkeypatch):
    for name in list(os.environ):
        if name.startswith("GATEWAY_"):
            monkeypatch.delenv(name)
    settings = Settings()
    assert (settings.host, settings.port, settings.store) == ("127.0.0.1", 4096, "memory")
    assert (settings.timeout, settings.max_timeout, settings.max_questions) == (300, 3600, 50)
    assert settings.directory == os.getcwd()


def test_help_names_the_flags():
    shown = subprocess.run(
        [sys.executable, "-m", "elicitation_gateway", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in ("--host", "--port", "--store"):
        assert flag in shown


def run_command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "elicitation_gateway", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--bogus"],
        ["ask", "--help"],
        ["ask", "--bogus"],
        ["ask", "--url", "http://127.0.0.1:9"],  # no JSON on stdin
        ["answer", "--help"],
        ["answer", "--url", "ftp://example.com"],
        ["proxy", "--help"],
        ["audit", "--help"],
        ["audit", "verify", "/nonexistent/trail.jsonl"],
    ],
    ids=" ".join,
)
def test_the_command_calls_itself_by_its_installed_name(args):
    """The console script's name, never ``python -m elicitation_gateway``, in usage and errors."""
    done = run_command(*args)
    shown = done.stdout + done.stderr
    assert "python -m" not in shown
    command = "elicitation-gateway" + (f" {args[0]}" if args[0] in COMMANDS else "")
    first = shown.splitlines()[0]
    assert first.startswith((f"usage: {command} ", f"{command}: ")), first


def test_the_version_and_start_refusals_name_the_command():
    assert run_command("--version").stdout == f"elicitation-gateway {__version__}\n"
    refused = run_command(env={"GATEWAY_TIMEOUT": "-1"})
    assert refused.stderr.startswith("elicitation-gateway: invalid setting timeout (GATEWAY_TIMEOUT): ")


def test_the_usage_line_names_every_command_and_the_help_the_settings_page():
    shown = run_command("--help").stdout
    usage = shown.split("\n\n", 1)[0]
    assert usage.startswith("usage: elicitation-gateway [serve] ")
    for command in set(COMMANDS) - {"serve"}:
        assert command in usage, command
    assert "docs/settings.md" in shown
    assert "README" not in shown


def test_flags_choose_host_and_port():
    port = free_port()
    with gateway_process("--host", "127.0.0.1", "--port", str(port)) as (_, url):
        assert url == f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/question").json() == []


def test_environment_chooses_port_and_settings():
    port = free_port()
    env = {"GATEWAY_PORT": str(port), "GATEWAY_SESSION_ID": "ses_fromtheenvironment"}
    with gateway_process(env=env) as (_, url):
        assert url == f"http://127.0.0.1:{port}"
        created = httpx.post(f"{url}/elicitations", json=form(text_properties(1)))
        assert created.status_code == 201
        assert httpx.get(f"{url}/question").json()[0]["sessionID"] == "ses_fromtheenvironment"


def test_a_bad_setting_stops_with_a_clear_message():
    done = subprocess.run(
        [sys.executable, "-m", "elicitation_gateway"],
        capture_output=True,
        text=True,
        env={**os.environ, "GATEWAY_TIMEOUT": "-1"},
        timeout=30,
    )
    assert done.returncode == 2
    assert "GATEWAY_TIMEOUT" in done.stderr


def test_a_port_in_use_stops_the_start_saying_so_and_how_to_choose_another():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = run_command("--port", str(port))
    assert done.returncode == 1
    assert f"port {port} is already in use on 127.0.0.1" in done.stderr
    assert "--port N" in done.stderr
    assert "GATEWAY_PORT" in done.stderr
    shown = done.stdout + done.stderr
    assert "listening on" not in shown
    assert "startup complete" not in shown  # said before anything starts
    assert "Traceback" not in shown


def test_a_sqlite_file_in_a_folder_that_does_not_exist_stops_the_start_naming_the_folder(tmp_path):
    missing = tmp_path / "no" / "such"
    done = run_command("--port", "0", env={"GATEWAY_STORE": f"sqlite:///{missing}/gateway.db"})
    assert done.returncode == 2
    assert "GATEWAY_STORE" in done.stderr
    assert f"the folder {missing} does not exist: create it first" in done.stderr
    assert not (tmp_path / "no").exists()


def test_a_host_that_does_not_resolve_stops_the_start_naming_it():
    done = run_command("--host", "no-such-host.invalid", "--port", "0")
    assert done.returncode == 1
    assert "cannot listen on 'no-such-host.invalid'" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_notify_url_apprise_cannot_parse_stops_the_start_naming_its_position():
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "elicitation_gateway", "--port", str(port)],
        capture_output=True,
        text=True,
        env={**os.environ, "GATEWAY_NOTIFY": "json://127.0.0.1:9/hook bogus://tok-5ecret/x"},
        timeout=30,
    )
    assert done.returncode == 2
    assert "GATEWAY_NOTIFY" in done.stderr
    assert "URL number 2 is not one Apprise understands" in done.stderr
    assert "URL number 1" not in done.stderr
    assert "5ecret" not in done.stderr + done.stdout
    assert "listening on" not in done.stdout


def test_start_up_names_the_store_and_the_notification_targets(tmp_path):
    env = {
        "GATEWAY_STORE": f"sqlite:///{tmp_path}/5ecret.db",
        "GATEWAY_NOTIFY": "json://127.0.0.1:9/a json://127.0.0.1:9/b",
    }
    with gateway_process("--port", "0", env=env) as (process, _):
        shown = process.startup_output
    assert "store: sqlite; 2 notification targets" in shown
    assert "5ecret" not in shown
    assert "WARNING" in shown
    assert "notifications carry no link to the question: set GATEWAY_PUBLIC_URL" in shown
    with gateway_process("--port", "0") as (process, _):
        assert "store: memory; no notifications" in process.startup_output
        assert "GATEWAY_PUBLIC_URL" not in process.startup_output


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_cancels_pending_questions_and_ends_streams(sig):
    with gateway_process("--port", "0") as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            async with read_events(client) as events:
                tool = ask(client, form(text_properties(2)))
                asked = await events.next("question.asked")
                process.send_signal(sig)
                rejected = await events.next("question.rejected")
                assert rejected.properties["requestID"] == asked.properties["id"]
                async with asyncio.timeout(10):
                    await events.closed.wait()  # the stream ends once shutdown has sent everything
            assert (await tool).json() == {"action": "cancel"}
        # uvicorn re-raises the signal once shut down, so the exit status is the signal's own
        assert await asyncio.to_thread(process.wait, 15) in (0, -sig)
        output = process.stdout.read() if process.stdout else ""
        assert "cancelled (shutdown)" in output


def notification_workers(gateway: int) -> set[int]:
    """The pids of ``gateway``'s children: its notification workers."""
    children: set[int] = set()
    for task in Path(f"/proc/{gateway}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            children |= {int(pid) for pid in (task / "children").read_text().split()}
    return children


def running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie nobody reaped does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


async def wait_for(condition: Any, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not met in {timeout} s: {what}"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
async def test_a_gateway_that_stops_leaves_no_notification_worker_behind(sig):
    """Its worker processes are reaped before it exits on SIGTERM or SIGINT (Ctrl-C reaches a terminal's
    whole process group: the workers leave it to the gateway); killed, it leaves its idle worker a
    closed pipe, on which the worker exits."""
    env = {"GATEWAY_NOTIFY": f"json://127.0.0.1:{closed_port()}/hook", "GATEWAY_NOTIFY_RETRIES": "0"}
    with gateway_process("--port", "0", env=env) as (process, url):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            response = await client.post("/elicitations", json=form(text_properties(1)))
            assert response.status_code == 201
            await wait_for(lambda: notification_workers(process.pid), "a notification worker started")
            workers = notification_workers(process.pid)
            if sig == signal.SIGINT:
                for pid in workers:
                    os.kill(pid, signal.SIGINT)  # as a terminal's Ctrl-C does to every process of it
            process.send_signal(sig)
            await asyncio.to_thread(process.wait, 15)
        if sig != signal.SIGKILL:  # ended before the gateway exits
            assert not [pid for pid in workers if running(pid)]
        await wait_for(lambda: not any(running(pid) for pid in workers), "every worker ended")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
