"""The README documents what the code does."""

from pathlib import Path

from app.settings import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_lists_every_setting():
    for name in Settings.model_fields:
        assert f"`GATEWAY_{name.upper()}`" in README, f"GATEWAY_{name.upper()} is not in the README"


def test_readme_gives_the_two_commands():
    assert "make run" in README
    assert "make test" in README
