"""The sources of ``fleet`` and ``gate``: their shared options, and the loading of desired and
observed workloads from files, kubeconfig contexts and Argo CD (then ``app.fleet`` compares).

Unreadable files: for ``fleet versions`` and ``fleet diff``, a file found in a ``--desired`` or
``--workloads`` directory that cannot be read or parsed is listed under ``skipped`` (JSON) and
in a "skipped N files" section (table), and the rest is compared; a cluster whose dump was
skipped is left out of the comparison, not compared on half its objects. A path named on the
command line that is missing or unreadable, or a file named directly that does not parse,
exits 2. The gate is strict: a PreSync gate that let a sync through past a file it could not
read would be silence meaning "pass".

The HTTP clients (kubeconfig contexts, Argo CD) are imported only when a live source is asked
for: the gate on dumps, in every PreSync hook, does not pay for them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from fleetwarden.adapters import files
from fleetwarden.adapters.settings import Settings, load_settings
from fleetwarden.adapters.workload_files import load_desired_state, load_observed, workload_sources
from fleetwarden.adapters.workload_sources import (
    app_from_argocd,
    parse_argo_ref,
)
from fleetwarden.app.fleet import missing_app
from fleetwarden.cli.common import (
    FAIL_ON_METAVAR,
    FORMAT_METAVAR,
    FailOn,
    OutputFormat,
    err_console,
    fail,
)
from fleetwarden.core import workloads as wl
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.core.desired_apps import AppDesired, DesiredState
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.workloads import FleetSettings, fleet_settings
from fleetwarden.ports.argocd import ArgoError
from fleetwarden.ports.kube import CredentialError

if TYPE_CHECKING:  # the HTTP clients load only when a live source is asked for
    from fleetwarden.adapters.argocd.client import ArgoCDClient

__all__ = [
    "AppOpt",
    "ArgoAppOpt",
    "ArgoInsecureOpt",
    "ArgoServerOpt",
    "ConfigOpt",
    "ContextOpt",
    "DesiredOpt",
    "FailOnOpt",
    "FormatOpt",
    "KubeconfigOpt",
    "LiveSources",
    "NamespaceOpt",
    "RevisionOpt",
    "WorkloadsOpt",
    "check_app",
    "fetch_argocd_desired",
    "fleet_settings_or_fail",
    "kube_endpoints",
    "live_sources",
    "load_fleet",
    "read_gate_live",
]


AppOpt = Annotated[
    str,
    typer.Option(
        "--app",
        "-a",
        metavar="NAME",
        help="The Argo CD application: objects carrying its tracking annotation or "
        "app.kubernetes.io/instance label (or fleet.appLabel), plus the desired objects.",
    ),
]

DesiredOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--desired",
        "-d",
        metavar="[CLUSTER=]PATH",
        help="Desired manifests: plain YAML, `kustomize build` or `helm template` output, or "
        "a saved Argo CD /manifests response; a file or a directory (recursive). CLUSTER= "
        "makes them that cluster's overlay. Repeat.",
    ),
]

WorkloadsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--workloads",
        "-w",
        metavar="[CLUSTER=]PATH",
        help="`kubectl get deploy,sts,ds,cm,secret,hpa -A -o json` output, a file or a "
        "directory of them; the cluster is CLUSTER= or the file's stem. Repeat.",
    ),
]

KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        "-k",
        metavar="FILE",
        help="Read the live clusters instead of (or besides) dumps: one per context (all, or "
        "--context). Needs get/list on the six kinds; Secret values are hashed on arrival.",
    ),
]

ContextOpt = Annotated[
    list[str] | None,
    typer.Option("--context", metavar="NAME", help="Only these kubeconfig contexts (repeat)."),
]

NamespaceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--namespace",
        metavar="NS",
        help="With --kubeconfig: list only these namespaces (repeat; default: all).",
    ),
]

ArgoAppOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--argocd-app",
        metavar="[CLUSTER=]APPLICATION",
        help="Desired manifests from Argo CD: what it renders for the application's target "
        "revision (GET /api/v1/applications/NAME/manifests). CLUSTER= makes them that "
        "cluster's overlay (an ApplicationSet's per-cluster application). Repeat.",
    ),
]

ArgoServerOpt = Annotated[
    str | None,
    typer.Option(
        "--argocd-server",
        metavar="URL",
        envvar="ARGOCD_SERVER",
        help="Argo CD API server URL (env ARGOCD_SERVER). The token is read from the "
        "environment variable ARGOCD_AUTH_TOKEN, never from the command line.",
    ),
]

ArgoInsecureOpt = Annotated[
    bool,
    typer.Option("--argocd-insecure", help="Do not verify Argo CD's TLS certificate."),
]

RevisionOpt = Annotated[
    str | None,
    typer.Option(
        "--revision", metavar="REV", help="With --argocd-app: render this revision instead."
    ),
]

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="YAML config: `fleet:` (appLabel, namespace, ignoreDifferences in Argo CD's "
        "format, severities, ignore) and `scan:` (pool diff options, for the gate).",
    ),
]

FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format", "-o", metavar=FORMAT_METAVAR, help="table for people, json for machines."
    ),
]

FailOnOpt = Annotated[
    FailOn,
    typer.Option(
        "--fail-on",
        metavar=FAIL_ON_METAVAR,
        help="Exit 1 when a finding is at or above this severity.",
    ),
]


def live_sources(
    kubeconfig: Path | None,
    contexts: list[str] | None,
    namespaces: list[str] | None,
    argocd_apps: list[str] | None,
    argocd_server: str | None,
    argocd_insecure: bool,
    revision: str | None,
) -> LiveSources:
    return LiveSources(
        kubeconfig=kubeconfig,
        contexts=tuple(contexts or ()),
        namespaces=tuple(namespaces or ()),
        argocd_apps=tuple(argocd_apps or ()),
        argocd_server=argocd_server,
        argocd_insecure=argocd_insecure,
        revision=revision,
    )


def fleet_settings_or_fail(config: Path | None) -> tuple[Settings, FleetSettings]:
    try:
        settings = load_settings(config)
        raw = settings.raw.get("fleet")
        if raw is not None and not isinstance(raw, Mapping):
            raise FormatError(str(config), "expected a mapping", field="fleet")
        return settings, fleet_settings(raw, source=str(config))
    except FormatError as exc:
        fail(str(exc))


def check_app(app: str, desired: DesiredState) -> None:
    """Exit 2 when the desired state holds nothing of ``app``."""
    problem = missing_app(app, desired)
    if problem is not None:
        fail(problem)


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


ARGOCD_TOKEN_ENV = "ARGOCD_AUTH_TOKEN"  # the argocd CLI's own variable


def argocd_client(server: str | None, *, insecure: bool = False) -> ArgoCDClient:
    """An Argo CD client from --argocd-server and ARGOCD_AUTH_TOKEN (never a flag: command
    lines end up in shell history and ``ps``)."""
    if not server:
        fail("--argocd-app needs --argocd-server URL (or ARGOCD_SERVER)")
    token = os.environ.get(ARGOCD_TOKEN_ENV, "").strip()
    if not token:
        fail(f"--argocd-app needs an Argo CD API token in the variable {ARGOCD_TOKEN_ENV}")
    if "://" not in server:
        server = f"https://{server}"  # the argocd CLI's ARGOCD_SERVER is a bare host:port
    from fleetwarden.adapters.argocd.client import ArgoCDClient

    try:
        return ArgoCDClient(server, token=token, verify=not insecure, retries=2)
    except (ArgoError, ValueError) as exc:
        fail(f"--argocd-server {server}: {exc}")


async def fetch_argocd_desired(app: str, live: LiveSources, *, app_label: str | None) -> AppDesired:
    refs = [parse_argo_ref(r) for r in live.argocd_apps]
    async with argocd_client(live.argocd_server, insecure=live.argocd_insecure) as client:
        return await app_from_argocd(app, client, refs, app_label=app_label, revision=live.revision)


def kube_endpoints(live: LiveSources) -> list[ClusterEndpoint]:
    if live.kubeconfig is None:
        return []
    from fleetwarden.adapters.kube.config import load_kubeconfig

    endpoints = load_kubeconfig(live.kubeconfig.expanduser(), contexts=live.contexts)
    if not endpoints:
        raise FormatError(str(live.kubeconfig), "no context to read")
    return endpoints


def _progress(total: int) -> Progress:
    """A progress bar on stderr, shown on a terminal when several clusters are read."""
    return Progress(
        TextColumn("reading live clusters"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err_console(),
        transient=True,
        disable=not (err_console().is_terminal and total > 1),
    )


def load_live_workloads(live: LiveSources, *, app_label: str | None) -> dict[str, wl.ObjectIndex]:
    """Each kubeconfig cluster's workloads now (all namespaces, or --namespace)."""
    endpoints = kube_endpoints(live)
    if not endpoints:
        return {}
    from fleetwarden.adapters import live_workloads

    with _progress(len(endpoints)) as bar:
        task = bar.add_task("read", total=len(endpoints))
        return asyncio.run(
            live_workloads.read_workloads(
                endpoints,
                namespaces=live.namespaces,
                app_label=app_label,
                on_done=lambda _: bar.advance(task),
            )
        )


def read_gate_live(
    endpoints: Sequence[ClusterEndpoint], live: LiveSources, fleet: FleetSettings
) -> tuple[dict[str, list[ObservedNode]], dict[str, wl.ObjectIndex]]:
    """Nodes, workloads and HPAs of each live cluster, for the gate."""
    from fleetwarden.adapters import live_workloads

    with _progress(len(endpoints)) as bar:
        task = bar.add_task("read", total=len(endpoints))
        return asyncio.run(
            live_workloads.read_gate_inputs(
                endpoints,
                namespaces=live.namespaces,
                app_label=fleet.app_label,
                on_done=lambda _: bar.advance(task),
            )
        )


def load_fleet(
    app: str,
    desired: list[str] | None,
    workloads: list[str] | None,
    config: Path | None,
    live: LiveSources = LiveSources(),
) -> tuple[DesiredState, dict[str, wl.ObjectIndex], dict[str, wl.ObjectIndex], FleetSettings]:
    settings, fleet = fleet_settings_or_fail(config)
    if not desired and not live.argocd_apps:
        fail("no desired state: give --desired PATH or --argocd-app APPLICATION")
    if not workloads and live.kubeconfig is None:
        fail("no observed state: give --workloads PATH (dumps) or --kubeconfig FILE (live)")
    try:
        desired_args = [files.parse_path_arg(a) for a in desired or ()]
        workload_args = [files.parse_path_arg(a) for a in workloads or ()]
        state = load_desired_state(
            desired_args, app_label=fleet.app_label, limit=settings.desired_file_limit
        )
        if live.argocd_apps:
            state.add(asyncio.run(fetch_argocd_desired(app, live, app_label=fleet.app_label)))
        check_app(app, state)
        observed = load_observed(
            workload_sources(workload_args, skipped=state.unreadable),
            app=app,
            desired_names=state.names(),
            app_label=fleet.app_label,
            limit=settings.nodes_file_limit,
            aliases=[n for names in state.aliases.values() for n in names],
            skipped=state.unreadable,
        )
        observed.update(load_live_workloads(live, app_label=fleet.app_label))
        state.apply_aliases(app, observed)
    except FormatError as exc:
        fail(str(exc))
    except CredentialError as exc:  # a context's exec plugin is missing or failed
        fail(exc.reason)  # fail() prints it literally
    if not observed and state.unreadable:
        first = state.unreadable[0]
        fail(
            f"no cluster to compare: {len(state.unreadable)} files were skipped, "
            f"e.g. {first.path}: {first.reason}"
        )
    return state, state.indexes(observed), observed, fleet
