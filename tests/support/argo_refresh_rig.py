"""A real kube-apiserver, the Argo CD API simulator and an ``ArgoRefresher`` wired as serve would.

Used by tests/e2e/test_argocd_refresh_live.py and benchmarks/argocd_refresh.py. On the API
server (the real Argo CD CRDs installed): an Application in ``argo_ns`` whose destination is
that same server, and in ``app_ns`` the objects it manages (``apps`` Deployments, each with a
ConfigMap, carrying Argo CD's tracking-id annotation) plus one unmanaged Deployment
("bystander"). The simulator is seeded with the Application as the API server holds it, renders
the same objects as "Git" and, on a refresh, reads the live objects from the API server.
An ``ArgoWatcher`` follows the Application (the refresher follows its inventory), a
``WorkloadWatcher`` follows ``app_ns`` and calls the refresher's ``on_object``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.argocd.simulator import ArgoCDSimulator
from fleetwarden.adapters.kube.client import STRATEGIC_MERGE, KubeClient
from fleetwarden.app.argo_refreshing import ArgoRefresher, RefreshSettings
from fleetwarden.app.argo_watching import ArgoWatcher, argo_path
from fleetwarden.app.workload_watching import WorkloadWatcher, WorkloadWatchSettings
from fleetwarden.core.applications import Application
from fleetwarden.core.desired_apps import DesiredApps
from fleetwarden.core.tracking import FindingTracker
from fleetwarden.ports.audit import AuditStore
from fleetwarden.ports.kube import Conflict, NotFound
from tests.support.waiting import wait_for

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ARGO_CRDS = (
    "argocd-application-crd.yaml",
    "argocd-applicationset-crd.yaml",
    "argocd-appproject-crd.yaml",
)
PLURALS = {"Deployment": ("apps/v1", "deployments"), "ConfigMap": ("v1", "configmaps")}
BASE = "http://argocd.test"


async def install_crds(api: KubeClient, crd_dir: Path) -> None:
    for file in ARGO_CRDS:
        crd = yaml.safe_load((crd_dir / file).read_text())
        with contextlib.suppress(Conflict):
            await api.request("POST", CRDS, body=crd, timeout=60)

        async def established(name: str = crd["metadata"]["name"]) -> bool:
            obj = await api.get(f"{CRDS}/{name}")
            conds = (obj.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

        await wait_for(established, what=f"CRD {file} Established")


async def fresh_namespace(api: KubeClient, ns: str) -> None:
    with contextlib.suppress(NotFound):
        await api.request("DELETE", f"/api/v1/namespaces/{ns}")

    async def created() -> bool:
        try:
            await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
        except Conflict:  # still terminating
            return False
        return True

    await wait_for(created, timeout=90, what=f"namespace {ns} re-created")


def object_path(obj: Mapping[str, Any]) -> str:
    api_version, plural = PLURALS[obj["kind"]]
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    meta = obj["metadata"]
    return f"{prefix}/namespaces/{meta['namespace']}/{plural}/{meta['name']}"


def managed_objects(app: str, ns: str, count: int) -> list[dict[str, Any]]:
    """What "Git" holds for the application: Deployments and their ConfigMaps."""
    out: list[dict[str, Any]] = []
    for i in range(count):
        name = f"web-{i}"
        for kind, group in (("Deployment", "apps"), ("ConfigMap", "")):
            meta = {
                "name": name if kind == "Deployment" else f"{name}-config",
                "namespace": ns,
                "labels": {"app.kubernetes.io/name": name},
            }
            meta["annotations"] = {
                "argocd.argoproj.io/tracking-id": f"{app}:{group}/{kind}:{ns}/{meta['name']}"
            }
            if kind == "ConfigMap":
                out.append(
                    {"apiVersion": "v1", "kind": kind, "metadata": meta, "data": {"mode": "on"}}
                )
                continue
            labels = {"app.kubernetes.io/name": name}
            out.append(
                {
                    "apiVersion": "apps/v1",
                    "kind": kind,
                    "metadata": meta,
                    "spec": {
                        "replicas": 2,
                        "selector": {"matchLabels": labels},
                        "template": {
                            "metadata": {"labels": labels},
                            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
                        },
                    },
                }
            )
    return out


def bystander(ns: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "bystander"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "bystander", "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "b", "image": "busybox:1.36"}]},
            },
        },
    }


def application(name: str, argo_ns: str, app_ns: str, server: str, objects: Sequence[Any]) -> dict:
    resources = [
        {
            "group": o["apiVersion"].rpartition("/")[0],
            "version": o["apiVersion"].rpartition("/")[2],
            "kind": o["kind"],
            "namespace": app_ns,
            "name": o["metadata"]["name"],
            "status": "Synced",
        }
        for o in objects
    ]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": argo_ns},
        "spec": {
            "project": "default",
            "source": {
                "repoURL": "https://github.com/argoproj/argocd-example-apps",
                "path": "guestbook",
                "targetRevision": "HEAD",
            },
            "destination": {"server": server, "namespace": app_ns},
        },
        "status": {"sync": {"status": "Synced"}, "resources": resources},
    }


@dataclass
class Rig:
    api: KubeClient
    cluster: str
    app: str
    objects: list[dict[str, Any]]
    sim: ArgoCDSimulator
    client: ArgoCDClient
    refresher: ArgoRefresher
    workloads: WorkloadWatcher
    argo: ArgoWatcher

    async def set_image(self, index: int, image: str) -> None:
        deployment = self.objects[2 * index]
        body = {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": image}]}}}}
        await self.api.patch(object_path(deployment), body, content_type=STRATEGIC_MERGE)

    async def seen(
        self, path_obj: Mapping[str, Any], check: Callable[[Mapping[str, Any]], bool]
    ) -> bool:
        """The workload watcher's cache holds the object in a state ``check`` accepts."""
        for key, obj in self.workloads.index.objects.items():
            if key.kind == path_obj["kind"] and key.name == path_obj["metadata"]["name"]:
                return check(obj.body)
        return False


@contextlib.asynccontextmanager
async def rig(
    api: KubeClient,
    cluster: str,
    server: str,
    crd_dir: Path,
    *,
    argo_ns: str,
    app_ns: str,
    app: str = "shop",
    apps: int = 1,
    settings: RefreshSettings | None = None,
    audit: AuditStore | None = None,
    wrap: Callable[[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport] = lambda t: t,
) -> AsyncIterator[Rig]:
    await install_crds(api, crd_dir)
    for ns in (argo_ns, app_ns):
        await fresh_namespace(api, ns)
    objects = managed_objects(app, app_ns, apps)
    for obj in [*objects, bystander(app_ns)]:
        path = object_path(obj).rsplit("/", 1)[0]
        await api.request("POST", path, body=obj)

    async def post_app() -> Any:
        try:
            return await api.request(
                "POST",
                argo_path("applications", argo_ns),
                body=application(app, argo_ns, app_ns, server, objects),
            )
        except NotFound:  # the CRD is established but not served yet
            return None

    stored = await wait_for(post_app, what="Application created")

    async def live(desired: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any] | None]:
        async def one(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
            try:
                return await api.get(object_path(obj))  # type: ignore[no-any-return]
            except NotFound:
                return None

        return list(await asyncio.gather(*(one(o) for o in desired)))

    sim = ArgoCDSimulator([stored], live=live)
    sim.set_manifests(app, objects)
    client = ArgoCDClient(
        BASE, token=sim.issue_token(), transport=wrap(httpx.ASGITransport(app=sim)), timeout=10.0
    )
    settings = settings or RefreshSettings(control_namespace=argo_ns)
    refresher = ArgoRefresher(client, settings=settings, audit=audit)
    server_norm = server.rstrip("/")

    def cluster_of(a: Application) -> str | None:
        return cluster if a.destination.server == server_norm else None

    argo = ArgoWatcher(api, namespace=argo_ns)

    async def inventory_changed() -> None:
        await refresher.follow_inventory(argo.inventory.apps.items.values(), cluster_of)

    argo.on_change = inventory_changed
    workloads = WorkloadWatcher(
        cluster,
        api,
        DesiredApps(),
        FindingTracker(),
        lambda event: None,
        settings=WorkloadWatchSettings(namespaces=(app_ns,), secrets=False),
        on_object=refresher.on_object,
    )
    try:
        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(refresher.run()),
                tg.create_task(argo.run()),
                tg.create_task(workloads.run()),
            ]
            await wait_for(workloads.synced.is_set, what="workloads listed")
            await wait_for(
                lambda: app in refresher.apps and refresher.apps[app].resources,
                what="the application's tree known",
            )
            yield Rig(api, cluster, app, objects, sim, client, refresher, workloads, argo)
            for task in tasks:
                task.cancel()
    finally:
        await client.aclose()
