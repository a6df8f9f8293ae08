"""``fleetwarden fleet versions | diff``: an application's workloads across clusters.

- ``fleet versions --app NAME``: the cluster x container table of images, with Git's image and
  the image most clusters run, so a cluster that diverges from Git or from its peers stands out.
- ``fleet diff --app NAME``: every drift of the app per cluster (image, configuration,
  resources, replicas, dependencies), in ``scan``'s finding shape with ``layer: WORKLOAD``.

Exit codes as everywhere: 0 clean, 1 drift, 2 bad arguments or input. Loading and the
unreadable-file rules: ``cli.sources``; the comparisons: ``app.fleet``.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from fleetwarden.app.fleet import build_versions, drift_of_app, skipped_json
from fleetwarden.cli.common import (
    FailOn,
    FailOnOpt,
    FormatOpt,
    OutputFormat,
    WideOpt,
    exit_code,
    with_options,
)
from fleetwarden.cli.sources import LoadedFleet, load_fleet
from fleetwarden.core.findings import Severity
from fleetwarden.presenting.rendering import dumps, make_console
from fleetwarden.presenting.workloads import print_drift, print_versions

__all__ = ["diff_command", "register", "versions_command"]


@with_options(load_fleet, "loaded")
def versions_command(
    output: FormatOpt = OutputFormat.table,
    fail_on: FailOnOpt = FailOn.high,
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
    app, state, desired_idx, observed, fleet = loaded
    doc = build_versions(app, desired_idx, observed, namespace=fleet.options.namespace)
    if drift_only:
        doc["rows"] = [r for r in doc["rows"] if r["drift"] or r["divergesFromPeers"]]
    doc["skipped"] = skipped_json(state)
    if output is OutputFormat.json:
        sys.stdout.write(dumps(doc) + "\n")
    else:
        print_versions(make_console(wide=wide), doc, state, wide=wide)
    drift = doc["summary"]["drift"] > 0
    raise typer.Exit(1 if drift and Severity.HIGH.at_least(Severity(fail_on.value)) else 0)


@with_options(load_fleet, "loaded")
def diff_command(
    output: FormatOpt = OutputFormat.table,
    fail_on: FailOnOpt = FailOn.high,
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
    app, state, desired_idx, observed, fleet = loaded
    drift = drift_of_app(app, desired_idx, observed, options=fleet.options)
    if output is OutputFormat.json:
        sys.stdout.write(dumps(drift.to_json(skipped_json(state))) + "\n")
    else:
        print_drift(make_console(wide=wide), app, drift, state, verbose=verbose, wide=wide)
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
