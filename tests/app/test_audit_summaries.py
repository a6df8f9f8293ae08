"""Decision records name their real cause: `audit query` said "blocked: restore — dry-run:
nothing would be sent" while the blast-radius guard that stopped it was only in the payload."""

from __future__ import annotations

from datetime import UTC, datetime

from fleetwarden.app import healing, healing_records
from fleetwarden.core import audit
from fleetwarden.core.audit import AuditDraft, AuditKind
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.core.policy import Mode, PolicyState, Status, decide, record

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _blocked_dry_run():
    state, owners = PolicyState({"prod": 5}), OwnershipMap()
    decisions = []
    for pool in ("a", "b"):
        finding = Finding(
            "prod", pool, Layer.L1, "labels.team", "platform", "payments", Severity.HIGH,
            nodes=("n-1",),
        )  # fmt: skip
        decisions.append(decide(finding, owners.route(finding), state, T0, Mode.DRY_RUN))
        record(decisions[-1], state)
    assert decisions[1].status is Status.BLOCKED
    return decisions[1]


def test_a_decision_record_is_written_with_the_guard_that_blocked_it():
    draft = healing_records.decision_draft(_blocked_dry_run(), None, None, None)
    assert "blast radius" in draft.summary, draft.summary
    assert "nothing would be sent" not in draft.summary


def test_audit_query_shows_the_real_cause_of_records_written_before():
    decision = _blocked_dry_run()
    old = AuditDraft(
        kind=AuditKind.DECISION,
        id=decision.id,
        summary="blocked: restore — dry-run: nothing would be sent",
        payload={"decision": decision.to_json()},
    )
    (rec,) = audit.build_records([old], prev_hash=audit.GENESIS_HASH, next_seq=1, now=T0)
    assert rec.summary == old.summary  # stored (and hashed) as written
    shown = healing.record_summary(rec)
    assert shown.startswith("blocked (dry-run): restore — blast radius: cluster prod"), shown


def test_other_records_and_unreadable_decisions_keep_their_stored_summary():
    drafts = [
        AuditDraft(kind=AuditKind.NOTE, summary="an operator's note", payload={"text": "hi"}),
        AuditDraft(kind=AuditKind.DECISION, summary="as stored", payload={"decision": {"x": 1}}),
    ]
    records = audit.build_records(drafts, prev_hash=audit.GENESIS_HASH, next_seq=1, now=T0)
    assert [healing.record_summary(r) for r in records] == ["an operator's note", "as stored"]
