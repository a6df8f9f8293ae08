"""The audit records of healing: a decision, its actions and a cancellation as drafts, and a
stored decision record read back (``recorded_decision``) or summed up for people
(``record_summary``). Pure functions over core values; ``app/healing.py`` appends them."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from fleetwarden.core.audit import AuditDraft, AuditKind, AuditRecord
from fleetwarden.core.describing import decision_summary
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.core.policy import Decision, Policy, Status
from fleetwarden.core.policy.warning import warned
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.audit import AuditStore

__all__ = [
    "RESTORE_PAGE",
    "action_drafts",
    "cancellation_draft",
    "decision_draft",
    "record_summary",
    "recorded_decision",
    "records_since",
    "warned_event",
]

RESTORE_PAGE = 10_000  # audit records per query while restoring (each page re-reads the span)


def warned_event(event: FindingEvent, ownership: OwnershipMap, policy: Policy) -> FindingEvent:
    """A finding the policy's ``warn`` rules cover gains ``mode: warn`` and ``warn: {field,
    owner}`` (its audit record and its notifications say it is only reported)."""
    if not policy.warn or event.type is FindingEventType.CLEARED:
        return event
    f = event.finding
    warn = warned(f, ownership.route(f), policy.warn)
    if warn is None:
        return event
    extra = {**f.extra, "mode": "warn", "warn": warn.to_json()}
    return dataclasses.replace(event, finding=dataclasses.replace(f, extra=extra))


def record_summary(rec: AuditRecord) -> str:
    """An audit record's summary for people (``audit query``'s table). A decision record is
    summarised from its decision (what it did, or the guard that stopped it), so records
    written before the stored summary said so read the same; any other record, or one that
    cannot be read, has the summary it was stored with (JSON output keeps that one)."""
    if rec.kind == AuditKind.DECISION:
        try:
            decision = recorded_decision(rec)
        except (ValueError, TypeError, KeyError):
            decision = None  # an old or foreign payload: the summary it was stored with
        if decision is not None:
            return decision_summary(decision)
    return rec.summary


def recorded_decision(rec: AuditRecord) -> Decision | None:
    """The decision an audit record carries: a decision record's (``decision_draft``), an
    approval note's result (``Healer.approve``) or a cancellation note's
    (``cancellation_draft``); None for any other record. Raises
    ValueError (``MalformedDecision``, or a payload that is not JSON) when it cannot be read.
    """
    if rec.kind == AuditKind.DECISION:
        return Decision.from_json(rec.payload.get("decision"))
    if rec.kind == AuditKind.NOTE and "approval" in rec.payload:
        return Decision.from_json(rec.payload["approval"])
    if rec.kind == AuditKind.NOTE and "cancellation" in rec.payload:
        return Decision.from_json(rec.payload["cancellation"])
    return None


def cancellation_draft(decision: Decision) -> AuditDraft:
    """A request cancelled: one note per request, whoever cancels it and however often."""
    return AuditDraft(
        kind=AuditKind.NOTE,
        key=f"cancel:{decision.id}",
        summary=f"cancelled ({decision.guard.value if decision.guard else 'stale'}): "
        f"{decision.action.value} — {decision.reasons[-1]}",
        cluster=decision.cluster,
        pool=decision.pool,
        refs=(decision.id,),
        payload={"cancellation": decision.to_json()},
    )


def action_drafts(decision: Decision, outcome: Any) -> list[AuditDraft]:
    """The call (sent, or only intended in dry-run) and how it ended, linked to the decision."""
    sent = decision.status is Status.EXECUTE
    action_id = f"act-{decision.id}"
    calls = [c.to_json() for c in getattr(outcome, "calls", ())]
    return [
        AuditDraft(
            kind=AuditKind.ACTION,
            id=action_id,
            key=f"action:{decision.id}",
            summary=f"{decision.action.value} {'sent' if sent else 'intended (dry-run)'}",
            cluster=decision.cluster,
            pool=decision.pool,
            refs=(decision.id,),
            payload={"dryRun": not sent, "calls": calls},
        ),
        AuditDraft(
            kind=AuditKind.OUTCOME,
            key=f"outcome:{decision.id}",
            summary=f"{outcome.status.value}: {decision.action.value}",
            cluster=decision.cluster,
            pool=decision.pool,
            refs=(action_id,),
            payload={"outcome": outcome.to_json()},
        ),
    ]


def decision_draft(
    decision: Decision,
    finding_record: str | None,
    cluster: str | None,
    pool: str | None,
    cause: dict[str, Any] | None = None,
    *,
    fencing_token: int | None = None,
) -> AuditDraft:
    """The decision, with the change event its finding was attributed to (``cause``: its
    actor is the record's, so ``/api/decisions?actor=`` and ``audit query`` find it)."""
    refs = tuple(r for r in (finding_record,) if r)
    payload: dict[str, Any] = {"decision": decision.to_json()}
    if fencing_token is not None:  # the leadership term it was decided in
        payload["leaseTerm"] = fencing_token
    if cause:
        payload["cause"] = cause
    actor = cause.get("actor") if cause else None
    return AuditDraft(
        kind=AuditKind.DECISION,
        id=decision.id,
        summary=decision_summary(decision),
        cluster=cluster or decision.cluster,
        pool=pool or decision.pool,
        actor=actor if isinstance(actor, str) else None,
        refs=refs,
        payload=payload,
        key=f"decision:{decision.id}",
    )


async def records_since(
    store: AuditStore, since: datetime, *, upto: int | None = None
) -> list[AuditRecord]:
    """The decision records and notes stored at or after ``since`` (and at or before seq
    ``upto``, when given), oldest first.

    ``query`` answers newest first and pages backwards by ``seq``. The bound is the store's
    time of the record (written after the decision, by the same clock), so the replay span
    is read whatever the size of the log: through the ``(kind, at)`` index in SQLite
    (migration 0002), the ``at`` index in PostgreSQL.
    """
    kinds = (AuditKind.DECISION, AuditKind.NOTE)
    out: list[AuditRecord] = []
    before: int | None = None if upto is None else upto + 1
    while True:
        page = await store.query(kind=kinds, since=since, before_seq=before, limit=RESTORE_PAGE)
        out.extend(page)
        if len(page) < RESTORE_PAGE:
            break
        before = page[-1].seq
    out.reverse()
    return out
