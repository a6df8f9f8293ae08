"""``fleetwarden scan`` and ``fleetwarden explain``: desired node pools against node dumps.

Parse the arguments, call ``app.scanning.run_scan`` (or ``app.explaining.run_explain``) over
the file adapter (``adapters.files``) and render. What only renders, explains or groups is
imported when used: a scan of a big dump starts its reader processes before that is loaded
(``run_scan`` starts them first), and those processes need none of it.
"""

from __future__ import annotations

from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from fleetwarden.adapters import files
from fleetwarden.app.scanning import ScanRequest, run_scan
from fleetwarden.cli.common import (
    FailOnOpt,
    FormatOpt,
    OutputFormat,
    WideOpt,
    config_option,
    err_console,
    exit_code,
    failing,
    load_settings_or_fail,
)
from fleetwarden.core.findings import Severity
from fleetwarden.core.fleet import NothingToCompare
from fleetwarden.formats.errors import FormatError

__all__ = ["GroupBy", "explain", "register", "scan"]


class GroupBy(StrEnum):
    """``scan --group-by``: ``cause`` groups findings by root cause (one incident each)."""

    cause = "cause"


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
    config_option(
        "YAML config: tolerance, pool labels, severity overrides, ignore rules, "
        "the provisioner releases to assume (scan.provisioners)."
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
    fail_on: FailOnOpt = Severity.HIGH,
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
    request = ScanRequest(desired, nodes, settings, allow_empty, jobs=jobs, progress=progress)
    with failing(FormatError, NothingToCompare):
        report = run_scan(request, files, progress=_dump_progress, terminal=_on_terminal)
    if group_by is None:
        from fleetwarden.presenting.json_text import emit_with  # rich only for a table

        as_json = output is OutputFormat.json
        printer = "rendering.print_report"
        emit_with(as_json, report.to_json, printer, report, wide=wide, verbose=verbose)
    else:  # the same grouping as /api/incidents
        from fleetwarden.presenting.incidents import emit_grouped

        emit_grouped(report, output.value, verbose=verbose, wide=wide)
    raise typer.Exit(exit_code(report.findings, fail_on))


def _dump_progress(total: int) -> Any:
    """A progress bar on stderr over ``total`` bytes of node dumps."""
    from fleetwarden.presenting.progress import dump_progress

    return dump_progress(err_console(), total)


def _on_terminal() -> bool:
    return err_console().is_terminal


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
        typer.Option(
            "--strict",
            help="Exit 1 when an attribute is unknown to fleetwarden, a file under the "
            "paths given could not be read, or a pool a file defines could not be.",
        ),
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
    from fleetwarden.app.explaining import run_explain
    from fleetwarden.presenting.json_text import emit
    from fleetwarden.presenting.rendering import print_explanation

    settings = load_settings_or_fail(config)
    with failing(FormatError, NothingToCompare):
        result = run_explain(
            files, desired, settings, pool=pool, cluster=cluster, allow_empty=allow_empty
        )
    show = partial(print_explanation, result=result, wide=wide)
    emit(output is OutputFormat.json, result.to_json, show, wide=wide)
    raise typer.Exit(1 if strict and (result.unaccounted or result.unreadable) else 0)


def register(app: typer.Typer) -> None:
    """Add ``scan`` and ``explain`` to the command line."""
    app.command("scan")(scan)
    app.command("explain")(explain)
