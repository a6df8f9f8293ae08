"""Applications left pointing at nothing when a cluster is removed (seed 003: "orphaned apps").

A cluster is removed when its Argo CD cluster Secret is deleted, or when it is declared gone
after failing its probes (``core.lifecycle.HealthTracker(gone_after=...)``). Then:

* ``orphans_of(cluster, apps, app_sets, projects)`` -- what the ``cluster.removed`` event
  carries: every Application whose destination is that cluster, by ``server`` URL or by
  ``name``; the ApplicationSets still generating for it (the owners of those Applications, from
  their ``ownerReferences``, and those whose ``list``/``clusters`` generators name it, see
  ``core.applications``); the AppProjects whose ``spec.destinations`` list it.
* ``OrphanBook`` -- the removed clusters, and for each a ``LIFECYCLE`` finding per Application
  still pointing at it: open on removal, cleared when the Application is deleted or re-targeted,
  or when the cluster comes back (``restored``). Its ``update`` returns the finding events
  through a ``FindingTracker`` (one scope per removed cluster), so re-computing after every
  change of the inventory reports each transition once.

Pure: no I/O, no clock (``now`` is passed in).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetwarden.core.applications import (
    Application,
    ApplicationSet,
    AppProject,
    AppSetRef,
    ClusterRef,
)
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.subjects import AppRef
from fleetwarden.core.tracking import FindingEvent, FindingTracker, Scope

__all__ = [
    "ORPHANS_SCOPE",
    "AppSetHit",
    "OrphanBook",
    "Orphans",
    "orphan_findings",
    "orphans_of",
]

ORPHANS_SCOPE = "orphans:"  # the tracker scope of a removed cluster's orphan findings


@dataclass(frozen=True, slots=True)
class AppSetHit:
    """An ApplicationSet still generating for the cluster, and how that is known:
    ``ownerReference`` (it owns an orphaned Application), ``list`` / ``clusters`` (a generator
    names the cluster)."""

    namespace: str
    name: str
    via: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "via": list(self.via)}


@dataclass(frozen=True, slots=True)
class Orphans:
    cluster: ClusterRef
    apps: tuple[Application, ...] = ()
    app_sets: tuple[AppSetHit, ...] = ()
    projects: tuple[AppProject, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The ``cluster.removed`` event's addition: ``orphanedApps`` the apps' names (the
        contract's shape), ``orphanedAppDetails`` each with its namespace, project and
        ApplicationSet."""
        return {
            "server": self.cluster.server,
            "orphanedApps": [a.name for a in self.apps],
            "orphanedAppDetails": [_app_json(a) for a in self.apps],
            "appSets": [s.to_json() for s in self.app_sets],
            "projects": [{"name": p.name, "namespace": p.namespace} for p in self.projects],
        }


def _app_json(app: Application) -> dict[str, Any]:
    out: dict[str, Any] = {"name": app.name, "namespace": app.namespace, "project": app.project}
    if app.app_set is not None:
        out["appSet"] = app.app_set.name
    return out


def orphans_of(
    cluster: ClusterRef,
    apps: Iterable[Application],
    app_sets: Iterable[ApplicationSet] = (),
    projects: Iterable[AppProject] = (),
) -> Orphans:
    """What pointed at ``cluster``; every list sorted by (namespace, name)."""
    orphaned = sorted((a for a in apps if a.destination.targets(cluster)), key=lambda a: a.key)
    via: dict[tuple[str, str], list[str]] = {}
    for app in orphaned:
        if app.app_set is not None:
            _add(via, app.app_set, "ownerReference")
    for app_set in app_sets:
        for target in app_set.targets:
            if target.names(cluster):
                _add(via, AppSetRef(app_set.namespace, app_set.name), target.kind)
    hits = tuple(
        AppSetHit(ns, name, tuple(dict.fromkeys(v))) for (ns, name), v in sorted(via.items())
    )
    listing = tuple(sorted((p for p in projects if p.lists(cluster)), key=lambda p: p.key))
    return Orphans(cluster, tuple(orphaned), hits, listing)


def _add(via: dict[tuple[str, str], list[str]], ref: AppSetRef, how: str) -> None:
    via.setdefault((ref.namespace, ref.name), []).append(how)


def orphan_findings(cluster: ClusterRef, apps: Iterable[Application]) -> list[Finding]:
    """One high ``LIFECYCLE`` finding per Application whose destination is the removed
    ``cluster``. ``pool`` is ``Application/<namespace>/<name>`` (the id stays the same while
    the app points there, whatever its sync or health)."""
    out = []
    for app in sorted(apps, key=lambda a: a.key):
        if not app.destination.targets(cluster):
            continue
        by = "server" if app.destination.server == cluster.server else "name"
        actual = app.destination.server if by == "server" else app.destination.name
        out.append(
            Finding(
                cluster=cluster.name,
                pool=f"Application/{app.namespace}/{app.name}",
                layer=Layer.LIFECYCLE,
                field=f"destination.{by}",
                expected=None,  # a cluster that exists: there is none to name
                actual=actual,
                severity=Severity.HIGH,
                source=f"argocd:{app.namespace}/{app.name}",
                message=(
                    f"Argo CD application {app.namespace}/{app.name} (project {app.project})"
                    f" targets removed cluster {cluster.name} ({cluster.server}) by {by}:"
                    " delete it or re-target it"
                ),
                extra={
                    "application": {
                        "name": app.name,
                        "namespace": app.namespace,
                        "project": app.project,
                        "appSet": app.app_set.name if app.app_set else None,
                        "sync": app.sync,
                        "health": app.health,
                    }
                },
                subject=AppRef(app.name, cluster.name),
            )
        )
    return out


class OrphanBook:
    """Removed clusters and the orphan findings they leave; ``tracker`` may be shared with
    the watcher's own (its scopes are ``(cluster, "orphans:")``)."""

    def __init__(self, tracker: FindingTracker | None = None) -> None:
        self.tracker = tracker or FindingTracker()
        self.removed: dict[str, ClusterRef] = {}

    @staticmethod
    def scope(cluster: str) -> Scope:
        return (cluster, ORPHANS_SCOPE)

    def remove(
        self,
        cluster: ClusterRef,
        apps: Iterable[Application],
        app_sets: Iterable[ApplicationSet] = (),
        projects: Iterable[AppProject] = (),
        *,
        now: datetime,
    ) -> tuple[Orphans, list[FindingEvent]]:
        """The cluster is gone: what it leaves, and a finding per orphaned app (opened)."""
        apps = list(apps)
        self.removed[cluster.name] = cluster
        orphans = orphans_of(cluster, apps, app_sets, projects)
        return orphans, self._update(cluster, apps, now=now)

    def restored(self, name: str, *, now: datetime) -> list[FindingEvent]:
        """The cluster is back (its Secret re-created): its orphan findings clear."""
        if self.removed.pop(name, None) is None:
            return []
        return self.tracker.update(self.scope(name), [], now=now)

    def update(self, apps: Iterable[Application], *, now: datetime) -> list[FindingEvent]:
        """The inventory changed (an app deleted, re-targeted, added): findings follow."""
        apps = list(apps)
        events: list[FindingEvent] = []
        for cluster in self.removed.values():
            events.extend(self._update(cluster, apps, now=now))
        return events

    def _update(
        self, cluster: ClusterRef, apps: list[Application], *, now: datetime
    ) -> list[FindingEvent]:
        findings = orphan_findings(cluster, apps)
        return self.tracker.update(self.scope(cluster.name), findings, now=now)
