"""The service's workload side: followed applications' desired state, kept fresh, and the
read API over the watchers' warm caches.

- ``load()`` builds every followed application's desired state from its sources
  (``adapters/workload_sources.load_app``: rendered manifests on disk, read off the event
  loop; Argo CD's rendered manifests through the service's Argo CD client). A source that
  fails keeps that application's last good state and says so in the log (never the token);
  ``app/serving.py`` calls it again every ``workloads.refreshSeconds`` and hands each new
  state to the watchers, which re-diff.
- ``GET /api/fleet/versions?app=NAME``: the ``fleet versions --format json`` document, from
  the watchers' warm indexes (no API server is asked).
- ``GET /api/fleet/diff?app=NAME``: the app's current drift findings in every cluster (the
  findings the watchers keep, with ``changedBy``).
- ``GET /api/fleet/apps``: the followed applications, their sources and each cluster's sync
  state.

Unknown applications answer 404, a missing ``app`` 400: never a 5xx.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetwarden import logs
from fleetwarden.adapters.workload_sources import load_app
from fleetwarden.app.fleet import build_versions
from fleetwarden.app.service_config import ServiceConfig
from fleetwarden.app.watching import FleetWatcher
from fleetwarden.app.workload_watching import WorkloadWatcher
from fleetwarden.core.desired_apps import DesiredApps
from fleetwarden.core.fleet import severity_order
from fleetwarden.core.tracking import app_scope
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.argocd import ArgoCD
from fleetwarden.presenting.rendering import visible

__all__ = ["WorkloadFleet", "load_apps"]

log = logs.get_logger("fleetwarden.workloads")


async def load_apps(
    config: ServiceConfig, argocd: ArgoCD | None, *, previous: DesiredApps | None = None
) -> tuple[DesiredApps, dict[str, str]]:
    """Every followed application's desired state, and the errors of those that failed (an
    application that failed keeps its ``previous`` state, if it had one)."""
    apps, failures = [], {}
    before = previous.apps if previous is not None else {}
    for source in config.apps:
        try:
            apps.append(
                await load_app(
                    source.name,
                    source.desired,
                    source.argocd,
                    argocd,
                    app_label=config.fleet.app_label,
                    limit=config.scan.desired_file_limit,
                )
            )
        except FormatError as exc:
            failures[source.name] = str(exc)
            kept = before.get(source.name)
            log.warning(  # names and paths with controls shown, not emitted
                "desired state not loaded",
                app=visible(source.name),
                keeping="the last one" if kept else "nothing: not followed until it loads",
                error=visible(exc),
            )
            if kept is not None:
                apps.append(kept)
    return DesiredApps(apps), failures


@dataclass
class WorkloadFleet:
    config: ServiceConfig
    fleet: FleetWatcher
    argocd: ArgoCD | None = None
    failures: dict[str, str] = field(default_factory=dict)  # app -> last load error
    loads: int = 0

    @property
    def desired(self) -> DesiredApps:
        return self.fleet.desired_apps or DesiredApps()

    # --- the desired side ----------------------------------------------------------------

    async def load(self) -> DesiredApps:
        """Every followed application's desired state; a failing source keeps its last."""
        desired, failures = await load_apps(self.config, self.argocd, previous=self.desired)
        self.failures = failures
        self.loads += 1
        return desired

    # --- the read API ----------------------------------------------------------------------

    def _watchers(self) -> dict[str, WorkloadWatcher]:
        out = {}
        for cluster in sorted(self.fleet.running):
            watcher = self.fleet.watcher(cluster)
            if watcher is not None and watcher.workloads is not None:
                out[cluster] = watcher.workloads
        return out

    def _app(self, request: Request) -> str | Response:
        app = request.query_params.get("app", "")
        if not app:
            return JSONResponse({"error": "the query parameter app is required"}, 400)
        if app not in self.desired.apps:
            followed = sorted(self.desired.apps)
            return JSONResponse(
                {"error": f"application {app!r} is not followed", "followed": followed}, 404
            )
        return app

    async def api_versions(self, request: Request) -> Response:
        app = self._app(request)
        if isinstance(app, Response):
            return app
        watchers = {c: w for c, w in self._watchers().items() if w.synced.is_set()}
        observed = {c: w.index for c, w in watchers.items()}
        desired = {c: self.desired.index(app, c) for c in observed}
        doc = build_versions(app, desired, observed, namespace=self.config.fleet.options.namespace)
        doc["summary"]["unsynced"] = sorted(set(self._watchers()) - set(watchers))
        return Response(orjson.dumps(doc), media_type="application/json")

    async def api_diff(self, request: Request) -> Response:
        app = self._app(request)
        if isinstance(app, Response):
            return app
        scope = app_scope(app)
        findings = sorted(
            (
                f
                for cluster in self._watchers()
                for f in self.fleet.tracker.findings_of((cluster, scope))
            ),
            key=severity_order,
        )
        doc: dict[str, Any] = {
            "app": app,
            "findings": [f.to_json() for f in findings],
            "summary": {"clusters": len(self._watchers()), "findings": len(findings)},
        }
        return Response(orjson.dumps(doc), media_type="application/json")

    async def api_apps(self, request: Request) -> Response:
        watchers = self._watchers()
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
            c: {
                "synced": w.synced.is_set(),
                "objects": len(w.index),
                "refused": sorted(w.unseen),
            }
            for c, w in watchers.items()
        }
        return JSONResponse({"apps": items, "clusters": clusters})

    def routes(self) -> list[Route]:
        return [
            Route("/api/fleet/apps", self.api_apps, methods=["GET"]),
            Route("/api/fleet/versions", self.api_versions, methods=["GET"]),
            Route("/api/fleet/diff", self.api_diff, methods=["GET"]),
        ]
