"""The ordered pool upgrade against a real kube-apiserver, the test playing the provider.

There is no kubelet and no controller-manager: the test creates Node objects and writes their
status (kubelet version, Ready) through the status subresource, and "rolls" the pool by adding
nodes on the new version and deleting the old ones. The pool template is owned by a real Flux
Kustomization (the corpus's CRD, ../shared/realdata/crds); the labels' Argo CD application
lives in the REST simulator. The audit store is one SQLite file that outlives the runners.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.argocd.simulator import ArgoCDSimulator
from fleetwarden.adapters.flux import REQUESTED_AT, FluxClient, object_path
from fleetwarden.adapters.kube.client import JSON_MERGE, KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.upgrading import Progress, UpgradeRunner
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.findings import Layer, Severity
from fleetwarden.core.ownership import ArgoApp, FluxKind, FluxRef, OwnershipMap, OwnershipRule
from fleetwarden.core.pools import NodePoolSpec, Provisioner
from fleetwarden.core.upgrades import RunPhase, StepKind, StepStatus, plan_upgrade
from fleetwarden.formats.nodes import node_from_object
from fleetwarden.ports.kube import Conflict, NotFound
from fleetwarden.ports.sources import FixedClock
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.live, pytest.mark.realdata]

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
POOL_LABEL = "eks.amazonaws.com/nodegroup"
APP = "prod-node-config"
_pools = itertools.count(1)


@pytest.fixture()
async def api(k8s: dict[str, Any]) -> AsyncIterator[KubeClient]:
    endpoint = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    async with KubeClient(endpoint) as client:
        yield client


@pytest.fixture()
async def kustomization(api: KubeClient, realdata: Path) -> FluxRef:
    crd = yaml.safe_load((realdata / "crds" / "flux-kustomization-crd.yaml").read_text())
    name = crd["metadata"]["name"]
    with contextlib.suppress(Conflict):
        await api.request("POST", CRDS, body=crd)

    async def established() -> bool:
        obj = await api.get(f"{CRDS}/{name}")
        conds = (obj.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    await wait_for(established, what="Kustomization CRD Established")
    with contextlib.suppress(Conflict):
        await api.create("/api/v1/namespaces", {"metadata": {"name": "flux-system"}})
    ref = FluxRef(FluxKind.KUSTOMIZATION, "flux-system", f"pools-{next(_pools)}")
    body = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": ref.name, "namespace": ref.namespace},
        "spec": {
            "interval": "10m",
            "path": "./clusters/prod/pools",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "fleet"},
        },
    }
    path = object_path(ref).rsplit("/", 1)[0]
    await wait_for(lambda: _create_ok(api, path, body), what="Kustomization created")
    return ref


async def _create_ok(api: KubeClient, path: str, body: dict[str, Any]) -> bool:
    try:
        await api.create(path, body)
    except NotFound:
        return False  # the CRD is established but its REST path is not served yet
    return True


@dataclass
class Provider:
    """The test as the cloud provider: Node objects with status, no kubelet."""

    api: KubeClient
    pool: str

    async def add(self, name: str, version: str, *, ready: bool = True) -> None:
        labels = {POOL_LABEL: self.pool, "role": "general"}
        await self.api.create(
            "/api/v1/nodes",
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}},
        )
        status = {
            "nodeInfo": {"kubeletVersion": version},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "lastHeartbeatTime": "2026-03-01T12:00:00Z",
                    "lastTransitionTime": "2026-03-01T12:00:00Z",
                }
            ],
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        }
        await self.api.patch(
            f"/api/v1/nodes/{name}/status", {"status": status}, content_type=JSON_MERGE
        )

    async def remove(self, name: str) -> None:
        with contextlib.suppress(NotFound):
            await self.api.request("DELETE", f"/api/v1/nodes/{name}")

    async def nodes(self) -> list[Any]:
        listed = await self.api.list("/api/v1/nodes", label_selector=f"{POOL_LABEL}={self.pool}")
        return [node_from_object(o) for o in listed.items]


@pytest.fixture()
async def provider(api: KubeClient) -> AsyncIterator[Provider]:
    p = Provider(api, f"general-{next(_pools)}")
    yield p
    for n in await p.nodes():
        await p.remove(n.name)


T_START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)  # the upgrade tests' clock


def argo(sim: ArgoCDSimulator) -> ArgoCDClient:
    return ArgoCDClient(
        "http://argocd.test", token="tok", transport=httpx.ASGITransport(app=sim), retries=0
    )


def application() -> dict[str, Any]:
    return {
        "metadata": {"name": APP},
        "spec": {"source": {"repoURL": "https://git.example/fleet", "targetRevision": "main"}},
        "status": {},
    }


async def plan_for(provider: Provider, flux: FluxRef | None, **kw: Any):
    spec = NodePoolSpec(
        name=provider.pool, cluster="fw-test-1", provider=Provisioner.AWS,
        source="clusters/prod/pools.yaml", min_size=2, max_size=2,
        labels={"role": "general"}, kubernetes_version="1.29",
    )  # fmt: skip
    rules = [OwnershipRule(pool=provider.pool, argocd=ArgoApp(APP))]
    if flux is not None:
        rules.append(OwnershipRule(pool=provider.pool, flux=flux))
    return plan_upgrade(
        "fw-test-1", provider.pool, "1.30", nodes=await provider.nodes(), spec=spec,
        ownership=OwnershipMap(rules), **kw,
    )  # fmt: skip


def steps_of(records: list[Any], step: StepKind, status: StepStatus) -> int:
    return sum(r.step is step and r.status is status for r in records)


async def test_the_runner_resumes_at_the_roll_after_a_kill_and_finishes_the_upgrade(
    api: KubeClient, provider: Provider, kustomization: FluxRef, tmp_path: Path
) -> None:
    """Reconcile requested once, roll watched (mixed versions are in progress, not findings),
    runner killed mid-roll, a new runner over the same store resumes at the roll, then syncs
    the labels' app once and verifies the pool clean."""
    await provider.add(f"{provider.pool}-a", "v1.29.4")
    await provider.add(f"{provider.pool}-b", "v1.29.4")
    plan = await plan_for(provider, kustomization)
    assert plan.old_nodes == (f"{provider.pool}-a", f"{provider.pool}-b")
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    sim = ArgoCDSimulator([application()], tokens=["tok"])
    seen: list[Progress] = []

    store = await open_audit_store(url)
    first = UpgradeRunner(
        plan, kube=api, store=store, flux=lambda _c: FluxClient(api), execute=True,
        poll=0.05, on_progress=seen.append,
    )  # fmt: skip
    task = asyncio.create_task(first.run())
    await wait_for(lambda: seen, what="the roll watched")
    kust = await api.get(object_path(kustomization))
    requested = kust["metadata"]["annotations"][REQUESTED_AT]
    # the provider surges one new node and retires one old one
    await provider.add(f"{provider.pool}-c", "v1.30.1")
    await provider.remove(f"{provider.pool}-a")
    await wait_for(
        lambda: seen[-1].roll.on_target == 1 and seen[-1].roll.total == 2, what="half rolled"
    )
    last = seen[-1]
    # the new node is ahead of the desired 1.29: the upgrade in progress, not a finding
    [ahead] = [f for f in last.drift.in_progress if f.field == "kubeletVersion"]
    assert ahead.nodes == (f"{provider.pool}-c",)
    assert not [f for f in last.drift.findings if f.layer is Layer.L4]
    task.cancel()  # killed mid-roll
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await store.close()

    await provider.add(f"{provider.pool}-d", "v1.30.1")
    await provider.remove(f"{provider.pool}-b")
    store = await open_audit_store(url)
    async with argo(sim) as argocd:
        second = UpgradeRunner(
            plan, kube=api, store=store, flux=lambda _c: FluxClient(api), argocd=argocd,
            execute=True, poll=0.05,
        )  # fmt: skip
        report = await asyncio.wait_for(second.run(), 30)
    try:
        assert report.resumed_at is StepKind.ROLL
        assert report.state.phase is RunPhase.DONE, report.to_json()
        assert report.findings == []
        records = await second.read_records()
        assert steps_of(records, StepKind.INFRASTRUCTURE, StepStatus.DONE) == 1
        assert steps_of(records, StepKind.ROLL, StepStatus.STARTED) == 1
        done, started = StepStatus.DONE, StepStatus.STARTED
        assert [(r.step, r.status) for r in report.records] == [
            (StepKind.ROLL, done),  # started by the first runner: not started again
            (StepKind.CLUSTER, started), (StepKind.CLUSTER, done),
            (StepKind.VERIFY, started), (StepKind.VERIFY, done),
        ]  # fmt: skip
        kust = await api.get(object_path(kustomization))
        assert kust["metadata"]["annotations"][REQUESTED_AT] == requested  # not asked twice
        assert sim.count("POST", f"/{APP}/sync") == 1
        audit = await store.query(cluster="fw-test-1", pool=provider.pool, limit=100)
        kinds = [r.kind for r in audit]
        assert kinds.count(AuditKind.NOTE) == 1  # one plan, stored by the first runner
        assert kinds.count(AuditKind.OUTCOME) == 5  # every step ended once
        assert (await store.verify()).ok
    finally:
        await store.close()


async def test_a_stalled_roll_over_its_budget_is_a_high_finding_and_audited(
    api: KubeClient, provider: Provider, tmp_path: Path
) -> None:
    await provider.add(f"{provider.pool}-a", "v1.29.4")
    await provider.add(f"{provider.pool}-b", "v1.29.4")
    plan = await plan_for(provider, None, budget=timedelta(minutes=30))
    clock = FixedClock(T_START)
    seen: list[Progress] = []
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        runner = UpgradeRunner(
            plan, kube=api, store=store, execute=True, clock=clock, poll=0.05,
            on_progress=seen.append,
        )  # fmt: skip
        task = asyncio.create_task(runner.run())
        await wait_for(lambda: seen, what="the roll watched")
        clock.advance(timedelta(minutes=29))
        await asyncio.sleep(0.3)
        assert not task.done()  # inside the budget: still waiting
        clock.advance(timedelta(minutes=2))
        report = await asyncio.wait_for(task, 10)
        assert report.state.phase is RunPhase.FAILED
        [finding] = report.findings
        assert (finding.severity, finding.field) == (Severity.HIGH, "upgrade.budget")
        assert (finding.expected, finding.actual) == (1800, 1860)
        outcomes = await store.query(kind=AuditKind.OUTCOME, pool=provider.pool, limit=10)
        failed = outcomes[0]  # newest first: preflight and infrastructure ended before
        assert len(outcomes) == 3
        assert failed.payload["upgrade"]["record"]["step"] == "roll"
        assert failed.payload["upgrade"]["record"]["status"] == "failed"
        assert failed.payload["upgrade"]["record"]["data"]["reason"] == "budget"
    finally:
        await store.close()


async def test_a_failed_argo_cd_sync_fails_the_cluster_step_on_record(
    api: KubeClient, provider: Provider, tmp_path: Path
) -> None:
    await provider.add(f"{provider.pool}-a", "v1.29.4")
    plan = await plan_for(provider, None)
    await provider.add(f"{provider.pool}-b", "v1.30.1")
    await provider.remove(f"{provider.pool}-a")
    await provider.add(f"{provider.pool}-c", "v1.30.1")
    sim = ArgoCDSimulator([application()], tokens=["tok"], operation_duration=None)
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        async with argo(sim) as argocd:
            runner = UpgradeRunner(
                plan, kube=api, store=store, argocd=argocd, execute=True, poll=0.05
            )
            task = asyncio.create_task(runner.run())
            await wait_for(lambda: sim.count("POST", f"/{APP}/sync") == 1, what="the sync")
            sim.finish_operation(APP, phase="Failed")
            report = await asyncio.wait_for(task, 10)
        assert report.state.phase is RunPhase.FAILED
        assert report.state.failed is not None and report.state.failed.step is StepKind.CLUSTER
        [finding] = report.findings
        assert (finding.field, finding.severity) == ("upgrade.cluster", Severity.HIGH)
        outcomes = await store.query(kind=AuditKind.OUTCOME, pool=provider.pool, limit=10)
        assert outcomes[0].payload["upgrade"]["record"]["status"] == "failed"
        assert "Failed" in outcomes[0].summary
    finally:
        await store.close()


async def test_dry_run_sends_nothing_and_records_what_each_step_would_do(
    api: KubeClient, provider: Provider, kustomization: FluxRef, tmp_path: Path
) -> None:
    await provider.add(f"{provider.pool}-a", "v1.29.4")
    plan = await plan_for(provider, kustomization)
    sim = ArgoCDSimulator([application()], tokens=["tok"])
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        async with argo(sim) as argocd:
            runner = UpgradeRunner(
                plan, kube=api, store=store, flux=lambda _c: FluxClient(api), argocd=argocd
            )
            report = await asyncio.wait_for(runner.run(), 10)
        assert [r.status for r in report.records] == [StepStatus.DRY_RUN] * 5
        assert "would wait: 0/1 node(s) on the target version" in report.records[2].detail
        kust = await api.get(object_path(kustomization))
        assert REQUESTED_AT not in (kust["metadata"].get("annotations") or {})
        assert sim.count("POST", f"/{APP}/sync") == 0
    finally:
        await store.close()


async def test_a_missing_flux_object_fails_the_infrastructure_step_and_nothing_after_it_runs(
    api: KubeClient, provider: Provider, kustomization: FluxRef, tmp_path: Path
) -> None:
    await provider.add(f"{provider.pool}-a", "v1.29.4")
    missing = FluxRef(FluxKind.KUSTOMIZATION, "flux-system", "no-such-pools")
    plan = await plan_for(provider, missing)
    sim = ArgoCDSimulator([application()], tokens=["tok"])
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        async with argo(sim) as argocd:
            runner = UpgradeRunner(
                plan, kube=api, store=store, flux=lambda _c: FluxClient(api), argocd=argocd,
                execute=True, poll=0.05,
            )  # fmt: skip
            report = await asyncio.wait_for(runner.run(), 10)
        assert report.state.failed is not None
        assert report.state.failed.step is StepKind.INFRASTRUCTURE
        assert "NotFound" in report.state.failed.detail
        [finding] = report.findings
        assert finding.field == "upgrade.infrastructure"
        assert not [r for r in report.records if r.step is StepKind.ROLL]
        assert sim.count("POST", f"/{APP}/sync") == 0
        again = await UpgradeRunner(plan, kube=api, store=store, execute=True).run()
        assert again.records == [] and again.state.phase is RunPhase.FAILED  # not retried
    finally:
        await store.close()
