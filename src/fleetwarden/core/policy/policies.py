"""The policy as configured: actions, modes, statuses and guards (the enums), the rules that
pick an action by severity, layer and owner, and the guards' bounds. Values only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from fnmatch import fnmatchcase

from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.ownership import Owner, Route
from fleetwarden.core.policy.warning import WarnRule

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_POLICY_RULES",
    "REMEDIATIONS",
    "Action",
    "Guard",
    "Guards",
    "Mode",
    "Policy",
    "PolicyRule",
    "Status",
]


class Action(StrEnum):
    IGNORE = "ignore"
    ALERT = "alert"
    SYNC = "sync"  # Argo CD sync
    ROLLBACK = "rollback"  # Argo CD rollback
    RECONCILE = "reconcile"  # Flux reconcile request
    RESTORE = "restore"  # patch the nodes' labels/taints back directly


REMEDIATIONS = frozenset({Action.SYNC, Action.ROLLBACK, Action.RECONCILE, Action.RESTORE})


class Mode(StrEnum):
    DRY_RUN = "dry-run"
    ENFORCE = "enforce"
    APPROVAL = "approval"


class Status(StrEnum):
    PLANNED = "planned"
    DRY_RUN = "dry-run"
    PENDING_APPROVAL = "pending-approval"
    BLOCKED = "blocked"
    EXECUTE = "execute"
    CANCELLED = "cancelled"  # a request that expired or outlived its mode or configuration


class Guard(StrEnum):
    """Which guard stopped (or coalesced) a decision."""

    COOLDOWN = "cooldown"
    COALESCED = "coalesced"
    FLAP = "flap"
    QUARANTINE = "quarantine"  # stopped earlier by the flap guard, still within its window
    BLAST_CLUSTER = "blast-radius-cluster"
    BLAST_FLEET = "blast-radius-fleet"
    EXPIRED = "expired"  # a request not approved in time
    MODE_CHANGED = "mode-changed"  # a request made in another mode
    CONFIG_CHANGED = "config-changed"  # a request made under other rules or routing
    FIGHT = "fight"  # writers alternate on the field: a heal would be one more (core.fights)
    DENIED = "denied"  # a request an operator refused (``deny``)


# --- rules ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """Matches findings at or above ``min_severity`` whose layer, field, cluster and pool
    match the globs and whose owner is ``owner`` (``None``: any owner)."""

    action: Action
    min_severity: Severity = Severity.INFO
    layer: str = "*"
    field: str = "*"
    owner: Owner | None = None
    cluster: str = "*"
    pool: str = "*"
    name: str = ""

    def matches(self, finding: Finding, route: Route) -> bool:
        return (
            finding.severity.at_least(self.min_severity)
            and (self.owner is None or route.owner is self.owner)
            and fnmatchcase(finding.layer.value, self.layer)
            and fnmatchcase(finding.field, self.field)
            and fnmatchcase(finding.cluster, self.cluster)
            and fnmatchcase(finding.pool or "", self.pool)
        )

    def describe(self) -> str:
        parts = [f"severity>={self.min_severity.value}"]
        for key, value in (
            ("layer", self.layer),
            ("field", self.field),
            ("cluster", self.cluster),
            ("pool", self.pool),
        ):
            if value != "*":
                parts.append(f"{key}={value}")
        if self.owner is not None:
            parts.append(f"owner={self.owner.value}")
        label = f"{self.name!r} " if self.name else ""
        return f"{label}({' '.join(parts)}) -> {self.action.value}"


DEFAULT_POLICY_RULES: tuple[PolicyRule, ...] = (
    PolicyRule(
        Action.RESTORE,
        Severity.HIGH,
        layer="L[12]",
        owner=Owner.CLUSTER,
        name="cluster-layer labels/taints",
    ),
    PolicyRule(
        Action.SYNC, Severity.HIGH, layer="WORKLOAD", owner=Owner.CLUSTER, name="workload drift"
    ),
    PolicyRule(
        Action.RECONCILE, Severity.HIGH, owner=Owner.INFRASTRUCTURE, name="infrastructure drift"
    ),
    PolicyRule(Action.ALERT, Severity.LOW, name="tell a human"),
    PolicyRule(Action.IGNORE, Severity.INFO, name="informational"),
)


@dataclass(frozen=True, slots=True)
class Guards:
    """Limits on remediation. ``max_per_cluster``/``max_fleet`` override the fraction."""

    window: timedelta = timedelta(minutes=10)
    fraction: float = 0.10
    floor: int = 1
    max_per_cluster: int | None = None
    max_fleet: int | None = None
    flap_heals: int = 3
    flap_window: timedelta = timedelta(minutes=30)
    heal_burst: timedelta = timedelta(seconds=30)
    cooldown: timedelta = timedelta(minutes=2)
    execute_ttl: timedelta = timedelta(minutes=5)  # an enforce decision not run by then is stale
    pending_ttl: timedelta = timedelta(hours=1)  # how long a request waits for approval
    approval_ttl: timedelta = timedelta(minutes=15)  # how long an approval stays executable

    def __post_init__(self) -> None:
        zero = timedelta(0)
        for name in ("window", "flap_window", "cooldown", "execute_ttl", "pending_ttl"):
            if getattr(self, name) <= zero:
                raise ValueError(f"guards.{name}: must be a positive duration")
        if self.heal_burst < zero or self.heal_burst >= self.flap_window:
            raise ValueError("guards.heal_burst: must be >= 0 and shorter than flap_window")
        if self.approval_ttl <= zero:
            raise ValueError("guards.approval_ttl: must be a positive duration")
        if not 0 < self.fraction <= 1:
            raise ValueError(f"guards.fraction: {self.fraction} is not in (0, 1]")
        if self.floor < 1:
            raise ValueError("guards.floor: must be at least 1")
        if self.flap_heals < 1:
            raise ValueError("guards.flap_heals: must be at least 1")
        for name in ("max_per_cluster", "max_fleet"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"guards.{name}: must be >= 0")

    def cluster_limit(self, pools: int) -> int:
        if self.max_per_cluster is not None:
            return self.max_per_cluster
        return max(self.floor, int(pools * self.fraction))

    def fleet_limit(self, pools: int) -> int:
        if self.max_fleet is not None:
            return self.max_fleet
        return max(self.floor, int(pools * self.fraction))

    @property
    def horizon(self) -> timedelta:
        """How much history the guards look at."""
        return max(self.window, self.flap_window, self.cooldown)

    @property
    def replay_span(self) -> timedelta:
        """How much recorded history ``restore_state`` replays: the horizon, plus room for
        heal bursts that straddle its start to line up again (a burst joins the heal begun up
        to ``heal_burst`` before it, so the first replayed action of a pool may be mistaken
        for a heal start; the mistake dies out within ``flap_heals`` bursts of two
        ``heal_burst`` each), and at least twice ``pending_ttl``: the requests still
        approvable, and those that expired within the last ``pending_ttl`` (the time an
        expired request is remembered), so that one that expired while nothing ran is
        cancelled on record at the next start."""
        return max(self.horizon + 2 * self.flap_heals * self.heal_burst, 2 * self.pending_ttl)


@dataclass(frozen=True, slots=True)
class Policy:
    rules: tuple[PolicyRule, ...] = DEFAULT_POLICY_RULES
    guards: Guards = Guards()
    warn: tuple[WarnRule, ...] = ()  # fields only reported, per owner (``policy.warning``)


DEFAULT_POLICY = Policy()
