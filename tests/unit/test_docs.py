"""The documentation says what the code does: docs/settings.md is generated from the ``Settings`` model
and up to date, every relative link in the README and docs/ leads somewhere, and nothing in the
repository points outside it."""

import ast
import functools
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote

import pytest

from elicitation_gateway.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]


@functools.cache
def settings_doc() -> ModuleType:
    """scripts/settings_doc.py, imported from its file (scripts/ is not a package)."""
    path = ROOT / "scripts" / "settings_doc.py"
    spec = importlib.util.spec_from_file_location("settings_doc", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def environment_names() -> list[str]:
    """Every environment variable that sets a setting (aliases such as OPENCODE_SERVER_PASSWORD too)."""
    generator = settings_doc()
    return [
        name
        for field_name, field in Settings.model_fields.items()
        for name in generator.environment_names(field_name, field)
    ]


# ---------------------------------------------------------------------------------------------------
# docs/settings.md


def test_settings_page_is_up_to_date():
    rendered = settings_doc().render()
    current = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert current == rendered, "docs/settings.md is stale: run .venv/bin/python scripts/settings_doc.py"


def test_settings_page_names_every_setting_with_its_default_and_flag():
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line for line in page.splitlines() if line.startswith("| `")}
    for name, field in Settings.model_fields.items():
        preferred = settings_doc().environment_names(name, field)[0]
        row = next((line for cell, line in rows.items() if cell.startswith(f"`{preferred}`")), None)
        assert row is not None, f"{preferred} is not in docs/settings.md"
        assert (field.description or "") in row
    assert "`OPENCODE_SERVER_PASSWORD` (or `GATEWAY_ANSWERER_PASSWORD`)" in page
    for flag in ("--host", "--port", "--store"):
        assert f"`{flag}`" in page


def test_the_generator_check_mode_fails_on_a_stale_page(tmp_path, monkeypatch, capsys):
    generator = settings_doc()
    stale = tmp_path / "settings.md"
    stale.write_text(generator.render().replace("GATEWAY_HOST", "GATEWAY_HOSTNAME"), encoding="utf-8")
    monkeypatch.setattr(generator, "DOC", stale)
    monkeypatch.setattr(generator, "ROOT", tmp_path)
    assert generator.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0


def test_the_generator_runs_as_a_script():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "settings_doc.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT / "docs",
    )
    assert done.returncode == 0, done.stderr


# ---------------------------------------------------------------------------------------------------
# Links

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes for a page's headings."""
    found: set[str] = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if not (heading := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower().replace("`", "")).replace(" ", "-")
        candidate, count = slug, 1
        while candidate in found:
            candidate, count = f"{slug}-{count}", count + 1
        found.add(candidate)
    return found


def relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    links = [a or b for a, b in LINK.findall(text)]
    return [link for link in links if not re.match(r"[a-z][a-z0-9+.-]*:", link)]


def test_pages_have_relative_links():
    assert relative_links(ROOT / "README.md"), "the README's docs map has no links"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path):
    broken = []
    for link in relative_links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / unquote(target)).resolve() if target else page
        if not path.exists():
            broken.append(f"{link}: no file {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        elif not path.is_relative_to(ROOT):
            broken.append(f"{link}: outside the repository")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{link}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, f"broken links in {page.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_the_readme_gives_the_commands_and_stays_short():
    for command in ("make run", "make test", "make test-quick"):
        assert command in README
    assert len(README.encode()) < 10_000, "the README is a five-minute read: move details to docs/"


# ---------------------------------------------------------------------------------------------------
# Nothing outside the repository

OUTSIDE = ("..".strip() + "/shared", "/" + "work/")
SKIPPED_DIRECTORIES = {".git", ".venv", "node_modules", "__pycache__", ".pytest_cache", ".ruff_cache"}


def repository_files() -> list[Path]:
    """The files a clone holds: tracked and new ones, not what .gitignore leaves out."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
        files = [ROOT / name for name in listed.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk it
        files = [
            path
            for path in ROOT.rglob("*")
            if path.is_file() and not SKIPPED_DIRECTORIES & set(path.relative_to(ROOT).parts)
        ]
    return [path for path in files if path.is_file()]


def test_no_file_names_a_path_outside_the_repository():
    offending = []
    for path in repository_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # images and other binary files
        for number, line in enumerate(text.splitlines(), 1):
            if any(outside in line for outside in OUTSIDE):
                offending.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not offending, "files name paths outside the repository:\n" + "\n".join(offending)


def test_the_readme_says_when_a_question_expires_and_how_to_change_it():
    minutes = Settings.model_fields["timeout"].default / 60
    assert f"expires after {minutes:g} minutes" in README
    assert "/elicit?timeout=" in README
    assert "`GATEWAY_TIMEOUT`" in README


def test_the_architecture_page_names_every_module():
    """docs/architecture.md's layout is where a newcomer finds a concept: every module of the package
    is named there (by its path, or its folder's), but a package's ``__init__.py`` that holds only
    its docstring."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    package = ROOT / "elicitation_gateway"
    missing = []
    for module in sorted(package.rglob("*.py")):
        body = ast.parse(module.read_text()).body
        if module.name == "__init__.py" and len(body) == 1 and isinstance(body[0], ast.Expr):
            continue
        path = module.relative_to(package).as_posix()
        folders = [f"{'/'.join(module.relative_to(package).parts[:n])}/" for n in range(1, len(module.parts))]
        if f"`{path}`" not in page and not any(f"`{folder}`" in page for folder in folders):
            missing.append(path)
    assert not missing, f"docs/architecture.md names no row for {missing}"
