"""``fleetwarden report``: the drift report of a window, read from the audit store.

The only I/O is the store's ``query`` (pages of finding and event records of the window,
newest first); ``core.reporting.drift_report`` does the counting.
"""

from __future__ import annotations

from datetime import datetime

from fleetwarden.core.audit.records import AuditKind, AuditRecord
from fleetwarden.core.reporting import Report, drift_report, parse_window
from fleetwarden.ports.audit import AuditStore

__all__ = ["PAGE", "build_report"]

PAGE = 1_000
_KINDS = (AuditKind.FINDING, AuditKind.EVENT)


async def build_report(
    store: AuditStore, *, since: str, now: datetime, cluster: str | None = None
) -> Report:
    """The report of the ``since`` window (``7d``, ``12h``, ``30m``) up to ``now``; a bad
    window raises ValueError naming ``--since``."""
    start = now - parse_window(since)
    records: list[AuditRecord] = []
    before: int | None = None
    while True:
        page = await store.query(kind=_KINDS, since=start, before_seq=before, limit=PAGE)
        records.extend(page)
        if len(page) < PAGE:
            break
        before = page[-1].seq
    records.reverse()  # oldest first: the order the findings happened in
    return drift_report(records, since=start, until=now, cluster=cluster)
