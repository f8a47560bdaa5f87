"""Prometheus metrics of one gateway, in a registry of its own (several apps may share a process)."""

from collections.abc import Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
"""What ``generate_latest`` writes: the classic text format (legacy names), which every Prometheus reads."""


class _WithoutCreated(Collector):
    """A registry's metrics without their ``*_created`` samples.

    Each counter and histogram would add a ``_created`` gauge holding the time it was made: a series per
    family that no dashboard reads. The library turns them off only for the whole process
    (``disable_created_metrics``), which would change the metrics of any application the gateway is
    served inside; this view drops them from the gateway's own registry alone.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():  # fresh Metric objects on every collect: ours to change
            metric.samples = [sample for sample in metric.samples if not sample.name.endswith("_created")]
            yield metric


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # The process's CPU, memory and file descriptors (read from /proc, on Linux), the garbage
        # collector's counts, and the Python version: what the default registry would have had.
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.pending = Gauge(
            "gateway_pending_questions", "Elicitations waiting for an answer.", registry=self.registry
        )
        self.pending_bytes = Gauge(
            "gateway_pending_bytes",
            "Bytes of memory the pending questions hold, as charged to GATEWAY_MAX_PENDING_BYTES.",
            registry=self.registry,
        )
        self.asked = Counter("gateway_elicitations_asked", "Elicitations asked.", registry=self.registry)
        self.finished = Counter(
            "gateway_elicitations_finished",
            "Elicitations finished, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.time_to_answer = Histogram(
            "gateway_time_to_answer_seconds",
            "Seconds from question.asked to the person's reply.",
            buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600),
            registry=self.registry,
        )
        self.subscribers = Gauge(
            "gateway_sse_subscribers",
            "Open event streams (/event and /global/event).",
            registry=self.registry,
        )
        self.events_sent = Counter(
            "gateway_events_sent", "SSE frames written to subscribers.", registry=self.registry
        )
        self.notifications = Counter(
            "gateway_notifications",
            "Notifications (GATEWAY_NOTIFY) by target (position:scheme) and outcome: sent, failed after "
            "every attempt, skipped (the question finished first), dropped (queue full, or shutdown).",
            ["target", "outcome"],
            registry=self.registry,
        )
        self.webhooks = Counter(
            "gateway_webhooks",
            "Webhook deliveries (GATEWAY_WEBHOOK_URLS) by receiver (its position) and outcome: sent, "
            "retried, failed after every attempt, dropped (queue full).",
            ["receiver", "outcome"],
            registry=self.registry,
        )
        self.answers = Counter(
            "gateway_answers",
            "Replies and rejections by the way they came (via: page, terminal, opencode, api, link, "
            "webhook) and the action the tool got (accept, decline, cancel).",
            ["via", "action"],
            registry=self.registry,
        )
        self._exposed = _WithoutCreated(self.registry)

    def exposition(self) -> bytes:
        return generate_latest(self._exposed)
