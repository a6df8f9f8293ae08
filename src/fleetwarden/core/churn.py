"""Churn is not drift: node adds, removals and replacements made by the provider or an
autoscaler, recognised from actors, taints, annotations and events. Pure.

``classify(change, spec=..., evidence=...)`` returns a ``ChurnDecision``:

* ``churn`` — an automated cause explains the change *and* every node added still matches its
  pool (the four-layer diff of the new node alone finds nothing). The shell reports a
  ``churn`` event, not a finding.
* ``drift`` — a node was added that does not match its pool (its findings are in the
  decision), or the pool is not in the desired state at all: the diff's findings stand.
* ``unexplained`` — no automated cause found, or a person did it (``kubectl delete node``):
  the shell keeps the findings the diff gives (a count below the minimum, a stray node).

Signals and where their names come from (every one is checked against the change's window):

* **Karpenter** disruption (drift, consolidation, expiration): the disrupted node carries the
  ``karpenter.sh/disrupted:NoSchedule`` taint (v1; Karpenter's disruption concept page,
  aws/karpenter-provider-aws ``website/content/en/preview/concepts/disruption.md``) or
  ``karpenter.sh/disruption=disrupting:NoSchedule`` (v1beta1, ``designs/no-schedule-taint.md``
  and the v0.32 docs); Karpenter's node Events ``DisruptionTerminating`` ("Disrupting Node:
  <Reason>"), ``DisruptionLaunching``, ``DisruptionWaitingReadiness`` (Karpenter's
  ``disruption/events``) say which method; nodes it launches carry ``karpenter.sh/nodepool``
  (``karpenter.sh/provisioner-name`` before v1beta1; both in ``nodes.POOL_LABELS``). Both taints
  are already transient for the diff (``rules.DEFAULT_TRANSIENT_TAINTS``).
* **cluster-autoscaler**: ``ToBeDeletedByClusterAutoscaler`` (NoSchedule, the node is being
  removed) and ``DeletionCandidateOfClusterAutoscaler`` (PreferNoSchedule, a candidate only:
  not enough on its own) taints; its ``ScaleDown`` node Event.
* **EKS**: EC2 Auto Scaling ``EC2 Instance Launch/Terminate Successful`` and lifecycle-action
  events of the node group's group (``formats/events/aws.py``; the payloads are in
  ../shared/realdata/events/aws-autoscaling-event-*.json) → node-group scaling;
  ``UpdateNodegroupVersion``/``StartInstanceRefresh`` (operation ``upgrade``) → a managed
  node-group update or AMI rotation, which adds new nodes before draining old ones (a *surge*);
  node auto-repair replaces a node whose health condition failed — the EKS node monitoring
  agent's ``KernelReady``, ``ContainerRuntimeReady``, ``NetworkingReady``, ``StorageReady``,
  ``AcceleratedHardwareReady`` or the kubelet's ``Ready`` (EKS user guide, "Automatically repair
  nodes in EKS clusters").
* **GKE**: node updates during an operation carry the ``gke-current-operation`` annotation whose
  value is the operation type: ``AUTO_REPAIR_NODES``, ``AUTO_UPGRADE_NODES``, ``UPGRADE_NODES``
  (GKE ``Operation.Type``; seen as a Cloud Logging filter on ``io.k8s.core.v1.nodes.update``).
* an **actor** of the add or delete whose kind is ``autoscaler`` or ``provider`` (``actors``).
  A ``human`` actor makes the change unexplained whatever else is seen: a person deleting a
  node during a repair is still a person.

While churn is under way a pool passes through states the diff reports: two kubelet versions
(``kubeletVersion.mixed``, "an upgrade under way or stuck") and a node count off by the surge
or the node being replaced (``nodeCount``). ``explained_by_churn`` says when such a pool-level
finding is the transition of a churn decision of the same pool within ``window`` (default 1 h):
under way, it is part of the churn; once the window passes with the finding still open, the
rollout is stuck and the finding stands.

Not recognised (no verified name): AKS node auto-repair and auto-upgrade markers on the node;
they are churn here only through an Azure event or an actor of kind provider.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from fleetwarden.core.actors import Actor, ActorKind
from fleetwarden.core.diffing import diff_pool
from fleetwarden.core.events import ChangeEvent, Operation
from fleetwarden.core.findings import Finding, Layer
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions

__all__ = [
    "ChurnCause",
    "ChurnDecision",
    "Evidence",
    "KubeEvent",
    "NodeChange",
    "NodeChangeKind",
    "NodeSnapshot",
    "Transition",
    "Verdict",
    "classify",
    "explained_by_churn",
]


class NodeChangeKind(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    REPLACED = "replaced"


class ChurnCause(StrEnum):
    KARPENTER_DRIFT = "karpenter-drift"
    KARPENTER_CONSOLIDATION = "karpenter-consolidation"
    KARPENTER_EXPIRATION = "karpenter-expiration"
    KARPENTER_DISRUPTION = "karpenter-disruption"  # method not known
    KARPENTER_PROVISIONING = "karpenter-provisioning"
    CLUSTER_AUTOSCALER = "cluster-autoscaler"
    NODEGROUP_SCALING = "nodegroup-scaling"
    NODEGROUP_UPDATE = "nodegroup-update"  # managed node-group version/AMI update
    SURGE_UPGRADE = "surge-upgrade"
    AUTO_REPAIR = "auto-repair"
    AUTO_UPGRADE = "auto-upgrade"
    AUTOMATED_ACTOR = "automated-actor"


class Verdict(StrEnum):
    CHURN = "churn"
    DRIFT = "drift"
    UNEXPLAINED = "unexplained"


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """A node as last seen (removed) or as first seen (added), with what ``ObservedNode``
    leaves out: annotations and conditions (``type`` → ``status``)."""

    node: ObservedNode
    annotations: Mapping[str, str] = field(default_factory=dict)
    conditions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeChange:
    cluster: str
    pool: str | None
    kind: NodeChangeKind
    at: datetime
    removed: tuple[NodeSnapshot, ...] = ()
    added: tuple[NodeSnapshot, ...] = ()
    actor: Actor | None = None  # of the create/delete, when known (audit, managedFields)


@dataclass(frozen=True, slots=True)
class KubeEvent:
    """A ``core/v1`` Event about a node: ``reason``, the emitter (``source.component`` or
    ``reportingController``), the node (``involvedObject.name``), ``message``."""

    reason: str
    component: str
    node: str
    at: datetime
    message: str = ""


@dataclass(frozen=True, slots=True)
class Evidence:
    events: tuple[KubeEvent, ...] = ()
    cloud: tuple[ChangeEvent, ...] = ()


@dataclass(frozen=True, slots=True)
class ChurnDecision:
    change: NodeChange
    verdict: Verdict
    causes: tuple[ChurnCause, ...]
    reasons: tuple[str, ...]
    findings: tuple[Finding, ...] = ()  # of the added nodes that do not match the pool

    def to_json(self) -> dict[str, object]:
        """The ``churn`` event's payload (``type: "churn"`` in the watch stream)."""
        c = self.change
        return {
            "cluster": c.cluster,
            "pool": c.pool,
            "change": c.kind.value,
            "removed": [s.node.name for s in c.removed],
            "added": [s.node.name for s in c.added],
            "causes": [x.value for x in self.causes],
            "verdict": self.verdict.value,
            "reasons": list(self.reasons),
            "actor": c.actor.to_json() if c.actor else None,
        }


_KARPENTER_TAINTS = ("karpenter.sh/disrupted", "karpenter.sh/disruption")
_CA_DELETING = "ToBeDeletedByClusterAutoscaler"
_KARPENTER_REASONS = frozenset(
    {"DisruptionTerminating", "DisruptionLaunching", "DisruptionWaitingReadiness"}
)
_CA_REASONS = frozenset({"ScaleDown", "ScaleDownEmpty"})
_HEALTH_CONDITIONS = (
    "Ready",
    "KernelReady",
    "ContainerRuntimeReady",
    "NetworkingReady",
    "StorageReady",
    "AcceleratedHardwareReady",
)
_GKE_OPERATION = "gke-current-operation"
_GKE_CAUSES = {
    "AUTO_REPAIR_NODES": ChurnCause.AUTO_REPAIR,
    "AUTO_UPGRADE_NODES": ChurnCause.AUTO_UPGRADE,
    "UPGRADE_NODES": ChurnCause.SURGE_UPGRADE,
}


def _karpenter_method(message: str) -> ChurnCause:
    text = message.lower()
    if "drift" in text:
        return ChurnCause.KARPENTER_DRIFT
    if "underutilized" in text or "empty" in text or "consolidat" in text:
        return ChurnCause.KARPENTER_CONSOLIDATION
    if "expire" in text:
        return ChurnCause.KARPENTER_EXPIRATION
    return ChurnCause.KARPENTER_DISRUPTION


def _removed_causes(
    snap: NodeSnapshot, events: Sequence[KubeEvent], found: dict[ChurnCause, str]
) -> None:
    node = snap.node
    keys = {t.key for t in node.taints}
    for key in _KARPENTER_TAINTS:
        if key in keys:
            found.setdefault(ChurnCause.KARPENTER_DISRUPTION, f"{node.name} has the {key} taint")
    if _CA_DELETING in keys:
        found[ChurnCause.CLUSTER_AUTOSCALER] = f"{node.name} has the {_CA_DELETING} taint"
    for e in events:
        if e.node != node.name:
            continue
        if e.reason in _KARPENTER_REASONS:
            method = _karpenter_method(e.message)
            found.pop(ChurnCause.KARPENTER_DISRUPTION, None)
            found[method] = f"Karpenter event {e.reason} on {node.name}: {e.message!r}"
        elif e.reason in _CA_REASONS and "cluster-autoscaler" in e.component:
            found[ChurnCause.CLUSTER_AUTOSCALER] = f"cluster-autoscaler {e.reason} on {node.name}"
    unhealthy = [c for c in _HEALTH_CONDITIONS if snap.conditions.get(c, "True") != "True"]
    if unhealthy:
        found.setdefault(
            ChurnCause.AUTO_REPAIR, f"{node.name} was unhealthy: {', '.join(unhealthy)} not True"
        )


def _gke(snap: NodeSnapshot, found: dict[ChurnCause, str]) -> None:
    op = snap.annotations.get(_GKE_OPERATION)
    cause = _GKE_CAUSES.get(op or "")
    if cause is not None:
        found.setdefault(cause, f"{snap.node.name}: {_GKE_OPERATION}={op}")


def _cloud_causes(
    change: NodeChange,
    cloud: Iterable[ChangeEvent],
    window: timedelta,
    found: dict[ChurnCause, str],
) -> None:
    for e in cloud:
        when = e.time or e.received_at
        if (
            e.cluster != change.cluster
            or (e.pool is not None and change.pool is not None and e.pool != change.pool)
            or when is None
            or abs(when - change.at) > window
            or e.outcome == "failure"
        ):
            continue
        where = f"{e.type} ({e.id}) in {e.cluster}/{e.pool or '-'}"
        if e.operation is Operation.UPGRADE:
            found[ChurnCause.NODEGROUP_UPDATE] = f"{where}: a node-group update replaces nodes"
        elif e.operation is Operation.SCALE:
            found.setdefault(ChurnCause.NODEGROUP_SCALING, f"{where}: the group scaled")


def classify(
    change: NodeChange,
    *,
    spec: NodePoolSpec | None,
    evidence: Evidence = Evidence(),
    window: timedelta = timedelta(minutes=30),
    options: DiffOptions = DiffOptions(),
) -> ChurnDecision:
    """Churn, drift or unexplained, with the causes and every reason (module docstring)."""
    found: dict[ChurnCause, str] = {}
    events = [e for e in evidence.events if abs(e.at - change.at) <= window]
    for snap in change.removed:
        _removed_causes(snap, events, found)
        _gke(snap, found)
    for snap in change.added:
        _gke(snap, found)
        labels = snap.node.labels
        if "karpenter.sh/nodepool" in labels or "karpenter.sh/provisioner-name" in labels:
            has_karpenter = any(c.value.startswith("karpenter") for c in found)
            if not has_karpenter:
                found[ChurnCause.KARPENTER_PROVISIONING] = (
                    f"{snap.node.name} was launched by Karpenter (karpenter.sh/nodepool label)"
                )
    _cloud_causes(change, evidence.cloud, window, found)
    if ChurnCause.NODEGROUP_UPDATE in found and change.added:
        found[ChurnCause.SURGE_UPGRADE] = "new nodes came up during a node-group update"
    actor = change.actor
    if actor is not None and actor.kind in (ActorKind.AUTOSCALER, ActorKind.PROVIDER):
        found.setdefault(
            ChurnCause.AUTOMATED_ACTOR, f"{actor.name} ({actor.kind.value}, via {actor.via.value})"
        )
    causes = tuple(found)
    reasons = [f"{cause.value}: {why}" for cause, why in found.items()]

    if actor is not None and actor.kind is ActorKind.HUMAN:
        reasons.append(f"made by {actor.name} ({actor.kind.value}): not provider churn")
        return ChurnDecision(change, Verdict.UNEXPLAINED, causes, tuple(reasons))
    if change.added:
        if spec is None:
            reasons.append(f"pool {change.pool!r} is not in the desired state")
            return ChurnDecision(change, Verdict.DRIFT, causes, tuple(reasons))
        nodes = [s.node for s in change.added]
        misfits = tuple(
            f
            for f in diff_pool(spec, nodes, cluster=change.cluster, options=options)
            if f.layer is not Layer.COUNT
        )
        if misfits:
            shown = ", ".join(sorted({f.field for f in misfits}))
            reasons.append(f"the new node(s) do not match pool {spec.name}: {shown}")
            return ChurnDecision(change, Verdict.DRIFT, causes, tuple(reasons), misfits)
        reasons.append(f"the new node(s) match pool {spec.name}")
    if not causes:
        reasons.append("no autoscaler, provider or repair evidence within the window")
        return ChurnDecision(change, Verdict.UNEXPLAINED, causes, tuple(reasons))
    return ChurnDecision(change, Verdict.CHURN, causes, tuple(reasons))


# pool-level findings a rollout passes through (``diffing``): versions mixed, the count off
_TRANSITIONAL_FIELDS = frozenset({"kubeletVersion.mixed", "nodeCount"})


@dataclass(frozen=True, slots=True)
class Transition:
    """A finding that is the passing state of a churn decision, not drift."""

    finding: Finding
    churn: ChurnDecision
    reason: str


def explained_by_churn(
    finding: Finding,
    recent: Iterable[ChurnDecision],
    *,
    now: datetime,
    window: timedelta = timedelta(hours=1),
) -> Transition | None:
    """The churn that explains a pool-level transitional finding, if one does (see above)."""
    if finding.field not in _TRANSITIONAL_FIELDS:
        return None
    best: ChurnDecision | None = None
    for d in recent:
        c = d.change
        if (
            d.verdict is Verdict.CHURN
            and c.cluster == finding.cluster
            and c.pool == finding.pool
            and timedelta(0) <= now - c.at <= window
            and (best is None or c.at > best.change.at)
        ):
            best = d
    if best is None:
        return None
    causes = ", ".join(x.value for x in best.causes)
    reason = (
        f"{finding.field} in {finding.cluster}/{finding.pool} while churn ({causes}) is under "
        f"way: last change {best.change.at.isoformat()}, within {window}"
    )
    return Transition(finding, best, reason)
