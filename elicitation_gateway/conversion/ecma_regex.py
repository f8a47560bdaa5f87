"""An ECMAScript regular expression (with the ``u`` flag, as JSON Schema reads ``pattern``) read into
an RE2 pattern that matches exactly the same texts, and what can be known of those texts in advance.

RE2 and ECMAScript write many things alike and mean them differently: ``\\s`` and ``.`` cover other
characters, ``$`` may match before a final newline, ``[[:alpha:]]``, ``(?i)``, ``\\A`` or ``\\x{41}``
are RE2's and not ECMAScript's, ``[^]`` and ``\\cA`` are ECMAScript's and not RE2's. So the pattern is
parsed here by ECMAScript's grammar (its ``u``-mode, where every escape must mean something) and
written out again for RE2 with every character spelt ``\\x{…}``: nothing of the source reaches RE2
unread. What ECMAScript accepts and RE2 cannot run in linear time (backreferences, lookaround) is
refused by name, as is what ECMAScript itself rejects.

Pure: plain functions over strings.
"""

from dataclasses import dataclass

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)
MAX_REPEAT = 1000
"""RE2's largest counted repetition."""


class RegexError(ValueError):
    """A pattern that is not valid ECMAScript, or that the gateway cannot run; the message says which.

    ``invalid`` is true when no ECMAScript engine would accept the pattern either."""

    def __init__(self, message: str, *, invalid: bool) -> None:
        super().__init__(message)
        self.invalid = invalid


# ---------------------------------------------------------------------------------------------------
# Sets of characters


Intervals = tuple[tuple[int, int], ...]


def _normalise(ranges: list[tuple[int, int]]) -> Intervals:
    """Sorted, merged, without surrogates (no answer holds one: text is valid Unicode)."""
    cut: list[tuple[int, int]] = []
    for low, high in ranges:
        if low <= SURROGATES[1] and high >= SURROGATES[0]:
            if low < SURROGATES[0]:
                cut.append((low, SURROGATES[0] - 1))
            if high > SURROGATES[1]:
                cut.append((SURROGATES[1] + 1, high))
        else:
            cut.append((low, high))
    cut.sort()
    merged: list[tuple[int, int]] = []
    for low, high in cut:
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return tuple(merged)


def _complement(intervals: Intervals) -> Intervals:
    ranges, start = [], 0
    for low, high in intervals:
        if low > start:
            ranges.append((start, low - 1))
        start = high + 1
    if start <= MAX_CODE_POINT:
        ranges.append((start, MAX_CODE_POINT))
    return _normalise(ranges)


@dataclass(frozen=True, slots=True)
class CharSet:
    """One character out of a set: ``intervals`` and RE2 class items such as ``\\p{Greek}``;
    ``negated`` (only with ``properties``) takes the complement of their union."""

    intervals: Intervals = ()
    properties: tuple[str, ...] = ()
    negated: bool = False

    @property
    def empty(self) -> bool:
        return not self.intervals and not self.properties and not self.negated

    def complement(self) -> "CharSet":
        if not self.properties:
            return CharSet(_complement(self.intervals))
        if not self.intervals and len(self.properties) == 1 and not self.negated:  # \p{X} and \P{X}
            item = self.properties[0]
            return CharSet((), (item[:1] + {"p": "P", "P": "p"}[item[1]] + item[2:],))
        return CharSet(self.intervals, self.properties, not self.negated)


def _chars(*ranges: tuple[int, int]) -> CharSet:
    return CharSet(_normalise(list(ranges)))


DIGIT = _chars((0x30, 0x39))
WORD = _chars((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
SPACE = _chars(
    (0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
    (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF),
)  # fmt: skip
"""ECMAScript's WhiteSpace and LineTerminator: more than RE2's ``\\s`` (which is ASCII)."""
LINE_TERMINATORS = _chars((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
ANY = _chars((0, MAX_CODE_POINT))
DOT = LINE_TERMINATORS.complement()


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# ---------------------------------------------------------------------------------------------------
# Unicode properties: the names ECMAScript accepts in \p{…}, for what RE2 has of them

_GENERAL_CATEGORIES = """
Cc:Control:cntrl Cf:Format Co:Private_Use Cs:Surrogate L:Letter Ll:Lowercase_Letter
Lm:Modifier_Letter Lo:Other_Letter Lt:Titlecase_Letter Lu:Uppercase_Letter M:Mark:Combining_Mark
Mc:Spacing_Mark Me:Enclosing_Mark Mn:Nonspacing_Mark N:Number Nd:Decimal_Number:digit
Nl:Letter_Number No:Other_Number P:Punctuation:punct Pc:Connector_Punctuation Pd:Dash_Punctuation
Pe:Close_Punctuation Pf:Final_Punctuation Pi:Initial_Punctuation Po:Other_Punctuation
Ps:Open_Punctuation S:Symbol Sc:Currency_Symbol Sk:Modifier_Symbol Sm:Math_Symbol So:Other_Symbol
Z:Separator Zl:Line_Separator Zp:Paragraph_Separator Zs:Space_Separator
"""
_SCRIPTS = """
Adlam:Adlm Ahom Anatolian_Hieroglyphs:Hluw Arabic:Arab Armenian:Armn Avestan:Avst Balinese:Bali
Bamum:Bamu Bassa_Vah:Bass Batak:Batk Bengali:Beng Bhaiksuki:Bhks Bopomofo:Bopo Brahmi:Brah
Braille:Brai Buginese:Bugi Buhid:Buhd Canadian_Aboriginal:Cans Carian:Cari Caucasian_Albanian:Aghb
Chakma:Cakm Cham Cherokee:Cher Chorasmian:Chrs Common:Zyyy Coptic:Copt:Qaac Cuneiform:Xsux
Cypriot:Cprt Cypro_Minoan:Cpmn Cyrillic:Cyrl Deseret:Dsrt Devanagari:Deva Dives_Akuru:Diak Dogra:Dogr
Duployan:Dupl Egyptian_Hieroglyphs:Egyp Elbasan:Elba Elymaic:Elym Ethiopic:Ethi Georgian:Geor
Glagolitic:Glag Gothic:Goth Grantha:Gran Greek:Grek Gujarati:Gujr Gunjala_Gondi:Gong Gurmukhi:Guru
Han:Hani Hangul:Hang Hanifi_Rohingya:Rohg Hanunoo:Hano Hatran:Hatr Hebrew:Hebr Hiragana:Hira
Imperial_Aramaic:Armi Inherited:Zinh:Qaai Inscriptional_Pahlavi:Phli Inscriptional_Parthian:Prti
Javanese:Java Kaithi:Kthi Kannada:Knda Katakana:Kana Kawi Kayah_Li:Kali Kharoshthi:Khar
Khitan_Small_Script:Kits Khmer:Khmr Khojki:Khoj Khudawadi:Sind Lao:Laoo Latin:Latn Lepcha:Lepc
Limbu:Limb Linear_A:Lina Linear_B:Linb Lisu Lycian:Lyci Lydian:Lydi Mahajani:Mahj Makasar:Maka
Malayalam:Mlym Mandaic:Mand Manichaean:Mani Marchen:Marc Masaram_Gondi:Gonm Medefaidrin:Medf
Meetei_Mayek:Mtei Mende_Kikakui:Mend Meroitic_Cursive:Merc Meroitic_Hieroglyphs:Mero Miao:Plrd Modi
Mongolian:Mong Mro:Mroo Multani:Mult Myanmar:Mymr Nabataean:Nbat Nag_Mundari:Nagm Nandinagari:Nand
New_Tai_Lue:Talu Newa Nko:Nkoo Nushu:Nshu Nyiakeng_Puachue_Hmong:Hmnp Ogham:Ogam Ol_Chiki:Olck
Old_Hungarian:Hung Old_Italic:Ital Old_North_Arabian:Narb Old_Permic:Perm Old_Persian:Xpeo
Old_Sogdian:Sogo Old_South_Arabian:Sarb Old_Turkic:Orkh Old_Uyghur:Ougr Oriya:Orya Osage:Osge
Osmanya:Osma Pahawh_Hmong:Hmng Palmyrene:Palm Pau_Cin_Hau:Pauc Phags_Pa:Phag Phoenician:Phnx
Psalter_Pahlavi:Phlp Rejang:Rjng Runic:Runr Samaritan:Samr Saurashtra:Saur Sharada:Shrd Shavian:Shaw
Siddham:Sidd SignWriting:Sgnw Sinhala:Sinh Sogdian:Sogd Sora_Sompeng:Sora Soyombo:Soyo
Sundanese:Sund Syloti_Nagri:Sylo Syriac:Syrc Tagalog:Tglg Tagbanwa:Tagb Tai_Le:Tale Tai_Tham:Lana
Tai_Viet:Tavt Takri:Takr Tamil:Taml Tangsa:Tnsa Tangut:Tang Telugu:Telu Thaana:Thaa Thai
Tibetan:Tibt Tifinagh:Tfng Tirhuta:Tirh Toto Ugaritic:Ugar Vai:Vaii Vithkuqi:Vith Wancho:Wcho
Warang_Citi:Wara Yezidi:Yezi Zanabazar_Square:Zanb
"""
"""Unicode's Script values (long name, then aliases) that RE2 has tables for."""
_OTHER_SCRIPTS = _words(
    "Unknown Zzzz Garay Gara Gurung_Khema Gukh Kirat_Rai Krai Ol_Onal Onao Sunuwar Sunu Todhri Todr "
    "Tulu_Tigalari Tutg"
)
"""Script values of ECMAScript that the gateway's RE2 has no tables for (Unicode 16's, and Unknown)."""
_OTHER_BINARY_PROPERTIES = _words(
    """Alphabetic Alpha Bidi_Control Bidi_C Bidi_Mirrored Bidi_M Case_Ignorable CI Cased
    Changes_When_Casefolded CWCF Changes_When_Casemapped CWCM Changes_When_Lowercased CWL
    Changes_When_NFKC_Casefolded CWKCF Changes_When_Titlecased CWT Changes_When_Uppercased CWU Dash
    Default_Ignorable_Code_Point DI Deprecated Dep Diacritic Dia Emoji Emoji_Component EComp
    Emoji_Modifier EMod Emoji_Modifier_Base EBase Emoji_Presentation EPres Extended_Pictographic ExtPict
    Extender Ext Grapheme_Base Gr_Base Grapheme_Extend Gr_Ext Hex_Digit Hex IDS_Binary_Operator IDSB
    IDS_Trinary_Operator IDST ID_Continue IDC ID_Start IDS Ideographic Ideo Join_Control Join_C
    Logical_Order_Exception LOE Lowercase Lower Math Noncharacter_Code_Point NChar Pattern_Syntax Pat_Syn
    Pattern_White_Space Pat_WS Quotation_Mark QMark Radical Regional_Indicator RI Sentence_Terminal
    STerm Soft_Dotted SD Terminal_Punctuation Term Unified_Ideograph UIdeo Uppercase Upper
    Variation_Selector VS White_Space space XID_Continue XIDC XID_Start XIDS"""
)
"""ECMAScript's binary properties that RE2 has no tables for."""


def _aliases(table: str) -> dict[str, str]:
    names: dict[str, str] = {}
    for entry in table.split():
        canonical, *aliases = entry.split(":")
        for name in (canonical, *aliases):
            names[name] = canonical
    return names


GENERAL_CATEGORIES = _aliases(_GENERAL_CATEGORIES)
SCRIPTS = _aliases(_SCRIPTS)
_MAJOR = ("L", "M", "N", "P", "S", "Z")
_COMPOSED = {
    # RE2's C lacks the unassigned code points (Cn) that ECMAScript's has; RE2 has no LC nor Cn.
    "C": CharSet((), tuple(f"\\p{{{c}}}" for c in _MAJOR), negated=True),
    "Other": CharSet((), tuple(f"\\p{{{c}}}" for c in _MAJOR), negated=True),
    "Cn": CharSet((), tuple(f"\\p{{{c}}}" for c in (*_MAJOR, "C")), negated=True),
    "Unassigned": CharSet((), tuple(f"\\p{{{c}}}" for c in (*_MAJOR, "C")), negated=True),
    "LC": CharSet((), ("\\p{Lu}", "\\p{Ll}", "\\p{Lt}")),
    "Cased_Letter": CharSet((), ("\\p{Lu}", "\\p{Ll}", "\\p{Lt}")),
}
BINARY_PROPERTIES = {
    "Any": ANY,
    "ASCII": _chars((0, 0x7F)),
    "ASCII_Hex_Digit": _chars((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)),
    "AHex": _chars((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)),
    "Assigned": _COMPOSED["Cn"].complement(),
}


def _property(body: str, negated: bool) -> CharSet:
    """The set ``\\p{body}`` names (its complement for ``\\P``), or :class:`RegexError`."""
    name, equals, value = body.partition("=")
    found: CharSet | None = None
    if equals:
        if name in ("General_Category", "gc"):
            found = _general_category(value)
        elif name in ("Script", "sc") and value in SCRIPTS:
            found = CharSet((), (f"\\p{{{SCRIPTS[value]}}}",))
        elif name in ("Script_Extensions", "scx") and (value in SCRIPTS or value in _OTHER_SCRIPTS):
            raise RegexError(
                f"uses \\p{{{body}}}: the gateway has no Script_Extensions tables (\\p{{Script=…}} it runs)",
                invalid=False,
            )
        elif name in ("Script", "sc") and value in _OTHER_SCRIPTS:
            raise RegexError(f"uses \\p{{{body}}}, a script the gateway has no tables for", invalid=False)
    else:
        found = _general_category(name) or BINARY_PROPERTIES.get(name)
        if found is None and name in SCRIPTS:
            raise RegexError(
                f"is not valid ECMAScript: a script is written \\p{{Script={name}}}, not \\p{{{name}}}",
                invalid=True,
            )
        if found is None and name in _OTHER_BINARY_PROPERTIES:
            raise RegexError(
                f"uses \\p{{{body}}}, which the gateway cannot run: it runs General_Category values, "
                "Script=…, ASCII, ASCII_Hex_Digit, Any and Assigned",
                invalid=False,
            )
    if found is None:
        raise RegexError(f"is not valid ECMAScript: \\p{{{body}}} names no property it knows", invalid=True)
    return found.complement() if negated else found


def _general_category(value: str) -> CharSet | None:
    if value in _COMPOSED:
        return _COMPOSED[value]
    category = GENERAL_CATEGORIES.get(value)
    return None if category is None else CharSet((), (f"\\p{{{category}}}",))


# ---------------------------------------------------------------------------------------------------
# The syntax tree


@dataclass(frozen=True, slots=True)
class Assertion:
    kind: str  # "^", "$", "b", "B"


@dataclass(frozen=True, slots=True)
class Sequence:
    items: tuple["Node", ...]


@dataclass(frozen=True, slots=True)
class Choice:
    options: tuple["Node", ...]


@dataclass(frozen=True, slots=True)
class Repeat:
    item: "Node"
    low: int
    high: int | None
    lazy: bool


Node = CharSet | Assertion | Sequence | Choice | Repeat

_SYNTAX = frozenset("^$\\.*+?()[]{}|")
_CONTROL = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_CLASS_ESCAPES = {"d": DIGIT, "s": SPACE, "w": WORD}
_HEX = frozenset("0123456789abcdefABCDEF")
_NOT_ECMASCRIPT = {
    "A": "\\A is not an ECMAScript escape (^ is the start of the answer)",
    "z": "\\z is not an ECMAScript escape ($ is the end of the answer)",
    "Z": "\\Z is not an ECMAScript escape ($ is the end of the answer)",
    "Q": "\\Q…\\E quoting is not ECMAScript (escape each character instead)",
    "E": "\\Q…\\E quoting is not ECMAScript (escape each character instead)",
}


def parse(source: str) -> Node:
    """The syntax tree of ``source``, read as ECMAScript reads ``new RegExp(source, "u")``."""
    return _Parser(source).parse()


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.at = 0
        self.groups = 0
        self.names: set[str] = set()
        self.backreferences: list[tuple[str, bool]] = []  # (what is written, a number)
        self.lookarounds: list[str] = []

    # -- helpers

    def invalid(self, why: str) -> RegexError:
        return RegexError(f"is not valid ECMAScript: {why} (at character {self.at + 1})", invalid=True)

    def peek(self, offset: int = 0) -> str:
        index = self.at + offset
        return self.source[index] if index < len(self.source) else ""

    def take(self) -> str:
        char = self.peek()
        self.at += 1
        return char

    # -- the grammar

    def parse(self) -> Node:
        node = self.disjunction()
        if self.at < len(self.source):  # only ")" stops a disjunction early
            raise self.invalid("an unmatched )")
        self.check_backreferences()
        return node

    def check_backreferences(self) -> None:
        for written, number in self.backreferences:
            target = int(written[1:]) <= self.groups if number else written[3:-1] in self.names
            if not target:
                raise RegexError(f"is not valid ECMAScript: {written} refers to no group", invalid=True)
        if self.lookarounds:
            raise RegexError(
                f"uses lookaround (({self.lookarounds[0]}…), which needs backtracking; the gateway matches "
                "patterns in linear time (RE2) and cannot run it",
                invalid=False,
            )
        if self.backreferences:
            raise RegexError(
                f"uses a backreference (\\1, \\k<name>: {self.backreferences[0][0]}), which needs "
                "backtracking; the gateway matches patterns in linear time (RE2) and cannot run it",
                invalid=False,
            )

    def disjunction(self) -> Node:
        options = [self.alternative()]
        while self.peek() == "|":
            self.at += 1
            options.append(self.alternative())
        return options[0] if len(options) == 1 else Choice(tuple(options))

    def alternative(self) -> Node:
        items: list[Node] = []
        while self.at < len(self.source) and self.peek() not in "|)":
            items.append(self.term())
        return items[0] if len(items) == 1 else Sequence(tuple(items))

    def term(self) -> Node:
        char = self.peek()
        if char in "^$":
            self.at += 1
            return self.unquantified(Assertion(char))
        if char == "\\" and self.peek(1) in ("b", "B"):
            self.at += 2
            return self.unquantified(Assertion(self.source[self.at - 1]))
        if char == "(" and (look := _lookaround(self.source, self.at + 1)):
            start = self.at
            self.at += 1 + len(look)
            self.disjunction()
            if self.take() != ")":
                self.at = start
                raise self.invalid("a ( that is never closed")
            self.lookarounds.append(look)
            return self.unquantified(Sequence(()))
        return self.quantified(self.atom())

    def unquantified(self, node: Node) -> Node:
        if self.peek() in ("*", "+", "?", "{"):
            raise self.invalid(f"nothing to repeat: an assertion cannot take the quantifier {self.peek()}")
        return node

    def atom(self) -> Node:
        char = self.take()
        if char == "(":
            return self.group()
        if char == ".":
            return DOT
        if char == "[":
            return self.character_class()
        if char == "\\":
            return self.atom_escape()
        if char in ("*", "+", "?"):
            self.at -= 1
            raise self.invalid(f"nothing to repeat before {char}")
        if char in ("{", "}", "]"):
            self.at -= 1
            hint = " (POSIX classes such as [:alpha:] are not ECMAScript)" if "[:" in self.source else ""
            raise self.invalid(f"a lone {char} must be escaped as \\{char}{hint}")
        return _single(ord(char))

    def group(self) -> Node:
        start = self.at - 1
        if self.peek() == "?":
            marker = self.source[self.at : self.at + 3]
            if marker.startswith("?:"):
                self.at += 2
            elif marker.startswith("?<"):
                self.at += 2
                self.group_name()
                self.groups += 1
            else:
                self.at -= 1
                raise self.invalid(_group_hint(marker))
        else:
            self.groups += 1
        inner = self.disjunction()
        if self.take() != ")":
            self.at = start
            raise self.invalid("a ( that is never closed")
        return inner

    def group_name(self) -> None:
        name = ""
        while True:
            if self.at >= len(self.source):
                raise self.invalid("a group name that never ends with >")
            char = self.take()
            if char == ">":
                break
            if char == "\\" and self.peek() == "u":
                self.at += 1
                code = self.unicode_escape()
                if code is None:
                    raise self.invalid("a group name with a \\u escape that is not one")
                char = chr(code)
            name += char
        if not _identifier(name):
            raise self.invalid(f"{name!r} is not a group name (an identifier)")
        if name in self.names:
            raise self.invalid(f"two groups are named {name}")
        self.names.add(name)

    def quantified(self, atom: Node) -> Node:
        char = self.peek()
        if char in ("*", "+", "?"):
            self.at += 1
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[char]
        elif char == "{":
            low, high = self.braces()
        else:
            return atom
        lazy = self.peek() == "?"
        self.at += lazy
        if self.peek() in ("*", "+", "?", "{"):
            raise self.invalid(f"nothing to repeat before {self.peek()}")
        return Repeat(atom, low, high, lazy)

    def braces(self) -> tuple[int, int | None]:
        start = self.at
        self.at += 1
        low = self.digits()
        high: int | None = low
        if low is not None and self.peek() == ",":
            self.at += 1
            high = self.digits()
        if low is None or self.take() != "}":
            self.at = start
            raise self.invalid(
                "a { that does not start a quantifier such as {2}, {2,} or {2,5} (escape it: \\{)"
            )
        if high is not None and high < low:
            self.at = start
            raise self.invalid(f"the quantifier {{{low},{high}}} counts down")
        for count in (low, high):
            if count is not None and count > MAX_REPEAT:
                raise RegexError(
                    f"repeats something {count} times; the gateway runs at most {MAX_REPEAT} repetitions",
                    invalid=False,
                )
        return low, high

    def digits(self) -> int | None:
        start = self.at
        while self.peek().isascii() and self.peek().isdigit():
            self.at += 1
        return int(self.source[start : self.at]) if self.at > start else None

    # -- escapes

    def atom_escape(self) -> Node:
        char = self.peek()
        if char == "":
            raise self.invalid("a \\ at the end of the pattern")
        if char in "123456789":
            start = self.at - 1
            self.digits()
            self.backreferences.append((self.source[start : self.at], True))
            return Sequence(())
        if char == "k":
            start = self.at - 1
            self.at += 1
            if self.peek() != "<":
                raise self.invalid("\\k must name a group: \\k<name>")
            self.at += 1
            self.group_name_reference()
            self.backreferences.append((self.source[start : self.at], False))
            return Sequence(())
        found = self.class_escape(in_class=False)
        return found if isinstance(found, CharSet) else _single(found)

    def group_name_reference(self) -> None:
        end = self.source.find(">", self.at)
        if end == -1:
            raise self.invalid("a group name that never ends with >")
        self.at = end + 1

    def class_escape(self, *, in_class: bool) -> CharSet | int:
        """After a ``\\``: one code point, or a set for ``\\d``, ``\\p{…}`` and their kind."""
        char = self.take()
        if char.lower() in _CLASS_ESCAPES:
            found = _CLASS_ESCAPES[char.lower()]
            return found.complement() if char.isupper() else found
        if char in ("p", "P"):
            return self.property_escape(negated=char == "P")
        if char in _CONTROL:
            return _CONTROL[char]
        if char == "c":
            letter = self.peek()
            if not (letter.isascii() and letter.isalpha()):
                raise self.invalid("\\c must be followed by a letter A–Z or a–z")
            self.at += 1
            return ord(letter) % 32
        if char == "0":
            if self.peek().isascii() and self.peek().isdigit():
                raise self.invalid("\\0 followed by a digit (octal escapes are not allowed with the u flag)")
            return 0
        if char == "x":
            pair = self.source[self.at : self.at + 2]
            if len(pair) != 2 or not set(pair) <= _HEX:
                raise self.invalid("\\x takes exactly two hex digits (\\x41, or \\u{41} for more)")
            self.at += 2
            return int(pair, 16)
        if char == "u":
            code = self.unicode_escape()
            if code is None:
                raise self.invalid(
                    "\\u takes four hex digits (\\u0041) or a code point in braces (\\u{1F600})"
                )
            return code
        if in_class and char == "b":
            return 0x08
        if in_class and char == "-":
            return ord("-")
        if char in _SYNTAX or char == "/":
            return ord(char)
        self.at -= 1
        if char in _NOT_ECMASCRIPT:
            raise self.invalid(_NOT_ECMASCRIPT[char])
        if char.isdigit() or char in ("B", "k"):
            raise self.invalid(f"\\{char} has no meaning inside a character class")
        raise self.invalid(f"\\{char} is not an escape (with the u flag, only syntax characters are escaped)")

    def unicode_escape(self) -> int | None:
        """After ``\\u``: ``XXXX``, a surrogate pair ``XXXX\\uXXXX`` or ``{X…}``; None if malformed."""
        if self.peek() == "{":
            end = self.source.find("}", self.at)
            digits = self.source[self.at + 1 : end] if end != -1 else ""
            if not digits or not set(digits) <= _HEX or int(digits, 16) > MAX_CODE_POINT:
                return None
            self.at = end + 1
            return int(digits, 16)
        quad = self.source[self.at : self.at + 4]
        if len(quad) != 4 or not set(quad) <= _HEX:
            return None
        self.at += 4
        code = int(quad, 16)
        trail = self.source[self.at : self.at + 6]
        if 0xD800 <= code <= 0xDBFF and trail[:2] == "\\u" and set(trail[2:]) <= _HEX and len(trail) == 6:
            low = int(trail[2:], 16)
            if 0xDC00 <= low <= 0xDFFF:
                self.at += 6
                return 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
        return code

    def property_escape(self, *, negated: bool) -> CharSet:
        end = self.source.find("}", self.at)
        if self.peek() != "{" or end == -1:
            raise self.invalid("\\p and \\P take a property in braces: \\p{L}, \\p{Script=Greek}")
        body = self.source[self.at + 1 : end]
        if not body or not all(c.isascii() and (c.isalnum() or c in "_=") for c in body):
            raise self.invalid(f"\\p{{{body}}} names no property")
        self.at = end + 1
        return _property(body, negated)

    # -- character classes

    def character_class(self) -> CharSet:
        start = self.at - 1
        negated = self.peek() == "^"
        self.at += negated
        members: list[CharSet] = []
        ranges: list[tuple[int, int]] = []
        while True:
            if self.at >= len(self.source):
                self.at = start
                raise self.invalid("a [ that is never closed")
            if self.peek() == "]":
                self.at += 1
                break
            first = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.at += 1
                last = self.class_atom()
                if isinstance(first, CharSet) or isinstance(last, CharSet):
                    raise self.invalid("a range in a class cannot start or end with a class such as \\d")
                if first > last:
                    raise self.invalid(f"the class range {chr(first)}-{chr(last)} is out of order")
                ranges.append((first, last))
            elif isinstance(first, CharSet):
                members.append(first)
            else:
                ranges.append((first, first))
        found = _union([CharSet(_normalise(ranges)), *members], self)
        return found.complement() if negated else found

    def class_atom(self) -> CharSet | int:
        char = self.take()
        if char == "\\":
            if self.peek() == "":
                raise self.invalid("a \\ at the end of the pattern")
            return self.class_escape(in_class=True)
        return ord(char)


def _union(members: list[CharSet], parser: _Parser) -> CharSet:
    """One set of the members of a class; RE2 can write a complement only as a whole class."""
    members = [m for m in members if not m.empty]
    if not members:
        return CharSet()
    if len(members) == 1:
        return members[0]
    if any(m.negated for m in members):
        raise RegexError(
            "uses, in a class with other members, a property the gateway can write only on its own "
            "(\\p{C}, \\p{Cn}, \\P{LC}, \\p{Assigned} and their kind); put it in an alternative instead",
            invalid=False,
        )
    intervals = _normalise([r for m in members for r in m.intervals])
    properties = tuple(dict.fromkeys(p for m in members for p in m.properties))
    return CharSet(intervals, properties)


def _single(code: int) -> CharSet:
    return CharSet(_normalise([(code, code)]))


def _identifier(name: str) -> bool:
    """ECMAScript's IdentifierName, near enough: Python's identifiers with ``$`` (and ZWNJ, ZWJ)."""
    if not name:
        return False
    plain = name.replace("$", "_")
    rest = plain[1:].replace("\u200c", "_").replace("\u200d", "_")
    return (plain[0] + rest).isidentifier()


def _lookaround(source: str, at: int) -> str:
    """The lookaround that opens at ``source[at:]`` (``?=``, ``?!``, ``?<=``, ``?<!``), or ``""``."""
    for look in ("?=", "?!", "?<=", "?<!"):
        if source.startswith(look, at):
            return look
    return ""


def _group_hint(marker: str) -> str:
    if marker.startswith("?P"):
        return "(?P<name>…) is Python's and RE2's syntax; ECMAScript writes (?<name>…)"
    if marker.startswith("?#"):
        return "(?#…) comments are not ECMAScript"
    return f"({marker}… is not an ECMAScript group (inline flags such as (?i) are not ECMAScript)"


# ---------------------------------------------------------------------------------------------------
# Writing the tree for RE2


def to_re2(node: Node) -> str:
    """RE2 syntax with the tree's meaning: ``^`` and ``$`` as ``\\A`` and ``\\z``, groups uncaptured
    (nothing reads them), every character as ``\\x{…}``."""
    if isinstance(node, CharSet):
        return _set_re2(node)
    if isinstance(node, Assertion):
        return {"^": "\\A", "$": "\\z", "b": "\\b", "B": "\\B"}[node.kind]
    if isinstance(node, Sequence):
        return "".join(_grouped(item, in_sequence=True) for item in node.items)
    if isinstance(node, Choice):
        return "|".join(to_re2(option) for option in node.options)
    operator = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((node.low, node.high))
    if operator is None:
        high = "" if node.high is None else str(node.high)
        operator = f"{{{node.low}}}" if node.high == node.low else f"{{{node.low},{high}}}"
    return _grouped(node.item, in_sequence=False) + operator + ("?" if node.lazy else "")


def _grouped(node: Node, *, in_sequence: bool) -> str:
    """``node`` written to stand as one item of a sequence, or as the operand of a quantifier."""
    written = to_re2(node)
    if in_sequence:
        return f"(?:{written})" if isinstance(node, Choice) else written
    return written if isinstance(node, CharSet) else f"(?:{written})"


def _set_re2(chars: CharSet) -> str:
    if not chars.properties:
        if not chars.intervals:
            return f"[^\\x00-\\x{{{MAX_CODE_POINT:X}}}]"  # matches nothing
        if len(chars.intervals) == 1 and chars.intervals[0][0] == chars.intervals[0][1]:
            return _code(chars.intervals[0][0])
    ranges = "".join(
        _code(low) if low == high else f"{_code(low)}-{_code(high)}" for low, high in chars.intervals
    )
    return f"[{'^' if chars.negated else ''}{ranges}{''.join(chars.properties)}]"


def _code(code: int) -> str:
    return f"\\x{{{code:X}}}"


# ---------------------------------------------------------------------------------------------------
# What the texts that match have in common

# A position in a text, abstracted to whether it is the start and whether it is the end: bit 2 start,
# bit 1 end. A node relates the positions it can start at to those it can end at.
_STATES = range(4)
_IDENTITY = frozenset((s, s) for s in _STATES)
_CONSUME = frozenset((s, t) for s in _STATES if not s & 1 for t in (0, 1))


@dataclass(frozen=True, slots=True)
class Shape:
    """What every match of a pattern has in common, as far as the syntax shows (sound, not complete)."""

    matchable: bool
    """False when no text at all can hold a match (``[]``, ``a$b``)."""
    min_length: int
    """No match is shorter (in code points)."""
    max_length: int | None
    """No match is longer; None when unbounded."""
    whole: bool
    """Every match starts at the start of the text and ends at its end: the text is the match."""


def shape(node: Node) -> Shape:
    relation, low, high = _measure(node)
    starts_inside = any(not s & 2 for s, _ in relation)
    ends_inside = any(not t & 1 for _, t in relation)
    return Shape(bool(relation), low, high, bool(relation) and not starts_inside and not ends_inside)


Relation = frozenset[tuple[int, int]]


def _measure(node: Node) -> tuple[Relation, int, int | None]:
    if isinstance(node, CharSet):
        return (frozenset() if node.empty else _CONSUME), 1, 1
    if isinstance(node, Assertion):
        bit = {"^": 2, "$": 1}.get(node.kind)
        kept = _IDENTITY if bit is None else frozenset((s, s) for s in _STATES if s & bit)
        return kept, 0, 0
    if isinstance(node, Sequence):
        relation, low, high = _IDENTITY, 0, 0
        for item in node.items:
            step, item_low, item_high = _measure(item)
            relation = _compose(relation, step)
            low += item_low
            high = None if high is None or item_high is None else high + item_high
        return relation, low, high
    if isinstance(node, Choice):
        measured = [_measure(option) for option in node.options]
        possible = [m for m in measured if m[0]] or measured
        relation = frozenset().union(*(m[0] for m in measured))
        highs = [m[2] for m in possible]
        return relation, min(m[1] for m in possible), None if None in highs else max(highs)  # type: ignore[type-var]
    step, item_low, item_high = _measure(node.item)
    if not step:  # the item never matches: the repeat matches only when it may be absent
        return (_IDENTITY if node.low == 0 else frozenset()), 0, 0
    relation = _between(step, node.low, node.high)
    low = node.low * item_low
    if node.high is None:
        high = 0 if item_high == 0 else None
    else:
        high = None if item_high is None else node.high * item_high
    return relation, low, high


def _compose(first: Relation, second: Relation) -> Relation:
    return frozenset((s, u) for s, t in first for t2, u in second if t == t2)


def _between(step: Relation, low: int, high: int | None) -> Relation:
    """The union of ``step`` composed with itself ``low`` to ``high`` times (None: unbounded)."""
    power = _IDENTITY
    seen: dict[Relation, int] = {}
    count = 0
    while count < low:  # the powers of a relation over 4 states repeat: skip whole cycles
        if power in seen:
            period = count - seen[power]
            for _ in range((low - count) % period):
                power = _compose(power, step)
            count = low
            break
        seen[power] = count
        power = _compose(power, step)
        count += 1
    total = power
    seen = {}
    extra = 0
    while (high is None or low + extra < high) and power not in seen:
        seen[power] = extra
        power = _compose(power, step)
        total |= power
        extra += 1
    return total
