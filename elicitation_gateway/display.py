"""How tool text is made safe to show a person.

Every text a tool writes (a message, a title, a description, an option label, a default, an MCP
server's name) reaches people: in a terminal, on the page, in a notification, on stderr. Shown as
written, it could act instead of being read (an escape sequence erases a line, sets the clipboard,
retitles the window) or disguise itself (a right-to-left override reorders what follows, a zero-width
space makes ``Abort`` and ``Abort\\u200b`` two options that look alike). :func:`safe` gives the form
to show:

- **control characters** (C0 and C1, DEL) are removed, except the newline; a tab becomes a space,
  and a carriage return (alone or before a newline), a line or a paragraph separator (U+2028, U+2029)
  one newline;
- **characters that disguise text** are shown as a visible marker, ``⟨U+202E⟩``: bidi overrides,
  embeddings, isolates and marks, every other invisible format character (zero-width spaces and
  joiners, word joiners, invisible operators, the byte-order mark, the soft hyphen, the Mongolian
  vowel separator, tag characters), and the blank Hangul fillers. A zero-width joiner between two
  symbols is kept (it joins emoji: 👩‍💻), and so is one variation selector after a visible
  character (❤️); a run of them, which can smuggle data, is marked after the first.

Everything else is unchanged, so printable text shows exactly as written, and ``safe`` is idempotent.
The tool's own text is never changed where it is kept or sent back: each surface cleans what it shows.

:func:`skeleton` is the other half: how text *reads*, for comparing texts that a person would take for
the same (two option labels, a field named ``Раssword`` with a Cyrillic ``Р``): invisibles removed,
NFKC (fullwidth ``Ｐ`` is ``P``), and the common Cyrillic and Greek look-alikes of Latin letters folded.

Pure functions of text, no I/O: the conversion core and every surface use them.
"""

import re
import unicodedata

NEWLINE = "\n"

_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f"
"""C0 (but tab and newline), DEL and C1."""
_LINE_SEPARATORS = "\u2028\u2029"
_FILLERS = "\u115f\u1160\u3164\uffa0"
"""Hangul fillers: letters that render as nothing."""
_VARIATION = "\ufe00-\ufe0f\U000e0100-\U000e01ef\u180b-\u180d\u180f"
_ZWJ = "\u200d"

FORMAT_CHARACTERS = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
"""Unicode's format characters (category Cf) as of Unicode 15.1, as a class of ``re`` (which has no
``\\p{Cf}``); a test checks it holds every one the running Python's ``unicodedata`` knows."""

_CONTROLS = {
    **dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)]),
    ord("\n"): "\n",
    ord("\t"): " ",
    ord("\r"): "\n",
    0x2028: "\n",
    0x2029: "\n",
}
"""Step one, for :meth:`str.translate`: controls removed but the newline; tab, carriage return and the
Unicode line and paragraph separators mapped."""
_HAS_CONTROL = re.compile(f"[{_CONTROL}\t\r{_LINE_SEPARATORS}]")

_SPECIAL = f"{FORMAT_CHARACTERS}{_FILLERS}{_VARIATION}\u034f"
_SPECIAL_RUN = re.compile(f"[{_SPECIAL}]+")
"""Step two: runs of the characters that are marked, or kept only in an emoji."""
_PRINTABLE_SPECIAL = re.compile(f"[{_FILLERS}{_VARIATION}\u034f]")
"""The only characters of step two that ``str.isprintable`` passes."""


def _is_symbol(char: str) -> bool:
    """A character an emoji sequence joins: a symbol (🧑, ❤), or one already dressed as an emoji (a
    variation selector, a skin tone)."""
    return unicodedata.category(char) in ("So", "Sk") or "\ufe00" <= char <= "\ufe0f"


def marker(char: str) -> str:
    """The visible stand-in of a character that would disguise text."""
    shown = _MARKERS.get(char)
    if shown is None:
        shown = _MARKERS[char] = f"⟨U+{ord(char):04X}⟩"
    return shown


_MARKERS: dict[str, str] = {}
"""The markers made so far: of the special characters only, a few hundred at most."""
_JOINS = re.compile(f"[{_ZWJ}{_VARIATION}]")


def _variation(char: str) -> bool:
    return (
        "\ufe00" <= char <= "\ufe0f"
        or "\U000e0100" <= char <= "\U000e01ef"
        or "\u180b" <= char <= "\u180d"
        or char == "\u180f"
    )


def _shown_run(found: re.Match[str]) -> str:
    """A run of special characters as shown: each a marker, but a joiner between two symbols and one
    variation selector after a visible character (what comes before is what was shown before)."""
    text, start, end = found.string, found.start(), found.end()
    run = found.group()
    if _JOINS.search(run) is None:  # the common run: every character marked
        return "".join([marker(char) for char in run])
    before = text[start - 1] if start else ""
    pieces: list[str] = []
    for index, char in enumerate(run):
        if char == _ZWJ:
            after = run[index + 1] if index + 1 < len(run) else text[end : end + 1]
            kept = bool(before) and bool(after) and _is_symbol(before) and _is_symbol(after)
        elif _variation(char):
            kept = bool(before) and before not in (NEWLINE, "⟩") and not _variation(before)
        else:
            kept = False
        piece = char if kept else marker(char)
        pieces.append(piece)
        before = piece[-1]
    return "".join(pieces)


def _plain(text: str) -> bool:
    """Whether ``text`` has nothing :func:`safe` changes: checked at C speed for the common cases."""
    if text.isascii():
        return text.isprintable() or not _HAS_CONTROL.search(text.replace(NEWLINE, ""))
    lines = text.split(NEWLINE) if NEWLINE in text else (text,)
    return all(line.isprintable() for line in lines) and _PRINTABLE_SPECIAL.search(text) is None


def safe(text: str, *, oneline: bool = False) -> str:
    """``text`` as it may be shown to a person: no control character but the newline, no character
    that disguises text (each shown as :func:`marker`). ``oneline``: newlines become spaces too, for a
    label, a header or a line of a log.

    Two steps, each over the whole text at once: controls removed or mapped (a carriage return before
    a newline goes), then the special characters marked, run by run."""
    if not _plain(text):
        if _HAS_CONTROL.search(text) is not None:
            text = text.replace("\r\n", NEWLINE).translate(_CONTROLS)
        text = _SPECIAL_RUN.sub(_shown_run, text)
    if oneline and NEWLINE in text:
        text = text.replace(NEWLINE, " ")
    return text


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at most, the cut marked with ``…``."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    return text[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------------------
# How text reads

_INVISIBLE = re.compile(
    f"[{_CONTROL}{_FILLERS}{_VARIATION}\\u034f\\u00ad\\u061c\\u180e\\u200b-\\u200f"
    f"\\u202a-\\u202e\\u2060-\\u2064\\u2066-\\u206f\\ufeff\\U000e0001\\U000e0020-\\U000e007f]"
)
"""What renders as nothing: controls, the format characters that are invisible (the other few ``Cf``
characters, such as the Arabic number sign, are visible signs), fillers and variation selectors."""

CONFUSABLES = str.maketrans(
    {
        # Cyrillic capitals
        "А": "A", "В": "B", "С": "C", "Е": "E", "Н": "H", "І": "I", "Ј": "J", "К": "K", "М": "M",
        "О": "O", "Р": "P", "Ѕ": "S", "Т": "T", "Х": "X", "У": "Y", "Ԛ": "Q", "Ԝ": "W", "Ү": "Y",
        # Cyrillic small letters
        "а": "a", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "і": "i", "ј": "j", "о": "o", "р": "p",
        "ԛ": "q", "ѕ": "s", "ԝ": "w", "х": "x", "у": "y", "ү": "y", "ӏ": "l", "в": "b", "к": "k",
        "м": "m", "н": "h", "т": "t", "ь": "b",
        # Greek capitals
        "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
        "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
        # Greek small letters
        "α": "a", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x",
        "γ": "y", "ϲ": "c", "ϳ": "j",
        # Latin look-alikes NFKC keeps
        "ı": "i", "ȷ": "j", "ɑ": "a", "ɡ": "g", "ɩ": "i", "ʋ": "u", "ſ": "s",
    }
)  # fmt: skip
"""Cyrillic, Greek and Latin letters that look like another Latin letter in common fonts (after
Unicode's confusables.txt, the letters that matter for words: not every symbol it lists)."""


def visible(text: str) -> str:
    """``text`` without what renders as nothing: one linear pass, before anything is read of it."""
    return _INVISIBLE.sub("", text)


def skeleton(text: str) -> str:
    """How ``text`` reads to a person: invisible characters and controls removed, NFKC-normalised,
    look-alike letters folded to the Latin ones, each run of spaces one space, none at either end. Two
    texts with one skeleton are hard to tell apart."""
    text = unicodedata.normalize("NFKC", _INVISIBLE.sub("", text))
    return " ".join(_INVISIBLE.sub("", text).split()).translate(CONFUSABLES)
