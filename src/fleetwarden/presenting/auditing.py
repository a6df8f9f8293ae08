"""``fleetwarden audit`` for people: the records table, the verdict of ``verify``, the line
that sums up an export."""

from __future__ import annotations

from rich.console import Console

from fleetwarden.app.healing import record_summary
from fleetwarden.core.audit import AuditRecord, VerifyResult
from fleetwarden.presenting.rendering import Col, Grid, line, literal

__all__ = ["print_export", "print_records", "print_verify", "records_table"]


def print_verify(console: Console, result: VerifyResult) -> None:
    """The chain's verdict: one line when intact; the first bad record and what came before."""
    if result.ok:
        console.print(literal(result.summary()), highlight=False, soft_wrap=True)
        return
    console.print(literal(result.summary(), "bold red"), highlight=False, soft_wrap=True)
    console.print(
        line(
            f"{result.checked} records verified before it (last good: seq "
            f"{result.last_seq}, hash {result.last_hash})"
        ),
        highlight=False,
        soft_wrap=True,
    )


def records_table(found: list[AuditRecord], *, wide: bool = False) -> Grid:
    table = Grid(
        Col("seq", 9, justify="right"),
        Col("at", 8),
        Col("kind", 7),
        Col("cluster", 5),
        Col("pool", 4),
        Col("actor", 3),
        Col("summary", 10),
        Col("refs", 1),
        Col("id", 2),
        wide=wide,
    )
    for r in found:
        table.add_row(
            literal(r.seq),
            literal(r.at_text[:19].replace("T", " ") + "Z"),
            literal(r.kind.value),
            literal(r.cluster or "—"),
            literal(r.pool or "—"),
            literal(r.actor or "—"),
            literal(record_summary(r)),
            list(r.refs) or "—",
            literal(r.id),
        )
    return table


def print_records(console: Console, found: list[AuditRecord], *, wide: bool = False) -> None:
    """The records found, as a table, or a line saying that none match."""
    if not found:
        console.print("no audit records match", highlight=False)
        return
    console.print(records_table(found, wide=wide))


def print_export(console: Console, count: int, first: int, last: int, where: str) -> None:
    """``exported N records (seq A..B) to FILE``, one line."""
    span = f" (seq {first}..{last})" if count else ""
    where = f" to {where}" if where else ""
    console.print(line(f"exported {count} records{span}{where}"), highlight=False, soft_wrap=True)
