r"""Output for people (rich tables) and machines (JSON) — one place, shared by commands.

Data is shown literally. A value (a label, a path, a cluster or actor name, a field value)
never reaches rich as markup — ``[red]x[/red]`` prints as typed, and ``:smile:`` stays text —
and never reaches the terminal as a control sequence: C0/C1 controls (ESC, CSI, ``\r``,
``\n``...), DEL and the bidirectional overrides are shown as escapes (``\x1b``) by
``visible``. Build everything printed from ``literal``/``line`` (``rich.text.Text``), not from
markup strings. A backslash in data is left as it is, so ``\x1b`` typed as four characters and
an escaped ESC look alike: the point is that nothing is interpreted.

Tables are ``Grid``s: each declares its columns (``Col``) with a priority and, where there is
one, a short form; the grid is laid out when it is printed, for the width it is given, by the
pure ``table_layout.plan`` (no word split, columns that do not fit dropped or abbreviated and
named under the table, ``--wide`` for every column). This module only measures and prints.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from fleetwarden.app.explaining import Explanation
from fleetwarden.core.describing import show_change, show_details, show_value
from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.fleet import FleetReport, UnresolvedFact
from fleetwarden.core.integers import ascii_int
from fleetwarden.core.pools import FieldStatus
from fleetwarden.core.skips import Skip
from fleetwarden.presenting import table_layout
from fleetwarden.presenting.json_text import dumps, json_safe
from fleetwarden.presenting.table_layout import Fit

__all__ = [
    "MIN_WIDTH",
    "PIPED_WIDTH",
    "SEVERITY_COL",
    "SEVERITY_SHORT",
    "SEVERITY_STYLE",
    "Col",
    "Grid",
    "cell_text",
    "demo_intro",
    "dumps",
    "emit_report",
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

PIPED_WIDTH = 200  # width when no terminal is attached at all and COLUMNS is not set
MIN_WIDTH = 20  # narrower than this (COLUMNS=5) is taken as this

# C0 controls, DEL, C1 controls (U+009B is a one-character CSI), the line and paragraph
# separators and the bidirectional formatting characters (they reorder what is shown).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


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


def make_console(*, stderr: bool = False, wide: bool = False) -> Console:
    """A console as wide as the terminal the user looks at.

    ``COLUMNS`` when set (a terminal's own width otherwise: rich reads both). When the output
    is piped (``| less``, ``| grep``), the width of the terminal still attached to stderr or
    stdin: an exported ``COLUMNS`` is not needed for ``fleetwarden scan | less`` to fit. With
    no terminal at all (CI logs, files), ``PIPED_WIDTH``: nothing to fit, so every column is
    kept. ``wide`` (``--wide``): lines are never wrapped nor cropped by the console, a table
    laid out wider than the terminal is printed whole.
    """
    probe = Console(stderr=stderr)
    width: int | None = None
    columns = ascii_int(os.environ.get("COLUMNS", "").strip(), max_digits=6)
    if columns:
        width = columns
    elif not probe.is_terminal:
        width = _attached_terminal_width() or PIPED_WIDTH
    if width is not None:
        width = max(width, MIN_WIDTH)
    return Console(stderr=stderr, width=width, soft_wrap=wide)


def _attached_terminal_width() -> int | None:
    for stream in (sys.stderr, sys.stdin):
        try:
            if stream is not None and stream.isatty():
                return os.get_terminal_size(stream.fileno()).columns or None
        except (OSError, ValueError):  # replaced streams (tests), closed descriptors
            continue
    return None


SEVERITY_STYLE = {
    Severity.CRITICAL: "bold white on red",
    Severity.HIGH: "bold red",
    Severity.MEDIUM: "yellow",
    Severity.LOW: "cyan",
    Severity.INFO: "dim",
}


SEVERITY_SHORT = {"critical": "crit", "medium": "med"}  # high, low and info are short


Cell = Text | str | Sequence[str]  # a list (of nodes, refs...) is shown "a, b +3 more"
_GAP = 3  # between two columns: padding, the (blank) rule, padding
_ELLIPSIS = "…"


@dataclass(frozen=True)
class Col:
    """One column of a ``Grid``: its header, how much it matters (a higher ``priority`` is
    kept longer) and, optionally, short forms of its values (``short``) and of its header
    (``short_header``, without which the column cannot get narrower than its header) used when
    the columns do not fit."""

    header: str
    priority: int
    short: Mapping[str, str] | None = None
    short_header: str | None = None
    justify: Literal["left", "right"] = "left"


class Grid:
    """A table laid out at print time for the width it is printed at (see ``table_layout``).

    Cells are ``Text`` (shown literally, styles kept), strings (made ``literal``), or lists of
    strings (shown in full with ``wide``, else as many items as fit on one line and
    ``+N more``). Under the table, a dim note says what is not shown: the value of a dropped
    column that is the same in every row, the columns dropped, and that ``--wide`` shows all.
    """

    def __init__(self, *columns: Col, title: str | None = None, wide: bool = False) -> None:
        self.columns = columns
        self.title = title
        self.wide = wide
        self.rows: list[tuple[Text | list[str], ...]] = []

    def add_row(self, *cells: Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(
            tuple(
                c if isinstance(c, Text) else literal(c) if isinstance(c, str) else [*c]
                for c in cells
            )
        )

    def layout(self, width: int) -> table_layout.Plan:
        return table_layout.plan(
            [self._need(i) for i in range(len(self.columns))],
            width,
            gap=_GAP,
            wide=self.wide,
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        if self.title is not None:
            yield from _wrapped(literal(self.title, "table.title"), width)
        plan = self.layout(width)
        table = Table(
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            padding=(0, 1),
            header_style="bold",
            expand=False,
        )
        for placed in plan.shown:
            col = self.columns[placed.index]
            header = col.header
            if placed.fit is Fit.SHORT and col.short_header:
                header = col.short_header
            table.add_column(
                _fitted(Text(header), placed),
                width=placed.width,
                justify=col.justify,
                overflow="fold",
            )
        for row in self.rows:
            table.add_row(*(_fitted(self._shown(row, p), p) for p in plan.shown))
        yield from console.render(table, options.update(width=plan.width))
        note = self._note(plan)
        if note:
            yield from _wrapped(Text(note, style="dim"), width)

    def _need(self, index: int) -> table_layout.Need:
        col = self.columns[index]
        cells = [row[index] for row in self.rows]
        texts = [self._full(c) for c in cells]
        lines = col.header.split("\n")
        for cell, text in zip(cells, texts, strict=True):
            # a list is shown shortened unless wide: two items and "+N more" at most
            lines += [_listed(cell, 2)] if isinstance(cell, list) and not self.wide else [text]
        natural = max(cell_len(x) for text in lines for x in text.split("\n"))
        word = max([_longest(col.header)] + [_longest(t) for t in texts], default=1)
        short = None
        if col.short_header:  # short values alone cannot narrow a column past its header
            short = max(
                [_longest(col.short_header)] + [_longest(self._abbreviated(c, col)) for c in cells]
            )
            short = min(max(short, 1), max(word, 1))
        constant = len(self.rows) > 1 and len(set(texts)) == 1
        word = max(word, 1)
        return table_layout.Need(col.priority, max(natural, word), word, short, constant)

    @staticmethod
    def _full(cell: Text | list[str]) -> str:
        return ", ".join(visible(x) for x in cell) if isinstance(cell, list) else cell.plain

    @staticmethod
    def _abbreviated(cell: Text | list[str], col: Col) -> str:
        text = Grid._full(cell)
        return (col.short or {}).get(text, text)

    def _shown(self, row: tuple[Text | list[str], ...], placed: table_layout.Placed) -> Text:
        cell = row[placed.index]
        col = self.columns[placed.index]
        if isinstance(cell, list):
            if self.wide:
                return Text(", ".join(visible(x) for x in cell))
            return Text(_listed_to_fit(cell, placed.width))
        if placed.fit is Fit.SHORT and col.short and cell.plain in col.short:
            return Text(col.short[cell.plain], style=cell.style)
        return cell

    def _note(self, plan: table_layout.Plan) -> str:
        if not plan.dropped and all(p.fit is Fit.FULL for p in plan.shown):
            return ""
        parts = []
        same = [i for i in plan.dropped if len(self.rows) > 1 and self._need(i).constant]
        if same:
            parts.append(
                "every row: "
                + "; ".join(
                    f"{self.columns[i].header.replace(chr(10), ' ')} "
                    f"{self._full(self.rows[0][i]) or '—'}"
                    for i in same
                )
            )
        other = [i for i in plan.dropped if i not in same]
        if other:
            names = ", ".join(self.columns[i].header.replace("\n", " ") for i in other)
            parts.append(f"not shown: {names}")
        if any(p.fit is Fit.TRUNCATED for p in plan.shown):
            parts.append(f"long words cut ({_ELLIPSIS})")
        return "; ".join(parts) + " (--wide shows every column in full)"


def _longest(text: str) -> int:
    return table_layout.longest_piece(text, cell_len)


def _listed(items: Sequence[str], shown: int) -> str:
    head = ", ".join(visible(x) for x in items[:shown])
    return head if len(items) <= shown else f"{head} +{len(items) - shown} more"


def _listed_to_fit(items: Sequence[str], width: int) -> str:
    """As many items as fit on one line of ``width``, then ``+N more`` (one item at least)."""
    best = _listed(items, 1)
    for shown in range(2, len(items) + 1):
        text = _listed(items, shown)
        if cell_len(text) > width:
            break
        best = text
    return best


def _fitted(text: Text, placed: table_layout.Placed) -> Text:
    """``text`` broken into lines of the column's width between words (styles kept); a word
    longer than the width is cut with an ellipsis only when the plan truncates the column."""
    plain = text.plain
    lines: list[Text] = []
    for a, b in table_layout.wrap(plain, placed.width, cell_len):
        piece = text[a:b]
        lines.append(_cut(piece, placed.width))
    return Text("\n", style=text.style).join(lines) if lines else text


def _wrapped(text: Text, width: int) -> Iterator[Text]:
    for a, b in table_layout.wrap(text.plain, width, cell_len):
        yield _cut(text[a:b], width)


def _cut(piece: Text, width: int) -> Text:
    """``piece`` as it is when it fits, else cut to ``width`` cells ending in ``…``. (rich's
    own ellipsis pads a double-width character that no longer fits with a space, which left
    ``界 …``: the cut word no longer ended in the ellipsis.)"""
    if cell_len(piece.plain) <= width:
        return piece
    used, keep = 0, 0
    for ch in piece.plain:
        if used + cell_len(ch) > width - 1:
            break
        used += cell_len(ch)
        keep += 1
    cut = piece[:keep]
    cut.append("…")
    return cut


def cell_text(value: object) -> str:
    """A finding's expected/actual value in a table cell: ``—`` for nothing, else as people
    read it (``Unknown → Ready``, ``a, b``), never a Python repr."""
    return "—" if value is None else show_value(value)


def _cell(value: object) -> Text | list[str]:
    if isinstance(value, list):  # a list wraps between items (or shows "+N more")
        return [show_value(v) for v in value]
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


SEVERITY_COL = Col("severity", 10, short=SEVERITY_SHORT, short_header="sev")


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


def findings_table(
    findings: Sequence[Finding], *, title: str | None = None, wide: bool = False
) -> Grid:
    """Node-pool findings (scan, watch, demo). At 80 columns the layer and the node list go
    first; severity, field, actual and expected stay."""
    table = Grid(
        SEVERITY_COL,
        Col("cluster", 5),
        Col("pool", 6),
        Col("layer", 2),
        Col("field", 9),
        Col("expected", 7),
        Col("actual", 8),
        Col("nodes", 3),
        title=title,
        wide=wide,
    )
    for f in findings:
        table.add_row(
            Text(f.severity.value, style=SEVERITY_STYLE[f.severity]),
            literal(f.cluster),
            literal(f.pool or "—"),
            literal(f.layer.value),
            literal(f.field),
            _cell(f.expected),
            _cell(f.actual),
            list(f.nodes),
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
    """One unresolved desired value: ``cluster/pool field = expression``, the field followed by
    the attribute it was read from when that is another name (and, with ``source``, the file)."""
    field = u.field if u.attribute in (None, u.field) else f"{u.field} ({u.attribute})"
    text = f"{u.cluster or '(no cluster)'}/{u.pool} {field} = {u.expression}"
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


def emit_report(
    report: FleetReport, as_json: bool, *, verbose: bool = False, wide: bool = False
) -> None:
    """A pool report as JSON (the contract's shape, on stdout) or as tables for people."""
    if as_json:
        sys.stdout.write(dumps(report.to_json()) + "\n")
    else:
        print_report(make_console(wide=wide), report, verbose=verbose, wide=wide)


def print_report(
    console: Console, report: FleetReport, *, verbose: bool = False, wide: bool = False
) -> None:
    if report.findings:
        console.print(findings_table(report.findings, wide=wide))
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
    for s in report.skipped:  # unread files and uncompared pools are never silent
        if s.problem:
            console.print(line((f"could not read {s.path}: {s.reason}", "yellow")), soft_wrap=True)
        elif s.pool is not None:
            console.print(line((f"not compared ({s.path}): {s.reason}", "yellow")), soft_wrap=True)
    quiet = [s for s in report.skipped if not s.shown]
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


def print_explanation(console: Console, result: Explanation, *, wide: bool = False) -> None:
    """One table per pool: every attribute and what became of it. Values are data, shown
    literally (never as markup, controls made visible)."""
    for pool in result.pools:
        title = (
            f"{pool.name} (cluster {pool.cluster or 'not named'}) — {pool.source} "
            f"[{pool.source_format}]"
        )
        if pool.unknown_name is not None:
            title += f" — not compared: its name is not known ({pool.unknown_name})"
        elif result.not_compared(pool) is not None:
            defined = len(result.twice[(pool.cluster or "", pool.name)])
            title += f" — not compared: defined {defined} times in its cluster (below)"
        table = Grid(
            Col("status", 10),
            Col("attribute", 9),
            Col("fact", 4),
            Col("value / expression / reason", 8),
            Col("from", 3),
            title=title,
            wide=wide,
        )
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
    uncompared = f" ({result.uncompared} not compared, not counted)" if result.uncompared else ""
    console.print(
        line(
            f"{len(result.pools)} pools{uncompared}: {counts.get('compared', 0)} fields compared "
            f"({counts.get('defaults', 0)} provisioner defaults), "
            f"{counts.get('unresolved', 0)} unresolved, {counts.get('ignored', 0)} ignored, "
            f"{counts.get('unaccounted', 0)} unknown to fleetwarden"
        )
    )
    if result.assumed:
        console.print(line((f"assumed: {result.assumed} (config scan.provisioners)", "dim")))
    said = dict.fromkeys(  # one line per name defined twice, not one per definition
        why for p in result.pools if p.unknown_name is None and (why := result.not_compared(p))
    )
    for why in said:
        console.print(line((f"not compared: {why}", "yellow")), soft_wrap=True)
    for s in result.skipped:
        if s.problem:
            console.print(line((f"could not read {s.path}: {s.reason}", "yellow")), soft_wrap=True)
        elif s.pool is not None:
            console.print(line((f"not read ({s.path}): {s.reason}", "yellow")), soft_wrap=True)
