"""A string property's ``pattern``: an ECMA-262 regular expression, matched in linear time.

Python's ``re`` backtracks: ``^(a+)+$`` against 27 characters holds the event loop for seconds. The
gateway runs patterns with RE2 (``google-re2``), whose matching time grows with the text's length
times the pattern's size, never exponentially, and bounds both: a pattern is compiled when it is asked
(refused if it does not compile, needs backtracking, or is larger than ``MAX_PROGRAM_SIZE``), and
answers are at most ``GATEWAY_MAX_TEXT_LENGTH`` characters.

The accepted subset of ECMA-262 is what RE2 runs: everything but backreferences (``\\1``,
``\\k<name>``) and lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``). ``\\uXXXX`` and ``\\u{X…}``
escapes are read as ECMA-262 reads them. Matching is a search (JSON Schema patterns are not
anchored); ``$`` matches only at the end (as in ECMA-262, unlike ``re``); ``\\d``, ``\\w`` and ``\\b``
are ASCII, as in ECMA-262; ``\\s`` is ASCII whitespace (ECMA-262 also counts Unicode spaces).
"""

import re

import re2

MAX_PATTERN_LENGTH = 1000
"""Characters of a pattern's source."""
MAX_PROGRAM_SIZE = 1000
"""RE2 instructions of a compiled pattern: matching an answer costs about its length times this, a few
milliseconds at most for the longest answer."""
MAX_MEMORY = 1 << 20
"""Bytes RE2 may use for one compiled pattern."""

_UNICODE_ESCAPE = re.compile(r"\\u\{([0-9A-Fa-f]{1,6})\}|\\u([0-9A-Fa-f]{4})|\\\\")
_BACKTRACKING = (
    (re.compile(r"\(\?<?[=!]"), "lookaround ((?=, (?!, (?<=, (?<!)"),
    (re.compile(r"(?<!\\)(?:\\\\)*\\([1-9]|k<)"), "a backreference (\\1, \\k<name>)"),
)


class PatternError(ValueError):
    """A pattern the gateway cannot run in bounded time; the message says why."""


def _options() -> "re2.Options":
    options = re2.Options()
    options.max_mem = MAX_MEMORY
    options.log_errors = False  # a refused pattern is the tool's error, told to the tool, not logged
    return options


_OPTIONS = _options()


def compile_pattern(source: str) -> "re2._Regexp":
    """The compiled pattern; raises :class:`PatternError` naming what makes it unusable."""
    if len(source) > MAX_PATTERN_LENGTH:
        raise PatternError(f"is {len(source)} characters long; at most {MAX_PATTERN_LENGTH} are allowed")
    translated = _UNICODE_ESCAPE.sub(_rewrite_escape, source)
    try:
        compiled = re2.compile(translated, _OPTIONS)
    except re2.error as error:
        for found, what in _BACKTRACKING:
            if found.search(source):
                raise PatternError(
                    f"uses {what}, which needs backtracking; the gateway matches patterns in linear "
                    "time (RE2) and cannot run it"
                ) from None
        reason = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
        raise PatternError(f"is not a regular expression the gateway can run: {reason}") from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise PatternError(
            f"is too large to match in bounded time ({compiled.programsize} steps once compiled; at most "
            f"{MAX_PROGRAM_SIZE})"
        )
    return compiled


def matches(source: str, text: str) -> bool:
    """Whether ``text`` holds a match of the pattern ``source`` (checked when it was asked)."""
    return compile_pattern(source).search(text) is not None


def _rewrite_escape(found: re.Match[str]) -> str:
    """ECMA-262's ``\\uXXXX`` and ``\\u{X…}`` as RE2's ``\\x{…}``; an escaped backslash stays as it is."""
    digits = found.group(1) or found.group(2)
    return found.group(0) if digits is None else "\\x{" + digits + "}"
