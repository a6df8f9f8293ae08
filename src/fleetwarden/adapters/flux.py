"""Flux through the Kubernetes API: request a reconcile, suspend, resume.

What ``flux reconcile`` / ``flux suspend`` / ``flux resume`` do, without the CLI: a JSON merge
patch of the object. A reconcile request is the annotation
``reconcile.fluxcd.io/requestedAt`` set to a new value (the controller reconciles when it
differs from ``status.lastHandledReconcileAt``); suspend and resume set ``spec.suspend`` (resume
also requests a reconcile, as the CLI does). Errors are the ``ports.kube`` ones the client
raises (``NotFound`` when the object or its CRD is missing).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fleetwarden.adapters.kube.client import JSON_MERGE
from fleetwarden.core.ownership import FluxKind, FluxRef
from fleetwarden.ports.kube import KubeApi
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["API_VERSIONS", "REQUESTED_AT", "FluxClient", "object_path", "rfc3339"]

REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"

# kind -> (group/version, plural): the versions served by Flux 2.3+ (v1 GA, helm v2)
API_VERSIONS: dict[FluxKind, tuple[str, str]] = {
    FluxKind.KUSTOMIZATION: ("kustomize.toolkit.fluxcd.io/v1", "kustomizations"),
    FluxKind.HELM_RELEASE: ("helm.toolkit.fluxcd.io/v2", "helmreleases"),
    FluxKind.GIT_REPOSITORY: ("source.toolkit.fluxcd.io/v1", "gitrepositories"),
}


def object_path(ref: FluxRef) -> str:
    group_version, plural = API_VERSIONS[ref.kind]
    return f"/apis/{group_version}/namespaces/{ref.namespace}/{plural}/{ref.name}"


def rfc3339(now: datetime) -> str:
    """RFC 3339 in UTC with sub-second precision, as ``flux reconcile`` writes it."""
    return now.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class FluxClient:
    """Implements ``ports.remediation.FluxReconciler`` for the cluster ``kube`` talks to."""

    def __init__(self, kube: KubeApi, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.kube = kube
        self._clock = clock

    async def reconcile(self, ref: FluxRef) -> dict[str, Any]:
        at = rfc3339(self._clock.now())
        return await self._patch(ref, {"metadata": {"annotations": {REQUESTED_AT: at}}})

    async def suspend(self, ref: FluxRef) -> dict[str, Any]:
        return await self._patch(ref, {"spec": {"suspend": True}})

    async def resume(self, ref: FluxRef) -> dict[str, Any]:
        at = rfc3339(self._clock.now())
        body = {"metadata": {"annotations": {REQUESTED_AT: at}}, "spec": {"suspend": False}}
        return await self._patch(ref, body)

    async def _patch(self, ref: FluxRef, body: dict[str, Any]) -> dict[str, Any]:
        obj = await self.kube.patch(object_path(ref), body, content_type=JSON_MERGE)
        meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
        spec = obj.get("spec", {}) if isinstance(obj, dict) else {}
        return {
            "cluster": self.kube.cluster,
            "kind": ref.kind.value,
            "namespace": ref.namespace,
            "name": ref.name,
            "resourceVersion": meta.get("resourceVersion"),
            "requestedAt": (meta.get("annotations") or {}).get(REQUESTED_AT),
            "suspend": bool(spec.get("suspend", False)),
        }
