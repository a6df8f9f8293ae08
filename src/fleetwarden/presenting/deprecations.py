"""``fleetwarden deprecations`` for people: the table of APIs deprecated or removed at the
target, the counts, and the files skipped."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from fleetwarden.app.deprecating import Scan
from fleetwarden.core import deprecations
from fleetwarden.core.deprecations import Status
from fleetwarden.presenting.rendering import Col, Grid, line, literal, print_skipped

__all__ = ["print_deprecations"]

_STATUS_STYLE = {Status.REMOVED: "bold red", Status.DEPRECATED: "yellow"}


def _minor(version: deprecations.MinorVersion | None) -> str | None:
    return None if version is None else deprecations.format_minor(version)


def print_deprecations(console: Console, scan: Scan, *, wide: bool = False) -> None:
    target = deprecations.format_minor(scan.target)
    if scan.findings:
        # --wide: where each row of the table comes from (k8s.io/api@v0.37.2, pluto@...)
        origin = (Col("origin", 1),) if wide else ()
        table = Grid(
            Col("status", 10),
            Col("file", 6),
            Col("kind", 7),
            Col("name", 8),
            Col("apiVersion", 9),
            Col("deprecated", 2),
            Col("removed", 3),
            Col("replacement", 5),
            *origin,
            title=f"APIs deprecated or removed at {target}",
            wide=wide,
        )
        for f in scan.findings:
            api, status = f.finding.api, f.finding.status
            name = f.object.name or "—"
            row_origin = deprecations.row_origin(api)
            table.add_row(
                Text(status.value, style=_STATUS_STYLE[status]),
                literal(f.object.path),
                literal(f.object.kind),
                literal(f"{f.object.namespace}/{name}" if f.object.namespace else name),
                literal(f.object.api_version),
                literal(_minor(api.deprecated_in) or "—"),
                literal(_minor(api.removed_in) or "—"),
                literal(api.replacement or "—"),
                *((literal(row_origin.ref if row_origin else "—"),) if wide else ()),
            )
        console.print(table)
    removed, deprecated = scan.count(Status.REMOVED), scan.count(Status.DEPRECATED)
    console.print(
        line(
            f"{scan.objects} objects in {scan.files} files at Kubernetes {target}: "
            f"{removed} removed, {deprecated} deprecated"
        ),
        highlight=False,
    )
    print_skipped(console, scan.skipped)
