"""Re-attaching callers who went away: a call that drops is kept for its caller (for
``GATEWAY_REATTACH_WINDOW``), and the same call sent again attaches to its question instead of asking
anew; calls of one ``Idempotency-Key`` share one question, on this process (a hold) and across
processes (the key held in the store)."""

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from elicitation_gateway import ids
from elicitation_gateway.deadlines import Deadlines
from elicitation_gateway.gateway.asking import AskOptions
from elicitation_gateway.gateway.errors import KeyReused
from elicitation_gateway.gateway.owed import STORE_RETRY
from elicitation_gateway.records import Record
from elicitation_gateway.settings import Settings
from elicitation_gateway.stores.base import Store, StoreUnavailable
from elicitation_gateway.stores.held_keys import HeldKey
from elicitation_gateway.stores.orphans import DigestMismatch

logger = logging.getLogger(__package__)

KEY_POLL = 0.05
"""Seconds between two looks at a question that a call of the same Idempotency-Key on another replica
is asking."""

Ask = Callable[[str, Any, AskOptions, str | None], Awaitable[Record]]


@dataclass(frozen=True)
class Caller:
    """Who asks what, as far as coming back to a question goes: a call from the same ``key`` (the same
    credentials, session, directory and arguments, or ``Idempotency-Key``) attaches to the question a
    call of that key left orphaned. ``digest`` is the request's own (an ``Idempotency-Key`` reused with
    another body is refused)."""

    key: str
    digest: str = ""
    exclusive: bool = False
    """Whether ``key`` names one question from the start of the first call (an ``Idempotency-Key`` on
    ``POST /elicit``): calls of that key at once, or while it waits, wait on that one question, where
    two identical MCP calls, both connected, are two questions."""
    proven: bool = False
    """Whether ``key`` holds something only this caller has (an ``Idempotency-Key``), not only what
    any caller with the same credentials could send: only then is an answer given while the caller was
    away handed to the call that comes back."""


@dataclass
class Hold:
    """An ``Idempotency-Key`` held on this process, from the start of its first call until the last
    call waiting under it is gone: its question (None: the call asking went away first; ask again)."""

    digest: str
    record: "asyncio.Future[Record | None]"
    holders: int = 1
    orphaning: bool = False
    """The last call went away; the key is free once its question is kept for it (see ``gone``)."""
    gone: asyncio.Event = field(default_factory=asyncio.Event)
    shared: HeldKey | None = None
    """The key as held in the store, across processes, by this process's calls."""


class Reattach:
    """``ask`` asks a question (:meth:`.Asking.ask`); ``owe`` owes a finish the store cannot take now;
    ``spawn`` runs a coroutine on a task of its own; ``released`` is told when a question is no longer
    kept for its caller (the store may hear that no tool waits on it)."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        ask: Ask,
        owe: Callable[[str, str], None],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        released: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.store = store
        self.ask = ask
        self.owe = owe
        self.spawn = spawn
        self.released = released
        self.holds: dict[str, Hold] = {}  # Idempotency-Keys of calls asking or waiting here
        self.orphaned: set[str] = set()  # questions whose caller went away, kept for it to come back
        self._asking: set[asyncio.Future[Record]] = set()  # asks going on for callers already gone
        self.windows = Deadlines(lambda request_id: spawn(self._end_orphan(request_id)))

    def stop(self) -> None:
        """No more windows end (at shutdown)."""
        self.windows.clear()

    def keeps(self, request_id: str) -> bool:
        """Whether ``request_id`` is kept for a caller that went away."""
        return request_id in self.orphaned

    def hold_of(self, caller: Caller | None) -> Hold | None:
        """The hold an ``exclusive`` caller's call waits under (taken by :meth:`ask_or_attach`)."""
        return self.holds.get(caller.key) if caller is not None and caller.exclusive else None

    async def ask_or_attach(
        self, message: str, schema: Any, options: AskOptions, caller: Caller | None = None
    ) -> Record:
        """:meth:`.Asking.ask`, unless ``caller`` left a question orphaned within the re-attach window:
        then that question, pending (its wait goes on) or, for a ``proven`` caller, finished while the
        caller was away (its result, once). An ``exclusive`` caller's key is held from the start: calls
        of that key meanwhile wait for its question and attach to it. Raises :class:`KeyReused` when the
        key's question was asked with another body. The :meth:`.Gateway.final_result` of an
        ``exclusive`` caller must follow (it gives the hold back).

        A ``caller`` that goes away (its call cancelled) while its question is being made, as a shared
        store's write is awaited, does not cut the ask short: the question, once made, is kept for the
        caller as if it had gone during the wait (else a question already announced would be withdrawn
        for a caller that may come back)."""
        if caller is None:
            return await self.ask(message, schema, options, None)
        asking = asyncio.ensure_future(self._ask_or_attach(message, schema, options, caller))
        try:
            return await asyncio.shield(asking)
        except asyncio.CancelledError:
            self._asking.add(asking)
            asking.add_done_callback(functools.partial(self._made_for_gone, caller))
            raise

    def _made_for_gone(self, caller: Caller, asking: asyncio.Future[Record]) -> None:
        """The ask of a caller that went away meanwhile is done: what a cancelled wait does
        (:meth:`.Waiting.final_result`) for the question it made; nothing for an ask refused (it undid
        itself)."""
        self._asking.discard(asking)
        if asking.cancelled() or asking.exception() is not None:
            return
        record = asking.result()
        hold = self.hold_of(caller)
        if record.result is not None or not self.went_away(record, caller, hold):
            self.release(caller, hold)

    async def _ask_or_attach(self, message: str, schema: Any, options: AskOptions, caller: Caller) -> Record:
        if not caller.exclusive:
            return await self._claim_or_ask(message, schema, options, caller)
        while (hold := self.holds.get(caller.key)) is not None:
            if hold.digest != caller.digest:
                raise KeyReused("this Idempotency-Key was used with another body")
            if hold.orphaning:  # the last call under it went away: its question is being orphaned
                await hold.gone.wait()
                continue
            hold.holders += 1
            try:
                record = await asyncio.shield(hold.record)
            except BaseException:
                self.release(caller, hold)
                raise
            if record is not None:
                logger.info("elicitation %s attached to by a call of the same Idempotency-Key", record.id)
                return record
            self.release(caller, hold)  # the call asking went away before its question was made: ask
        hold = self.holds[caller.key] = Hold(caller.digest, asyncio.get_running_loop().create_future())
        try:
            record = await self._join_and_ask(message, schema, options, caller, hold)
        except BaseException as error:
            # The key is free at once; those waiting on it get the same refusal, or ask again.
            del self.holds[caller.key]
            hold.gone.set()
            self._let_go(caller, hold, free=True)
            if isinstance(error, asyncio.CancelledError):
                hold.record.set_result(None)
            else:
                hold.record.set_exception(error)
                hold.record.exception()  # retrieved: nobody else may be waiting
            raise
        hold.record.set_result(record)
        return record

    async def _join_and_ask(
        self, message: str, schema: Any, options: AskOptions, caller: Caller, hold: Hold
    ) -> Record:
        """The question of ``caller``'s key, held in the store across processes: asked (or an orphan
        claimed) by the call that holds it first, waited for by those that join."""
        while True:
            request_id = ids.question_id()
            try:
                joined = await self.store.held_keys.join(caller.key, caller.digest, request_id)
            except DigestMismatch:
                raise KeyReused("this Idempotency-Key was used with another body") from None
            if joined is None:  # its last call went away on another replica: its question is being kept
                await asyncio.sleep(KEY_POLL)
                continue
            hold.shared = joined
            if joined.first:
                break
            if (record := await self._asked_elsewhere(caller, joined)) is not None:
                logger.info("elicitation %s attached to by a call of the same Idempotency-Key", record.id)
                return record
            hold.shared = None  # freed with no question (its ask was refused): hold it anew
        record = await self._claim_or_ask(message, schema, options, caller, request_id)
        if record.id != request_id:
            await self.store.held_keys.rekey(caller.key, joined.epoch, record.id)
        return record

    async def _asked_elsewhere(self, caller: Caller, joined: HeldKey) -> Record | None:
        """The question a call of the key on another replica asks, once asked; None if that call lets
        go of the key without one."""
        request_id = joined.request_id
        while (record := await self.store.get(request_id)) is None:
            held = await self.store.held_keys.held(caller.key)
            if held is None or held.epoch != joined.epoch:
                return None
            if held.request_id == request_id:
                await asyncio.sleep(KEY_POLL)
            request_id = held.request_id
        return record

    def _let_go(self, caller: Caller, hold: Hold, *, free: bool = False) -> None:
        """This process's calls of the key are gone: the store hears it (on a task of its own, since
        they may be cancelled); ``free`` frees the key if this process took it."""
        shared, hold.shared = hold.shared, None
        if shared is not None:
            self.spawn(self._leave_key(caller, shared, free=free and shared.first))

    async def _leave_key(self, caller: Caller, shared: HeldKey, *, free: bool) -> None:
        with contextlib.suppress(StoreUnavailable):  # its lease lapses
            if free:
                await self.store.held_keys.free(caller.key, shared.epoch)
            else:
                await self.store.held_keys.leave(caller.key, shared.epoch)

    async def _claim_or_ask(
        self, message: str, schema: Any, options: AskOptions, caller: Caller, request_id: str | None = None
    ) -> Record:
        while True:
            try:
                claimed = await self.store.orphans.claim(caller.key, caller.digest)
            except DigestMismatch:
                raise KeyReused("this Idempotency-Key was used with another body") from None
            if claimed is None:
                return await self.ask(message, schema, options, request_id)
            record = await self.store.get(claimed)
            if record is None:
                continue
            if record.pending or caller.proven:
                logger.info("elicitation %s attached to again by its caller", record.id)
                return record
            # Finished while its caller was away, and nothing shows this call is that caller (another
            # agent with the same credentials asks the same): its answer goes to nobody.
            logger.info("elicitation %s finished while its caller was away; asked anew", record.id)

    def release(self, caller: Caller | None, hold: Hold | None) -> None:
        """One call under ``caller``'s key, ``hold``, is done; the key is free once the last one is."""
        if caller is None or hold is None:
            return
        hold.holders -= 1
        if hold.holders <= 0 and self.holds.get(caller.key) is hold:
            del self.holds[caller.key]
            hold.gone.set()
            self._let_go(caller, hold)

    def went_away(self, record: Record, caller: Caller | None, hold: Hold | None) -> bool:
        """A call waiting on ``record`` was cancelled (its caller went away): the question is kept for
        the caller to come back to (with a ``caller`` and a window), or its withdrawal owed. True when
        the kept question holds ``hold`` until it is kept (the call must not :meth:`release` it). No
        await: the cancelled call could be cancelled again at the next one."""
        if hold is not None and hold.holders > 1:
            return False  # other calls of its key still wait on the question
        if hold is not None and caller is not None:  # unless calls of its key elsewhere still wait
            hold.orphaning = True  # calls of its key here wait until it is kept
            self.orphaned.add(record.id)
            self.spawn(self._leave_last(record, caller, hold))
            return True
        if caller is not None and self.settings.reattach_window > 0:
            self._orphan_later(record, caller, None)
        else:
            self.owe(record.id, "withdrawn")
        return False

    async def _leave_last(self, record: Record, caller: Caller, hold: Hold) -> None:
        """The last call of an Idempotency-Key on this process went away: its question is kept for the
        key (or withdrawn, without a window) unless calls of the key on other replicas still wait."""
        keep = self.settings.reattach_window > 0
        shared, hold.shared = hold.shared, None
        try:
            left = (
                0 if shared is None else await self.store.held_keys.leave(caller.key, shared.epoch, keep=keep)
            )
        except StoreUnavailable:
            left = 0
        if left > 0 or not keep:
            self.orphaned.discard(record.id)
            if left == 0:
                self.owe(record.id, "withdrawn")
            else:
                self.released(record.id)
            self.release(caller, hold)
            return
        try:
            await self._orphan(record, caller, hold)
        finally:
            if shared is not None:
                with contextlib.suppress(StoreUnavailable):  # its lease lapses
                    await self.store.held_keys.free(caller.key, shared.epoch)

    def _orphan_later(self, record: Record, caller: Caller, hold: Hold | None) -> None:
        """Keep ``record`` for its caller to come back to (made on a task: its caller is cancelled).
        Calls of its key meanwhile wait for ``hold`` to be gone, and then claim it."""
        self.orphaned.add(record.id)
        self.spawn(self._orphan(record, caller, hold))

    async def _orphan(self, record: Record, caller: Caller, hold: Hold | None) -> None:
        window = self.settings.reattach_window
        try:
            await self.store.orphans.orphan(caller.key, record.id, caller.digest, window)
        except StoreUnavailable:
            self.orphaned.discard(record.id)
            self.owe(record.id, "withdrawn")
            return
        finally:
            self.release(caller, hold)  # the key is free: the next call of it claims the orphan
        self.windows.set(record.id, window)
        logger.info("elicitation %s: its caller went away; kept for it for %g s", record.id, window)

    async def _end_orphan(self, request_id: str) -> None:
        """The re-attach window ended: withdrawn if nobody came back for it (and it is still pending)."""
        try:
            unclaimed = await self.store.orphans.end(request_id)
        except StoreUnavailable:
            self.windows.set(request_id, STORE_RETRY)
            return
        self.orphaned.discard(request_id)
        if not unclaimed:
            self.released(request_id)
            return
        record = await self.store.get(request_id)  # nobody came back for it
        if record is not None and record.pending:
            self.owe(request_id, "nobody came back for it")
        else:
            self.released(request_id)
