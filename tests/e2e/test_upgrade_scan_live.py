"""Issue 15 item 5 on a real kube-apiserver: a control-plane upgrade scans, without
``--manifests``, the rendered manifests of the Argo CD applications that target the cluster.

The real Argo CD CRDs are installed into the test cluster, which is also the watched cluster
(registered by an Argo CD cluster Secret). Its Applications are read live (``ArgoWatcher``); their
rendered manifests come from the Argo CD REST simulator (``GET .../manifests``). The API
server's version cannot change under a test, so the fleet is made to remember an older one
(1.24): its next real ``/version`` probe is the upgrade.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.argocd.simulator import ArgoCDSimulator
from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import http_client_factory, load_kubeconfig
from fleetwarden.app.argo_watching import argo_path
from fleetwarden.app.deprecating import table_for
from fleetwarden.app.upgrade_scan import for_fleet
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.core.deprecations import parse_minor
from fleetwarden.core.findings import Layer, Severity
from fleetwarden.core.lifecycle import LifecycleEvent
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.ports.kube import Conflict, NotFound
from tests.e2e.test_argocd_orphans_live import ARGO_CRDS, install_crd, wait_for

pytestmark = [pytest.mark.live, pytest.mark.realdata]

NS = "argocd-upgscan"  # this test's own namespace
PDB = {
    "apiVersion": "policy/v1beta1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
}
DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}


def application(name: str, destination: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "project": "default",
            "source": {"repoURL": "https://git.example/fleet", "targetRevision": "main"},
            "destination": {**destination, "namespace": "shop"},
        },
    }


async def fresh_namespace(api: KubeClient) -> None:
    with contextlib.suppress(NotFound):
        await api.request("DELETE", f"/api/v1/namespaces/{NS}")

    async def created() -> bool:
        try:
            await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
        except Conflict:  # still terminating
            return False
        return True

    await wait_for(created, timeout=60, what=f"namespace {NS} re-created")


async def create_app(api: KubeClient, body: dict[str, Any]) -> None:
    async def attempt() -> Any:
        try:
            return await api.request("POST", argo_path("applications", NS), body=body)
        except NotFound:  # the CRD is established but not served yet
            return None

    await wait_for(attempt, what=f"application {body['metadata']['name']}")


async def test_an_upgrade_scans_the_argocd_apps_of_the_cluster_without_flags(k8s, realdata):
    ep = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    async with KubeClient(ep) as api:
        for name in (*ARGO_CRDS, "argocd-appproject-crd.yaml"):
            await install_crd(api, realdata / "crds" / name)
        await fresh_namespace(api)
        config = {"bearerToken": ep.credentials.token or "", "tlsClientConfig": {}}
        if ep.ca_pem:
            config["tlsClientConfig"] = {"caData": base64.b64encode(ep.ca_pem).decode()}
        data = {"name": "prod", "server": ep.server, "config": json.dumps(config)}
        secret = {
            "metadata": {
                "name": "cluster-prod",
                "namespace": NS,
                "labels": {"argocd.argoproj.io/secret-type": "cluster"},
            },
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        }
        await api.request("POST", f"/api/v1/namespaces/{NS}/secrets", body=secret)
        live = [
            application("shop-legacy", {"server": ep.server}),
            application("shop-current", {"name": "prod"}),
            application("elsewhere", {"server": "https://other.example:6443"}),
        ]
        for body in live:
            await create_app(api, body)

        # the Argo CD API knows one more app for the cluster than the live inventory: the
        # inventory is what is scanned when there is one
        sim = ArgoCDSimulator(
            [*live, application("not-live", {"server": ep.server})], tokens=["tok"]
        )
        sim.set_manifests("shop-legacy", [PDB, DEPLOY])
        sim.set_manifests("shop-current", [DEPLOY])
        sim.set_manifests("elsewhere", [PDB])
        sim.set_manifests("not-live", [PDB])

        events: list[Any] = []
        fleet = FleetWatcher(
            [], http_client_factory, events.append, settings=WatchSettings(probe_interval=3600)
        )
        argocd = ArgoCDClient(
            "http://argocd.test", token="tok", transport=httpx.ASGITransport(app=sim), retries=0
        )
        for_fleet(fleet, argocd, table=table_for(["k8s"]))  # no --manifests anywhere
        runner = asyncio.create_task(fleet.run([], (http_client_factory(ep), NS)))
        try:
            watcher = await wait_for(lambda: fleet.watcher("prod"), what="cluster prod")
            await wait_for(lambda: watcher.health.version is not None, what="the first probe")
            real = watcher.health.version
            assert fleet.argo is not None
            apps = fleet.argo.inventory.apps
            await wait_for(lambda: len(apps.items) == 3, what="the apps, live")
            watcher.health.version = "v1.24.0"  # as if it had run 1.24 until now
            await watcher.probe_once()
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            await argocd.aclose()

    lifecycle = [e for e in events if isinstance(e, LifecycleEvent)]
    (upgraded,) = [e for e in lifecycle if e.type.value == "cluster.upgraded"]
    assert upgraded.details["to"] == real
    (scan,) = [e for e in lifecycle if e.type.value == "cluster.upgrade_scan"]
    body = scan.to_json()
    minor = parse_minor(str(real))
    assert minor is not None and minor >= (1, 25)
    assert body["cluster"] == "prod" and body["version"] == f"{minor[0]}.{minor[1]}"
    by_app = {a["name"]: a for a in body["apps"]}
    assert set(by_app) == {"shop-legacy", "shop-current"}
    assert [(r["apiVersion"], r["kind"], r["name"]) for r in by_app["shop-legacy"]["removed"]] == [
        ("policy/v1beta1", "PodDisruptionBudget", "web")
    ]
    assert by_app["shop-current"]["removed"] == []
    # the scan's findings (the shared test API server's nodes may drift from pools too)
    findings = [
        e
        for e in events
        if isinstance(e, FindingEvent) and e.finding.pool.startswith("Application/")
    ]
    assert [(e.type.value, e.finding.pool) for e in findings] == [
        ("finding.appeared", f"Application/{NS}/shop-legacy")
    ]
    f = findings[0].finding
    assert (f.layer, f.severity, f.cluster) == (Layer.WORKLOAD, Severity.HIGH, "prod")
    assert f in fleet.findings()  # in the fleet's tracker: what serve's /api/findings lists
    assert sim.count("GET", "/not-live/manifests") == 0
    assert sim.count("GET", "/elsewhere/manifests") == 0
