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
``\\p{Cf}``); a test checks it against the running Python's ``unicodedata``."""

_NEEDS_WORK = re.compile(f"[{_CONTROL}\t{_LINE_SEPARATORS}{_FILLERS}{_VARIATION}\\u034f{FORMAT_CHARACTERS}]")
"""Any character :func:`safe` may change; text without one is returned as it is (the common case)."""


_FORMAT = re.compile(f"[{FORMAT_CHARACTERS}]")


def _is_format(char: str) -> bool:
    """A format character: of this Python's Unicode, or of 15.1 (as browsers know it)."""
    return unicodedata.category(char) == "Cf" or _FORMAT.match(char) is not None


def _is_symbol(char: str) -> bool:
    """A character an emoji sequence joins: a symbol (🧑, ❤), or one already dressed as an emoji (a
    variation selector, a skin tone)."""
    return unicodedata.category(char) in ("So", "Sk") or "\ufe00" <= char <= "\ufe0f"


def marker(char: str) -> str:
    """The visible stand-in of a character that would disguise text."""
    return f"⟨U+{ord(char):04X}⟩"


def _variation(char: str) -> bool:
    return (
        "\ufe00" <= char <= "\ufe0f"
        or "\U000e0100" <= char <= "\U000e01ef"
        or "\u180b" <= char <= "\u180d"
        or char == "\u180f"
    )


def _shown_char(text: str, index: int, out: list[str]) -> str:
    """What ``text[index]`` becomes, given what was written before it (``out``)."""
    char = text[index]
    code = ord(char)
    if char == NEWLINE:
        return char
    if char == "\t":
        return " "
    if char == "\r":
        return "" if text[index + 1 : index + 2] == NEWLINE else NEWLINE
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return ""
    if char in _LINE_SEPARATORS:
        return NEWLINE
    before = out[-1][-1:] if out else ""
    if char == _ZWJ:
        after = text[index + 1] if index + 1 < len(text) else ""
        if before and after and _is_symbol(before) and _is_symbol(after):
            return char
        return marker(char)
    if _variation(char):
        if before and before != NEWLINE and not _variation(before) and before != "⟩":
            return char
        return marker(char)
    if char in _FILLERS or char == "\u034f" or _is_format(char):
        return marker(char)
    return char


def safe(text: str, *, oneline: bool = False) -> str:
    """``text`` as it may be shown to a person: no control character but the newline, no character
    that disguises text (each shown as :func:`marker`). ``oneline``: newlines become spaces too, for a
    label, a header or a line of a log."""
    if _NEEDS_WORK.search(text) is not None:
        out: list[str] = []
        for index in range(len(text)):
            shown = _shown_char(text, index, out)
            if shown:
                out.append(shown)
        text = "".join(out)
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
