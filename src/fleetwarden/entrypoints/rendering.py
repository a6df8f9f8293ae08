"""Output for people (rich tables) and machines (JSON) — one place, shared by commands."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.fleet import FleetReport

__all__ = ["SEVERITY_STYLE", "dumps", "findings_table", "make_console", "print_report"]


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
    sev = report.by_severity()
    parts = [f"{n} {name}" for name, n in sev.items() if n]
    console.print(
        f"[bold]{len(report.findings)} findings[/] ({', '.join(parts) or 'none'}) in "
        f"{report.clusters} clusters, {report.pools} pools, {report.nodes} nodes"
    )
    if report.skipped:
        if verbose:
            for s in report.skipped:
                console.print(f"[dim]skipped {s.path}: {s.reason}[/]")
        else:
            console.print(
                f"[dim]{len(report.skipped)} skipped (files or pools); "
                "--verbose or --format json lists them[/]"
            )
    if report.unresolved:
        console.print(
            f"[dim]{len(report.unresolved)} desired values are unresolved "
            "(variables/expressions) and were not checked[/]"
        )
