"""The ordered pool upgrade: plan, state machine over a fake clock, transient drift."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core import workloads as wl
from fleetwarden.core.deprecations import DeprecatedApi, DeprecationTable
from fleetwarden.core.diffing import diff_pool
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.ownership import ArgoApp, FluxKind, FluxRef, OwnershipMap, OwnershipRule
from fleetwarden.core.pools import NodePoolSpec, Provisioner
from fleetwarden.core.schedulability import PlannedWorkload
from fleetwarden.core.upgrades import (
    STEP_ORDER,
    AppObjects,
    RollNode,
    RunPhase,
    StepKind,
    StepRecord,
    StepStatus,
    classify_drift,
    over_budget,
    plan_upgrade,
    roll_node,
    roll_progress,
    run_findings,
    run_state,
    verify_findings,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
POOL_LABEL = "eks.amazonaws.com/nodegroup"
HR = FluxRef(FluxKind.HELM_RELEASE, "flux-system", "prod-general")
OWNERS = OwnershipMap(
    [
        OwnershipRule(cluster="prod", pool="general", flux=HR),
        OwnershipRule(cluster="prod", pool="general", argocd=ArgoApp("prod-node-config")),
    ]
)
DEPRECATIONS = DeprecationTable(
    [
        DeprecatedApi("policy/v1beta1", "PodDisruptionBudget", (1, 21), (1, 25), "policy/v1"),
        DeprecatedApi("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", (1, 29), (1, 32)),
    ]
)


def node(name: str, version: str = "v1.29.4", pool: str = "general", **kw: Any) -> ObservedNode:
    return ObservedNode(
        name,
        labels={POOL_LABEL: pool, "role": "general"},
        kubelet_version=version,
        allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
        **kw,
    )


def spec(**kw: Any) -> NodePoolSpec:
    base: dict[str, Any] = dict(
        name="general", cluster="prod", provider=Provisioner.AWS, source="pools/general.yaml",
        min_size=2, max_size=3, labels={"role": "general"}, kubernetes_version="1.29",
    )  # fmt: skip
    return NodePoolSpec(**{**base, **kw})


def deployment(cpu: str, replicas: int) -> PlannedWorkload:
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {
            "replicas": replicas,
            "template": {
                "spec": {
                    "nodeSelector": {POOL_LABEL: "general"},
                    "containers": [{"name": "api", "resources": {"requests": {"cpu": cpu}}}],
                }
            },
        },
    }
    model = wl.model_from(doc)
    assert isinstance(model, wl.Workload)
    return PlannedWorkload(model, model.key.ref, replicas)


def test_a_flux_owned_pool_plans_reconcile_then_roll_then_argo_sync_then_verify():
    plan = plan_upgrade(
        "prod", "general", "1.30", nodes=[node("a"), node("b")], spec=spec(), ownership=OWNERS
    )
    assert [s.kind for s in plan.steps] == list(STEP_ORDER)
    assert plan.step(StepKind.INFRASTRUCTURE).target == FluxRef(
        FluxKind.HELM_RELEASE, "flux-system", "prod-general", "prod"
    )
    assert plan.step(StepKind.CLUSTER).target == ArgoApp("prod-node-config")
    assert plan.old_nodes == ("a", "b") and plan.from_versions == ("v1.29.4",)
    assert not plan.blocked
    assert plan.run_id == plan_upgrade("prod", "general", "1.30", nodes=[]).run_id


def test_an_eksctl_pool_gets_the_change_shown_not_an_object_to_act_on():
    plan = plan_upgrade(
        "prod", "general", "1.30", nodes=[node("a")],
        spec=spec(source="clusters/prod/eksctl.yaml", source_format="eksctl"),
    )  # fmt: skip
    infra = plan.step(StepKind.INFRASTRUCTURE)
    assert infra.target is None
    assert infra.manual is not None and "eksctl upgrade nodegroup --cluster prod" in infra.manual
    assert "--kubernetes-version 1.30" in infra.manual
    assert plan.step(StepKind.CLUSTER).target is None


def test_an_api_removed_at_the_target_blocks_and_one_only_deprecated_is_a_note():
    apps = [
        AppObjects("shop", [("policy/v1beta1", "PodDisruptionBudget", "api")]),
        AppObjects("infra", [("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", "fs")]),
    ]
    plan = plan_upgrade("prod", "general", "1.30", nodes=[], apps=apps, table=DEPRECATIONS)
    [deps, _] = plan.checks
    assert plan.blocked
    assert deps.blocking == (
        "application shop: PodDisruptionBudget api uses policy/v1beta1, removed in 1.25; "
        "use policy/v1",
    )
    assert len(deps.notes) == 1 and "FlowSchema" in deps.notes[0]
    assert not plan_upgrade(
        "prod", "general", "1.24", nodes=[], apps=apps, table=DEPRECATIONS
    ).blocked


def test_schedulability_counts_the_nodes_cordoned_while_the_pool_rolls():
    """3 nodes of 4 CPU; 11 pods of 1 CPU fit in 12 CPU, but not with 2 cordoned and 1 surge."""
    nodes = [node("a"), node("b"), node("c")]
    apps = [AppObjects("shop", workloads=[deployment("1", 11)])]
    tight = plan_upgrade(
        "prod", "general", "1.30", nodes=nodes, spec=spec(max_size=3), apps=apps,
        surge=1, unavailable=2,
    )  # fmt: skip
    assert tight.blocked
    assert tight.checks[1].blocking == (
        "Deployment/shop/api: would not schedule: 11 pods request 11 cpu in all; "
        "the pool(s) general have 8 allocatable",
    )
    roomy = plan_upgrade(
        "prod", "general", "1.30", nodes=nodes, spec=spec(max_size=3), apps=apps,
        surge=1, unavailable=1,
    )  # fmt: skip
    assert not roomy.blocked


def test_a_target_that_is_no_version_is_refused():
    with pytest.raises(ValueError, match="latest"):
        plan_upgrade("prod", "general", "latest", nodes=[])


# --- the roll ------------------------------------------------------------------------------


def test_rolled_means_every_node_on_target_old_ones_gone_none_not_ready():
    old = ("a", "b")
    half = [RollNode("a", "v1.29.4", True), RollNode("c", "v1.30.1", True)]
    assert not roll_progress(half, "1.30", old=old).rolled
    not_ready = [RollNode("c", "v1.30.1", True), RollNode("d", "v1.30.1", False)]
    assert roll_progress(not_ready, "1.30", old=old).not_ready == ("d",)
    assert not roll_progress(not_ready, "1.30", old=old).rolled
    done = [RollNode("c", "v1.30.1", True), RollNode("d", "v1.30.1", True)]
    assert roll_progress(done, "1.30", old=old).rolled
    # an old node updated in place still counts as old until it is replaced
    assert not roll_progress([RollNode("a", "v1.30.1", True)], "1.30", old=old).rolled
    assert not roll_progress([], "1.30", old=old).rolled


def test_roll_node_reads_the_ready_condition_and_kubelet_version():
    obj = {
        "metadata": {"name": "n1"},
        "status": {
            "nodeInfo": {"kubeletVersion": "v1.30.1"},
            "conditions": [{"type": "Ready", "status": "Unknown"}],
        },
    }
    assert roll_node(obj) == RollNode("n1", "v1.30.1", False)


# --- the state machine --------------------------------------------------------------------


def rec(step: StepKind, status: StepStatus, minutes: float, **data: Any) -> StepRecord:
    return StepRecord(step, status, T0 + timedelta(minutes=minutes), "", data)


def test_a_run_resumes_at_the_first_step_not_done():
    records = [
        rec(StepKind.PREFLIGHT, StepStatus.STARTED, 0),
        rec(StepKind.PREFLIGHT, StepStatus.DONE, 0),
        rec(StepKind.INFRASTRUCTURE, StepStatus.STARTED, 1),
        rec(StepKind.INFRASTRUCTURE, StepStatus.DONE, 1),
        rec(StepKind.ROLL, StepStatus.STARTED, 2),
    ]
    state = run_state(reversed(records))  # the store answers newest first
    assert state.phase is RunPhase.RUNNING
    assert state.current is StepKind.ROLL
    assert state.done == (StepKind.PREFLIGHT, StepKind.INFRASTRUCTURE)
    assert state.window_start == T0 + timedelta(minutes=1)
    assert state.started[StepKind.ROLL] == T0 + timedelta(minutes=2)


def test_dry_run_records_advance_nothing_and_a_failed_step_ends_the_run():
    dry = [rec(s, StepStatus.DRY_RUN, 0) for s in STEP_ORDER]
    assert run_state(dry).current is StepKind.PREFLIGHT
    failed = run_state([rec(StepKind.PREFLIGHT, StepStatus.FAILED, 0)])
    assert failed.phase is RunPhase.FAILED and failed.failed is not None


def test_the_window_over_its_budget_with_a_fake_clock():
    records = [
        rec(StepKind.PREFLIGHT, StepStatus.DONE, 0),
        rec(StepKind.INFRASTRUCTURE, StepStatus.STARTED, 5),
    ]
    state = run_state(records)
    budget = timedelta(minutes=30)
    assert not over_budget(state, budget, now=T0 + timedelta(minutes=35))
    assert over_budget(state, budget, now=T0 + timedelta(minutes=35, seconds=1))
    done = run_state([rec(s, StepStatus.DONE, i) for i, s in enumerate(STEP_ORDER)])
    assert done.phase is RunPhase.DONE
    assert not over_budget(done, budget, now=T0 + timedelta(days=1))


def test_a_failed_step_or_the_budget_is_one_high_finding():
    plan = plan_upgrade("prod", "general", "1.30", nodes=[], spec=spec())
    failed = run_state([rec(StepKind.CLUSTER, StepStatus.FAILED, 3)])
    [f] = run_findings(plan, failed)
    assert (f.severity, f.field, f.actual) == (Severity.HIGH, "upgrade.cluster", "failed")
    over = run_state(
        [rec(StepKind.ROLL, StepStatus.FAILED, 31, reason="budget", elapsedSeconds=1860)]
    )
    [g] = run_findings(plan, over)
    assert (g.field, g.expected, g.actual) == ("upgrade.budget", 1800, 1860)
    assert run_findings(plan, run_state([])) == []


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(STEP_ORDER), st.sampled_from(list(StepStatus)), st.integers(0, 60)
        )
    )
)
def test_the_state_is_the_same_whatever_order_the_records_come_in(raw):
    records = [rec(s, status, m) for s, status, m in raw]
    a, b = run_state(records), run_state(list(reversed(records)))
    assert (a.phase, a.done, a.current, a.window_start) == (
        b.phase,
        b.done,
        b.current,
        b.window_start,
    )
    if a.current is not None:
        assert a.current not in a.done
        assert all(s in a.done for s in STEP_ORDER[: STEP_ORDER.index(a.current)])


# --- transient drift ---------------------------------------------------------------------


def test_mixed_versions_and_surge_count_are_in_progress_while_the_run_is_under_way():
    plan = plan_upgrade("prod", "general", "1.30", nodes=[node("a"), node("b")], spec=spec())
    mixed = Finding(
        "prod",
        "general",
        Layer.L4,
        "kubeletVersion.mixed",
        "1 version",
        ["v1.29.4", "v1.30.1"],
        Severity.MEDIUM,
    )
    ahead = Finding("prod", "general", Layer.L4, "kubeletVersion", "1.29", "v1.30.1", Severity.HIGH)
    surge = Finding("prod", "general", Layer.COUNT, "nodeCount", "2..3", 4, Severity.MEDIUM)
    too_many = Finding("prod", "general", Layer.COUNT, "nodeCount", "2..3", 5, Severity.MEDIUM)
    label = Finding("prod", "general", Layer.L1, "labels.role", "general", "x", Severity.HIGH)
    other = Finding(
        "prod", "spot", Layer.L4, "kubeletVersion.mixed", "1 version", [], Severity.MEDIUM
    )
    every = [mixed, ahead, surge, too_many, label, other]
    running = run_state(
        [rec(StepKind.PREFLIGHT, StepStatus.DONE, 0), rec(StepKind.ROLL, StepStatus.STARTED, 1)]
    )
    got = classify_drift(every, plan, running)
    assert got.in_progress == (mixed, ahead, surge)
    assert got.findings == (too_many, label, other)
    finished = run_state([rec(s, StepStatus.DONE, i) for i, s in enumerate(STEP_ORDER)])
    assert classify_drift(every, plan, finished).in_progress == ()
    not_started = run_state([])
    assert classify_drift(every, plan, not_started).in_progress == ()


def test_verify_diffs_the_pool_against_the_target_version():
    plan = plan_upgrade("prod", "general", "1.30", nodes=[], spec=spec())
    assert verify_findings(plan, [node("c", "v1.30.2"), node("d", "v1.30.2")]) == []
    left = verify_findings(plan, [node("c", "v1.30.2"), node("d", "v1.29.4")])
    assert {f.field for f in left} >= {"kubeletVersion"}


def test_the_diff_of_a_pool_half_rolled_with_one_surge_node_is_all_in_progress():
    """The real four-layer diff mid-roll (3 old nodes, 1 surge node on the target, max 3)."""
    before = [node("a"), node("b"), node("c")]
    plan = plan_upgrade("prod", "general", "1.30", nodes=before, spec=spec(max_size=3))
    mid = [*before, node("d", "v1.30.1")]
    drift = diff_pool(spec(max_size=3), mid, cluster="prod")
    assert {(f.layer, f.field) for f in drift} == {
        (Layer.COUNT, "nodeCount"),
        (Layer.L4, "kubeletVersion"),
    }
    running = run_state([rec(StepKind.PREFLIGHT, StepStatus.DONE, 0)])
    got = classify_drift(drift, plan, running)
    assert got.findings == () and len(got.in_progress) == 2
    two_surge = diff_pool(spec(max_size=3), [*mid, node("e", "v1.30.1")], cluster="prod")
    left = classify_drift(two_surge, plan, running).findings
    assert [(f.layer, f.actual) for f in left] == [(Layer.COUNT, 5)]  # beyond the surge
