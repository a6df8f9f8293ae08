"""Cluster health transitions (``HealthTracker``) and finding bookkeeping (``FindingTracker``):
what is reported when, and that nothing is reported twice."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from fleetwarden.core.diffing import diff_pool
from fleetwarden.core.findings import Finding, Layer, Severity, finding_id
from fleetwarden.core.lifecycle import (
    ClusterHealth,
    HealthTracker,
    LifecycleEvent,
    LifecycleType,
    ProbeResult,
)
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.tracking import FindingEventType, FindingTracker

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
H = ClusterHealth
OK = ProbeResult(ready=True)
NOT_READY = ProbeResult(ready=False, detail="[-]etcd failed: reason withheld")
DOWN = ProbeResult(ready=None, error="connect: connection refused")


def health_moves(events: list[LifecycleEvent]) -> list[tuple[str, str]]:
    return [(e.details["from"], e.details["to"]) for e in events if e.type is LifecycleType.HEALTH]


# --- HealthTracker: the transition table ---------------------------------------------------


@pytest.mark.parametrize(
    ("state", "failures", "threshold", "probe", "want_state", "want_failures", "want_moves"),
    [
        pytest.param(H.UNKNOWN, 0, 3, OK, H.HEALTHY, 0, [("Unknown", "Healthy")], id="first-ok"),
        pytest.param(
            H.UNKNOWN, 0, 3, NOT_READY, H.DEGRADED, 0, [("Unknown", "Degraded")], id="first-404"
        ),
        pytest.param(
            H.HEALTHY, 0, 3, NOT_READY, H.DEGRADED, 0, [("Healthy", "Degraded")], id="degrades"
        ),
        pytest.param(H.DEGRADED, 0, 3, OK, H.HEALTHY, 0, [("Degraded", "Healthy")], id="recovers"),
        pytest.param(H.HEALTHY, 0, 3, OK, H.HEALTHY, 0, [], id="steady-healthy-is-silent"),
        pytest.param(H.DEGRADED, 0, 3, NOT_READY, H.DEGRADED, 0, [], id="steady-degraded"),
        pytest.param(H.HEALTHY, 0, 3, DOWN, H.HEALTHY, 1, [], id="one-failure-keeps-state"),
        pytest.param(H.HEALTHY, 1, 3, DOWN, H.HEALTHY, 2, [], id="two-failures-keep-state"),
        pytest.param(H.UNKNOWN, 1, 3, DOWN, H.UNKNOWN, 2, [], id="unknown-below-threshold"),
        pytest.param(
            H.HEALTHY,
            2,
            3,
            DOWN,
            H.UNREACHABLE,
            3,
            [("Healthy", "Unreachable")],
            id="threshold-reached",
        ),
        pytest.param(
            H.UNKNOWN, 0, 1, DOWN, H.UNREACHABLE, 1, [("Unknown", "Unreachable")], id="threshold-1"
        ),
        pytest.param(H.UNREACHABLE, 3, 3, DOWN, H.UNREACHABLE, 4, [], id="still-unreachable"),
        pytest.param(
            H.UNREACHABLE,
            7,
            3,
            OK,
            H.HEALTHY,
            0,
            [("Unreachable", "Healthy")],
            id="answer-resets-count",
        ),
        pytest.param(
            H.HEALTHY, 2, 3, NOT_READY, H.DEGRADED, 0, [("Healthy", "Degraded")], id="404-resets"
        ),
    ],
)
def test_health_transition_table(
    state, failures, threshold, probe, want_state, want_failures, want_moves
):
    tracker = HealthTracker("c1", failure_threshold=threshold, state=state, failures=failures)
    events = tracker.observe(probe, now=T0)
    assert (tracker.state, tracker.failures) == (want_state, want_failures)
    assert health_moves(events) == want_moves
    assert all(e.cluster == "c1" and e.at == T0 for e in events)


def test_transition_reason_is_the_error_or_the_readyz_detail():
    tracker = HealthTracker("c1", failure_threshold=1)
    (down,) = tracker.observe(DOWN, now=T0)
    assert down.details["reason"] == "connect: connection refused"
    (degraded,) = tracker.observe(NOT_READY, now=T0)
    assert degraded.details["reason"] == NOT_READY.detail
    (healthy,) = tracker.observe(OK, now=T0)
    assert healthy.details["reason"] is None
    assert healthy.to_json() == {
        "type": "cluster.health",
        "cluster": "c1",
        "at": "2025-03-01T12:00:00Z",
        "from": "Degraded",
        "to": "Healthy",
        "reason": None,
    }


def test_recovery_resets_the_failure_count():
    """Failures must be *consecutive*: an answer in between starts the count again."""
    tracker = HealthTracker("c1", failure_threshold=3)
    for probe in (OK, DOWN, DOWN, OK, DOWN, DOWN):
        tracker.observe(probe, now=T0)
    assert tracker.state is H.HEALTHY
    assert health_moves(tracker.observe(DOWN, now=T0)) == [("Healthy", "Unreachable")]


def test_first_version_seen_is_not_an_upgrade():
    tracker = HealthTracker("c1")
    events = tracker.observe(ProbeResult(ready=True, version="v1.29.3"), now=T0)
    assert [e.type for e in events] == [LifecycleType.HEALTH]
    assert tracker.version == "v1.29.3"


def test_version_change_is_an_upgrade_with_from_and_to():
    tracker = HealthTracker("c1", version="v1.29.3", state=H.HEALTHY)
    assert tracker.observe(ProbeResult(ready=True, version="v1.29.3"), now=T0) == []
    later = T0 + timedelta(minutes=5)
    (upgraded,) = tracker.observe(ProbeResult(ready=True, version="v1.30.0"), now=later)
    assert upgraded.type is LifecycleType.UPGRADED
    assert upgraded.details == {"from": "v1.29.3", "to": "v1.30.0"}
    assert upgraded.at == later
    assert upgraded.to_json()["type"] == "cluster.upgraded"


def test_an_outage_does_not_forget_the_version():
    """A probe without a version (no answer) must not make the next version look new."""
    tracker = HealthTracker("c1", failure_threshold=1)
    tracker.observe(ProbeResult(ready=True, version="v1.29.3"), now=T0)
    tracker.observe(DOWN, now=T0)
    assert tracker.version == "v1.29.3"
    same = tracker.observe(ProbeResult(ready=True, version="v1.29.3"), now=T0)
    assert [e.type for e in same] == [LifecycleType.HEALTH]
    changed = tracker.observe(ProbeResult(ready=True, version="v1.30.1"), now=T0)
    assert [(e.type, e.details) for e in changed] == [
        (LifecycleType.UPGRADED, {"from": "v1.29.3", "to": "v1.30.1"})
    ]


# --- HealthTracker: properties over any probe sequence -------------------------------------

probes = st.builds(
    ProbeResult,
    ready=st.sampled_from([True, False, None]),
    version=st.sampled_from([None, "v1.29.0", "v1.30.0"]),
    detail=st.sampled_from(["", "not ready"]),
    error=st.sampled_from([None, "timed out"]),
)


@settings(max_examples=300, deadline=None)
@given(threshold=st.integers(1, 5), seq=st.lists(probes, max_size=40))
def test_unreachable_only_after_threshold_consecutive_failures(threshold, seq):
    tracker = HealthTracker("c", failure_threshold=threshold)
    history: list[ProbeResult] = []
    for probe in seq:
        before = tracker.state
        history.append(probe)
        events = tracker.observe(probe, now=T0)
        moves = health_moves(events)
        # every emitted transition changes the state and chains from the previous one
        assert len(moves) <= 1
        for old, new in moves:
            assert old != new and old == before.value and new == tracker.state.value
        if not moves:
            assert tracker.state is before
        if tracker.state is H.UNREACHABLE:
            tail = history[-threshold:]
            entered_now = before is not H.UNREACHABLE
            if entered_now:
                assert len(tail) == threshold and all(p.ready is None for p in tail)
            assert probe.ready is None  # any answer leaves Unreachable at once
        streak = 0
        for p in reversed(history):
            if p.ready is not None:
                break
            streak += 1
        assert tracker.failures == streak


class HealthMachine(RuleBasedStateMachine):
    """A reference model: the state is a function of the last answer and the failure streak."""

    @initialize(threshold=st.integers(1, 4))
    def start(self, threshold):
        self.tracker = HealthTracker("c", failure_threshold=threshold)
        self.threshold = threshold
        self.last_answer: ClusterHealth = H.UNKNOWN
        self.streak = 0
        self.unreachable = False
        self.version: str | None = None

    def _observe(self, probe: ProbeResult) -> list[LifecycleEvent]:
        before = self.tracker.state
        events = self.tracker.observe(probe, now=T0)
        for e in events:
            if e.type is LifecycleType.HEALTH:
                assert e.details["from"] == before.value != e.details["to"]
        return events

    @rule(ready=st.booleans(), version=st.sampled_from([None, "v1", "v2", "v3"]))
    def answer(self, ready, version):
        events = self._observe(ProbeResult(ready=ready, version=version))
        self.last_answer = H.HEALTHY if ready else H.DEGRADED
        self.streak, self.unreachable = 0, False
        upgrades = [e for e in events if e.type is LifecycleType.UPGRADED]
        if version and self.version and version != self.version:
            assert [e.details for e in upgrades] == [{"from": self.version, "to": version}]
        else:
            assert upgrades == []
        if version:
            self.version = version

    @rule()
    def no_answer(self):
        events = self._observe(DOWN)
        self.streak += 1
        entering = self.streak >= self.threshold and not self.unreachable
        # entering Unreachable comes from the state of the last answer (or Unknown)
        assert health_moves(events) == (
            [(self.last_answer.value, "Unreachable")] if entering else []
        )
        self.unreachable = self.unreachable or entering

    @invariant()
    def state_matches_model(self):
        if not hasattr(self, "tracker"):
            return
        want = H.UNREACHABLE if self.unreachable else self.last_answer
        assert self.tracker.state is want
        assert self.tracker.failures == self.streak


TestHealthMachine = HealthMachine.TestCase
TestHealthMachine.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)


# --- FindingTracker -----------------------------------------------------------------------


def finding(
    actual: object = "payments",
    *,
    nodes: tuple[str, ...] = ("n-1",),
    severity: Severity = Severity.HIGH,
    cluster: str = "c1",
    pool: str | None = "general",
    field: str = "labels.team",
) -> Finding:
    return Finding(
        cluster=cluster,
        pool=pool,
        layer=Layer.L1,
        field=field,
        expected="platform",
        actual=actual,  # type: ignore[arg-type]
        severity=severity,
        nodes=nodes,
    )


def kinds(events) -> list[tuple[str, str]]:
    return [(e.type.value, e.finding.id) for e in events]


def test_new_finding_appears_once_and_an_identical_relist_is_silent():
    tracker = FindingTracker()
    f = finding()
    assert kinds(tracker.update(("c1", "general"), [f], now=T0)) == [("finding.appeared", f.id)]
    # a relist / reconnect re-diffs the same drift: equal, freshly built objects
    assert tracker.update(("c1", "general"), [finding()], now=T0) == []
    assert tracker.update(("c1", "general"), [finding()], now=T0) == []
    assert tracker.current() == [f]


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(finding(nodes=("n-1", "n-2")), id="more-nodes"),
        pytest.param(finding(nodes=()), id="fewer-nodes"),
        pytest.param(finding(severity=Severity.CRITICAL), id="severity"),
    ],
)
def test_same_id_with_new_nodes_or_severity_is_changed(changed):
    tracker = FindingTracker()
    tracker.update(("c1", "general"), [finding()], now=T0)
    assert changed.id == finding().id
    (event,) = tracker.update(("c1", "general"), [changed], now=T0)
    assert (event.type, event.finding) == (FindingEventType.CHANGED, changed)


def test_a_different_actual_value_is_a_new_finding_and_the_old_one_clears():
    tracker = FindingTracker()
    old, new = finding("payments"), finding("ops")
    tracker.update(("c1", "general"), [old], now=T0)
    events = tracker.update(("c1", "general"), [new], now=T0)
    assert sorted(kinds(events)) == sorted(
        [("finding.cleared", old.id), ("finding.appeared", new.id)]
    )


def test_cleared_when_gone_and_the_empty_scope_is_forgotten():
    tracker = FindingTracker()
    f = finding()
    tracker.update(("c1", "general"), [f], now=T0)
    later = T0 + timedelta(seconds=30)
    (event,) = tracker.update(("c1", "general"), [], now=later)
    assert (event.type, event.finding, event.at, event.reason) == (
        FindingEventType.CLEARED,
        f,
        later,
        None,
    )
    assert "reason" not in event.to_json()
    assert tracker.scopes_of("c1") == []
    assert tracker.update(("c1", "general"), [], now=later) == []


def test_scopes_are_independent():
    """Re-diffing one pool must not clear the findings of another."""
    tracker = FindingTracker()
    a = finding(pool="general")
    b = finding(pool="batch")
    tracker.update(("c1", "general"), [a], now=T0)
    tracker.update(("c1", "batch"), [b], now=T0)
    assert tracker.update(("c1", "general"), [a], now=T0) == []
    assert sorted(tracker.scopes_of("c1")) == [("c1", "batch"), ("c1", "general")]
    assert {f.id for f in tracker.current()} == {a.id, b.id}


def test_drop_cluster_clears_its_findings_with_the_reason_and_only_its_own():
    tracker = FindingTracker()
    mine = [finding(pool="general"), finding(pool=None, field="pool")]
    other = finding(cluster="c2")
    tracker.update(("c1", "general"), mine[:1], now=T0)
    tracker.update(("c1", None), mine[1:], now=T0)
    tracker.update(("c2", "general"), [other], now=T0)
    events = tracker.drop_cluster("c1", now=T0, reason="Argo CD secret argocd/c1 deleted")
    assert sorted(kinds(events)) == sorted(("finding.cleared", f.id) for f in mine)
    assert {e.reason for e in events} == {"Argo CD secret argocd/c1 deleted"}
    assert events[0].to_json()["reason"] == "Argo CD secret argocd/c1 deleted"
    assert tracker.current() == [other]
    assert tracker.drop_cluster("c1", now=T0, reason="again") == []


def test_count_finding_keeps_its_id_as_the_count_moves():
    """A pool below its minimum that gains (not enough) nodes is one finding that *changes*."""
    spec = NodePoolSpec(name="general", cluster="c1", min_size=5, max_size=10)
    tracker = FindingTracker()
    ids = []
    for n, want in ((0, "finding.appeared"), (2, "finding.changed"), (4, "finding.changed")):
        nodes = [ObservedNode(name=f"n-{i}") for i in range(n)]
        (count,) = [f for f in diff_pool(spec, nodes) if f.layer is Layer.COUNT]
        assert count.actual == n
        ids.append(count.id)
        assert kinds(tracker.update(("c1", "general"), [count], now=T0)) == [(want, count.id)]
    assert len(set(ids)) == 1
    (cleared,) = tracker.update(("c1", "general"), [], now=T0)
    assert cleared.type is FindingEventType.CLEARED and cleared.finding.id == ids[0]


_SCOPES = st.sampled_from([("c1", "general"), ("c1", None), ("c2", "general")])
_FINDINGS = st.lists(
    st.builds(
        finding,
        actual=st.sampled_from(["a", "b", "c"]),
        severity=st.sampled_from(list(Severity)),
        field=st.sampled_from(["labels.team", "labels.role"]),
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("update"), _SCOPES, _FINDINGS),
            st.tuples(st.just("drop"), st.sampled_from(["c1", "c2"]), st.just([])),
        ),
        max_size=12,
    )
)
def test_counts_by_severity_are_kept_equal_to_a_full_recount(steps):
    """The service sets its findings gauge from ``counts()`` on every finding event: kept as
    scopes change, it must always equal counting every current finding again."""
    tracker = FindingTracker()
    for kind, where, found in steps:
        if kind == "update":
            scope = (where[0], where[1])
            placed = [dataclasses.replace(f, cluster=scope[0], pool=scope[1]) for f in found]
            tracker.update(scope, placed, now=T0)
        else:
            tracker.drop_cluster(where, now=T0, reason="gone")
        recount = Counter(f.severity for f in tracker.current())
        assert {s: n for s, n in tracker.counts().items() if n} == dict(recount)


# --- finding ids --------------------------------------------------------------------------


def test_finding_id_ignores_nodes_but_not_place_or_values():
    base = finding()
    assert finding(nodes=("a", "b", "c")).id == base.id
    assert len(base.id) == 16 and int(base.id, 16) >= 0
    for other in (
        finding("ops"),
        finding(cluster="c2"),
        finding(pool="batch"),
        finding(pool=None),
        finding(field="labels.tier"),
    ):
        assert other.id != base.id


@pytest.mark.parametrize(
    ("layer", "field"),
    [(Layer.COUNT, "nodeCount"), (Layer.L4, "kubeletVersion.mixed")],
)
def test_moving_pool_states_are_identified_without_their_actual_value(layer, field):
    a = finding_id("c1", "general", layer, field, "1.30", ["v1.29.1", "v1.30.2"])
    b = finding_id("c1", "general", layer, field, "1.30", ["v1.30.2"])
    assert a == b
    assert finding_id("c1", "general", layer, field, "1.31", None) != a


@settings(max_examples=200, deadline=None)
@given(seq=st.lists(probes, min_size=1, max_size=20))
def test_the_last_error_is_the_last_probe_s_when_it_had_no_answer(seq):
    """What ``watch`` says of a cluster it never compared: why the last probe failed."""
    tracker = HealthTracker("c")
    for probe in seq:
        tracker.observe(probe, now=T0)
    last = seq[-1]
    if last.ready is None:
        assert tracker.last_error == (last.error or "no answer")
    else:
        assert tracker.last_error is None
