"""Workloads for people: ``fleet versions``' image matrix, ``fleet diff``'s drift and the
gate's verdict, with the files skipped on the way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.text import Text

from fleetwarden.app.fleet import AppDrift, by_severity
from fleetwarden.core import workloads as wl
from fleetwarden.core.desired_apps import DesiredState
from fleetwarden.core.findings import Finding
from fleetwarden.core.fleet import severity_order
from fleetwarden.core.schedulability import GateResult
from fleetwarden.presenting.rendering import (
    SEVERITY_COL,
    SEVERITY_STYLE,
    Col,
    Grid,
    cell_text,
    line,
    literal,
    print_skipped,
)

__all__ = [
    "print_drift",
    "print_gate",
    "print_gate_blocked",
    "print_skipped_state",
    "print_versions",
    "workload_findings_table",
]

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


def print_versions(
    console: Console, doc: Mapping[str, Any], state: DesiredState, *, wide: bool = False
) -> None:
    """``fleet versions``: the cluster x container matrix (or one row per container when
    there are many), the summary, the files skipped."""
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


def print_drift(
    console: Console,
    app: str,
    drift: AppDrift,
    state: DesiredState,
    *,
    verbose: bool = False,
    wide: bool = False,
) -> None:
    """``fleet diff``: the findings, a one-line count by severity, the files skipped."""
    if drift.findings:
        console.print(workload_findings_table(drift.findings, title=f"drift of {app}", wide=wide))
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


def print_gate(console: Console, result: GateResult, *, wide: bool = False) -> None:
    """The gate's findings (a blocking one's reason given once, below), notes, verdict."""
    if result.findings:
        # a blocking finding's message is its reason, given once below
        rows = [replace(f, message="") if f.id in result.blocking else f for f in result.findings]
        console.print(workload_findings_table(sorted(rows, key=severity_order), wide=wide))
    for note in result.notes:
        console.print(line((f"note: {note}", "dim")), highlight=False)
    if result.blocked:
        n = len(result.reasons)
        why = f"{n} reason" if n == 1 else f"{n} reasons"
        console.print(
            line(("gate: BLOCK", "bold red"), f" sync of {result.app} ({why}):"), highlight=False
        )
        for reason in result.reasons:
            console.print(line(f"  - {reason}"), highlight=False)
    else:
        targets = sorted({t for c in result.checks for p in c.placements for t in p.targets})
        console.print(
            line(
                ("gate: PASS", "bold green"),
                f" {result.app}: every workload schedules; target pools "
                f"({', '.join(targets) or 'none'}) show no drift at or above the threshold",
            ),
            highlight=False,
        )


def print_skipped_state(console: Console, state: DesiredState, *, verbose: bool) -> None:
    """Files not read or not parsed, always; the other skipped files with ``verbose``."""
    print_skipped(console, state.unreadable, what="files (not read or not parsed)")
    if verbose:
        unreadable = {s.path for s in state.unreadable}
        for s in state.skipped:
            if s.path not in unreadable:
                console.print(line((f"skipped {s.path}: {s.reason}", "dim")), soft_wrap=True)


def workload_findings_table(
    findings: Sequence[Finding], *, title: str | None = None, wide: bool = False
) -> Grid:
    table = Grid(
        SEVERITY_COL,
        Col("cluster", 5),
        Col("object", 6),
        Col("field", 9),
        Col("expected", 7),
        Col("actual", 8),
        Col("note", 2),
        title=title,
        wide=wide,
    )
    for f in findings:
        table.add_row(
            Text(f.severity.value, style=SEVERITY_STYLE[f.severity]),
            literal(f.cluster),
            literal(f.pool or "—"),
            literal(f.field),
            literal(cell_text(f.expected)),
            literal(cell_text(f.actual)),
            literal(f.message),
        )
    return table


def print_gate_blocked(console: Console, app: str, result: GateResult) -> None:
    """One line for people on stderr when JSON went to stdout: the first reason, and how many
    more (the table says it already)."""
    first = result.reasons[0] if result.reasons else ""
    more = f" (+{len(result.reasons) - 1} more)" if len(result.reasons) > 1 else ""
    console.print(
        line(f"fleetwarden gate: blocked sync of {app}: {first}{more}"),
        highlight=False,
        soft_wrap=True,
    )
