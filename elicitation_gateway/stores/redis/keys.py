"""The names of the store's keys in Redis, all under one prefix (the package's docstring lists them)."""

import hashlib


class Keys:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.pending = f"{prefix}:pending"
        self.sessions = f"{prefix}:sessions"
        self.events = f"{prefix}:events"
        self.replicas = f"{prefix}:replicas"
        self.orphaned_prefix = f"{prefix}:orphaned:"
        """An orphaned id's key is this and the id (the claiming script is given the prefix)."""
        self._record_prefix = f"{prefix}:record:"
        self._replica_prefix = f"{prefix}:replica:"
        self._waits_prefix = f"{prefix}:waits:"
        self._orphans_prefix = f"{prefix}:orphans:"
        self._held_prefix = f"{prefix}:held:"

    def record(self, request_id: str) -> str:
        return self._record_prefix + request_id

    def claimed(self, name: str) -> str:
        """A claim of work one replica does for all (:meth:`.RedisOnce.claim`)."""
        return f"{self.prefix}:claimed:{name}"

    def escalated(self, request_id: str, step: int) -> str:
        """The mark of an escalation step announced (:meth:`.RedisOnce.mark_escalated`)."""
        return f"{self.prefix}:escalated:{request_id}:{step}"

    def changed(self, request_id: str) -> list[str]:
        """The keys the add and finish scripts touch."""
        return [self.record(request_id), self.pending, self.sessions, self.events]

    def replica(self, replica_id: str) -> str:
        """A replica's liveness entry."""
        return self._replica_prefix + replica_id

    def waits(self, replica_id: str) -> str:
        """The set of the ids whose tool waits on that replica."""
        return self._waits_prefix + replica_id

    def orphaned(self, request_id: str) -> str:
        return self.orphaned_prefix + request_id

    def orphans(self, caller: str) -> str:
        """The list of a caller's orphaned ids."""
        return self._orphans_prefix + hashed(caller)

    def held(self, caller: str) -> str:
        """The hash of a caller's Idempotency-Key, held across replicas."""
        return self._held_prefix + hashed(caller)


def hashed(caller: str) -> str:
    """A caller's fingerprint as a key: short, and holding none of what it was made of."""
    return hashlib.sha256(caller.encode()).hexdigest()[:32]
