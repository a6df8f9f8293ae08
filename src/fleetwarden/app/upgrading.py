"""Running an ordered pool upgrade (``core.upgrades``): each step acted on, waited for, audited.

The plan decides; this module carries the steps out in order and records every transition in
the audit store: the plan as a ``note`` (key ``upgrade:<run>:plan``), a step's start as an
``action`` and its end as an ``outcome`` (keys ``upgrade:<run>:<step>:<status>``), each
referencing the plan's record and carrying the runner's own time. The run's state is read back
from those records (``core.upgrades.run_state``) before anything is done, so a runner that was
killed and started again — another process, the same store — resumes at the first step not
done, with the window's start and the old nodes of the first start (the plan record stored
first wins: a re-plan after half the nodes rolled would not know them).

Dry-run (the default, as for healing) evaluates the pre-flight, reads the pool once and records
what each step *would* do (``dry-run`` records of a run of their own, key ``upgrade:<run>:dry:
<time>``), sending nothing and waiting for nothing. ``execute`` acts: a Flux reconcile request,
an Argo CD sync (waited for until its operation completes), and polls the pool's nodes every
``poll`` seconds until it has rolled. While it waits, the pool's drift is split by
``classify_drift`` into *upgrade in progress* and findings, reported through ``on_progress``.
Every call has a timeout; a failed call, a failed sync, a blocked pre-flight, a pool not clean
at verify, or a window over the budget ends the step as ``failed`` — recorded, then returned as
a high finding (``core.upgrades.run_findings``), never raised. Not done here: changing Git,
running eksctl or Terraform (the plan shows the change; the roll step waits for it), draining.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetwarden.app.upgrade_drift import read_step_records
from fleetwarden.core.audit import AuditDraft, AuditKind, AuditRecord, record_id
from fleetwarden.core.deprecations import DeprecationTable
from fleetwarden.core.diffing import PoolIndex, diff_pool
from fleetwarden.core.findings import Finding
from fleetwarden.core.nodes import POOL_LABELS, ObservedNode, pool_of
from fleetwarden.core.ownership import ArgoApp, FluxRef, OwnershipMap
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.upgrades import (
    DEFAULT_BUDGET,
    AppObjects,
    Classified,
    RollProgress,
    RunPhase,
    RunState,
    StepKind,
    StepRecord,
    StepStatus,
    UpgradePlan,
    classify_drift,
    over_budget,
    plan_upgrade,
    pool_not_compared,
    pools_of_cluster,
    roll_node,
    roll_progress,
    run_findings,
    run_state,
    verify_findings,
)
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.nodes import node_from_object
from fleetwarden.ports.argocd import ArgoConflict, OperationState
from fleetwarden.ports.audit import AuditStore
from fleetwarden.ports.kube import KubeApi
from fleetwarden.ports.remediation import ArgoSync, FluxReconciler
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["Progress", "RunReport", "UpgradeRunner", "plan_live"]

NODES = "/api/v1/nodes"


@dataclass(frozen=True, slots=True)
class Progress:
    """One look at the pool while a step runs (or once, in dry-run)."""

    step: StepKind
    roll: RollProgress
    drift: Classified


@dataclass(slots=True)
class RunReport:
    plan: UpgradePlan
    execute: bool
    state: RunState
    records: list[StepRecord] = field(default_factory=list)  # this invocation's, in order
    findings: list[Finding] = field(default_factory=list)
    resumed_at: StepKind | None = None  # the step a restarted run went on from
    last: Progress | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.plan.run_id,
            "mode": "execute" if self.execute else "dry-run",
            "state": self.state.to_json(),
            "resumedAt": self.resumed_at.value if self.resumed_at else None,
            "steps": [r.to_json() for r in self.records],
            "findings": [f.to_json() for f in self.findings],
            "inProgress": [f.to_json() for f in self.last.drift.in_progress] if self.last else [],
            "roll": self.last.roll.to_json() if self.last else None,
        }


@dataclass(frozen=True, slots=True)
class _Ended:
    status: StepStatus
    detail: str
    data: Mapping[str, Any] = field(default_factory=dict)


class UpgradeRunner:
    """Carries out one plan. ``kube`` reads the cluster's nodes; ``flux`` gives the Flux port
    for a kube context (a management cluster may hold the pool template); ``argocd`` syncs."""

    def __init__(
        self,
        plan: UpgradePlan,
        *,
        kube: KubeApi,
        store: AuditStore,
        flux: Callable[[str], FluxReconciler] | None = None,
        argocd: ArgoSync | None = None,
        execute: bool = False,
        clock: Clock = SYSTEM_CLOCK,
        poll: float = 5.0,
        call_timeout: float = 30.0,
        options: DiffOptions = DiffOptions(),
        on_progress: Callable[[Progress], Awaitable[None] | None] | None = None,
        on_record: Callable[[StepRecord], Awaitable[None] | None] | None = None,
    ) -> None:
        self.plan, self.kube, self.store = plan, kube, store
        self.flux, self.argocd, self.execute = flux, argocd, execute
        self.clock, self.poll, self.call_timeout = clock, poll, call_timeout
        self.options = options
        self.on_progress, self.on_record = on_progress, on_record
        self._plan_id = ""
        self._plan_key = f"upgrade:{plan.run_id}:plan"
        self._old: tuple[str, ...] = plan.old_nodes
        self._report = RunReport(plan, execute, run_state([]))

    # --- the run ---------------------------------------------------------------------------

    async def run(self) -> RunReport:
        if not self.execute:
            return await self._dry_run()
        stored = await self._store_plan(self._plan_key)
        old = stored.payload.get("upgrade", {}).get("oldNodes")
        if isinstance(old, list):
            self._old = tuple(str(n) for n in old)
        state = run_state(await self.read_records())
        report = self._report
        if state.phase is RunPhase.RUNNING and state.current is not StepKind.PREFLIGHT:
            report.resumed_at = state.current
        while state.phase is RunPhase.RUNNING and state.current is not None:
            step = state.current
            if step not in state.started:
                await self._record(step, StepStatus.STARTED, "started")
                state = run_state(await self.read_records())
            ended = await self._carry_out(step, state)
            await self._record(step, ended.status, ended.detail, ended.data)
            state = run_state(await self.read_records())
        report.state = state
        report.findings = run_findings(self.plan, state)
        return report

    async def read_records(self) -> list[StepRecord]:
        """The run's step records, from the store (every page)."""
        return await read_step_records(self.store, self._plan_id)

    async def _store_plan(self, key: str) -> AuditRecord:
        self._plan_id = record_id(AuditKind.NOTE, key)
        p = self.plan
        draft = AuditDraft(
            AuditKind.NOTE,
            summary=f"upgrade {p.cluster}/{p.pool} to {p.to_version} planned",
            cluster=p.cluster,
            pool=p.pool,
            payload={"upgrade": {**p.to_json(), "plannedAt": _iso(self.clock.now())}},
            key=key,
        )
        [stored] = await self.store.append_many([draft])
        self._plan_id = stored.id
        return stored

    async def _record(
        self,
        step: StepKind,
        status: StepStatus,
        detail: str,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        rec = StepRecord(step, status, self.clock.now(), detail, dict(data or {}))
        p = self.plan
        opening = status in (StepStatus.STARTED, StepStatus.DRY_RUN)
        kind = AuditKind.ACTION if opening else AuditKind.OUTCOME
        key = f"upgrade:{p.run_id}:{step.value}:{status.value}"
        if status is StepStatus.DRY_RUN:
            key = f"{self._plan_key}:{step.value}"
        await self.store.append_many(
            [
                AuditDraft(
                    kind,
                    summary=f"upgrade {p.cluster}/{p.pool} to {p.to_version}: {step.value} "
                    f"{status.value}: {detail}"[:500],
                    cluster=p.cluster,
                    pool=p.pool,
                    refs=(self._plan_id,),
                    payload={"upgrade": {"run": p.run_id, "record": rec.to_json()}},
                    key=key,
                )
            ]
        )
        self._report.records.append(rec)
        await _call(self.on_record, rec)

    async def _dry_run(self) -> RunReport:
        self._plan_key = f"upgrade:{self.plan.run_id}:dry:{_iso(self.clock.now())}"
        await self._store_plan(self._plan_key)
        state = run_state([])
        p = self.plan
        for step in p.steps:
            if step.kind is StepKind.PREFLIGHT:
                blocking = [b for c in p.checks for b in c.blocking]
                detail = "would block: " + "; ".join(blocking) if blocking else "would pass"
            elif step.kind is StepKind.ROLL:
                progress = await self._look(step.kind, state)
                detail = f"would wait: {progress.roll.describe()}"
            elif step.kind is StepKind.VERIFY:
                nodes = await self._pool_nodes()
                left = verify_findings(p, [n for n, _ in nodes], options=self.options)
                detail = f"would verify: {len(left)} finding(s) at {p.to_version} now"
            else:
                detail = f"would {step.description}"
            await self._record(step.kind, StepStatus.DRY_RUN, detail, {"step": step.to_json()})
        self._report.state = state
        return self._report

    # --- the steps -------------------------------------------------------------------------

    async def _carry_out(self, step: StepKind, state: RunState) -> _Ended:
        try:
            if step is StepKind.PREFLIGHT:
                return self._preflight()
            if step is StepKind.INFRASTRUCTURE:
                return await self._infrastructure()
            if step is StepKind.ROLL:
                return await self._roll(state)
            if step is StepKind.CLUSTER:
                return await self._cluster(state)
            return await self._verify()
        except Exception as exc:  # every failure is the step's outcome, on record
            return _Ended(StepStatus.FAILED, f"{type(exc).__name__}: {str(exc)[:300]}")

    def _preflight(self) -> _Ended:
        blocking = [f"{c.name}: {b}" for c in self.plan.checks for b in c.blocking]
        if blocking:
            return _Ended(StepStatus.FAILED, "pre-flight blocks: " + "; ".join(blocking))
        return _Ended(StepStatus.DONE, "pre-flight passed")

    async def _infrastructure(self) -> _Ended:
        step = self.plan.step(StepKind.INFRASTRUCTURE)
        if isinstance(step.target, FluxRef):
            if self.flux is None:
                return _Ended(StepStatus.FAILED, "no Flux client is configured")
            ref = step.target
            port = self.flux(ref.cluster or self.plan.cluster)
            async with asyncio.timeout(self.call_timeout):
                answer = await port.reconcile(ref)
            return _Ended(
                StepStatus.DONE,
                f"reconcile of {ref.describe()} requested",
                {"requestedAt": answer.get("requestedAt"), "target": ref.to_json()},
            )
        return _Ended(StepStatus.DONE, f"change shown: {step.manual}", {"manual": step.manual})

    async def _roll(self, state: RunState) -> _Ended:
        while True:
            progress = await self._look(StepKind.ROLL, state)
            if progress.roll.rolled:
                return _Ended(StepStatus.DONE, progress.roll.describe(), progress.roll.to_json())
            budget = self._budget(state)
            if budget is not None:
                return budget
            await asyncio.sleep(self.poll)

    async def _cluster(self, state: RunState) -> _Ended:
        step = self.plan.step(StepKind.CLUSTER)
        if not isinstance(step.target, ArgoApp):
            return _Ended(StepStatus.DONE, step.description)
        if self.argocd is None:
            return _Ended(StepStatus.FAILED, "no Argo CD client is configured")
        app = step.target.name
        try:
            async with asyncio.timeout(self.call_timeout):
                await self.argocd.sync(app, revision=None, resources=None, dry_run=False)
        except ArgoConflict:
            pass  # a sync is already running (ours, before a restart): wait for it
        while True:
            async with asyncio.timeout(self.call_timeout):
                obj = await self.argocd.get_application(app)
            op = OperationState.from_application(obj)
            if op is not None and op.completed:
                if op.succeeded:
                    synced = f"{step.target.describe()} synced"
                    return _Ended(StepStatus.DONE, synced, {"revision": op.revision})
                return _Ended(
                    StepStatus.FAILED,
                    f"sync of {step.target.describe()} {op.phase}: {op.message}"[:400],
                    {"phase": op.phase},
                )
            budget = self._budget(state)
            if budget is not None:
                return budget
            await asyncio.sleep(self.poll)

    async def _verify(self) -> _Ended:
        nodes = await self._pool_nodes()
        progress = roll_progress([r for _, r in nodes], self.plan.to_version, old=self._old)
        left = verify_findings(self.plan, [n for n, _ in nodes], options=self.options)
        if not progress.rolled or left:
            what = [f"{f.layer.value} {f.field}" for f in left]
            return _Ended(
                StepStatus.FAILED,
                f"not clean: {progress.describe()}; {len(left)} finding(s) {', '.join(what)}",
                {"findings": [f.to_json() for f in left]},
            )
        return _Ended(StepStatus.DONE, f"clean: {progress.describe()}")

    def _budget(self, state: RunState) -> _Ended | None:
        now = self.clock.now()
        if not over_budget(state, self.plan.budget, now=now):
            return None
        assert state.window_start is not None
        elapsed = int((now - state.window_start).total_seconds())
        budget = int(self.plan.budget.total_seconds())
        return _Ended(
            StepStatus.FAILED,
            f"the upgrade window has lasted {elapsed}s, over its budget of {budget}s",
            {"reason": "budget", "elapsedSeconds": elapsed},
        )

    # --- reading the pool ------------------------------------------------------------------

    async def _pool_nodes(self) -> list[tuple[ObservedNode, Any]]:
        async with asyncio.timeout(self.call_timeout):
            listed = await self.kube.list(NODES)
        labels = self.options.pool_labels or POOL_LABELS
        spec = self.plan.spec
        index = PoolIndex([spec] if spec is not None else [])
        out = []
        for obj in listed.items:
            try:
                node = node_from_object(obj)
            except FormatError:
                continue  # a node we cannot read is not ours to judge
            group = pool_of(node, pool_labels=labels)
            if group == self.plan.pool or (spec is not None and index.spec_for(group) is spec):
                out.append((node, roll_node(obj)))
        return out

    async def _look(self, step: StepKind, state: RunState) -> Progress:
        nodes = await self._pool_nodes()
        roll = roll_progress([r for _, r in nodes], self.plan.to_version, old=self._old)
        drift: list[Finding] = []
        if self.plan.spec is not None:
            members = [n for n, _ in nodes]
            drift = diff_pool(
                self.plan.spec, members, cluster=self.plan.cluster, options=self.options
            )
        progress = Progress(step, roll, classify_drift(drift, self.plan, state))
        self._report.last = progress
        await _call(self.on_progress, progress)
        return progress


async def plan_live(
    kube: KubeApi,
    cluster: str,
    pool: str,
    to_version: str,
    *,
    specs: Sequence[NodePoolSpec] = (),
    apps: Sequence[AppObjects] = (),
    table: DeprecationTable | None = None,
    ownership: OwnershipMap | None = None,
    surge: int = 1,
    unavailable: int = 1,
    budget: timedelta = DEFAULT_BUDGET,
    options: DiffOptions = DiffOptions(),
    timeout: float = 30.0,
) -> UpgradePlan:
    """The plan of the upgrade over the cluster's nodes as they are now (one list call) and
    the desired pool among ``specs`` (matched as the watcher matches: by name or prefix).
    Raises ``ValueError`` when that pool is defined more than once in the cluster: scan
    compares none of its definitions, and a plan against one of them would be a guess."""
    assigned = pools_of_cluster(specs, cluster)
    if held := pool_not_compared(assigned, cluster, pool):
        raise ValueError(
            f"{cluster}/{pool} is not planned: {held[0].reason}; keep one definition of the "
            "pool per cluster"
        )
    async with asyncio.timeout(timeout):
        listed = await kube.list(NODES)
    nodes = []
    for obj in listed.items:
        try:
            nodes.append(node_from_object(obj))
        except FormatError:
            continue  # a node we cannot read is not ours to judge
    spec = assigned.index(cluster).spec_for(pool)
    return plan_upgrade(
        cluster, pool, to_version, nodes=nodes, spec=spec, apps=apps, table=table,
        # as scan assigns them: a pool defined twice is placed on with none of its definitions
        specs=[*assigned.pools.get(cluster, ()), *assigned.unnamed.get(cluster, ())],
        held=assigned.held.get(cluster, ()),
        ownership=ownership, surge=surge, unavailable=unavailable, budget=budget,
        options=options,
    )  # fmt: skip


async def _call(callback: Callable[[Any], Awaitable[None] | None] | None, value: Any) -> None:
    if callback is not None:
        result = callback(value)
        if result is not None:
            await result


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")
