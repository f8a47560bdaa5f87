"""The public API of ``elicitation_gateway.client`` is declared, and importing it stays light.

Tools import the client into their own processes: what they may rely on is ``__all__`` (checked
against what the module defines, as httpx's ``tests/test_exported_members.py`` does), and importing it
must not drag in the server's stack (Starlette, uvicorn, Redis, Prometheus, Textual).
"""

import ast
import inspect
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import elicitation_gateway
from elicitation_gateway import client

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(elicitation_gateway.__file__).resolve().parent
CLIENT_SOURCE = Path(client.__file__).resolve()

HEAVY = (
    "starlette",
    "uvicorn",
    "sse_starlette",
    "redis",
    "prometheus_client",
    "textual",
    "elicitation_gateway.server",
    "mcp",  # the whole SDK (server, transports); the client needs only the types, from mcp_types
)
"""Packages a tool that imports the client must not pay for."""


def top_level_bindings(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names the module's top level defines (def, class, assignment) and those it imports."""
    defined: set[str] = set()
    imported: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    defined.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, ast.Import | ast.ImportFrom):
                imported.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            elif isinstance(node, ast.If | ast.Try | ast.With):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return defined, imported


def client_bindings() -> tuple[set[str], set[str]]:
    return top_level_bindings(ast.parse(CLIENT_SOURCE.read_text()))


def modules_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after ``statement`` that it did not hold before."""
    code = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        f"{statement}\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def is_within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# ---------------------------------------------------------------------------------------------------
# __all__


def test_all_lists_exactly_the_public_names_the_client_defines():
    """Every public name defined in the module (not imported) is exported, and nothing else is."""
    defined, _ = client_bindings()
    assert len(client.__all__) == len(set(client.__all__)), "a name is listed twice"
    assert set(client.__all__) == {name for name in defined if not name.startswith("_")}


def test_every_exported_name_exists_and_belongs_to_the_client():
    for name in client.__all__:
        assert hasattr(client, name), f"__all__ names {name}, which the module does not have"
        value = getattr(client, name)
        if isinstance(value, type) or inspect.isfunction(value):  # not a type alias such as OnTimeout
            assert value.__module__ == client.__name__, f"{name} comes from {value.__module__}"


def test_no_public_name_appears_from_elsewhere():
    """What the module holds besides its definitions came in by import (and is not its API)."""
    defined, imported = client_bindings()
    public = {name for name in vars(client) if not name.startswith("_")}
    assert public - defined - imported == set()


def names_imported_from_the_client(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a README block that is not a whole program
        return set()
    return {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == client.__name__
        for alias in node.names
    }


def test_the_exports_are_what_users_and_the_package_import():
    """The documentation's examples, and the package's own modules, import only declared names."""
    wanted = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL):
            wanted |= names_imported_from_the_client(block)
    assert "GatewayClient" in wanted, "the documentation shows how to import the client"
    for module in PACKAGE.rglob("*.py"):
        wanted |= names_imported_from_the_client(module.read_text())
    assert wanted <= set(client.__all__), f"imported but not declared: {sorted(wanted - set(client.__all__))}"


def test_the_documented_names_are_exported():
    """What the documentation tells users to catch and call: the client, its errors, its URL defaults."""
    expected = {"GatewayClient", "GatewayError", "GatewayRefused", "GatewayUnavailable", "ElicitationLost"}
    expected |= {"form_params", "parse_result", "DEFAULT_URL", "default_url"}
    assert expected <= set(client.__all__)
    for error in ("GatewayRefused", "GatewayUnavailable", "ElicitationLost"):
        assert issubclass(getattr(client, error), client.GatewayError)


# ---------------------------------------------------------------------------------------------------
# Light imports


def test_importing_the_client_does_not_import_the_server_stack():
    loaded = modules_after("import elicitation_gateway.client")
    assert "elicitation_gateway.client" in loaded
    heavy = sorted(module for module in loaded if any(is_within(module, package) for package in HEAVY))
    assert heavy == []


def test_importing_the_package_imports_only_the_standard_library():
    loaded = modules_after("import elicitation_gateway")
    outside = sorted(
        module
        for module in loaded
        if not is_within(module, "elicitation_gateway")
        and module.split(".")[0] not in sys.stdlib_module_names
    )
    assert outside == []


# ---------------------------------------------------------------------------------------------------
# Typing marker


def test_the_package_is_marked_typed_and_ships_the_marker():
    """PEP 561: type checkers read the package's hints only if ``py.typed`` is installed with it."""
    assert (PACKAGE / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shipped = pyproject["tool"]["setuptools"]["package-data"]["elicitation_gateway"]
    assert "py.typed" in shipped
    assert "server/static/*" in shipped
