"""When a heal of each finding ended ok: the ``healedAt`` a cleared finding is stamped with.

The fact "a remediation executed for finding F ended ok at T" is on record in the audit store:
an executable decision (a ``decision`` record, or an approval note carrying the approved
decision) followed by its ``outcome`` record with status ``ok``. ``HealTimes`` holds these
facts for the findings that have not cleared since, from three sources:

* the heals carried out here (``note``);
* at start-up, the records of the last ``window`` read back from the store (``load``, called
  by ``Healer.restore``): a heal before a restart still stamps the finding that clears after
  it, whichever replica healed it;
* the records other replicas stored since this one last looked (``replay`` of the guarded
  transaction's news, ``Healer._catch_up``): a finding healed by the replica that owned its
  cluster before gets ``healedAt`` when it clears here.

A finding's heal is forgotten when a clear of it is read (here: ``stamp``; from the store: a
``finding.cleared`` record after the outcome), so a later drift of the same id is not taken as
healed. Bounds: only heals of the last ``window`` (the policy's replay span) are kept, and a
heal that ended before the clearing drift started (its ``startedAt``) belongs to an earlier
drift of that id and stamps nothing. What is not covered: a clear read only by another replica
(not in the guarded news) leaves the heal here until the window passes or the startedAt check
refuses it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from fleetwarden.app.healing_records import RESTORE_PAGE, recorded_decision
from fleetwarden.app.stamping import rfc3339
from fleetwarden.core.audit import AuditKind, AuditRecord
from fleetwarden.core.events import parse_time
from fleetwarden.core.policy import Decision, Status
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.audit import AuditStore
from fleetwarden.ports.remediation import Outcome, OutcomeStatus

__all__ = ["HealTimes"]

_CLEARED = FindingEventType.CLEARED.value


class HealTimes:
    """Finding id -> when the last heal of it ended ok (see the module docstring)."""

    def __init__(self, *, window: timedelta) -> None:
        self.window = window
        self._at: dict[str, datetime] = {}
        # executable decisions read from the store whose outcome is not read yet:
        # decision id -> (finding id, decided at)
        self._executing: dict[str, tuple[str, datetime]] = {}

    def __len__(self) -> int:
        return len(self._at)

    def get(self, finding_id: str) -> datetime | None:
        return self._at.get(finding_id)

    def note(self, decisions: Sequence[Decision], outcomes: Sequence[Outcome]) -> None:
        """The heals carried out here: executed decisions whose outcome is ok (dry-runs,
        failures and skipped calls heal nothing)."""
        for decision, outcome in zip(decisions, outcomes, strict=True):
            if decision.status is Status.EXECUTE and outcome.status is OutcomeStatus.OK:
                self._heal(decision.finding_id, outcome.finished_at)

    def replay(self, records: Iterable[AuditRecord]) -> None:
        """Audit records, oldest first: executable decisions, their outcomes and the clears
        of findings. Anything else, or a payload that cannot be read, is passed over."""
        newest: datetime | None = None
        for rec in records:
            newest = rec.at if newest is None else max(newest, rec.at)
            if rec.kind == AuditKind.OUTCOME:
                self._outcome(rec)
            elif rec.kind == AuditKind.FINDING:
                finding = rec.payload.get("finding")
                if rec.payload.get("event") == _CLEARED and isinstance(finding, dict):
                    self._at.pop(str(finding.get("id")), None)
            elif rec.kind in (AuditKind.DECISION, AuditKind.NOTE):
                try:
                    decision = recorded_decision(rec)
                except (ValueError, TypeError, KeyError):
                    continue  # counted and logged by the policy replay
                if decision is not None and decision.status is Status.EXECUTE:
                    self._executing[decision.id] = (decision.finding_id, decision.at)
        if newest is not None:
            self._forget_before(newest - self.window)

    def stamp(self, event: FindingEvent) -> FindingEvent:
        """A ``cleared`` event of a finding a heal fixed gains ``healedAt`` (when that heal
        ended), beside ``clearedAt``; the heal is forgotten either way."""
        if event.type is not FindingEventType.CLEARED:
            return event
        at = self._at.pop(event.finding.id, None)
        # (a heal may end a moment after the watch saw its effect: no upper bound)
        if at is None or at < event.at - self.window:
            return event
        f = event.finding
        started = parse_time(f.extra.get("startedAt"))  # None: unknown, or does not parse
        if started is not None and at < started:
            return event  # a heal of an earlier drift of this id
        stamped = dataclasses.replace(f, extra={**f.extra, "healedAt": rfc3339(at)})
        return dataclasses.replace(event, finding=stamped)

    async def load(
        self,
        store: AuditStore,
        since: datetime,
        *,
        upto: int | None,
        decisions: Sequence[AuditRecord] | None = None,
    ) -> None:
        """Read the heals of ``[since, seq upto]`` back from ``store`` (decisions and notes
        — or ``decisions``, those records already read by the caller —, outcomes ok, clears;
        paged, newest first as the store answers) and replay them."""
        found: list[AuditRecord] = list(decisions or ())
        queries: list[tuple[tuple[AuditKind, ...], str]] = [
            ((AuditKind.OUTCOME,), '"status":"ok"'),
            ((AuditKind.FINDING,), f'"event":"{_CLEARED}"'),
        ]
        if decisions is None:
            queries.append(((AuditKind.DECISION, AuditKind.NOTE), '"status":"execute"'))
        for kinds, contains in queries:
            before = None if upto is None else upto + 1
            while True:
                page = await store.query(
                    kind=kinds,
                    since=since,
                    before_seq=before,
                    payload_contains=contains,
                    limit=RESTORE_PAGE,
                )
                found.extend(page)
                if len(page) < RESTORE_PAGE:
                    break
                before = page[-1].seq
        self.replay(sorted(found, key=lambda r: r.seq))

    def _outcome(self, rec: AuditRecord) -> None:
        outcome = rec.payload.get("outcome")
        if not isinstance(outcome, dict) or outcome.get("status") != OutcomeStatus.OK.value:
            return
        executed = self._executing.pop(str(outcome.get("decisionId")), None)
        finished = parse_time(outcome.get("finishedAt"))
        if executed is not None and finished is not None:
            self._heal(executed[0], finished)
        # else: not an executed decision read here (this replica's own heals are noted)

    def _heal(self, finding_id: str, at: datetime) -> None:
        known = self._at.get(finding_id)
        if known is None or at > known:
            self._at[finding_id] = at

    def _forget_before(self, horizon: datetime) -> None:
        for fid in [fid for fid, at in self._at.items() if at < horizon]:
            del self._at[fid]
        for did in [d for d, (_f, at) in self._executing.items() if at < horizon]:
            del self._executing[did]
