"""Joining live findings with the API server's audit log: who, with which client, from where.

A finding stamped from managedFields (``app.stamping``) names the field manager and the time
of the write. When the cluster has an audit log (``auditLog:`` / ``--audit-log``), the event
that wrote that node at that time (``core.actors.match_audit``) names the authenticated user,
its user agent and source IPs: the finding's actor becomes ``via: audit`` with the manager kept
(``actor.manager``). The tracker's copy is updated too, so later events and ``/api/findings``
carry it.

The API server writes an event when the request completes; the watch may deliver the change
first, and requests finish out of order. So when no event matches and the log has nothing
finished ``CAUGHT_UP`` after the write's second yet, the log is polled again every
``poll_interval`` for at most ``settle`` seconds (one wait per batch of findings, never per
finding). Not done: writes the audit policy does not log (no event: the
managedFields actor stays, with a reason), and findings named by a cloud event (stronger
evidence already).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from fleetwarden.app.stamping import current_decision
from fleetwarden.core.actors import ActorDecision, ChangedObject, Via, resolve
from fleetwarden.core.events import parse_time
from fleetwarden.core.findings import Finding
from fleetwarden.core.tracking import FindingEvent, FindingEventType, FindingTracker, Scope
from fleetwarden.ports.audit_logs import AuditLogSource

__all__ = ["join_audit", "joinable"]


def joinable(finding: Finding) -> ChangedObject | None:
    """The written object of a finding an audit event may name: its actor came from
    managedFields, with a start time and a node."""
    actor = finding.extra.get("actor")
    started = parse_time(finding.extra.get("startedAt"))
    if (
        not isinstance(actor, dict)
        or actor.get("via") != Via.MANAGED_FIELDS.value
        or started is None
        or not finding.nodes
    ):
        return None
    return ChangedObject(finding.cluster, "nodes", finding.nodes[0], started, finding.pool)


def _decision(finding: Finding, obj: ChangedObject) -> ActorDecision:
    current = current_decision(finding)
    assert current is not None  # joinable: via managedFields
    return dataclasses.replace(current, started_at=obj.at)


# Requests finish out of order: the API server writes a request's event after its response,
# and under load another request that finished later can be written first. So the log is
# "past" a write only once it holds an event finished this long after the write's second.
CAUGHT_UP = timedelta(seconds=3)


def _caught_up(log: AuditLogSource, at: datetime) -> bool:
    """The log holds an event finished well after ``at`` (a managedFields time: whole
    seconds): an event of the write at ``at`` would be in it by now."""
    latest = log.latest()
    return latest is not None and latest >= at + CAUGHT_UP


async def join_audit(
    tracker: FindingTracker,
    scope: Scope,
    events: Sequence[FindingEvent],
    log: AuditLogSource,
    *,
    settle: float = 3.0,
    poll_interval: float = 0.05,
    window: timedelta = timedelta(seconds=10),
) -> list[FindingEvent]:
    """``events`` with every appeared finding that an audit event explains re-stamped."""
    wanted = [
        (i, e, obj)
        for i, e in enumerate(events)
        if e.type is FindingEventType.APPEARED and (obj := joinable(e.finding)) is not None
    ]
    out = list(events)
    if not wanted:
        return out
    log.poll()
    latest = max(obj.at for _, _, obj in wanted)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settle
    pending = list(wanted)
    while pending:
        still = []
        for i, event, obj in pending:
            decision = resolve(
                obj,
                _decision(event.finding, obj),
                audit=log.about(obj.resource, obj.name, obj.namespace),
                audit_window=window,
            )
            if decision.actor is None or decision.actor.via is not Via.AUDIT:
                still.append((i, event, obj))
                continue
            updated = tracker.annotate(scope, event.finding.id, decision.to_json())
            finding = updated or dataclasses.replace(
                event.finding, extra={**event.finding.extra, **decision.to_json()}
            )
            out[i] = dataclasses.replace(event, finding=finding)
        pending = still
        if not pending or _caught_up(log, latest) or loop.time() >= deadline:
            break
        await asyncio.sleep(poll_interval)
        log.poll()
    return out
