"""Watching real kube-apiservers (started by scripts/k8s-test-env): every change to a Node
is seen and re-diffed at once; 410 relists, API-server restarts and Argo CD cluster Secrets
are handled without losing or duplicating a finding."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import http_client_factory, load_kubeconfig
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.core.lifecycle import LifecycleEvent
from fleetwarden.core.pools import NodePoolSpec, Taint
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.ports.kube import Conflict
from tests.support import k8s_env

pytestmark = pytest.mark.live

POOL = "general"


def spec(cluster: str) -> NodePoolSpec:
    return NodePoolSpec(
        name=POOL,
        cluster=cluster,
        instance_types=("m5.large",),
        min_size=1,
        max_size=50,
        labels={"team": "platform"},
        taints=(Taint("dedicated", "general", "NoSchedule"),),
        kubernetes_version="1.36",
    )


def node_body(name: str, *, pool: str | None = POOL, **labels: str) -> dict[str, Any]:
    all_labels = {"node.kubernetes.io/instance-type": "m5.large", "team": "platform", **labels}
    if pool:
        all_labels["eks.amazonaws.com/nodegroup"] = pool
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {"taints": [{"key": "dedicated", "value": "general", "effect": "NoSchedule"}]},
        # what the kubelet reports when it registers its Node (a Node without it is an
        # unknown version: a finding of its own)
        "status": {"nodeInfo": {"kubeletVersion": "v1.36.0"}},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[FindingEvent | LifecycleEvent] = []

    def emit(self, event: FindingEvent | LifecycleEvent) -> None:
        self.events.append(event)

    def findings(self, kind: str, field: str | None = None) -> list[FindingEvent]:
        return [
            e
            for e in self.events
            if isinstance(e, FindingEvent)
            and e.type.value == kind
            and (field is None or e.finding.field == field)
        ]

    def lifecycle(self, kind: str) -> list[LifecycleEvent]:
        return [e for e in self.events if isinstance(e, LifecycleEvent) and e.type.value == kind]

    async def wait(self, cond: Callable[[], Any], timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = cond()
            if result:
                return result
            await asyncio.sleep(0.02)
        raise AssertionError(f"timed out; events: {[e.to_json() for e in self.events][-12:]}")


@pytest.fixture()
def endpoints(k8s):
    return load_kubeconfig(Path(k8s["kubeconfig"]))


async def _clean(client: KubeClient) -> None:
    listed = await client.list("/api/v1/nodes")
    for item in listed.items:
        await client.request("DELETE", f"/api/v1/nodes/{item['metadata']['name']}")


async def test_label_taint_add_delete_and_410_relist(endpoints, k8s):
    ep = endpoints[0]
    rec = Recorder()
    fleet = FleetWatcher(
        [spec(ep.name)], http_client_factory, rec.emit, settings=WatchSettings(probe_interval=0.5)
    )
    async with KubeClient(ep) as api:
        await _clean(api)
        await api.request("POST", "/api/v1/nodes", body=node_body("n-1"))
        runner = asyncio.create_task(fleet.run([ep]))
        try:
            await rec.wait(
                lambda: fleet.watcher(ep.name) and fleet.watcher(ep.name).synced.is_set()
            )
            assert rec.findings("finding.appeared") == []  # clean pool: nothing to say
            # L1: kubectl label node n-1 team=payments --overwrite
            await api.patch("/api/v1/nodes/n-1", {"metadata": {"labels": {"team": "payments"}}})
            (appeared,) = await rec.wait(lambda: rec.findings("finding.appeared", "labels.team"))
            assert (appeared.finding.expected, appeared.finding.actual, appeared.finding.nodes) == (
                "platform",
                "payments",
                ("n-1",),
            )
            # L2: the taint removed by hand
            await api.patch(
                "/api/v1/nodes/n-1",
                {"spec": {"taints": []}},
                content_type="application/merge-patch+json",
            )
            await rec.wait(lambda: rec.findings("finding.appeared", "taints.dedicated:NoSchedule"))
            # a node added without a pool label
            await api.request("POST", "/api/v1/nodes", body=node_body("stray", pool=None))
            stray = await rec.wait(lambda: rec.findings("finding.appeared", "pool"))
            assert stray[0].finding.nodes == ("stray",) and stray[0].finding.pool is None
            # node deleted: its findings clear
            await api.request("DELETE", "/api/v1/nodes/stray")
            await rec.wait(lambda: rec.findings("finding.cleared", "pool"))
            # heal the label: cleared exactly once
            await api.patch("/api/v1/nodes/n-1", {"metadata": {"labels": {"team": "platform"}}})
            await rec.wait(lambda: rec.findings("finding.cleared", "labels.team"))
            # a second node scales the pool
            await api.request("POST", "/api/v1/nodes", body=node_body("n-2"))
            scaled = await rec.wait(
                lambda: [e for e in rec.lifecycle("pool.scaled") if e.details["to"] == 2]
            )
            assert scaled[0].details == {"pool": POOL, "from": 1, "to": 2}

            # 410: the watcher's resourceVersion expires while the stream is down
            watcher = fleet.watcher(ep.name)
            relists = watcher.relists
            watcher.resource_version = "1"
            before = len(rec.events)
            await asyncio.to_thread(k8s_env.restart_apiserver, k8s["state_dir"], 1)
            await api.patch("/api/v1/nodes/n-2", {"metadata": {"labels": {"team": "ops"}}})
            await rec.wait(lambda: watcher.relists > relists, timeout=30)
            await rec.wait(
                lambda: [
                    e
                    for e in rec.events[before:]
                    if isinstance(e, FindingEvent)
                    and e.finding.field == "labels.team"
                    and e.finding.actual == "ops"
                ],
                timeout=30,
            )
            # no finding reported twice across the relist: the taint drift stays known
            taint_events = rec.findings("finding.appeared", "taints.dedicated:NoSchedule")
            assert len(taint_events) == 1
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await _clean(api)


async def test_apiserver_killed_and_restarted_loses_and_duplicates_nothing(endpoints, k8s):
    ep = endpoints[1]
    rec = Recorder()
    fleet = FleetWatcher(
        [spec(ep.name)],
        http_client_factory,
        rec.emit,
        settings=WatchSettings(probe_interval=0.3, probe_timeout=1, failure_threshold=2),
    )
    async with KubeClient(ep) as api:
        await _clean(api)
        for i in range(3):
            await api.request("POST", "/api/v1/nodes", body=node_body(f"m-{i}"))
        await api.patch("/api/v1/nodes/m-0", {"metadata": {"labels": {"team": "x"}}})
        runner = asyncio.create_task(fleet.run([ep]))
        try:
            await rec.wait(lambda: rec.findings("finding.appeared", "labels.team"))
            await rec.wait(
                lambda: [e for e in rec.lifecycle("cluster.health") if e.details["to"] == "Healthy"]
            )
            await asyncio.to_thread(k8s_env.kill_apiserver, k8s["state_dir"], 2)
            await rec.wait(
                lambda: [
                    e for e in rec.lifecycle("cluster.health") if e.details["to"] == "Unreachable"
                ],
                timeout=20,
            )
            await asyncio.to_thread(k8s_env.start_apiserver, k8s["state_dir"], 2)
            # while it was down nothing changed; after it, one change must arrive
            await api.patch("/api/v1/nodes/m-1", {"metadata": {"labels": {"team": "y"}}})
            await rec.wait(
                lambda: [
                    e
                    for e in rec.findings("finding.appeared", "labels.team")
                    if e.finding.actual == "y"
                ],
                timeout=30,
            )
            # back to Healthy (possibly through Degraded while its informers sync)
            health = lambda: [e.details["to"] for e in rec.lifecycle("cluster.health")]  # noqa: E731
            await rec.wait(
                lambda: "Healthy" in health()[health().index("Unreachable") :], timeout=20
            )
            x = [
                e
                for e in rec.findings("finding.appeared", "labels.team")
                if e.finding.actual == "x"
            ]
            assert len(x) == 1, "the drift known before the outage was reported again"
            assert rec.findings("finding.cleared", "labels.team") == []
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await _clean(api)


def _secret(name: str, server: str, token: str, ca: bytes | None) -> dict[str, Any]:
    config = {
        "bearerToken": token,
        "tlsClientConfig": {
            "insecure": False,
            "caData": base64.b64encode(ca).decode() if ca else None,
        },
    }
    data = {"name": name, "server": server, "config": json.dumps(config)}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"cluster-{name}",
            "namespace": "argocd",
            "labels": {"argocd.argoproj.io/secret-type": "cluster"},
        },
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


async def test_argocd_cluster_secret_add_update_delete(endpoints, k8s):
    mgmt, target = endpoints[0], endpoints[1]
    rec = Recorder()
    fleet = FleetWatcher(
        [spec("remote")], http_client_factory, rec.emit, settings=WatchSettings(probe_interval=0.3)
    )
    async with KubeClient(mgmt) as api, KubeClient(target) as tapi:
        await _clean(tapi)
        await tapi.request("POST", "/api/v1/nodes", body=node_body("r-1", team="wrong"))
        with contextlib.suppress(Conflict):  # it may exist from an earlier test
            await api.request(
                "POST",
                "/api/v1/namespaces",
                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "argocd"}},
            )
        mgmt_client = http_client_factory(mgmt)
        runner = asyncio.create_task(fleet.run([], (mgmt_client, "argocd")))
        try:
            viewer = k8s["clusters"][1]["viewer_token"]
            t0 = time.monotonic()
            await api.request(
                "POST",
                "/api/v1/namespaces/argocd/secrets",
                body=_secret("remote", target.server, viewer, target.ca_pem),
            )
            (added,) = await rec.wait(lambda: rec.lifecycle("cluster.added"))
            assert added.cluster == "remote" and added.details["source"] == "argocd-secret"
            # the viewer token may not list nodes: the cluster is known but unreadable
            await asyncio.sleep(0.5)
            assert rec.findings("finding.appeared") == []
            # updated with working credentials -> reconnected, inventoried and diffed
            good = _secret("remote", target.server, target.credentials.token, target.ca_pem)
            await api.request("PUT", "/api/v1/namespaces/argocd/secrets/cluster-remote", body=good)
            appeared = await rec.wait(lambda: rec.findings("finding.appeared", "labels.team"))
            assert appeared[0].finding.cluster == "remote"
            assert time.monotonic() - t0 < 10
            assert [e.details.get("reconnected") for e in rec.lifecycle("cluster.added")] == [
                None,
                True,
            ]
            # deleted -> removed, its findings cleared with the reason
            await api.request("DELETE", "/api/v1/namespaces/argocd/secrets/cluster-remote")
            (removed,) = await rec.wait(lambda: rec.lifecycle("cluster.removed"))
            assert "deleted" in removed.details["reason"]
            cleared = rec.findings("finding.cleared", "labels.team")
            assert cleared and cleared[0].reason.startswith("Argo CD secret")
            # credentials never appear in what is emitted
            blob = json.dumps([e.to_json() for e in rec.events])
            assert target.credentials.token not in blob and viewer not in blob
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await mgmt_client.aclose()
            await _clean(tapi)
