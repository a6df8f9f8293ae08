"""Prometheus metrics of the service (one registry per service instance), and the one
exposition a supervised ``serve``'s gateway process answers for both processes
(``merge_metrics``): the gateway's families (deliveries received, accepted, refused;
handshakes; queue depth), the worker's (inspections, latencies, findings, coalesced), the sum
of both for duplicates (folded by the queue + found by the stores), and
``fleetwarden_process_up{process}``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from fleetwarden.ports.queue import EventQueue, QueueUnavailable

__all__ = [
    "GATEWAY_FAMILIES",
    "SUMMED_FAMILIES",
    "IngestMetrics",
    "ServiceMetrics",
    "merge_metrics",
]

# from a change to its finding (watch: seconds), and from a change to its clearing (minutes+)
_DETECT_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 1800, 3600)
_RESTORE_BUCKETS = (10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
# cloud audit trails deliver 1-15 minutes after the change; webhooks within seconds
_DELIVERY_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.received = Counter(
            "fleetwarden_events_received_total",
            "HTTP deliveries received, by source",
            ["source"],
            registry=r,
        )
        self.accepted = Counter(
            "fleetwarden_events_accepted_total",
            "Change events durably queued, by source",
            ["source"],
            registry=r,
        )
        self.rejected = Counter(
            "fleetwarden_events_rejected_total",
            "Deliveries refused, by source and reason",
            ["source", "reason"],
            registry=r,
        )
        self.handshakes = Counter(
            "fleetwarden_handshakes_total",
            "Subscription validation handshakes answered",
            ["source"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "fleetwarden_queue_depth", "Events stored and not yet processed", registry=r
        )
        self.duplicates = Counter(
            "fleetwarden_events_duplicate_total",
            "Redelivered events: folded by the queue, or already stored when processed",
            registry=r,
        )
        self.coalesced = Counter(
            "fleetwarden_events_coalesced_total",
            "Events folded into another inspection of the same pool",
            registry=r,
        )
        self.inspections = Counter(
            "fleetwarden_inspections_total", "Targeted pool inspections run", ["result"], registry=r
        )
        self.event_to_finding = Histogram(
            "fleetwarden_event_to_finding_seconds",
            "From an event's receipt to the end of the inspection it triggered",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.event_delivery_delay = Histogram(
            "fleetwarden_event_delivery_delay_seconds",
            "From a change (the provider's event time) to its receipt: the provider's delay",
            ["provider"],
            buckets=_DELIVERY_BUCKETS,
            registry=r,
        )
        self.time_to_detect = Histogram(
            "fleetwarden_time_to_detect_seconds",
            "From a change (the finding's startedAt) to its finding (detectedAt)",
            ["cluster", "layer"],
            buckets=_DETECT_BUCKETS,
            registry=r,
        )
        self.time_to_restore = Histogram(
            "fleetwarden_time_to_restore_seconds",
            "From a change (the finding's startedAt) to the finding clearing",
            ["cluster", "layer"],
            buckets=_RESTORE_BUCKETS,
            registry=r,
        )
        self.findings = Gauge(
            "fleetwarden_findings", "Current findings by severity", ["severity"], registry=r
        )
        self.leader = Gauge(
            "fleetwarden_leader",
            "1 while this replica leads (acts on findings), else 0; 1 without leader election",
            registry=r,
        )

    async def read_queue_depth(self, queue: EventQueue) -> None:
        """The queue depth gauge set from ``queue``; it keeps its last value when the queue
        cannot answer (``/metrics`` must answer all the same)."""
        with contextlib.suppress(QueueUnavailable):
            self.queue_depth.set(await queue.depth())


class IngestMetrics:
    """The gateway's ingest counters (``app.ingesting.IngestCounters``) over the service's
    Prometheus metrics, the label children kept."""

    def __init__(self, metrics: ServiceMetrics, parsers: Mapping[str, object]) -> None:
        self.metrics = metrics
        self.received = {src: metrics.received.labels(src) for src in parsers}
        self.accepted = {src: metrics.accepted.labels(src) for src in parsers}
        self.rejected: dict[tuple[str, str], Counter] = {}

    def reject(self, source: str, reason: str) -> None:
        child = self.rejected.get((source, reason))
        if child is None:
            child = self.rejected[(source, reason)] = self.metrics.rejected.labels(source, reason)
        child.inc()

    def accept(self, source: str, events: int, folded: int) -> None:
        self.accepted[source].inc(events)
        if folded:
            self.metrics.duplicates.inc(folded)

    def handshake(self, source: str) -> None:
        self.metrics.handshakes.labels(source).inc()


# what the gateway process counts; the worker's copies of these stay at zero or repeat ours
GATEWAY_FAMILIES = frozenset(
    {
        "fleetwarden_events_received",
        "fleetwarden_events_accepted",
        "fleetwarden_events_rejected",
        "fleetwarden_handshakes",
        "fleetwarden_queue_depth",
    }
)
SUMMED_FAMILIES = frozenset({"fleetwarden_events_duplicate"})  # both processes add to these


def merge_metrics(gateway: Iterable[Metric], worker_text: str | None) -> bytes:
    """One exposition for both processes (which families come from where: the module docstring).
    Without the worker's text, the gateway's families and ``process_up{process="worker"} 0``."""
    ours = {m.name: m for m in gateway}
    theirs = {m.name: m for m in text_string_to_metric_families(worker_text or "")}
    merged: list[Metric] = []
    for name in dict.fromkeys([*ours, *theirs]):
        base = name.removesuffix("_created")
        if base != name and base in ours:
            continue  # the text form's "_created" family: ours carries its own
        mine, other = ours.get(name), theirs.get(name)
        if name in GATEWAY_FAMILIES or other is None:
            chosen = mine
        elif name in SUMMED_FAMILIES and mine is not None:
            chosen = _summed(mine, other)
        else:
            chosen = other
        if chosen is not None:
            merged.append(chosen)
    up = GaugeMetricFamily(
        "fleetwarden_process_up", "1 when the process answers, by process", labels=["process"]
    )
    up.add_metric(["gateway"], 1)
    up.add_metric(["worker"], 1 if worker_text is not None else 0)
    merged.append(up)

    class _Fixed(Collector):
        def collect(self) -> Iterator[Metric]:
            return iter(merged)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed())
    return generate_latest(registry)


def _summed(a: Metric, b: Metric) -> Metric:
    out = Metric(a.name, a.documentation, a.type, a.unit)
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for sample in [*a.samples, *b.samples]:
        key = (sample.name, tuple(sorted(sample.labels.items())))
        if key in values and sample.name.endswith("_created"):
            values[key] = min(values[key], sample.value)  # the earlier start
        else:
            values[key] = values.get(key, 0.0) + sample.value
    for (name, labels), value in values.items():
        out.add_sample(name, dict(labels), value)
    return out
