"""Idempotency-Keys held across processes, from the first call's arrival: calls of one key sent at once to
several replicas share one question.

A store exposes its part as ``store.held_keys``. :class:`ProcessHeldKeys`, for a store of one process,
holds nothing (the gateway holds keys in the process): the call is always first, and alone. The Redis
store holds keys in Redis (:mod:`.redis.callers`).
"""

import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass


@dataclass(frozen=True)
class HeldKey:
    """An ``Idempotency-Key`` held across processes (a shared store) by the calls that use it, from the
    first one's arrival: ``request_id`` is the question they share (it may not be asked yet), ``epoch``
    tells this holding from a later one of the same key, ``first`` whether this call took it."""

    epoch: str
    request_id: str
    first: bool


class HeldKeys(ABC):
    @abstractmethod
    async def join(self, caller: str, digest: str, request_id: str) -> HeldKey | None:
        """Join the calls holding ``caller``'s key, or hold it for ``request_id`` if none does. None
        while the last call's question is being kept for it (:meth:`leave` with ``keep``): join again
        shortly. Raises :class:`.orphans.DigestMismatch` when it is held for another ``digest``."""

    @abstractmethod
    async def held(self, caller: str) -> HeldKey | None:
        """How ``caller``'s key is held now, if it is."""

    @abstractmethod
    async def rekey(self, caller: str, epoch: str, request_id: str) -> None:
        """The key, held since ``epoch``, now stands for ``request_id`` (an orphan claimed)."""

    @abstractmethod
    async def leave(self, caller: str, epoch: str, *, keep: bool = False) -> int:
        """One process's calls of the key are gone; how many holders are left. With ``keep``, the last
        one leaves the key held (others :meth:`join` nothing meanwhile) until :meth:`free`."""

    @abstractmethod
    async def free(self, caller: str, epoch: str) -> None:
        """The key held since ``epoch`` is free (its ask failed, or its question is kept for it)."""


class ProcessHeldKeys(HeldKeys):
    """A store of one process holds no key: every call is the first, and alone."""

    async def join(self, caller: str, digest: str, request_id: str) -> HeldKey | None:
        return HeldKey(secrets.token_hex(8), request_id, first=True)

    async def held(self, caller: str) -> HeldKey | None:
        return None

    async def rekey(self, caller: str, epoch: str, request_id: str) -> None:
        pass

    async def leave(self, caller: str, epoch: str, *, keep: bool = False) -> int:
        return 0

    async def free(self, caller: str, epoch: str) -> None:
        pass
