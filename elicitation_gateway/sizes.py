"""How many bytes of memory text holds in this process, as the memory budgets count it.

CPython keeps a ``str`` at 1, 2 or 4 bytes a character, by its widest character (PEP 393): text with
one emoji in it takes 4 bytes for every character, CJK text 2, ASCII 1. ``sys.getsizeof`` is the truth
for a ``str`` or ``bytes`` object, and costs nothing (it reads the length and the kind, never the
characters). Event frames go out as UTF-8: 1 to 4 bytes a character, by each character. So neither
is counted by ``len``.
"""

import sys
from typing import Any

BYTES_HEAD = sys.getsizeof(b"")
"""What a ``bytes`` object holds besides its bytes."""


def held(text: str | bytes) -> int:
    """The bytes ``text`` holds: its header and its characters at its kind's width."""
    return sys.getsizeof(text)


def utf8_length(text: str) -> int:
    """How long ``text`` is in UTF-8 (a lone surrogate, written as U+FFFD, counts as its 3 bytes).
    Free for ASCII; other text is encoded once to count it."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def names_held(model: Any, shared: set[str]) -> int:
    """What a pydantic model's set of the names of its fields set holds: nothing when it is ``shared``
    (made of checked parts, :meth:`~pydantic.BaseModel.model_construct`), a set of its own when
    validated (read back from a store)."""
    names = model.__pydantic_fields_set__
    return 0 if names is shared else sys.getsizeof(names)
