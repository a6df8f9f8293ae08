"""The followed applications' desired state, read through ``adapters/workload_sources``:
rendered manifests on disk (read off the event loop) and Argo CD's rendered manifests through
the service's Argo CD client. ``serve`` (``app/following.py``) and ``watch`` call it."""

from __future__ import annotations

from fleetwarden import logs
from fleetwarden.adapters.workload_sources import load_app
from fleetwarden.app.service_config import ServiceConfig
from fleetwarden.core.desired_apps import DesiredApps
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.argocd import ArgoCD
from fleetwarden.presenting.rendering import visible

__all__ = ["load_apps"]

log = logs.get_logger("fleetwarden.workloads")


async def load_apps(
    config: ServiceConfig, argocd: ArgoCD | None, *, previous: DesiredApps | None = None
) -> tuple[DesiredApps, dict[str, str]]:
    """Every followed application's desired state, and the errors of those that failed (an
    application that failed keeps its ``previous`` state, if it had one; the log says so,
    never with the token)."""
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
