"""The records a replica knows to be pending, kept parsed: reading one costs no round trip.

A pending record never changes until it finishes, so ``get`` and listings are answered from memory.
That is only right while nothing stale stays here: a record leaves when it finishes on this replica,
or when the loop reads that another replica finished it; when a listing no longer holds it; and all
leave when the loop loses the stream (it may miss finishes meanwhile). A listing that raced a finish
is not kept.
"""

from collections.abc import Awaitable, Callable

from elicitation_gateway.records import Record

SLICE = 500
"""Records parsed, or announcements made, between two turns of the loop when there are thousands."""


class PendingCache:
    def __init__(self) -> None:
        self._known: dict[str, Record] = {}
        self._finishes = 0  # finishes seen: a listing that raced one is not kept

    def get(self, request_id: str) -> Record | None:
        return self._known.get(request_id)

    def keep(self, record: Record) -> None:
        """A record this replica has just added."""
        self._known[record.id] = record

    def finished(self, request_id: str) -> None:
        """It finished: on this replica, or the loop read that it did on another."""
        self._finishes += 1
        self._known.pop(request_id, None)

    def clear(self) -> None:
        """Finishes may be missed from now on: records are read from Redis again."""
        self._known.clear()

    async def records(
        self, request_ids: list[str], read: Callable[[list[str]], Awaitable[list[str | None]]]
    ) -> list[Record]:
        """The records of ids just listed as pending, in that order: known ones from memory, the others
        parsed from what ``read`` gives for them (each one's JSON, or None for one gone)."""
        known = self._known
        if len(known) > len(request_ids):  # forget those finished while the loop was not following
            listed = set(request_ids)
            for request_id in [request_id for request_id in known if request_id not in listed]:
                del known[request_id]
        found = {request_id: known[request_id] for request_id in request_ids if request_id in known}
        if missing := [request_id for request_id in request_ids if request_id not in known]:
            finishes = self._finishes
            for start in range(0, len(missing), SLICE):  # each slice parsed between two awaits
                for raw in await read(missing[start : start + SLICE]):
                    if raw is not None and (record := Record.model_validate_json(raw)).pending:
                        found[record.id] = record
            if finishes == self._finishes:  # else one of them may have finished meanwhile: not kept
                known.update(found)
        return [found[request_id] for request_id in request_ids if request_id in found]
