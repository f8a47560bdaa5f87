"""The SQLite store's tool liveness (:mod:`.tool_liveness`): a wait is noted on the record's row, and
the records found so noted and still pending when the file is opened again are abandoned (the process
whose tools waited for them is gone)."""

from collections.abc import Callable

from elicitation_gateway.stores.tool_liveness import ToolLiveness


class SqliteToolLiveness(ToolLiveness):
    """``note`` marks a record waited on in the file; ``pending`` says whether a record is pending."""

    def __init__(self, note: Callable[[str], None], pending: Callable[[str], bool]) -> None:
        self._note = note
        self._pending = pending
        self._found: list[str] = []

    def found(self, request_id: str) -> None:
        """The file, opened, holds ``request_id`` pending and noted as waited on."""
        self._found.append(request_id)

    def waits(self, request_id: str) -> None:
        self._note(request_id)

    def done(self, request_id: str) -> None:
        pass

    async def abandoned(self) -> list[str]:
        found, self._found = self._found, []
        return [request_id for request_id in found if self._pending(request_id)]
