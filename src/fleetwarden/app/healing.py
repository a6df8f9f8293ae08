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

Several worker replicas on one store (``shared``: the store, as ``ports.guards.SharedGuards``)
enforce ONE blast radius and run an approval once: each batch is decided in the store's
guarded transaction — read what the other replicas recorded since this one last looked
(``_catch_up``: their actions count here, their requests can be approved here, their
approvals and cancellations close requests here), decide and record (pure, as alone), append
the decisions, commit — serialised with every other replica's, so no two decide from the same
counts, and an action is counted and on record, or neither (a worker killed before the commit
leaves nothing). A failed guarded write runs nothing: the state is rebuilt from the store and
the findings are decided again after ``sweep_every``. ``approve`` claims ``approve:<id>`` in
the same kind of transaction as its note: the first replica runs it, the others raise
``AlreadyApproved`` naming it (``identity``: the pod name, or host:pid). Without ``shared``
each replica keeps its own counts, as a single process does.

A heal that failed only in ways that pass (``Outcome.retryable``: Argo CD unavailable or busy,
a timeout) is not dropped: the finding is decided again after the cooldown, then after twice
that, and so on, at most ``heal_retries`` times — each a new decision, guards included, each on
record once — unless the drift cleared or was reported anew meanwhile. When the retries run
out, a note says so. Retries live in memory: after a restart the drift is decided again when
it is reported again (every current finding is, at start-up).

Who decides what is the ``authority``'s word (``app/authority``: always; the leader only, with
leader election; each shard's owner for its clusters, with sharding): a finding event of a
cluster not decided here is dropped (its decider has it; a replica that takes over is given
every current finding again), and without ``authority.leading`` no request is swept and
approvals are refused (``NotLeading``). Each batch records the term's fencing token with its
decisions, and ``authority.refusals`` runs right before the calls go out: a refused one (the
term ended, the Lease changed hands, the cluster moved) is not sent and is on record as a
``skipped`` outcome naming why.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fleetwarden.app.authority import HealAuthority, authority_for
from fleetwarden.app.electing import Elector, Fence
from fleetwarden.app.heal_times import HealTimes
from fleetwarden.app.healing_records import (
    RESTORE_PAGE,
    action_drafts,
    cancellation_draft,
    decision_draft,
    record_summary,
    recorded_decision,
    records_since,
    warned_event,
)
from fleetwarden.app.remediating import Remediator
from fleetwarden.core import policy as policy_mod
from fleetwarden.core.audit import (
    AuditDraft,
    AuditKind,
    AuditRecord,
    finding_draft,
    record_id,
)
from fleetwarden.core.events import dedupe_key
from fleetwarden.core.fights import FightDecision
from fleetwarden.core.findings import Finding
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.core.policy import (
    Decision,
    Mode,
    Policy,
    PolicyState,
    RequestCancelled,
    Status,
    UnknownDecision,
)
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.logs import get_logger
from fleetwarden.ports.audit import (
    AuditConflict,
    AuditStore,
    AuditStoreError,
    AuditUnavailable,
)
from fleetwarden.ports.guards import GuardedWrite, SharedGuards
from fleetwarden.ports.remediation import Outcome, OutcomeStatus
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = [
    "RESTORE_PAGE",
    "AlreadyApproved",
    "Healer",
    "NotLeading",
    "Restored",
    "record_summary",
    "recorded_decision",
    "replica_identity",
]

log = get_logger("fleetwarden.healing")


def replica_identity() -> str:
    """Who this replica is, in claims and approval notes: the pod name (``POD_NAME``, from
    the downward API) or ``host:pid``."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}:{os.getpid()}"


class AlreadyApproved(UnknownDecision):
    """The request was approved already — by another replica sharing the store, or by this
    one — and nothing was done now. ``holder``: who approved it, ``at``: when."""

    def __init__(self, decision_id: str, holder: str, at: datetime, status: str | None) -> None:
        self.decision_id, self.holder, self.at, self.status = decision_id, holder, at, status
        outcome = f" (the approval made it {status})" if status else ""
        super().__init__(
            f"decision {decision_id!r} was already approved by {holder} at "
            f"{at.isoformat()}{outcome}; nothing was done here"
        )


class NotLeading(Exception):
    """This replica is not the leader: it approves nothing (the leader does)."""


@dataclass(frozen=True, slots=True)
class Restored:
    """What ``Healer.restore`` found in the audit store."""

    replayed: int  # decisions (approvals, cancellations) replayed into the policy state
    pending: int  # requests waiting for approval again
    malformed: int  # records that carry no readable decision: skipped
    too_old: int = 0  # read, but before the replay span
    cancelled: int = 0  # requests cancelled at start-up: expired, or of another mode/config


@dataclass(slots=True)
class _Batch:
    """What deciding one batch of finding events made: records to store, calls to make,
    what to tell ``notify``."""

    drafts: list[AuditDraft] = field(default_factory=list)
    to_run: list[Decision] = field(default_factory=list)
    made: list[Decision] = field(default_factory=list)
    causes: dict[str, FindingEvent] = field(default_factory=dict)
    notices: list[tuple[FindingEvent, Decision | None]] = field(default_factory=list)
    token: int | None = None  # the leadership term's fencing token when decided


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
        clock: Clock = SYSTEM_CLOCK,
        max_queue: int = 100_000,
        config: str | None = None,
        sweep_every: float = 30.0,
        heal_retries: int = 5,
        shared: SharedGuards | None = None,
        identity: str | None = None,
        elector: Elector | None = None,
        fence: Fence | None = None,
        authority: HealAuthority | None = None,
        fights: Callable[[Finding], FightDecision | None] | None = None,
        on_appended: Callable[[Sequence[AuditDraft]], None] | None = None,
    ) -> None:
        if shared is not None and audit is None:
            raise ValueError("shared guard state needs the audit store it lives in (audit=)")
        self.ownership, self.remediator, self.audit = ownership, remediator, audit
        self.shared = shared  # several replicas: decide under the store's policy lock
        self.identity = identity or replica_identity()
        # who decides what (elector/fence alone: leader election, as before the authority)
        self.authority = authority or authority_for(elector=elector, fence=fence)
        self.ignored = 0  # finding events dropped: another replica decides them
        self._cursor: int | None = None  # shared: the last record replayed into ``state``
        self._approved: dict[str, tuple[str, datetime]] = {}  # id → (approver, when)
        self.policy, self.mode, self.clock, self.notify = policy, mode, clock, notify
        self.config = config  # the fingerprint of the configuration decisions are made under
        self.fights = fights  # the live watchers' fights: a heal on a fought field is paused
        self.on_appended = on_appended  # told of every batch once stored (the live stream)
        self.sweep_every = sweep_every
        self.heal_retries = heal_retries
        self.retries: dict[str, _Retry] = {}  # finding id → when to decide it again
        self.healed = HealTimes(window=policy.guards.replay_span)  # finding id → heal ended ok
        self.state = state or PolicyState()
        self.queue: asyncio.Queue[FindingEvent] = asyncio.Queue(maxsize=max_queue)
        self.decisions: dict[str, Decision] = {}
        self.dropped = 0
        self.audit_failures = 0

    @property
    def acting(self) -> bool:
        """Leading (or no election): approvals and request expiry run here."""
        return self.authority.leading

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
        # shared: the replay ends at a head read first, and later records are caught up
        # under the policy lock (``_catch_up``): none missed, none counted twice
        upto = await self.shared.head_seq() if self.shared is not None else None
        now = self.clock.now()
        since = now - self.policy.guards.replay_span
        decisions: list[Decision] = []
        malformed: list[str] = []
        records = await records_since(self.audit, since, upto=upto)
        await self.healed.load(self.audit, since, upto=upto, decisions=records)  # old heals
        for rec in records:
            self._note_approval(rec)
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
        self._cursor = upto
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
        in another mode or under another configuration than this healer's. Shared: in a
        guarded transaction, after catching up — a request another replica approved meanwhile
        is not cancelled here, and one cancelled here cannot be approved there. A follower
        cancels nothing: the leader does."""
        if not self.acting:
            return []
        if self.shared is None:
            cancelled = self._cancel_stale()
            await self._append([cancellation_draft(d) for d in cancelled])
            return cancelled
        try:
            async with await self._guarded() as txn:
                self._catch_up(txn.news)
                cancelled = self._cancel_stale()
                if cancelled:
                    await txn.append([cancellation_draft(d) for d in cancelled])
                self._cursor = txn.head
        except AuditStoreError as exc:
            self._lost(exc)  # the requests stay pending; the next sweep tries again
            return []
        return cancelled

    def _cancel_stale(self) -> list[Decision]:
        now = self.clock.now()
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
        return cancelled

    def _lost(self, exc: AuditStoreError) -> None:
        """A guarded write failed: nothing of it is on record. The local state recorded it,
        so it is rebuilt from the store (``restore``) before the next guarded write."""
        self.audit_failures += 1
        self._cursor = None
        log.error("guarded policy write failed", error=str(exc))

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
            if not self.authority.active:
                await self._follow()
                continue
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

    async def _follow(self) -> None:
        """Deciding nothing: drop what is queued (another replica decides it; on taking over
        this one is given every current finding again) until active, or ``sweep_every``."""
        while not self.queue.empty():
            self.queue.get_nowait()
            self.ignored += 1
        self.retries.clear()  # the decider retries its own failed heals
        await self.authority.wait(self.sweep_every)

    async def retry_due(self) -> list[Decision]:
        """Decide again the findings whose failed heal is due for another try."""
        now = self.clock.now()
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
        # a cluster not decided here (term ended, cluster moved): its decider has the events
        kept = [ev for ev in events if self.authority.decides(ev.finding.cluster)]
        self.ignored += len(events) - len(kept)
        if not kept:
            return []
        events = kept
        now = self.clock.now()
        batch = _Batch()
        # the term these decisions are made in: the calls go out only if it still holds
        batch.token = self.authority.token()
        if self.shared is None:
            self._decide(events, now, batch)
            # write-ahead: the decisions are on record before any call goes out, so a restart
            # right after the calls still counts them against the guards (see restore)
            await self._append(batch.drafts)
        elif self._cursor is None:  # the sweep's guarded write failed: so would this one
            self._decide_later(events, attempts, now)
            return []
        else:
            try:
                async with await self._guarded() as txn:
                    self._catch_up(txn.news)
                    self._decide(events, now, batch)
                    fresh = await txn.append(batch.drafts)  # counted and on record: one commit
                    _refuse_taken(batch.drafts, fresh)
                    self._cursor = txn.head
                if self.on_appended is not None:
                    self.on_appended(batch.drafts)
            except AuditStoreError as exc:
                # nothing of the batch is on record, so nothing of it may run
                self._lost(exc)
                for decision in batch.made:
                    self.decisions.pop(decision.id, None)
                self._decide_later(events, attempts, now)
                return []
        for ev, decision in batch.notices:
            if self.notify is not None:
                self.notify(ev, decision.to_json() if decision is not None else None)
        to_run = batch.to_run
        outcomes = await self._carry_out(to_run, batch.token) if to_run else []
        done: list[AuditDraft] = []
        for decision, outcome in zip(to_run, outcomes, strict=True):
            done.extend(action_drafts(decision, outcome))
            note = self._retry_later(decision, outcome, batch.causes, attempts, now)
            if note is not None:
                done.append(note)
        await self._append(done)
        return batch.made

    def _decide_later(
        self, events: Sequence[FindingEvent], attempts: dict[str, int], now: datetime
    ) -> None:
        """Findings not decided for want of the store: again after ``sweep_every`` (a retry,
        not a failed attempt)."""
        later = now + timedelta(seconds=self.sweep_every)
        for ev in events:
            self.retries[ev.finding.id] = _Retry(later, attempts.get(ev.finding.id, 0), ev)

    def _decide(self, events: Sequence[FindingEvent], now: datetime, batch: _Batch) -> None:
        """Decide and record each event into ``batch`` (no I/O): what to store, run, tell."""
        for ev in events:
            ev = self.healed.stamp(ev)  # a cleared finding a heal fixed: healedAt
            ev = warned_event(ev, self.ownership, self.policy)  # warn mode: mode: warn
            f = ev.finding
            batch.causes[f.id] = ev
            refs = []
            cause = f.extra.get("cause")
            event_key = None  # the queued event this finding is attributed to
            if isinstance(cause, dict) and cause.get("eventId") and cause.get("source"):
                event_key = cause.get("key") or dedupe_key(cause["source"], cause["eventId"])
                refs.append(record_id(AuditKind.EVENT, event_key))
            finding_key = f"{f.id}:{ev.type.value}:{ev.at.isoformat()}"
            fdraft = finding_draft(f, refs=refs, key=finding_key)
            fid = record_id(AuditKind.FINDING, finding_key)
            batch.drafts.append(
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
                batch.notices.append((ev, None))
                continue
            route = self.ownership.route(f)
            decision = policy_mod.decide(
                f, route, self.state, now, self.mode, policy=self.policy, config=self.config
            )
            fight = self.fights(f) if self.fights is not None else None
            if fight is not None:
                decision = policy_mod.pause(decision, fight.reasons)
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
            batch.made.append(decision)
            batch.drafts.append(
                decision_draft(
                    decision,
                    fid,
                    f.cluster,
                    f.pool,
                    cause if isinstance(cause, dict) else None,
                    fencing_token=batch.token,
                )
            )
            if decision.status in (Status.EXECUTE, Status.DRY_RUN):
                batch.to_run.append(decision)
            batch.notices.append((ev, decision))

    async def _guarded(self) -> AbstractAsyncContextManager[GuardedWrite]:
        """The shared store's policy transaction, after the last record replayed (the
        whole replay first when there is none: at start, or after a failed write)."""
        assert self.shared is not None
        if self._cursor is None:
            await self.restore()
        if self._cursor is None:  # its sweep's guarded write failed
            raise AuditUnavailable("the policy state could not be read back from the store")
        return self.shared.guarded(after_seq=self._cursor)

    def _catch_up(self, news: Sequence[AuditRecord]) -> None:
        """Replay what other replicas recorded since the last look into ``state``: their
        actions count against this replica's guards, their requests can be approved here and
        their approvals and cancellations close requests here too. A record of this replica's
        own (its decision already in ``decisions``, equal) is not counted twice."""
        self.healed.replay(news)  # their heals: a finding they healed may clear here
        for rec in news:
            self._note_approval(rec)
            try:
                decision = recorded_decision(rec)
            except ValueError as exc:
                log.warning(
                    "audit record without a readable decision skipped",
                    seq=rec.seq,
                    error=str(exc),
                )
                continue
            if decision is None or self.decisions.get(decision.id) == decision:
                continue
            policy_mod.record(decision, self.state, policy=self.policy)
            self.decisions[decision.id] = decision

    def _note_approval(self, rec: AuditRecord) -> None:
        """Remember who approved a request (the approval note's ``by``)."""
        if rec.kind == AuditKind.NOTE and isinstance(rec.payload.get("approval"), dict):
            did = rec.payload["approval"].get("id")
            if isinstance(did, str):
                self._approved[did] = (str(rec.payload.get("by") or "a replica"), rec.at)

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
        Raises ``UnknownDecision`` for an id that waits for nothing, ``AlreadyApproved`` (an
        ``UnknownDecision``) for a request some replica approved before, ``AuditStoreError``
        when the store cannot be asked whether another replica cancelled the request.

        With shared guard state the approval is decided under the store's policy lock, after
        catching up with the other replicas, and claims ``approve:<id>`` in the same
        transaction as its note: of N replicas asked at once, one runs it.
        """
        if not self.acting:
            raise NotLeading(
                f"this replica ({self.identity}) is not the leader: approve {decision_id} "
                "on the leader (its /healthz says leader: true)"
            )
        if self.shared is not None:
            return await self._approve_shared(decision_id)
        now = self.clock.now()
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
        except UnknownDecision:
            approved = self._approved.get(decision_id)
            if approved is not None:
                raise self._already(decision_id, *approved) from None
            raise
        if decision.status is not Status.CANCELLED:
            elsewhere = await self._cancelled_elsewhere(self.state.pending[decision_id])
            if elsewhere is not None:
                policy_mod.record(elsewhere, self.state, policy=self.policy)
                self.decisions[decision_id] = elsewhere
                return elsewhere
        policy_mod.record(decision, self.state, policy=self.policy)
        self.decisions[decision.id] = decision
        if decision.status is Status.CANCELLED:
            await self._append([cancellation_draft(decision)])
            return decision
        self._approved[decision_id] = (self.identity, now)
        token = self.authority.token(approval=True)
        await self._append([self._approval_draft(decision)])  # write-ahead, as in process
        if decision.status is Status.EXECUTE:
            (outcome,) = await self._carry_out([decision], token, approval=True)
            await self._append(action_drafts(decision, outcome))
        return decision

    async def _approve_shared(self, decision_id: str) -> Decision:
        now = self.clock.now()
        token = self.authority.token(approval=True)
        async with await self._guarded() as txn:
            self._catch_up(txn.news)
            closed = self.state.closed.get(decision_id)
            if closed is not None:
                return closed  # cancelled before, here or elsewhere: nothing to record
            claim = await txn.claim(f"approve:{decision_id}", self.identity)
            if not claim.new:
                raise self._already(decision_id, claim.holder, claim.at)
            # (``RequestCancelled`` cannot come: closed requests were answered above)
            decision = policy_mod.approve(
                decision_id,
                self.state,
                now,
                policy=self.policy,
                mode=self.mode,
                config=self.config,
            )
            draft = (
                cancellation_draft(decision)
                if decision.status is Status.CANCELLED
                else self._approval_draft(decision)
            )
            await txn.append([draft])
            policy_mod.record(decision, self.state, policy=self.policy)
            self.decisions[decision.id] = decision
            if decision.status is not Status.CANCELLED:
                self._approved[decision_id] = (self.identity, now)
            self._cursor = txn.head
        # committed: this replica, and no other, carries it out
        if decision.status is Status.EXECUTE:
            (outcome,) = await self._carry_out([decision], token, approval=True)
            await self._append(action_drafts(decision, outcome))
        return decision

    async def _carry_out(
        self, decisions: Sequence[Decision], token: int | None, *, approval: bool = False
    ) -> list[Outcome]:
        """The remediator's outcomes; an executable decision the authority refuses right
        before the calls (``token``'s term ended, its cluster moved) is a skipped outcome."""
        executable = [d for d in decisions if d.status is Status.EXECUTE]
        refused = (
            await self.authority.refusals(executable, token, approval=approval)
            if executable
            else {}
        )
        now = self.clock.now()
        runnable = [d for d in decisions if d.id not in refused]
        done = iter(await self.remediator.carry_out_all(runnable))
        outcomes = [
            Outcome(d.id, OutcomeStatus.SKIPPED, (), now, now, f"not sent: {refused[d.id]}")
            if d.id in refused
            else next(done)
            for d in decisions
        ]
        self.healed.note(decisions, outcomes)
        return outcomes

    def _already(self, decision_id: str, holder: str, at: datetime) -> AlreadyApproved:
        known = self.decisions.get(decision_id)
        status = known.status.value if known is not None and known.approved_at else None
        return AlreadyApproved(decision_id, holder, at, status)

    def _approval_draft(self, decision: Decision) -> AuditDraft:
        """An approval's result, and who approved it: one note per request."""
        return AuditDraft(
            kind=AuditKind.NOTE,
            key=f"approval:{decision.id}",
            summary=f"approved: {decision.action.value} -> {decision.status.value}",
            cluster=decision.cluster,
            pool=decision.pool,
            refs=(decision.id,),
            payload={"approval": decision.to_json(), "by": self.identity},
        )

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
            return
        if self.on_appended is not None:
            self.on_appended(drafts)


def _refuse_taken(drafts: Sequence[AuditDraft], fresh: Sequence[bool]) -> None:
    """A decision whose id another replica's decision already has (the same finding decided
    at the same instant after as many records) must not run as if it were on record: the
    transaction is rolled back and the batch decided again."""
    pairs = zip(drafts, fresh, strict=True)
    taken = [d.key for d, new in pairs if not new and d.kind is AuditKind.DECISION]
    if taken:
        raise AuditConflict(f"decision already on record under another replica: {taken[0]}")
