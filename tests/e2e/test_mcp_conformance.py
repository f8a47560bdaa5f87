"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned with the Node 22 it
needs in tests/e2e/conformance/) against ``/mcp`` of a running gateway.

The suite's server scenarios are written for its own fixture server ("everything-server"): most call
tools, prompts and resources named ``test_*`` that an MCP server offers only to be tested. Those do not
apply to the gateway, which offers one tool (``question``), no prompts and no resources, and each is
listed below with the reason. Every other scenario runs in each protocol era the gateway speaks and
the suite lists it for (2025-11-25, the last with ``initialize`` and sessions; 2026-07-28, stateless)
and must pass: no failed check, at least one check that passed, and no error in the gateway's log.
The listing test holds the two lists against ``conformance list``, so a scenario the suite adds, or an
era it adds to a scenario, fails it until someone decides whether it applies.

``make test`` installs the suite (``npm ci --prefix tests/e2e/conformance``). Locally a missing Node 22
or suite skips these tests, with the reason; under ``CI=true`` it fails them.
"""

import functools
import json
import logging
import re
import subprocess
from pathlib import Path

import pytest

from tests.e2e.opencode_server import unavailable

PACKAGE = Path(__file__).resolve().parent / "conformance"
NODE = PACKAGE / "node_modules" / "node" / "bin" / "node"
SUITE = PACKAGE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

ERAS = ("2025-11-25", "2026-07-28")
"""The protocol revisions the gateway's clients speak (the ``mcp`` 2.3 client negotiates both). The suite
also lists older revisions for many scenarios; they are not run."""

# The scenarios that apply, each run in the eras named, with the checks that may fail and why.
RUN: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "server-initialize": (("2025-11-25",), {}),
    "server-stateless": (
        ("2026-07-28",),
        {
            "sep-2575-server-rejects-undeclared-capability": "calls the fixture tool test_missing_capability",
            "sep-2575-missing-capability-http-400": "calls the fixture tool test_missing_capability",
            "sep-2575-http-server-no-independent-requests-on-stream": (
                "calls the fixture tool test_streaming_elicitation"
            ),
            "sep-2575-server-no-log-without-loglevel": "calls the fixture tool test_logging_tool",
        },
    ),
    "ping": (("2025-11-25",), {}),
    "tools-list": (ERAS, {}),
    "server-sse-multiple-streams": (("2026-07-28",), {}),  # concurrent POSTs, each its own stream
    "resources-list": (ERAS, {}),
    "sep-2164-resource-not-found": (("2026-07-28",), {}),  # -32602 with data.uri, no empty contents
    "prompts-list": (ERAS, {}),
    "dns-rebinding-protection": (ERAS, {}),
    "caching": (("2026-07-28",), {}),  # the lists' cache hints (ttlMs, cacheScope)
    "http-header-validation": (("2026-07-28",), {}),  # Mcp-Method / Mcp-Name against the body
    # tools/list and prompts/list never answer with an InputRequiredResult
    "input-required-result-unsupported-methods": (("2026-07-28",), {}),
}

_FIXTURE_TOOL = "calls the suite's fixture tool {}; the gateway's one tool is question"
_FIXTURE_PROMPT = "gets the suite's fixture prompt {}; the gateway offers no prompts"
_FIXTURE_RESOURCE = "reads the suite's fixture resource {}; the gateway offers no resources"
_NO_SESSIONS = (
    "needs an Mcp-Session-Id: the gateway serves /mcp stateless, and the scenario reports that it has "
    "nothing to check"
)

# The scenarios (or scenario@era) that do not apply to the gateway, and why.
NOT_RUN: dict[str, str] = {
    "server-session-lifecycle": _NO_SESSIONS,
    "server-sse-multiple-streams@2025-11-25": _NO_SESSIONS,
    "server-sse-polling": _FIXTURE_TOOL.format("test_reconnection")
    + ", and resumable streams (event ids, a session) that a stateless /mcp does not keep",
    "logging-set-level": "the gateway declares no logging capability: logging/setLevel is Method not found",
    "completion-complete": "the gateway declares no completions capability; it completes the suite's "
    "fixture prompt test_prompt_with_arguments",
    "tools-call-simple-text": _FIXTURE_TOOL.format("test_simple_text"),
    "tools-call-image": _FIXTURE_TOOL.format("test_image_content"),
    "tools-call-audio": _FIXTURE_TOOL.format("test_audio_content"),
    "tools-call-embedded-resource": _FIXTURE_TOOL.format("test_embedded_resource"),
    "tools-call-mixed-content": _FIXTURE_TOOL.format("test_multiple_content_types"),
    "tools-call-with-logging": _FIXTURE_TOOL.format("test_tool_with_logging"),
    "tools-call-error": _FIXTURE_TOOL.format("test_error_handling"),
    "tools-call-with-progress": _FIXTURE_TOOL.format("test_tool_with_progress"),
    "tools-call-sampling": _FIXTURE_TOOL.format("test_sampling"),
    "tools-call-elicitation": _FIXTURE_TOOL.format("test_elicitation"),
    "json-schema-2020-12": _FIXTURE_TOOL.format("json_schema_2020_12_tool"),
    "elicitation-sep1034-defaults": _FIXTURE_TOOL.format("test_elicitation_sep1034_defaults"),
    "elicitation-sep1330-enums": _FIXTURE_TOOL.format("test_elicitation_sep1330_enums"),
    "resources-read-text": _FIXTURE_RESOURCE.format("test://static-text"),
    "resources-read-binary": _FIXTURE_RESOURCE.format("test://static-binary"),
    "resources-templates-read": _FIXTURE_RESOURCE.format("test://template/{id}/data"),
    "resources-subscribe": _FIXTURE_RESOURCE.format("test://watched-resource"),
    "resources-unsubscribe": _FIXTURE_RESOURCE.format("test://watched-resource"),
    "prompts-get-simple": _FIXTURE_PROMPT.format("test_simple_prompt"),
    "prompts-get-with-args": _FIXTURE_PROMPT.format("test_prompt_with_arguments"),
    "prompts-get-embedded-resource": _FIXTURE_PROMPT.format("test_prompt_with_embedded_resource"),
    "prompts-get-with-image": _FIXTURE_PROMPT.format("test_prompt_with_image"),
    "http-custom-header-server-validation": "needs a tool whose input schema carries x-mcp-header "
    "annotations (SEP-2243); the question tool has none",
    **{
        f"sep-2640-skills-{name}": "the io.modelcontextprotocol/skills extension (SEP-2640), which the "
        "gateway does not offer; every check skips"
        for name in ("directory", "enumeration", "manifest")
    },
    **{
        f"tasks-{name}": "the io.modelcontextprotocol/tasks extension (SEP-2663), which the gateway does "
        "not offer; its checks call the suite's task-supporting fixture tools"
        for name in (
            "lifecycle",
            "capability-negotiation",
            "wire-fields",
            "request-state-removal",
            "mrtr-input",
            "request-headers",
            "dispatch-and-envelope",
            "status-notifications",
            "required-task-error",
            "mrtr-composition",
        )
    },
    **{
        f"input-required-result-{name}": _FIXTURE_TOOL.format(f"test_input_required_result_{tool}")
        + "; the gateway asks a person, never its MCP client, so it never returns an InputRequiredResult"
        for name, tool in (
            ("basic-elicitation", "elicitation"),
            ("basic-sampling", "sampling"),
            ("basic-list-roots", "list_roots"),
            ("request-state", "request_state"),
            ("multiple-input-requests", "multiple_inputs"),
            ("multi-round", "multi_round"),
            ("missing-input-response", "elicitation"),
            ("result-type", "elicitation"),
            ("tampered-state", "tampered_state"),
            ("capability-check", "capabilities"),
            ("ignore-extra-params", "elicitation"),
            ("validate-input", "elicitation"),
        )
    },
    "input-required-result-non-tool-request": _FIXTURE_PROMPT.format("test_input_required_result_prompt"),
}

ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")

RUNS = [(scenario, era) for scenario, (eras, _) in RUN.items() for era in eras]


@functools.cache
def suite() -> list[str]:
    """The command that runs the pinned suite on the pinned Node 22, or skip (fail under CI)."""
    install = "run `npm ci --prefix tests/e2e/conformance` (make test does)"
    if not NODE.is_file():
        unavailable(f"Node 22 (the npm package node@22) is not installed in {PACKAGE}: {install}")
    if not SUITE.is_file():
        unavailable(f"the MCP conformance suite is not installed in {PACKAGE}: {install}")
    version = subprocess.run([NODE, "--version"], capture_output=True, text=True, timeout=30, check=True)
    if not version.stdout.startswith("v22."):
        unavailable(f"{NODE} is {version.stdout.strip()}, not Node 22: {install}")
    return [str(NODE), str(SUITE)]


def listed_scenarios() -> dict[str, list[str]]:
    """``conformance list --server``: each server scenario with the revisions (or ``extension``) it is for."""
    listing = subprocess.run([*suite(), "list", "--server"], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stdout + listing.stderr
    scenarios = {
        match["name"]: match["versions"].split(",")
        for match in re.finditer(
            r"^  - (?P<name>\S+) \[(?P<versions>[^\]]*)\]$", listing.stdout, re.MULTILINE
        )
    }
    assert scenarios, f"no scenarios found in the suite's listing:\n{listing.stdout}"
    return scenarios


def eras_of(versions: list[str]) -> list[str]:
    """The eras a scenario listed for ``versions`` is run in: the gateway's, or ``extension``."""
    return [era for era in ERAS if era in versions] or (["extension"] if "extension" in versions else [])


def test_every_scenario_of_the_suite_is_run_or_said_not_to_apply():
    listed = listed_scenarios()
    pairs = {(scenario, era) for scenario, versions in listed.items() for era in eras_of(versions)}
    not_run: set[tuple[str, str]] = set()
    for key in NOT_RUN:
        scenario, _, era = key.partition("@")
        assert scenario in listed, f"{scenario} is said not to apply, and the suite no longer has it"
        not_run |= {(scenario, era)} if era else {(scenario, e) for e in eras_of(listed[scenario])}
    run = set(RUNS)
    assert not run & not_run, f"both run and said not to apply: {sorted(run & not_run)}"
    unknown = sorted(pairs - run - not_run)
    assert not unknown, f"scenarios (or eras) this test does not know: {unknown}; run them or say why not"
    gone = sorted((run | not_run) - pairs)
    assert not gone, f"scenarios (or eras) the suite no longer lists: {gone}"
    unplaced = {scenario for scenario, versions in listed.items() if not eras_of(versions)} - NOT_RUN.keys()
    assert not unplaced, f"scenarios for older revisions only, not said not to apply: {sorted(unplaced)}"


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("scenario", "era"), RUNS, ids=[f"{s}@{e}" for s, e in RUNS])
def test_the_scenario_passes(server, tmp_path, caplog, scenario, era):
    caplog.set_level(logging.WARNING)
    command = [*suite(), "server", "--url", f"{server.url}/mcp", "--scenario", scenario]
    if era != "extension":
        command += ["--spec-version", era]
    completed = subprocess.run(
        [*command, "--output-dir", str(tmp_path)], capture_output=True, text=True, timeout=150
    )
    report = ANSI_COLOUR.sub("", completed.stdout + completed.stderr)
    results = list(tmp_path.rglob("checks.json"))
    assert len(results) == 1, f"the suite wrote no results:\n{report}"
    checks = json.loads(results[0].read_text())

    may_fail = RUN[scenario][1]
    failed = {check["id"] for check in checks if check["status"] == "FAILURE"}
    assert failed <= may_fail.keys(), report
    assert failed == may_fail.keys(), (
        f"checks listed as failing now pass: {may_fail.keys() - failed}\n{report}"
    )
    passed = [c["id"] for c in checks if c["status"] == "SUCCESS" and c["id"] != "wire-schema-valid"]
    assert passed, f"no check of the scenario passed (did it skip itself?)\n{report}"
    assert completed.returncode == (1 if may_fail else 0), report
    troubles = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not troubles, [f"{r.name}: {r.getMessage()}" for r in troubles]
