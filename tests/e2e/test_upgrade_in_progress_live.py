"""Issue 15 item 4's last gap on a real kube-apiserver: while ``upgrade run`` rolls a pool (a
real ``UpgradeRunner``, its records in a real audit store), the live watch reports the pool's
mixed kubelet versions and surge node as ``upgrade in progress``, not findings; once the run has
failed (its budget exceeded), what is left of that drift is a finding."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import http_client_factory, load_kubeconfig
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.upgrade_drift import UpgradeInProgress
from fleetwarden.app.upgrading import Progress, UpgradeRunner
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.core.findings import Layer
from fleetwarden.core.lifecycle import LifecycleEvent
from fleetwarden.core.pools import NodePoolSpec, Provisioner
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.core.upgrades import RunPhase, plan_upgrade
from fleetwarden.ports.sources import FixedClock
from tests.e2e.test_upgrade_live import T_START, Provider, wait_for

pytestmark = pytest.mark.live

POOL = "upgscan-general"  # this test's own pool


@pytest.fixture()
async def provider(k8s: dict[str, Any]) -> AsyncIterator[Provider]:
    endpoint = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    async with KubeClient(endpoint) as api:
        p = Provider(api, POOL)
        for n in await p.nodes():  # left by an earlier run
            await p.remove(n.name)
        yield p
        for n in await p.nodes():
            await p.remove(n.name)


async def test_a_rolling_pool_is_upgrade_in_progress_until_its_run_fails(
    provider: Provider, k8s: dict[str, Any], tmp_path: Path
) -> None:
    endpoint = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    spec = NodePoolSpec(
        name=POOL, cluster=endpoint.name, provider=Provisioner.AWS, source="pools.yaml",
        min_size=2, max_size=2, labels={"role": "general"}, kubernetes_version="1.29",
    )  # fmt: skip
    await provider.add(f"{POOL}-a", "v1.29.4")
    await provider.add(f"{POOL}-b", "v1.29.4")
    plan = plan_upgrade(
        endpoint.name, POOL, "1.30", nodes=await provider.nodes(), spec=spec,
        budget=timedelta(minutes=30),
    )  # fmt: skip
    clock = FixedClock(T_START)
    seen: list[Progress] = []
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    events: list[Any] = []
    fleet = FleetWatcher([spec], http_client_factory, events.append, settings=WatchSettings())
    gate = UpgradeInProgress(
        events.append, store=store, specs=[spec], clock=clock, current=fleet.findings
    )
    fleet.emit = gate.observe
    runner = UpgradeRunner(
        plan, kube=provider.api, store=store, execute=True, clock=clock, poll=0.05,
        on_progress=seen.append,
    )  # fmt: skip
    run = asyncio.create_task(runner.run())
    watching = None
    try:
        await wait_for(lambda: seen, what="the roll under way")
        await gate.refresh()
        assert [p.run_id for p, _state in gate.runs] == [plan.run_id]
        # the surge node, on the target version: mixed versions, one node over the maximum
        await provider.add(f"{POOL}-c", "v1.30.1")
        watching = asyncio.create_task(fleet.run([endpoint]))

        def in_progress() -> set[str]:
            return {
                e.details["finding"]["field"]
                for e in events
                if isinstance(e, LifecycleEvent) and e.type.value == "upgrade.in_progress"
            }

        await wait_for(lambda: {"kubeletVersion", "nodeCount"} <= in_progress(), what="drift")
        ours = [e for e in events if isinstance(e, FindingEvent) and e.finding.pool == POOL]
        assert [e.finding.field for e in ours] == []  # nothing of it is a finding
        held = {f.field for f in fleet.findings() if f.pool == POOL}
        assert {"kubeletVersion", "nodeCount"} <= held  # the tracker still knows it
        assert [f for f in gate.findings(fleet.findings()) if f.pool == POOL] == []

        clock.advance(minutes=31)  # the roll stalls past its budget: the run fails
        report = await asyncio.wait_for(run, 10)
        assert report.state.phase is RunPhase.FAILED
        await gate.refresh()
        assert gate.runs == []
        late = [e for e in events if isinstance(e, FindingEvent) and e.finding.pool == POOL]
        assert {e.finding.field for e in late} >= {"kubeletVersion", "nodeCount"}
        assert all(e.type.value == "finding.appeared" for e in late)
        assert {e.finding.layer for e in late} <= {Layer.L4, Layer.COUNT}
    finally:
        for task in (run, watching):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await store.close()
