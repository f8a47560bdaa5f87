"""Following the store: what the last process left in a durable store (resumed at start), and with a
shared store (Redis) every replica's questions: each replica times every pending question, so a timeout
fires even when the replica that asked is gone, and withdraws those whose tool waited on a replica found
gone."""

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from elicitation_gateway import events
from elicitation_gateway.gateway.admission import Admission
from elicitation_gateway.gateway.expiry import CANCEL, Expiry
from elicitation_gateway.gateway.owed import STORE_RETRY
from elicitation_gateway.records import Record
from elicitation_gateway.stores.base import Store, StoreUnavailable


class Following:
    """``expiry`` times the questions followed, ``admission`` charges them; ``finish`` finishes a
    record, ``owe`` owes a finish the store cannot take now, ``closing`` says whether the gateway
    stops."""

    def __init__(
        self,
        store: Store,
        expiry: Expiry,
        admission: Admission,
        *,
        finish: Callable[..., Awaitable[Record | None]],
        owe: Callable[[str, str], None],
        closing: Callable[[], bool],
        follow: Callable[[Record], None] = lambda record: None,
    ) -> None:
        self.follow = follow
        """Told of each pending question followed (its escalation is timed here too)."""
        self.store = store
        self.expiry = expiry
        self.admission = admission
        self.finish = finish
        self.owe = owe
        self.closing = closing
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Where other processes publish into the store, follow it; else resume what the store's last
        process left (if its questions outlive it)."""
        if self.store.others_publish:
            loop = asyncio.get_running_loop()
            self._tasks = [
                loop.create_task(self._watch_questions()),
                loop.create_task(self._watch_abandoned()),
            ]
            return
        # Questions whose tool waited on a blocking request to the last process have nobody to collect
        # their answer (withdrawn); the others resume their timers (those that expired meanwhile expire
        # now).
        for request_id in await self.store.tool_liveness.abandoned():
            await self.finish(request_id, "cancelled", {"action": CANCEL}, reason="tool gone at restart")
        for record in await self.store.pending():
            self.admission.carry(record)
            self.expiry.schedule(record.id, record.expires_at - time.time())
            self.follow(record)

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def _watch_abandoned(self) -> None:
        """The questions whose tool waited on a replica found gone are withdrawn."""
        while not self.closing():
            with contextlib.suppress(StoreUnavailable):
                for request_id in await self.store.tool_liveness.abandoned():
                    self.owe(request_id, "its tool's replica is gone")
            await asyncio.sleep(STORE_RETRY)

    async def _watch_questions(self) -> None:
        """Subscribing announces every pending question (also after Redis comes back); then each new one
        is announced as it is asked; the store lets only the first replica finish it."""
        while not self.closing():
            try:
                subscription = await self.store.subscribe()
                try:
                    for event in subscription.backlog:
                        await self.adopt(event)
                    async for event in subscription:
                        await self.adopt(event)
                finally:
                    subscription.close()
            except StoreUnavailable:
                pass
            await asyncio.sleep(1)

    async def adopt(self, event: events.Event) -> None:
        """Time and charge a question another replica asked; forget one finished."""
        if event.type in (events.REPLIED, events.REJECTED):
            self.expiry.discard(event.properties["requestID"])
            self.admission.discharge(event.properties["requestID"])
            return
        if event.type == events.ASKED and event.properties["id"] not in self.expiry:
            record = await self.store.get(event.properties["id"])
            if record is not None and record.pending:
                self.expiry.schedule(record.id, record.expires_at - time.time())
                self.admission.carry(record)
                self.follow(record)
