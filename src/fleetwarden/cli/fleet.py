"""``fleetwarden fleet versions | diff``: an application's workloads across clusters.

- ``fleet versions --app NAME``: the cluster x container table of images, with Git's image and
  the image most clusters run, so a cluster that diverges from Git or from its peers stands out.
- ``fleet diff --app NAME``: every drift of the app per cluster (image, configuration,
  resources, replicas, dependencies), in ``scan``'s finding shape with ``layer: WORKLOAD``.

Exit codes as everywhere: 0 clean, 1 drift, 2 bad arguments or input. Loading and the
unreadable-file rules: ``cli.sources``; the comparisons: ``app.fleet``.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from fleetwarden.adapters.typer_cli import with_options
from fleetwarden.app.fleet import LoadedFleet, skipped_json
from fleetwarden.cli.common import (
    FailOnOpt,
    FormatOpt,
    OutputFormat,
    WideOpt,
    exit_code,
)
from fleetwarden.cli.sources import load_fleet
from fleetwarden.core.findings import Severity
from fleetwarden.presenting.json_text import emit
from fleetwarden.presenting.workloads import print_drift, print_versions

__all__ = ["diff_command", "register", "versions_command"]


@with_options(load_fleet, "loaded")
def versions_command(
    output: FormatOpt = OutputFormat.table,
    fail_on: FailOnOpt = Severity.HIGH,
    drift_only: Annotated[
        bool,
        typer.Option(
            "--drift-only",
            help="Only rows that diverge from Git or from their peers (the summary still "
            "counts every row).",
        ),
    ] = False,
    wide: WideOpt = False,
    *,
    loaded: LoadedFleet,  # --app and the inputs, before --format
) -> None:
    """Which image of the app runs in every cluster: a cluster x container table, marking
    each cluster that diverges from Git and from its peers. Image drift is high: exit 1
    with the default --fail-on.

    \b
    Examples:
      fleetwarden fleet versions --app shop -d rendered/ -w dumps/ -o json
      ARGOCD_AUTH_TOKEN=... fleetwarden fleet versions --app shop
        --argocd-app shop --argocd-server argocd.example.com
        --kubeconfig ~/.kube/fleet.yaml
    """
    doc = loaded.versions(drift_only=drift_only)
    show = partial(print_versions, doc=doc, state=loaded.state, wide=wide)
    emit(output is OutputFormat.json, lambda: doc, show, wide=wide)
    drift = doc["summary"]["drift"] > 0
    raise typer.Exit(1 if drift and Severity.HIGH.at_least(fail_on) else 0)


@with_options(load_fleet, "loaded")
def diff_command(
    output: FormatOpt = OutputFormat.table,
    fail_on: FailOnOpt = Severity.HIGH,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List skipped files.")] = False,
    wide: WideOpt = False,
    *,
    loaded: LoadedFleet,  # --app and the inputs, before --format
) -> None:
    """Every drift of the app per cluster: image (repository, tag, digest), configuration
    (ConfigMap/Secret content, env, envFrom), resources (requests, limits, replicas unless
    an HPA owns them) and dependencies (sidecars, init containers, mesh injection).

    \b
    Examples:
      fleetwarden fleet diff --app shop -d rendered/ -w eu=eu.json -w us.json
      fleetwarden fleet diff --app shop -d rendered/ --kubeconfig ~/.kube/config
        --context prod
    """
    drift, state = loaded.drift(), loaded.state
    show = partial(
        print_drift, app=loaded.app, drift=drift, state=state, verbose=verbose, wide=wide
    )
    emit(output is OutputFormat.json, lambda: drift.to_json(skipped_json(state)), show, wide=wide)
    raise typer.Exit(exit_code(drift.findings, fail_on))


def register(app: typer.Typer) -> None:
    """Add the ``fleet`` group to the command line."""
    fleet = typer.Typer(
        name="fleet",
        help="Workloads across clusters: which image runs where, and every drift from Git.",
        no_args_is_help=True,
        rich_markup_mode=None,  # help prints literally
    )
    fleet.command("versions")(versions_command)
    fleet.command("diff")(diff_command)
    app.add_typer(fleet, name="fleet")
