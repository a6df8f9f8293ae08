"""The options ``fleet`` and ``gate`` share, and their loading glue: the inputs are read by
``wiring.fleet`` (``adapters.fleet_inputs``' docstring has the unreadable-file rules), a live
read shows a progress bar on a terminal, and every input error exits 2 naming the file or
setting."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated

import typer

from fleetwarden.adapters.fleet_inputs import LiveSources
from fleetwarden.adapters.typer_cli import with_options
from fleetwarden.app.fleet import LoadedFleet
from fleetwarden.cli.common import (
    argocd_server_option,
    config_option,
    err_console,
    failing,
)
from fleetwarden.ports.kube import CredentialError
from fleetwarden.presenting.progress import cluster_progress
from fleetwarden.wiring import fleet

__all__ = [
    "AppOpt",
    "ArgoAppOpt",
    "ArgoInsecureOpt",
    "ArgoServerOpt",
    "ConfigOpt",
    "ContextOpt",
    "DesiredOpt",
    "KubeconfigOpt",
    "LiveSources",
    "LoadedFleet",
    "NamespaceOpt",
    "RevisionOpt",
    "WorkloadsOpt",
    "live_sources",
    "load_fleet",
    "progress",
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
    argocd_server_option(
        "Argo CD API server URL (env ARGOCD_SERVER). The token is read from the "
        "environment variable ARGOCD_AUTH_TOKEN, never from the command line."
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
    config_option(
        "YAML config: `fleet:` (appLabel, namespace, ignoreDifferences in Argo CD's "
        "format, severities, ignore) and `scan:` (pool diff options, for the gate)."
    ),
]


def live_sources(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    argocd_app: ArgoAppOpt = None,
    argocd_server: ArgoServerOpt = None,
    argocd_insecure: ArgoInsecureOpt = False,
    revision: RevisionOpt = None,
) -> LiveSources:
    """The live options ``fleet`` and ``gate`` share (``adapters.typer_cli.with_options``)."""
    return LiveSources(
        kubeconfig=kubeconfig,
        contexts=tuple(context or ()),
        namespaces=tuple(namespace or ()),
        argocd_apps=tuple(argocd_app or ()),
        argocd_server=argocd_server,
        argocd_insecure=argocd_insecure,
        revision=revision,
    )


def progress(total: int) -> AbstractContextManager[Callable[[str], None]]:
    """A progress bar on stderr while live clusters are read."""
    return cluster_progress(err_console(), total)


@with_options(live_sources, "live", before="config")
def load_fleet(
    app: AppOpt,
    desired: DesiredOpt = None,
    workloads: WorkloadsOpt = None,
    config: ConfigOpt = None,
    *,
    live: LiveSources,  # the shared live options, before --config
) -> LoadedFleet:
    """The options of ``fleet versions | diff`` that name the inputs (``with_options``),
    read; exit 2 naming what is missing or unreadable."""
    with failing(ValueError, CredentialError):  # FormatError too
        return fleet.load_fleet(
            app, desired or (), workloads or (), config, live, progress=progress
        )
