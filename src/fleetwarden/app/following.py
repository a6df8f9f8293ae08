"""The service's followed applications: their desired state, kept fresh, and the reads over
the watchers' warm caches that ``GET /api/fleet/*`` answers (``entrypoints/workloads_api.py``).

- ``load()`` asks the ``load`` callable (``wiring/workloads.load_apps``) for every followed
  application's desired state; a source that fails keeps that application's last good state.
  ``app/serving.py`` calls it again every ``workloads.refreshSeconds`` and hands each new
  state to the watchers, which re-diff.
- ``versions(app)``: the ``fleet versions --format json`` document, from the watchers' warm
  indexes (no API server is asked); ``diff(app)``: the app's current drift findings in every
  cluster (with ``changedBy``); ``apps()``: the followed applications, their sources and each
  cluster's sync state.
- ``unknown(app)``: why a request for ``app`` cannot be answered (missing: 400, not
  followed: 404), or None.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fleetwarden.app.fleet import build_versions
from fleetwarden.app.service_config import ServiceConfig
from fleetwarden.app.watching import FleetWatcher
from fleetwarden.app.workload_watching import WorkloadWatcher
from fleetwarden.core.desired_apps import DesiredApps
from fleetwarden.core.fleet import severity_order
from fleetwarden.core.tracking import app_scope

__all__ = ["FollowedApps", "Loader"]

# the previous state -> every followed app's state, and the errors of those that failed
Loader = Callable[[DesiredApps | None], Awaitable[tuple[DesiredApps, dict[str, str]]]]


@dataclass
class FollowedApps:
    config: ServiceConfig
    fleet: FleetWatcher
    loader: Loader | None = None
    failures: dict[str, str] = field(default_factory=dict)  # app -> last load error
    loads: int = 0

    @property
    def desired(self) -> DesiredApps:
        return self.fleet.desired_apps or DesiredApps()

    async def load(self) -> DesiredApps:
        """Every followed application's desired state; a failing source keeps its last."""
        if self.loader is None:
            return self.desired
        desired, failures = await self.loader(self.desired)
        self.failures = failures
        self.loads += 1
        return desired

    def watchers(self) -> dict[str, WorkloadWatcher]:
        """The running clusters' workload watchers, by cluster."""
        out = {}
        for cluster in sorted(self.fleet.running):
            watcher = self.fleet.watcher(cluster)
            if watcher is not None and watcher.workloads is not None:
                out[cluster] = watcher.workloads
        return out

    def unknown(self, app: str) -> tuple[int, dict[str, Any]] | None:
        """The status and body that refuse a request for ``app``, or None when it is followed."""
        if not app:
            return 400, {"error": "the query parameter app is required"}
        if app not in self.desired.apps:
            followed = sorted(self.desired.apps)
            return 404, {"error": f"application {app!r} is not followed", "followed": followed}
        return None

    def versions(self, app: str) -> dict[str, Any]:
        watchers = {c: w for c, w in self.watchers().items() if w.synced.is_set()}
        observed = {c: w.index for c, w in watchers.items()}
        desired = {c: self.desired.index(app, c) for c in observed}
        doc = build_versions(app, desired, observed, namespace=self.config.fleet.options.namespace)
        doc["summary"]["unsynced"] = sorted(set(self.watchers()) - set(watchers))
        return doc

    def diff(self, app: str) -> dict[str, Any]:
        scope = app_scope(app)
        watchers = self.watchers()
        findings = sorted(
            (f for cluster in watchers for f in self.fleet.tracker.findings_of((cluster, scope))),
            key=severity_order,
        )
        return {
            "app": app,
            "findings": [f.to_json() for f in findings],
            "summary": {"clusters": len(watchers), "findings": len(findings)},
        }

    def apps(self) -> dict[str, Any]:
        items = []
        for source in self.config.apps:
            loaded = self.desired.apps.get(source.name)
            items.append(
                {
                    "app": source.name,
                    "sources": list(loaded.sources) if loaded else [],
                    "objects": len(loaded) if loaded else 0,
                    "error": self.failures.get(source.name),
                }
            )
        clusters = {
            c: {"synced": w.synced.is_set(), "objects": len(w.index), "refused": sorted(w.unseen)}
            for c, w in self.watchers().items()
        }
        return {"apps": items, "clusters": clusters}
