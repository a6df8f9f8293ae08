"""The policy engine: (finding, route, history) → a decision, and why. Pure.

*State first, action second* (Flux helm-controller): ``decide`` reads the finding, where
ownership routes it and the guards' history, and returns a ``Decision`` value — what to do,
whether it may run now, and every reason. It acts on nothing and changes nothing; the caller
``record``\\ s the decision into the ``PolicyState`` (an explicit step, so a decision that is
thrown away leaves no trace) and the shell (``app/remediating.py``) carries it out.

Severity, layer and owner pick an action by the first matching ``PolicyRule``. A remediating
action then passes the guards:

* **cooldown** — the same finding is not acted on again within ``cooldown`` (its fix needs
  time to show); the same operation (same action on the same target) requested again in that
  time is *coalesced* onto the first decision instead of sent twice;
* **flap** — a pool healed ``flap_heals`` times within ``flap_window`` is not healed again:
  fleetwarden stops acting on it for ``flap_window`` and alerts. Actions on one pool within
  ``heal_burst`` of each other are one heal (a new node missing five labels is healed once);
* **blast radius** — at most N actions per ``window``, per cluster and fleet-wide; by default
  N is 10 % of the pools (floor 1). Windows slide: in no interval of length ``window`` do more
  than N actions become executable.

Modes: ``dry-run`` (the default: detection stays apart from remediation, seed 002) runs the
guards against a separate rehearsal history and marks what *would* run; ``enforce`` marks it
executable; ``approval`` parks it until ``approve`` (``fleetwarden approve ID``) makes it
executable for ``approval_ttl`` (a request not approved within ``pending_ttl`` expires; a new
request for the same drift is then made instead of being coalesced onto the dead one).
Statuses: ``planned`` (nothing for the remediator: ignore, alert, or covered by an earlier
decision), ``dry-run``, ``pending-approval``, ``blocked`` (a guard said no; the reason has the
numbers), ``execute``, ``cancelled`` (a request that can no longer be approved).

A request is approvable only under what it was made under: it records its mode and the
``fingerprint`` of the rules and routing that chose its action and target (``Decision.config``).
``cancellations`` lists the requests that expired, or were made in another mode or under another
configuration, each as a ``cancelled`` decision to record (and audit); ``approve`` with the
current mode and fingerprint cancels such a request instead of running it, and approving a
request already cancelled raises ``RequestCancelled`` (nothing to record, nothing to run).

The history survives a restart through the audit log: every decision, every approval's result
and every cancellation is a ``Decision`` whose ``to_json`` the shell stores;
``Decision.from_json`` reads it back and ``restore_state`` replays the decisions of the last
``Guards.replay_span`` through ``record`` — the same ledgers, rehearsal ones included, the
requests still waiting for approval and the ones cancelled. Replay is exact (the next ``decide``
answers as it would have without the restart) when ``2 · flap_heals · heal_burst <=
flap_window`` (defaults: 3 min against 30 min); with longer bursts a run of overlapping heals
that straddles the start of the replayed history can move the flap guard's heal count by one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum, StrEnum
from fnmatch import fnmatchcase
from typing import Any, TypeVar

from fleetwarden.core.describing import describe_type
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import ArgoApp, FluxKind, FluxRef, Owner, Route
from fleetwarden.core.pools import Taint

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_POLICY_RULES",
    "REMEDIATIONS",
    "Action",
    "Decision",
    "DecisionTarget",
    "Guard",
    "Guards",
    "MalformedDecision",
    "Mode",
    "NodeRestore",
    "Policy",
    "PolicyRule",
    "PolicyState",
    "Replay",
    "RequestCancelled",
    "Status",
    "UnknownDecision",
    "approve",
    "cancellations",
    "decide",
    "decide_all",
    "fingerprint",
    "record",
    "restore_state",
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


DEFAULT_POLICY = Policy()


# --- decisions -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeRestore:
    """Put labels/taints back on nodes. ``labels``: key → value (``None``: remove the label).
    ``replace``: the (key, effect) taints this restore owns; on each node they are replaced by
    ``taints`` and every other taint is kept."""

    cluster: str
    pool: str | None
    nodes: tuple[str, ...]
    labels: tuple[tuple[str, str | None], ...] = ()
    taints: tuple[Taint, ...] = ()
    replace: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        what = [f"label {k}={v}" if v is not None else f"no label {k}" for k, v in self.labels]
        owned = {(t.key, t.effect) for t in self.taints}
        what += [f"taint {t.key}={t.value or ''}:{t.effect}" for t in self.taints]
        what += [f"no taint {k}:{e}" for k, e in self.replace if (k, e) not in owned]
        return f"{', '.join(what)} on {len(self.nodes)} node(s) of {self.cluster}/{self.pool}"

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "pool": self.pool,
            "nodes": list(self.nodes),
            "labels": dict(self.labels),
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in self.taints],
            "replace": [list(pair) for pair in self.replace],
        }


DecisionTarget = FluxRef | ArgoApp | NodeRestore


@dataclass(frozen=True, slots=True)
class Decision:
    id: str
    finding_id: str
    cluster: str
    pool: str | None
    action: Action
    mode: Mode
    status: Status
    reasons: tuple[str, ...]
    target: DecisionTarget | None
    at: datetime
    notify: bool = False  # tell a human: an alert, a guard that stopped a fix, a request
    guard: Guard | None = None
    expires_at: datetime | None = None  # executable (or approvable) until then
    approved_at: datetime | None = None
    config: str | None = None  # the fingerprint of the rules and routing it was made under
    cancelled_at: datetime | None = None

    @property
    def executable(self) -> bool:
        return self.status is Status.EXECUTE

    @property
    def effective_at(self) -> datetime:
        """When it took effect: approved, cancelled, else decided."""
        return self.approved_at or self.cancelled_at or self.at

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and now > self.expires_at

    def to_json(self) -> dict[str, Any]:
        def ts(value: datetime | None) -> str | None:
            return value.isoformat().replace("+00:00", "Z") if value else None

        return {
            "id": self.id,
            "findingId": self.finding_id,
            "cluster": self.cluster,
            "pool": self.pool,
            "action": self.action.value,
            "mode": self.mode.value,
            "status": self.status.value,
            "reasons": list(self.reasons),
            "target": self.target.to_json() if self.target else None,
            "at": ts(self.at),
            "notify": self.notify,
            "guard": self.guard.value if self.guard else None,
            "expiresAt": ts(self.expires_at),
            "approvedAt": ts(self.approved_at),
            "config": self.config,
            "cancelledAt": ts(self.cancelled_at),
        }

    @classmethod
    def from_json(cls, data: object) -> Decision:
        """The decision ``to_json`` wrote (as stored in the audit log), every field checked.

        Raises ``MalformedDecision`` naming the first bad field. A target comes back as the
        same value only if the store kept it verbatim: a node label whose key looks secret
        is stored redacted, and a restore's labels come back in key order.
        """
        d = _Fields(data, "decision")
        action = d.enum("action", Action)
        decision = cls(
            id=d.text("id", nonempty=True),
            finding_id=d.text("findingId", nonempty=True),
            cluster=d.text("cluster"),
            pool=d.opt_text("pool"),
            action=action,
            mode=d.enum("mode", Mode),
            status=d.enum("status", Status),
            reasons=d.texts("reasons"),
            target=_target_from_json(action, d.get("target"), "decision.target"),
            at=d.time("at"),
            notify=d.flag("notify"),
            guard=d.opt_enum("guard", Guard),
            expires_at=d.opt_time("expiresAt"),
            approved_at=d.opt_time("approvedAt"),
            config=d.opt_text("config"),  # absent in records written before it was kept
            cancelled_at=d.opt_time("cancelledAt"),
        )
        if decision.status is Status.PENDING_APPROVAL and (
            decision.target is None or decision.expires_at is None
        ):
            raise MalformedDecision(
                "decision: a pending-approval decision needs a target and an expiresAt"
            )
        return decision


class UnknownDecision(LookupError):
    """``approve`` was given an id that is not waiting for approval."""


class RequestCancelled(LookupError):
    """``approve`` was given a request that was cancelled before: ``decision`` is the
    cancellation (its last reason says why). Nothing is to be recorded or run."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        super().__init__(
            f"decision {decision.id} was cancelled at {_ts(decision.cancelled_at)}: "
            f"{decision.reasons[-1]}"
        )


class MalformedDecision(ValueError):
    """``Decision.from_json`` was given something that is not a decision; the message names
    the field."""


_E = TypeVar("_E", bound=StrEnum)


class _Fields:
    """Typed reads of one JSON object, each failing with the field's path."""

    __slots__ = ("_data", "_path")

    def __init__(self, data: object, path: str) -> None:
        if not isinstance(data, Mapping):
            raise MalformedDecision(f"{path}: expected an object, got {describe_type(data)}")
        self._data: Mapping[str, Any] = data
        self._path = path

    def get(self, key: str) -> object:
        return self._data.get(key)

    def bad(self, key: str, want: str) -> MalformedDecision:
        got = repr(self._data.get(key))[:80]
        return MalformedDecision(f"{self._path}.{key}: expected {want}, got {got}")

    def text(self, key: str, *, nonempty: bool = False) -> str:
        value = self._data.get(key)
        if not isinstance(value, str) or (nonempty and not value):
            raise self.bad(key, "a non-empty string" if nonempty else "a string")
        return value

    def opt_text(self, key: str) -> str | None:
        return None if self._data.get(key) is None else self.text(key)

    def texts(self, key: str) -> tuple[str, ...]:
        value = self._data.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.bad(key, "a list of strings")
        return tuple(value)

    def flag(self, key: str) -> bool:
        value = self._data.get(key, False)
        if not isinstance(value, bool):
            raise self.bad(key, "true or false")
        return value

    def enum(self, key: str, kind: type[_E]) -> _E:
        value = self._data.get(key)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return kind(value)
        raise self.bad(key, f"one of {', '.join(m.value for m in kind)}")

    def opt_enum(self, key: str, kind: type[_E]) -> _E | None:
        return None if self._data.get(key) is None else self.enum(key, kind)

    def time(self, key: str) -> datetime:
        value = self._data.get(key)
        try:
            parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            parsed = None
        if parsed is None or parsed.tzinfo is None:
            raise self.bad(key, "an ISO 8601 time with a UTC offset")
        return parsed

    def opt_time(self, key: str) -> datetime | None:
        return None if self._data.get(key) is None else self.time(key)


def _target_from_json(action: Action, data: object, path: str) -> DecisionTarget | None:
    """The inverse of the targets' ``to_json``; which kind is read follows the action."""
    if data is None:
        return None
    t = _Fields(data, path)
    if action in (Action.SYNC, Action.ROLLBACK):
        return ArgoApp(t.text("application", nonempty=True))
    if action is Action.RECONCILE:
        return FluxRef(
            t.enum("kind", FluxKind),
            t.text("namespace", nonempty=True),
            t.text("name", nonempty=True),
            t.opt_text("cluster"),
        )
    if action is Action.RESTORE:
        cluster, pool, nodes = t.text("cluster"), t.opt_text("pool"), t.texts("nodes")
        labels = t.get("labels")
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in labels.items()
        ):
            raise t.bad("labels", "an object of label values (strings or null)")
        taints = t.get("taints")
        if not isinstance(taints, list):
            raise t.bad("taints", "a list of taints")
        parsed = []
        for i, item in enumerate(taints):
            one = _Fields(item, f"{path}.taints[{i}]")
            parsed.append(Taint(one.text("key"), one.opt_text("value"), one.text("effect")))
        pairs = t.get("replace")
        if not isinstance(pairs, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
            for p in pairs
        ):
            raise t.bad("replace", "a list of [key, effect] pairs")
        return NodeRestore(
            cluster,
            pool,
            nodes,
            labels=tuple(labels.items()),
            taints=tuple(parsed),
            replace=tuple((p[0], p[1]) for p in pairs),
        )
    raise MalformedDecision(f"{path}: {action.value} decisions have no target")


# --- state ---------------------------------------------------------------------------------

PoolKey = tuple[str, str | None]
_K = TypeVar("_K")
OpKey = tuple[Action, DecisionTarget]


@dataclass(slots=True)
class _Ledger:
    """What the guards need, for one kind of history (real or rehearsed). Time lists are kept
    sorted, so a window count is one bisection even if callers' clocks step back a little."""

    fleet: list[datetime] = field(default_factory=list)
    by_cluster: dict[str, list[datetime]] = field(default_factory=dict)
    heals: dict[PoolKey, list[datetime]] = field(default_factory=dict)  # heal start times
    quarantine: dict[PoolKey, datetime] = field(default_factory=dict)  # pool → stopped until
    findings: dict[str, datetime] = field(default_factory=dict)  # finding id → last acted on
    ops: dict[OpKey, tuple[datetime, str]] = field(default_factory=dict)  # → (at, decision id)
    pruned_at: datetime | None = None


class PolicyState:
    """The guards' history. ``pools``: pool count per cluster (the blast-radius base).
    Change it only through ``record`` (and ``set_pools``)."""

    __slots__ = ("_ledgers", "closed", "pending", "pools", "recorded", "waiting")

    def __init__(self, pools: Mapping[str, int] | None = None) -> None:
        self.pools: dict[str, int] = dict(pools or {})
        self.pending: dict[str, Decision] = {}  # id → decision waiting for approval
        self.waiting: dict[str | OpKey, str] = {}  # finding id / operation → pending id
        self.closed: dict[str, Decision] = {}  # id → its cancellation (kept a while)
        self.recorded = 0
        self._ledgers = {False: _Ledger(), True: _Ledger()}  # keyed by "rehearsal"

    def set_pools(self, cluster: str, count: int) -> None:
        self.pools[cluster] = count

    def forget_pending(self, decision_id: str) -> None:
        d = self.pending.pop(decision_id)
        keys: list[str | OpKey] = [d.finding_id]
        if d.target is not None:
            keys.append((d.action, d.target))
        for key in keys:
            if self.waiting.get(key) == decision_id:
                del self.waiting[key]

    @property
    def fleet_pools(self) -> int:
        return sum(self.pools.values())

    def ledger(self, *, rehearsal: bool) -> _Ledger:
        return self._ledgers[rehearsal]

    def executed_in_window(
        self, now: datetime, window: timedelta, *, cluster: str | None = None
    ) -> int:
        """Real actions in [now - window, now] (fleet-wide, or of one cluster)."""
        ledger = self._ledgers[False]
        times = ledger.fleet if cluster is None else ledger.by_cluster.get(cluster, [])
        return _count_since(times, now - window)


def _count_since(times: Sequence[datetime], cutoff: datetime) -> int:
    return len(times) - bisect_left(times, cutoff)


# --- deciding ------------------------------------------------------------------------------


def decide(
    finding: Finding,
    route: Route,
    state: PolicyState,
    now: datetime,
    mode: Mode = Mode.DRY_RUN,
    *,
    policy: Policy = DEFAULT_POLICY,
    config: str | None = None,
) -> Decision:
    """What to do about ``finding`` now, and why. Reads ``state``; changes nothing.
    ``config``: the ``fingerprint`` of the configuration it is made under (kept on the
    decision, so that a request outlives no change of it)."""
    ref = _FindingRef(finding.id, finding.cluster, finding.pool)  # the id hashes: once
    reasons = [f"route: {route.reason}"]
    rule = next((r for r in policy.rules if r.matches(finding, route)), None)
    sev = f"{finding.severity.value} {finding.layer.value}/{finding.field}"
    if rule is None:
        wanted = Action.ALERT
        reasons.append(f"{sev} (owner {route.owner.value}): no policy rule matches; alerting")
    else:
        wanted = rule.action
        reasons.append(f"{sev} (owner {route.owner.value}) matched rule {rule.describe()}")
    action, target, why = _resolve(wanted, finding, route)
    if why:
        reasons.append(why)
    did = _decision_id(ref.id, action, mode, now, state.recorded)

    def make(status: Status, **kw: Any) -> Decision:
        return Decision(
            did,
            ref.id,
            ref.cluster,
            ref.pool,
            action,
            mode,
            status,
            tuple(reasons),
            target,
            now,
            config=config,
            **kw,
        )

    if action not in REMEDIATIONS or target is None:
        return make(Status.PLANNED, notify=action is Action.ALERT)

    rehearsal = mode is Mode.DRY_RUN
    ledger = state.ledger(rehearsal=rehearsal)
    if mode is Mode.APPROVAL:
        waiting = _waiting(state, ref.id, (action, target), now)
        if waiting is not None:
            reasons.append(f"already waiting for approval as {waiting}")
            return make(Status.PLANNED, guard=Guard.COALESCED)
    verdict = _check_guards(ref, action, target, ledger, state, now, policy.guards)
    reasons.extend(verdict.reasons)
    if rehearsal and verdict.guard is not None:
        reasons.append("dry-run: nothing would be sent")
    if verdict.guard is Guard.COALESCED:
        return make(Status.PLANNED, guard=verdict.guard)
    if verdict.guard is not None:
        return make(Status.BLOCKED, guard=verdict.guard, notify=verdict.notify)
    g = policy.guards
    if mode is Mode.DRY_RUN:
        reasons.append("dry-run: the intended call is recorded, not sent")
        return make(Status.DRY_RUN)
    if mode is Mode.APPROVAL:
        until = now + g.pending_ttl
        reasons.append(f"approval mode: waiting for `fleetwarden approve {did}` until {_ts(until)}")
        return make(Status.PENDING_APPROVAL, notify=True, expires_at=until)
    return make(Status.EXECUTE, expires_at=now + g.execute_ttl)


def approve(
    decision_id: str,
    state: PolicyState,
    now: datetime,
    *,
    policy: Policy = DEFAULT_POLICY,
    mode: Mode | None = None,
    config: str | None = None,
) -> Decision:
    """The pending decision made executable at ``now`` (guards checked again, against real
    history) — or blocked, with the reason — or cancelled, when it expired or (given the
    current ``mode`` and ``config`` fingerprint) was made under others. Changes nothing:
    ``record`` the result. ``mode`` None skips the mode and configuration checks.
    Raises ``RequestCancelled`` for a request cancelled before, ``UnknownDecision`` when
    nothing with that id waits for approval."""
    pending = state.pending.get(decision_id)
    if pending is None:
        closed = state.closed.get(decision_id)
        if closed is not None:
            raise RequestCancelled(closed)
        raise UnknownDecision(
            f"no decision {decision_id!r} is waiting for approval"
            f" ({len(state.pending)} pending; see the audit log for decided ones)"
        )
    stale = _stale(pending, now, mode, config) if mode is not None else None
    if stale is None and pending.expired(now):
        stale = _expiry(pending)
    if stale is not None:
        guard, why = stale
        return _cancelled(pending, now, guard, f"approval at {_ts(now)} refused: {why}")
    reasons = list(pending.reasons)
    assert pending.target is not None  # pending decisions always have one
    g = policy.guards
    finding = _FindingRef(pending.finding_id, pending.cluster, pending.pool)
    verdict = _check_guards(
        finding, pending.action, pending.target, state.ledger(rehearsal=False), state, now, g
    )
    reasons.extend(verdict.reasons)
    if verdict.guard is not None:
        status = Status.PLANNED if verdict.guard is Guard.COALESCED else Status.BLOCKED
        return replace(
            pending,
            status=status,
            reasons=tuple(reasons),
            guard=verdict.guard,
            notify=verdict.notify,
            approved_at=now,
            expires_at=None,
        )
    until = now + g.approval_ttl
    reasons.append(f"approved at {_ts(now)}; executable until {_ts(until)}")
    return replace(
        pending,
        status=Status.EXECUTE,
        reasons=tuple(reasons),
        notify=False,
        approved_at=now,
        expires_at=until,
    )


def cancellations(
    state: PolicyState, now: datetime, *, mode: Mode, config: str | None
) -> list[Decision]:
    """The requests in ``state`` that can no longer be approved at ``now``, each as the
    ``cancelled`` decision to ``record`` (and audit), oldest first: made in another ``mode``
    than the current one, made under another ``config`` fingerprint (a request from before
    fingerprints were kept counts as another), or expired. Changes nothing."""
    out = []
    for request in sorted(state.pending.values(), key=lambda d: (d.at, d.id)):
        stale = _stale(request, now, mode, config) or (
            _expiry(request) if request.expired(now) else None
        )
        if stale is not None:
            guard, why = stale
            out.append(_cancelled(request, now, guard, f"cancelled at {_ts(now)}: {why}"))
    return out


def fingerprint(policy: Policy = DEFAULT_POLICY, **context: object) -> str:
    """A short, stable hash of what chooses a request's action and target: the policy's rules
    and ``context`` (the shell passes the ownership rules and the remediation endpoints as
    plain values). The guards are left out: ``approve`` checks them again anyway."""
    data = {"rules": _canonical(policy.rules), "context": _canonical(context)}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def record(decision: Decision, state: PolicyState, *, policy: Policy = DEFAULT_POLICY) -> None:
    """Write a decision's consequences into ``state``: actions made executable (or rehearsed)
    count against the guards; pending ones wait; a flap stops the pool."""
    g = policy.guards
    now = decision.effective_at
    state.recorded += 1
    if decision.status is Status.PENDING_APPROVAL:
        state.pending[decision.id] = decision
        state.waiting[decision.finding_id] = decision.id
        if decision.target is not None:
            state.waiting[(decision.action, decision.target)] = decision.id
        return
    if decision.id in state.pending:
        state.forget_pending(decision.id)
    if decision.status is Status.CANCELLED:
        state.closed[decision.id] = decision
        _prune(state.ledger(rehearsal=False), state, now, g)
        return
    rehearsal = decision.mode is Mode.DRY_RUN
    ledger = state.ledger(rehearsal=rehearsal)
    key: PoolKey = (decision.cluster, decision.pool)
    if decision.guard is Guard.FLAP:
        ledger.quarantine[key] = now + g.flap_window
    if decision.status in (Status.EXECUTE, Status.DRY_RUN) and decision.target is not None:
        insort(ledger.fleet, now)
        insort(ledger.by_cluster.setdefault(decision.cluster, []), now)
        heals = ledger.heals.setdefault(key, [])
        if not heals or heals[-1] < now - g.heal_burst:
            insort(heals, now)
        ledger.findings[decision.finding_id] = now
        ledger.ops[(decision.action, decision.target)] = (now, decision.id)
    _prune(ledger, state, now, g)


def decide_all(
    items: Iterable[tuple[Finding, Route]],
    state: PolicyState,
    now: datetime,
    mode: Mode = Mode.DRY_RUN,
    *,
    policy: Policy = DEFAULT_POLICY,
    config: str | None = None,
) -> list[Decision]:
    """``decide`` then ``record``, one finding after the other (a storm arrives in order)."""
    out = []
    for finding, route in items:
        decision = decide(finding, route, state, now, mode, policy=policy, config=config)
        record(decision, state, policy=policy)
        out.append(decision)
    return out


# --- restoring -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Replay:
    """What ``restore_state`` rebuilt, and from how much."""

    state: PolicyState
    replayed: int  # decisions recorded into ``state``
    too_old: int  # decisions before the replay span: no guard looks at them any more
    pending: tuple[Decision, ...]  # requests that wait for approval again, oldest first
    expired: tuple[Decision, ...] = ()  # requests that expired without a cancellation


def restore_state(
    decisions: Iterable[Decision],
    now: datetime,
    *,
    policy: Policy = DEFAULT_POLICY,
    pools: Mapping[str, int] | None = None,
) -> Replay:
    """The ``PolicyState`` that recording ``decisions`` built, rebuilt at ``now``.

    ``decisions``: every decision, every approval's result (``approve``) and every
    cancellation that was recorded, in the order it was stored (several may share one time).
    Each one that took effect (``Decision.effective_at``) within ``policy.guards.replay_span``
    before ``now`` goes through ``record`` again, in time order: blast-radius counts, heals,
    quarantines, cooldowns and coalescing come back, rehearsed (dry-run) ones apart from real
    ones. Requests that were approved, refused or cancelled leave ``pending`` as they did.
    ``Replay.pending`` lists the requests still approvable by time; requests whose
    ``expires_at`` has passed by ``now`` with no cancellation on record stay in the state and
    are listed in ``Replay.expired``: ``cancellations`` turns them (and requests of another
    mode or configuration) into the cancellations to record. ``pools``: the blast-radius
    base (pool counts are configuration, not history). Pure: reads the values given, changes
    nothing else.
    """
    g = policy.guards
    since = now - g.replay_span
    kept: list[tuple[datetime, Decision]] = []
    too_old = 0
    for decision in decisions:
        took_effect = decision.effective_at
        if took_effect < since:
            too_old += 1
        else:
            kept.append((took_effect, decision))
    kept.sort(key=lambda pair: pair[0])  # stable: one batch keeps its stored order
    state = PolicyState(pools)
    for _, decision in kept:
        record(decision, state, policy=policy)
    waiting = sorted(state.pending.values(), key=lambda d: d.at)
    pending = tuple(d for d in waiting if not d.expired(now))
    expired = tuple(d for d in waiting if d.expired(now))
    return Replay(state, len(kept), too_old, pending, expired)


# --- internals -----------------------------------------------------------------------------


def _stale(
    request: Decision, now: datetime, mode: Mode | None, config: str | None
) -> tuple[Guard, str] | None:
    """Why a request may not be approved under ``mode`` and ``config`` (expiry aside)."""
    if mode is not None and request.mode is not mode:
        return Guard.MODE_CHANGED, (
            f"the request was made in {request.mode.value} mode and the service now runs in "
            f"{mode.value} mode; nothing is done (the drift is decided again, in "
            f"{mode.value} mode, when it is next reported)"
        )
    if mode is not None and request.config != config:
        made = request.config or "not recorded"
        return Guard.CONFIG_CHANGED, (
            f"the policy rules or routing changed since the request was made (configuration "
            f"{made}, now {config or 'not recorded'}); nothing is done"
        )
    return None


def _expiry(request: Decision) -> tuple[Guard, str]:
    return Guard.EXPIRED, f"the request expired at {_ts(request.expires_at)} unapproved"


def _cancelled(request: Decision, now: datetime, guard: Guard, why: str) -> Decision:
    return replace(
        request,
        status=Status.CANCELLED,
        reasons=(*request.reasons, why),
        guard=guard,
        notify=False,
        cancelled_at=now,
    )


def _canonical(value: object) -> object:
    """Plain JSON values for hashing: dataclasses by field, enums by value, durations in
    seconds, collections as lists (sets sorted)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return _canonical(value.value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((_canonical(v) for v in value), key=repr)
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"fingerprint: cannot hash a {describe_type(value)}")


def _waiting(state: PolicyState, finding_id: str, op: OpKey, now: datetime) -> str | None:
    """The request (for this drift, or for the same operation) still waiting for approval.
    An expired one is kept a while only so that approving it says so: it covers nothing."""
    for key in (finding_id, op):
        did = state.waiting.get(key)
        request = state.pending.get(did) if did is not None else None
        if request is not None and not request.expired(now):
            return did
    return None


@dataclass(frozen=True, slots=True)
class _FindingRef:
    id: str
    cluster: str
    pool: str | None


@dataclass(frozen=True, slots=True)
class _Verdict:
    guard: Guard | None
    reasons: tuple[str, ...]
    notify: bool = False


def _check_guards(
    finding: _FindingRef,
    action: Action,
    target: DecisionTarget,
    ledger: _Ledger,
    state: PolicyState,
    now: datetime,
    g: Guards,
) -> _Verdict:
    pool_key: PoolKey = (finding.cluster, finding.pool)
    pool_name = f"{finding.cluster}/{finding.pool}"
    last = ledger.findings.get(finding.id)
    if last is not None and last >= now - g.cooldown:
        return _Verdict(
            Guard.COOLDOWN,
            (
                f"cooldown: this finding was acted on at {_ts(last)}, "
                f"{_span(now - last)} ago (cooldown {_span(g.cooldown)})",
            ),
        )
    op = ledger.ops.get((action, target))
    if op is not None and op[0] >= now - g.cooldown:
        return _Verdict(
            Guard.COALESCED,
            (
                f"coalesced: the same {action.value} of {_describe(target)} was decided as "
                f"{op[1]} at {_ts(op[0])} (within the {_span(g.cooldown)} cooldown)",
            ),
        )
    until = ledger.quarantine.get(pool_key)
    if until is not None and now < until:
        return _Verdict(
            Guard.QUARANTINE,
            (f"flap guard: pool {pool_name} is left alone until {_ts(until)}; alert only",),
            notify=True,
        )
    heals = ledger.heals.get(pool_key, [])
    new_heal = not heals or heals[-1] < now - g.heal_burst
    healed = _count_since(heals, now - g.flap_window)
    if new_heal and healed >= g.flap_heals:
        return _Verdict(
            Guard.FLAP,
            (
                f"flap guard: pool {pool_name} was healed {healed} times in the last "
                f"{_span(g.flap_window)} (limit {g.flap_heals}); stop acting on it for "
                f"{_span(g.flap_window)} and alert",
            ),
            notify=True,
        )
    pools = state.pools.get(finding.cluster, 0)
    c_limit = g.cluster_limit(pools)
    c_used = _count_since(ledger.by_cluster.get(finding.cluster, []), now - g.window)
    basis = (
        f"configured {g.max_per_cluster}"
        if g.max_per_cluster is not None
        else f"{g.fraction:.0%} of {pools} pools, floor {g.floor}"
    )
    if c_used >= c_limit:
        return _Verdict(
            Guard.BLAST_CLUSTER,
            (
                f"blast radius: cluster {finding.cluster} already had {c_used} of {c_limit} "
                f"actions in the last {_span(g.window)} ({basis})",
            ),
            notify=True,
        )
    fleet = state.fleet_pools
    f_limit = g.fleet_limit(fleet)
    f_used = _count_since(ledger.fleet, now - g.window)
    f_basis = (
        f"configured {g.max_fleet}"
        if g.max_fleet is not None
        else f"{g.fraction:.0%} of {fleet} pools, floor {g.floor}"
    )
    if f_used >= f_limit:
        return _Verdict(
            Guard.BLAST_FLEET,
            (
                f"blast radius: the fleet already had {f_used} of {f_limit} actions in the last "
                f"{_span(g.window)} ({f_basis})",
            ),
            notify=True,
        )
    heal_note = (
        f"heal {healed + 1} of at most {g.flap_heals} in {_span(g.flap_window)}"
        if new_heal
        else f"part of the heal started at {_ts(heals[-1])}"
    )
    return _Verdict(
        None,
        (
            f"guards passed: action {c_used + 1} of {c_limit} for cluster {finding.cluster} and "
            f"{f_used + 1} of {f_limit} fleet-wide in {_span(g.window)}; "
            f"pool {pool_name}: {heal_note}",
        ),
    )


def _resolve(
    wanted: Action, finding: Finding, route: Route
) -> tuple[Action, DecisionTarget | None, str]:
    """The action that can actually be taken, its target, and a note when it differs."""
    target = route.target
    if wanted is Action.RESTORE:
        if not route.direct_restore:
            if isinstance(target, ArgoApp):
                return (
                    Action.SYNC,
                    target,
                    (f"direct restore is not allowed here: sync {target.describe()} instead"),
                )
            return (
                Action.ALERT,
                None,
                ("direct restore is not allowed here and no Argo CD application is named: alert"),
            )
        restore, problem = _node_restore(finding)
        if restore is None:
            return Action.ALERT, None, f"cannot restore directly ({problem}): alert"
        return Action.RESTORE, restore, f"restore {restore.describe()}"
    if wanted in (Action.SYNC, Action.ROLLBACK):
        if isinstance(target, ArgoApp):
            return wanted, target, f"{wanted.value} {target.describe()}"
        return (
            Action.ALERT,
            None,
            (
                f"{wanted.value} needs an Argo CD application and the ownership map names none "
                "for this pool: alert"
            ),
        )
    if wanted is Action.RECONCILE:
        if isinstance(target, FluxRef):
            return wanted, target, f"reconcile {target.describe()}"
        return (
            Action.ALERT,
            None,
            ("reconcile needs a Flux object and the ownership map names none for this pool: alert"),
        )
    return wanted, None, ""


def _node_restore(finding: Finding) -> tuple[NodeRestore | None, str]:
    if not finding.nodes:
        return None, "the finding names no node"
    expected = finding.expected
    if expected is not None and not isinstance(expected, str):
        return None, f"expected value {expected!r} is not a label or taint value"
    if finding.layer is Layer.L1 and finding.field.startswith("labels."):
        key = finding.field[len("labels.") :]
        return NodeRestore(
            finding.cluster, finding.pool, finding.nodes, labels=((key, expected),)
        ), ""
    if finding.layer is Layer.L2 and finding.field.startswith("taints."):
        key, sep, effect = finding.field[len("taints.") :].rpartition(":")
        if not sep or not key:
            return None, f"cannot read a taint key and effect from {finding.field!r}"
        taints = () if expected is None else (Taint(key, expected or None, effect),)
        return NodeRestore(
            finding.cluster, finding.pool, finding.nodes, taints=taints, replace=((key, effect),)
        ), ""
    return None, f"{finding.layer.value}/{finding.field} is not a node label or taint"


def _prune(ledger: _Ledger, state: PolicyState, now: datetime, g: Guards) -> None:
    """Forget what no guard looks at any more. Lists are trimmed on every record (cheap:
    they are sorted); maps are swept at most once per cooldown."""
    cutoff = now - g.horizon
    del ledger.fleet[: bisect_left(ledger.fleet, cutoff)]
    if ledger.pruned_at is not None and now < ledger.pruned_at + g.cooldown:
        return
    ledger.pruned_at = now
    ledger.by_cluster = _trimmed(ledger.by_cluster, cutoff)
    ledger.heals = _trimmed(ledger.heals, cutoff)
    recent = now - g.cooldown
    ledger.findings = {k: t for k, t in ledger.findings.items() if t >= recent}
    ledger.ops = {k: v for k, v in ledger.ops.items() if v[0] >= recent}
    ledger.quarantine = {k: t for k, t in ledger.quarantine.items() if t > now}
    # an expired request, or a cancelled one, is kept a while so that a late `approve` says
    # so, not "unknown" (a shell that never cancels must not grow without bound either)
    stale = now - g.pending_ttl
    for did in [d for d, p in state.pending.items() if p.expires_at and p.expires_at < stale]:
        state.forget_pending(did)
    state.closed = {k: d for k, d in state.closed.items() if d.effective_at >= stale}


def _trimmed(times_by: dict[_K, list[datetime]], cutoff: datetime) -> dict[_K, list[datetime]]:
    out = {}
    for k, times in times_by.items():
        del times[: bisect_left(times, cutoff)]
        if times:
            out[k] = times
    return out


def _decision_id(finding_id: str, action: Action, mode: Mode, now: datetime, seq: int) -> str:
    key = f"{finding_id}|{action.value}|{mode.value}|{now.isoformat()}|{seq}"
    return "d-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def _describe(target: DecisionTarget) -> str:
    return target.describe()


def _ts(value: datetime | None) -> str:
    return value.isoformat().replace("+00:00", "Z") if value else "-"


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds % 3600 == 0 and seconds >= 3600:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60}m"
    return f"{delta.total_seconds():g}s"
