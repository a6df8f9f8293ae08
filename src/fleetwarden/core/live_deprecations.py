"""Deprecated APIs still called on live clusters, and by whom. Pure.

Two sources per cluster, as the API server reports them:

* its metric ``apiserver_requested_deprecated_apis{group,version,resource,subresource,
  removed_release}`` (a gauge set to 1 for every deprecated API requested since the server
  started; ``removed_release`` empty when no removal is planned). It says *what* is called,
  not by whom.
* its audit log, where configured: every request to a deprecated version carries the
  annotations ``k8s.io/deprecated: "true"`` and, when planned, ``k8s.io/removed-release:
  "1.37"``, beside ``user.username`` and ``userAgent``: *who* calls it.

``collect`` joins them by (group, version, resource, subresource): one ``LiveUse`` per API,
with the clients (user and user agent, request count, last time) the audit log names, and
whether it is removed at or before the target (``removed``); ``row``, the deprecation table's
row of the API when the caller matched one (``DeprecationTable.lookup_resource``), gives the
JSON its ``origin``. An API known only from the audit
log (the server restarted since: its gauge is gone) is still listed; one known only from the
metric has no clients (``source: metrics``). Each request is counted once (one event per
``auditID``, whatever the policy's stages).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleetwarden.core.actors import AuditEvent
from fleetwarden.core.deprecations import (
    DeprecatedApi,
    MinorVersion,
    format_minor,
    parse_minor,
    row_origin,
)

__all__ = ["ApiRef", "Client", "LiveUse", "collect"]

DEPRECATED = "k8s.io/deprecated"
REMOVED_RELEASE = "k8s.io/removed-release"


@dataclass(frozen=True, slots=True, order=True)
class ApiRef:
    """One API as the metric labels it (``group`` "" is the core group)."""

    group: str
    version: str
    resource: str
    subresource: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True, slots=True)
class Client:
    user: str
    user_agent: str
    requests: int
    last_seen: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "userAgent": self.user_agent,
            "requests": self.requests,
            "lastSeen": self.last_seen.isoformat().replace("+00:00", "Z"),
        }


@dataclass(frozen=True, slots=True)
class LiveUse:
    cluster: str
    api: ApiRef
    removed_in: MinorVersion | None
    removed: bool  # gone at the target version
    source: str  # "metrics" | "audit" | "metrics+audit"
    clients: tuple[Client, ...] = field(default=())
    row: DeprecatedApi | None = None  # the table's row for this API, when it has one

    @property
    def origin(self) -> dict[str, Any] | None:
        """Where the matched table row comes from (``RowOrigin``); None without a row."""
        origin = row_origin(self.row) if self.row is not None else None
        return None if origin is None else origin.to_json()

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "group": self.api.group,
            "version": self.api.version,
            "apiVersion": self.api.api_version,
            "resource": self.api.resource,
            "subresource": self.api.subresource,
            "removedIn": format_minor(self.removed_in) if self.removed_in else None,
            "removed": self.removed,
            "source": self.source,
            "clients": [c.to_json() for c in self.clients],
            "origin": self.origin,
        }


def _ref(event: AuditEvent) -> ApiRef:
    return ApiRef(event.api_group, event.api_version, event.resource, event.subresource)


def collect(
    cluster: str,
    metrics: Iterable[tuple[ApiRef, str]],
    audit: Iterable[AuditEvent],
    target: MinorVersion,
) -> list[LiveUse]:
    """The deprecated APIs ``cluster`` serves to someone: ``metrics`` as (api,
    removed_release) pairs of the gauge's samples, ``audit`` its audit events (any; those
    without the deprecation annotation are ignored). Sorted: removed first, then by API."""
    removed_at: dict[ApiRef, str] = {}
    sources: dict[ApiRef, set[str]] = {}
    for ref, release in metrics:
        removed_at[ref] = removed_at.get(ref) or release
        sources.setdefault(ref, set()).add("metrics")
    seen: set[str] = set()
    clients: dict[ApiRef, dict[tuple[str, str], tuple[int, datetime]]] = {}
    for e in audit:
        if e.annotation(DEPRECATED) != "true" or e.id in seen or e.cluster != cluster:
            continue
        seen.add(e.id)
        ref = _ref(e)
        removed_at[ref] = removed_at.get(ref) or (e.annotation(REMOVED_RELEASE) or "")
        sources.setdefault(ref, set()).add("audit")
        by = clients.setdefault(ref, {})
        n, last = by.get((e.user, e.user_agent), (0, e.at))
        by[(e.user, e.user_agent)] = (n + 1, max(last, e.at))
    out = []
    for ref, kinds in sources.items():
        removed_in = parse_minor(removed_at.get(ref, ""))
        named = sorted(
            (Client(u, a, n, last) for (u, a), (n, last) in clients.get(ref, {}).items()),
            key=lambda c: (-c.requests, c.user, c.user_agent),
        )
        out.append(
            LiveUse(
                cluster,
                ref,
                removed_in,
                removed_in is not None and removed_in <= target,
                "+".join(k for k in ("metrics", "audit") if k in kinds),
                tuple(named),
            )
        )
    return sorted(out, key=lambda u: (not u.removed, u.api))
