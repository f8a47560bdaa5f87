"""The memory budget of pending questions: bytes, not counts.

A count limit alone lets one tool fill memory with a few huge questions (a form with thousands of
options holds megabytes). Each pending question is charged what it holds in this process
(:func:`record_bytes`), against ``GATEWAY_MAX_PENDING_BYTES`` in all and
``GATEWAY_MAX_PENDING_BYTES_PER_SESSION`` in one session. The charge is an estimate that assumes nothing
is shared with other questions, so the real use is at most about that.

With a shared store each replica keeps its own tally, from its own asks and the events it reads:
every replica holds every pending question it lists.
"""

from collections import Counter

from elicitation_gateway.conversion.forms import footprint
from elicitation_gateway.records import Record

ENCODINGS = 3
"""Times a question's JSON is held: encoded once when asked, and in the frames of its announcement to
``/event`` and ``/global/event`` streams."""


def record_bytes(record: Record) -> int:
    """About how many bytes ``record`` holds while pending: its form, its message and its encodings."""
    return footprint(record.form) + len(record.message) + ENCODINGS * len(record.request.wire_json)


class PendingBytes:
    """The bytes charged to each pending question, in all and per session. Adding or removing a
    question twice changes nothing: an ask and the event announcing it may both report one."""

    def __init__(self) -> None:
        self.total = 0
        self._charges: dict[str, tuple[str, int]] = {}
        self._sessions: Counter[str] = Counter()

    def add(self, request_id: str, session_id: str, size: int) -> None:
        if request_id in self._charges:
            return
        self._charges[request_id] = (session_id, size)
        self.total += size
        self._sessions[session_id] += size

    def remove(self, request_id: str) -> None:
        charge = self._charges.pop(request_id, None)
        if charge is None:
            return
        session_id, size = charge
        self.total -= size
        self._sessions[session_id] -= size
        if not self._sessions[session_id]:
            del self._sessions[session_id]

    def session(self, session_id: str) -> int:
        return self._sessions.get(session_id, 0)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._charges

    def __len__(self) -> int:
        return len(self._charges)
