"""Closing the loop: findings -> route -> decision -> (intended or real) call -> audit records.

Detection stays separate from remediation (seed 002): the watchers and workers only put
finding events here. For each new or changed finding the owner is looked up, the policy
decides (dry-run by default; guards: blast radius, flap, approval), the remediator carries out
an executable decision (or records the intended call in dry-run), and every step is appended to
the audit store, linked by ids: event <- finding <- decision <- action/outcome.

The audit store is where the guards' history lives across restarts: decisions are appended
*before* their calls are sent (an action that went out is on record even if the process dies
right after), approvals and cancellations are appended as notes carrying the resulting
decision, and ``Healer.restore`` (called once at start-up, before any finding is decided) reads
them back and replays them into the ``PolicyState`` (``core.policy.restore_state``). Without a
store, or when an append fails (counted in ``audit_failures``), the history is in memory only.

A request waiting for approval lives only as long as the mode and the configuration
(``config``: ``core.policy.fingerprint``) it was made under, and at most ``pending_ttl``:
``sweep`` — at start-up right after the replay, before each batch of findings and every
``sweep_every`` seconds when idle — cancels the others, each with a note in the audit store
(key ``cancel:<id>``, so two replicas cancelling one request leave one note). ``approve``
checks the same, and also looks in the store for a cancellation another replica made; a
cancelled request is never run, and approving it again returns the cancellation.

A heal that failed only in ways that pass (``Outcome.retryable``: Argo CD unavailable or busy,
a timeout) is not dropped: the finding is decided again after the cooldown, then after twice
that, and so on, at most ``heal_retries`` times — each a new decision, guards included, each on
record once — unless the drift cleared or was reported anew meanwhile. When the retries run
out, a note says so. Retries live in memory: after a restart the drift is decided again when
it is reported again (every current finding is, at start-up).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetwarden.app.remediating import Remediator
from fleetwarden.core import policy as policy_mod
from fleetwarden.core.audit import (
    AuditDraft,
    AuditKind,
    AuditRecord,
    finding_draft,
    record_id,
)
from fleetwarden.core.describing import decision_summary
from fleetwarden.core.events import dedupe_key
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.core.policy import (
    Decision,
    Mode,
    Policy,
    PolicyState,
    RequestCancelled,
    Status,
)
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.logs import get_logger
from fleetwarden.ports.audit import AuditStore, AuditStoreError
from fleetwarden.ports.remediation import Outcome

__all__ = ["RESTORE_PAGE", "Healer", "Restored", "record_summary", "recorded_decision"]

log = get_logger("fleetwarden.healing")


RESTORE_PAGE = 10_000  # audit records per query while restoring (each page re-reads the span)


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Restored:
    """What ``Healer.restore`` found in the audit store."""

    replayed: int  # decisions (approvals, cancellations) replayed into the policy state
    pending: int  # requests waiting for approval again
    malformed: int  # records that carry no readable decision: skipped
    too_old: int = 0  # read, but before the replay span
    cancelled: int = 0  # requests cancelled at start-up: expired, or of another mode/config


@dataclass(frozen=True, slots=True)
class _Retry:
    """A finding to decide again at ``due``: its heal failed ``attempt`` times in a way that
    may pass."""

    due: datetime
    attempt: int
    event: FindingEvent


class Healer:
    def __init__(
        self,
        *,
        ownership: OwnershipMap,
        remediator: Remediator,
        audit: AuditStore | None = None,
        policy: Policy = policy_mod.DEFAULT_POLICY,
        mode: Mode = Mode.DRY_RUN,
        state: PolicyState | None = None,
        notify: Callable[[FindingEvent, dict[str, Any] | None], None] | None = None,
        clock: Callable[[], datetime] = _utcnow,
        max_queue: int = 100_000,
        config: str | None = None,
        sweep_every: float = 30.0,
        heal_retries: int = 5,
    ) -> None:
        self.ownership, self.remediator, self.audit = ownership, remediator, audit
        self.policy, self.mode, self.clock, self.notify = policy, mode, clock, notify
        self.config = config  # the fingerprint of the configuration decisions are made under
        self.sweep_every = sweep_every
        self.heal_retries = heal_retries
        self.retries: dict[str, _Retry] = {}  # finding id → when to decide it again
        self.state = state or PolicyState()
        self.queue: asyncio.Queue[FindingEvent] = asyncio.Queue(maxsize=max_queue)
        self.decisions: dict[str, Decision] = {}
        self.dropped = 0
        self.audit_failures = 0

    def set_pool_counts(self, counts: dict[str, int]) -> None:
        for cluster, n in counts.items():
            self.state.set_pools(cluster, n)

    # --- start-up -------------------------------------------------------------------------

    async def restore(self) -> Restored:
        """Rebuild the guards' history from the audit store; call once, before ``run``.

        Reads the decision records and approval notes stored in the last
        ``Guards.replay_span`` (one time-bounded, paged query: newest first, by ``seq``),
        replays them (``core.policy.restore_state``) and installs the result, keeping the
        pool counts already set. Requests still waiting for approval come back (and are
        listed in ``decisions``) — unless they expired or were made in another mode or under
        another configuration: those are cancelled at once, on record (``sweep``). A record
        whose decision cannot be read is skipped, counted and logged. Raises
        ``AuditStoreError`` when the store cannot be read: healing must not start with a
        history it could not see.
        """
        if self.audit is None:
            return Restored(0, 0, 0)
        now = self.clock()
        since = now - self.policy.guards.replay_span
        decisions: list[Decision] = []
        malformed: list[str] = []
        for rec in await _records_since(self.audit, since):
            try:
                decision = recorded_decision(rec)
            except ValueError as exc:  # MalformedDecision, or a payload that is not JSON
                malformed.append(f"seq {rec.seq} (id {rec.id}): {exc}")
                continue
            if decision is not None:
                decisions.append(decision)
        replay = policy_mod.restore_state(
            decisions, now, policy=self.policy, pools=self.state.pools
        )
        self.state = replay.state
        for request in replay.pending:
            self.decisions[request.id] = request
        cancelled = await self.sweep()
        if malformed:
            log.warning(
                "audit records without a readable decision skipped",
                count=len(malformed),
                first=malformed[0],
            )
        log.info(
            "policy state restored from the audit store",
            replayed=replay.replayed,
            pending=len(self.state.pending),
            cancelled=len(cancelled),
            malformed=len(malformed),
            since=since.isoformat(),
        )
        return Restored(
            replay.replayed,
            len(self.state.pending),
            len(malformed),
            replay.too_old,
            len(cancelled),
        )

    async def sweep(self) -> list[Decision]:
        """Cancel, on record, every request that can no longer be approved: expired, or made
        in another mode or under another configuration than this healer's."""
        now = self.clock()
        cancelled = policy_mod.cancellations(self.state, now, mode=self.mode, config=self.config)
        for decision in cancelled:
            policy_mod.record(decision, self.state, policy=self.policy)
            self.decisions[decision.id] = decision
        if cancelled:
            log.info(
                "requests waiting for approval cancelled",
                count=len(cancelled),
                ids=[d.id for d in cancelled][:20],
            )
        await self._append([_cancellation_draft(d) for d in cancelled])
        return cancelled

    # --- inputs ---------------------------------------------------------------------------

    def handle(self, event: object) -> None:
        """The emit hook: finding events are queued; anything else is ignored."""
        if not isinstance(event, FindingEvent):
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning(
                "healing queue full: finding event dropped",
                finding=event.finding.id,
                cluster=event.finding.cluster,
                pool=event.finding.pool,
            )

    # --- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self.sweep_every):
                    first = await self.queue.get()
            except TimeoutError:  # idle: requests still expire on time, heals are retried
                await self.sweep()
                await self.retry_due()
                continue
            batch = [first]
            while not self.queue.empty() and len(batch) < 512:
                batch.append(self.queue.get_nowait())
            await self.process(batch)
            await self.retry_due()

    async def retry_due(self) -> list[Decision]:
        """Decide again the findings whose failed heal is due for another try."""
        now = self.clock()
        due = [r for r in self.retries.values() if r.due <= now]
        if not due:
            return []
        for r in due:
            del self.retries[r.event.finding.id]
        attempts = {r.event.finding.id: r.attempt for r in due}
        return await self._process([r.event for r in due], attempts)

    async def process(self, events: Sequence[FindingEvent]) -> list[Decision]:
        """Decide each finding event, record it, carry out what may run, record how it went."""
        for ev in events:  # news of a finding replaces a retry of its failed heal
            self.retries.pop(ev.finding.id, None)
        return await self._process(events, {})

    async def _process(
        self, events: Sequence[FindingEvent], attempts: dict[str, int]
    ) -> list[Decision]:
        await self.sweep()  # a stale request must not swallow a drift as "already waiting"
        now = self.clock()
        drafts: list[AuditDraft] = []
        to_run: list[Decision] = []
        made: list[Decision] = []
        causes: dict[str, FindingEvent] = {}
        for ev in events:
            f = ev.finding
            causes[f.id] = ev
            refs = []
            cause = f.extra.get("cause")
            event_key = None  # the queued event this finding is attributed to
            if isinstance(cause, dict) and cause.get("eventId") and cause.get("source"):
                event_key = cause.get("key") or dedupe_key(cause["source"], cause["eventId"])
                refs.append(record_id(AuditKind.EVENT, event_key))
            finding_key = f"{f.id}:{ev.type.value}:{ev.at.isoformat()}"
            fdraft = finding_draft(f, refs=refs, key=finding_key)
            fid = record_id(AuditKind.FINDING, finding_key)
            drafts.append(
                AuditDraft(
                    kind=fdraft.kind,
                    summary=f"{ev.type.value}: {fdraft.summary}",
                    cluster=fdraft.cluster,
                    pool=fdraft.pool,
                    refs=fdraft.refs,
                    payload={**fdraft.payload, "event": ev.type.value},
                    key=finding_key,
                    actor=cause.get("actor") if isinstance(cause, dict) else None,
                )
            )
            if ev.type is FindingEventType.CLEARED:
                if self.notify is not None:
                    self.notify(ev, None)
                continue
            route = self.ownership.route(f)
            decision = policy_mod.decide(
                f, route, self.state, now, self.mode, policy=self.policy, config=self.config
            )
            log.info(
                "finding decided",
                # the event the finding is blamed for; none for drift found at start-up
                **({"event_key": event_key} if event_key else {}),
                cluster=f.cluster,
                pool=f.pool,
                finding=f.id,
                decision=decision.id,
                status=decision.status.value,
                action=decision.action.value,
            )
            policy_mod.record(decision, self.state, policy=self.policy)
            self.decisions[decision.id] = decision
            made.append(decision)
            drafts.append(
                _decision_draft(
                    decision, fid, f.cluster, f.pool, cause if isinstance(cause, dict) else None
                )
            )
            if decision.status in (Status.EXECUTE, Status.DRY_RUN):
                to_run.append(decision)
            if self.notify is not None:
                self.notify(ev, decision.to_json())
        # write-ahead: the decisions are on record before any call goes out, so a restart
        # right after the calls still counts them against the guards (see restore)
        await self._append(drafts)
        outcomes = await self.remediator.carry_out_all(to_run) if to_run else []
        done: list[AuditDraft] = []
        for decision, outcome in zip(to_run, outcomes, strict=True):
            done.extend(_action_drafts(decision, outcome))
            note = self._retry_later(decision, outcome, causes, attempts, now)
            if note is not None:
                done.append(note)
        await self._append(done)
        return made

    def _retry_later(
        self,
        decision: Decision,
        outcome: Outcome,
        causes: dict[str, FindingEvent],
        attempts: dict[str, int],
        now: datetime,
    ) -> AuditDraft | None:
        """Schedule the finding of a heal that failed in a way that may pass; past
        ``heal_retries``, a note that says it is given up."""
        if decision.status is not Status.EXECUTE or not outcome.retryable:
            return None
        attempt = attempts.get(decision.finding_id, 0) + 1
        if attempt <= self.heal_retries:
            # just past the cooldown (which would refuse it), then twice that, ...
            wait = self.policy.guards.cooldown * 2 ** (attempt - 1) + timedelta(seconds=1)
            due = now + min(wait, timedelta(hours=1))
            self.retries[decision.finding_id] = _Retry(due, attempt, causes[decision.finding_id])
            return None
        log.warning(
            "heal given up",
            finding=decision.finding_id,
            attempts=attempt,
            cluster=decision.cluster,
            pool=decision.pool,
        )
        return AuditDraft(
            kind=AuditKind.NOTE,
            key=f"given-up:{decision.id}",
            summary=f"heal given up after {attempt} failed attempts: {decision.action.value}",
            cluster=decision.cluster,
            pool=decision.pool,
            refs=(decision.id,),
            payload={"givenUp": {"findingId": decision.finding_id, "attempts": attempt}},
        )

    async def approve(self, decision_id: str) -> Decision:
        """Approval mode: let a pending decision run now (guards are checked again).

        A request that expired, or was made in another mode or under another configuration
        than this healer's, is cancelled instead (on record), and nothing runs; one cancelled
        before — here, or by another replica sharing the audit store — comes back as that
        cancellation, and nothing is recorded or run. The status says which: ``cancelled``.
        Raises ``UnknownDecision`` for an id that waits for nothing, ``AuditStoreError`` when
        the store cannot be asked whether another replica cancelled the request.
        """
        now = self.clock()
        try:
            decision = policy_mod.approve(
                decision_id,
                self.state,
                now,
                policy=self.policy,
                mode=self.mode,
                config=self.config,
            )
        except RequestCancelled as exc:
            return exc.decision
        if decision.status is not Status.CANCELLED:
            elsewhere = await self._cancelled_elsewhere(self.state.pending[decision_id])
            if elsewhere is not None:
                policy_mod.record(elsewhere, self.state, policy=self.policy)
                self.decisions[decision_id] = elsewhere
                return elsewhere
        policy_mod.record(decision, self.state, policy=self.policy)
        self.decisions[decision.id] = decision
        if decision.status is Status.CANCELLED:
            await self._append([_cancellation_draft(decision)])
            return decision
        drafts = [
            AuditDraft(
                kind=AuditKind.NOTE,
                key=f"approval:{decision_id}:{now.isoformat()}",
                summary=f"approved: {decision.action.value} -> {decision.status.value}",
                cluster=decision.cluster,
                pool=decision.pool,
                refs=(decision_id,),
                payload={"approval": decision.to_json()},
            )
        ]
        await self._append(drafts)  # write-ahead, as in process
        if decision.status is Status.EXECUTE:
            (outcome,) = await self.remediator.carry_out_all([decision])
            await self._append(_action_drafts(decision, outcome))
        return decision

    def pending(self) -> list[Decision]:
        return list(self.state.pending.values())

    async def _cancelled_elsewhere(self, request: Decision) -> Decision | None:
        """The cancellation of ``request`` another process put in the audit store, if any."""
        if self.audit is None:
            return None
        notes = await self.audit.query(
            kind=AuditKind.NOTE, ref=request.id, since=request.at, limit=100
        )
        for rec in notes:
            data = rec.payload.get("cancellation")
            if data is None:
                continue
            try:
                found = Decision.from_json(data)
            except ValueError:
                continue  # counted and logged at the next restore; it cancels nothing
            if found.id == request.id and found.status is Status.CANCELLED:
                return found
        return None

    async def _append(self, drafts: list[AuditDraft]) -> None:
        if self.audit is None or not drafts:
            return
        try:
            await self.audit.append_many(drafts)
        except AuditStoreError as exc:
            self.audit_failures += 1
            log.error("audit append failed", error=str(exc), records=len(drafts))


async def _records_since(store: AuditStore, since: datetime) -> list[AuditRecord]:
    """The decision records and notes stored at or after ``since``, oldest first.

    ``query`` answers newest first and pages backwards by ``seq``. The bound is the store's
    time of the record (written after the decision, by the same clock), so the replay span
    is read whatever the size of the log: through the ``(kind, at)`` index in SQLite
    (migration 0002), the ``at`` index in PostgreSQL.
    """
    kinds = (AuditKind.DECISION, AuditKind.NOTE)
    out: list[AuditRecord] = []
    before: int | None = None
    while True:
        page = await store.query(kind=kinds, since=since, before_seq=before, limit=RESTORE_PAGE)
        out.extend(page)
        if len(page) < RESTORE_PAGE:
            break
        before = page[-1].seq
    out.reverse()
    return out


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
    """The decision an audit record carries: a decision record's (``_decision_draft``), an
    approval note's result (``Healer.approve``) or a cancellation note's
    (``_cancellation_draft``); None for any other record. Raises
    ValueError (``MalformedDecision``, or a payload that is not JSON) when it cannot be read.
    """
    if rec.kind == AuditKind.DECISION:
        return Decision.from_json(rec.payload.get("decision"))
    if rec.kind == AuditKind.NOTE and "approval" in rec.payload:
        return Decision.from_json(rec.payload["approval"])
    if rec.kind == AuditKind.NOTE and "cancellation" in rec.payload:
        return Decision.from_json(rec.payload["cancellation"])
    return None


def _cancellation_draft(decision: Decision) -> AuditDraft:
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


def _action_drafts(decision: Decision, outcome: Any) -> list[AuditDraft]:
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


def _decision_draft(
    decision: Decision,
    finding_record: str | None,
    cluster: str | None,
    pool: str | None,
    cause: dict[str, Any] | None = None,
) -> AuditDraft:
    """The decision, with the change event its finding was attributed to (``cause``: its
    actor is the record's, so ``/api/decisions?actor=`` and ``audit query`` find it)."""
    refs = tuple(r for r in (finding_record,) if r)
    payload: dict[str, Any] = {"decision": decision.to_json()}
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
