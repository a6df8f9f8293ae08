"""``fleetwarden gate``: the Argo CD PreSync gate (exit 1 blocks the sync).

Exit 1 (with every reason) when a workload of the app would not schedule on the pools it
targets, or when one of those pools drifts at or above ``--fail-on``; exit 0 otherwise; 2 when
it cannot run. ``deploy/argocd/presync-gate-job.yaml`` runs it in every sync: on dumps it loads
neither the HTTP clients nor the serve stack.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from fleetwarden.adapters.typer_cli import with_options
from fleetwarden.cli.common import (
    FAIL_ON_METAVAR,
    FormatOpt,
    OutputFormat,
    WideOpt,
    err_console,
    failing,
)
from fleetwarden.cli.sources import (
    AppOpt,
    ConfigOpt,
    DesiredOpt,
    LiveSources,
    live_sources,
    progress,
)
from fleetwarden.core.findings import Severity
from fleetwarden.ports.kube import CredentialError
from fleetwarden.presenting.json_text import emit
from fleetwarden.presenting.workloads import print_gate, print_gate_blocked
from fleetwarden.wiring.fleet import load_gate

__all__ = ["gate_command", "register"]


@with_options(live_sources, "live", before="config")
def gate_command(
    app: AppOpt,
    desired: DesiredOpt = None,
    nodes: Annotated[
        list[str] | None,
        typer.Option(
            "--nodes",
            "-n",
            metavar="[CLUSTER=]PATH",
            help="`kubectl get nodes -o json` of the destination cluster(s). Repeat.",
        ),
    ] = None,
    workloads: Annotated[
        list[str] | None,
        typer.Option(
            "--workloads",
            "-w",
            metavar="[CLUSTER=]PATH",
            help="Live workloads (optional): HPAs that own replicas, replicas Git leaves open.",
        ),
    ] = None,
    in_cluster: Annotated[
        str | None,
        typer.Option(
            "--in-cluster",
            metavar="CLUSTER",
            help="Read nodes and workloads live from the cluster this pod runs in (its "
            "ServiceAccount), named CLUSTER as the pool definitions name it. Instead of "
            "--nodes/--workloads (the PreSync hook's way).",
        ),
    ] = None,
    config: ConfigOpt = None,
    output: FormatOpt = OutputFormat.table,
    fail_on: Annotated[
        Severity,
        typer.Option(
            "--fail-on",
            metavar=FAIL_ON_METAVAR,
            help="Block when a targeted pool drifts at or above this.",
        ),
    ] = Severity.HIGH,
    wide: WideOpt = False,
    *,
    live: LiveSources,  # the shared live options, before --config
) -> None:
    """Argo CD PreSync gate: exit 1 (and say why) when a workload of the app would not
    schedule (nodeSelector, affinity, tolerations, requests vs allocatable) or a pool it
    targets drifts at or above --fail-on; exit 0 to let the sync go ahead.

    --desired holds the app's manifests and the desired node pools (any supported format);
    --argocd-app takes the app's manifests from Argo CD instead. Nodes and workloads come
    from dumps (--nodes, --workloads), a kubeconfig, or the pod's own cluster (--in-cluster).

    \b
    Examples:
      fleetwarden gate --app shop -d /git/shop/ -d /git/pools/ -n nodes.json
      fleetwarden gate --app shop --argocd-app shop -d /git/pools/
        --in-cluster prod-eu-1
    """
    with failing(ValueError, CredentialError):  # FormatError too
        inputs = load_gate(
            app, desired or (), nodes or (), workloads or (), config, live,
            in_cluster=in_cluster, progress=progress,
        )  # fmt: skip
    result = inputs.decide(fail_on)
    show = partial(print_gate, result=result, wide=wide)
    emit(output is OutputFormat.json, result.to_json, show, wide=wide)
    if result.blocked and output is OutputFormat.json:  # stdout is for machines
        print_gate_blocked(err_console(), app, result)
    raise typer.Exit(1 if result.blocked else 0)


def register(app: typer.Typer) -> None:
    """Add ``gate`` to the command line."""
    app.command("gate")(gate_command)
