"""While an ``upgrade run`` is under way for a pool, its expected transient drift (mixed kubelet
versions, nodes on the version it comes from or goes to, a node count within the surge) is
``upgrade in progress`` in ``watch`` and ``serve``, not a finding (issue 15, item 4).

The runs are known from the audit store, as ``app.upgrading`` records them: a plan ``note``
(payload ``upgrade`` with ``plannedAt``) and the step records referencing it. A run is active
while its state (``core.upgrades.run_state``) is running with the pre-flight done;
``core.upgrades.classify_drift`` decides what of a finding is the upgrade's. ``UpgradeInProgress``
sits between the fleet and its sink: a finding event the upgrade explains becomes one
``upgrade.in_progress`` event and is held back; once the run is over (done, failed), a held
finding that is still current is announced as the finding it is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from fleetwarden.core.audit import AuditKind
from fleetwarden.core.findings import Finding
from fleetwarden.core.lifecycle import LifecycleEvent, LifecycleType
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.core.upgrades import (
    RunPhase,
    RunState,
    StepKind,
    StepRecord,
    UpgradePlan,
    classify_drift,
    pool_not_compared,
    pools_of_cluster,
    run_state,
)
from fleetwarden.ports.audit import AuditStore, AuditStoreError
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["UpgradeInProgress", "active_runs", "plan_from_payload", "read_step_records"]

Emit = Callable[[Any], Awaitable[None] | None]


def plan_from_payload(
    payload: Mapping[str, Any], specs: Sequence[NodePoolSpec]
) -> UpgradePlan | None:
    """The plan of a plan record (what ``classify_drift`` needs of it: pool, versions, surge,
    and the pool's desired spec from ``specs``, found as ``upgrade plan`` finds it:
    ``pools_of_cluster``); None for a record that is not one. A pool defined more than once in
    its cluster has no spec (none of its definitions is compared; not the first one read)."""
    u = payload.get("upgrade")
    if not isinstance(u, Mapping) or "plannedAt" not in u:
        return None
    try:
        cluster, pool, to = str(u["cluster"]), str(u["pool"]), str(u["to"])
        spec = pools_of_cluster(specs, cluster).index(cluster).spec_for(pool)
        return UpgradePlan(
            run_id=str(u["run"]), cluster=cluster, pool=pool, to_version=to,
            from_versions=tuple(str(v) for v in u.get("from") or ()),
            old_nodes=tuple(str(n) for n in u.get("oldNodes") or ()), checks=(), steps=(),
            budget=timedelta(seconds=int(u.get("budgetSeconds") or 0)),
            surge=int(u.get("surge") or 1), spec=spec,
        )  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return None


async def read_step_records(store: AuditStore, plan_id: str) -> list[StepRecord]:
    """A run's step records (those referencing its plan record), every page."""
    out: list[StepRecord] = []
    before: int | None = None
    while True:
        page = await store.query(ref=plan_id, before_seq=before, limit=500)
        for r in page:
            raw = r.payload.get("upgrade", {}).get("record")
            parsed = StepRecord.from_json(raw) if isinstance(raw, Mapping) else None
            if parsed is not None:
                out.append(parsed)
        if len(page) < 500:
            return out
        before = page[-1].seq


async def active_runs(
    store: AuditStore, specs: Sequence[NodePoolSpec], *, limit: int = 200
) -> list[tuple[UpgradePlan, RunState]]:
    """The runs under way (pre-flight done, not done nor failed), from the newest ``limit``
    plan records."""
    notes = await store.query(kind=AuditKind.NOTE, payload_contains='"plannedAt"', limit=limit)
    out = []
    for note in notes:
        plan = plan_from_payload(note.payload, specs)
        if plan is None:
            continue
        state = run_state(await read_step_records(store, note.id))
        if state.phase is RunPhase.RUNNING and StepKind.PREFLIGHT in state.done:
            out.append((plan, state))
    return out


class UpgradeInProgress:
    """The emit wrapper (see the module docstring). ``current``: the fleet's current findings
    (to announce what was held once its run is over); ``refresh`` re-reads the runs."""

    def __init__(
        self,
        emit: Emit,
        *,
        store: AuditStore,
        specs: Sequence[NodePoolSpec],
        clock: Clock = SYSTEM_CLOCK,
        current: Callable[[], list[Finding]] = list,
        interval: float = 15.0,
    ) -> None:
        self.emit, self.store, self.specs, self.clock = emit, store, list(specs), clock
        self.current, self.interval = current, interval
        self.runs: list[tuple[UpgradePlan, RunState]] = []
        self.held: dict[str, Finding] = {}  # finding id -> the finding, held as in progress
        self.said: set[str] = set()  # runs whose pool not compared was said

    def run_of(self, finding: Finding) -> UpgradePlan | None:
        """The active run that explains ``finding``, if one does."""
        for plan, state in self.runs:
            if classify_drift([finding], plan, state).in_progress:
                return plan
        return None

    def findings(self, findings: Sequence[Finding]) -> list[Finding]:
        """``findings`` without the upgrade's drift (``/api/findings``)."""
        return [f for f in findings if self.run_of(f) is None]

    async def refresh(self) -> None:
        self.runs = await active_runs(self.store, self.specs)
        for plan, _ in self.runs:
            await self._say_not_compared(plan)
        still = {f.id for f in self.current()}
        for fid, finding in list(self.held.items()):
            if self.run_of(finding) is not None:
                continue
            del self.held[fid]
            if fid in still:  # the run is over and the drift stayed: it is a finding now
                await self._out(
                    FindingEvent(
                        FindingEventType.APPEARED, finding, self.clock.now(), reason="upgrade over"
                    )
                )

    async def refresh_forever(self) -> None:
        """``refresh`` every ``interval``; a store that fails keeps the runs last read."""
        while True:
            with contextlib.suppress(AuditStoreError):
                await self.refresh()
            await asyncio.sleep(self.interval)

    async def observe(self, event: Any) -> None:
        if not isinstance(event, FindingEvent):
            await self._out(event)
            return
        f = event.finding
        if event.type is FindingEventType.CLEARED:
            if self.held.pop(f.id, None) is None:
                await self._out(event)  # held ones were never announced: nothing to clear
            return
        plan = self.run_of(f)
        if plan is None:
            if self.held.pop(f.id, None) is not None:  # first time it is seen as a finding
                event = FindingEvent(FindingEventType.APPEARED, f, event.at, event.reason)
            await self._out(event)
            return
        self.held[f.id] = f
        details = {
            "status": "upgrade in progress",
            "pool": plan.pool,
            "run": plan.run_id,
            "to": plan.to_version,
            "finding": {"id": f.id, "layer": f.layer.value, "field": f.field, "actual": f.actual},
        }
        kind = LifecycleType.UPGRADE_IN_PROGRESS
        await self._out(LifecycleEvent(kind, f.cluster, event.at, details))

    async def _say_not_compared(self, plan: UpgradePlan) -> None:
        """Once per run whose pool is defined more than once in its cluster (the desired tree
        changed since it was planned): a ``pool.not_compared`` event per file (scan's skip,
        with ``run`` and ``to``) -- none of its definitions is compared, so its drift is
        classified with no spec (a node count above the maximum is not the upgrade's)."""
        if plan.run_id in self.said:
            return
        self.said.add(plan.run_id)
        assigned = pools_of_cluster(self.specs, plan.cluster)
        for skip in pool_not_compared(assigned, plan.cluster, plan.pool):
            details = {**skip.to_json(), "run": plan.run_id, "to": plan.to_version}
            kind = LifecycleType.POOL_NOT_COMPARED
            await self._out(LifecycleEvent(kind, plan.cluster, self.clock.now(), details))

    async def _out(self, event: Any) -> None:
        result = self.emit(event)
        if isinstance(result, Awaitable):
            await result
