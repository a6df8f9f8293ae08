"""Drift intelligence on a real kube-apiserver: a finding from a live cluster names who wrote
the field (the field manager from managedFields) and when (issue 14)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import http_client_factory, load_kubeconfig
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.core.events import parse_time
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.ports.kube import Conflict, NotFound
from tests.e2e.test_capacity_live import make_pod, running, set_status, unschedulable
from tests.e2e.test_watch_live import Recorder, _clean, node_body, spec

pytestmark = pytest.mark.live


@pytest.fixture()
def endpoints(k8s):
    return load_kubeconfig(Path(k8s["kubeconfig"]))


async def test_label_patched_by_kubectl_edit_names_it_with_start_and_detect_times(endpoints):
    ep = endpoints[0]
    rec = Recorder()
    fleet = FleetWatcher(
        [spec(ep.name)], http_client_factory, rec.emit, settings=WatchSettings(probe_interval=0.5)
    )
    async with KubeClient(ep) as api:
        await _clean(api)
        await api.request("POST", "/api/v1/nodes", body=node_body("a-1"))
        runner = asyncio.create_task(fleet.run([ep]))
        try:
            await rec.wait(
                lambda: fleet.watcher(ep.name) and fleet.watcher(ep.name).synced.is_set()
            )
            patched_at = datetime.now(UTC)
            await api.request(
                "PATCH",
                "/api/v1/nodes/a-1",
                params={"fieldManager": "kubectl-edit"},
                body={"metadata": {"labels": {"team": "payments"}}},
                content_type="application/strategic-merge-patch+json",
            )
            (appeared,) = await rec.wait(lambda: rec.findings("finding.appeared", "labels.team"))
            data = appeared.to_json()["finding"]
            assert data["actor"] == {
                "name": "kubectl-edit",
                "kind": "human",
                "via": "managedFields",
            }
            started, detected = parse_time(data["startedAt"]), parse_time(data["detectedAt"])
            assert started is not None and detected is not None
            # managedFields times have a one-second resolution
            assert abs(started - patched_at) < timedelta(seconds=2)
            assert started <= detected + timedelta(seconds=1)
            # the tracker's finding (what /api/findings and a later event show) keeps the stamp
            (current,) = [f for f in fleet.tracker.current() if f.field == "labels.team"]
            assert current.to_json()["actor"]["name"] == "kubectl-edit"
            # a second writer changes the value: the finding is new and names the new writer
            await api.request(
                "PATCH",
                "/api/v1/nodes/a-1",
                params={"fieldManager": "argocd-controller"},
                body={"metadata": {"labels": {"team": "ops"}}},
                content_type="application/strategic-merge-patch+json",
            )
            ops = await rec.wait(
                lambda: [
                    e
                    for e in rec.findings("finding.appeared", "labels.team")
                    if e.finding.actual == "ops"
                ]
            )
            assert ops[0].to_json()["finding"]["actor"] == {
                "name": "argocd-controller",
                "kind": "gitops",
                "via": "managedFields",
            }
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await _clean(api)


@pytest.mark.parametrize("taint", ["ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted"])
async def test_a_node_replaced_by_the_autoscaler_is_churn_and_a_hand_deleted_one_counts(
    endpoints, taint
):
    ep = endpoints[1]
    rec = Recorder()
    fleet = FleetWatcher(
        [spec(ep.name)], http_client_factory, rec.emit, settings=WatchSettings(probe_interval=0.5)
    )
    async with KubeClient(ep) as api:
        await _clean(api)
        await api.request("POST", "/api/v1/nodes", body=node_body("old-1"))
        runner = asyncio.create_task(fleet.run([ep]))
        try:
            await rec.wait(
                lambda: fleet.watcher(ep.name) and fleet.watcher(ep.name).synced.is_set()
            )
            # the autoscaler marks the node, deletes it, and a matching node replaces it
            body = node_body("old-1")
            body["spec"]["taints"].append({"key": taint, "effect": "NoSchedule"})
            await api.patch("/api/v1/nodes/old-1", {"spec": body["spec"]})
            await api.request("DELETE", "/api/v1/nodes/old-1")
            await rec.wait(
                lambda: [e for e in rec.lifecycle("pool.scaled") if e.details["to"] == 0]
            )
            await api.request("POST", "/api/v1/nodes", body=node_body("new-1"))
            await rec.wait(
                lambda: [e for e in rec.lifecycle("pool.scaled") if e.details["to"] == 1]
            )
            (churn,) = rec.lifecycle("churn")
            data = churn.to_json()
            assert (data["change"], data["verdict"]) == ("replaced", "churn")
            assert (data["removed"], data["added"]) == (["old-1"], ["new-1"])
            assert [e for e in rec.events if isinstance(e, FindingEvent)] == []
            # a person deletes the replacement: the pool is short, and that is a finding
            await api.request("DELETE", "/api/v1/nodes/new-1")
            (short,) = await rec.wait(lambda: rec.findings("finding.appeared", "nodeCount"))
            assert short.finding.layer.value == "COUNT"
            assert len(rec.lifecycle("churn")) == 1
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await _clean(api)


async def test_pods_left_unschedulable_by_a_scale_down_are_a_capacity_finding_of_the_fleet(
    endpoints,
):
    ep = endpoints[0]
    rec = Recorder()
    fleet = FleetWatcher(
        [spec(ep.name)],
        http_client_factory,
        rec.emit,
        settings=WatchSettings(probe_interval=0.5, capacity=True),
    )
    ns = "intel-capacity"
    async with KubeClient(ep) as api:
        await _clean(api)
        with contextlib.suppress(Conflict):
            await api.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        with contextlib.suppress(Conflict):  # no controller-manager: no default ServiceAccount
            await api.create(
                f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "default"}}
            )
        with contextlib.suppress(NotFound):
            await api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/batch-0")
        for name in ("cap-1", "cap-2"):
            await api.request("POST", "/api/v1/nodes", body=node_body(name))
        await make_pod(api, ns, "batch-0")
        runner = asyncio.create_task(fleet.run([ep]))
        try:
            await rec.wait(
                lambda: fleet.watcher(ep.name) and fleet.watcher(ep.name).synced.is_set()
            )
            await api.request("DELETE", "/api/v1/nodes/cap-2")  # the pool scaled down by one
            await rec.wait(lambda: rec.lifecycle("pool.scaled"))
            # lastTransitionTime has whole seconds: one after the scale-down
            later = datetime.now(UTC) + timedelta(seconds=1)
            await set_status(api, ns, "batch-0", unschedulable(later))
            (appeared,) = await rec.wait(
                lambda: rec.findings("finding.appeared", "pods.unschedulable")
            )
            assert appeared.finding.layer.value == "CAPACITY"
            assert appeared.finding.extra["pods"] == [f"{ns}/batch-0"]
            assert [f.layer.value for f in fleet.findings()] == ["CAPACITY"]
            await set_status(api, ns, "batch-0", running(datetime.now(UTC)))
            await rec.wait(lambda: rec.findings("finding.cleared", "pods.unschedulable"))
            assert fleet.findings() == []
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await _clean(api)
            with contextlib.suppress(NotFound):
                await api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/batch-0")
