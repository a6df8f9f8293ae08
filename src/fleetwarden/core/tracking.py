"""Which findings appeared, changed or cleared since last time — the same drift reported once.

Findings are keyed by their stable id; ``update`` replaces the findings of one scope (a pool of a
cluster, or a whole cluster) and returns the events, so re-diffing after a relist or a
reconnect emits nothing for drift that was already known.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.subjects import AppRef

__all__ = [
    "STICKY",
    "FindingEvent",
    "FindingEventType",
    "FindingTracker",
    "Scope",
    "ScopeKey",
    "app_scope",
]

ScopeKey = str | AppRef | None
"""What a scope covers within its cluster: a node pool's name (None: nodes of no desired
pool), one application's workloads (``AppRef``), or a named sweep (fights, orphans...)."""
Scope = tuple[str, ScopeKey]  # (cluster, what)
# what a live finding learns once (cause, actor, timeline, warn mode) and keeps while it lasts:
# a re-diff builds the finding afresh, without them
STICKY = ("cause", "actor", "startedAt", "detectedAt", "notifiedAt", "mode", "warn")


def app_scope(app: str) -> AppRef:
    """What the scope of one application's workload findings covers in a cluster: the scope
    is ``(cluster, app_scope(app))``."""
    return AppRef(app)


class FindingEventType(StrEnum):
    APPEARED = "finding.appeared"
    CHANGED = "finding.changed"
    CLEARED = "finding.cleared"


@dataclass(frozen=True, slots=True)
class FindingEvent:
    type: FindingEventType
    finding: Finding
    at: datetime
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type.value,
            "id": self.finding.id,
            "finding": self.finding.to_json(),
            "at": self.at.isoformat().replace("+00:00", "Z"),
        }
        if self.reason:
            out["reason"] = self.reason
        return out


class FindingTracker:
    """Current findings by scope. ``attribute`` (optional) names the cause of a new finding;
    the cause stays with the finding for as long as it lasts. ``counts()`` by severity is kept
    as scopes change (the cost of an update is the size of its scope, never of the fleet)."""

    def __init__(
        self, attribute: Callable[[Finding, datetime], dict[str, Any] | None] | None = None
    ) -> None:
        self._by_scope: dict[Scope, dict[str, Finding]] = {}
        self._attribute = attribute
        self._counts: Counter[Severity] = Counter()

    def current(self) -> list[Finding]:
        return [f for scope in self._by_scope.values() for f in scope.values()]

    def counts(self) -> Mapping[Severity, int]:
        """Current findings by severity (a severity with none may be absent)."""
        return self._counts

    def _count(self, findings: Iterable[Finding], sign: int) -> None:
        for f in findings:
            self._counts[f.severity] += sign

    def update(self, scope: Scope, findings: list[Finding], *, now: datetime) -> list[FindingEvent]:
        before = self._by_scope.get(scope, {})
        after = {}
        for f in findings:
            old = before.get(f.id)
            kept = {k: old.extra[k] for k in STICKY if old is not None and k in old.extra}
            cause = kept.get("cause")
            if cause is None and old is None and self._attribute is not None:
                cause = self._attribute(f, now)
                if cause is not None:
                    kept["cause"] = cause
            kept = {k: v for k, v in kept.items() if f.extra.get(k) is None}
            if kept:
                f = dataclasses.replace(f, extra={**f.extra, **kept})
            after[f.id] = f
        events = [
            FindingEvent(FindingEventType.CLEARED, f, now)
            for fid, f in before.items()
            if fid not in after
        ]
        for fid, f in after.items():
            old = before.get(fid)
            if old is None:
                events.append(FindingEvent(FindingEventType.APPEARED, f, now))
            elif old.nodes != f.nodes or old.severity != f.severity or old.actual != f.actual:
                events.append(FindingEvent(FindingEventType.CHANGED, f, now))
        self._count(before.values(), -1)
        self._count(after.values(), +1)
        if after:
            self._by_scope[scope] = after
        else:
            self._by_scope.pop(scope, None)
        return events

    def annotate(self, scope: Scope, finding_id: str, extra: Mapping[str, Any]) -> Finding | None:
        """Add ``extra`` (e.g. the actor and timeline) to a current finding; the updated
        finding, or None when the scope holds no such finding (it cleared meanwhile)."""
        current = self._by_scope.get(scope, {})
        f = current.get(finding_id)
        if f is None:
            return None
        f = dataclasses.replace(f, extra={**f.extra, **extra})
        current[finding_id] = f
        return f

    def findings_of(self, scope: Scope) -> list[Finding]:
        return list(self._by_scope.get(scope, {}).values())

    def scopes_of(self, cluster: str) -> list[Scope]:
        return [s for s in self._by_scope if s[0] == cluster]

    def drop_cluster(self, cluster: str, *, now: datetime, reason: str) -> list[FindingEvent]:
        events = []
        for scope in self.scopes_of(cluster):
            dropped = self._by_scope.pop(scope)
            self._count(dropped.values(), -1)
            for f in dropped.values():
                events.append(FindingEvent(FindingEventType.CLEARED, f, now, reason=reason))
        return events
