"""``fleetwarden deprecations --live`` for people: per cluster, the deprecated APIs still
called, who calls them (user and user agent, from the audit log), and what could not be read."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from fleetwarden.app.live_deprecating import LiveReport
from fleetwarden.core.deprecations import Status, format_minor
from fleetwarden.presenting.rendering import Col, Grid, line, literal

__all__ = ["print_live_deprecations"]


def print_live_deprecations(console: Console, report: LiveReport, *, wide: bool = False) -> None:
    target = format_minor(report.target)
    if report.uses:
        table = Grid(
            Col("status", 10),
            Col("cluster", 6),
            Col("apiVersion", 9),
            Col("resource", 8),
            Col("removed", 4),
            Col("user", 5),
            Col("user agent", 3),
            Col("requests", 2),
            title=f"deprecated APIs called on live clusters (target {target})",
            wide=wide,
        )
        for u in report.uses:
            status = (
                Text("removed", style="bold red")
                if u.removed
                else Text("deprecated", style="yellow")
            )
            resource = (
                f"{u.api.resource}/{u.api.subresource}" if u.api.subresource else u.api.resource
            )
            removed_in = format_minor(u.removed_in) if u.removed_in else "—"
            for c in u.clients or (None,):
                table.add_row(
                    status,
                    literal(u.cluster),
                    literal(u.api.api_version),
                    literal(resource),
                    literal(removed_in),
                    literal(
                        c.user if c else "? (no audit log)" if "audit" not in u.source else "?"
                    ),
                    literal(c.user_agent if c else "—"),
                    literal(str(c.requests) if c else "—"),
                )
        console.print(table)
    removed, deprecated = report.count(Status.REMOVED), report.count(Status.DEPRECATED)
    console.print(
        line(
            f"{len(report.clusters)} clusters at Kubernetes {target}: {removed} APIs removed "
            f"there still called, {deprecated} deprecated"
        ),
        highlight=False,
    )
    for cluster, logs in sorted(report.audit.items()):
        if logs.bad or logs.partial or logs.errors:
            console.print(
                line(
                    (f"{cluster} audit log: ", "bold"),
                    f"{logs.bad} bad lines, {logs.partial} torn last lines; "
                    + "; ".join(logs.errors[:3]),
                ),
                highlight=False,
            )
    for cluster, error in sorted(report.errors.items()):
        console.print(line((f"{cluster}: not read: ", "bold red"), error), highlight=False)
