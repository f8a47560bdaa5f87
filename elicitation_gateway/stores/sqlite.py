"""The durable embedded store: the in-memory store's records and history, also kept in a SQLite file.

``GATEWAY_STORE=sqlite:///relative.db`` or ``sqlite:////absolute/path.db``. One process owns the file
(``shared`` is False: it keeps the timers); a restart on the same file finds what the last process
left: pending questions (announced again, their timers resumed from ``expires_at``), finished results
within their retention time, and the event history, so that a ``Last-Event-ID`` replays across it.

Tables::

    records   one row per record: its JSON, status, finish time, and whether a tool waited on a
              blocking request for it (``waited_on``: nobody can collect such a one after a crash)
    events    the replay history in publication order (``seq``), capped at ``history_size``
    audit     the audit trail, one line a row (:mod:`.audit_trail`), kept for the audit retention
    escalations  the escalation steps announced of pending questions (:mod:`.sqlite_once`)

Reads are served from memory (a :class:`.MemoryIndex`, as the in-memory store's); every change is
committed to the file before it is made there and its event published. Writes run inline on the
event loop, one connection, one writer: in WAL mode with ``synchronous=NORMAL`` a commit is a
``write()`` to the log without an fsync (about 20-40 µs), so awaiting a thread would cost more than
it saves, and staying on the loop keeps each change atomic as in memory. A committed transaction
survives the process being killed (it is in the operating system's cache); only a power loss or a
kernel crash may lose the last ones, which ``?synchronous=full`` prevents with an fsync per commit.
Checkpoints, which fsync, run in a thread on a connection of their own, so they never stall the
loop.

Faults: a write that SQLite refuses (a full disk, an I/O error), or any write once the file at the
path is no longer the one this store opened (deleted, moved away or replaced: checked with a
``stat`` before each one), raises :class:`.StoreUnavailable` and changes nothing, in the file or in
memory; the first logs one ERROR, and one INFO once a change as large as the largest refused one is
written again. A smaller one may work meanwhile (a file size limit, an almost full disk refuse only
the large): the fault stands until then, so that readiness says what an ask would get.
:meth:`SqliteStore.problem` says why (``/readyz``) and, while a fault stands, tries a write of that
size itself (a row of zeros, then deleted), so a freed disk is noticed without traffic; while writes
work it writes nothing. A file
deleted while the gateway runs is written back to its path from the open database when the store
closes (a graceful stop), so a restart finds everything; a checkpoint never creates a file.
"""

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from elicitation_gateway import events, ids
from elicitation_gateway.records import Record, Status
from elicitation_gateway.stores.audit_trail import SQLITE_SCHEMA, AuditTrail, SqliteAuditTrail
from elicitation_gateway.stores.base import Store, StoreUnavailable
from elicitation_gateway.stores.fanout import LocalSubscription
from elicitation_gateway.stores.memory import MemoryIndex
from elicitation_gateway.stores.sqlite_liveness import SqliteToolLiveness
from elicitation_gateway.stores.sqlite_once import SqliteOnce

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
CHECKPOINT_COMMITS = 250
"""Commits between two checkpoints (each started in a thread, so that its fsync never holds the loop)."""
TRIM_EVERY = 64
"""Events appended between two trims of the history table: one DELETE per event would cost more."""
SYNCHRONOUS = ("normal", "full")
PROBE_WRITE_EVERY = 5.0
"""Seconds a commit vouches for the file taking writes: a readiness check after that writes itself."""

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS records (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    waited_on INTEGER NOT NULL DEFAULT 0,
    finished_at REAL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_finished_at ON records (finished_at) WHERE finished_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    type TEXT NOT NULL,
    directory TEXT,
    properties TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS probe (body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS escalations (id TEXT NOT NULL, step INTEGER NOT NULL, PRIMARY KEY (id, step));
"""
    + SQLITE_SCHEMA
)


class SqliteStoreError(RuntimeError):
    """The file cannot be used as a store (not writable, not a database, locked by another process)."""


def parse_url(url: str) -> tuple[Path, str]:
    """``sqlite:///relative.db`` or ``sqlite:////abs.db`` (SQLAlchemy's convention), with an optional
    ``?synchronous=normal|full``: the file's path and the synchronous mode. Raises ValueError."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite" or parts.netloc or not parts.path.startswith("/"):
        raise ValueError("a SQLite URL is sqlite:///relative/path.db or sqlite:////absolute/path.db")
    path = parts.path[1:]
    if not path or path.endswith("/") or path == ":memory:":
        raise ValueError("a SQLite URL names a file: sqlite:///relative/path.db or sqlite:////abs/path.db")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = set(query) - {"synchronous"}
    if unknown:
        raise ValueError(f"unknown SQLite URL option {sorted(unknown)[0]!r} (only ?synchronous=normal|full)")
    synchronous = query.get("synchronous", ["normal"])[-1].lower()
    if synchronous not in SYNCHRONOUS:
        raise ValueError("?synchronous= must be normal or full")
    return Path(path), synchronous


def check_url(url: str) -> None:
    """What can be known before start: a well-formed URL, and a file (or an existing folder to make
    it in) this process may write. Raises ValueError saying what is wrong. A missing folder is refused,
    not made: it is more often a typo than a wish, and as root it would be made anywhere."""
    path, _ = parse_url(url)
    if path.exists():
        if not path.is_file():
            raise ValueError(f"{path} exists and is not a file")
        if not os.access(path, os.R_OK | os.W_OK):
            raise ValueError(f"{path} is not readable and writable by this process")
        return
    folder = path.parent.absolute()
    if not folder.exists():
        raise ValueError(f"the folder {folder} does not exist: create it first (only the file is made)")
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"cannot create {path}: {folder} is not a writable folder")


class SqliteStore(Store):
    questions_outlive_process = True

    def __init__(
        self,
        path: str | Path,
        *,
        history_size: int = 1000,
        result_ttl: float = 600,
        subscriber_queue: int = 1000,
        history_bytes: int = 64 * 1024 * 1024,
        max_finished: int = 10_000,
        synchronous: str = "normal",
    ) -> None:
        self._index = MemoryIndex(
            history_size=history_size,
            result_ttl=result_ttl,
            subscriber_queue=subscriber_queue,
            history_bytes=history_bytes,
            max_finished=max_finished,
            forgotten=self._forget,
            wanted=lambda request_id: self.orphans.holds(request_id),
        )
        self._history_size = history_size
        self._result_ttl = result_ttl
        self._max_finished = max_finished
        self.path = Path(path)
        self._synchronous = synchronous
        self._db: sqlite3.Connection | None = None
        self.tool_liveness = SqliteToolLiveness(
            self._note_waited_on, lambda request_id: self._index.pending_record(request_id) is not None
        )
        self.once = SqliteOnce(self._transaction)
        self._checkpoint: asyncio.Task[None] | None = None
        self._commits = 0
        self._lock: int | None = None
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file this store opened
        self._fault: str | None = None  # why writes fail now; None while they work
        self._fault_size = 0  # bytes of the largest change refused while the fault stands
        self._written_at = -PROBE_WRITE_EVERY  # time.monotonic() of the last commit

    @classmethod
    def from_url(cls, url: str, **options: Any) -> "SqliteStore":
        path, synchronous = parse_url(url)
        return cls(path, synchronous=synchronous, **options)

    @functools.cached_property
    def audit_trail(self) -> AuditTrail:
        """The audit trail, in the ``audit`` table of the same file."""
        return SqliteAuditTrail(self._transaction, lambda: self._connection)

    # ---------------------------------------------------------------------------------------------
    # Life cycle

    async def start(self) -> None:
        """Open the file (creating it, never its folder) and load what the last process left."""
        try:
            self._lock = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as error:
            raise SqliteStoreError(f"cannot open the question store {self.path}: {error}") from None
        try:
            # One process owns the file (its memory is the store's state): a second one stops here.
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._unlock()
            raise SqliteStoreError(
                f"the question store {self.path} is in use by another gateway (one process per file)"
            ) from None
        opened = os.fstat(self._lock)
        self._identity = (opened.st_dev, opened.st_ino)
        try:
            db = sqlite3.connect(self.path, isolation_level=None, timeout=1, check_same_thread=False)
        except sqlite3.Error as error:
            self._unlock()
            raise SqliteStoreError(f"cannot open the question store {self.path}: {error}") from None
        try:
            self._prepare(db)
            self._db = db
            self._load()
        except (sqlite3.Error, SqliteStoreError, StoreUnavailable) as error:
            db.close()
            self._db = None
            self._unlock()
            if isinstance(error, SqliteStoreError):
                raise
            if isinstance(error, StoreUnavailable):
                raise SqliteStoreError(str(error)) from None
            raise SqliteStoreError(self._explain(error)) from None

    async def close(self) -> None:
        self._index.close()
        if self._checkpoint is not None:
            with contextlib.suppress(Exception):
                await self._checkpoint
        if self._db is not None:
            moved = self._moved()
            with contextlib.suppress(sqlite3.Error):
                self._trim(self._db, self._index.seq)
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if moved:
                self._write_back(moved)  # closes the connection
            else:
                self._db.close()
            self._db = None
        self._unlock()

    def _unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor releases the lock
            self._lock = None

    def _prepare(self, db: sqlite3.Connection) -> None:
        version = db.execute("PRAGMA user_version").fetchone()[0]  # also: is this a database at all?
        if version > SCHEMA_VERSION:
            raise SqliteStoreError(
                f"{self.path} was written by a newer version of the gateway (schema {version})"
            )
        if db.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
            raise SqliteStoreError(f"{self.path}: SQLite cannot use write-ahead logging there")
        db.execute(f"PRAGMA synchronous={self._synchronous.upper()}")
        db.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints run in a thread (see _wrote)
        db.executescript(_SCHEMA + f"PRAGMA user_version={SCHEMA_VERSION};")  # idempotent

    def _explain(self, error: sqlite3.Error) -> str:
        text = str(error)
        if "locked" in text or "busy" in text:
            return f"the question store {self.path} is in use by another process (one gateway per file)"
        if "not a database" in text or "malformed" in text:
            return f"the question store {self.path} is not a usable SQLite database: {text}"
        return f"cannot use the question store {self.path}: {text}"

    def _load(self) -> None:
        with self._transaction() as db:  # results past their retention go now, and all but the newest
            db.execute("DELETE FROM records WHERE finished_at < ?", (time.time() - self._result_ttl,))
            db.execute(
                "DELETE FROM records WHERE status != 'pending' AND id NOT IN (SELECT id FROM records"
                " WHERE status != 'pending' ORDER BY finished_at DESC LIMIT ?)",
                (self._max_finished,),
            )
            db.execute(
                "DELETE FROM escalations WHERE id NOT IN (SELECT id FROM records WHERE status = 'pending')"
            )
        last_id = ""
        # Pending ones as they were asked, then finished ones as they finished: the oldest go first.
        stored = db.execute(
            "SELECT body, waited_on FROM records ORDER BY finished_at IS NOT NULL, finished_at, rowid"
        )
        for raw, waited_on in stored:
            record = Record.model_validate_json(raw)
            last_id = max(last_id, record.id)
            self._index.restore(record)
            if record.pending and waited_on:
                self.tool_liveness.found(record.id)
        rows = db.execute(
            "SELECT seq, id, type, directory, properties FROM events ORDER BY seq DESC LIMIT ?",
            (self._history_size,),
        ).fetchall()
        kept = []
        for seq, event_id, kind, directory, properties in reversed(rows):
            event = events.Event(
                kind, None, directory=directory, replayable=True, id=event_id, properties_json=properties
            )
            kept.append((seq, event))
            last_id = max(last_id, event_id)
        last_seq = db.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
        self._index.restore_history(kept, last_seq)
        if last_id:
            ids.not_before(last_id)  # new ids sort after the old ones, even if the clock went back
        pending, finished = self._index.count_pending(), self._index.count_finished()
        if pending or finished or rows:
            logger.info(
                "question store %s: %d pending, %d finished, %d events kept",
                self.path,
                pending,
                finished,
                len(rows),
            )

    # ---------------------------------------------------------------------------------------------
    # Changes: committed, then published

    async def add(self, record: Record) -> None:
        event = record.asked_event()
        body, properties = record.model_dump_json(), event.properties_json()
        with self._transaction(len(body) + len(properties)) as db:
            db.execute("INSERT INTO records (id, status, body) VALUES (?, 'pending', ?)", (record.id, body))
            self._append(db, event, properties)
        self._index.add(record, event)

    async def finish(
        self,
        request_id: str,
        status: Status,
        result: dict[str, Any],
        answers: list[list[str]] | None = None,
    ) -> Record | None:
        record = self._index.pending_record(request_id)
        if record is None:
            return None
        finished = record.finished(status, result)
        event = finished.finished_event(answers)
        body, properties = finished.model_dump_json(), event.properties_json()
        with self._transaction(len(body) + len(properties)) as db:
            db.execute(
                "UPDATE records SET status = ?, finished_at = ?, body = ? WHERE id = ?",
                (status, finished.finished_at, body, request_id),
            )
            db.execute("DELETE FROM escalations WHERE id = ?", (request_id,))
            self._append(db, event, properties)
        self._index.finish(finished, event)
        return finished

    async def get(self, request_id: str) -> Record | None:
        return self._index.get(request_id)

    def publish_here(self, event: events.Event) -> None:
        self._index.publish_here(event)

    async def pending(self) -> list[Record]:
        return self._index.pending()

    async def count_pending(self, session_id: str | None = None) -> int:
        return self._index.count_pending(session_id)

    async def wait(self, request_id: str, seconds: float) -> Record | None:
        return await self._index.wait(request_id, seconds)

    def wake(self, request_id: str) -> None:
        self._index.wake(request_id)

    async def subscribe(self, last_event_id: str | None = None) -> LocalSubscription:
        return self._index.subscribe(last_event_id)

    def _note_waited_on(self, request_id: str) -> None:
        try:  # one statement: a transaction of its own
            with self._writing():
                self._connection.execute(
                    "UPDATE records SET waited_on = 1 WHERE id = ? AND status = 'pending'", (request_id,)
                )
            self._wrote()
        except StoreUnavailable:  # logged once as the store's fault; then it only times out after a crash
            pass
        except (sqlite3.Error, SqliteStoreError) as error:
            logger.warning("could not note that a tool waits for %s: %s", request_id, error)

    async def problem(self) -> str | None:
        """Checks that the path still holds this store's file (a ``stat``), and that it takes writes:
        with a small one of its own when none worked in the last :data:`PROBE_WRITE_EVERY` seconds (a
        read-only or failing file is then said before an ask meets it). While a fault stands, tries a
        write as large as the largest refused change (a row of zeros, deleted again), so that a freed
        disk is noticed by the readiness probe alone, and a small write that works (under a file size
        limit, on an almost full disk) does not pass for a store that takes asks."""
        if self._db is None:
            return f"the question store {self.path} is not open"
        try:
            if self._fault is None and time.monotonic() - self._written_at < PROBE_WRITE_EVERY:
                with self._writing():
                    pass
            elif self._fault is None:
                with self._transaction() as db:
                    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")  # one page, written again
            else:
                size = self._fault_size
                with self._transaction(size) as db:
                    db.execute("INSERT INTO probe (body) VALUES (zeroblob(?))", (size,))
                with self._transaction() as db:
                    db.execute("DELETE FROM probe")
        except StoreUnavailable as error:
            return str(error)
        return None

    # ---------------------------------------------------------------------------------------------

    @property
    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise SqliteStoreError(f"the question store {self.path} is not open")
        return self._db

    @contextlib.contextmanager
    def _transaction(self, size: int = 0) -> Iterator[sqlite3.Connection]:
        """One atomic change of about ``size`` bytes: committed when the block ends, rolled back if it
        raises."""
        db = self._connection
        with self._writing(size):
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                raise
        self._wrote(size)

    @contextlib.contextmanager
    def _writing(self, size: int = 0) -> Iterator[None]:
        """Around every write (of about ``size`` bytes): none once the path holds another file (or none),
        and SQLite's refusals (a full disk, a file size limit, an I/O error) as
        :class:`.StoreUnavailable`, the first of them logged."""
        if moved := self._moved():
            raise self._failing(
                f"the question store {self.path} was {moved} while the gateway ran; it takes no changes "
                "until the file is back (a graceful stop writes what it holds back to the path)",
                size,
            )
        try:
            yield
        except sqlite3.Error as error:
            if not isinstance(error, sqlite3.OperationalError) and type(error) is not sqlite3.DatabaseError:
                raise  # a constraint or a misuse: a bug, not the disk
            raise self._failing(f"the question store {self.path} cannot be written: {error}", size) from error

    def _moved(self) -> str | None:
        """``deleted`` or ``replaced`` when the path no longer leads to the file this store opened."""
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            return "deleted"
        except OSError:
            return None  # it cannot say: let SQLite's own errors tell
        return None if (found.st_dev, found.st_ino) == self._identity else "replaced"

    def _failing(self, reason: str, size: int) -> StoreUnavailable:
        if self._fault is None:
            logger.error("%s; writes answer 503 until it works again", reason)
        self._fault = reason
        self._fault_size = max(self._fault_size, size)
        return StoreUnavailable(reason)

    def _write_back(self, moved: str) -> None:
        """The open database, copied to a new file at the path (deleted) or beside it (replaced), so
        that a restart loses nothing. Closes the connection."""
        db = self._connection
        target = (
            self.path if moved == "deleted" else self.path.with_name(f"{self.path.name}.{os.getpid()}.saved")
        )
        temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            copy = sqlite3.connect(temporary, isolation_level=None)
            try:
                db.backup(copy)
                copy.execute("PRAGMA journal_mode=DELETE")  # one file, no log beside it
                copy.execute("PRAGMA journal_mode=WAL")
            finally:
                copy.close()
            db.close()
            if moved == "deleted":
                # The deleted file's log and index stay at the path's names after SQLite closes it
                # (it does not checkpoint a file that moved): they would be applied to the new file.
                for suffix in ("-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(f"{self.path}{suffix}")
            os.rename(temporary, target)
        except (OSError, sqlite3.Error) as error:
            with contextlib.suppress(sqlite3.Error):
                db.close()
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            logger.error(  # noqa: TRY400  (the reason is the message; no traceback)
                "could not write the question store back to %s: %s; its questions are lost", target, error
            )
            return
        logger.warning(
            "the question store %s was %s while the gateway ran; what it held is in %s",
            self.path,
            moved,
            target,
        )

    def _append(self, db: sqlite3.Connection, event: events.Event, properties: str) -> None:
        db.execute(
            "INSERT INTO events (seq, id, type, directory, properties) VALUES (?, ?, ?, ?, ?)",
            (seq := self._index.seq + 1, event.id, event.type, event.directory, properties),
        )
        if seq % TRIM_EVERY == 0:  # loading reads the last ``history_size`` only
            self._trim(db, seq)

    def _trim(self, db: sqlite3.Connection, last: int) -> None:
        db.execute("DELETE FROM events WHERE seq <= ?", (last - self._history_size,))

    def _forget(self, request_id: str) -> None:
        """A finished record's retention ended, or newer ones took its place: the memory forgot it, and
        so does the file."""
        if self._db is not None:  # failing, the row goes at the next start (past its retention or count)
            with contextlib.suppress(sqlite3.Error, StoreUnavailable), self._transaction() as db:
                db.execute("DELETE FROM records WHERE id = ? AND status != 'pending'", (request_id,))

    def _wrote(self, size: int = 0) -> None:
        """A change of about ``size`` bytes was committed: the fault ends if none larger was refused.
        Starts a checkpoint in a thread once the log has grown: it fsyncs, the loop must not."""
        self._written_at = time.monotonic()
        if self._fault is not None and size >= self._fault_size:
            logger.info("the question store %s is written again", self.path)
            self._fault = None
            self._fault_size = 0
        self._commits += 1
        if self._commits < CHECKPOINT_COMMITS or (self._checkpoint and not self._checkpoint.done()):
            return
        self._commits = 0
        self._checkpoint = asyncio.get_running_loop().create_task(asyncio.to_thread(self._checkpoint_now))

    def _checkpoint_now(self) -> None:
        if self._moved():  # the path's file, if any, is not this store's
            return
        with contextlib.suppress(sqlite3.Error):
            # mode=rw: never creates a file, should the path be emptied meanwhile
            db = sqlite3.connect(
                f"{self.path.absolute().as_uri()}?mode=rw", uri=True, isolation_level=None, timeout=1
            )
            try:
                db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            finally:
                db.close()
