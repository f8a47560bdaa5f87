"""The README documents what the code does."""

from pathlib import Path

from pydantic import AliasChoices

from app.settings import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def environment_names() -> list[str]:
    names = []
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names.append(alias.choices[0] if isinstance(alias, AliasChoices) else f"GATEWAY_{name.upper()}")
    return names


def test_readme_lists_every_setting():
    for name in environment_names():
        assert f"`{name}`" in README, f"{name} is not in the README"


def test_readme_gives_the_two_commands():
    assert "make run" in README
    assert "make test" in README
