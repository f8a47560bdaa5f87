"""The requests of this replica that wait for a record to finish, and the finished records handed to
them (by this replica's own finish, or from the stream entry that says it), so that they need not
read them back from Redis."""

import asyncio
import contextlib
from collections.abc import Iterator

from elicitation_gateway.records import Record


class Waiters:
    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._results: dict[str, Record] = {}  # finished records for those waiting on them
        self._none = asyncio.Event()

    @contextlib.contextmanager
    def waiting(self, request_id: str) -> Iterator[asyncio.Event]:
        """An event set when the record may have finished; its result is kept while anyone waits."""
        woken = asyncio.Event()
        waiters = self._waiting.setdefault(request_id, set())
        waiters.add(woken)
        try:
            yield woken
        finally:
            waiters.discard(woken)
            if not waiters:
                self._waiting.pop(request_id, None)
                self._results.pop(request_id, None)
                if not self._waiting:
                    self._none.set()

    def __contains__(self, request_id: object) -> bool:
        """Someone waits on it now."""
        return request_id in self._waiting

    def result(self, request_id: str) -> Record | None:
        """The finished record handed to those waiting on it, if any was."""
        return self._results.get(request_id)

    @property
    def results(self) -> int:
        """How many finished records are kept for those waiting on them."""
        return len(self._results)

    def wants(self, request_id: object) -> bool:
        """Someone waits on it, and has not been handed its finished record."""
        return request_id in self._waiting and request_id not in self._results

    def keep(self, request_id: str, finished: Record) -> None:
        """The finished record, for those waiting on it (woken apart)."""
        self._results[request_id] = finished

    def hand(self, finished: Record) -> None:
        """The finished record, for those waiting on it, woken now."""
        if (waiters := self._waiting.get(finished.id)) is not None:
            self._results[finished.id] = finished
            for woken in waiters:
                woken.set()

    def wake(self, request_id: str) -> None:
        for woken in self._waiting.get(request_id, ()):
            woken.set()

    def wake_all(self) -> None:
        for waiters in self._waiting.values():
            for woken in waiters:
                woken.set()

    async def gone(self) -> None:
        """Until nobody waits (those woken read their records)."""
        while self._waiting:
            self._none.clear()
            await self._none.wait()
