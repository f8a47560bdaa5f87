"""The SQLite store's once-only marks (:mod:`.once`): an escalation step's mark is a row of the
``escalations`` table in the store's file, so that a restart does not announce a step again. The store
deletes a question's marks in the transaction that finishes it, and those of questions no longer pending
when it opens the file."""

import contextlib
import sqlite3
from collections.abc import Callable

from elicitation_gateway.stores.once import Once


class SqliteOnce(Once):
    """Its claims are the default (one process owns the file: every event it sees is its own).
    ``transaction`` is the store's: one atomic change of its file, committed when the block ends (its
    faults raise :class:`.StoreUnavailable`)."""

    def __init__(
        self, transaction: Callable[[], contextlib.AbstractContextManager[sqlite3.Connection]]
    ) -> None:
        self._transaction = transaction

    async def mark_escalated(self, request_id: str, step: int, expires_at: float) -> bool:
        """Kept in the file: a restart does not announce a step again. The marks of a question go when
        it finishes."""
        with self._transaction() as db:
            marked = db.execute(
                "INSERT OR IGNORE INTO escalations (id, step) VALUES (?, ?)", (request_id, step)
            ).rowcount
        return marked == 1
