"""The drift report: MTTD, MTTR and counts per pool, cluster and layer, from audit records. Pure.

``fleetwarden report`` reads the audit store's ``finding`` and ``event`` records of a window
and hands them to ``drift_report``:

* **opened**: ``finding.appeared`` records; **cleared**: ``finding.cleared`` ones;
  **healed**: cleared ones that carry ``healedAt`` (the healer stamps it when a remediation
  it executed for that finding ended ok before the finding cleared);
* **MTTD** (time to detect): ``detectedAt - startedAt`` of each opened finding whose start is
  known (the write that caused it: managedFields, an audit entry or a cloud event);
* **MTTR** (time to restore): ``clearedAt - startedAt`` of each cleared finding, or
  ``clearedAt - detectedAt`` when the start is unknown (then counted as ``fromDetection``);
* **MTTN** (time to notify): ``notifiedAt - detectedAt`` where a notifier delivered it;
* the providers' **delivery delay**: an event's ``receivedAt - time`` (when the provider says
  it happened to when the gateway had it), per provider, apart from MTTD.

A finding recorded twice (two replicas, a restart) counts once per kind of record: records are
keyed by (finding id, event, the time the record names). Times are RFC 3339 text; a record
whose times do not parse adds to the counts and not to the durations.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any

from fleetwarden.core.audit.records import AuditKind, AuditRecord
from fleetwarden.core.events import ChangeEvent, parse_time
from fleetwarden.core.tracking import FindingEventType

__all__ = ["Durations", "Report", "Tally", "drift_report", "parse_window"]

_WINDOW = re.compile(r"([1-9][0-9]{0,5})([mhdw])")
_UNIT = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_MAX_WINDOW = timedelta(days=3650)
_APPEARED, _CLEARED = FindingEventType.APPEARED.value, FindingEventType.CLEARED.value


def parse_window(text: str, *, option: str = "--since") -> timedelta:
    """``30m``, ``12h``, ``7d``, ``2w`` as a timedelta; anything else (``7``, ``-1d``, ``1.5h``,
    ``7 d``, ``0d``) raises ValueError naming ``option``."""
    match = _WINDOW.fullmatch(text)
    window = timedelta(**{_UNIT[match.group(2)]: int(match.group(1))}) if match else None
    if window is None or window > _MAX_WINDOW:
        raise ValueError(
            f"{option} {text!r}: expected a whole number and a unit m, h, d or w "
            "(30m, 12h, 7d; at most 10 years)"
        )
    return window


@dataclass(slots=True)
class Durations:
    """Seconds measured for one figure; summarised as count, mean, median and max."""

    values: list[float] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.values.append(max(0.0, seconds))

    def to_json(self) -> dict[str, Any]:
        if not self.values:
            return {"count": 0, "meanSeconds": None, "p50Seconds": None, "maxSeconds": None}
        ordered = sorted(self.values)
        mid = len(ordered) // 2
        p50 = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        return {
            "count": len(ordered),
            "meanSeconds": round(math.fsum(ordered) / len(ordered), 3),
            "p50Seconds": round(p50, 3),
            "maxSeconds": round(ordered[-1], 3),
        }


@dataclass(slots=True)
class Tally:
    """Counts and durations of one group (a pool, a cluster, a layer, or everything)."""

    opened: int = 0
    cleared: int = 0
    healed: int = 0
    mttd: Durations = field(default_factory=Durations)
    mttr: Durations = field(default_factory=Durations)
    mttn: Durations = field(default_factory=Durations)
    from_detection: int = 0  # MTTR samples measured from detectedAt (start unknown)

    def to_json(self) -> dict[str, Any]:
        return {
            "opened": self.opened,
            "cleared": self.cleared,
            "healed": self.healed,
            "mttd": self.mttd.to_json(),
            "mttr": {**self.mttr.to_json(), "fromDetection": self.from_detection},
            "mttn": self.mttn.to_json(),
        }


@dataclass(slots=True)
class Report:
    since: datetime
    until: datetime
    cluster: str | None
    total: Tally = field(default_factory=Tally)
    pools: dict[tuple[str, str], Tally] = field(default_factory=dict)
    clusters: dict[str, Tally] = field(default_factory=dict)
    layers: dict[str, Tally] = field(default_factory=dict)
    delivery: dict[str, Durations] = field(default_factory=dict)  # by provider
    records: int = 0  # finding records read

    def to_json(self) -> dict[str, Any]:
        def stamp(t: datetime) -> str:
            return t.isoformat().replace("+00:00", "Z")

        return {
            "since": stamp(self.since),
            "until": stamp(self.until),
            "cluster": self.cluster,
            "total": self.total.to_json(),
            "pools": [
                {"cluster": c, "pool": p, **t.to_json()} for (c, p), t in sorted(self.pools.items())
            ],
            "clusters": [{"cluster": c, **t.to_json()} for c, t in sorted(self.clusters.items())],
            "layers": [{"layer": k, **t.to_json()} for k, t in sorted(self.layers.items())],
            "deliveryDelay": [
                {"provider": p, **d.to_json()} for p, d in sorted(self.delivery.items())
            ],
            "findingRecords": self.records,
        }


def _seconds(later: object, earlier: object) -> float | None:
    end, start = parse_time(later), parse_time(earlier)
    return None if end is None or start is None else (end - start).total_seconds()


def _tallies(report: Report, finding: Mapping[str, Any]) -> list[Tally]:
    cluster = str(finding.get("cluster") or "-")
    pool = str(finding.get("pool") or "-")
    layer = str(finding.get("layer") or "-")
    return [
        report.total,
        report.pools.setdefault((cluster, pool), Tally()),
        report.clusters.setdefault(cluster, Tally()),
        report.layers.setdefault(layer, Tally()),
    ]


def _finding(report: Report, record: AuditRecord, seen: set[tuple[str, str, str]]) -> None:
    payload = record.payload
    finding = payload.get("finding")
    event = payload.get("event")
    if not isinstance(finding, Mapping) or event not in (_APPEARED, _CLEARED):
        return
    if report.cluster is not None and not fnmatchcase(
        str(finding.get("cluster") or ""), report.cluster
    ):
        return
    when = finding.get("clearedAt") if event == _CLEARED else finding.get("detectedAt")
    key = (str(finding.get("id")), str(event), str(when or record.at.isoformat()))
    if key in seen:
        return
    seen.add(key)
    report.records += 1
    started, detected = finding.get("startedAt"), finding.get("detectedAt")
    tallies = _tallies(report, finding)
    if event == _APPEARED:
        detect = _seconds(detected, started)
        for tally in tallies:
            tally.opened += 1
            if detect is not None:
                tally.mttd.add(detect)
        return
    healed = bool(finding.get("healedAt"))
    notify = _seconds(finding.get("notifiedAt"), detected)
    restore = _seconds(finding.get("clearedAt"), started)
    from_detection = restore is None
    if from_detection:
        restore = _seconds(finding.get("clearedAt"), detected)
    for tally in tallies:
        tally.cleared += 1
        tally.healed += healed
        if notify is not None:
            tally.mttn.add(notify)
        if restore is not None:
            tally.mttr.add(restore)
            tally.from_detection += from_detection


def _event(report: Report, record: AuditRecord) -> None:
    raw = record.payload.get("event")
    if not isinstance(raw, Mapping):
        return
    if report.cluster is not None and not fnmatchcase(record.cluster or "", report.cluster):
        return
    try:
        event = ChangeEvent.from_json(raw)
    except (KeyError, TypeError, ValueError):
        return  # a record this version cannot read adds nothing to the delays
    delay = event.delivery_delay
    if delay is not None:
        report.delivery.setdefault(event.provider.value, Durations()).add(delay)


def drift_report(
    records: Iterable[AuditRecord], *, since: datetime, until: datetime, cluster: str | None = None
) -> Report:
    """The report over ``records`` stored in [since, until) (others are skipped); ``cluster``
    a glob over cluster names (None: every cluster)."""
    report = Report(since, until, cluster)
    seen: set[tuple[str, str, str]] = set()
    for record in records:
        if not since <= record.at < until:
            continue
        if record.kind is AuditKind.FINDING:
            _finding(report, record, seen)
        elif record.kind is AuditKind.EVENT:
            _event(report, record)
    return report
