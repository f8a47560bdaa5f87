"""The packaging metadata in pyproject.toml: what it builds with, what the server depends on (and not),
the extras, and constraints.txt pinning every requirement the test install brings in."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
NAME = canonicalize_name(PROJECT["name"])


def requirements(group: str) -> list[Requirement]:
    """``dependencies``, or one extra, as written."""
    texts = PROJECT["dependencies"] if group == "dependencies" else PROJECT["optional-dependencies"][group]
    return [Requirement(text) for text in texts]


def expanded(group: str) -> list[Requirement]:
    """An extra with the extras of this project it names spelled out."""
    found = []
    for requirement in requirements(group):
        if canonicalize_name(requirement.name) == NAME:
            for extra in sorted(requirement.extras):
                found += expanded(extra)
        else:
            found.append(requirement)
    return found


def constraints() -> dict[str, Version]:
    pinned = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, _, version = line.partition("==")
        pinned[canonicalize_name(name)] = Version(version)
    return pinned


def test_the_build_backend_understands_an_spdx_license():
    """``license = "MIT"`` (PEP 639) needs setuptools 77 or newer to build."""
    [setuptools] = [Requirement(text) for text in PYPROJECT["build-system"]["requires"]]
    assert setuptools.name == "setuptools"
    assert not setuptools.specifier.contains("76.9")
    assert setuptools.specifier.contains("77.0")
    assert PROJECT["license"] == "MIT"
    assert PROJECT["license-files"] == ["LICENSE"]


def test_the_server_depends_on_what_it_uses_only():
    """uvloop and httptools directly, not ``uvicorn[standard]`` (watchfiles, websockets, PyYAML);
    Redis only with its extra."""
    dependencies = {canonicalize_name(r.name): r for r in requirements("dependencies")}
    assert not dependencies["uvicorn"].extras, "uvicorn[standard] brings what the server never uses"
    assert {"uvloop", "httptools"} <= dependencies.keys()
    assert not {"watchfiles", "websockets", "pyyaml", "redis"} & dependencies.keys()
    assert [canonicalize_name(r.name) for r in requirements("redis")] == ["redis"]


def test_no_requirement_is_listed_twice():
    for group in ["dependencies", *PROJECT["optional-dependencies"]]:
        names = [canonicalize_name(r.name) for r in requirements(group)]
        assert len(names) == len(set(names)), f"{group} lists a requirement twice: {names}"
    names = [canonicalize_name(r.name) for r in requirements("dependencies") + expanded("test")]
    twice = sorted({name for name in names if names.count(name) > 1})
    assert not twice, f"listed twice across the test install: {twice}"


def test_every_requirement_has_a_lower_bound():
    for group in ["dependencies", *PROJECT["optional-dependencies"]]:
        for requirement in requirements(group):
            if canonicalize_name(requirement.name) == NAME:
                continue
            operators = {spec.operator for spec in requirement.specifier}
            assert operators & {">=", "==", "~="}, f"{requirement} in {group} has no lower bound"


def test_the_extras_the_docs_and_the_image_name():
    extras = PROJECT["optional-dependencies"]
    assert {"redis", "answer", "otel", "test"} <= extras.keys()
    otel = {canonicalize_name(r.name) for r in requirements("otel")}
    assert {"opentelemetry-distro", "opentelemetry-exporter-otlp"} <= otel
    assert otel & {"opentelemetry-instrumentation-asgi", "opentelemetry-instrumentation-starlette"}
    test = {canonicalize_name(r.name) for r in expanded("test")}
    assert otel <= test, "the tracing test needs the otel extra installed"
    assert re.search(r"^ARG EXTRAS=redis\b", (ROOT / "Dockerfile").read_text(), re.MULTILINE)


def test_constraints_pin_every_requirement_within_its_range():
    """``make`` and the image install with ``-c constraints.txt``: a requirement missing there would
    float, and one outside its range could not be installed."""
    pinned = constraints()
    for requirement in requirements("dependencies") + expanded("test"):
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement.name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pinned[name], prereleases=True), f"{name}=={pinned[name]}"


def test_constraints_are_sorted_as_pip_freeze_writes_them():
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[^\s=]+", line) for line in lines)
    assert lines == sorted(lines, key=lambda line: line.partition("==")[0].lower())
