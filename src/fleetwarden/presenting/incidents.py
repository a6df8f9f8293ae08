"""Findings grouped into incidents (``core.incidents``) for ``scan --group-by cause``: the
scan's JSON with an ``incidents`` array added (the findings array unchanged), and a ranked
table of incidents under the findings table."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console

from fleetwarden.app.stamping import group_by_cause
from fleetwarden.core.findings import Finding
from fleetwarden.core.fleet import FleetReport
from fleetwarden.core.incidents import Incident
from fleetwarden.presenting.rendering import Col, Grid, dumps, make_console, print_report
from fleetwarden.presenting.reporting import duration_text

__all__ = [
    "emit_grouped",
    "grouped_json",
    "incidents_json",
    "incidents_table",
    "show_grouped",
]


def incidents_json(findings: Sequence[Finding], now: datetime) -> list[dict[str, object]]:
    """``GET /api/incidents``: the findings grouped by the cause the watcher stamped on each."""
    return [i.to_json(now) for i in group_by_cause(findings)]


def grouped_json(
    report: FleetReport, incidents: Sequence[Incident], now: datetime
) -> dict[str, Any]:
    return {**report.to_json(), "incidents": [i.to_json(now) for i in incidents]}


def incidents_table(incidents: Sequence[Incident], now: datetime, *, wide: bool = False) -> Grid:
    grid = Grid(
        Col("#", 9, justify="right"),
        Col("root cause", 10),
        Col("findings", 8, justify="right"),
        Col("nodes", 8, justify="right"),
        Col("clusters", 7),
        Col("pools", 3),
        Col("age", 4),
        Col("id", 1),
        title=f"{len(incidents)} incidents, by blast radius (nodes, clusters) then age",
        wide=wide,
    )
    for rank, i in enumerate(incidents, 1):
        grid.add_row(
            str(rank),
            i.root_cause,
            str(len(i.findings)),
            str(i.nodes),
            list(i.clusters),
            sorted({f"{f.cluster}/{f.pool or '-'}" for f in i.findings}),
            duration_text(i.age(now)),
            i.id,
        )
    return grid


def show_grouped(
    console: Console,
    report: FleetReport,
    incidents: Sequence[Incident],
    output: str,
    *,
    verbose: bool = False,
    wide: bool = False,
    now: datetime | None = None,
) -> None:
    """``output`` ``json``: the scan's JSON with ``incidents`` added, on the console's file;
    else the findings table and the incidents table."""
    now = now or datetime.now(UTC)
    if output == "json":
        console.file.write(dumps(grouped_json(report, incidents, now)) + "\n")
        return
    print_report(console, report, verbose=verbose, wide=wide)
    if incidents:
        console.print(incidents_table(incidents, now, wide=wide))


def emit_grouped(
    report: FleetReport, output: str, *, verbose: bool = False, wide: bool = False
) -> None:
    """``scan --group-by cause``: the report's findings grouped as ``/api/incidents`` groups
    them, shown (``show_grouped``) on a console as wide as the terminal (``--wide``: wider)."""
    console = make_console(wide=wide)
    incidents = group_by_cause(report.findings)
    show_grouped(console, report, incidents, output, verbose=verbose, wide=wide)
