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
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from fleetwarden.core import deprecations
from fleetwarden.core.applications import Application, ClusterRef
from fleetwarden.core.deprecations import DeprecationTable, Status
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.lifecycle import LifecycleEvent, LifecycleType
from fleetwarden.core.tracking import FindingEvent, FindingEventType, FindingTracker
from fleetwarden.formats.argocd_apps import application_from_object
from fleetwarden.ports.argocd import ArgoError
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from fleetwarden.app.watching import FleetWatcher

__all__ = [
    "SCAN_SCOPE",
    "UPGRADE_SCAN",
    "AppScan",
    "ManifestSource",
    "UpgradeScanner",
    "apps_targeting",
    "for_fleet",
    "scan_findings",
    "scan_rendered",
]

UPGRADE_SCAN = "cluster.upgrade_scan"
SCAN_SCOPE = "upgrade-scan:"  # the tracker scope of a cluster's upgrade-scan findings


@runtime_checkable
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


def scan_findings(cluster: str, version: str, scans: Iterable[AppScan]) -> list[Finding]:
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
        out.append(finding)
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
        tracker: FindingTracker | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.argocd, self.emit, self.table = argocd, emit, table
        self.server_of, self.inventory, self.then, self.clock = server_of, inventory, then, clock
        self.tracker = tracker

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
            await self._emit(LifecycleEvent(_TYPE, cluster, self.clock.now(), details))
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
        now = self.clock.now()
        details["apps"] = [s.to_json() for s in scans]
        await self._emit(LifecycleEvent(_TYPE, cluster, now, details))
        found = scan_findings(cluster, details["version"], scans)
        if self.tracker is None:
            events = [FindingEvent(FindingEventType.APPEARED, f, now) for f in found]
        else:  # the next upgrade's scan clears what was fixed meanwhile
            events = self.tracker.update((cluster, SCAN_SCOPE), found, now=now)
        for event in events:
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


def for_fleet(
    fleet: FleetWatcher,
    argocd: ManifestSource,
    *,
    table: DeprecationTable,
    then: Callable[[str, str], Awaitable[None]] | None = None,
) -> UpgradeScanner:
    """The scanner of a fleet's upgrades, set as its ``on_upgrade`` (before it runs): clusters'
    servers as the fleet knows them, applications from its live Argo CD inventory once listed
    (else the Argo CD API's list), events through the fleet's emit, findings in its tracker."""

    def server_of(cluster: str) -> str | None:
        endpoint = fleet.known.get(cluster)
        return endpoint.server if endpoint is not None else None

    def inventory() -> Iterable[Application] | None:
        argo = fleet.argo
        if argo is None or not argo.inventory.apps.synced.is_set():
            return None
        return list(argo.inventory.apps.items.values())

    scanner = UpgradeScanner(
        argocd,
        lambda event: fleet.emit(event),  # late: ``run`` wraps the emit with the orphan monitor
        table=table,
        server_of=server_of,
        inventory=inventory,
        then=then,
        tracker=fleet.tracker,
        clock=fleet.clock,
    )
    fleet.on_upgrade = scanner
    return scanner


def _minor(version: deprecations.MinorVersion | None) -> str | None:
    return None if version is None else deprecations.format_minor(version)
