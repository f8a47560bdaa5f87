"""How text crosses the gateway's edges: valid Unicode in, valid UTF-8 out.

What enters must be valid Unicode. JSON lets a string hold a lone UTF-16 surrogate (``"\\ud800"``),
which Python parses into a ``str`` that no UTF-8 encoder can write: kept, it would fail every later
response, listing and event frame that carries it. Such text, and bytes that are not UTF-8, are
refused where they enter, naming where they are (``message``, ``requestedSchema.properties.x.enum[2]``,
``answers[1][0]``, the query parameter ``directory``).

What leaves is written here: JSON bodies and Server-Sent Events frames are valid UTF-8 whatever they
are given. A lone surrogate that a store already holds (written before these checks) goes out as
U+FFFD instead of failing the write.
"""

import json
import re
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.responses import JSONResponse

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""Where a lone surrogate can come from in a UTF-8 JSON text: a ``\\uD800``-``\\uDFFF`` escape (a
valid pair of them is one character once parsed)."""
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class InvalidText(ValueError):
    """Text that is not valid Unicode; ``where`` names it for the person who sent it."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where} {problem}")
        self.where = where
        self.message = f"{where} {problem}"
        self.document: Any = None
        """The JSON it was found in, when that parsed (a JSON-RPC error can then name its request)."""


# ---------------------------------------------------------------------------------------------------
# What enters


def parse_json(raw: bytes, where: str = "the body") -> Any:
    """A JSON text as sent over HTTP: UTF-8, and every string (and key) valid Unicode.

    Raises :class:`InvalidText` for text that is not, ``ValueError`` for JSON that is not valid and
    ``RecursionError`` for JSON nested too deeply to read.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = raw[error.start : error.start + 1].hex()
        raise InvalidText(where, f"is not valid UTF-8 (byte 0x{bad} at offset {error.start})") from None
    if text.startswith("\ufeff"):  # as json.loads says it, which the decoder alone does not check
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    value = _DECODER.decode(text)
    if _SURROGATE_ESCAPE.search(raw):  # only then can a string hold a lone surrogate
        try:
            check_text(value)
        except InvalidText as error:
            error.document = value
            raise
    return value


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


_DECODER = json.JSONDecoder(parse_constant=_no_constants)
"""Made once: ``json.loads`` with an option makes a decoder (and its scanner) for every call, here
for every body (a decoder keeps nothing between calls)."""


def check_text(value: Any, where: str = "") -> None:
    """Raise :class:`InvalidText` naming the first string or key in ``value`` (JSON data: dicts, lists,
    strings, numbers) that holds a lone surrogate. Walks without recursion, at any depth."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not valid_text(item):
                raise InvalidText(path or "the text", f"is not valid Unicode: {_surrogate_at(item)}")
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                if not valid_text(key):
                    raise InvalidText(
                        path or "the body", f"has a key that is not valid Unicode: {_surrogate_at(key)}"
                    )
                children.append((child, f"{path}.{key}" if path else key))
            stack.extend(reversed(children))  # the first one in the document is named
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{index}]") for index, child in reversed(list(enumerate(item))))


def check_url_text(path: bytes, query: bytes) -> None:
    """Raise :class:`InvalidText` when a request's path or a query parameter, once percent-decoded, is
    not UTF-8 (``?directory=%ff`` would otherwise reach the gateway as a replacement character)."""
    if b"%" in path or not path.isascii():
        _decoded(path, "the path")
    if b"%" in query or not query.isascii():
        for part in query.split(b"&"):
            name, _, value = part.partition(b"=")
            shown_name = _decoded(name.replace(b"+", b" "), "a query parameter's name")
            _decoded(value.replace(b"+", b" "), f"the query parameter {shown_name!r}")


def _decoded(raw: bytes, where: str) -> str:
    try:
        return unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidText(where, "is not valid UTF-8 once percent-decoded") from None


def valid_text(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (it holds no lone surrogate)."""
    return text.isascii() or _SURROGATE.search(text) is None


def shown(text: str) -> str:
    """``text`` as it can be shown in a message or a log: a lone surrogate as its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _surrogate_at(text: str) -> str:
    found = _SURROGATE.search(text)
    assert found is not None
    return f"it holds a lone surrogate (\\u{ord(found.group()):04x}) at character {found.start()}"


# ---------------------------------------------------------------------------------------------------
# What leaves


def to_utf8(text: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate becomes U+FFFD rather than failing the write."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text).encode("utf-8")


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_BODY = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
"""``json.dumps`` with these options makes an encoder for every call; these are made once (an
encoder keeps nothing between calls), for the dozen encodings of every round trip."""


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII characters as themselves (the gateway's one JSON style)."""
    return _COMPACT.encode(value)


def sse_frame(data: str, event_id: str | None = None) -> bytes:
    """One Server-Sent Events frame: an ``id:`` line when given, ``data:`` lines (a line break in
    ``data`` starts another ``data:`` line, so no text can end the frame or forge a field)."""
    if event_id is not None and ("\n" in event_id or "\r" in event_id):
        event_id = _LINE_BREAK.sub("", event_id)
    head = "" if event_id is None else "id: " + event_id + "\n"
    if "\n" in data or "\r" in data:
        lines = "".join("data: " + line + "\n" for line in _LINE_BREAK.split(data))
    else:  # compact JSON, as every event's data is, holds no line break: one data: line
        lines = "data: " + data + "\n"
    return to_utf8(head + lines + "\n")


def json_bytes(value: Any) -> bytes:
    """A JSON body's bytes: compact, non-ASCII characters as themselves, valid UTF-8 whatever it holds."""
    return to_utf8(_BODY.encode(value))


class JsonResponse(JSONResponse):
    """Starlette's JSON response, written as valid UTF-8 whatever it holds."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)
