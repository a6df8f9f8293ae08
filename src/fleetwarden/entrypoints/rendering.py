r"""Output for people (rich tables) and machines (JSON) — one place, shared by commands.

Data is shown literally. A value (a label, a path, a cluster or actor name, a field value)
never reaches rich as markup — ``[red]x[/red]`` prints as typed, and ``:smile:`` stays text —
and never reaches the terminal as a control sequence: C0/C1 controls (ESC, CSI, ``\r``,
``\n``...), DEL and the bidirectional overrides are shown as escapes (``\x1b``) by
``visible``. Build everything printed from ``literal``/``line`` (``rich.text.Text``), not from
markup strings. A backslash in data is left as it is, so ``\x1b`` typed as four characters and
an escaped ESC look alike: the point is that nothing is interpreted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleetwarden.app.explaining import Explanation
from fleetwarden.core.describing import show_change, show_details, show_value
from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.fleet import FleetReport, Skip, UnresolvedFact
from fleetwarden.core.pools import FieldStatus

__all__ = [
    "PIPED_WIDTH",
    "SEVERITY_STYLE",
    "cell_text",
    "demo_intro",
    "dumps",
    "event_text",
    "findings_table",
    "json_safe",
    "line",
    "literal",
    "make_console",
    "print_explanation",
    "print_report",
    "print_skipped",
    "unresolved_summary",
    "unresolved_text",
    "visible",
]

PIPED_WIDTH = 200  # table width when piped and COLUMNS is not set

# C0 controls, DEL, C1 controls (U+009B is a one-character CSI), the line and paragraph
# separators and the bidirectional formatting characters (they reorder what is shown).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# what json.dumps leaves as is (it escapes C0 itself): same set, as JSON \u escapes
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    return _SHORT.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(value: object) -> str:
    """``str(value)`` with every control character shown as an escape, never emitted."""
    return _UNSAFE.sub(_escape, str(value))


def literal(value: object, style: str = "") -> Text:
    """A value as text for rich: no markup, no emoji codes, controls made visible."""
    return Text(visible(value), style=style)


def line(*parts: str | tuple[str, str]) -> Text:
    """One line from literal parts, each a string or ``(string, style)``."""
    out = Text()
    for part in parts:
        if isinstance(part, tuple):
            out.append(visible(part[0]), style=part[1])
        else:
            out.append(visible(part))
    return out


def make_console(*, stderr: bool = False) -> Console:
    """A console that stays wide when piped: COLUMNS when set, else ``PIPED_WIDTH`` (rich
    falls back to 80 columns otherwise). On a terminal, the terminal's width."""
    probe = Console(stderr=stderr)
    if probe.is_terminal:
        return probe
    columns = os.environ.get("COLUMNS", "").strip()
    width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
    return Console(stderr=stderr, width=width)


SEVERITY_STYLE = {
    Severity.CRITICAL: "bold white on red",
    Severity.HIGH: "bold red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
    Severity.INFO: "dim",
}


def dumps(value: Any) -> str:
    """Indented JSON, UTF-8 kept, but C1 controls and bidi overrides as ``\\u`` escapes (the
    same JSON value; a terminal showing it is not driven by it)."""
    return json_safe(json.dumps(value, indent=2, ensure_ascii=False))


def json_safe(text: str) -> str:
    """JSON text made by another encoder (C0 escaped, UTF-8 kept) with its C1 controls and
    bidi overrides as ``\\u`` escapes: they can only be inside strings, so it is the same
    JSON value, and a terminal showing it is not driven by it."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def cell_text(value: object) -> str:
    """A finding's expected/actual value in a table cell: ``—`` for nothing, else as people
    read it (``Unknown → Ready``, ``a, b``), never a Python repr."""
    return "—" if value is None else show_value(value)


def _cell(value: object) -> Text:
    return literal(cell_text(value))


def event_text(data: Mapping[str, Any], finding: Finding | None = None) -> str:
    """One line of the ``watch`` event log: time, type, and what happened — a finding as
    ``cluster/pool LAYER field: expected → actual``, a cluster event's details as
    ``Unknown → Healthy`` or ``key=value`` pairs."""
    if finding is not None:
        f = finding
        return (
            f"{data['at']} {data['type']:<16} {f.severity.value:<8} {f.cluster}/"
            f"{f.pool or '-'} {f.layer.value} {f.field}: {show_change(f.expected, f.actual)}"
        )
    rest = {k: v for k, v in data.items() if k not in ("type", "cluster", "at")}
    return f"{data['at']} {data['type']:<16} {data['cluster']} {show_details(rest)}"


def _nodes(nodes: Sequence[str], limit: int = 2) -> str:
    if not nodes:
        return ""
    shown = ", ".join(nodes[:limit])
    return f"{shown} (+{len(nodes) - limit})" if len(nodes) > limit else shown


def demo_intro(steps: int, interval: float) -> str:
    """What the live demo is about to do, as it will do it: a fixed number of changes, or
    changes until Ctrl-C (``steps`` 0)."""
    every = f"one every {interval:g} s"
    if steps == 0:
        return f"simulating changes, {every}, until Ctrl-C"
    return (
        f"simulating {steps} change{'' if steps == 1 else 's'}, {every}, then stopping "
        "(--steps 0: until Ctrl-C)"
    )


def findings_table(findings: Sequence[Finding], *, title: str | None = None) -> Table:
    table = Table(
        title=None if title is None else literal(title),
        show_lines=False,
        header_style="bold",
        expand=False,
    )
    for name in ("severity", "cluster", "pool", "layer", "field", "expected", "actual", "nodes"):
        table.add_column(name, overflow="fold")
    for f in findings:
        table.add_row(
            Text(f.severity.value, style=SEVERITY_STYLE[f.severity]),
            literal(f.cluster),
            literal(f.pool or "—"),
            literal(f.layer.value),
            literal(f.field),
            _cell(f.expected),
            _cell(f.actual),
            literal(_nodes(f.nodes)),
        )
    return table


def print_skipped(console: Console, skipped: Sequence[Skip], *, what: str = "files") -> None:
    """The short "skipped N files" section: every path with its reason, one per line."""
    if not skipped:
        return
    console.print(line((f"skipped {len(skipped)} {what}:", "bold yellow")), soft_wrap=True)
    for s in skipped:
        console.print(line("  ", s.path, ": ", (s.reason, "dim")), soft_wrap=True)


def unresolved_text(u: UnresolvedFact, *, source: bool = False) -> str:
    """One unresolved desired value: ``cluster/pool field = expression`` (and its file)."""
    text = f"{u.cluster or '(no cluster)'}/{u.pool} {u.field} = {u.expression}"
    return f"{text} ({u.source})" if source else text


def unresolved_summary(unresolved: Sequence[UnresolvedFact], *, shown: int = 3) -> str:
    """The line after a scan table: how many desired values were not checked because the
    source states them through a variable or an expression, and the first few of them."""
    n = len(unresolved)
    head = f"{n} desired value{'' if n == 1 else 's'} unresolved (not checked): "
    text = head + "; ".join(unresolved_text(u) for u in unresolved[:shown])
    if n > shown:
        text += f"; +{n - shown} more (--verbose or --format json lists them)"
    return text


def print_report(console: Console, report: FleetReport, *, verbose: bool = False) -> None:
    if report.findings:
        console.print(findings_table(report.findings))
    notes = dict.fromkeys(
        f"{f.cluster}/{f.pool or '-'} {f.field}: {f.message}" for f in report.findings if f.message
    )
    for note in notes:
        console.print(line((f"note: {note}", "dim")), soft_wrap=True)
    sev = report.by_severity()
    parts = [f"{n} {name}" for name, n in sev.items() if n]
    console.print(
        line(
            (f"{len(report.findings)} findings", "bold"),
            f" ({', '.join(parts) or 'none'}) in {report.clusters} clusters, "
            f"{report.pools} pools, {report.nodes} nodes",
        )
    )
    for s in report.skipped:  # files that could not be read are never silent
        if s.problem:
            console.print(line((f"could not read {s.path}: {s.reason}", "yellow")), soft_wrap=True)
    quiet = [s for s in report.skipped if not s.problem]
    if quiet:
        if verbose:
            for s in quiet:
                console.print(line((f"skipped {s.path}: {s.reason}", "dim")), soft_wrap=True)
        else:
            console.print(
                line(
                    (
                        f"{len(quiet)} skipped (files or pools); "
                        "--verbose or --format json lists them",
                        "dim",
                    )
                )
            )
    fields = report.fields
    if fields:
        text = (
            f"fields: {fields.get('compared', 0)} compared ({fields.get('defaults', 0)} "
            f"provisioner defaults), {fields.get('unresolved', 0)} unresolved, "
            f"{fields.get('ignored', 0)} ignored"
        )
        unknown = fields.get("unaccounted", 0)
        if unknown:
            text += f", {unknown} unknown to fleetwarden (not compared)"
        console.print(line((text + " — fleetwarden explain lists them", "dim")))
    if report.unresolved:
        console.print(line((unresolved_summary(report.unresolved), "dim")), soft_wrap=True)
        if verbose:
            for u in report.unresolved:
                console.print(line(("  " + unresolved_text(u, source=True), "dim")), soft_wrap=True)


_STATUS_STYLE = {
    FieldStatus.COMPARED: "green",
    FieldStatus.UNRESOLVED: "yellow",
    FieldStatus.IGNORED: "dim",
    FieldStatus.UNACCOUNTED: "bold red",
}


def print_explanation(console: Console, result: Explanation) -> None:
    """One table per pool: every attribute and what became of it. Values are data, shown
    literally (never as markup, controls made visible)."""
    for pool in result.pools:
        title = literal(
            f"{pool.name} (cluster {pool.cluster or 'not named'}) — {pool.source} "
            f"[{pool.source_format}]"
        )
        table = Table(title=title, header_style="bold", expand=False)
        for name in ("status", "attribute", "fact", "value / expression / reason", "from"):
            table.add_column(name, overflow="fold")
        for entry in pool.account:
            table.add_row(
                literal(entry.status.value, _STATUS_STYLE[entry.status]),
                literal(entry.path),
                literal(entry.fact or ""),
                literal(entry.detail),
                literal(entry.origin or ""),
            )
        console.print(table)
    counts = result.counts
    console.print(
        line(
            f"{len(result.pools)} pools: {counts.get('compared', 0)} fields compared "
            f"({counts.get('defaults', 0)} provisioner defaults), "
            f"{counts.get('unresolved', 0)} unresolved, {counts.get('ignored', 0)} ignored, "
            f"{counts.get('unaccounted', 0)} unknown to fleetwarden"
        )
    )
    if result.assumed:
        console.print(line((f"assumed: {result.assumed} (config scan.provisioners)", "dim")))
    for s in result.skipped:
        if s.problem:
            console.print(line((f"could not read {s.path}: {s.reason}", "yellow")), soft_wrap=True)
