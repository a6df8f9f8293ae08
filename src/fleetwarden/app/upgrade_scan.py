"""A control-plane upgrade, checked against what Argo CD deploys there (issue 15, item 5).

When ``cluster.upgraded`` fires (to X.Y), every Argo CD Application whose destination is that
cluster has its rendered manifests read from the Argo CD API (``GET
/api/v1/applications/{name}/manifests``: one JSON string per object) and checked at X.Y against
the deprecations table. One ``cluster.upgrade_scan`` event names each app with what it uses that
is removed or deprecated there, and each app using a removed API opens a high ``WORKLOAD``
finding. No ``--manifests`` is needed; when given, its scan still runs (``app.deprecating``).

The applications come from the live inventory (``app.argo_watching``) when there is one, else
from the Argo CD API's list.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from fleetwarden.core import deprecations
from fleetwarden.core.applications import Application, ClusterRef
from fleetwarden.core.deprecations import DeprecationTable, Status
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.lifecycle import LifecycleEvent, LifecycleType
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.formats.argocd_apps import application_from_object
from fleetwarden.ports.argocd import ArgoError

__all__ = [
    "UPGRADE_SCAN",
    "AppScan",
    "ManifestSource",
    "UpgradeScanner",
    "apps_targeting",
    "scan_findings",
    "scan_rendered",
]

UPGRADE_SCAN = "cluster.upgrade_scan"


class ManifestSource(Protocol):
    """What the scan needs of the Argo CD API (``adapters.argocd.client.ArgoCDClient``)."""

    async def manifests(self, name: str, revision: str | None = None) -> Any: ...

    async def list_applications(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class AppScan:
    namespace: str
    name: str
    removed: tuple[dict[str, Any], ...] = ()
    deprecated: tuple[dict[str, Any], ...] = ()
    error: str | None = None  # the manifests could not be read: nothing is known

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "removed": list(self.removed),
            "deprecated": list(self.deprecated),
        }
        if self.error is not None:
            out["error"] = self.error
        return out


def scan_rendered(
    app: Application,
    rendered: Sequence[object],
    target: deprecations.MinorVersion,
    table: DeprecationTable,
) -> AppScan:
    """One application's rendered objects (JSON strings, as Argo CD returns them) at
    ``target``; an entry that is not a JSON object is skipped."""
    removed: list[dict[str, Any]] = []
    deprecated: list[dict[str, Any]] = []
    for text in rendered:
        try:
            obj = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            continue
        hit = deprecations.check(api_version, kind, target, table)
        if hit is None:
            continue
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        entry = {
            "apiVersion": api_version,
            "kind": kind,
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "removedIn": _minor(hit.api.removed_in),
            "replacement": hit.api.replacement,
        }
        (removed if hit.status is Status.REMOVED else deprecated).append(entry)
    return AppScan(app.namespace, app.name, tuple(removed), tuple(deprecated))


def apps_targeting(apps: Iterable[Application], cluster: ClusterRef) -> list[Application]:
    """The applications whose destination is ``cluster`` (by server URL or by name)."""
    return sorted((a for a in apps if a.destination.targets(cluster)), key=lambda a: a.key)


def scan_findings(
    cluster: str, version: str, scans: Iterable[AppScan], now: datetime
) -> list[FindingEvent]:
    """A high ``WORKLOAD`` finding per application using an API removed at ``version``."""
    out = []
    for scan in scans:
        if not scan.removed:
            continue
        apis = sorted({f"{r['apiVersion']} {r['kind']}" for r in scan.removed})
        finding = Finding(
            cluster=cluster,
            pool=f"Application/{scan.namespace}/{scan.name}",
            layer=Layer.WORKLOAD,
            field="apiVersion.removed",
            expected=None,
            actual=apis,
            severity=Severity.HIGH,
            source=f"argocd:{scan.namespace}/{scan.name}",
            message=(
                f"Argo CD application {scan.namespace}/{scan.name} deploys APIs removed at"
                f" {version} on {cluster}: {', '.join(apis)}"
            ),
            extra={"upgradeScan": scan.to_json(), "version": version},
        )
        out.append(FindingEvent(FindingEventType.APPEARED, finding, now))
    return out


class UpgradeScanner:
    """``FleetWatcher``'s ``on_upgrade``: scans the Argo CD applications of the upgraded
    cluster, then runs ``then`` (the ``--manifests`` hook) when there is one."""

    def __init__(
        self,
        argocd: ManifestSource,
        emit: Callable[[Any], Any],
        *,
        table: DeprecationTable,
        server_of: Callable[[str], str | None] = lambda _cluster: None,
        inventory: Callable[[], Iterable[Application] | None] = lambda: None,
        then: Callable[[str, str], Awaitable[None]] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.argocd, self.emit, self.table = argocd, emit, table
        self.server_of, self.inventory, self.then, self.clock = server_of, inventory, then, clock

    async def __call__(self, cluster: str, version: str) -> None:
        try:
            await self.scan(cluster, version)
        finally:
            if self.then is not None:
                await self.then(cluster, version)

    async def scan(self, cluster: str, version: str) -> None:
        target = deprecations.parse_minor(version)
        if target is None:
            return
        ref = ClusterRef(cluster, self.server_of(cluster) or "")
        details: dict[str, Any] = {"version": deprecations.format_minor(target), "to": version}
        try:
            apps = apps_targeting(await self._apps(), ref)
        except ArgoError as exc:  # the Argo CD API failed: said in the event, not raised
            details.update(apps=[], error=f"applications: {exc}")
            await self._emit(LifecycleEvent(_TYPE, cluster, self.clock(), details))
            return
        scans = []
        for app in apps:
            try:
                response = await self.argocd.manifests(app.name)
            except ArgoError as exc:  # one app's failure spares the others
                scans.append(AppScan(app.namespace, app.name, error=str(exc)))
                continue
            rendered = response.get("manifests") if isinstance(response, Mapping) else None
            scans.append(scan_rendered(app, rendered or [], target, self.table))
        now = self.clock()
        details["apps"] = [s.to_json() for s in scans]
        await self._emit(LifecycleEvent(_TYPE, cluster, now, details))
        for event in scan_findings(cluster, details["version"], scans, now):
            await self._emit(event)

    async def _apps(self) -> list[Application]:
        live = self.inventory()
        if live is not None:
            return list(live)
        items = await self.argocd.list_applications()
        return [application_from_object(obj) for obj in items or ()]

    async def _emit(self, event: object) -> None:
        result = self.emit(event)
        if isinstance(result, Awaitable):
            await result


_TYPE = LifecycleType.UPGRADE_SCAN


def _minor(version: deprecations.MinorVersion | None) -> str | None:
    return None if version is None else deprecations.format_minor(version)
