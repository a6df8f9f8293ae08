"""Prometheus metrics of the service (one registry per service instance)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["ServiceMetrics"]

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
