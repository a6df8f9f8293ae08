"""The drift report (``core.reporting.Report``) as tables: per pool, per cluster, per layer,
and the providers' delivery delay. Durations are shown as ``1h02m``; ``—`` where nothing was
measured."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console

from fleetwarden.core.reporting import Durations, Report, Tally
from fleetwarden.presenting.rendering import Col, Grid

__all__ = ["duration_text", "print_drift_report"]


def duration_text(seconds: float | None) -> str:
    """``42s``, ``5m07s``, ``3h02m``, ``2d04h``; ``—`` for None."""
    if seconds is None:
        return "—"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _figure(d: Durations) -> str:
    j = d.to_json()
    if not j["count"]:
        return "—"
    return f"{duration_text(j['p50Seconds'])} (n={j['count']})"


def _grid(
    title: str, heads: tuple[str, ...], rows: Iterable[tuple[tuple[str, ...], Tally]]
) -> Grid:
    grid = Grid(
        *(Col(h, 9) for h in heads),
        Col("opened", 8, justify="right"),
        Col("cleared", 8, justify="right"),
        Col("healed", 8, justify="right"),
        Col("MTTD p50", 7),
        Col("MTTR p50", 7),
        Col("MTTN p50", 3),
        title=title,
    )
    for names, t in rows:
        grid.add_row(
            *names,
            str(t.opened),
            str(t.cleared),
            str(t.healed),
            _figure(t.mttd),
            _figure(t.mttr),
            _figure(t.mttn),
        )
    return grid


def print_drift_report(console: Console, report: Report) -> None:
    since = report.since.isoformat(timespec="seconds").replace("+00:00", "Z")
    where = f", clusters {report.cluster}" if report.cluster else ""
    console.print(f"drift since {since}{where}: {report.records} finding records", highlight=False)
    if not report.records:
        console.print("no findings opened or cleared in this window", style="dim")
    else:
        pools = ((pair, t) for pair, t in sorted(report.pools.items()))
        console.print(_grid("per pool", ("cluster", "pool"), pools))
        clusters = (((c,), t) for c, t in sorted(report.clusters.items()))
        console.print(_grid("per cluster", ("cluster",), clusters))
        layers = (((k,), t) for k, t in sorted(report.layers.items()))
        console.print(_grid("per layer", ("layer",), [*layers, (("all",), report.total)]))
    if report.delivery:
        grid = Grid(
            Col("provider", 9),
            Col("events", 8, justify="right"),
            Col("p50", 7),
            Col("max", 6),
            title="provider delivery delay (event time -> received)",
        )
        for provider, d in sorted(report.delivery.items()):
            j = d.to_json()
            grid.add_row(
                provider,
                str(j["count"]),
                duration_text(j["p50Seconds"]),
                duration_text(j["maxSeconds"]),
            )
        console.print(grid)
