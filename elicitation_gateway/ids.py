"""Identifiers in OpenCode's shape: ``que_``/``evt_``/``ses_`` + 12 hex digits + 14 base62 characters.

The hex part is the creation time in milliseconds; the first base62 characters count up within one
millisecond, so ids of one kind sort in creation order (the OpenCode TUI binary-searches them).
"""

import re
import secrets
import threading
import time

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # ASCII order
_COUNTER_DIGITS = 4
_RANDOM_DIGITS = 10
_COUNTER_LIMIT = len(BASE62) ** _COUNTER_DIGITS
_RANDOM_LIMIT = len(BASE62) ** _RANDOM_DIGITS  # one draw (one getrandom call) per id, not one per digit

ID_PATTERN = re.compile(r"(que|evt|ses)_[0-9a-f]{12}[0-9A-Za-z]{14}\Z")  # \Z: not before a final newline


def _base62(number: int, width: int) -> str:
    digits = []
    for _ in range(width):
        number, digit = divmod(number, 62)
        digits.append(BASE62[digit])
    return "".join(reversed(digits))


class AscendingIds:
    """Makes ids that never go backwards, even when the clock does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._millis = 0
        self._counter = 0

    def new(self, prefix: str) -> str:
        with self._lock:
            millis = max(int(time.time() * 1000), self._millis)
            if millis == self._millis:
                self._counter += 1
                if self._counter >= _COUNTER_LIMIT:
                    millis, self._counter = millis + 1, 0
            else:
                self._counter = 0
            self._millis = millis
            counter = self._counter
        tail = _base62(counter, _COUNTER_DIGITS) + _base62(secrets.randbelow(_RANDOM_LIMIT), _RANDOM_DIGITS)
        return f"{prefix}_{millis:012x}{tail}"

    def not_before(self, known: str) -> None:
        """Ids made from now on sort after ``known`` (one kept from an earlier run), whatever the clock."""
        with self._lock:
            millis = int(known[4:16], 16)
            if millis >= self._millis:
                self._millis, self._counter = millis, _COUNTER_LIMIT - 1  # the next id starts a new ms


_ids = AscendingIds()


def not_before(known: str) -> None:
    _ids.not_before(known)


def question_id() -> str:
    return _ids.new("que")


def event_id() -> str:
    return _ids.new("evt")


def session_id() -> str:
    return _ids.new("ses")
