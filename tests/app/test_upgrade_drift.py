"""Issue 15 item 4's last gap: while an ``upgrade run`` is under way for a pool (known from the
audit store's upgrade records), its transient drift is ``upgrade in progress``, not findings."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.upgrade_drift import UpgradeInProgress, active_runs
from fleetwarden.app.upgrading import UpgradeRunner
from fleetwarden.core.diffing import diff_pool
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.lifecycle import LifecycleEvent
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec, Provisioner
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.core.upgrades import StepKind, StepStatus, plan_upgrade
from tests.support.clocks import TickingClock

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
POOL_LABEL = "eks.amazonaws.com/nodegroup"


def node(name: str, version: str = "v1.29.4") -> ObservedNode:
    return ObservedNode(
        name,
        labels={POOL_LABEL: "general", "role": "general"},
        kubelet_version=version,
        allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
    )


SPEC = NodePoolSpec(
    name="general", cluster="prod", provider=Provisioner.AWS, source="pools/general.yaml",
    min_size=2, max_size=3, labels={"role": "general"}, kubernetes_version="1.29",
)  # fmt: skip


async def test_the_drift_of_a_running_upgrade_is_in_progress_until_the_run_ends(
    tmp_path: Path,
) -> None:
    before = [node("a"), node("b"), node("c")]
    plan = plan_upgrade("prod", "general", "1.30", nodes=before, spec=SPEC)
    mid = [*before, node("d", "v1.30.1")]  # one surge node on the target version
    drift = diff_pool(SPEC, mid, cluster="prod")
    assert {(f.layer, f.field) for f in drift} == {
        (Layer.COUNT, "nodeCount"),
        (Layer.L4, "kubeletVersion"),
    }
    label = Finding("prod", "general", Layer.L1, "labels.role", "general", "x", Severity.HIGH)
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        clock = TickingClock(T0)
        # the runner's own record format: a plan note and step records referencing it
        runner = UpgradeRunner(plan, kube=None, store=store, execute=True, clock=clock)  # type: ignore[arg-type]
        await runner._store_plan(runner._plan_key)
        assert await active_runs(store, [SPEC]) == []  # planned, pre-flight not done
        await runner._record(StepKind.PREFLIGHT, StepStatus.DONE, "ok")
        await runner._record(StepKind.INFRASTRUCTURE, StepStatus.STARTED, "started")
        (run,) = await active_runs(store, [SPEC])
        assert run[0].run_id == plan.run_id and run[0].spec == SPEC

        out: list[Any] = []
        current = [*drift, label]
        gate = UpgradeInProgress(
            out.append, store=store, specs=[SPEC], clock=clock, current=lambda: list(current)
        )
        await gate.refresh()
        for f in current:
            await gate.observe(FindingEvent(FindingEventType.APPEARED, f, clock.now()))
        findings = [e for e in out if isinstance(e, FindingEvent)]
        assert [e.finding for e in findings] == [label]  # only what the upgrade does not explain
        progress = [e.to_json() for e in out if isinstance(e, LifecycleEvent)]
        assert {p["type"] for p in progress} == {"upgrade.in_progress"}
        assert sorted(p["finding"]["field"] for p in progress) == ["kubeletVersion", "nodeCount"]
        assert all(
            p["status"] == "upgrade in progress" and p["pool"] == "general" for p in progress
        )
        assert gate.findings(current) == [label]  # what /api/findings lists

        # one held finding clears while the run goes on: nothing to say, it was never announced
        count = next(f for f in drift if f.layer is Layer.COUNT)
        await gate.observe(FindingEvent(FindingEventType.CLEARED, count, clock.now()))
        current.remove(count)
        assert len(out) == 3

        # the run fails: what is left of its drift is a finding now
        await runner._record(StepKind.INFRASTRUCTURE, StepStatus.FAILED, "reconcile refused")
        await gate.refresh()
        assert gate.runs == []
        (late,) = out[3:]
        assert isinstance(late, FindingEvent) and late.type is FindingEventType.APPEARED
        assert late.finding.field == "kubeletVersion" and late.reason == "upgrade over"
        assert gate.findings(current) == current
    finally:
        await store.close()


async def test_a_run_whose_pool_is_now_defined_twice_goes_by_no_definition_and_says_so(
    tmp_path: Path,
) -> None:
    """The run was planned with ``general`` defined once; the desired tree now defines it in
    two files. Reading the runs back took the first definition in ``specs`` (its maximum then
    made a node above it "the upgrade's" or not, by file order); as ``scan``, ``watch`` and
    ``serve`` compare neither, the run's pool has no spec, and one ``pool.not_compared`` event
    per file (with the run) says why -- once, not on every refresh."""
    from dataclasses import replace

    other = replace(SPEC, source="pools/general.tf", max_size=5)
    plan = plan_upgrade("prod", "general", "1.30", nodes=[node("a")], spec=SPEC)
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        clock = TickingClock(T0)
        runner = UpgradeRunner(plan, kube=None, store=store, execute=True, clock=clock)  # type: ignore[arg-type]
        await runner._store_plan(runner._plan_key)
        await runner._record(StepKind.PREFLIGHT, StepStatus.DONE, "ok")
        for specs in ([SPEC, other], [other, SPEC]):
            ((read, _),) = await active_runs(store, specs)
            assert read.run_id == plan.run_id and read.spec is None
        out: list[Any] = []
        gate = UpgradeInProgress(out.append, store=store, specs=[SPEC, other], clock=clock)
        await gate.refresh()
        await gate.refresh()
        said = [e.to_json() for e in out]
        assert [(e["type"], e["cluster"], e["pool"], e["path"]) for e in said] == [
            ("pool.not_compared", "prod", "general", "pools/general.yaml"),
            ("pool.not_compared", "prod", "general", "pools/general.tf"),
        ]
        assert all(e["run"] == plan.run_id and e["to"] == "1.30" for e in said)
        assert "is defined 2 times (pools/general.yaml, pools/general.tf)" in said[0]["reason"]
        # a node above the maximum is no longer classified against one definition's
        above = Finding("prod", "general", Layer.COUNT, "nodeCount", "2..3", 4, Severity.MEDIUM)
        assert gate.findings([above]) == [above]
    finally:
        await store.close()
