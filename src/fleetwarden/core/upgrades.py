"""The ordered pool upgrade (seed 001): plan, state machine and transient drift. Pure.

A pool upgrade is one workflow in a fixed order, so no window of inconsistency goes unseen:

1. **pre-flight** — every API that an application targeting the cluster uses and that is
   removed at the target version (``core.deprecations``) blocks; the PreSync gate's
   schedulability (``core.schedulability``) is checked against the pool *as it will be while it
   rolls*: ``unavailable`` of its nodes cordoned and ``surge`` new ones added;
2. **infrastructure** — the object that owns the pool template (``core.ownership``: the
   infrastructure owner of ``L4/kubeletVersion``): a Flux Kustomization or HelmRelease is asked
   to reconcile after the Git change; an eksctl or Terraform pool gets the change shown (file,
   field, command), which a person applies;
3. **roll** — wait until the pool has rolled: every node on the target kubelet version, every
   node that was there before on an older version gone, none NotReady;
4. **cluster** — the Argo CD application that owns the pool's labels and taints (the cluster
   owner of ``L1/labels.*``) is synced;
5. **verify** — the pool's four-layer diff (``core.diffing``) against the desired spec at the
   target version is clean.

The run's state is derived from its step records only (``run_state``): the audit store holds
them, so a runner that restarts reads them back and resumes at the first step not done. A step
that failed ends the run; so does a *window* (from the infrastructure step's start until the
verify step is done) longer than ``budget``; both become a high finding (``run_findings``).
While a run is under way, the drift an upgrade causes on purpose — mixed kubelet versions, a
node count above the pool's maximum by at most the surge — is *upgrade in progress*, not a
finding (``classify_drift``). Times are passed in; nothing here reads a clock.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from fleetwarden.core import deprecations
from fleetwarden.core.diffing import PoolIndex, diff_pool
from fleetwarden.core.events import parse_time
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.fleet import Assignment, assign_pools, defined_twice, defined_twice_reason
from fleetwarden.core.nodes import POOL_LABELS, ObservedNode, pool_of
from fleetwarden.core.ownership import ArgoApp, FluxKind, FluxRef, Owner, OwnershipMap
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.schedulability import PlannedWorkload, check_schedulability, pool_states
from fleetwarden.core.skips import Skip
from fleetwarden.core.versions import matches, parse_version

__all__ = [
    "DEFAULT_BUDGET",
    "STEP_ORDER",
    "AppObjects",
    "Check",
    "Classified",
    "RollNode",
    "RollProgress",
    "RunPhase",
    "RunState",
    "Step",
    "StepKind",
    "StepRecord",
    "StepStatus",
    "UpgradePlan",
    "classify_drift",
    "over_budget",
    "plan_upgrade",
    "pool_not_compared",
    "pools_of_cluster",
    "roll_node",
    "roll_progress",
    "run_findings",
    "run_id",
    "run_state",
    "verify_findings",
]

DEFAULT_BUDGET = timedelta(minutes=30)


class StepKind(StrEnum):
    PREFLIGHT = "preflight"
    INFRASTRUCTURE = "infrastructure"
    ROLL = "roll"
    CLUSTER = "cluster"
    VERIFY = "verify"


STEP_ORDER: tuple[StepKind, ...] = tuple(StepKind)


class StepStatus(StrEnum):
    STARTED = "started"
    DONE = "done"
    FAILED = "failed"
    DRY_RUN = "dry-run"  # what the step would do, recorded and not done


@dataclass(frozen=True, slots=True)
class AppObjects:
    """An application that targets the cluster: the API objects it renders (apiVersion, kind,
    name) and its workloads as the sync will apply them."""

    app: str
    objects: Sequence[tuple[str, str, str | None]] = ()
    workloads: Sequence[PlannedWorkload] = ()


@dataclass(frozen=True, slots=True)
class Check:
    """One pre-flight check: ``blocking`` reasons stop the upgrade, ``notes`` do not."""

    name: str
    blocking: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.blocking

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.name,
            "ok": self.ok,
            "blocking": list(self.blocking),
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the plan. ``target`` is the object acted on (a Flux object for the
    infrastructure layer, an Argo CD application for the cluster layer); ``manual`` says what a
    person must change when no object can be acted on (eksctl, Terraform)."""

    kind: StepKind
    description: str
    target: FluxRef | ArgoApp | None = None
    manual: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.kind.value,
            "description": self.description,
            "target": self.target.to_json() if self.target is not None else None,
            "manual": self.manual,
        }


def run_id(cluster: str, pool: str, to_version: str) -> str:
    """The id of the upgrade of one pool to one version: the same command after a restart
    names the same run (and so resumes it)."""
    digest = hashlib.sha256(f"{cluster}\0{pool}\0{to_version}".encode()).hexdigest()[:12]
    return f"upg-{digest}"


@dataclass(frozen=True, slots=True)
class UpgradePlan:
    run_id: str
    cluster: str
    pool: str
    to_version: str
    from_versions: tuple[str, ...]
    old_nodes: tuple[str, ...]  # the pool's nodes not on the target version when planned
    checks: tuple[Check, ...]
    steps: tuple[Step, ...]
    budget: timedelta = DEFAULT_BUDGET
    surge: int = 1
    spec: NodePoolSpec | None = field(default=None, compare=False)

    @property
    def blocked(self) -> bool:
        return any(not c.ok for c in self.checks)

    def step(self, kind: StepKind) -> Step:
        return next(s for s in self.steps if s.kind is kind)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "cluster": self.cluster,
            "pool": self.pool,
            "to": self.to_version,
            "from": list(self.from_versions),
            "oldNodes": list(self.old_nodes),
            "blocked": self.blocked,
            "budgetSeconds": int(self.budget.total_seconds()),
            "surge": self.surge,
            "preflight": [c.to_json() for c in self.checks],
            "steps": [s.to_json() for s in self.steps],
        }


# =========================================================================== planning


def _deprecation_check(
    apps: Sequence[AppObjects],
    target: deprecations.MinorVersion,
    table: deprecations.DeprecationTable,
) -> Check:
    blocking, notes = [], []
    for app in apps:
        for api_version, kind, name in app.objects:
            hit = deprecations.check(api_version, kind, target, table)
            if hit is None:
                continue
            what = f"application {app.app}: {kind} {name or '(unnamed)'} uses {api_version}"
            replacement = f"; use {hit.api.replacement}" if hit.api.replacement else ""
            if hit.removed:
                blocking.append(
                    f"{what}, removed in {deprecations.format_minor(hit.api.removed_in or target)}"
                    f"{replacement}"
                )
            else:
                notes.append(f"{what}, deprecated at the target{replacement}")
    if not apps:
        notes.append("no application targets this cluster: no API to check")
    return Check("deprecations", tuple(blocking), tuple(notes))


def _during_roll(
    nodes: Sequence[ObservedNode], pool_nodes: Sequence[ObservedNode], surge: int, unavailable: int
) -> list[ObservedNode]:
    """The cluster's nodes at the roll's tightest moment: ``unavailable`` of the pool's nodes
    cordoned for draining, ``surge`` new nodes (shaped like the pool's) not yet all up."""
    ordered = sorted(pool_nodes, key=lambda n: n.name)
    cordoned = {n.name for n in ordered[:unavailable]}
    out = [dataclasses.replace(n, unschedulable=True) if n.name in cordoned else n for n in nodes]
    if ordered:
        shape = ordered[0]
        out.extend(
            dataclasses.replace(shape, name=f"{shape.name}-surge-{i}", unschedulable=False)
            for i in range(surge)
        )
    return out


def _schedulability_check(
    cluster: str,
    apps: Sequence[AppObjects],
    nodes: Sequence[ObservedNode],
    pool_nodes: Sequence[ObservedNode],
    specs: Sequence[NodePoolSpec],
    *,
    surge: int,
    unavailable: int,
    options: DiffOptions,
    held: Sequence[NodePoolSpec] = (),
) -> Check:
    workloads = [w for app in apps for w in app.workloads]
    if not workloads:
        return Check("schedulability", notes=("no workload to place",))
    rolling = _during_roll(nodes, pool_nodes, surge, unavailable)
    pools = pool_states(rolling, specs, options=options, held=held)
    result = check_schedulability(cluster, workloads, pools)
    blocking = tuple(
        f"{f.pool}: {f.message}" for f in result.findings if f.extra.get("wouldNotSchedule")
    )
    notes = tuple(
        f"{f.pool}: {f.message}" for f in result.findings if not f.extra.get("wouldNotSchedule")
    )
    where = f"with {unavailable} node(s) of the pool cordoned and {surge} surge node(s)"
    unused = tuple(
        f"{name}: {defined_twice_reason(cluster, name, defined)}: its nodes are placed on as they "
        "are; no definition's labels, taints or size is used"
        for (_, name), defined in defined_twice(held).items()
    )
    return Check("schedulability", blocking, (where, *unused, *notes))


def _probe(cluster: str, pool: str, layer: Layer, field_: str) -> Finding:
    """A finding that stands for a field of the pool, only to ask the ownership map."""
    return Finding(cluster, pool, layer, field_, None, None, Severity.INFO)


def _infrastructure_step(
    cluster: str, pool: str, to_version: str, spec: NodePoolSpec | None, ownership: OwnershipMap
) -> Step:
    route = ownership.route(_probe(cluster, pool, Layer.L4, "kubeletVersion"))
    where = spec.source if spec is not None and spec.source else "the pool's definition"
    if route.owner is Owner.INFRASTRUCTURE and isinstance(route.target, FluxRef):
        ref = route.target
        if ref.kind in (FluxKind.KUSTOMIZATION, FluxKind.HELM_RELEASE):
            return Step(
                StepKind.INFRASTRUCTURE,
                f"after the Git change (version {to_version} in {where}), request a reconcile "
                f"of {ref.describe()}",
                target=ref,
            )
    manual = _manual_change(cluster, pool, to_version, spec)
    return Step(
        StepKind.INFRASTRUCTURE,
        f"apply the change to the pool template and wait for it: {manual}",
        manual=manual,
    )


def _manual_change(cluster: str, pool: str, to_version: str, spec: NodePoolSpec | None) -> str:
    minor = to_version.lstrip("v")
    source = spec.source if spec is not None and spec.source else None
    fmt = spec.source_format if spec is not None else ""
    if fmt == "eksctl":
        return (
            f"eksctl upgrade nodegroup --cluster {cluster} --name {pool} "
            f"--kubernetes-version {minor}"
            + (f" (and set the version in {source})" if source else "")
        )
    if fmt.startswith("terraform") or (source or "").endswith(".tf"):
        where = source or "the Terraform code"
        return f"set the node group's version to {minor} in {where}, then terraform apply"
    return (
        f"set the pool's Kubernetes version to {minor} in {source or 'its definition'} and apply it"
    )


def _cluster_step(cluster: str, pool: str, ownership: OwnershipMap) -> Step:
    route = ownership.route(_probe(cluster, pool, Layer.L1, "labels.*"))
    if route.owner is Owner.CLUSTER and isinstance(route.target, ArgoApp):
        return Step(
            StepKind.CLUSTER,
            f"sync {route.target.describe()} (the pool's labels and taints)",
            target=route.target,
        )
    return Step(
        StepKind.CLUSTER,
        "no Argo CD application owns the pool's labels and taints: nothing to sync",
    )


def pools_of_cluster(specs: Iterable[NodePoolSpec], cluster: str) -> Assignment:
    """The cluster's desired pools as an upgrade sees them: its definitions, and those naming
    no cluster taken as its own, assigned as ``scan`` assigns them (``fleet.assign_pools``):
    a pool name defined more than once there is ``held`` -- none of its definitions is used."""
    mine = [
        s if s.cluster else s.with_cluster(cluster) for s in specs if s.cluster in (None, cluster)
    ]
    return assign_pools(mine, [cluster])


def pool_not_compared(assigned: Assignment, cluster: str, pool: str) -> list[Skip]:
    """Why the upgraded pool has no desired spec to go by (``pools_of_cluster``): ``scan``'s
    skips of its definitions when its name is defined more than once (one per file); [] when
    it is compared."""
    held = assigned.index(cluster).held_for(pool)
    return [s for s in assigned.skips if held is not None and s.pool == held]


def plan_upgrade(
    cluster: str,
    pool: str,
    to_version: str,
    *,
    nodes: Sequence[ObservedNode],
    spec: NodePoolSpec | None = None,
    specs: Sequence[NodePoolSpec] = (),
    held: Sequence[NodePoolSpec] = (),
    apps: Sequence[AppObjects] = (),
    table: deprecations.DeprecationTable | None = None,
    ownership: OwnershipMap | None = None,
    surge: int = 1,
    unavailable: int = 1,
    budget: timedelta = DEFAULT_BUDGET,
    options: DiffOptions = DiffOptions(),
) -> UpgradePlan:
    """The upgrade of ``pool`` in ``cluster`` to ``to_version``: its pre-flight checks and its
    steps. ``nodes`` are the cluster's nodes now; ``apps`` the applications targeting it;
    ``specs`` the cluster's pools the schedulability check uses, ``held`` the definitions of a
    pool name defined more than once there (``fleet.assign_pools``): none of them is used, and
    the check's notes say so. Raises ``ValueError`` for a target that is not a Kubernetes
    version."""
    if parse_version(to_version) is None or deprecations.parse_minor(to_version) is None:
        raise ValueError(f"--to {to_version!r}: expected a Kubernetes version such as 1.30")
    target_minor = deprecations.parse_minor(to_version)
    assert target_minor is not None
    index = PoolIndex([spec] if spec is not None else [])
    labels = options.pool_labels or POOL_LABELS
    pool_nodes = [
        n
        for n in nodes
        if (group := pool_of(n, pool_labels=labels)) == pool
        or (spec is not None and index.spec_for(group) is spec)
    ]
    old = tuple(sorted(n.name for n in pool_nodes if not _on(n.kubelet_version, to_version)))
    versions = tuple(sorted({n.kubelet_version or "unknown" for n in pool_nodes}))
    checks = (
        _deprecation_check(apps, target_minor, table or deprecations.DeprecationTable(())),
        _schedulability_check(
            cluster, apps, nodes, pool_nodes, specs or ([spec] if spec else []),
            surge=surge, unavailable=unavailable, options=options, held=held,
        ),
    )  # fmt: skip
    steps = (
        Step(StepKind.PREFLIGHT, "deprecated APIs and schedulability while the pool rolls"),
        _infrastructure_step(cluster, pool, to_version, spec, ownership or OwnershipMap()),
        Step(
            StepKind.ROLL,
            f"wait until every node of {pool} runs {to_version}, the {len(old)} old node(s) are "
            "gone and none is NotReady",
        ),
        _cluster_step(cluster, pool, ownership or OwnershipMap()),
        Step(StepKind.VERIFY, f"the four layers of {pool} are clean at {to_version}"),
    )
    return UpgradePlan(
        run_id(cluster, pool, to_version), cluster, pool, to_version, versions, old, checks,
        steps, budget, surge, spec,
    )  # fmt: skip


def _on(kubelet: str | None, to_version: str) -> bool:
    return kubelet is not None and matches(to_version, kubelet) is True


# =========================================================================== the roll


@dataclass(frozen=True, slots=True)
class RollNode:
    """A node of the pool as the roll sees it."""

    name: str
    kubelet_version: str | None
    ready: bool


def roll_node(obj: Mapping[str, Any]) -> RollNode:
    """A Node object: its name, kubelet version and Ready condition (not ``True``: not ready)."""
    meta, status = _mapping(obj.get("metadata")), _mapping(obj.get("status"))
    kubelet = _mapping(status.get("nodeInfo")).get("kubeletVersion")
    conditions = status.get("conditions")
    ready = isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )
    name = str(meta.get("name") or "")
    return RollNode(name, kubelet if isinstance(kubelet, str) else None, ready)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class RollProgress:
    total: int
    on_target: int
    old_left: tuple[str, ...]  # nodes from before the roll still there
    behind: tuple[str, ...]  # nodes not on the target version
    not_ready: tuple[str, ...]

    @property
    def rolled(self) -> bool:
        return self.total > 0 and not self.old_left and not self.behind and not self.not_ready

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.total,
            "onTarget": self.on_target,
            "oldLeft": list(self.old_left),
            "behind": list(self.behind),
            "notReady": list(self.not_ready),
            "rolled": self.rolled,
        }

    def describe(self) -> str:
        return (
            f"{self.on_target}/{self.total} node(s) on the target version, "
            f"{len(self.old_left)} old node(s) left, {len(self.not_ready)} NotReady"
        )


def roll_progress(
    nodes: Iterable[RollNode], to_version: str, *, old: Iterable[str] = ()
) -> RollProgress:
    """How far the pool's roll is: rolled when every node is on ``to_version``, none of the
    ``old`` nodes (those of the pool before the roll) is left and none is NotReady."""
    listed = sorted(nodes, key=lambda n: n.name)
    names = {n.name for n in listed}
    return RollProgress(
        total=len(listed),
        on_target=sum(_on(n.kubelet_version, to_version) for n in listed),
        old_left=tuple(sorted(names & set(old))),
        behind=tuple(n.name for n in listed if not _on(n.kubelet_version, to_version)),
        not_ready=tuple(n.name for n in listed if not n.ready),
    )


# =========================================================================== the run


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step's transition as recorded: what, when (the runner's clock), and detail."""

    step: StepKind
    status: StepStatus
    at: datetime
    detail: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step.value,
            "status": self.status.value,
            "at": self.at.isoformat().replace("+00:00", "Z"),
            "detail": self.detail,
            "data": dict(self.data),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepRecord | None:
        """A record read back from the store; None for one this version cannot read."""
        try:
            at = parse_time(data.get("at"))
            if at is None:
                return None
            return cls(
                StepKind(data["step"]), StepStatus(data["status"]), at,
                str(data.get("detail") or ""), dict(data.get("data") or {}),
            )  # fmt: skip
        except (KeyError, ValueError, TypeError):
            return None


class RunPhase(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class RunState:
    """Where a run stands, derived from its records alone."""

    phase: RunPhase
    done: tuple[StepKind, ...]
    current: StepKind | None  # the first step not done (None: all done)
    started: Mapping[StepKind, datetime]
    failed: StepRecord | None = None
    window_start: datetime | None = None  # the infrastructure step's start

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase.value,
            "done": [s.value for s in self.done],
            "current": self.current.value if self.current else None,
            "failed": self.failed.to_json() if self.failed else None,
        }


def run_state(records: Iterable[StepRecord]) -> RunState:
    """The state of a run from its step records, in any order (a restart reads them back from
    the store newest first). Dry-run records say what a step would do: they advance nothing."""
    ordered = sorted(records, key=lambda r: (r.at, STEP_ORDER.index(r.step)))
    done: set[StepKind] = set()
    started: dict[StepKind, datetime] = {}
    failed: StepRecord | None = None
    for r in ordered:
        if r.status is StepStatus.STARTED:
            started.setdefault(r.step, r.at)
        elif r.status is StepStatus.DONE:
            started.setdefault(r.step, r.at)
            done.add(r.step)
        elif r.status is StepStatus.FAILED and failed is None:
            failed = r
    current = next((s for s in STEP_ORDER if s not in done), None)
    phase = RunPhase.FAILED if failed else RunPhase.DONE if current is None else RunPhase.RUNNING
    return RunState(
        phase,
        tuple(s for s in STEP_ORDER if s in done),
        current,
        started,
        failed,
        started.get(StepKind.INFRASTRUCTURE),
    )


def over_budget(state: RunState, budget: timedelta, *, now: datetime) -> bool:
    """The window (infrastructure started, verify not done) is longer than the budget."""
    return (
        state.phase is RunPhase.RUNNING
        and state.window_start is not None
        and now - state.window_start > budget
    )


def run_findings(plan: UpgradePlan, state: RunState) -> list[Finding]:
    """A failed step (the budget's overrun included) is one high finding on the pool."""
    if state.failed is None:
        return []
    r = state.failed
    budget = r.data.get("reason") == "budget"
    return [
        Finding(
            cluster=plan.cluster,
            pool=plan.pool,
            layer=Layer.L4,
            field="upgrade.budget" if budget else f"upgrade.{r.step.value}",
            expected=int(plan.budget.total_seconds()) if budget else "done",
            actual=r.data.get("elapsedSeconds") if budget else "failed",
            severity=Severity.HIGH,
            message=f"upgrade of {plan.pool} to {plan.to_version}: {r.detail}",
            extra={"upgrade": {"run": plan.run_id, "step": r.step.value, "to": plan.to_version}},
        )
    ]


# =========================================================================== drift


@dataclass(frozen=True, slots=True)
class Classified:
    in_progress: tuple[Finding, ...]
    findings: tuple[Finding, ...]


def classify_drift(findings: Iterable[Finding], plan: UpgradePlan, state: RunState) -> Classified:
    """While the run is under way (pre-flight passed, verify not done), the pool's mixed
    kubelet versions, nodes on the version it comes from or goes to, and a node count above
    its maximum by at most the surge are the upgrade in progress; everything else — and
    everything once the run is done or failed — is a finding."""
    active = state.phase is RunPhase.RUNNING and StepKind.PREFLIGHT in state.done
    versions = {*plan.from_versions, plan.to_version}
    in_progress, out = [], []
    for f in findings:
        ours = f.cluster == plan.cluster and f.pool in (plan.pool, *_spec_name(plan))
        if active and ours and _transient(f, plan, versions):
            in_progress.append(f)
        else:
            out.append(f)
    return Classified(tuple(in_progress), tuple(out))


def _spec_name(plan: UpgradePlan) -> tuple[str, ...]:
    return (plan.spec.name,) if plan.spec is not None else ()


def _transient(f: Finding, plan: UpgradePlan, versions: set[str]) -> bool:
    if f.layer is Layer.L4 and f.field == "kubeletVersion.mixed":
        return True
    if f.layer is Layer.L4 and f.field == "kubeletVersion":
        return isinstance(f.actual, str) and any(
            matches(v, f.actual) is True for v in versions if parse_version(v)
        )
    if f.layer is Layer.COUNT and isinstance(f.actual, int) and plan.spec is not None:
        top = plan.spec.max_size if plan.spec.max_size is not None else plan.spec.desired_size
        return top is not None and top < f.actual <= top + plan.surge
    return False


def verify_findings(
    plan: UpgradePlan, nodes: Sequence[ObservedNode], *, options: DiffOptions = DiffOptions()
) -> list[Finding]:
    """The pool's four-layer diff against its desired spec at the target version (no spec:
    nothing to compare; the roll's own check stands)."""
    if plan.spec is None:
        return []
    target = dataclasses.replace(plan.spec, kubernetes_version=plan.to_version)
    return [
        f
        for f in diff_pool(target, nodes, cluster=plan.cluster, options=options)
        if f.layer in (Layer.L1, Layer.L2, Layer.L3, Layer.L4)
    ]
