"""Schema patterns mean what they mean to the tool's client, a JavaScript engine reading
``new RegExp(pattern, "u")``, and run in linear time: the gateway's reading is checked against Node on a
shared table (``ecmascript_patterns.json``, evaluated by ``ecmascript_patterns.mjs``) and on generated
patterns; what needs backtracking (or is too large to match quickly) is refused when asked."""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elicitation_gateway.conversion.patterns import (
    MAX_PATTERN_LENGTH,
    MAX_PROGRAM_SIZE,
    MAX_WHOLE_PROGRAM_SIZE,
    PatternError,
    compile_pattern,
    matches,
    pattern_shape,
)

HERE = Path(__file__).parent
TABLE = HERE / "ecmascript_patterns.json"
SCRIPT = HERE / "ecmascript_patterns.mjs"


def node_binary() -> str:
    """Node, or skip (fail under ``CI=true``: CI must run every test)."""
    node = shutil.which("node")
    if node is None:
        message = "node is not installed: the pattern tests compare the gateway with a JavaScript engine"
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(message)
        pytest.skip(message)
    return node


def in_javascript(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What Node makes of each row's pattern and text, in one call."""
    with tempfile.TemporaryDirectory() as directory:
        table = Path(directory) / "table.json"
        table.write_text(json.dumps(rows), encoding="utf-8")
        done = subprocess.run(
            [node_binary(), str(SCRIPT), str(table)], capture_output=True, text=True, check=True, timeout=60
        )
    results = json.loads(done.stdout)
    assert len(results) == len(rows)
    return results


def in_gateway(pattern: str, text: str) -> bool | str:
    """``True``/``False`` for a match, else ``"invalid"`` (not ECMAScript) or ``"refused"`` (cannot run)."""
    try:
        return matches(pattern, text)
    except PatternError as error:
        return "invalid" if error.invalid else "refused"


def test_the_table_reads_as_javascript_reads_it():
    """Every row: Node gives the expected answer (``refused`` rows are valid JavaScript), and so does the
    gateway."""
    rows = json.loads(TABLE.read_text(encoding="utf-8"))
    javascript = in_javascript(rows)
    wrong = []
    for row, js in zip(rows, javascript, strict=True):
        expect = row["expect"]
        node_says = js["match"] if js["valid"] else "invalid"
        node_agrees = js["valid"] if expect == "refused" else node_says == expect
        gateway_says = in_gateway(row["pattern"], row["text"])
        if not node_agrees or gateway_says != expect:
            wrong.append((row["pattern"], row["text"], expect, node_says, gateway_says))
    assert not wrong, "(pattern, text, expected, node, gateway):\n" + "\n".join(map(repr, wrong))


def test_the_table_holds_the_cases_that_told_re2_and_javascript_apart():
    rows = {
        (row["pattern"], row["text"]): row["expect"] for row in json.loads(TABLE.read_text(encoding="utf-8"))
    }
    for text in ("a\vb", "a\ufeffb"):
        assert rows[(r"^\S+$", text)] is False
    for text in ("a\rb", "a\u2028b"):
        assert rows[(r"^.+$", text)] is False
    for pattern in (
        r"(?i)abc",
        r"\Qa.b\E",
        "[[:alpha:]]",
        r"\Aabc",
        r"abc\z",
        r"\x{41}",
        r"(?P<n>a)",
        r"\p{Greek}",
    ):
        assert rows[(pattern, "a")] == "invalid"
    assert rows[("[^]", "\n")] is True
    assert rows[(r"\cA", "\x01")] is True


PIECES = [
    "a", "b", "A", ".", r"\s", r"\S", r"\d", r"\w", r"\W", r"\b", r"\B", "^", "$", "[^]", "[]",
    "[a-c]", "[^a]", r"[\s\d]", r"[^\S]", "*", "+", "?", "{2}", "{1,3}", "|", "(", ")", "(?:", "(?<n>",
    r"\u2028", r"\u{1F600}", "\u00e9", "\U0001f600", " ", r"\cJ", r"\p{Nd}", r"\p{Script=Greek}",
    r"\P{Nd}", "[", "]", "{", "}", r"\-", r"\.", r"\x41", r"\ufeff", r"\v", r"\0", "-", r"\k<n>", "(?=",
    r"\1",
]  # fmt: skip
CHARACTERS = [
    *"ab AB1_-.\t\n\r\v\f",
    "\u00a0",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\u0085",
    "\u00e9",
    "\U0001f600",
    "\u03b1",
]
patterns = st.lists(st.sampled_from(PIECES), max_size=7).map("".join)
texts = st.text(alphabet=st.sampled_from(CHARACTERS), max_size=8)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(patterns, texts), min_size=100, max_size=200))
def test_generated_patterns_read_as_javascript_reads_them(pairs):
    rows = [{"pattern": pattern, "text": text} for pattern, text in pairs]
    for (pattern, text), js in zip(pairs, in_javascript(rows), strict=True):
        gateway_says = in_gateway(pattern, text)
        if not js["valid"]:
            assert gateway_says == "invalid", (pattern, js["error"])
        elif gateway_says == "refused":  # valid, but needs backtracking or is too large to run
            with pytest.raises(PatternError, match=r"backtracking|too large"):
                compile_pattern(pattern)
        else:
            assert gateway_says == js["match"], (pattern, text)


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
        (r"(unclosed", "is not valid ECMAScript: a ( that is never closed"),
        (r"a{2,1}", "is not valid ECMAScript: the quantifier {2,1} counts down"),
        (r"(?i)abc", "inline flags such as (?i) are not ECMAScript"),
        (r"(?P<n>a)", "ECMAScript writes (?<name>…)"),
        (r"\p{Greek}", r"a script is written \p{Script=Greek}"),
        (r"\x{41}", r"\x takes exactly two hex digits"),
        ("[[:alpha:]]", "POSIX classes"),
        (r"\2(a)", r"\2 refers to no group"),
        (r"(.*){99}", "too large"),
        (r"\p{L}{1000}", "too large"),
        (r"a{1001}", "at most 1000 repetitions"),
        (r"\p{Alphabetic}", "cannot run"),
        ("a" * (MAX_PATTERN_LENGTH + 1), f"at most {MAX_PATTERN_LENGTH}"),
    ],
)
def test_patterns_that_are_not_ecmascript_or_cannot_run_in_bounded_time_are_refused(pattern, says):
    with pytest.raises(PatternError) as refused:
        compile_pattern(pattern)
    assert says in str(refused.value)


def test_the_largest_accepted_pattern_is_within_the_program_size():
    assert compile_pattern(r"(.*){35}").programsize <= MAX_PROGRAM_SIZE


@pytest.mark.parametrize(
    "pattern", [r"^.{1,40}$", r"^.{1,100}$", r"^.{0,1000}$", r"^\S{1,100}$", r"^(.{1,50}\s){0,19}.{1,50}$"]
)
def test_a_long_pattern_whose_matches_are_the_whole_text_of_a_bounded_length_is_accepted(pattern):
    """Common length checks: over MAX_PROGRAM_SIZE once compiled for UTF-8, but matching them stops
    once their longest match is read."""
    compiled = compile_pattern(pattern)
    assert MAX_PROGRAM_SIZE < compiled.programsize <= MAX_WHOLE_PROGRAM_SIZE
    assert compiled.search("x" * 40) is not None


@pytest.mark.parametrize(
    "pattern", [r".{1,100}", r"^.{1,100}", r".{1,100}$", r"^.{1,100}x*$", r"(a|.){0,200}b$"]
)
def test_a_long_pattern_free_to_match_anywhere_or_of_any_length_is_refused(pattern):
    with pytest.raises(PatternError, match=f"at most {MAX_PROGRAM_SIZE};"):
        compile_pattern(pattern)


def test_a_whole_pattern_of_a_bounded_length_is_refused_past_its_own_limit():
    with pytest.raises(PatternError, match=f"at most {MAX_WHOLE_PROGRAM_SIZE}\\)"):
        compile_pattern(r"^(.{0,700}x|.{0,700}y)$")


@pytest.mark.parametrize(
    ("pattern", "matchable", "min_length", "max_length", "whole"),
    [
        ("[]", False, 1, 1, False),
        (r"[^\s\S]+", False, 0, 0, False),
        ("a$b", False, 2, 2, False),
        ("a^", False, 1, 1, False),
        (r"^$x", False, 1, 1, False),
        ("(?:a|[])b", True, 2, 2, False),
        ("^a{2,5}$", True, 2, 5, True),
        ("^(?:a|bc)*$", True, 0, None, True),
        ("^a|b$", True, 1, 1, False),
        ("(?:^a)*$", True, 0, None, False),
        (r"^\d{3}-\d{4}", True, 8, 8, False),
        ("[]*", True, 0, 0, False),
    ],
)
def test_the_shape_of_a_pattern_is_what_every_match_has_in_common(
    pattern, matchable, min_length, max_length, whole
):
    found = pattern_shape(pattern)
    assert (found.matchable, found.min_length, found.max_length, found.whole) == (
        matchable,
        min_length,
        max_length,
        whole,
    )


@given(patterns, texts)
def test_a_match_has_the_shape_of_its_pattern(pattern, text):
    """The shape is sound: a text that holds a match never contradicts it."""
    try:
        compiled = compile_pattern(pattern)
    except PatternError:
        return
    found = pattern_shape(pattern)
    match = compiled.search(text)
    if match is None:
        return
    assert found.matchable
    assert len(text) >= found.min_length
    if found.whole:
        assert match.group(0) == text
        assert found.max_length is None or len(text) <= found.max_length


@given(st.text(max_size=60))
def test_any_text_compiles_or_is_refused_with_a_reason(source):
    try:
        compiled = compile_pattern(source)
    except PatternError as error:
        reason = str(error)
    else:
        reason = ""
        found = pattern_shape(source)
        bounded_whole = found.whole and found.max_length is not None
        assert compiled.programsize <= (MAX_WHOLE_PROGRAM_SIZE if bounded_whole else MAX_PROGRAM_SIZE)
        compiled.search("some answer text")
    assert reason or compiled
