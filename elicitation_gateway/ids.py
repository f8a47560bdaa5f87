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
_RANDOM_LIMIT = len(BASE62) ** _RANDOM_DIGITS  # one draw (one getrandom call) per id, not one per digit

ID_PATTERN = re.compile(r"(que|evt|ses)_[0-9a-f]{12}[0-9A-Za-z]{14}\Z")  # \Z: not before a final newline


_PAIRS = [a + b for a in BASE62 for b in BASE62]
"""Every two-digit base62 string, by value: half the divisions of one digit at a time."""
_RANDOM_BYTES = 8 * 256


def _base62(number: int, width: int) -> str:
    """``number`` in ``width`` base62 digits (``width`` even)."""
    pairs = []
    for _ in range(width // 2):
        number, pair = divmod(number, 3844)
        pairs.append(_PAIRS[pair])
    return "".join(reversed(pairs))


class AscendingIds:
    """Makes ids that never go backwards, even when the clock does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._millis = 0
        self._counter = 0
        self._random = b""
        """Bytes from the system's CSPRNG, drawn a few thousand at a time: one syscall per 256 ids."""
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
            if self._drawn == len(self._random):
                self._random, self._drawn = os.urandom(_RANDOM_BYTES), 0
            start = self._drawn
            self._drawn += 8
        # 64 random bits reduced modulo 62**10 (about 2**59.5): still about 59 bits of chance.
        random = int.from_bytes(self._random[start : start + 8]) % _RANDOM_LIMIT
        tail = _base62(counter, _COUNTER_DIGITS) + _base62(random, _RANDOM_DIGITS)
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
