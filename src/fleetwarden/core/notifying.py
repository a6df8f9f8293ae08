"""Which finding events become notifications, for which sink, and when to say it again (pure).

*State first, action second*: ``plan`` turns finding events into ``Notification`` values and a
new ``NotifierState``; ``plan_due`` finds still-firing alerts whose re-notify time has come (and
failed deliveries whose retry time has); ``record_delivery`` folds a delivery's outcome back in;
``batches`` groups notifications into the messages a sink sends. The shell (``app.notifying``)
sends them. No clock is read here: every function takes ``now``.

Per sink (``SinkPolicy``) and per finding id:

* **firing** when a finding at or above the sink's ``min_severity`` first shows up (an
  ``appeared`` event, or a ``changed`` one that lifts it over the threshold);
* **firing again** when it changes in a way the sink asked for (``on_change``: by default the
  severity rises or nodes are added), or every ``renotify_every`` while it lasts;
* **resolved** when it clears, once, and only if the sink was told it was firing. A finding that
  drops below the threshold while firing keeps firing until it clears: no flapping on the edge.

Everything else is de-duplicated by the finding's stable id: an ``appeared`` for a finding that
is already firing (a relist, a restart of the tracker) says nothing new.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.tracking import FindingEvent, FindingEventType

__all__ = [
    "DEFAULT_ON_CHANGE",
    "Alert",
    "Batch",
    "Change",
    "GroupBy",
    "Notification",
    "NotifierState",
    "PendingResolve",
    "Plan",
    "SinkPolicy",
    "Status",
    "Trigger",
    "batches",
    "changes_between",
    "plan",
    "plan_due",
    "record_delivery",
    "timestamp",
]

PolicyDecision = Mapping[str, Any]


class Status(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


class Trigger(StrEnum):
    """Why a notification is sent."""

    APPEARED = "appeared"  # the first the sink hears of this finding (new, or now over threshold)
    CHANGED = "changed"  # it changed in a way the sink's ``on_change`` names
    REPEAT = "repeat"  # still firing after ``renotify_every``
    RETRY = "retry"  # the last delivery about it failed
    CLEARED = "cleared"


class Change(StrEnum):
    """How a finding differs from what the sink was last told."""

    SEVERITY_UP = "severity_up"
    SEVERITY_DOWN = "severity_down"
    NODES_ADDED = "nodes_added"
    NODES_REMOVED = "nodes_removed"
    ACTUAL = "actual"  # the observed value moved (e.g. a node count)


class GroupBy(StrEnum):
    NONE = "none"  # one message per finding
    CLUSTER = "cluster"
    POOL = "pool"  # cluster and pool
    ALL = "all"  # one message per sink and planning round


DEFAULT_ON_CHANGE = frozenset({Change.SEVERITY_UP, Change.NODES_ADDED})


@dataclass(frozen=True, slots=True)
class SinkPolicy:
    """What one sink wants to hear. ``renotify_every`` None: never repeat a firing alert."""

    name: str
    min_severity: Severity = Severity.INFO
    renotify_every: timedelta | None = timedelta(hours=4)
    on_change: frozenset[Change] = DEFAULT_ON_CHANGE
    group_by: GroupBy = GroupBy.NONE
    send_resolved: bool = True
    retry_after: timedelta = timedelta(minutes=1)  # after a failed delivery
    max_retries: int = 5  # then firing alerts fall back to the re-notify schedule

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a sink needs a name")
        if self.renotify_every is not None and self.renotify_every <= timedelta(0):
            raise ValueError(f"sink {self.name!r}: renotify_every must be positive or None")
        if self.retry_after <= timedelta(0):
            raise ValueError(f"sink {self.name!r}: retry_after must be positive")
        if self.max_retries < 0:
            raise ValueError(f"sink {self.name!r}: max_retries must be >= 0")


@dataclass(frozen=True, slots=True)
class Notification:
    """One thing to tell one sink about one finding.

    ``since`` is when the sink was first told it was firing; ``sequence`` counts the messages
    about this firing (1 for the first; the resolve is the last). ``previous_severity`` is the
    severity the sink last heard (None for a first firing): a receiver that keys alerts by
    severity (Alertmanager labels) needs it to end the old one.
    """

    sink: str
    status: Status
    trigger: Trigger
    finding: Finding
    at: datetime
    since: datetime
    sequence: int
    changes: frozenset[Change] = frozenset()
    previous_severity: Severity | None = None
    decision: PolicyDecision | None = None
    reason: str | None = None

    @property
    def id(self) -> str:
        return self.finding.id

    @property
    def key(self) -> str:
        """The same message, re-sent, has the same key (receivers can de-duplicate on it)."""
        raw = f"{self.sink}|{self.id}|{timestamp(self.since)}|{self.sequence}|{self.status}"
        return hashlib.sha256(raw.encode()).hexdigest()[:24]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status.value,
            "trigger": self.trigger.value,
            "id": self.id,
            "key": self.key,
            "sequence": self.sequence,
            "since": timestamp(self.since),
            "at": timestamp(self.at),
            "changes": sorted(c.value for c in self.changes),
            "previous_severity": self.previous_severity.value if self.previous_severity else None,
            "finding": self.finding.to_json(),
            "decision": dict(self.decision) if self.decision is not None else None,
        }
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True, slots=True)
class Batch:
    """The notifications one sink sends as one message, in planning order."""

    sink: str
    notifications: tuple[Notification, ...]

    @property
    def key(self) -> str:
        raw = "|".join(n.key for n in self.notifications)
        return hashlib.sha256(f"{self.sink}|{raw}".encode()).hexdigest()[:24]

    @property
    def cluster(self) -> str | None:
        """The cluster all notifications share, or None."""
        names = {n.finding.cluster for n in self.notifications}
        return names.pop() if len(names) == 1 else None

    @property
    def pool(self) -> str | None:
        """The pool all notifications share (within one cluster), or None."""
        scopes = {(n.finding.cluster, n.finding.pool) for n in self.notifications}
        return scopes.pop()[1] if len(scopes) == 1 else None

    @property
    def firing(self) -> tuple[Notification, ...]:
        return tuple(n for n in self.notifications if n.status is Status.FIRING)

    @property
    def resolved(self) -> tuple[Notification, ...]:
        return tuple(n for n in self.notifications if n.status is Status.RESOLVED)


@dataclass(frozen=True, slots=True)
class Alert:
    """What one sink was told about one firing finding. ``sent`` is the finding as last told;
    ``latest`` as last seen (repeats carry it)."""

    latest: Finding
    sent: Finding
    since: datetime
    last_sent: datetime
    sequence: int
    next_due: datetime | None
    failures: int = 0
    decision: PolicyDecision | None = None


@dataclass(frozen=True, slots=True)
class PendingResolve:
    """A resolve whose delivery failed: re-sent (same key) when ``due``."""

    notification: Notification
    due: datetime
    attempts: int = 1


@dataclass(frozen=True, slots=True)
class NotifierState:
    """Per sink, the alerts it believes are firing and the resolves still to deliver.

    Treat as immutable: every function returns a new state and leaves its argument alone.
    """

    firing: Mapping[str, Mapping[str, Alert]] = field(default_factory=dict)
    resolving: Mapping[str, Mapping[str, PendingResolve]] = field(default_factory=dict)

    def alert(self, sink: str, finding_id: str) -> Alert | None:
        return self.firing.get(sink, {}).get(finding_id)

    def firing_ids(self, sink: str) -> frozenset[str]:
        return frozenset(self.firing.get(sink, {}))


@dataclass(frozen=True, slots=True)
class Plan:
    state: NotifierState
    notifications: tuple[Notification, ...]


def timestamp(at: datetime) -> str:
    """RFC 3339 in UTC with a ``Z`` (naive datetimes are taken as UTC)."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def changes_between(told: Finding, now: Finding) -> frozenset[Change]:
    out: set[Change] = set()
    if now.severity.rank > told.severity.rank:
        out.add(Change.SEVERITY_UP)
    elif now.severity.rank < told.severity.rank:
        out.add(Change.SEVERITY_DOWN)
    before, after = set(told.nodes), set(now.nodes)
    if after - before:
        out.add(Change.NODES_ADDED)
    if before - after:
        out.add(Change.NODES_REMOVED)
    if now.actual != told.actual:
        out.add(Change.ACTUAL)
    return frozenset(out)


class _Draft:
    """Mutable copies of the state's maps for one planning round (copied once per call)."""

    def __init__(self, state: NotifierState) -> None:
        self.firing = {sink: dict(alerts) for sink, alerts in state.firing.items()}
        self.resolving = {sink: dict(p) for sink, p in state.resolving.items()}

    def state(self) -> NotifierState:
        return NotifierState(
            {s: a for s, a in self.firing.items() if a},
            {s: p for s, p in self.resolving.items() if p},
        )


def _next_due(policy: SinkPolicy, now: datetime) -> datetime | None:
    return now + policy.renotify_every if policy.renotify_every is not None else None


def plan(
    state: NotifierState,
    events: Iterable[FindingEvent],
    *,
    now: datetime,
    sinks: Sequence[SinkPolicy],
    decisions: Mapping[str, PolicyDecision] | None = None,
) -> Plan:
    """The notifications ``events`` call for, per sink, and the state after them.

    ``decisions`` (optional) maps finding ids to the policy decision taken for them (a plain
    dict, e.g. ``{"action": "remediate", "mode": "dry-run"}``); it travels with the notification.
    """
    draft = _Draft(state)
    out: list[Notification] = []
    decisions = decisions or {}
    for event in events:
        decision = decisions.get(event.finding.id)
        for policy in sinks:
            note = _apply(draft, policy, event, decision, now)
            if note is not None:
                out.append(note)
    return Plan(draft.state(), tuple(out))


def _apply(
    draft: _Draft,
    policy: SinkPolicy,
    event: FindingEvent,
    decision: PolicyDecision | None,
    now: datetime,
) -> Notification | None:
    finding, fid = event.finding, event.finding.id
    firing = draft.firing.setdefault(policy.name, {})
    alert = firing.get(fid)
    if event.type is FindingEventType.CLEARED:
        if alert is None:
            return None
        del firing[fid]
        if not policy.send_resolved:
            return None
        return Notification(
            policy.name,
            Status.RESOLVED,
            Trigger.CLEARED,
            finding,
            at=event.at,
            since=alert.since,
            sequence=alert.sequence + 1,
            previous_severity=alert.sent.severity,
            decision=decision if decision is not None else alert.decision,
            reason=event.reason,
        )
    if alert is None:
        if not finding.severity.at_least(policy.min_severity):
            return None
        # a resolve still waiting for delivery is overtaken by the new firing
        draft.resolving.get(policy.name, {}).pop(fid, None)
        firing[fid] = Alert(
            latest=finding,
            sent=finding,
            since=event.at,
            last_sent=now,
            sequence=1,
            next_due=_next_due(policy, now),
            decision=decision,
        )
        return Notification(
            policy.name,
            Status.FIRING,
            Trigger.APPEARED,
            finding,
            at=event.at,
            since=event.at,
            sequence=1,
            decision=decision,
        )
    changes = changes_between(alert.sent, finding)
    decision = decision if decision is not None else alert.decision
    if not changes & policy.on_change:
        firing[fid] = dataclasses.replace(alert, latest=finding, decision=decision)
        return None
    firing[fid] = dataclasses.replace(
        alert,
        latest=finding,
        sent=finding,
        last_sent=now,
        sequence=alert.sequence + 1,
        next_due=_next_due(policy, now),
        decision=decision,
    )
    return Notification(
        policy.name,
        Status.FIRING,
        Trigger.CHANGED,
        finding,
        at=event.at,
        since=alert.since,
        sequence=alert.sequence + 1,
        changes=changes,
        previous_severity=alert.sent.severity,
        decision=decision,
    )


def plan_due(state: NotifierState, *, now: datetime, sinks: Sequence[SinkPolicy]) -> Plan:
    """Repeats of firing alerts whose time has come, and retries of failed deliveries."""
    draft = _Draft(state)
    out: list[Notification] = []
    for policy in sinks:
        firing = draft.firing.get(policy.name, {})
        for fid, alert in list(firing.items()):
            if alert.next_due is None or alert.next_due > now:
                continue
            trigger = Trigger.RETRY if alert.failures else Trigger.REPEAT
            changes = changes_between(alert.sent, alert.latest)
            firing[fid] = dataclasses.replace(
                alert,
                sent=alert.latest,
                last_sent=now,
                sequence=alert.sequence + 1,
                next_due=_next_due(policy, now),
            )
            out.append(
                Notification(
                    policy.name,
                    Status.FIRING,
                    trigger,
                    alert.latest,
                    at=now,
                    since=alert.since,
                    sequence=alert.sequence + 1,
                    changes=changes,
                    previous_severity=alert.sent.severity,
                    decision=alert.decision,
                )
            )
        pending = draft.resolving.get(policy.name, {})
        for fid, waiting in list(pending.items()):
            if waiting.due <= now:
                # stays pending until ``record_delivery`` hears it arrived
                pending[fid] = dataclasses.replace(waiting, due=now + policy.retry_after)
                out.append(dataclasses.replace(waiting.notification, trigger=Trigger.RETRY))
    return Plan(draft.state(), tuple(out))


def record_delivery(
    state: NotifierState,
    batch: Batch,
    *,
    ok: bool,
    now: datetime,
    sinks: Sequence[SinkPolicy],
) -> NotifierState:
    """The state after ``batch`` was delivered (``ok``) or not.

    A failed firing is retried after ``retry_after`` (at most ``max_retries`` times in a row,
    then it waits for the re-notify schedule); a failed resolve is re-sent with the same key
    up to ``max_retries`` times, unless the finding fires again first. An outcome is ignored
    for an alert that has moved on (a newer message about it was planned since).
    """
    policy = next((p for p in sinks if p.name == batch.sink), None)
    if policy is None:
        return state
    draft = _Draft(state)
    firing = draft.firing.setdefault(batch.sink, {})
    pending = draft.resolving.setdefault(batch.sink, {})
    for note in batch.notifications:
        alert = firing.get(note.id)
        if note.status is Status.FIRING:
            if alert is None or alert.since != note.since or alert.sequence != note.sequence:
                continue
            if ok:
                firing[note.id] = dataclasses.replace(alert, failures=0)
                continue
            failures = alert.failures + 1
            due = now + policy.retry_after if failures <= policy.max_retries else None
            firing[note.id] = dataclasses.replace(
                alert, failures=failures, next_due=due or _next_due(policy, now)
            )
            continue
        waiting = pending.get(note.id)
        same = waiting is not None and waiting.notification.key == note.key
        if ok or alert is not None:
            if same:
                del pending[note.id]  # delivered, or moot: the finding fires again
            continue
        tried = waiting.attempts + 1 if waiting is not None and same else 1
        if tried > policy.max_retries:
            pending.pop(note.id, None)
            continue
        pending[note.id] = PendingResolve(note, now + policy.retry_after, tried)
    return draft.state()


def batches(notifications: Iterable[Notification], sinks: Sequence[SinkPolicy]) -> list[Batch]:
    """Notifications grouped per sink by its ``group_by``, in first-seen order."""
    group_by = {p.name: p.group_by for p in sinks}
    groups: dict[tuple[str, Any], list[Notification]] = {}
    for note in notifications:
        how = group_by.get(note.sink, GroupBy.NONE)
        f = note.finding
        key: Any
        if how is GroupBy.NONE:
            key = (note.id, note.key)
        elif how is GroupBy.CLUSTER:
            key = f.cluster
        elif how is GroupBy.POOL:
            key = f.subject  # the node pool, or the workload object, the finding is about
        else:
            key = None
        groups.setdefault((note.sink, key), []).append(note)
    return [Batch(sink, tuple(notes)) for (sink, _), notes in groups.items()]
