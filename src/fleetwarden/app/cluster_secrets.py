"""Argo CD cluster Secrets as a fleet's clusters (``FleetWatcher.run`` with ``argocd``): a
Secret listed or created adds its cluster, updated reconnects it, deleted or renamed removes
it; one that cannot be read is a ``cluster.health`` event (``Unknown``) naming it. Once the
Secrets are listed, each desired cluster none of them names is said (``FleetWatcher.missing``):
a Secret created later still adds it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fleetwarden.app.reflecting import reflect
from fleetwarden.core.lifecycle import ClusterHealth, LifecycleEvent, LifecycleType
from fleetwarden.formats.argocd_clusters import endpoint_from_secret, is_cluster_secret
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.kube import KubeApi

if TYPE_CHECKING:
    from fleetwarden.app.watching import FleetWatcher

__all__ = ["SECRET_SELECTOR", "ClusterSecrets"]

SECRET_SELECTOR = "argocd.argoproj.io/secret-type=cluster"


class ClusterSecrets:
    """The cluster Secrets of one Argo CD namespace, followed into ``fleet``."""

    def __init__(self, fleet: FleetWatcher) -> None:
        self.fleet = fleet
        self.clusters: dict[str, str] = {}  # a Secret's namespace/name -> the cluster it names

    async def watch(self, client: KubeApi, namespace: str) -> None:
        path = f"/api/v1/namespaces/{namespace}/secrets"

        async def relist() -> str:
            listed = await client.list(path, label_selector=SECRET_SELECTOR)
            seen = set()
            for obj in listed.items:
                seen.add(_secret_key(obj))
                await self.on_secret("ADDED", obj)
            for key in set(self.clusters) - seen:
                cluster = self.clusters.pop(key)
                await self.fleet.remove(cluster, reason=f"Argo CD secret {key} deleted")
            for event in self.fleet.missing():  # listed: the desired clusters none names
                await self._emit(event)
            return listed.resource_version

        await reflect(
            client, path, relist=relist, apply=self.on_secret, label_selector=SECRET_SELECTOR
        )

    async def on_secret(self, kind: str, obj: Mapping[str, Any]) -> None:
        key = _secret_key(obj)
        if kind == "DELETED" or not is_cluster_secret(obj):
            cluster = self.clusters.pop(key, None)
            if cluster is not None:
                await self.fleet.remove(cluster, reason=f"Argo CD secret {key} deleted")
            return
        try:
            endpoint = endpoint_from_secret(obj)
        except FormatError as exc:
            await self._emit(
                LifecycleEvent(
                    LifecycleType.HEALTH,
                    key,
                    self.fleet.clock.now(),
                    {
                        "from": None,
                        "to": ClusterHealth.UNKNOWN.value,
                        "reason": f"unusable cluster secret: {exc}",
                    },
                )
            )
            return
        old = self.clusters.get(key)
        if old is not None and old != endpoint.name:  # renamed: the old cluster is gone
            await self.fleet.remove(old, reason=f"Argo CD secret {key} renamed the cluster")
        self.clusters[key] = endpoint.name
        await self.fleet.add(endpoint)

    async def _emit(self, event: LifecycleEvent) -> None:
        result = self.fleet.emit(event)  # the fleet's emit of the moment (the orphan monitor's)
        if result is not None:
            await result


def _secret_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        meta = {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
