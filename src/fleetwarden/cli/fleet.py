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
from collections.abc import Mapping
from typing import Annotated, Any

import typer
from rich.text import Text

from fleetwarden.app.fleet import build_versions, by_severity, drift_of_app, skipped_json
from fleetwarden.cli.common import FailOn, OutputFormat, WideOpt, exit_code
from fleetwarden.cli.sources import (
    AppOpt,
    ArgoAppOpt,
    ArgoInsecureOpt,
    ArgoServerOpt,
    ConfigOpt,
    ContextOpt,
    DesiredOpt,
    FailOnOpt,
    FormatOpt,
    KubeconfigOpt,
    NamespaceOpt,
    RevisionOpt,
    WorkloadsOpt,
    live_sources,
    load_fleet,
    print_skipped_state,
    workload_findings_table,
)
from fleetwarden.core import workloads as wl
from fleetwarden.core.desired_apps import DesiredState
from fleetwarden.core.findings import Severity
from fleetwarden.presenting.rendering import Col, Grid, dumps, line, literal, make_console

__all__ = ["diff_command", "register", "versions_command"]

MATRIX_MAX_CONTAINERS = 8  # beyond this, one row per cluster and container reads better


def _short(image: str | None, desired: str | None) -> str:
    if image is None:
        return "—"
    if desired and image != desired:
        want, have = wl.ImageRef.parse(desired), wl.ImageRef.parse(image)
        if want.repository == have.repository:
            tail = f":{have.tag}" if have.tag else ""
            return tail + (f"@{have.digest[:19]}" if have.digest else "")
    return image


def _style(row: Mapping[str, Any]) -> str:
    if row["drift"]:
        return "bold red"
    return "yellow" if row["divergesFromPeers"] else ""


def _print_versions(doc: Mapping[str, Any], state: DesiredState, *, wide: bool = False) -> None:
    console = make_console(wide=wide)
    rows = doc["rows"]
    columns: dict[tuple[str, str], str | None] = {}
    for r in rows:
        columns.setdefault((f"{r['kind']}/{r['workload']}", r["container"]), r["desiredImage"])
    clusters = sorted({r["cluster"] for r in rows})
    if rows and len(columns) <= MATRIX_MAX_CONTAINERS:
        table = Grid(
            Col("cluster", 100),
            *(Col(f"{w}\n{c}", 50 - i) for i, (w, c) in enumerate(columns)),
            title=f"images of {doc['app']}",
            wide=wide,
        )
        table.add_row(
            Text("Git", style="bold"), *[literal(d or "—", "dim") for d in columns.values()]
        )
        cells: dict[tuple[str, tuple[str, str]], Mapping[str, Any]] = {
            (r["cluster"], (f"{r['kind']}/{r['workload']}", r["container"])): r for r in rows
        }
        for cluster in clusters:
            row_cells = []
            for col, desired in columns.items():
                cell = cells.get((cluster, col))
                if cell is None:
                    row_cells.append(Text("—", style="dim"))
                else:
                    row_cells.append(literal(_short(cell["image"], desired), _style(cell)))
            table.add_row(literal(cluster), *row_cells)
        console.print(table)
    elif rows:
        table = Grid(
            Col("cluster", 9),
            Col("workload", 7),
            Col("container", 6),
            Col("image", 10),
            Col("Git", 5),
            Col("peers", 4),
            title=f"images of {doc['app']}",
            wide=wide,
        )
        for r in rows:
            table.add_row(
                literal(r["cluster"]),
                literal(f"{r['kind']}/{r['namespace']}/{r['workload']}"),
                literal(r["container"] + (" (init)" if r["init"] else "")),
                literal(r["image"] or "—", _style(r)),
                literal("=" if not r["drift"] else r["desiredImage"] or "—"),
                literal("=" if not r["divergesFromPeers"] else r["peerImage"] or "—"),
            )
        console.print(table)
    s = doc["summary"]
    git = ", ".join(s["clustersDivergingFromGit"]) or "none"
    peers = ", ".join(s["clustersDivergingFromPeers"]) or "none"
    console.print(
        line(
            (f"{s['containers']} containers in {s['clusters']} clusters", "bold"),
            f": {s['drift']} drift from Git (red); clusters diverging from Git: {git}; from "
            f"their peers (yellow): {peers}",
        ),
        highlight=False,
    )
    print_skipped_state(console, state, verbose=False)


def versions_command(
    app: AppOpt,
    desired: DesiredOpt = None,
    workloads: WorkloadsOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    argocd_app: ArgoAppOpt = None,
    argocd_server: ArgoServerOpt = None,
    argocd_insecure: ArgoInsecureOpt = False,
    revision: RevisionOpt = None,
    config: ConfigOpt = None,
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
    live = live_sources(
        kubeconfig, context, namespace, argocd_app, argocd_server, argocd_insecure, revision
    )
    state, desired_idx, observed, fleet = load_fleet(app, desired, workloads, config, live)
    doc = build_versions(app, desired_idx, observed, namespace=fleet.options.namespace)
    if drift_only:
        doc["rows"] = [r for r in doc["rows"] if r["drift"] or r["divergesFromPeers"]]
    doc["skipped"] = skipped_json(state)
    if output is OutputFormat.json:
        sys.stdout.write(dumps(doc) + "\n")
    else:
        _print_versions(doc, state, wide=wide)
    drift = doc["summary"]["drift"] > 0
    raise typer.Exit(1 if drift and Severity.HIGH.at_least(Severity(fail_on.value)) else 0)


def diff_command(
    app: AppOpt,
    desired: DesiredOpt = None,
    workloads: WorkloadsOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    argocd_app: ArgoAppOpt = None,
    argocd_server: ArgoServerOpt = None,
    argocd_insecure: ArgoInsecureOpt = False,
    revision: RevisionOpt = None,
    config: ConfigOpt = None,
    output: FormatOpt = OutputFormat.table,
    fail_on: FailOnOpt = FailOn.high,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List skipped files.")] = False,
    wide: WideOpt = False,
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
    live = live_sources(
        kubeconfig, context, namespace, argocd_app, argocd_server, argocd_insecure, revision
    )
    state, desired_idx, observed, fleet = load_fleet(app, desired, workloads, config, live)
    drift = drift_of_app(app, desired_idx, observed, options=fleet.options)
    if output is OutputFormat.json:
        sys.stdout.write(dumps(drift.to_json(skipped_json(state))) + "\n")
    else:
        console = make_console(wide=wide)
        if drift.findings:
            console.print(
                workload_findings_table(drift.findings, title=f"drift of {app}", wide=wide)
            )
        parts = [f"{n} {name}" for name, n in by_severity(drift.findings).items() if n]
        console.print(
            line(
                (f"{len(drift.findings)} findings", "bold"),
                f" ({', '.join(parts) or 'none'}) for {app} in {drift.clusters} clusters, "
                f"{drift.objects} objects compared",
            ),
            highlight=False,
        )
        print_skipped_state(console, state, verbose=verbose)
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
