"""The tools waiting for answers on blocking requests to this process, and the questions whose tool waited
on a process that died: nobody can collect those any more, and the gateway withdraws them.

A store exposes its part as ``store.tool_liveness``. :class:`ProcessToolLiveness`, for a store whose
pending questions end with its process, notes nothing and finds nothing abandoned. The SQLite store
notes waits in its file and names, at start, those of the process before (:mod:`.sqlite_liveness`); the
Redis store keeps a set per replica and claims those of replicas gone (:mod:`.redis.liveness`).
"""

from abc import ABC, abstractmethod


class ToolLiveness(ABC):
    @abstractmethod
    def waits(self, request_id: str) -> None:
        """A tool waits for this pending record on a blocking request to this process. A store whose
        pending questions outlive the process notes it: after a crash nobody can collect the answer, and
        :meth:`abandoned` names it."""

    @abstractmethod
    def done(self, request_id: str) -> None:
        """The tool no longer waits for this record on this process (it got its result, or its question
        was withdrawn); also called for each id :meth:`abandoned` gave, once it is finished."""

    @abstractmethod
    async def abandoned(self) -> list[str]:
        """Pending records whose tool waited on a blocking request to a process that died, and that the
        gateway withdraws. A durable store names those found at start; a shared store, those of
        replicas found gone since (called every second), until :meth:`done` says each is finished."""


class ProcessToolLiveness(ToolLiveness):
    """Pending questions end with this process: no wait needs noting, none is ever abandoned."""

    def waits(self, request_id: str) -> None:
        pass

    def done(self, request_id: str) -> None:
        pass

    async def abandoned(self) -> list[str]:
        return []
