"""Cluster health and lifecycle (seed 003): probe results in, state transitions out.

Healthy: ``/readyz`` answers 200. Degraded: the server answers but is not ready. Unreachable:
no answer ``failure_threshold`` times in a row. Unknown: not probed yet. A change of
``/version`` is an upgrade. With ``gone_after`` (the issue's default: 5), that many failed
probes in a row declare the cluster gone: one ``cluster.removed`` event (``declaredGone``),
until it answers again -- what ``core.orphans`` then computes is the same as for a deleted
Argo CD cluster Secret.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from fleetwarden.core.skips import Skip

__all__ = [
    "ClusterHealth",
    "HealthTracker",
    "LifecycleEvent",
    "LifecycleType",
    "ProbeResult",
    "SkipEvent",
]


class ClusterHealth(StrEnum):
    UNKNOWN = "Unknown"
    HEALTHY = "Healthy"
    DEGRADED = "Degraded"
    UNREACHABLE = "Unreachable"


class LifecycleType(StrEnum):
    ADDED = "cluster.added"
    REMOVED = "cluster.removed"
    HEALTH = "cluster.health"
    UPGRADED = "cluster.upgraded"
    SCALED = "pool.scaled"
    DEPRECATIONS = "cluster.deprecations"
    UPGRADE_SCAN = "cluster.upgrade_scan"  # Argo CD apps' manifests at the new version
    UPGRADE_IN_PROGRESS = "upgrade.in_progress"  # a pool's expected drift while it upgrades
    CACHE_FULL = "cluster.cache_full"
    WATCH_REFUSED = "cluster.watch_refused"  # RBAC or a missing API: that resource is unseen
    NOT_COMPARED = "cluster.not_compared"  # a watch ended before the cluster's nodes were listed
    # a desired pool of a cluster just added is not compared (defined more than once there,
    # a name not known): its details are scan's ``skipped[]`` entry (path, reason, pool)
    POOL_NOT_COMPARED = "pool.not_compared"
    # a desired file a watch did not compare: not read (``problem``), or no pool defined there
    FILE_SKIPPED = "file.skipped"
    CHURN = "churn"  # nodes added/removed/replaced by the provider or an autoscaler (core.churn)


@dataclass(frozen=True, slots=True)
class LifecycleEvent:
    type: LifecycleType
    cluster: str
    at: datetime
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "cluster": self.cluster,
            "at": self.at.isoformat().replace("+00:00", "Z"),
            **self.details,
        }


@dataclass(frozen=True, slots=True)
class SkipEvent:
    """Desired state a watch compares in no cluster, said as it starts: ``scan``'s
    ``skipped[]`` entry of a file not read or that defines no pool (``file.skipped``), or of a
    pool whose cluster is not known (``pool.not_compared`` with ``cluster`` null)."""

    skip: Skip
    at: datetime

    @property
    def type(self) -> LifecycleType:
        if self.skip.pool is not None:
            return LifecycleType.POOL_NOT_COMPARED
        return LifecycleType.FILE_SKIPPED

    def to_json(self) -> dict[str, Any]:
        at = self.at.isoformat().replace("+00:00", "Z")
        return {"type": self.type.value, "cluster": None, "at": at, **self.skip.to_json()}


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """``ready`` None: no answer at all (``error`` says why)."""

    ready: bool | None
    version: str | None = None
    detail: str = ""
    error: str | None = None


@dataclass(slots=True)
class HealthTracker:
    cluster: str
    failure_threshold: int = 3
    state: ClusterHealth = ClusterHealth.UNKNOWN
    version: str | None = None
    failures: int = 0
    gone_after: int | None = None  # failed probes in a row that declare the cluster gone
    gone: bool = False
    last_error: str | None = None  # why the last probe had no answer (None after an answer)

    def observe(self, probe: ProbeResult, *, now: datetime) -> list[LifecycleEvent]:
        events: list[LifecycleEvent] = []
        self.last_error = probe.error or "no answer" if probe.ready is None else None
        if probe.ready is None:
            self.failures += 1
            new = (
                ClusterHealth.UNREACHABLE if self.failures >= self.failure_threshold else self.state
            )
        else:
            self.failures = 0
            self.gone = False
            new = ClusterHealth.HEALTHY if probe.ready else ClusterHealth.DEGRADED
        if new != self.state:
            events.append(
                LifecycleEvent(
                    LifecycleType.HEALTH,
                    self.cluster,
                    now,
                    {
                        "from": self.state.value,
                        "to": new.value,
                        "reason": probe.error or probe.detail or None,
                    },
                )
            )
            self.state = new
        if self.gone_after is not None and self.failures >= self.gone_after and not self.gone:
            self.gone = True
            events.append(
                LifecycleEvent(
                    LifecycleType.REMOVED,
                    self.cluster,
                    now,
                    {
                        "reason": f"no answer to {self.failures} probes in a row",
                        "declaredGone": True,
                    },
                )
            )
        if probe.version:
            if self.version is not None and probe.version != self.version:
                events.append(
                    LifecycleEvent(
                        LifecycleType.UPGRADED,
                        self.cluster,
                        now,
                        {"from": self.version, "to": probe.version},
                    )
                )
            self.version = probe.version
        return events
