"""``fleetwarden report --since 7d [--cluster GLOB] [-o table|json]``: MTTD, MTTR and counts
of drift per pool, cluster and layer, read from the audit store (``app.reporting``)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from fleetwarden.cli.common import FormatOpt, OutputFormat, config_option, failing

__all__ = ["register"]

_STORE = "The audit store, as for `audit`: sqlite:///PATH or postgresql://USER@HOST/DB."
_CFG = "fleetwarden serve's config: its `store` key names the store."


def report(
    since: Annotated[str, typer.Option(metavar="AGE", help="Window: 30m, 12h, 7d.")],
    cluster: Annotated[
        str | None, typer.Option(metavar="GLOB", help="Only these clusters.")
    ] = None,
    store: Annotated[str | None, typer.Option("--store", "-s", metavar="URL", help=_STORE)] = None,
    config: Annotated[Path | None, config_option(_CFG)] = None,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Time to detect, restore and notify, and findings opened, cleared and healed."""
    from fleetwarden.app.reporting import build_report
    from fleetwarden.core.reporting import parse_window
    from fleetwarden.ports.audit import AuditStoreError
    from fleetwarden.presenting.json_text import emit
    from fleetwarden.presenting.reporting import print_drift_report
    from fleetwarden.wiring.auditing import store_url, with_store

    now = datetime.now(UTC)
    with failing(ValueError, AuditStoreError):
        parse_window(since)  # a bad --since is said before any store is opened
        url = store_url(store, config)
        result = with_store(url, lambda s: build_report(s, since=since, now=now, cluster=cluster))
    emit(output is OutputFormat.json, result.to_json, partial(print_drift_report, report=result))


def register(app: typer.Typer) -> None:
    app.command("report")(report)
