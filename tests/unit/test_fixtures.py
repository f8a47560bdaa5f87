"""The SDK-made fixtures in tests/fixtures/schemas are what the installed SDKs send today.

``tests/fixtures/capture.py`` runs each SDK in process and compares what its client receives with the
files. Here it runs in check mode for the installed ``mcp`` (and FastMCP when it is installed): when a
new SDK version sends something else, this fails, naming the file, instead of the tests going on
with a request no tool sends any more. ``.venv/bin/python tests/fixtures/capture.py`` rewrites them.
"""

import json
import shutil
from pathlib import Path

from tests.fixtures import capture


def report(found: list[capture.Difference]) -> str:
    """Each differing file with how it differs, and the command that rewrites them."""
    named = "; ".join(f"{difference.name}: {difference.reason}" for difference in found)
    return f"{named} (regenerate with .venv/bin/python tests/fixtures/capture.py)"


async def test_mcp_fixtures_are_what_the_installed_mcp_sends():
    assert capture.series_mismatch("mcp", capture.MCP_SERIES) is None
    fixtures = await capture.capture_mcp()
    assert sorted(fixture.name for fixture in fixtures) == sorted(capture.MCP_CASES)
    found = capture.differences(fixtures)
    assert not found, report(found)


async def test_fastmcp_fixtures_are_what_the_installed_fastmcp_sends():
    assert capture.series_mismatch("fastmcp", capture.FASTMCP_SERIES) is None
    fixtures = await capture.capture_fastmcp()
    assert sorted(fixture.name for fixture in fixtures) == sorted(
        map(capture.fastmcp_file, capture.FASTMCP_CASES)
    )
    found = capture.differences(fixtures)
    assert not found, report(found)


def test_every_fixture_is_either_generated_or_says_why_not():
    """A new fixture gets a case in capture.py, or a reason in its LEFT."""
    generated = set(capture.MCP_CASES) | {capture.fastmcp_file(case) for case in capture.FASTMCP_CASES}
    left = capture.left_files(generated)
    assert [name for name, reason in left if reason.startswith("nothing generates")] == []
    assert {name for name, _ in left} >= {
        "mcp-1.30-ctx-elicit-booking.json",
        "spec-2025-11-25-all-kinds.json",
    }


def test_check_mode_passes_on_the_committed_files(capsys):
    assert capture.main(["--check"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "left     mcp-1.30-ctx-elicit-booking.json: mcp 1.x cannot be installed beside mcp 2.x" in out


async def test_check_mode_names_each_file_that_differs(tmp_path: Path):
    """The comparison is not vacuous: changed params, another source, another key order and a missing
    file are each reported by name."""
    fixtures = await capture.capture_mcp()
    for fixture in fixtures:
        shutil.copy(capture.SCHEMAS / fixture.name, tmp_path / fixture.name)
    assert capture.differences(fixtures, tmp_path) == []
    booking, choices = (tmp_path / name for name in capture.MCP_CASES)

    on_file = json.loads(booking.read_text())
    on_file["params"]["requestedSchema"]["properties"]["guests"]["maximum"] = 20
    booking.write_text(json.dumps(on_file, indent=2))
    on_file = json.loads(choices.read_text())
    on_file["source"] = on_file["source"].replace("mcp ", "mcp 0.0.1 was ", 1)
    choices.write_text(json.dumps(on_file, indent=2))
    assert [(d.name, d.reason) for d in capture.differences(fixtures, tmp_path)] == [
        (booking.name, "the SDK sends other params"),
        (choices.name, f"source should read {fixtures[1].source!r}"),
    ]

    booking.write_text(json.dumps(json.loads(fixtures[0].text()), indent=2, sort_keys=True))
    choices.unlink()
    assert [(d.name, d.reason) for d in capture.differences(fixtures, tmp_path)] == [
        (booking.name, "the same params, written otherwise (key order or layout)"),
        (choices.name, "missing"),
    ]


def test_a_file_named_after_another_sdk_series_is_not_regenerated_under_that_name(monkeypatch):
    """mcp 2.4 must not write its requests into mcp-2.3-*.json: the check reports it instead."""
    monkeypatch.setattr(capture.importlib.metadata, "version", lambda package: "2.4.0")
    assert "mcp 2.4.0 is installed" in (capture.series_mismatch("mcp", capture.MCP_SERIES) or "")
    monkeypatch.setattr(capture.importlib.metadata, "version", lambda package: "2.3.7")
    assert capture.series_mismatch("mcp", capture.MCP_SERIES) is None
