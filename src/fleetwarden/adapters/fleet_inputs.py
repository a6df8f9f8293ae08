"""The inputs of ``fleet`` and ``gate``: their settings, and the desired and observed workloads
read from files, kubeconfig contexts and Argo CD (then ``app.fleet`` compares).

Unreadable files: for ``fleet versions`` and ``fleet diff``, a file found in a ``--desired`` or
``--workloads`` directory that cannot be read or parsed is listed under ``skipped`` (JSON) and
in a "skipped N files" section (table), and the rest is compared; a cluster whose dump was
skipped is left out of the comparison, not compared on half its objects. A path named on the
command line that is missing or unreadable, or a file named directly that does not parse, is a
``FormatError``. The gate is strict: a PreSync gate that let a sync through past a file it
could not read would be silence meaning "pass".

The HTTP clients (kubeconfig contexts, Argo CD) are imported only when a live source is asked
for: the gate on dumps, in every PreSync hook, does not pay for them. Errors: ``FormatError``
(input), ``CredentialError`` (a context's exec plugin), ``ValueError`` (Argo CD settings).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fleetwarden.adapters import files
from fleetwarden.adapters.workload_files import load_desired_state, load_observed, workload_sources
from fleetwarden.adapters.workload_sources import app_from_argocd, parse_argo_ref
from fleetwarden.core import workloads as wl
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.core.desired_apps import AppDesired, DesiredState
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.settings import Settings, load_settings
from fleetwarden.formats.workloads import FleetSettings, fleet_settings

if TYPE_CHECKING:  # the HTTP clients load only when a live source is asked for
    from fleetwarden.adapters.argocd.client import ArgoCDClient

__all__ = [
    "LiveSources",
    "Progress",
    "fetch_argocd_desired",
    "kube_endpoints",
    "load_fleet_settings",
    "read_fleet",
    "read_gate",
]

# ``progress(total)`` is entered around a live read of ``total`` clusters; what it gives is
# called with each cluster's name when that cluster is read
Progress = Callable[[int], AbstractContextManager[Callable[[str], None]]]


@dataclass(frozen=True, slots=True)
class LiveSources:
    """The live sources of a command: clusters from a kubeconfig, desired from Argo CD."""

    kubeconfig: Path | None = None
    contexts: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    argocd_apps: tuple[str, ...] = ()
    argocd_server: str | None = None
    argocd_insecure: bool = False
    revision: str | None = None


def load_fleet_settings(config: Path | None) -> tuple[Settings, FleetSettings]:
    """The ``--config`` settings and their ``fleet:`` part."""
    settings = load_settings(config)
    raw = settings.raw.get("fleet")
    if raw is not None and not isinstance(raw, Mapping):
        raise FormatError(str(config), "expected a mapping", field="fleet")
    return settings, fleet_settings(raw, source=str(config))


def _argocd_client(live: LiveSources) -> ArgoCDClient:
    if not live.argocd_server:
        raise ValueError("--argocd-app needs --argocd-server URL (or ARGOCD_SERVER)")
    from fleetwarden.adapters.argocd.client import client_from_env

    return client_from_env(live.argocd_server, option="--argocd-app", insecure=live.argocd_insecure)


async def fetch_argocd_desired(app: str, live: LiveSources, *, app_label: str | None) -> AppDesired:
    refs = [parse_argo_ref(r) for r in live.argocd_apps]
    async with _argocd_client(live) as client:
        return await app_from_argocd(app, client, refs, app_label=app_label, revision=live.revision)


def kube_endpoints(live: LiveSources) -> list[ClusterEndpoint]:
    if live.kubeconfig is None:
        return []
    from fleetwarden.adapters.kube.config import load_kubeconfig

    endpoints = load_kubeconfig(live.kubeconfig.expanduser(), contexts=live.contexts)
    if not endpoints:
        raise FormatError(str(live.kubeconfig), "no context to read")
    return endpoints


def read_fleet(
    app: str,
    desired: Sequence[str],
    workloads: Sequence[str],
    settings: Settings,
    fleet: FleetSettings,
    live: LiveSources,
    *,
    check: Callable[[DesiredState], None],
    progress: Progress,
) -> tuple[DesiredState, dict[str, wl.ObjectIndex]]:
    """``fleet``'s desired state (``check``ed before anything observed is read) and each
    cluster's workloads, from dumps and live contexts."""
    desired_args = [files.parse_path_arg(a) for a in desired]
    workload_args = [files.parse_path_arg(a) for a in workloads]
    state = load_desired_state(
        desired_args, app_label=fleet.app_label, limit=settings.desired_file_limit
    )
    if live.argocd_apps:
        state.add(asyncio.run(fetch_argocd_desired(app, live, app_label=fleet.app_label)))
    check(state)
    observed = load_observed(
        workload_sources(workload_args, skipped=state.unreadable),
        app=app,
        desired_names=state.names(),
        app_label=fleet.app_label,
        limit=settings.nodes_file_limit,
        aliases=[n for names in state.aliases.values() for n in names],
        skipped=state.unreadable,
    )
    endpoints = kube_endpoints(live)
    if endpoints:
        from fleetwarden.adapters import live_workloads

        with progress(len(endpoints)) as done:
            observed.update(
                asyncio.run(
                    live_workloads.read_workloads(
                        endpoints,
                        namespaces=live.namespaces,
                        app_label=fleet.app_label,
                        on_done=done,
                    )
                )
            )
    state.apply_aliases(app, observed)
    return state, observed


def read_gate(
    app: str,
    desired: Sequence[str],
    nodes: Sequence[str],
    workloads: Sequence[str],
    settings: Settings,
    fleet: FleetSettings,
    live: LiveSources,
    *,
    in_cluster: str | None,
    check: Callable[[DesiredState], None],
    progress: Progress,
) -> tuple[DesiredState, dict[str, list[ObservedNode]], dict[str, wl.ObjectIndex]]:
    """The gate's desired state (the app's manifests and the node pools, ``check``ed first),
    nodes and workloads, from dumps, kubeconfig contexts or the pod's own cluster."""
    state = load_desired_state(
        [files.parse_path_arg(a) for a in desired],
        app_label=fleet.app_label,
        with_pools=True,
        limit=settings.desired_file_limit,
    )
    if live.argocd_apps:
        state.add(asyncio.run(fetch_argocd_desired(app, live, app_label=fleet.app_label)))
    check(state)
    node_map = files.load_nodes(
        [files.parse_path_arg(a) for a in nodes], limit=settings.nodes_file_limit
    )
    observed = load_observed(
        workload_sources([files.parse_path_arg(a) for a in workloads]),
        app=app,
        desired_names=state.names(),
        app_label=fleet.app_label,
        limit=settings.nodes_file_limit,
        aliases=[n for names in state.aliases.values() for n in names],
    )
    endpoints = kube_endpoints(live)
    if in_cluster is not None:
        from fleetwarden.adapters.kube.config import in_cluster_endpoint

        endpoints.append(in_cluster_endpoint(in_cluster))
    if endpoints:
        from fleetwarden.adapters import live_workloads

        with progress(len(endpoints)) as done:
            live_nodes, live_objects = asyncio.run(
                live_workloads.read_gate_inputs(
                    endpoints,
                    namespaces=live.namespaces,
                    app_label=fleet.app_label,
                    on_done=done,
                )
            )
        node_map.update(live_nodes)
        observed.update(live_objects)
    state.apply_aliases(app, observed)
    return state, node_map, observed
