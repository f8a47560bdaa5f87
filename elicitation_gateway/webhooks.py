"""Signed webhooks (``GATEWAY_WEBHOOK_URLS``): every ``question.*`` event POSTed to each receiver.

Each delivery is signed as the Standard Webhooks specification says (``webhook-id``,
``webhook-timestamp``, ``webhook-signature: v1,<base64 HMAC-SHA256 of id.timestamp.body>``), with the
``standardwebhooks`` package, so any of its receivers' libraries verifies it. The body is
``{"type", "timestamp", "data"}``; the id is the event's, the same on every attempt, so a receiver can
drop a repeat.

A receiver that is slow, failing or never answers costs nobody else anything: each has its own queue
and its own few deliveries in flight, an attempt ends at its deadline whatever the receiver does
(drip-fed bytes included: the async client is cancelled), and a failed delivery waits for its retry
off the queue, so the next event is not held behind it. :meth:`WebhookSender.submit` only queues.
"""

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from standardwebhooks import Webhook

from elicitation_gateway.encoding import dumps
from elicitation_gateway.stores.base import Store, StoreUnavailable

logger = logging.getLogger(__name__)

QUEUE_SIZE = 1000
"""Deliveries waiting for one receiver; past that, new ones are dropped (and counted)."""
IN_FLIGHT = 4
"""Attempts running at once for one receiver."""
RETRIES = (1.0, 5.0, 30.0, 120.0, 600.0)
"""Seconds before each retry of a failed delivery: six attempts in all, over about 13 minutes."""
ATTEMPT_TIMEOUT = 10.0
"""Seconds one attempt may take, connection, request and response together."""
OUTCOMES = ("sent", "retried", "failed", "dropped")
CLAIM_SECONDS = 86_400.0
"""How long the replica that claimed an event's delivery keeps it claimed: past any replay of it."""
RESUBSCRIBE = 1.0
"""Seconds before following the store's events again after it could not be reached."""
USER_AGENT = "elicitation-gateway-webhooks"

Outcome = Callable[[str, str], None]
"""Told ``(receiver URL, outcome)`` for each attempt's end: ``sent``, ``retried``, ``failed`` (no
retry left) or ``dropped`` (the receiver's queue was full)."""


def webhook_body(event_type: str, data: dict[str, Any], at: datetime) -> bytes:
    """The body the specification suggests: the event's type, when it happened (RFC 3339), its data."""
    stamp = at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return dumps({"type": event_type, "timestamp": stamp, "data": data}).encode()


@dataclass(slots=True)
class Delivery:
    id: str
    body: bytes
    attempt: int = 0
    """Attempts made so far that failed."""


class _Receiver:
    """One URL's queue and workers."""

    def __init__(self, url: str, sender: "WebhookSender") -> None:
        self.url = url
        self.sender = sender
        self.queue: asyncio.Queue[Delivery] = asyncio.Queue(QUEUE_SIZE)
        self.waiting: set[asyncio.Task[None]] = set()
        self.workers: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.workers = [asyncio.create_task(self._work()) for _ in range(IN_FLIGHT)]

    def offer(self, delivery: Delivery) -> None:
        try:
            self.queue.put_nowait(delivery)
        except asyncio.QueueFull:
            logger.warning("webhook %s: %d deliveries waiting; %s dropped", self.url, QUEUE_SIZE, delivery.id)
            self.sender.told(self.url, "dropped")

    async def _work(self) -> None:
        while True:
            delivery = await self.queue.get()
            try:
                ok = await self.sender.attempt(self.url, delivery)
            except Exception:  # a receiver must never end the worker
                logger.exception("webhook %s: delivery %s failed", self.url, delivery.id)
                ok = False
            finally:
                self.queue.task_done()
            if ok:
                self.sender.told(self.url, "sent")
            elif delivery.attempt < len(self.sender.retries):
                delay = self.sender.retries[delivery.attempt]
                delivery.attempt += 1
                self.sender.told(self.url, "retried")
                retry = asyncio.create_task(self._again(delivery, delay))
                self.waiting.add(retry)
                retry.add_done_callback(self.waiting.discard)
            else:
                attempts = delivery.attempt + 1
                logger.warning(
                    "webhook %s: %s not delivered after %d attempts", self.url, delivery.id, attempts
                )
                self.sender.told(self.url, "failed")

    async def _again(self, delivery: Delivery, delay: float) -> None:
        await asyncio.sleep(delay)
        self.offer(delivery)

    async def stop(self) -> None:
        tasks = [*self.waiting, *self.workers]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class WebhookSender:
    """Signs each event once, and delivers it to every receiver on their own queues."""

    def __init__(
        self,
        urls: Iterable[str],
        secret: str,
        *,
        on_outcome: Outcome | None = None,
        retries: tuple[float, ...] = RETRIES,
        timeout: float = ATTEMPT_TIMEOUT,
    ) -> None:
        self.signer = Webhook(secret)
        self.urls = tuple(urls)
        self.retries = retries
        self.timeout = timeout
        self.on_outcome = on_outcome
        self.receivers: list[_Receiver] = []
        self.client: httpx.AsyncClient | None = None

    def start(self) -> None:
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(self.timeout),
            follow_redirects=False,
            limits=httpx.Limits(max_connections=IN_FLIGHT * max(1, len(self.urls))),
            headers={"user-agent": USER_AGENT},
            trust_env=False,
        )
        self.receivers = [_Receiver(url, self) for url in self.urls]
        for receiver in self.receivers:
            receiver.start()

    def submit(self, event_id: str, kind: str, data: dict[str, Any], at: datetime | None = None) -> None:
        """Queue the event for every receiver; returns at once."""
        body = webhook_body(kind, data, at or datetime.now(UTC))
        for receiver in self.receivers:
            receiver.offer(Delivery(event_id, body))

    def headers(self, delivery: Delivery, now: datetime) -> dict[str, str]:
        """Signed at each attempt: receivers refuse a timestamp more than a few minutes old."""
        return {
            "content-type": "application/json",
            "webhook-id": delivery.id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self.signer.sign(delivery.id, now, delivery.body),
        }

    async def attempt(self, url: str, delivery: Delivery) -> bool:
        assert self.client is not None
        headers = self.headers(delivery, datetime.now(UTC))
        try:
            async with asyncio.timeout(self.timeout):
                response = await self.client.post(url, content=delivery.body, headers=headers)
        except (httpx.HTTPError, TimeoutError) as error:
            problem = type(error).__name__
        else:
            if response.is_success:
                return True
            problem = f"HTTP {response.status_code}"
        logger.info("webhook %s: %s attempt %d: %s", url, delivery.id, delivery.attempt + 1, problem)
        return False

    async def drain(self, within: float) -> None:
        """Waits up to ``within`` seconds until no delivery is queued or being sent (retries waiting
        for their time are not waited for)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                for receiver in self.receivers:
                    await receiver.queue.join()

    def told(self, url: str, outcome: str) -> None:
        if self.on_outcome is not None:
            self.on_outcome(url, outcome)

    async def stop(self) -> None:
        for receiver in self.receivers:
            await receiver.stop()
        if self.client is not None:
            await self.client.aclose()


async def relay(store: Store, sender: WebhookSender) -> None:
    """Hands every ``question.*`` event the store publishes to ``sender``, until cancelled; follows
    the store again after a subscription ends (the store closed it, or could not be reached). Every
    replica of a shared store sees every event: the first to claim one (``store.once``,
    :meth:`.Once.claim`) sends it, so a receiver gets it once however many replicas there are."""
    while True:
        try:
            subscription = await store.subscribe()
        except StoreUnavailable:
            await asyncio.sleep(RESUBSCRIBE)
            continue
        try:
            async for event in subscription:
                # Not an event a process makes for its own streams alone (an escalation's question.asked).
                if not (event.type.startswith("question.") and event.replayable):
                    continue
                if not await store.once.claim(f"webhook:{event.id}", CLAIM_SECONDS):
                    continue  # another replica sends it
                sender.submit(event.id, event.type, event.properties)
        except StoreUnavailable:
            pass
        finally:
            subscription.close()
        await asyncio.sleep(RESUBSCRIBE)


class Webhooks:
    """The service's webhooks: a sender for ``GATEWAY_WEBHOOK_URLS``, fed by following the store's
    events, counted in ``gateway_webhooks_total``."""

    def __init__(self, urls: Iterable[str], secret: str, metrics: Any = None) -> None:
        self.positions = {url: str(position) for position, url in enumerate(urls, start=1)}
        self.metrics = metrics
        self.sender = WebhookSender(self.positions, secret, on_outcome=self._count)
        self.following: asyncio.Task[None] | None = None

    def _count(self, url: str, outcome: str) -> None:
        if self.metrics is not None:  # by position: a URL may hold a token
            self.metrics.webhooks.labels(self.positions[url], outcome).inc()

    def start(self, store: Store) -> None:
        self.sender.start()
        self.following = asyncio.create_task(relay(store, self.sender))

    async def stop(self, grace: float = 0) -> None:
        """Stops following the store, then gives what is queued up to ``grace`` seconds to go out."""
        if self.following is not None:
            await asyncio.sleep(0.05)  # the events just published reach the sender first
            self.following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.following
        await self.sender.drain(grace)
        await self.sender.stop()
