"""Every package the gateway imports is one its own ``pyproject.toml`` declares: none arrives only
because another dependency happens to bring it."""

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "elicitation_gateway"


def imported_top_levels() -> dict[str, set[str]]:
    """Each top-level module imported anywhere in the package, with the files that import it."""
    found: dict[str, set[str]] = {}
    for module in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(module.relative_to(ROOT).as_posix())
    return found


def declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra, listed in project["optional-dependencies"].items():
        if extra != "test":
            requirements += listed
    return {normalise(re.split(r"[\s\[<>=;!~]", requirement, maxsplit=1)[0]) for requirement in requirements}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_third_party_import_is_declared():
    distributions = packages_distributions()
    declared = declared_distributions()
    undeclared = {}
    for name, files in imported_top_levels().items():
        if name in sys.stdlib_module_names or name == "elicitation_gateway" or name == "__future__":
            continue
        owners = {normalise(owner) for owner in distributions.get(name, [])}
        assert owners, f"{name} (imported by {sorted(files)}) is not installed"
        if not owners & declared:
            undeclared[name] = sorted(files)
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
