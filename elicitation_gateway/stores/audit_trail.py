"""Where a store keeps the audit trail (:mod:`elicitation_gateway.audit`): one hash chain per store.

Each store gives its :class:`AuditTrail` (``Store.audit_trail``): the in-memory store keeps the entries
in this process (:class:`MemoryAuditTrail`), the SQLite store in a table of its file
(:class:`SqliteAuditTrail`), so that a restart continues the chain, and the Redis store in Redis
(:mod:`elicitation_gateway.stores.redis.audit`), one chain for every replica.

An append reads the last entry and writes the next in one atomic step, so that two appends never
follow the same entry. ``at`` is written as :func:`.audit.rfc3339` writes it (UTC, milliseconds), so
entries compare by time as strings.
"""

import contextlib
import sqlite3
import sys
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from operator import attrgetter
from typing import Any, TypeVar

from elicitation_gateway.audit import AuditEntry, next_entry, parse_line
from elicitation_gateway.encoding import dumps

_T = TypeVar("_T")


def selected(entries: Iterable[AuditEntry], since: str | None, question: str | None) -> list[AuditEntry]:
    """The ``entries`` (in chain order) from the first one at or after ``since`` (as
    :func:`.audit.parse_since` writes it) on, every one after it included, so that they still form a
    chain although replicas' clocks differ a little; of ``question`` alone, where given."""
    of = None if question is None else (lambda entry: entry.question == question)
    return _selected(entries, since, attrgetter("at"), of)


def _selected(
    items: Iterable[_T], since: str | None, at: Callable[[_T], str], of: Callable[[_T], bool] | None
) -> list[_T]:
    """:func:`selected` of anything with an entry's ``at``, ``of``: whether it is of the question."""
    found: list[_T] = []
    started = since is None
    for item in items:
        started = started or (since is not None and at(item) >= since)
        if started and (of is None or of(item)):
            found.append(item)
    return found


def chained(last: AuditEntry | None, batch: Sequence[dict[str, Any]]) -> list[AuditEntry]:
    """The entries of ``batch``, each following the one before, the first following ``last``."""
    made: list[AuditEntry] = []
    for fields in batch:
        made.append(next_entry(made[-1] if made else last, **fields))
    return made


class AuditTrail(ABC):
    async def append(self, **fields: Any) -> AuditEntry:
        """The entry made of ``fields`` (:func:`.audit.next_entry`'s keywords), chained after the last
        one and kept. Raises :class:`.StoreUnavailable` when it cannot be kept (nothing is)."""
        return (await self.append_many([fields]))[0]

    @abstractmethod
    async def append_many(self, batch: Sequence[dict[str, Any]]) -> list[AuditEntry]:
        """The entries made of each of ``batch`` (as :meth:`append` takes them), chained in order
        after the last one and kept at once: all or none (:class:`.StoreUnavailable`). One write for
        many entries is what lets the trail keep up with a busy gateway."""

    @abstractmethod
    async def entries(self, since: str | None = None, question: str | None = None) -> list[AuditEntry]:
        """The entries kept, in chain order: from the first at or after ``since`` on, of ``question``,
        where given (:func:`selected`)."""

    @abstractmethod
    async def prune(self, before: str) -> int:
        """Drop the entries older than ``before`` (an ``at``); how many went. The rest still verify:
        the first kept one names the hash it follows."""


MEMORY_ENTRIES = 100_000
"""Entries the in-memory trail keeps at most, the oldest dropped first, as the retention drops them:
the rest still verifies. A trail to keep belongs in a SQLite file or Redis."""
MEMORY_BYTES = 64 * 1024 * 1024
"""Bytes the in-memory trail's entries hold at most, as :func:`held` counts them: answers can be long
(up to a body's size each), so a count alone would not bound it."""
LINE_HELD = 8
"""What a kept line holds besides its bytes object: its place in the trail."""


def held(line: bytes) -> int:
    """What an entry kept in this process holds: its line, and its place in the trail."""
    return sys.getsizeof(line) + LINE_HELD


_AT = b'"at":"'
_QUESTION = b'"question":'


class MemoryAuditTrail(AuditTrail):
    """The trail in this process's memory (the in-memory store's): gone with it, and at most
    :data:`MEMORY_ENTRIES` long and :data:`MEMORY_BYTES` large.

    Each entry is kept as its line (:meth:`.AuditEntry.line`), as the SQLite and Redis stores keep it:
    bytes, which the garbage collector never tracks, so that a full trail (a hundred thousand entries)
    is not walked by its collections, as entries kept as objects with lists of answers would be."""

    def __init__(self, limit: int = MEMORY_ENTRIES, limit_bytes: int = MEMORY_BYTES) -> None:
        self._lines: deque[bytes] = deque()
        self._last: AuditEntry | None = None
        self._limit, self._limit_bytes, self.bytes = limit, limit_bytes, 0

    async def append_many(self, batch: Sequence[dict[str, Any]]) -> list[AuditEntry]:
        made = chained(self._last, batch)
        lines = [entry.line() for entry in made]  # all made before any is kept: all or none
        self._lines.extend(lines)
        self.bytes += sum(map(held, lines))
        self._last = made[-1] if made else self._last
        while len(self._lines) > self._limit or (self.bytes > self._limit_bytes and len(self._lines) > 1):
            self.bytes -= held(self._lines.popleft())
        return made

    async def entries(self, since: str | None = None, question: str | None = None) -> list[AuditEntry]:
        of = None if question is None else partial(_line_of, dumps(question).encode() + b",")
        return [parse_line(line) for line in _selected(self._lines, since, _line_at, of)]

    async def prune(self, before: str) -> int:
        dropped = 0
        while self._lines and _line_at(self._lines[0]) < before:
            self.bytes -= held(self._lines.popleft())
            dropped += 1
        return dropped


def _line_at(line: bytes) -> str:
    """A line's ``at``: its second field, a string of digits and punctuation (:func:`.audit.rfc3339`)."""
    start = line.index(_AT) + len(_AT)
    return line[start : line.index(b'"', start)].decode()


def _line_of(question: bytes, line: bytes) -> bool:
    """Whether a line is of ``question`` (its JSON and the comma after it): the first ``"question":``
    of a line is its key, since the fields before it (a number, a time, an event's name) cannot hold it."""
    return line.startswith(question, line.index(_QUESTION) + len(_QUESTION))


SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    question TEXT NOT NULL,
    line TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_question ON audit (question);
"""


class SqliteAuditTrail(AuditTrail):
    """The trail in a table of the SQLite store's file. One process owns the file, so the last entry is
    known here; each append is one committed transaction, of one row or a batch's. ``transaction`` is
    the store's (its faults raise :class:`.StoreUnavailable`), ``connection`` its open connection."""

    def __init__(
        self,
        transaction: Callable[[int], contextlib.AbstractContextManager[sqlite3.Connection]],
        connection: Callable[[], sqlite3.Connection],
    ) -> None:
        self._transaction = transaction
        self._connection = connection
        self._last: AuditEntry | None = None
        self._loaded = False

    def _load(self) -> None:
        if not self._loaded:
            row = self._connection().execute("SELECT line FROM audit ORDER BY seq DESC LIMIT 1").fetchone()
            self._last = None if row is None else parse_line(row[0])
            self._loaded = True

    async def append_many(self, batch: Sequence[dict[str, Any]]) -> list[AuditEntry]:
        self._load()
        made = chained(self._last, batch)
        rows = [(entry.seq, entry.at, entry.question, entry.line().decode()) for entry in made]
        with self._transaction(sum(len(row[3]) for row in rows)) as db:
            db.executemany("INSERT INTO audit (seq, at, question, line) VALUES (?, ?, ?, ?)", rows)
        self._last = made[-1] if made else self._last
        return made

    async def entries(self, since: str | None = None, question: str | None = None) -> list[AuditEntry]:
        return list(self._rows(since, question))

    def _rows(self, since: str | None, question: str | None) -> Iterator[AuditEntry]:
        query, parameters = "SELECT line FROM audit WHERE 1", []
        if since is not None:  # from the first at or after it on (:func:`selected`)
            query += " AND seq >= (SELECT min(seq) FROM audit WHERE at >= ?)"
            parameters.append(since)
        if question is not None:
            query += " AND question = ?"
            parameters.append(question)
        for (line,) in self._connection().execute(query + " ORDER BY seq", parameters):
            yield parse_line(line)

    async def prune(self, before: str) -> int:
        self._load()
        with self._transaction(0) as db:
            # Never the last entry: the next append follows it, and a restart reads it.
            last = self._last.seq if self._last is not None else 0
            return db.execute("DELETE FROM audit WHERE at < ? AND seq < ?", (before, last)).rowcount
