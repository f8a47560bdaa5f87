"""The published OpenCode SDK (``@opencode-ai/sdk``, pinned in tests/e2e/node/package.json) against a
running gateway: the Node test in tests/e2e/node/ runs with node's own test runner, and must pass.

``make test`` installs the SDK (``npm ci --prefix tests/e2e/node``). Under CI a missing Node or SDK
fails this test rather than skipping it."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

NODE_TESTS = Path(__file__).resolve().parent / "node"
SDK = NODE_TESTS / "node_modules" / "@opencode-ai" / "sdk"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _node_or_explain() -> str:
    node = shutil.which("node")
    problem = None
    if node is None:
        problem = "node is not installed; the OpenCode SDK test needs Node 20 or newer"
    elif not SDK.is_dir():
        problem = f"the OpenCode SDK is not installed in {NODE_TESTS}: run `npm ci --prefix tests/e2e/node`"
    if problem:
        if _in_ci():
            pytest.fail(problem)
        pytest.skip(problem)
    assert node is not None
    return node


def run_node_tests(script: str, gateway_url: str) -> tuple[int, int, str]:
    """Run one of tests/e2e/node's files against the gateway: how many passed and failed, and the report."""
    node = _node_or_explain()
    completed = subprocess.run(
        [node, "--test", "--test-reporter=tap", script],
        cwd=NODE_TESTS,
        env={**os.environ, "GATEWAY_URL": gateway_url},
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    report = completed.stdout + completed.stderr
    assert completed.returncode == 0, report
    passed = re.search(r"^# pass (\d+)$", completed.stdout, re.MULTILINE)
    failed = re.search(r"^# fail (\d+)$", completed.stdout, re.MULTILINE)
    assert passed, report
    assert failed, report
    return int(passed.group(1)), int(failed.group(1)), report


@pytest.mark.timeout(120)
def test_the_opencode_sdk_subscribes_lists_replies_rejects_and_replays(server):
    passed, failed, report = run_node_tests("opencode-sdk.test.js", server.url)
    assert passed >= 4, report
    assert failed == 0, report


PEOPLE = """
[people.alice]
password = "alice-pass"

[people.carol]
password = "carol-pass"
"""


@pytest.mark.timeout(120)
def test_the_opencode_sdk_signs_in_as_each_person(make_server, tmp_path):
    """With GATEWAY_PEOPLE, the SDK signs in with a person's own login (HTTP Basic, as on a
    password-protected OpenCode server) and sees, streams and answers that person's questions alone."""
    people = tmp_path / "people.toml"
    people.write_text(PEOPLE)
    server = make_server(people=people)
    passed, failed, report = run_node_tests("opencode-sdk-people.test.js", server.url)
    assert passed == 3, report
    assert failed == 0, report
