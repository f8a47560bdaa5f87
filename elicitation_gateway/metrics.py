"""Prometheus metrics of one gateway, in a registry of its own (several apps may share a process)."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.pending = Gauge(
            "gateway_pending_questions", "Elicitations waiting for an answer.", registry=self.registry
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

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
