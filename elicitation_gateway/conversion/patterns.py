"""A string property's ``pattern``: an ECMAScript regular expression, matched in linear time.

Python's ``re`` backtracks: ``^(a+)+$`` against 27 characters holds the event loop for seconds. The
gateway runs patterns with RE2 (``google-re2``), whose matching time grows with the text's length
times the pattern's size, never exponentially, and bounds both: a pattern is compiled when it is asked
(refused if it is not valid ECMAScript, needs backtracking, or is larger than ``MAX_PROGRAM_SIZE``,
``MAX_WHOLE_PROGRAM_SIZE`` for a pattern whose every match is the whole text, of a bounded length),
and answers are at most ``GATEWAY_MAX_TEXT_LENGTH`` characters.

A pattern means what it means to the tool's client, which validates with ``new RegExp(pattern, "u")``
as JSON Schema says: :mod:`.ecma_regex` reads it by ECMAScript's grammar and writes an RE2 pattern
of the same meaning (``\\s``, ``.``, ``$``, ``\\d``, ``\\w``, ``\\b``, ``[^]``, ``\\cA``, ``\\u{…}``,
``\\p{…}`` as ECMAScript has them). Matching is a search: JSON Schema patterns are not anchored.
"""

import functools

import re2

from elicitation_gateway.conversion.ecma_regex import (
    Assertion,
    Choice,
    Node,
    RegexError,
    Repeat,
    Sequence,
    Shape,
    parse,
    shape,
    to_re2,
)

MAX_PATTERN_LENGTH = 1000
"""Characters of a pattern's source."""
MAX_PROGRAM_SIZE = 1000
"""RE2 instructions of a compiled pattern: matching an answer costs about its length times this, a few
milliseconds at most for the longest answer."""
MAX_WHOLE_PROGRAM_SIZE = 32_000
"""The same for a pattern whose every match is the whole answer, no longer than a bound (``^.{1,100}$``):
matching it stops once that many characters are read, so its size costs little (a 1 MB answer against
``^((a|.){0,30}b){0,30}$``, 22,562 steps: under 4 ms, where ``(a|.){0,200}b$``, 5,005 steps and
free to match anywhere, takes 3.5 s). Every character of ``.`` or ``\\S`` is some 25 steps once
compiled for UTF-8, so ``^.{1,40}$`` alone is over ``MAX_PROGRAM_SIZE``."""
MAX_MEMORY = 1 << 20
"""Bytes RE2 may use for one compiled pattern."""


class PatternError(ValueError):
    """A pattern the gateway does not run; the message says why. ``invalid`` when it is not valid
    ECMAScript at all (rather than valid, but beyond what runs in linear time)."""

    def __init__(self, message: str, *, invalid: bool = False) -> None:
        super().__init__(message)
        self.invalid = invalid


def _options() -> "re2.Options":
    options = re2.Options()
    options.max_mem = MAX_MEMORY
    options.log_errors = False  # a refused pattern is the tool's error, told to the tool, not logged
    return options


_OPTIONS = _options()


def compile_pattern(source: str) -> "re2._Regexp":
    """The compiled pattern; raises :class:`PatternError` naming what makes it unusable."""
    return _compiled(source)[0]


def pattern_shape(source: str) -> Shape:
    """What every match of the pattern has in common (whether there can be one at all, its lengths)."""
    return _compiled(source)[1]


def matches(source: str, text: str) -> bool:
    """Whether ``text`` holds a match of the pattern ``source`` (checked when it was asked)."""
    return compile_pattern(source).search(text) is not None


def _at_characters(tree: Node) -> str:
    """The RE2 pattern of ``tree``, starting its matches only between characters.

    RE2's search tries every byte of the UTF-8 text, and inside a character of several bytes both
    neighbours are non-word bytes, so ``\\B`` holds there where ECMAScript sees a word boundary
    (``\\B`` in ``"_\\ufeffA"``). A pattern with ``\\B`` is anchored behind a lazy run of whole
    characters instead; the others keep RE2's faster search.
    """
    written = to_re2(tree)
    return f"\\A(?s:.)*?(?:{written})" if _has_non_boundary(tree) else written


def _has_non_boundary(node: Node) -> bool:
    if isinstance(node, Assertion):
        return node.kind == "B"
    if isinstance(node, Sequence):
        return any(_has_non_boundary(item) for item in node.items)
    if isinstance(node, Choice):
        return any(_has_non_boundary(option) for option in node.options)
    if isinstance(node, Repeat):
        return _has_non_boundary(node.item)
    return False


@functools.lru_cache(maxsize=512)
def _compiled(source: str) -> tuple["re2._Regexp", Shape]:
    """Cached: every answer to a question is matched against the same pattern."""
    if len(source) > MAX_PATTERN_LENGTH:
        raise PatternError(f"is {len(source)} characters long; at most {MAX_PATTERN_LENGTH} are allowed")
    try:
        tree = parse(source)
    except RegexError as error:
        raise PatternError(str(error), invalid=error.invalid) from None
    try:
        compiled = re2.compile(_at_characters(tree), _OPTIONS)
    except re2.error as error:
        reason = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
        raise PatternError(f"is too large to match in bounded time (RE2: {reason})") from None
    found = shape(tree)
    limit = MAX_WHOLE_PROGRAM_SIZE if found.whole and found.max_length is not None else MAX_PROGRAM_SIZE
    if compiled.programsize > limit:
        whole = (
            "" if limit == MAX_WHOLE_PROGRAM_SIZE else f"; {MAX_WHOLE_PROGRAM_SIZE} for ^…$ of bounded length"
        )
        raise PatternError(
            f"is too large to match in bounded time ({compiled.programsize} steps once compiled; at most "
            f"{limit}{whole})"
        )
    return compiled, found
