"""Notification decisions: firing on appear, resolved on clear, de-duplication by finding id,
re-notify with a fake clock, per-sink thresholds and change rules, retries after failed
deliveries, grouping; and, for any event sequence, the alternation a sink sees."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core import notifying
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.notifying import (
    Batch,
    Change,
    GroupBy,
    NotifierState,
    SinkPolicy,
    Status,
    Trigger,
)
from fleetwarden.core.tracking import FindingEvent, FindingEventType, FindingTracker
from fleetwarden.ports.sources import FixedClock

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
APPEARED, CHANGED, CLEARED = (
    FindingEventType.APPEARED,
    FindingEventType.CHANGED,
    FindingEventType.CLEARED,
)


def finding(
    field: str = "labels.team",
    *,
    severity: Severity = Severity.HIGH,
    nodes: tuple[str, ...] = ("n1",),
    actual: str = "payments",
    cluster: str = "prod-eu-1",
    pool: str | None = "general",
) -> Finding:
    return Finding(
        cluster=cluster,
        pool=pool,
        layer=Layer.L1,
        field=field,
        expected="platform",
        actual=actual,
        severity=severity,
        nodes=nodes,
    )


def ev(kind: FindingEventType, f: Finding, at: datetime = T0, reason: str | None = None):
    return FindingEvent(kind, f, at, reason)


class Harness:
    """Feeds events through ``plan``/``plan_due``/``record_delivery`` like the shell does."""

    def __init__(self, *sinks: SinkPolicy) -> None:
        self.sinks = sinks or (SinkPolicy("ops"),)
        self.state = NotifierState()
        self.clock = FixedClock(T0)

    def feed(self, *events: FindingEvent, decisions=None) -> list[notifying.Notification]:
        plan = notifying.plan(
            self.state, events, now=self.clock.now(), sinks=self.sinks, decisions=decisions
        )
        self.state = plan.state
        return list(plan.notifications)

    def due(self) -> list[notifying.Notification]:
        plan = notifying.plan_due(self.state, now=self.clock.now(), sinks=self.sinks)
        self.state = plan.state
        return list(plan.notifications)

    def outcome(self, notes, *, ok: bool) -> None:
        for batch in notifying.batches(notes, self.sinks):
            self.state = notifying.record_delivery(
                self.state, batch, ok=ok, now=self.clock.now(), sinks=self.sinks
            )


def kinds(notes) -> list[tuple[str, str]]:
    return [(n.status.value, n.trigger.value) for n in notes]


# --- firing, resolving, de-duplication --------------------------------------------------------


def test_appeared_fires_once_and_cleared_resolves_once():
    h = Harness()
    f = finding()
    (fire,) = h.feed(ev(APPEARED, f))
    assert (fire.status, fire.trigger, fire.sequence, fire.since) == (
        Status.FIRING,
        Trigger.APPEARED,
        1,
        T0,
    )
    assert fire.previous_severity is None
    later = h.clock.advance(minutes=10)
    (done,) = h.feed(ev(CLEARED, f, later, reason="cluster removed"))
    assert (done.status, done.trigger, done.sequence) == (Status.RESOLVED, Trigger.CLEARED, 2)
    assert done.since == T0 and done.at == later and done.reason == "cluster removed"
    assert done.previous_severity is Severity.HIGH
    assert h.state.firing_ids("ops") == frozenset()
    assert h.feed(ev(CLEARED, f, later)) == [], "a second clear must not resolve again"


def test_a_repeated_appeared_for_a_firing_id_is_deduplicated():
    """A relist or a tracker restart re-emits ``appeared``: the sink hears nothing new."""
    h = Harness()
    f = finding()
    h.feed(ev(APPEARED, f))
    assert h.feed(ev(APPEARED, f), ev(APPEARED, f)) == []
    assert h.state.alert("ops", f.id).sequence == 1


def test_clear_of_an_id_the_sink_never_heard_of_says_nothing():
    h = Harness()
    assert h.feed(ev(CLEARED, finding())) == []


def test_send_resolved_false_drops_the_resolve_but_forgets_the_alert():
    h = Harness(SinkPolicy("pager", send_resolved=False))
    f = finding()
    h.feed(ev(APPEARED, f))
    assert h.feed(ev(CLEARED, f)) == []
    assert kinds(h.feed(ev(APPEARED, f))) == [("firing", "appeared")]


def test_the_policy_decision_travels_with_the_notification_and_its_resolve():
    h = Harness()
    f = finding()
    decision = {"action": "remediate", "mode": "dry-run"}
    (fire,) = h.feed(ev(APPEARED, f), decisions={f.id: decision})
    assert fire.decision == decision
    (done,) = h.feed(ev(CLEARED, f))
    assert done.decision == decision
    assert done.to_json()["decision"] == decision


def test_works_on_the_trackers_own_events():
    """The tracker's appeared/changed/cleared drive it end to end."""
    tracker, h = FindingTracker(), Harness()
    scope = ("prod-eu-1", "general")
    a, b = finding("labels.a"), finding("labels.b")
    assert kinds(h.feed(*tracker.update(scope, [a, b], now=T0))) == [("firing", "appeared")] * 2
    assert h.feed(*tracker.update(scope, [a, b], now=T0)) == []
    assert kinds(h.feed(*tracker.update(scope, [a], now=T0))) == [("resolved", "cleared")]


# --- changes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "notified"),
    [
        pytest.param({"severity": Severity.CRITICAL}, True, id="severity-rises"),
        pytest.param({"severity": Severity.LOW}, False, id="severity-falls"),
        pytest.param({"nodes": ("n1", "n2")}, True, id="node-added"),
        pytest.param({"nodes": ()}, False, id="node-removed"),
        pytest.param({"nodes": ("n2",)}, True, id="node-swapped-is-an-addition"),
    ],
)
def test_changed_notifies_only_on_severity_rise_or_node_growth_by_default(change, notified):
    h = Harness()
    f = finding()
    h.feed(ev(APPEARED, f))
    g = dataclasses.replace(f, **change)
    notes = h.feed(ev(CHANGED, g))
    assert bool(notes) is notified
    if notified:
        (n,) = notes
        assert (n.trigger, n.sequence, n.since, n.previous_severity) == (
            Trigger.CHANGED,
            2,
            T0,
            Severity.HIGH,
        )
    assert h.state.alert("ops", f.id).latest == g


def test_change_rules_are_configurable_per_sink():
    quiet = SinkPolicy("quiet", on_change=frozenset())
    chatty = SinkPolicy("chatty", on_change=frozenset(Change))
    h = Harness(quiet, chatty)
    f = finding()
    h.feed(ev(APPEARED, f))
    (n,) = h.feed(ev(CHANGED, dataclasses.replace(f, severity=Severity.LOW, nodes=())))
    assert n.sink == "chatty"
    assert n.changes == {Change.SEVERITY_DOWN, Change.NODES_REMOVED}


def test_growth_is_measured_against_what_the_sink_was_told():
    """Nodes removed (not notified) and added back are no growth; a new one is."""
    h = Harness()
    f = finding(nodes=("n1", "n2"))
    h.feed(ev(APPEARED, f))
    assert h.feed(ev(CHANGED, dataclasses.replace(f, nodes=("n1",)))) == []
    assert h.feed(ev(CHANGED, dataclasses.replace(f, nodes=("n1", "n2")))) == []
    (n,) = h.feed(ev(CHANGED, dataclasses.replace(f, nodes=("n1", "n2", "n3"))))
    assert n.changes == {Change.NODES_ADDED}


# --- thresholds -------------------------------------------------------------------------------


def test_severity_threshold_is_per_sink():
    h = Harness(SinkPolicy("chat"), SinkPolicy("pager", min_severity=Severity.CRITICAL))
    low = finding("labels.low", severity=Severity.LOW)
    crit = finding("labels.crit", severity=Severity.CRITICAL)
    notes = h.feed(ev(APPEARED, low), ev(APPEARED, crit))
    assert [(n.sink, n.id) for n in notes] == [
        ("chat", low.id),
        ("chat", crit.id),
        ("pager", crit.id),
    ]
    notes = h.feed(ev(CLEARED, low))
    assert [n.sink for n in notes] == ["chat"], "pager never heard of it: no resolve"


def test_rising_over_the_threshold_is_the_first_firing_for_that_sink():
    h = Harness(SinkPolicy("pager", min_severity=Severity.HIGH, on_change=frozenset()))
    f = finding(severity=Severity.LOW)
    assert h.feed(ev(APPEARED, f)) == []
    (n,) = h.feed(ev(CHANGED, dataclasses.replace(f, severity=Severity.HIGH)))
    assert (n.trigger, n.sequence) == (Trigger.APPEARED, 1)


def test_falling_under_the_threshold_keeps_firing_until_cleared():
    h = Harness(SinkPolicy("pager", min_severity=Severity.HIGH))
    f = finding(severity=Severity.HIGH)
    h.feed(ev(APPEARED, f))
    assert h.feed(ev(CHANGED, dataclasses.replace(f, severity=Severity.LOW))) == []
    assert kinds(h.feed(ev(CLEARED, f))) == [("resolved", "cleared")]


# --- re-notify with a fake clock --------------------------------------------------------------


def test_still_firing_is_repeated_at_most_every_renotify_interval():
    h = Harness(SinkPolicy("ops", renotify_every=timedelta(hours=4)))
    f = finding()
    h.feed(ev(APPEARED, f))
    h.clock.advance(hours=3, minutes=59)
    assert h.due() == []
    h.clock.advance(minutes=1)
    (rep,) = h.due()
    assert (rep.trigger, rep.sequence, rep.since, rep.at) == (Trigger.REPEAT, 2, T0, h.clock.now())
    assert h.due() == [], "just repeated: not due again"
    h.clock.advance(hours=4)
    assert kinds(h.due()) == [("firing", "repeat")]


def test_a_notified_change_restarts_the_renotify_interval():
    h = Harness(SinkPolicy("ops", renotify_every=timedelta(hours=4)))
    f = finding()
    h.feed(ev(APPEARED, f))
    h.clock.advance(hours=3)
    h.feed(ev(CHANGED, dataclasses.replace(f, severity=Severity.CRITICAL)))
    h.clock.advance(hours=3)
    assert h.due() == []
    h.clock.advance(hours=1)
    (rep,) = h.due()
    assert rep.finding.severity is Severity.CRITICAL


def test_a_repeat_carries_the_latest_finding_and_what_changed_silently():
    h = Harness()
    f = finding(nodes=("n1", "n2"))
    h.feed(ev(APPEARED, f))
    h.feed(ev(CHANGED, dataclasses.replace(f, nodes=("n1",))))
    h.clock.advance(hours=4)
    (rep,) = h.due()
    assert rep.finding.nodes == ("n1",) and rep.changes == {Change.NODES_REMOVED}


def test_renotify_none_never_repeats():
    h = Harness(SinkPolicy("once", renotify_every=None))
    h.feed(ev(APPEARED, finding()))
    h.clock.advance(days=30)
    assert h.due() == []


# --- failed deliveries ------------------------------------------------------------------------


def test_a_failed_firing_is_retried_after_retry_after_then_follows_the_schedule():
    policy = SinkPolicy("ops", retry_after=timedelta(minutes=1), max_retries=2)
    h = Harness(policy)
    f = finding()
    first = h.feed(ev(APPEARED, f))
    h.outcome(first, ok=False)
    assert h.due() == []
    h.clock.advance(minutes=1)
    retry = h.due()
    assert kinds(retry) == [("firing", "retry")]
    h.outcome(retry, ok=False)
    h.clock.advance(minutes=1)
    retry = h.due()
    h.outcome(retry, ok=False)  # third failure in a row: beyond max_retries
    h.clock.advance(minutes=1)
    assert h.due() == [], "back on the 4 h schedule"
    h.clock.advance(hours=4)
    again = h.due()
    assert kinds(again) == [("firing", "retry")]
    h.outcome(again, ok=True)
    h.clock.advance(hours=4)
    assert kinds(h.due()) == [("firing", "repeat")]


def test_a_failed_resolve_is_resent_with_the_same_key_until_delivered():
    h = Harness(SinkPolicy("ops", retry_after=timedelta(minutes=1)))
    f = finding()
    h.feed(ev(APPEARED, f))
    (done,) = h.feed(ev(CLEARED, f))
    h.outcome([done], ok=False)
    h.clock.advance(minutes=1)
    (again,) = h.due()
    assert (again.status, again.trigger, again.key) == (Status.RESOLVED, Trigger.RETRY, done.key)
    h.outcome([again], ok=True)
    h.clock.advance(hours=1)
    assert h.due() == []


def test_a_failed_resolve_gives_up_after_max_retries():
    h = Harness(SinkPolicy("ops", retry_after=timedelta(minutes=1), max_retries=2))
    f = finding()
    h.feed(ev(APPEARED, f))
    notes = h.feed(ev(CLEARED, f))
    sent = 0
    while notes:
        h.outcome(notes, ok=False)
        h.clock.advance(minutes=1)
        notes = h.due()
        sent += len(notes)
    assert sent == 2


def test_a_pending_resolve_is_dropped_when_the_finding_fires_again():
    h = Harness()
    f = finding()
    h.feed(ev(APPEARED, f))
    done = h.feed(ev(CLEARED, f))
    h.outcome(done, ok=False)
    assert kinds(h.feed(ev(APPEARED, f))) == [("firing", "appeared")]
    h.clock.advance(minutes=5)
    assert h.due() == []


def test_an_outcome_for_a_superseded_message_is_ignored():
    h = Harness()
    f = finding()
    first = h.feed(ev(APPEARED, f))
    h.feed(ev(CHANGED, dataclasses.replace(f, severity=Severity.CRITICAL)))
    h.outcome(first, ok=False)
    assert h.state.alert("ops", f.id).failures == 0


# --- grouping and payload values --------------------------------------------------------------


@pytest.mark.parametrize(
    ("group_by", "sizes"),
    [
        (GroupBy.NONE, [1, 1, 1, 1]),
        (GroupBy.CLUSTER, [3, 1]),
        (GroupBy.POOL, [2, 1, 1]),
        (GroupBy.ALL, [4]),
    ],
)
def test_grouping_by_cluster_pool_or_all(group_by, sizes):
    h = Harness(SinkPolicy("ops", group_by=group_by))
    notes = h.feed(
        ev(APPEARED, finding("a", cluster="c1", pool="p1")),
        ev(APPEARED, finding("b", cluster="c1", pool="p1")),
        ev(APPEARED, finding("c", cluster="c1", pool="p2")),
        ev(APPEARED, finding("d", cluster="c2", pool="p1")),
    )
    groups = notifying.batches(notes, h.sinks)
    assert [len(b.notifications) for b in groups] == sizes
    assert [n for b in groups for n in b.notifications] == notes, "order kept"


def test_batch_names_its_shared_cluster_and_pool_only_when_shared():
    a, b = finding("a", cluster="c1", pool="p1"), finding("b", cluster="c1", pool="p2")
    notes = Harness(SinkPolicy("ops", group_by=GroupBy.ALL)).feed(ev(APPEARED, a), ev(APPEARED, b))
    batch = Batch("ops", tuple(notes))
    assert (batch.cluster, batch.pool) == ("c1", None)
    assert (Batch("ops", notes[:1]).cluster, Batch("ops", notes[:1]).pool) == ("c1", "p1")


def test_keys_are_stable_per_message_and_distinct_per_firing_episode():
    h = Harness()
    f = finding()
    (a,) = h.feed(ev(APPEARED, f))
    assert a.key == dataclasses.replace(a, trigger=Trigger.RETRY).key
    (r,) = h.feed(ev(CLEARED, f))
    h.clock.advance(minutes=1)
    (b,) = h.feed(ev(APPEARED, f, h.clock.now()))
    assert len({a.key, r.key, b.key}) == 3


def test_notification_json_shape():
    (n,) = Harness().feed(ev(APPEARED, finding()))
    data = n.to_json()
    assert data["status"] == "firing" and data["trigger"] == "appeared"
    assert data["since"] == data["at"] == "2025-03-01T12:00:00Z"
    assert data["finding"]["id"] == n.id and data["sequence"] == 1


def test_timestamp_takes_naive_as_utc_and_converts_offsets():
    assert notifying.timestamp(datetime(2025, 1, 1)) == "2025-01-01T00:00:00Z"
    plus2 = datetime(2025, 1, 1, 4, tzinfo=timezone(timedelta(hours=2)))
    assert notifying.timestamp(plus2) == "2025-01-01T02:00:00Z"


def test_policy_validation_names_the_sink():
    with pytest.raises(ValueError, match=r"'x'.*renotify_every"):
        SinkPolicy("x", renotify_every=timedelta(0))
    with pytest.raises(ValueError, match="name"):
        SinkPolicy("")


def test_plan_does_not_mutate_the_state_it_was_given():
    state = NotifierState()
    f = finding()
    after = notifying.plan(state, [ev(APPEARED, f)], now=T0, sinks=[SinkPolicy("ops")]).state
    assert state.firing == {} and after.firing_ids("ops") == {f.id}
    notifying.plan(after, [ev(CLEARED, f)], now=T0, sinks=[SinkPolicy("ops")])
    assert after.firing_ids("ops") == {f.id}


# --- property: what a sink sees alternates ----------------------------------------------------

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["appeared", "cleared", "changed", "tick", "fail"]),
        st.sampled_from(list(Severity)),
        st.integers(min_value=0, max_value=6 * 3600),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(steps=STEPS)
def test_for_any_event_sequence_the_sink_never_sees_two_resolves_in_a_row(steps):
    """Whatever the order of appeared/changed/cleared events, re-notify ticks and failed
    deliveries for one finding id: every resolve follows a firing, never another resolve, and
    firing/resolved alternate in the appeared/cleared messages."""
    h = Harness(
        SinkPolicy("ops", min_severity=Severity.LOW, renotify_every=timedelta(hours=1)),
    )
    seen: list[notifying.Notification] = []
    for kind, severity, seconds in steps:
        h.clock.advance(seconds=seconds)
        f = finding(severity=severity)
        if kind == "tick":
            notes = h.due()
        elif kind == "fail":
            notes = []
            if seen:
                h.outcome(seen[-1:], ok=False)
        else:
            etype = {"appeared": APPEARED, "cleared": CLEARED, "changed": CHANGED}[kind]
            notes = h.feed(ev(etype, f, h.clock.now()))
        assert len(notes) <= 1
        seen += notes
    statuses = [n.status for n in seen if n.trigger is not Trigger.RETRY]
    for before, after in itertools.pairwise(statuses):
        assert not (before is Status.RESOLVED and after is Status.RESOLVED)
    if statuses:
        assert statuses[0] is Status.FIRING
    edges = [n.status for n in seen if n.trigger in (Trigger.APPEARED, Trigger.CLEARED)]
    assert edges == [Status.FIRING, Status.RESOLVED] * (len(edges) // 2) + (
        [Status.FIRING] if len(edges) % 2 else []
    )


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.sampled_from(["appeared", "cleared"]), max_size=40))
def test_appeared_cleared_sequences_alternate_strictly(ops):
    """Only appeared/cleared events, no ticks: the sink sees firing, resolved, firing, ..."""
    h = Harness()
    f = finding()
    seen = []
    for op in ops:
        seen += h.feed(ev(APPEARED if op == "appeared" else CLEARED, f))
    statuses = [n.status for n in seen]
    assert statuses == [Status.FIRING, Status.RESOLVED] * (len(statuses) // 2) + (
        [Status.FIRING] if len(statuses) % 2 else []
    )
