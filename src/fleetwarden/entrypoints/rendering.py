"""Output for people (rich tables) and machines (JSON) — one place, shared by commands."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleetwarden.app.explaining import Explanation
from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.fleet import FleetReport
from fleetwarden.core.pools import FieldStatus

__all__ = [
    "SEVERITY_STYLE",
    "dumps",
    "findings_table",
    "make_console",
    "print_explanation",
    "print_report",
]


def make_console(*, stderr: bool = False) -> Console:
    """A console that stays wide when piped (rich falls back to 80 columns otherwise)."""
    probe = Console(stderr=stderr)
    return probe if probe.is_terminal else Console(stderr=stderr, width=200)


SEVERITY_STYLE = {
    Severity.CRITICAL: "bold white on red",
    Severity.HIGH: "bold red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
    Severity.INFO: "dim",
}


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _cell(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _nodes(nodes: Sequence[str], limit: int = 2) -> str:
    if not nodes:
        return ""
    shown = ", ".join(nodes[:limit])
    return f"{shown} (+{len(nodes) - limit})" if len(nodes) > limit else shown


def findings_table(findings: Sequence[Finding], *, title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False, header_style="bold", expand=False)
    for name in ("severity", "cluster", "pool", "layer", "field", "expected", "actual", "nodes"):
        table.add_column(name, overflow="fold")
    for f in findings:
        table.add_row(
            Text(f.severity.value, style=SEVERITY_STYLE[f.severity]),
            f.cluster,
            f.pool or "—",
            f.layer.value,
            f.field,
            _cell(f.expected),
            _cell(f.actual),
            _nodes(f.nodes),
        )
    return table


def print_report(console: Console, report: FleetReport, *, verbose: bool = False) -> None:
    if report.findings:
        console.print(findings_table(report.findings))
    notes = dict.fromkeys(
        f"{f.cluster}/{f.pool or '-'} {f.field}: {f.message}" for f in report.findings if f.message
    )
    for note in notes:
        console.print(Text(f"note: {note}", style="dim"))
    sev = report.by_severity()
    parts = [f"{n} {name}" for name, n in sev.items() if n]
    console.print(
        f"[bold]{len(report.findings)} findings[/] ({', '.join(parts) or 'none'}) in "
        f"{report.clusters} clusters, {report.pools} pools, {report.nodes} nodes"
    )
    problems = [s for s in report.skipped if s.problem]
    for s in problems:  # files that could not be read are never silent
        console.print(Text(f"could not read {s.path}: {s.reason}", style="yellow"))
    quiet = [s for s in report.skipped if not s.problem]
    if quiet:
        if verbose:
            for s in quiet:
                console.print(Text(f"skipped {s.path}: {s.reason}", style="dim"))
        else:
            console.print(
                f"[dim]{len(quiet)} skipped (files or pools); "
                "--verbose or --format json lists them[/]"
            )
    fields = report.fields
    if fields:
        line = (
            f"fields: {fields.get('compared', 0)} compared ({fields.get('defaults', 0)} "
            f"provisioner defaults), {fields.get('unresolved', 0)} unresolved, "
            f"{fields.get('ignored', 0)} ignored"
        )
        unknown = fields.get("unaccounted", 0)
        if unknown:
            line += f", {unknown} unknown to fleetwarden (not compared)"
        console.print(Text(line + " — fleetwarden explain lists them", style="dim"))
    if report.unresolved:
        console.print(
            f"[dim]{len(report.unresolved)} desired values are unresolved "
            "(variables/expressions) and were not checked[/]"
        )


_STATUS_STYLE = {
    FieldStatus.COMPARED: "green",
    FieldStatus.UNRESOLVED: "yellow",
    FieldStatus.IGNORED: "dim",
    FieldStatus.UNACCOUNTED: "bold red",
}


def print_explanation(console: Console, result: Explanation) -> None:
    """One table per pool: every attribute and what became of it. Values are data, shown
    literally (never as markup)."""
    for pool in result.pools:
        title = Text(
            f"{pool.name} (cluster {pool.cluster or 'not named'}) — {pool.source} "
            f"[{pool.source_format}]"
        )
        table = Table(title=title, header_style="bold", expand=False)
        for name in ("status", "attribute", "fact", "value / expression / reason", "from"):
            table.add_column(name, overflow="fold")
        for entry in pool.account:
            table.add_row(
                Text(entry.status.value, style=_STATUS_STYLE[entry.status]),
                Text(entry.path),
                Text(entry.fact or ""),
                Text(entry.detail),
                Text(entry.origin or ""),
            )
        console.print(table)
    counts = result.counts
    console.print(
        Text(
            f"{len(result.pools)} pools: {counts.get('compared', 0)} fields compared "
            f"({counts.get('defaults', 0)} provisioner defaults), "
            f"{counts.get('unresolved', 0)} unresolved, {counts.get('ignored', 0)} ignored, "
            f"{counts.get('unaccounted', 0)} unknown to fleetwarden"
        )
    )
    if result.assumed:
        console.print(Text(f"assumed: {result.assumed} (config scan.provisioners)", style="dim"))
    for s in result.skipped:
        if s.problem:
            console.print(Text(f"could not read {s.path}: {s.reason}", style="yellow"))
