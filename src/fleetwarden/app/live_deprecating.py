"""``fleetwarden deprecations --live``: which clients still call APIs removed at the target.

Every cluster at once (one task each, each bounded by ``timeout``): its ``/metrics`` read and
the gauge ``apiserver_requested_deprecated_apis`` taken from it (the whole text is checked by
``formats.prometheus_text``: a page that is not the exposition format is that cluster's
error, never a guess), its audit log read where one is configured, and the two joined by
``core.live_deprecations.collect``. A cluster that cannot be read is an ``error`` of the
report (the others are still reported); its audit log alone still names clients when the
metrics fail. The manifest path of ``deprecations`` is ``app.deprecating``; nothing here
touches it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from fleetwarden.core.deprecations import DeprecationTable, MinorVersion, Status, format_minor
from fleetwarden.core.live_deprecations import ApiRef, LiveUse, collect
from fleetwarden.formats import manifests
from fleetwarden.formats.audit_log import AuditLogs
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.prometheus_text import samples_named
from fleetwarden.ports.kube import KubeError
from fleetwarden.ports.live_apis import LiveApiSources

__all__ = ["METRIC", "LiveReport", "find_live_deprecations", "metric_uses"]

METRIC = "apiserver_requested_deprecated_apis"


@dataclass
class LiveReport:
    target: MinorVersion
    uses: list[LiveUse] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # cluster -> why it was not read
    audit: dict[str, AuditLogs] = field(default_factory=dict)

    def count(self, status: Status) -> int:
        removed = status is Status.REMOVED
        return sum(1 for u in self.uses if u.removed == removed)

    def failing(self, threshold: Status) -> bool:
        return any(u.removed or threshold is Status.DEPRECATED for u in self.uses)

    @property
    def nothing_read(self) -> bool:
        return bool(self.clusters) and len(self.errors) == len(self.clusters) and not self.audit

    def to_json(self) -> dict[str, Any]:
        return {
            "target": format_minor(self.target),
            "live": [u.to_json() for u in self.uses],
            "clusters": self.clusters,
            "errors": [{"cluster": c, "error": e} for c, e in sorted(self.errors.items())],
            "auditLogs": {c: a.to_json() for c, a in sorted(self.audit.items())},
        }


def metric_uses(text: str, *, path: str) -> list[tuple[ApiRef, str]]:
    """The gauge's samples set to a non-zero value, as (api, removed_release)."""
    out = []
    for s in samples_named(text, METRIC, path=path):
        if s.value != 0:
            ref = ApiRef(
                s.label("group"), s.label("version"), s.label("resource"), s.label("subresource")
            )
            out.append((ref, s.label("removed_release")))
    return out


async def _one(
    sources: LiveApiSources, cluster: str, target: MinorVersion, report: LiveReport, timeout: float
) -> None:
    metrics: list[tuple[ApiRef, str]] = []
    try:
        async with asyncio.timeout(timeout):
            text = await sources.metrics(cluster)
        metrics = metric_uses(text, path=f"{cluster} /metrics")
    except TimeoutError:
        report.errors[cluster] = f"/metrics: no answer in {timeout:g} s"
    except (KubeError, FormatError) as exc:
        report.errors[cluster] = str(exc)
    try:
        logs = await asyncio.to_thread(sources.audit, cluster)
    except OSError as exc:
        report.errors[cluster] = f"audit log: {exc}"
        logs = None
    if logs is not None:
        report.audit[cluster] = logs
    report.uses.extend(collect(cluster, metrics, logs.events if logs else (), target))


async def find_live_deprecations(
    sources: LiveApiSources, target: MinorVersion, *, timeout: float = 20.0
) -> LiveReport:
    """Every cluster of ``sources`` read (concurrently) and joined, each use with the bundled
    table's row of its API when there is one (its ``origin``); uses sorted removed first,
    then by cluster and API."""
    report = LiveReport(target, clusters=list(sources.clusters))
    async with asyncio.TaskGroup() as tg:
        for cluster in report.clusters:
            tg.create_task(_one(sources, cluster, target, report, timeout), name=f"live:{cluster}")
    table = _bundled_table()
    if table is not None:  # each use's table row, for its origin
        report.uses = [_with_row(u, table) for u in report.uses]
    report.uses.sort(key=lambda u: (not u.removed, u.cluster, u.api))
    return report


def _bundled_table() -> DeprecationTable | None:
    try:
        return DeprecationTable(manifests.bundled_table())
    except FormatError:  # a broken install: the uses are still reported, without origins
        return None


def _with_row(use: LiveUse, table: DeprecationTable) -> LiveUse:
    row = table.lookup_resource(use.api.api_version, use.api.resource)
    return use if row is None else dataclasses.replace(use, row=row)
