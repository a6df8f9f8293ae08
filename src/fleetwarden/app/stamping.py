"""Stamping a live finding with who changed it and when: ``actor``, ``startedAt``, ``detectedAt``.

When a Node update makes a finding appear, the watcher knows the object's managedFields before
and after the write: ``core.actors.actor_from_managed_fields`` names the field manager that wrote
the finding's field and the time of that write (``startedAt``); ``detectedAt`` is when the
watcher saw it. After a relist (no previous object) the newest owner of the field is the actor.
A finding about a fact no single write sets (kubelet version, counts) gets ``detectedAt`` only.

The stamp is stored on the tracker's finding (``FindingTracker.annotate``), so later events of
the same finding (changed, cleared) and ``/api/findings`` carry it too. Pure apart from that.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from fleetwarden.core.actors import (
    ActorDecision,
    actor_from_managed_fields,
    finding_field_path,
    parse_managed_fields,
)
from fleetwarden.core.findings import Finding
from fleetwarden.core.tracking import FindingEvent, FindingEventType, FindingTracker, Scope

__all__ = ["ManagedFields", "decide_actor", "rfc3339", "stamp", "stamp_events"]

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
        out.append(event)
    return out
