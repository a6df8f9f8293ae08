"""Schedulability and the PreSync gate (seed 004, sections 3.2 and 3.5).

Before Argo CD syncs an application, two questions decide whether the sync may go ahead:

1. Would each workload schedule? Its ``nodeSelector``, required node affinity and tolerations
   are checked against the *actual* labels and taints of every node (grouped by pool), and
   its requests against the nodes' allocatable: one pod must fit on some node, and all its
   pods must fit in the pools it can use. Allocatable is the nodes' total, not what is free:
   other pods are not known here, so a finding means "certainly will not fit", never "may".
2. Do the pools it targets drift? The target pools are the pools with a node that accepts the
   workload, plus the pools whose *desired* labels and taints would accept it (a pool that
   lost its label is still the pool the app means), plus the pools its nodeSelector or
   required affinity picks even when a taint turns it away (a wrong toleration does not hide
   the pool's own drift: every reason is given at once). Their four-layer diff
   (``core.diffing``) at or above the gate's severity blocks the sync.

``decide_gate`` returns the decision and its reasons; the shell prints them and exits. In the
findings, ``layer`` is ``WORKLOAD`` and ``pool`` names the workload
(``Deployment/shop/api``); the pools concerned are listed in ``pools``. A capacity finding
for several workloads pinned to one pool names that pool instead. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fleetwarden.core.describing import describe_drift
from fleetwarden.core.diffing import PoolIndex, diff_pool, group_nodes
from fleetwarden.core.findings import Finding, JsonValue, Layer, Severity
from fleetwarden.core.nodes import INSTANCE_TYPE_LABELS, POOL_LABELS, ObservedNode
from fleetwarden.core.pools import NodePoolSpec, Provisioner, Requirement, Taint
from fleetwarden.core.quantities import parse_quantity
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.subjects import NodePoolRef, WorkloadRef
from fleetwarden.core.workloads import ObjectKey, Toleration, Workload, canonical_quantity

__all__ = [
    "GateCluster",
    "GateResult",
    "Placement",
    "PlannedWorkload",
    "PoolState",
    "ScheduleCheck",
    "check_schedulability",
    "decide_gate",
    "node_rejection",
    "pool_states",
    "requirement_matches",
    "spec_accepts",
]

NO_POOL = "(no pool)"
_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# Added to every pod by the DefaultTolerationSeconds admission plugin.
_DEFAULT_TOLERATIONS = (
    Toleration("node.kubernetes.io/not-ready", "Exists", None, "NoExecute"),
    Toleration("node.kubernetes.io/unreachable", "Exists", None, "NoExecute"),
)
# Added to every DaemonSet pod by the DaemonSet controller.
_DAEMONSET_TOLERATIONS = tuple(
    Toleration(f"node.kubernetes.io/{key}", "Exists", None, None)
    for key in (
        "not-ready",
        "unreachable",
        "disk-pressure",
        "memory-pressure",
        "pid-pressure",
        "unschedulable",
        "network-unavailable",
    )
)
# Taints the node lifecycle controller and cloud providers set for a node's condition.
_CONDITION_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")
# Absent from a node's allocatable: unknown (a dump without status), not zero.
_CORE_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


# =========================================================================== matching


def requirement_matches(req: Requirement, labels: Mapping[str, str], node_name: str) -> bool:
    """Kubernetes' semantics: ``In`` needs the label, ``NotIn`` holds without it; a key
    ``field:metadata.name`` is a ``matchFields`` requirement on the node's name."""
    if req.key.startswith("field:"):
        value: str | None = node_name if req.key == "field:metadata.name" else None
    else:
        value = labels.get(req.key)
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and req.values:
        try:
            have, bound = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _selector_ok(w: Workload, labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in w.node_selector)


def _affinity_ok(w: Workload, labels: Mapping[str, str], name: str) -> bool:
    if not w.node_affinity:
        return True
    # an empty term matches no node (Kubernetes' rule), so any() over terms is exact
    return any(
        term and all(requirement_matches(r, labels, name) for r in term) for term in w.node_affinity
    )


def _tolerations(w: Workload) -> tuple[Toleration, ...]:
    extra = _DAEMONSET_TOLERATIONS if w.kind == "DaemonSet" else ()
    return (*w.tolerations, *_DEFAULT_TOLERATIONS, *extra)


def _untolerated(w: Workload, taints: Iterable[Taint]) -> list[Taint]:
    tolerations = _tolerations(w)
    return [
        t
        for t in taints
        if t.effect in _BLOCKING_EFFECTS and not any(tol.tolerates(t) for tol in tolerations)
    ]


def node_rejection(w: Workload, node: ObservedNode) -> str | None:
    """Why ``node`` cannot take a pod of ``w`` (``nodeSelector``, ``affinity``, ``taints``,
    ``cordoned``), or None when it can (resources aside)."""
    if not _selector_ok(w, node.labels):
        return "nodeSelector"
    if not _affinity_ok(w, node.labels, node.name):
        return "affinity"
    if _untolerated(w, node.taints):
        return "taints"
    if node.unschedulable and w.kind != "DaemonSet":
        return "cordoned"
    return None


def _intended_labels(spec: NodePoolSpec) -> dict[str, str]:
    labels = {key: spec.name for key in POOL_LABELS}
    if len(spec.instance_types) == 1:
        labels.update({key: spec.instance_types[0] for key in INSTANCE_TYPE_LABELS})
    labels.update(spec.labels)
    return labels


def spec_accepts(w: Workload, spec: NodePoolSpec) -> bool:
    """Whether the pool *as desired* (its labels and taints in Git) would take ``w``."""
    labels = _intended_labels(spec)
    return (
        _selector_ok(w, labels) and _affinity_ok(w, labels, "") and not _untolerated(w, spec.taints)
    )


# =========================================================================== pools


@dataclass(frozen=True, slots=True)
class PoolState:
    """One pool as it is: its nodes (possibly none) and, when Git has it, its desired spec."""

    name: str
    nodes: tuple[ObservedNode, ...]
    spec: NodePoolSpec | None = None

    @property
    def can_grow(self) -> bool:
        spec = self.spec
        if spec is None:
            return False
        if spec.provider is Provisioner.KARPENTER:
            return True
        return spec.max_size is not None and spec.max_size > len(self.nodes)


def pool_states(
    nodes: Sequence[ObservedNode],
    specs: Sequence[NodePoolSpec] = (),
    *,
    options: DiffOptions = DiffOptions(),
    held: Sequence[NodePoolSpec] = (),
) -> list[PoolState]:
    """Nodes grouped into pools (as ``scan`` groups them), matched to their desired specs;
    desired pools without a node are included, nodes without a pool label form one group.
    Control-plane nodes are kept: pods may schedule there when they carry no taint.
    ``held``: the definitions of a pool name defined more than once in the cluster
    (``fleet.assign_pools``): their nodes are that pool's, with no spec -- which definition
    they follow cannot be told, so none of them is used (not the last one read)."""
    index = PoolIndex(specs, held=held)
    members: dict[str, list[ObservedNode]] = {}
    spec_of: dict[str, NodePoolSpec | None] = {s.name: s for s in specs}
    every_node = replace(options, include_control_plane=True)
    for group, group_nodes_ in group_nodes(nodes, options=every_node).items():
        spec = index.spec_for(group)
        name = spec.name if spec else (index.held_for(group) or group or NO_POOL)
        members.setdefault(name, []).extend(group_nodes_)
        spec_of.setdefault(name, spec)
    for s in [*specs, *held]:
        members.setdefault(s.name, [])
    return [PoolState(name, tuple(ns), spec_of.get(name)) for name, ns in sorted(members.items())]


# =========================================================================== placement


@dataclass(frozen=True, slots=True)
class PlannedWorkload:
    """A workload as it will be synced: its desired model, its reference, and how many pods
    must fit (replicas, or an HPA's minimum; a DaemonSet needs one pod per node)."""

    workload: Workload
    ref: str
    pods: int = 1
    # the key the workload was paired under (its namespace defaulted); None: the model's own
    key: ObjectKey | None = None

    def subject_in(self, cluster: str) -> WorkloadRef:
        """What this workload's findings in ``cluster`` are about."""
        return (self.key or self.workload.key).in_cluster(cluster)


@dataclass(frozen=True, slots=True)
class Placement:
    ref: str
    candidates: tuple[str, ...]  # pools with a node that takes the workload now
    intended: tuple[str, ...]  # pools whose desired labels and taints would take it
    # pools its nodeSelector / required affinity picks (by their nodes' or desired labels),
    # taints aside: the pools it is pinned to even when a toleration is wrong
    selected: tuple[str, ...] = ()

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.candidates) | set(self.intended) | set(self.selected)))


@dataclass(slots=True)
class ScheduleCheck:
    cluster: str
    placements: list[Placement] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.extra.get("wouldNotSchedule")]


def _alloc(node: ObservedNode, resource: str) -> float | None:
    raw = node.allocatable.get(resource)
    if raw is None:
        return None if resource in _CORE_RESOURCES else 0.0
    try:
        return parse_quantity(raw)
    except ValueError:
        return None


def _fits(requests: Mapping[str, float], node: ObservedNode) -> bool:
    for res, want in requests.items():
        have = _alloc(node, res)
        if have is not None and want > have:
            return False
    return True


def _quantity(value: float, resource: str) -> str:
    text = canonical_quantity(int(value) if float(value).is_integer() else value, resource)
    return str(text)


def _finding(
    subject: WorkloadRef | NodePoolRef,
    ref: str,
    field_: str,
    expected: JsonValue,
    actual: JsonValue,
    severity: Severity,
    message: str,
    *,
    app: str | None,
    blocking: bool,
    pools: Sequence[str],
    source: str | None = None,
    nodes: Sequence[str] = (),
) -> Finding:
    return Finding(
        cluster=subject.cluster,
        pool=ref,
        layer=Layer.WORKLOAD,
        field=field_,
        expected=expected,
        actual=actual,
        severity=severity,
        nodes=tuple(sorted(nodes)),
        source=source,
        message=message,
        extra={
            "app": app,
            "workload": ref,
            "driftKind": "scheduling",
            "wouldNotSchedule": blocking,
            "pools": list(pools),
        },
        subject=subject,
    )


def _no_node_finding(
    cluster: str,
    planned: PlannedWorkload,
    pools: Sequence[PoolState],
    intended: Sequence[str],
    app: str | None,
) -> Finding:
    w, ref, subject = planned.workload, planned.ref, planned.subject_in(cluster)
    nodes = [n for p in pools for n in p.nodes]
    reasons = {n.name: node_rejection(w, n) for n in nodes}
    hint = ""
    if intended:
        names = ", ".join(repr(p) for p in intended)
        hint = f"; pool {names} should take it by its desired labels and taints: drift?"
    where = f"in cluster {cluster!r}"
    if not nodes:
        return _finding(
            subject, ref, "schedule.nodes", ">= 1 node", 0,
            Severity.CRITICAL, f"would not schedule: no node {where}{hint}",
            app=app, blocking=True, pools=intended, source=w.source,
        )  # fmt: skip
    if all(r == "nodeSelector" for r in reasons.values()):
        selector = [f"{k}={v}" for k, v in w.node_selector]
        return _finding(
            subject, ref, "schedule.nodeSelector", selector, None, Severity.CRITICAL,
            f"would not schedule: nodeSelector {', '.join(selector)} matches no node {where}"
            f"{hint}",
            app=app, blocking=True, pools=intended, source=w.source,
        )  # fmt: skip
    if all(r in ("nodeSelector", "affinity") for r in reasons.values()):
        terms = [
            " AND ".join(f"{r.key} {r.operator} {list(r.values)}" for r in term)
            for term in w.node_affinity
        ]
        return _finding(
            subject, ref, "schedule.affinity", terms, None, Severity.CRITICAL,
            f"would not schedule: required node affinity matches no node {where}{hint}",
            app=app, blocking=True, pools=intended, source=w.source,
        )  # fmt: skip
    if all(r in ("nodeSelector", "affinity", "taints") for r in reasons.values()):
        taints: set[str] = set()
        tainted = [n for n in nodes if reasons[n.name] == "taints"]
        for n in tainted:
            taints.update(f"{t.key}={t.value or ''}:{t.effect}" for t in _untolerated(w, n.taints))
        pools_hit = sorted({p.name for p in pools for n in p.nodes if reasons[n.name] == "taints"})
        conditions = all(t.startswith(_CONDITION_TAINT_PREFIXES) for t in taints)
        why = (
            "the nodes that match are not ready or under pressure"
            if conditions
            else "the nodes that match carry taints it does not tolerate"
        )
        return _finding(
            subject, ref, "schedule.tolerations", sorted(taints),
            sorted(t.display() for t in w.tolerations), Severity.CRITICAL,
            f"would not schedule: {why} ({', '.join(sorted(taints))}) {where}{hint}",
            app=app, blocking=True, pools=pools_hit, source=w.source,
            nodes=[n.name for n in tainted],
        )  # fmt: skip
    cordoned = [n.name for n in nodes if reasons[n.name] == "cordoned"]
    return _finding(
        subject, ref, "schedule.cordoned", "schedulable node", None, Severity.CRITICAL,
        f"would not schedule: every node that would take it is cordoned {where}",
        app=app, blocking=True, pools=intended, source=w.source, nodes=cordoned,
    )  # fmt: skip


def _selected_pools(w: Workload, pools: Sequence[PoolState]) -> tuple[str, ...]:
    """The pools a workload pins itself to with a nodeSelector or required node affinity:
    a node of the pool, or the pool's desired labels, match them (taints aside). None for a
    workload that names no pool: it is not pinned to every pool."""
    if not w.node_selector and not w.node_affinity:
        return ()
    out = []
    for p in pools:
        labels = [(n.labels, n.name) for n in p.nodes]
        if p.spec is not None:
            labels.append((_intended_labels(p.spec), ""))
        if any(_selector_ok(w, ls) and _affinity_ok(w, ls, name) for ls, name in labels):
            out.append(p.name)
    return tuple(out)


def check_schedulability(
    cluster: str,
    workloads: Sequence[PlannedWorkload],
    pools: Sequence[PoolState],
    *,
    app: str | None = None,
) -> ScheduleCheck:
    """Where each workload can go, and the findings for those that cannot (see module doc)."""
    out = ScheduleCheck(cluster)
    pinned: dict[str, list[PlannedWorkload]] = {}
    for planned in workloads:
        w = planned.workload
        accepting = {p.name: [n for n in p.nodes if node_rejection(w, n) is None] for p in pools}
        candidates = tuple(name for name, ns in accepting.items() if ns)
        intended = tuple(p.name for p in pools if p.spec is not None and spec_accepts(w, p.spec))
        selected = _selected_pools(w, pools)
        out.placements.append(Placement(planned.ref, candidates, intended, selected))
        if not candidates:
            out.findings.append(_no_node_finding(cluster, planned, pools, intended, app))
            continue
        nodes = [n for name in candidates for n in accepting[name]]
        requests = {**w.pod_requests(), "pods": 1.0}
        if not any(_fits(requests, n) for n in nodes):
            for res, want in sorted(requests.items()):
                known = [a for n in nodes if (a := _alloc(n, res)) is not None]
                if known and want > max(known):
                    out.findings.append(
                        _finding(
                            planned.subject_in(cluster), planned.ref, f"schedule.requests.{res}",
                            _quantity(want, res), _quantity(max(known), res), Severity.CRITICAL,
                            f"would not schedule: one pod requests {_quantity(want, res)} {res}, "
                            f"the largest node that takes it has {_quantity(max(known), res)}",
                            app=app, blocking=True, pools=candidates, source=w.source,
                        )
                    )  # fmt: skip
            continue
        if w.kind == "DaemonSet":
            continue  # one pod per node: the per-node fit above is the whole question
        grow = any(p.can_grow for p in pools if p.name in candidates)
        subject = planned.subject_in(cluster)
        _capacity(out, subject, planned.ref, [planned], nodes, candidates, grow, app, w.source)
        if len(candidates) == 1:
            pinned.setdefault(candidates[0], []).append(planned)
    by_name = {p.name: p for p in pools}
    for pool_name, members in pinned.items():
        if len(members) < 2:
            continue  # one workload: already checked against the same nodes
        pool = by_name[pool_name]
        usable = [n for n in pool.nodes if not n.unschedulable]
        _capacity(
            out, NodePoolRef(cluster, pool_name), pool_name, members, usable, (pool_name,),
            pool.can_grow, app, None, joint=True,
        )  # fmt: skip
    return out


def _capacity(
    out: ScheduleCheck,
    subject: WorkloadRef | NodePoolRef,
    ref: str,
    members: Sequence[PlannedWorkload],
    nodes: Sequence[ObservedNode],
    pools: Sequence[str],
    can_grow: bool,
    app: str | None,
    source: str | None,
    *,
    joint: bool = False,
) -> None:
    total: dict[str, float] = {}
    for planned in members:
        for res, v in {**planned.workload.pod_requests(), "pods": 1.0}.items():
            total[res] = total.get(res, 0.0) + v * planned.pods
    for res, want in sorted(total.items()):
        known = [a for n in nodes if (a := _alloc(n, res)) is not None]
        if not known:
            continue
        have = sum(known)
        if want <= have:
            continue
        who = ", ".join(m.ref for m in members) if joint else f"{members[0].pods} pods"
        message = (
            f"{who} request {_quantity(want, res)} {res} in all; the pool(s) "
            f"{', '.join(pools)} have {_quantity(have, res)} allocatable"
        )
        if can_grow:
            severity, blocking = Severity.MEDIUM, False
            message = f"needs a scale-up: {message}"
        else:
            severity, blocking = Severity.HIGH, True
            message = f"would not schedule: {message}"
        out.findings.append(
            _finding(
                subject, ref, f"schedule.capacity.{res}", _quantity(want, res),
                _quantity(have, res), severity, message,
                app=app, blocking=blocking, pools=pools, source=source,
            )
        )  # fmt: skip


# =========================================================================== the gate


@dataclass(frozen=True, slots=True)
class GateCluster:
    """What the gate knows of one destination cluster."""

    cluster: str
    nodes: Sequence[ObservedNode]
    specs: Sequence[NodePoolSpec]
    workloads: Sequence[PlannedWorkload]


@dataclass(slots=True)
class GateResult:
    app: str
    blocked: bool
    reasons: list[str]
    findings: list[Finding]
    checks: list[ScheduleCheck]
    notes: list[str] = field(default_factory=list)
    blocking: list[str] = field(default_factory=list)  # ids of the findings that block

    def to_json(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "decision": "block" if self.blocked else "pass",
            "reasons": self.reasons,
            "findings": [f.to_json() for f in self.findings],
            "targets": [
                {
                    "cluster": c.cluster,
                    "workload": p.ref,
                    "pools": list(p.targets),
                    "schedulableOn": list(p.candidates),
                }
                for c in self.checks
                for p in c.placements
            ],
            "notes": self.notes,
        }


def _describe(f: Finding) -> str:
    return (
        f"pool {f.pool!r} in cluster {f.cluster!r} drifts: {f.layer.value} {f.field} "
        f"{describe_drift(f.expected, f.actual, f.nodes)} ({f.severity.value})"
    )


def decide_gate(
    app: str,
    clusters: Sequence[GateCluster],
    *,
    fail_on: Severity = Severity.HIGH,
    options: DiffOptions = DiffOptions(),
    max_reasons: int = 20,
) -> GateResult:
    """Block (``blocked``) when a workload would not schedule, or when a pool it targets drifts
    at or above ``fail_on``; every reason is one line a person can act on."""
    reasons: list[str] = []
    findings: list[Finding] = []
    checks: list[ScheduleCheck] = []
    notes: list[str] = []
    blocking: list[str] = []
    blocked = False
    for gc in clusters:
        pools = pool_states(gc.nodes, gc.specs, options=options)
        check = check_schedulability(gc.cluster, gc.workloads, pools, app=app)
        checks.append(check)
        findings.extend(check.findings)
        for f in check.findings:
            if f.extra.get("wouldNotSchedule") or f.severity.at_least(fail_on):
                blocked = True
                blocking.append(f.id)
                reasons.append(f"{f.pool} in cluster {gc.cluster!r}: {f.message}")
        targeted = sorted({name for p in check.placements for name in p.targets})
        by_name = {p.name: p for p in pools}
        for name in targeted:
            pool = by_name[name]
            if pool.spec is None:
                notes.append(
                    f"pool {name!r} in cluster {gc.cluster!r} has no desired definition: "
                    "its drift was not checked"
                )
                continue
            members = [
                n for n in pool.nodes if options.include_control_plane or not n.is_control_plane
            ]  # the same nodes `scan` would diff
            drift = diff_pool(pool.spec, members, cluster=gc.cluster, options=options)
            findings.extend(drift)
            for f in drift:
                if f.severity.at_least(fail_on):
                    blocked = True
                    blocking.append(f.id)
                    reasons.append(_describe(f))
    if len(reasons) > max_reasons:
        more = len(reasons) - max_reasons
        reasons = [*reasons[:max_reasons], f"... and {more} more (see findings)"]
    return GateResult(app, blocked, reasons, findings, checks, notes, blocking)
