"""The README's commands install what they need and no more: ``make run`` the service and its answerers,
``make test`` (and the other developer targets) the test tools as well. Run against a virtualenv whose
``python`` only writes down how it was called, so nothing is installed."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A virtualenv whose ``bin/python`` appends its arguments to ``calls`` beside it."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "calls"}\n')
    python.chmod(0o755)
    return tmp_path / "venv"


def make(venv: Path, target: str) -> list[str]:
    """Run ``make target`` with ``venv``: the calls of its ``python``, this run's only."""
    calls = venv.parent / "calls"
    calls.unlink(missing_ok=True)
    done = subprocess.run(
        ["make", "--no-print-directory", target, f"VENV={venv}", f"PYTHON={sys.executable}", "ARGS=--port 0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "MAKEFLAGS": ""},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return calls.read_text().splitlines() if calls.exists() else []


def installs(calls: list[str]) -> list[str]:
    return [call.rsplit(" ", 1)[-1] for call in calls if call.startswith("-m pip install")]


def test_run_installs_the_service_and_its_answerers_only(venv: Path):
    calls = make(venv, "run")
    assert installs(calls) == [".[answer,notify,redis]"]
    assert all("-c constraints.txt" in call for call in calls if call.startswith("-m pip"))
    assert calls[-1] == "-m elicitation_gateway --port 0"
    assert make(venv, "run") == ["-m elicitation_gateway --port 0"], "installed once, not on every run"


def test_the_test_tools_are_installed_after_run_has_installed_the_service(venv: Path):
    make(venv, "run")
    assert installs(make(venv, "install")) == [".[test]"]
    assert installs(make(venv, "install")) == []


def test_the_test_install_serves_run_as_well(venv: Path):
    """``.[test]`` holds every extra ``make run`` installs: no second install after it."""
    assert installs(make(venv, "install")) == [".[test]"]
    assert make(venv, "run") == ["-m elicitation_gateway --port 0"]


def test_a_changed_pyproject_installs_again(venv: Path):
    make(venv, "run")
    stamp = venv / ".installed-service"
    past = (ROOT / "pyproject.toml").stat().st_mtime - 10
    os.utime(stamp, (past, past))
    assert installs(make(venv, "run")) == [".[answer,notify,redis]"]


def test_the_readme_s_sqlite_file_is_ignored_by_git():
    """``GATEWAY_STORE=sqlite:///gateway.db make run`` leaves the clone clean: the file, its journal
    and its write-ahead log and shared-memory index."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    names = ["gateway.db", "gateway.db-wal", "gateway.db-shm", "gateway.db-journal"]
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *names], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.stdout.split() == names
