"""Schema patterns run in linear time: the accepted subset of ECMA-262 matches as a JavaScript engine
matches it, and what needs backtracking (or is too large to match quickly) is refused when asked."""

import json
import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitation_gateway.conversion.patterns import (
    MAX_PATTERN_LENGTH,
    MAX_PROGRAM_SIZE,
    PatternError,
    compile_pattern,
    matches,
)

# (pattern, text): what a JavaScript engine answers is the expected result.
CASES = [
    ("^[a-z]+$", "hello"),
    ("^[a-z]+$", "Hello"),
    ("^[a-z]+$", "abc\n"),  # $ is the end of the text in ECMA-262 (re's $ also matches before a final \n)
    ("^abc$", "abc\n"),
    (r"\d{3}-\d{4}", "call 555-1234 now"),
    (r"\d", "\u0663"),  # \d is ASCII in ECMA-262: an Arabic-Indic three is not a digit
    (r"^\w+$", "caf\u00e9"),
    (r"\bcat\b", "a cat sat"),
    (r"\bcat\b", "concatenate"),
    (r"^\u00e9+$", "\u00e9\u00e9"),
    (r"^[\u0041-\u005A]+$", "HELLO"),
    (r"^[\u0041-\u005A]+$", "hello"),
    (r"^\u{1F600}$", "\U0001f600"),
    (r"^.$", "\U0001f600"),  # one code point with the u flag
    (r"^(?<year>\d{4})-(?<month>\d{2})$", "2026-12"),
    (r"^(a+)+$", "a" * 18 + "!"),  # short: a JavaScript engine backtracks too
    (r"^(a|aa)+$", "a" * 18 + "b"),
    (r"colou?r", "The color"),
    (r"^[^@\s]+@[^@\s]+$", "a@b"),
    (r"\\u0041", "\\u0041"),  # an escaped backslash before u is not a \u escape
    (r"^\s+$", " \t\n"),
    (r"^.*$", "line one"),
    (r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{1,30}$", "GB82WEST12345698765432"),
    (r"^https?://", "https://example.com"),
]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_accepted_subset_matches_as_javascript_does():
    """Ground truth from a real ECMA-262 engine (Node.js, with the u flag as JSON Schema asks)."""
    script = (
        "const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "process.stdout.write(JSON.stringify(cases.map(([p, t]) => new RegExp(p, 'u').test(t))));"
    )
    node = subprocess.run(
        ["node", "-e", script], input=json.dumps(CASES), capture_output=True, text=True, check=True
    )
    expected = json.loads(node.stdout)
    got = [matches(pattern, text) for pattern, text in CASES]
    assert got == expected, [case for case, a, b in zip(CASES, got, expected, strict=True) if a != b]


def test_a_pattern_that_backtracks_in_re_runs_in_linear_time():
    # With Python's re this takes seconds and doubles with each character; here it is immediate.
    assert not matches(r"^(a+)+$", "a" * 100_000 + "!")


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        (r"(a)\1", "backreference"),
        (r"(?<x>a)\k<x>", "backreference"),
        (r"foo(?=bar)", "lookaround"),
        (r"foo(?!bar)", "lookaround"),
        (r"(?<=a)b", "lookaround"),
        (r"(?<!a)b", "lookaround"),
        (r"(unclosed", "not a regular expression the gateway can run"),
        (r"a{2,1}", "not a regular expression the gateway can run"),
        (r"(.*){1000}", "too large"),
        (r"\p{L}{1000}", "not a regular expression the gateway can run"),
        ("a" * (MAX_PATTERN_LENGTH + 1), f"at most {MAX_PATTERN_LENGTH}"),
    ],
)
def test_patterns_that_cannot_run_in_bounded_time_are_refused(pattern, says):
    with pytest.raises(PatternError) as refused:
        compile_pattern(pattern)
    assert says in str(refused.value)


def test_the_largest_accepted_pattern_is_within_the_program_size():
    assert compile_pattern(r"(.*){99}").programsize <= MAX_PROGRAM_SIZE


@given(st.text(max_size=60))
def test_any_text_compiles_or_is_refused_with_a_reason(source):
    try:
        compiled = compile_pattern(source)
    except PatternError as error:
        reason = str(error)
    else:
        reason = ""
        assert compiled.programsize <= MAX_PROGRAM_SIZE
        compiled.search("some answer text")
    assert reason or compiled
