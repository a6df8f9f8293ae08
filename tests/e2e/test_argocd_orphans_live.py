"""Argo CD objects live on a real kube-apiserver, and the applications a removed cluster orphans.

The real CRDs (argoproj/argo-cd ``manifests/crds/``: Application, ApplicationSet, AppProject)
are installed into the first test cluster, which plays the Argo CD cluster. It holds an
AppProject, an ApplicationSet with a list generator, Applications owned by it (owner references
as the ApplicationSet controller sets them) and one standalone Application, targeting two
clusters registered by Argo CD cluster Secrets -- by ``server`` and by ``name``. A real
``FleetWatcher`` follows the Secrets, an ``ArgoWatcher`` the Argo CD objects, and an
``OrphanMonitor`` sits between the fleet and the event sink. Deleting one cluster Secret must
name exactly the apps targeting it, the ApplicationSet and the project; re-targeting one app and
deleting another must clear their LIFECYCLE findings.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwarden.adapters.kube.client import JSON_MERGE, KubeClient
from fleetwarden.adapters.kube.config import http_client_factory, load_kubeconfig
from fleetwarden.app.argo_watching import ArgoWatcher, OrphanMonitor, argo_path
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.core.findings import Layer
from fleetwarden.core.lifecycle import LifecycleEvent, LifecycleType
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.ports.kube import Conflict, NotFound
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.live, pytest.mark.realdata]

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ARGO_CRDS = ("argocd-application-crd.yaml", "argocd-applicationset-crd.yaml")
NS = "argocd-orphans"  # this test's own namespace: the cluster is shared with other tests


async def install_crd(api: KubeClient, path: Path) -> None:
    crd = yaml.safe_load(path.read_text())
    name = crd["metadata"]["name"]
    with contextlib.suppress(Conflict):
        await api.request("POST", CRDS, body=crd, timeout=60)

    async def established() -> bool:
        obj = await api.get(f"{CRDS}/{name}")
        conds = (obj.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    await wait_for(established, what=f"CRD {name} Established")


async def create(api: KubeClient, plural: str, body: dict[str, Any]) -> dict[str, Any]:
    path = argo_path(plural, NS)

    async def attempt() -> Any:
        try:
            return await api.request("POST", path, body=body)
        except NotFound:  # the CRD is established but not served yet
            return None

    return await wait_for(attempt, what=f"{plural}/{body['metadata']['name']} created")


def cluster_secret(name: str, server: str, token: str, ca: bytes | None) -> dict[str, Any]:
    config = {
        "bearerToken": token,
        "tlsClientConfig": {"caData": base64.b64encode(ca).decode() if ca else None},
    }
    data = {"name": name, "server": server, "config": json.dumps(config)}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"cluster-{name}",
            "namespace": NS,
            "labels": {"argocd.argoproj.io/secret-type": "cluster", "env": "prod"},
        },
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def application(
    name: str, destination: dict[str, str], owner: dict[str, Any] | None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if owner is not None:  # what the ApplicationSet controller sets on what it generates
        meta["ownerReferences"] = [
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "ApplicationSet",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": meta,
        "spec": {
            "project": "team",
            "source": {"repoURL": "https://github.com/argoproj/argocd-example-apps", "path": "gb"},
            "destination": {**destination, "namespace": "guestbook"},
        },
        "status": {"sync": {"status": "Synced"}, "health": {"status": "Healthy"}},
    }


class Sink:
    def __init__(self) -> None:
        self.events: list[FindingEvent | LifecycleEvent] = []

    def __call__(self, event: FindingEvent | LifecycleEvent) -> None:
        self.events.append(event)

    def lifecycle(self, kind: str, cluster: str | None = None) -> list[LifecycleEvent]:
        return [
            e
            for e in self.events
            if isinstance(e, LifecycleEvent)
            and e.type.value == kind
            and (cluster is None or e.cluster == cluster)
        ]

    def orphan_findings(self, kind: str) -> dict[str, FindingEvent]:
        return {
            e.finding.extra["application"]["name"]: e
            for e in self.events
            if isinstance(e, FindingEvent)
            and e.type.value == kind
            and e.finding.layer is Layer.LIFECYCLE
        }


@pytest.fixture()
async def argo(k8s, realdata):
    """The Argo CD cluster with the real CRDs, and a fresh namespace of this test's own."""
    endpoint = load_kubeconfig(Path(k8s["kubeconfig"]))[0]
    async with KubeClient(endpoint) as api:
        for name in (*ARGO_CRDS, "argocd-appproject-crd.yaml"):
            await install_crd(api, realdata / "crds" / name)
        with contextlib.suppress(NotFound):
            await api.request("DELETE", f"/api/v1/namespaces/{NS}")
        await wait_for(
            lambda: _created_namespace(api), timeout=60, what=f"namespace {NS} re-created"
        )
        yield api


async def _created_namespace(api: KubeClient) -> bool:
    try:
        await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
    except Conflict:  # still terminating
        return False
    return True


async def test_deleting_a_cluster_secret_names_exactly_its_orphans_and_findings_clear(argo, k8s):
    api = argo
    endpoints = load_kubeconfig(Path(k8s["kubeconfig"]))
    eu, us = endpoints[1], endpoints[0]  # two real API servers, registered as "eu" and "us"
    for name, ep in (("eu", eu), ("us", us)):
        body = cluster_secret(name, ep.server, ep.credentials.token or "", ep.ca_pem)
        await api.request("POST", f"/api/v1/namespaces/{NS}/secrets", body=body)

    await create(
        api,
        "appprojects",
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AppProject",
            "metadata": {"name": "team", "namespace": NS},
            "spec": {
                "sourceRepos": ["*"],
                "destinations": [
                    {"name": "eu", "namespace": "*"},
                    {"server": us.server, "namespace": "*"},
                ],
            },
        },
    )
    # a project and an ApplicationSet about the other cluster only: never named for "eu"
    await create(
        api,
        "appprojects",
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AppProject",
            "metadata": {"name": "us-only", "namespace": NS},
            "spec": {"destinations": [{"server": us.server, "namespace": "*"}]},
        },
    )
    await create(
        api,
        "applicationsets",
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "ApplicationSet",
            "metadata": {"name": "us-tools", "namespace": NS},
            "spec": {
                "generators": [{"list": {"elements": [{"cluster": "us"}]}}],
                "template": {
                    "metadata": {"name": "{{cluster}}-tools"},
                    "spec": {
                        "project": "us-only",
                        "source": {"repoURL": "https://github.com/argoproj/argocd-example-apps"},
                        "destination": {"name": "{{cluster}}", "namespace": "tools"},
                    },
                },
            },
        },
    )
    app_set = await create(
        api,
        "applicationsets",
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "ApplicationSet",
            "metadata": {"name": "guestbook", "namespace": NS},
            "spec": {
                "goTemplate": True,
                "generators": [
                    {
                        "list": {
                            "elements": [
                                {"cluster": "eu", "url": eu.server},
                                {"cluster": "us", "url": us.server},
                            ]
                        }
                    }
                ],
                "template": {
                    "metadata": {"name": "{{.cluster}}-guestbook"},
                    "spec": {
                        "project": "team",
                        "source": {"repoURL": "https://github.com/argoproj/argocd-example-apps"},
                        "destination": {"server": "{{.url}}", "namespace": "guestbook"},
                    },
                },
            },
        },
    )
    apps = {
        "eu-guestbook": application("eu-guestbook", {"server": eu.server}, app_set),
        "us-guestbook": application("us-guestbook", {"server": us.server}, app_set),
        "eu-by-name": application("eu-by-name", {"name": "eu"}, app_set),
        "us-by-name": application("us-by-name", {"name": "us"}, None),
        "eu-standalone": application("eu-standalone", {"name": "eu"}, None),
    }
    for body in apps.values():
        await create(api, "applications", body)

    sink = Sink()
    mgmt = http_client_factory(us)
    # the fleet wires orphan tracking itself when it follows an Argo CD cluster (watch, serve)
    fleet = FleetWatcher([], http_client_factory, sink, settings=WatchSettings())
    runner = asyncio.create_task(fleet.run([], (mgmt, NS)))
    try:
        await wait_for(lambda: len(sink.lifecycle("cluster.added")) == 2, what="both clusters")
        assert fleet.orphans is not None and fleet.argo is not None
        monitor, watcher = fleet.orphans, fleet.argo
        inventory = watcher.inventory
        await wait_for(lambda: len(inventory.apps.items) == 5, what="the apps, live")
        live = inventory.apps.items[(NS, "eu-by-name")]
        assert live.destination.name == "eu" and live.destination.server is None
        assert (live.sync, live.health) == ("Synced", "Healthy")
        assert live.app_set is not None and live.app_set.uid == app_set["metadata"]["uid"]
        assert inventory.apps.items[(NS, "us-by-name")].app_set is None
        await wait_for(lambda: len(inventory.app_sets.items) == 2, what="the ApplicationSets")
        await wait_for(lambda: len(inventory.projects.items) == 2, what="the AppProjects")
        us_tools = inventory.app_sets.items[(NS, "us-tools")]
        assert [(t.kind, t.name) for t in us_tools.targets] == [("list", "us")]

        # a status change is followed live
        await api.patch(
            argo_path("applications", NS) + "/eu-guestbook",
            {"status": {"sync": {"status": "OutOfSync"}}},
            content_type=JSON_MERGE,
        )
        await wait_for(
            lambda: inventory.apps.items[(NS, "eu-guestbook")].sync == "OutOfSync",
            what="the new sync status",
        )

        await api.request("DELETE", f"/api/v1/namespaces/{NS}/secrets/cluster-eu")
        (removed,) = await wait_for(lambda: sink.lifecycle("cluster.removed", "eu"))
        body = removed.to_json()
        assert body["server"] == eu.server.rstrip("/")
        assert body["orphanedAppDetails"] == [
            {"name": "eu-by-name", "namespace": NS, "project": "team", "appSet": "guestbook"},
            {"name": "eu-guestbook", "namespace": NS, "project": "team", "appSet": "guestbook"},
            {"name": "eu-standalone", "namespace": NS, "project": "team"},
        ]
        assert body["appSets"] == [
            {"name": "guestbook", "namespace": NS, "via": ["ownerReference", "list"]},
        ]
        assert body["projects"] == [{"name": "team", "namespace": NS}]
        assert "inventorySynced" not in body
        opened = await wait_for(lambda: len(sink.orphan_findings("finding.appeared")) == 3)
        assert opened
        findings = sink.orphan_findings("finding.appeared")
        assert set(findings) == {"eu-by-name", "eu-guestbook", "eu-standalone"}
        assert findings["eu-guestbook"].finding.field == "destination.server"
        assert findings["eu-by-name"].finding.field == "destination.name"
        assert sink.orphan_findings("finding.cleared") == {}

        # re-target one to the cluster that remains, delete another: both clear, one stays
        await api.patch(
            argo_path("applications", NS) + "/eu-guestbook",
            {"spec": {"destination": {"server": us.server}}},
            content_type=JSON_MERGE,
        )
        await api.request("DELETE", argo_path("applications", NS) + "/eu-standalone")
        await wait_for(
            lambda: (
                set(sink.orphan_findings("finding.cleared")) == {"eu-guestbook", "eu-standalone"}
            ),
            what="the re-targeted and the deleted app's findings to clear",
        )
        # the fleet's own tracker lists it (what /api/findings and the dashboard show)
        assert monitor.book.tracker is fleet.tracker
        lifecycle = {f for f in fleet.tracker.current() if f.layer is Layer.LIFECYCLE}
        assert lifecycle == {findings["eu-by-name"].finding}
        # the other cluster was never touched; nothing was refused
        assert sink.lifecycle("cluster.removed", "us") == []
        assert sink.lifecycle("cluster.watch_refused") == []
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        await mgmt.aclose()
        with contextlib.suppress(NotFound):
            await api.request("DELETE", f"/api/v1/namespaces/{NS}")


async def test_a_missing_crd_is_refused_not_crashed(k8s):
    """Without the CRDs (a cluster that is no Argo CD cluster), the watcher reports the refusal
    once per kind and keeps going."""
    endpoint = load_kubeconfig(Path(k8s["kubeconfig"]))[1]
    refusals: list[tuple[str, str]] = []

    async def refused(kind: str, reason: str) -> None:
        refusals.append((kind, reason))

    client = http_client_factory(endpoint)
    watcher = ArgoWatcher(client, namespace="argocd", on_refused=refused)
    runner = asyncio.create_task(watcher.run())
    try:
        await wait_for(lambda: len(refusals) == 3, what="three refusals")
        assert {k for k, _ in refusals} == {"applications", "applicationsets", "appprojects"}
        assert all("404" in reason for _, reason in refusals)
        assert not watcher.inventory.synced
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        await client.aclose()


async def test_without_the_crds_a_removal_does_not_wait_for_a_list_that_cannot_come(k8s):
    endpoint = load_kubeconfig(Path(k8s["kubeconfig"]))[1]
    client = http_client_factory(endpoint)
    watcher = ArgoWatcher(client, namespace="argocd")
    out: list[Any] = []
    monitor = OrphanMonitor(watcher.inventory, out.append, sync_timeout=30)
    runner = asyncio.create_task(watcher.run())
    try:
        await wait_for(lambda: all(k.refused for k in watcher.inventory.kinds), what="refusals")
        started = time.monotonic()
        await monitor.observe(LifecycleEvent(LifecycleType.REMOVED, "eu", _now(), {}))
        assert time.monotonic() - started < 1
        assert out[0].details["inventorySynced"] is False
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        await client.aclose()


def _now() -> datetime:
    return datetime.now(UTC)
