"""The pending counts a replica keeps from the stream, so that checking a limit costs no round trip."""

from elicitation_gateway.stores.redis.codec import StreamOrder


class PendingCounts:
    """How many records are pending, in all and per session, as of the stream entries this replica has
    read, and of its own changes that Redis has answered but the loop has not read back yet.

    They start from a snapshot taken together with a position in the stream (``since``); from there
    every entry that adds or finishes a record says both counts as its script made them. Each count
    keeps the position it is as of, so an older entry never overwrites a newer count: this replica's
    own changes count as soon as Redis answers them, and the loop reading them back later changes
    nothing. A session leaves when the loop reads that it has none pending.
    """

    def __init__(self, since: StreamOrder, pending: int, sessions: dict[str, int]) -> None:
        self._since = since
        self._pending = (since, pending)
        self._sessions = {session_id: (since, count) for session_id, count in sessions.items()}

    def count(self, session_id: str | None = None) -> int:
        if session_id is None:
            return self._pending[1]
        found = self._sessions.get(session_id)
        return 0 if found is None else found[1]

    def update(self, at: StreamOrder, pending: int, session_id: str, in_session: int, *, read: bool) -> None:
        """The counts after the entry at ``at``; ``read``: the loop read it, so none older follows."""
        if at <= self._since:
            return
        if at > self._pending[0]:
            self._pending = (at, pending)
        known = self._sessions.get(session_id)
        if known is not None and (at < known[0] or (at == known[0] and not read)):
            return
        if read and in_session <= 0:
            self._sessions.pop(session_id, None)
        else:
            self._sessions[session_id] = (at, in_session)
