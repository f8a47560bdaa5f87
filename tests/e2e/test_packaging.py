"""The wheel users install, and the commands it gives them.

The wheel is built once, from a copy of the project's packaging inputs (a build in place would leave
``build/`` and ``*.egg-info`` in the work tree). It must hold the package, its typing marker and the web
page, and no stray top-level package (the project was once ``app``, a name a user's own project may
use); it declares the ``elicitation-gateway`` command. Both entry points then run from inside a user's
project folder that has an ``app/`` package of its own, which must not be imported.
"""

import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "elicitation_gateway")
HELP_LINE = "Elicitation Gateway: MCP elicitations asked as OpenCode questions over SSE."

pytestmark = pytest.mark.timeout(600)


def clean_environment() -> dict[str, str]:
    """No PYTHONPATH or gateway settings from the caller: the commands find only what is installed."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("GATEWAY_")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)]
    # pyproject needs setuptools>=77 (SPDX license); with an older one here, pip builds in isolation.
    if Version(importlib.metadata.version("setuptools")) >= Version("77"):
        command.insert(4, "--no-build-isolation")
    built = subprocess.run(command, capture_output=True, text=True, timeout=540, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    [found] = out.glob("elicitation_gateway-*.whl")
    return found


@pytest.fixture(scope="module")
def wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


@pytest.fixture
def user_project(tmp_path: Path) -> Path:
    """A user's project folder with an ``app`` package of its own, which fails loudly if imported."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("raise SystemExit('the user project app/ was imported')\n")
    (tmp_path / "app" / "main.py").write_text(
        "raise SystemExit('the user project app/main.py was imported')\n"
    )
    return tmp_path


def test_the_wheel_holds_the_package_its_marker_and_the_page(wheel_names: list[str]):
    for name in (
        "elicitation_gateway/__init__.py",
        "elicitation_gateway/__main__.py",
        "elicitation_gateway/client.py",
        "elicitation_gateway/py.typed",
        "elicitation_gateway/server/static/index.html",
        "elicitation_gateway/server/static/app.js",
        "elicitation_gateway/server/static/style.css",
    ):
        assert name in wheel_names, f"{name} is not in the wheel"


def test_the_wheel_has_no_other_top_level_package(wheel_names: list[str]):
    top = {name.split("/")[0] for name in wheel_names}
    assert not any(name.startswith("app/") for name in wheel_names)
    assert not any(name.startswith("tests/") for name in wheel_names)
    assert {name for name in top if not name.endswith(".dist-info")} == {"elicitation_gateway"}


def test_the_wheel_declares_the_console_script(wheel: Path, wheel_names: list[str]):
    [entry_points] = [name for name in wheel_names if name.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(entry_points).decode()
    assert "[console_scripts]" in text
    assert "elicitation-gateway = elicitation_gateway.__main__:main" in text


def test_the_wheel_alone_runs_from_a_user_project(wheel: Path, user_project: Path, tmp_path_factory):
    """The unpacked wheel, ahead of the work tree on the path: its own files are enough to run."""
    unpacked = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
    environment = clean_environment() | {"PYTHONPATH": str(unpacked)}
    code = (
        "import importlib.resources, elicitation_gateway, elicitation_gateway.server.app\n"
        "import elicitation_gateway.proxy.command, elicitation_gateway.answerer.command\n"
        "print(elicitation_gateway.__file__)\n"
        "print(importlib.resources.files('elicitation_gateway.server').joinpath('static/index.html').is_file())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=user_project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    location, page_found = done.stdout.split()
    assert Path(location).is_relative_to(unpacked)
    assert page_found == "True"


@pytest.mark.parametrize("entry", ["python -m", "console script"])
def test_help_runs_from_a_user_project_that_has_its_own_app(user_project: Path, entry: str):
    """``python -m`` puts the current folder first on the path: the user's ``app/`` must not shadow
    anything the gateway imports."""
    if entry == "python -m":
        command = [sys.executable, "-m", "elicitation_gateway", "--help"]
    else:
        script = Path(sys.executable).parent / "elicitation-gateway"
        assert script.is_file(), f"{script} is not installed (pip install -e .)"
        command = [str(script), "--help"]
    done = subprocess.run(
        command,
        cwd=user_project,
        env=clean_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert HELP_LINE in done.stdout
    assert "--store" in done.stdout
    assert "was imported" not in done.stdout + done.stderr
