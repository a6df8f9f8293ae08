"""Stamping a live finding with who changed it and when: ``actor``, ``startedAt``, ``detectedAt``.

When a Node update makes a finding appear, the watcher knows the object's managedFields before
and after the write: ``core.actors.actor_from_managed_fields`` names the field manager that
wrote the finding's field and the time of that write (``startedAt``); ``detectedAt`` is when
the watcher saw it; a cleared finding's last event adds ``clearedAt``. After a relist (no
previous object) the newest owner of the field is the actor. A finding about a fact no single
write sets (kubelet version, counts) gets ``detectedAt`` only.

When a notifier has delivered a finding's first firing message, ``stamp_notified`` adds
``notifiedAt`` (the delivery's end) to the tracker's finding -- kept while the finding lasts,
so its later events and audit records carry it -- and ``notified_draft`` is its audit note.

The stamp is stored on the tracker's finding (``FindingTracker.annotate``), so later events of
the same finding (changed, cleared) and ``/api/findings`` carry it too. Pure apart from that.

A cloud event arrives 1-15 minutes after the watch saw its change: ``refine_open`` asks
``core.actors.refine`` whether it names the open findings' actor better (a provider principal
over the provider's own agent, ``kubelet``, or over no actor at all) and returns a
``finding.changed`` for each finding whose actor it replaced. Only actors read from
managedFields (or none) are refined: a finding already named by a cloud event stays as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from fleetwarden.core.actors import (
    Actor,
    ActorDecision,
    ActorKind,
    ChangedObject,
    Via,
    actor_from_managed_fields,
    finding_field_path,
    parse_managed_fields,
    refine,
)
from fleetwarden.core.audit import AuditDraft, AuditKind
from fleetwarden.core.events import ChangeEvent, parse_time
from fleetwarden.core.findings import Finding
from fleetwarden.core.incidents import Cause, Incident, group_incidents
from fleetwarden.core.tracking import FindingEvent, FindingEventType, FindingTracker, Scope

__all__ = [
    "ManagedFields",
    "cause_of",
    "current_decision",
    "decide_actor",
    "group_by_cause",
    "notified_draft",
    "refine_open",
    "rfc3339",
    "stamp",
    "stamp_events",
    "stamp_notified",
    "timeline_seconds",
    "writable_fields",
]

# a node's raw ``metadata.managedFields`` as the API server returned it
ManagedFields = Sequence[Mapping[str, Any]]


def rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def decide_actor(
    finding: Finding, after: ManagedFields | None, before: ManagedFields | None
) -> ActorDecision | None:
    """The actor of ``finding`` from one node's managedFields (``before`` None: not known).
    None when the finding's field is not one a write sets, or the entries do not parse."""
    path = finding_field_path(finding.field)
    if path is None or after is None:
        return None
    try:
        parsed_after = parse_managed_fields(after)
        parsed_before = parse_managed_fields(before) if before is not None else None
    except ValueError:
        return None  # malformed managedFields name no one; the finding stands without an actor
    return actor_from_managed_fields(parsed_after, path, before=parsed_before)


def stamp(
    finding: Finding,
    detected_at: datetime,
    *,
    managed: Callable[[str], ManagedFields | None],
    changed: tuple[str, ManagedFields | None] | None = None,
) -> dict[str, Any]:
    """The keys a new live finding gains. ``changed``: the node of this watch event and its
    managedFields before the write; ``managed(node)``: a node's managedFields now."""
    out: dict[str, Any] = {"detectedAt": rfc3339(detected_at)}
    decision = None
    if changed is not None and changed[0] in finding.nodes:
        decision = decide_actor(finding, managed(changed[0]), changed[1])
    elif finding.nodes:
        decision = decide_actor(finding, managed(finding.nodes[0]), None)
    if decision is not None:
        out.update(decision.to_json())
    return out


def stamp_events(
    tracker: FindingTracker,
    scope: Scope,
    events: Sequence[FindingEvent],
    *,
    managed: Callable[[str], ManagedFields | None],
    changed: tuple[str, ManagedFields | None] | None = None,
) -> list[FindingEvent]:
    """Every appeared finding of ``events`` stamped (and the tracker's copy with it)."""
    out: list[FindingEvent] = []
    for event in events:
        if event.type is FindingEventType.APPEARED:
            extra = stamp(event.finding, event.at, managed=managed, changed=changed)
            finding = tracker.annotate(scope, event.finding.id, extra)
            if finding is not None:
                event = dataclasses.replace(event, finding=finding)
        elif event.type is FindingEventType.CLEARED:
            f = event.finding
            cleared = dataclasses.replace(f, extra={**f.extra, "clearedAt": rfc3339(event.at)})
            event = dataclasses.replace(event, finding=cleared)
        out.append(event)
    return out


def timeline_seconds(event: FindingEvent) -> tuple[str, float] | None:
    """What a finding event tells the MTTD/MTTR histograms: ``("detect", detectedAt -
    startedAt)`` when a stamped finding appears, ``("restore", cleared - startedAt)`` when one
    with a known start clears; None otherwise (no start known: nothing to measure)."""
    started = parse_time(event.finding.extra.get("startedAt"))
    if started is None:
        return None
    if event.type is FindingEventType.APPEARED:
        detected = parse_time(event.finding.extra.get("detectedAt")) or event.at
        return "detect", max(0.0, (detected - started).total_seconds())
    if event.type is FindingEventType.CLEARED:
        return "restore", max(0.0, (event.at - started).total_seconds())
    return None


def current_decision(finding: Finding) -> ActorDecision | None:
    """The decision a stamped finding carries, rebuilt from its JSON keys; None when its
    actor came from stronger evidence than managedFields (nothing left to refine)."""
    raw = finding.extra.get("actor")
    started = parse_time(finding.extra.get("startedAt"))
    if raw is None:
        return ActorDecision(None, started, ())
    if not isinstance(raw, Mapping) or raw.get("via") != Via.MANAGED_FIELDS.value:
        return None
    name = str(raw.get("name") or "")
    try:
        kind = ActorKind(str(raw.get("kind")))
    except ValueError:
        kind = ActorKind.UNKNOWN
    return ActorDecision(Actor(name, kind, Via.MANAGED_FIELDS), started, (), manager=name)


def refine_open(
    tracker: FindingTracker, scope: Scope, event: ChangeEvent, *, now: datetime
) -> list[FindingEvent]:
    """The open findings of ``scope`` whose actor the late ``event`` replaces: each updated
    in the tracker and returned as a ``finding.changed`` (the reason names the event)."""
    out: list[FindingEvent] = []
    for finding in tracker.findings_of(scope):
        current = current_decision(finding)
        if current is None:
            continue
        at = current.started_at or parse_time(finding.extra.get("detectedAt")) or now
        changed = ChangedObject(
            finding.cluster, "nodes", finding.nodes[0] if finding.nodes else "", at, finding.pool
        )
        new = refine(current, changed, cloud=(event,))
        if new is None:
            continue
        updated = tracker.annotate(scope, finding.id, new.to_json())
        if updated is not None:
            reason = f"actor refined by {event.source} event {event.id}: " + "; ".join(
                new.reasons[-1:]
            )
            out.append(FindingEvent(FindingEventType.CHANGED, updated, now, reason=reason))
    return out


def _actor(raw: object) -> Actor | None:
    if not isinstance(raw, Mapping) or not raw.get("name"):
        return None
    try:
        return Actor(str(raw["name"]), ActorKind(str(raw.get("kind"))), Via(str(raw.get("via"))))
    except ValueError:
        return None


def cause_of(finding: Finding) -> Cause:
    """What a stamped finding says of its origin, for ``core.incidents.group_incidents``."""
    return Cause(
        finding,
        actor=_actor(finding.extra.get("actor")),
        started_at=parse_time(finding.extra.get("startedAt")),
        source=finding.source or None,
    )


def group_by_cause(findings: Iterable[Finding]) -> list[Incident]:
    """The findings as incidents, ranked (``core.incidents``): ``/api/incidents`` and
    ``scan --group-by cause`` both group this way."""
    return group_incidents(cause_of(f) for f in findings)


def stamp_notified(
    tracker: FindingTracker, findings: Iterable[Finding], at: datetime
) -> list[Finding]:
    """Each current finding of ``findings`` not yet stamped gains ``notifiedAt`` = ``at``; the
    findings stamped now (one already stamped, or cleared meanwhile, is left out)."""
    out: list[Finding] = []
    for f in findings:
        scopes = [(f.cluster, f.pool), *tracker.scopes_of(f.cluster)]
        for scope in scopes:
            current = next((x for x in tracker.findings_of(scope) if x.id == f.id), None)
            if current is None:
                continue
            if "notifiedAt" not in current.extra:
                stamped = tracker.annotate(scope, f.id, {"notifiedAt": rfc3339(at)})
                out.extend([stamped] if stamped is not None else [])
            break
    return out


def notified_draft(finding: Finding, sink: str) -> AuditDraft:
    """The audit note of a finding's first delivery (keyed: appended once per firing)."""
    at = finding.extra.get("notifiedAt")
    return AuditDraft(
        kind=AuditKind.NOTE,
        key=f"notified:{finding.id}:{finding.extra.get('detectedAt') or at}",
        summary=f"notified via {sink}: {finding.cluster}/{finding.pool or '-'} {finding.field}",
        cluster=finding.cluster,
        pool=finding.pool,
        refs=(),
        payload={"notified": {"finding": finding.id, "sink": sink, "notifiedAt": at}},
    )


def writable_fields(meta: object) -> list[Mapping[str, Any]]:
    """A node's managedFields entries that can own labels, taints or ``unschedulable``: the
    ``status`` subresource's (the kubelet's heartbeats, conditions, images: most of the bytes)
    never do, so they are neither kept per node nor read for a writer."""
    managed = meta.get("managedFields") if isinstance(meta, Mapping) else None
    if not isinstance(managed, list):
        return []
    return [e for e in managed if isinstance(e, Mapping) and e.get("subresource") != "status"]
