"""The ``fleetwarden`` command line.

Exit codes: 0 clean, 1 drift at or above ``--fail-on``, 2 bad arguments or input.
"""

from __future__ import annotations

import functools
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from fleetwarden.adapters import files
from fleetwarden.app import explaining
from fleetwarden.app.scanning import scan_clusters
from fleetwarden.core.findings import Severity
from fleetwarden.core.fleet import FleetReport, NothingToCompare, check_comparable
from fleetwarden.entrypoints import (
    approve_cmd,
    audit_cmd,
    deprecations_cmd,
    fleet_cmd,
    serve_cmd,
    watch_cmd,
)
from fleetwarden.entrypoints import demo as demo_mod
from fleetwarden.cli.common import fail
from fleetwarden.cli.rendering import (
    dumps,
    make_console,
    print_explanation,
    print_report,
)
from fleetwarden.entrypoints.settings import Settings, load_settings
from fleetwarden.formats.desired import DesiredRead
from fleetwarden.formats.errors import FormatError

__all__ = ["app", "fail", "main"]

app = typer.Typer(
    name="fleetwarden",
    help="Keep a fleet of Kubernetes clusters honest: find node-pool drift between the desired "
    "state (eksctl, Karpenter, Cluster API, Terraform, native YAML) and the real nodes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help and usage errors print literally: [CLUSTER=]PATH, [/x]
    context_settings={"help_option_names": ["-h", "--help"]},
)

_err = Console(stderr=True)
PROGRESS_MIN_BYTES = 1_000_000  # about a few hundred nodes of kubectl JSON
PARALLEL_MIN_BYTES = 32 * 2**20


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


class FailOn(StrEnum):
    info = "info"
    low = "low"
    medium = "medium"
    high = "high"
    critical = "critical"


def exit_code(report: FleetReport, fail_on: FailOn) -> int:
    threshold = Severity(fail_on.value)
    return 1 if any(f.severity.at_least(threshold) for f in report.findings) else 0


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
FormatOpt = Annotated[
    OutputFormat, typer.Option("--format", "-o", help="table for people, json for machines.")
]
FailOnOpt = Annotated[
    FailOn, typer.Option("--fail-on", help="Exit 1 when a finding is at or above this severity.")
]
AllowEmptyOpt = Annotated[
    bool,
    typer.Option(
        "--allow-empty",
        help="Exit 0 when there is nothing to compare (no pool under --desired, no desired "
        "cluster among the node dumps) instead of 2.",
    ),
]


@app.command()
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
            help="Worker processes (default: all cores for dumps over 32 MB, else 1).",
        ),
    ] = None,
) -> None:
    """Diff desired node pools against node dumps: labels (L1), taints (L2), allocatable (L3),
    kubelet versions (L4), instance type / OS / disk (SPEC) and node counts (COUNT).

    Example: fleetwarden scan -d prod-eu-1=clusters/prod-eu-1/ -n prod-eu-1=nodes.json
    """
    settings = _settings(config)
    try:
        desired_args = [files.parse_path_arg(a) for a in desired]
        nodes_args = [files.parse_path_arg(a) for a in nodes]
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
    _emit(report, output, verbose)
    raise typer.Exit(exit_code(report, fail_on))


@app.command()
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
) -> None:
    """Account for every field of the desired pools: what is compared (the value and where it
    came from: file:line, or the provisioner's default), unresolved (the expression), ignored
    (why) or unknown to fleetwarden.

    Example: fleetwarden explain -d clusters/prod-eu-1/eksctl.yaml --pool ng-1
    """
    settings = _settings(config)
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
        print_explanation(make_console(), result)
    raise typer.Exit(1 if strict and result.unaccounted else 0)


def _settings(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except FormatError as exc:
        fail(str(exc))


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
    load = functools.partial(files.read_node_files, limit=settings.nodes_file_limit)
    show = progress if progress is not None else (_err.is_terminal and total > PROGRESS_MIN_BYTES)
    if not show:
        return scan_clusters(
            loaded.pools, sources, load, options=settings.diff, skipped=loaded.skipped, workers=jobs
        )
    with Progress(
        TextColumn("scanning node dumps"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[clusters]} clusters"),
        TimeRemainingColumn(),
        console=_err,
        transient=True,
    ) as bar:
        task = bar.add_task("scan", total=total, clusters=0)
        done = {"n": 0}

        def advance(cluster: str) -> None:
            done["n"] += 1
            bar.update(task, advance=sizes[cluster], clusters=done["n"])

        return scan_clusters(
            loaded.pools,
            sources,
            load,
            options=settings.diff,
            skipped=loaded.skipped,
            workers=jobs,
            on_done=advance,
        )


def _emit(report: FleetReport, output: OutputFormat, verbose: bool) -> None:
    if output is OutputFormat.json:
        sys.stdout.write(dumps(report.to_json()) + "\n")
    else:
        print_report(make_console(), report, verbose=verbose)


@app.command()
def demo(
    once: Annotated[
        bool,
        typer.Option(
            "--once", help="One pass: print the findings and exit (1: the demo fleet has drift)."
        ),
    ] = False,
    output: FormatOpt = OutputFormat.table,
    steps: Annotated[
        int, typer.Option(help="Live mode: number of simulated changes (0: endless).")
    ] = 12,
    interval: Annotated[float, typer.Option(help="Live mode: seconds between changes.")] = 1.5,
    seed: Annotated[int, typer.Option(help="Random seed of the live simulation.")] = 7,
) -> None:
    """Run on an embedded, reproducible fleet (3 clusters on AWS, GCP and Azure; 14 pools;
    120+ nodes) with drift planted in every layer, including seed 000's incident
    (m5.large -> t3.medium changed in the cloud console)."""
    report = demo_mod.scan_demo()
    if once:
        _emit(report, output, verbose=False)
        raise typer.Exit(exit_code(report, FailOn.high))
    demo_mod.run_live(
        make_console(),
        report,
        steps=steps,
        interval=interval,
        seed=seed,
        json_lines=output is OutputFormat.json,
    )


deprecations_cmd.register(app)


watch_cmd.register(app)
serve_cmd.register(app)
audit_cmd.register(app)
approve_cmd.register(app)
fleet_cmd.register(app)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        _err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
