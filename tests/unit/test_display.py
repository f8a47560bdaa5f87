"""Tool text made safe to show a person: controls removed, disguising characters marked, printable
text untouched; and the skeleton that says which texts a person would take for the same."""

import re
import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicitation_gateway.display import FORMAT_CHARACTERS, clip, marker, safe, skeleton

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]
BIDI += ["\u200e", "\u200f", "\u061c"]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\u2061", "\u2062", "\u2063", "\u2064", "\ufeff"]
INVISIBLE += ["\u00ad", "\u180e", "\U000e0001", "\U000e0041", "\U000e007f", "\u3164", "\u115f", "\u034f"]
DISGUISING = BIDI + INVISIBLE
CONTROLS = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)] if chr(c) not in "\n\t\r"]


def _is_control(char: str) -> bool:
    code = ord(char)
    return (code < 0x20 and char != "\n") or 0x7F <= code <= 0x9F


def _disguises(char: str) -> bool:
    return char in DISGUISING or (unicodedata.category(char) == "Cf" and char != "\u200d")


# ---------------------------------------------------------------------------------------------------
# Examples


@pytest.mark.parametrize("char", CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_every_control_character_but_the_newline_is_removed(char: str) -> None:
    assert safe(f"a{char}b") == "ab"


def test_newlines_stay_tabs_become_spaces_and_separators_newlines() -> None:
    assert safe("one\ntwo\tthree") == "one\ntwo three"
    assert safe("one\u2028two\u2029three") == "one\ntwo\nthree"
    assert safe("one\r\ntwo") == "one\ntwo"
    assert safe("one\rtwo\r") == "one\ntwo\n"  # a carriage return cannot overwrite a line


@pytest.mark.parametrize("char", DISGUISING, ids=lambda c: f"U+{ord(c):04X}")
def test_every_disguising_character_is_shown_as_a_marker(char: str) -> None:
    assert safe(f"Abort{char}") == f"Abort⟨U+{ord(char):04X}⟩"
    assert marker(char) in safe(f"x{char}y")


def test_a_forged_label_is_only_text() -> None:
    """An erase-line and cursor-home sequence cannot erase the label before it: no ESC reaches the
    terminal, and what is left is plain characters."""
    hostile = "evil-mcp · wipe: \x1b[2K\x1b[1GTrusted CI · run_tests: ok"
    assert safe(hostile) == "evil-mcp · wipe: [2K[1GTrusted CI · run_tests: ok"


@pytest.mark.parametrize(
    "sequence",
    [
        "\x1b]52;c;cm0gLXJmIH4=\x07",  # OSC 52: the clipboard
        "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",  # OSC 8: a hidden link
        "\x1b]0;Trusted\x07",  # OSC 0: the window title
        "\x9b2J",  # CSI (8-bit): clear the screen
        "\x9d0;title\x9c",  # OSC (8-bit)
        "\x1bP+q\x1b\\",  # DCS
    ],
)
def test_escape_sequences_lose_their_introducers(sequence: str) -> None:
    shown = safe(sequence)
    assert not any(_is_control(char) for char in shown)


def test_a_right_to_left_override_cannot_reorder_what_follows() -> None:
    assert safe("invoice_\u202etxt.exe") == "invoice_⟨U+202E⟩txt.exe"


def test_emoji_keep_their_joiners_and_variation_selectors() -> None:
    for emoji in ["👩\u200d💻", "👨\u200d👩\u200d👧", "❤\ufe0f", "🏳\ufe0f\u200d🌈", "👍🏽", "1\ufe0f\u20e3"]:
        assert safe(emoji) == emoji


def test_controls_go_before_joiners_are_judged() -> None:
    assert safe("👩\u200d\x07💻") == "👩\u200d💻"
    assert safe("a\x1b\ufe0f") == "a\ufe0f"


def test_the_worst_text_of_the_longest_message_is_shown_in_linear_time() -> None:
    """Ten thousand special characters, the longest text a tool may send: every one handled."""
    for text in ["\u200b" * 10_000, "a" + "\ufe0f" * 9_999, "👩\u200d" * 5_000, "\x1b" * 10_000]:
        shown = safe(text)
        assert safe(shown) == shown


def test_a_joiner_between_letters_is_marked() -> None:
    assert safe("Ab\u200dort") == "Ab⟨U+200D⟩ort"
    assert safe("\u200d👩") == "⟨U+200D⟩👩"
    assert safe("👩\u200d") == "👩⟨U+200D⟩"


def test_a_run_of_variation_selectors_is_marked_after_the_first() -> None:
    """Data hidden in variation selectors (one per byte) shows."""
    assert safe("a\ufe0f\ufe01\U000e0100") == "a\ufe0f⟨U+FE01⟩⟨U+E0100⟩"
    assert safe("\ufe0fa") == "⟨U+FE0F⟩a"
    assert safe("a\n\ufe0f") == "a\n⟨U+FE0F⟩"


def test_printable_text_of_every_script_is_unchanged() -> None:
    texts = ["Deploy release 4.2?", "Développer", "Сборка", "デプロイしますか", "שלום עולם", "مرحبا", "Ⅻ ﬁ"]
    for text in texts:
        assert safe(text) is text


def test_oneline_puts_every_line_on_one() -> None:
    assert safe("Trusted\nCI\x1b", oneline=True) == "Trusted CI"
    assert safe("a\u2028b", oneline=True) == "a b"


def test_the_format_characters_class_is_this_pythons_category_cf() -> None:
    pattern = re.compile(f"[{FORMAT_CHARACTERS}]")
    every = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert [hex(ord(c)) for c in every if not pattern.fullmatch(c)] == []


def test_clip() -> None:
    assert clip("short", 10) == "short"
    assert clip("x" * 200, 100) == "x" * 99 + "…"
    assert len(clip("x" * 10**6, 100)) == 100
    assert clip("abc", 0) == ""


def test_skeleton_sees_through_disguises() -> None:
    disguises = ["Pass\u200bword", "Pass\u00adword", "Раssword", "Ｐａｓｓｗｏｒｄ", "Ρassword"]
    disguises.append(" Password\ufeff")
    for disguised in disguises:
        assert skeleton(disguised) == "Password", disguised
    assert skeleton("Abort") == skeleton("Abort\u200b") == skeleton("Abort ")
    assert skeleton("Abort") != skeleton("abort")
    assert skeleton("ﬁle") == "file"


# ---------------------------------------------------------------------------------------------------
# Properties

ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=60)
TRICKY = st.text(
    st.sampled_from([*CONTROLS, *DISGUISING, "\n", "\t", "\r", "\u2028", "\ufe0f", "\ufe01", "\u200d"])
    | st.sampled_from(["a", "👩", "❤", "⟩", " ", "Р"]),
    max_size=30,
)


@given(st.one_of(ANY_TEXT, TRICKY))
def test_nothing_but_the_newline_of_c0_and_c1_survives(text: str) -> None:
    assert not any(_is_control(char) for char in safe(text))
    assert "\n" not in safe(text, oneline=True)


@given(st.one_of(ANY_TEXT, TRICKY))
def test_no_bidi_or_invisible_character_survives(text: str) -> None:
    shown = safe(text)
    for index, char in enumerate(shown):
        if char == "\u200d":  # kept only to join two symbols
            assert 0 < index < len(shown) - 1
            continue
        assert not _disguises(char), (text, shown)


@given(st.one_of(ANY_TEXT, TRICKY), st.booleans())
def test_safe_is_idempotent(text: str, oneline: bool) -> None:
    once = safe(text, oneline=oneline)
    assert safe(once, oneline=oneline) == once


@given(st.text(st.characters(codec="utf-8", categories=["L", "M", "N", "P", "S", "Zs"]), max_size=60))
def test_printable_text_is_unchanged(text: str) -> None:
    text = "".join(c for c in text if c not in "\u3164\u115f\u1160\uffa0" and not "\ufe00" <= c <= "\ufe0f")
    text = re.sub("[\U000e0100-\U000e01ef\u180b-\u180f\u034f]", "", text)
    assert safe(text) == text


@given(st.one_of(ANY_TEXT, TRICKY))
def test_the_skeleton_has_no_invisible_character_and_is_idempotent(text: str) -> None:
    shape = skeleton(text)
    assert not any(_is_control(c) or c in DISGUISING for c in shape)
    assert skeleton(shape) == shape
