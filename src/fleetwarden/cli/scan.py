"""``fleetwarden scan`` and ``fleetwarden explain``: desired node pools against node dumps.

Parse the arguments, load the desired pools and the dump list (``adapters.files``), call
``app.scanning.scan_clusters`` (or ``app.explaining.explain``) and render.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fleetwarden.adapters import files
from fleetwarden.app import explaining
from fleetwarden.app.scanning import scan_clusters
from fleetwarden.app.stamping import group_by_cause
from fleetwarden.cli.common import (
    FailOn,
    FailOnOpt,
    FormatOpt,
    OutputFormat,
    WideOpt,
    emit_report,
    err_console,
    exit_code,
    fail,
    load_settings_or_fail,
)
from fleetwarden.core.fleet import FleetReport, NothingToCompare, check_comparable
from fleetwarden.formats.errors import FormatError
from fleetwarden.presenting.incidents import GroupBy, show_grouped
from fleetwarden.presenting.progress import dump_progress
from fleetwarden.presenting.rendering import dumps, make_console, print_explanation

if TYPE_CHECKING:
    from fleetwarden.formats.desired import DesiredRead
    from fleetwarden.formats.settings import Settings

__all__ = ["explain", "register", "scan"]


PROGRESS_MIN_BYTES = 1_000_000  # about a few hundred nodes of kubectl JSON
PARALLEL_MIN_BYTES = 32 * 2**20


DesiredOpt = Annotated[
    list[str],
    typer.Option(
        "--desired",
        "-d",
        metavar="[CLUSTER=]PATH",
        help="Desired node pools: a file or directory (recursive) in any supported "
        "format. CLUSTER= assigns every pool found there to that cluster. Repeat.",
    ),
]
NodesOpt = Annotated[
    list[str],
    typer.Option(
        "--nodes",
        "-n",
        metavar="[CLUSTER=]PATH",
        help="`kubectl get nodes -o json|yaml` output, a file or a directory of them; "
        "the cluster is CLUSTER= or the file's stem. Repeat.",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="YAML config: tolerance, pool labels, severity overrides, ignore rules, "
        "the provisioner releases to assume (scan.provisioners).",
    ),
]
AllowEmptyOpt = Annotated[
    bool,
    typer.Option(
        "--allow-empty",
        help="Exit 0 when there is nothing to compare (no pool under --desired, no desired "
        "cluster among the node dumps) instead of 2.",
    ),
]


def scan(
    desired: DesiredOpt,
    nodes: NodesOpt,
    config: ConfigOpt = None,
    output: FormatOpt = OutputFormat.table,
    fail_on: FailOnOpt = FailOn.high,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List skipped files.")] = False,
    allow_empty: AllowEmptyOpt = False,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="Progress bar while reading node dumps "
            "(default: on a terminal, for dumps over ~1 MB).",
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            metavar="N",
            help="Worker processes (default: all cores for dumps over 32 MB, else 1).",
        ),
    ] = None,
    wide: WideOpt = False,
    group_by: Annotated[
        GroupBy | None,
        typer.Option(metavar="cause", help="Also group findings into ranked incidents."),
    ] = None,
) -> None:
    """Diff desired node pools against node dumps: labels (L1), taints (L2), allocatable (L3),
    kubelet versions (L4), instance type / OS / disk (SPEC) and node counts (COUNT).

    \b
    Example:
      fleetwarden scan -d prod-eu-1=clusters/prod-eu-1/ -n prod-eu-1=nodes.json
    """
    settings = load_settings_or_fail(config)
    try:
        desired_args = [files.parse_path_arg(a) for a in desired]
        nodes_args = [files.parse_path_arg(a) for a in nodes]
        files.start_reading(nodes_args, workers=jobs, limit=settings.nodes_file_limit)
        loaded = files.load_desired(
            desired_args, limit=settings.desired_file_limit, assume=settings.assume
        )
        sources = files.node_sources(nodes_args)
        if not allow_empty:
            paths = [a.label for a in desired_args]
            if not loaded.pools:
                raise NothingToCompare(loaded.nothing_found(paths))
            check_comparable(loaded.pools, sources.keys(), desired_paths=paths)
        report = _scan(loaded, sources, settings, progress, jobs)
    except (FormatError, NothingToCompare) as exc:
        fail(str(exc))
    if group_by is None:
        emit_report(report, output, verbose=verbose, wide=wide)
    else:  # the same grouping as /api/incidents
        incidents = group_by_cause(report.findings)
        console = make_console(wide=wide)
        show_grouped(console, report, incidents, output.value, verbose=verbose, wide=wide)
    raise typer.Exit(exit_code(report.findings, fail_on))


def explain(
    desired: DesiredOpt,
    pool: Annotated[
        str | None,
        typer.Option(
            "--pool", "-p", metavar="GLOB", help="Only pools whose name matches (a glob)."
        ),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option("--cluster", metavar="GLOB", help="Only pools of this cluster (a glob)."),
    ] = None,
    config: ConfigOpt = None,
    output: FormatOpt = OutputFormat.table,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Exit 1 when an attribute is unknown to fleetwarden."),
    ] = False,
    allow_empty: AllowEmptyOpt = False,
    wide: WideOpt = False,
) -> None:
    """Account for every field of the desired pools: what is compared (the value and where it
    came from: file:line, or the provisioner's default), unresolved (the expression), ignored
    (why) or unknown to fleetwarden.

    \b
    Example:
      fleetwarden explain -d clusters/prod-eu-1/eksctl.yaml --pool ng-1
    """
    settings = load_settings_or_fail(config)
    try:
        desired_args = [files.parse_path_arg(a) for a in desired]
        loaded = files.load_desired(
            desired_args, limit=settings.desired_file_limit, assume=settings.assume
        )
        if not loaded.pools and not allow_empty:
            raise NothingToCompare(loaded.nothing_found([a.label for a in desired_args]))
    except (FormatError, NothingToCompare) as exc:
        fail(str(exc))
    result = explaining.explain(
        loaded.pools,
        skipped=loaded.skipped,
        pool=pool,
        cluster=cluster,
        assumed=settings.assume.describe(),
    )
    if not result.pools and loaded.pools and not allow_empty:
        names = ", ".join(sorted({p.name for p in loaded.pools})[:10])
        fail(f"no pool matches --pool {pool or '*'} --cluster {cluster or '*'} (pools: {names})")
    if output is OutputFormat.json:
        sys.stdout.write(dumps(result.to_json()) + "\n")
    else:
        print_explanation(make_console(wide=wide), result, wide=wide)
    raise typer.Exit(1 if strict and result.unaccounted else 0)


def _scan(
    loaded: DesiredRead,
    sources: dict[str, list[str]],
    settings: Settings,
    progress: bool | None,
    jobs: int | None,
) -> FleetReport:
    sizes = {c: sum(os.path.getsize(p) for p in paths) for c, paths in sources.items()}
    total = sum(sizes.values())
    if jobs is None:  # processes pay off only for big inputs
        jobs = (os.cpu_count() or 1) if total > PARALLEL_MIN_BYTES else 1
    load = functools.partial(files.summarise_node_files, limit=settings.nodes_file_limit)
    run = functools.partial(
        scan_clusters, loaded.pools, sources, load, options=settings.diff,
        skipped=loaded.skipped, workers=jobs,
    )  # fmt: skip
    if progress is None:
        progress = err_console().is_terminal and total > PROGRESS_MIN_BYTES
    if not progress:
        return run()
    with dump_progress(err_console(), total) as advance:
        return run(on_done=lambda cluster: advance(sizes[cluster]))


def register(app: typer.Typer) -> None:
    """Add ``scan`` and ``explain`` to the command line."""
    app.command("scan")(scan)
    app.command("explain")(explain)
