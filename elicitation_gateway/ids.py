"""Identifiers in OpenCode's shape: ``que_``/``evt_``/``ses_`` + 12 hex digits + 14 base62 characters.

The hex part is the creation time in milliseconds; the first base62 characters count up within one
millisecond, so ids of one kind sort in creation order (the OpenCode TUI binary-searches them).
"""

import os
import re
import threading
import time

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # ASCII order
_COUNTER_DIGITS = 4
_RANDOM_DIGITS = 10
_COUNTER_LIMIT = len(BASE62) ** _COUNTER_DIGITS

ID_PATTERN = re.compile(r"(que|evt|ses)_[0-9a-f]{12}[0-9A-Za-z]{14}\Z")  # \Z: not before a final newline


_PAIRS = [a + b for a in BASE62 for b in BASE62]
"""Every two-digit base62 string, by value: a counter's four digits are two lookups."""
_UNBIASED = 4 * len(BASE62)
"""Bytes below this, taken modulo 62, give every digit equally often; the rest are dropped."""
_TO_DIGIT = bytes(BASE62[byte % len(BASE62)].encode()[0] for byte in range(256))
_DROPPED = bytes(range(_UNBIASED, 256))
_RANDOM_BYTES = 2048
"""Bytes drawn from the system's CSPRNG at once: one syscall, and one translation, per about 200 ids."""


def _random_digits(count: int) -> str:
    """``count`` base62 digits, each uniform and independent (about 5.95 bits of chance each)."""
    digits = b""
    while len(digits) < count:
        digits += os.urandom(_RANDOM_BYTES).translate(_TO_DIGIT, _DROPPED)
    return digits.decode("ascii")


class AscendingIds:
    """Makes ids that never go backwards, even when the clock does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._millis = 0
        self._counter = 0
        self._random = ""
        """Random base62 digits (:func:`_random_digits`), drawn a few thousand at a time."""
        self._drawn = 0

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
            start = self._drawn
            if start + _RANDOM_DIGITS > len(self._random):
                self._random, start = _random_digits(_RANDOM_BYTES // 2), 0
            self._drawn = start + _RANDOM_DIGITS
            random = self._random[start : start + _RANDOM_DIGITS]  # about 59.5 bits of chance
        high, low = divmod(counter, 3844)
        return f"{prefix}_{millis:012x}{_PAIRS[high]}{_PAIRS[low]}{random}"

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
