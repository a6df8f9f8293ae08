"""Leader election decisions (client-go semantics) and the one property that matters: never
two replicas that believe they lead at one instant, under any interleaving of reads, writes,
lost answers and clocks whose rates drift within the documented bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fleetwarden.core.leadership import (
    Action,
    Decision,
    ElectionTiming,
    LeaseRecord,
    Observation,
    Term,
    decide,
    fence_problem,
    observe,
    released,
    term_after,
)

WALL = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
TIMING = ElectionTiming(lease_duration=15, renew_deadline=10, retry_period=2)


def rec(holder: str, transitions: int = 0, duration: int = 15) -> LeaseRecord:
    return LeaseRecord(holder, duration, WALL, WALL, transitions)


def run(observed: Observation | None, term: Term | None = None, *, now: float, me: str = "a"):
    return decide(observed, identity=me, now=now, wall=WALL, timing=TIMING, term=term)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"lease_duration": 10, "renew_deadline": 10, "retry_period": 2}, "shorter than"),
        ({"lease_duration": 10, "renew_deadline": 12, "retry_period": 2}, "shorter than"),
        ({"lease_duration": 15, "renew_deadline": 2.4, "retry_period": 2}, "1.2 x retryPeriod"),
        ({"lease_duration": 0, "renew_deadline": 1, "retry_period": 0.5}, "at least 1"),
        ({"lease_duration": 15, "renew_deadline": 10, "retry_period": 0}, "retryPeriod"),
        (
            {"lease_duration": 15, "renew_deadline": float("nan"), "retry_period": 1},
            "renewDeadline",
        ),
    ],
)
def test_timing_refuses_a_deadline_that_could_outlive_the_lease(kwargs, says):
    with pytest.raises(ValueError, match=says):
        ElectionTiming(**kwargs)


def test_no_lease_is_created_with_transitions_zero():
    d = run(None, now=0)
    assert d.action is Action.ACQUIRE and d.expect_version is None
    assert d.record == LeaseRecord("a", 15, WALL, WALL, 0)


def test_a_live_lease_of_another_is_followed_until_unchanged_for_its_duration():
    seen = observe(None, rec("b", 3), "7", now=100.0)
    assert run(seen, now=114.999).action is Action.FOLLOW
    d = run(seen, now=115.0)
    assert d.action is Action.ACQUIRE and d.expect_version == "7"
    assert d.record is not None and d.record.lease_transitions == 4
    assert "not renewed for 15.000s" in d.reasons[0]


def test_expiry_uses_the_records_duration_and_my_first_sight_not_its_renew_time():
    # renewTime from another machine's clock is ignored: only my observation time counts
    stale_wall = LeaseRecord(
        "b", 5, datetime(2000, 1, 1, tzinfo=UTC), datetime(2000, 1, 1, tzinfo=UTC), 1
    )
    seen = observe(None, stale_wall, "9", now=50.0)
    assert run(seen, now=54.9).action is Action.FOLLOW
    assert run(seen, now=55.0).action is Action.ACQUIRE


def test_observation_restarts_when_the_version_changes_and_not_otherwise():
    first = observe(None, rec("b"), "1", now=10.0)
    assert observe(first, rec("b"), "1", now=20.0) is first
    assert observe(first, rec("b"), "2", now=20.0).observed_at == 20.0


def test_a_released_lease_is_taken_at_once_with_a_new_token():
    seen = observe(None, released(rec("b", 2), wall=WALL), "5", now=0.0)
    d = run(seen, now=0.0)
    assert d.action is Action.ACQUIRE and d.record is not None
    assert d.record.lease_transitions == 3 and d.record.holder_identity == "a"


def test_renewal_keeps_acquire_time_and_token():
    acquired = datetime(2026, 1, 1, tzinfo=UTC)
    held = LeaseRecord("a", 15, acquired, acquired, 4)
    term = Term(4, renewed_at=0.0, renew_deadline=10)
    d = run(observe(None, held, "3", now=1.0), term, now=1.0)
    assert d.action is Action.RENEW and d.record is not None
    assert (d.record.acquire_time, d.record.renew_time, d.record.lease_transitions) == (
        acquired,
        WALL,
        4,
    )


def test_a_lease_in_my_name_without_a_term_starts_a_new_term():
    d = run(observe(None, rec("a", 4), "3", now=0.0), None, now=0.0)
    assert d.action is Action.ACQUIRE and d.record is not None and d.record.lease_transitions == 5


@pytest.mark.parametrize(
    ("observed", "term", "now", "why"),
    [
        (observe(None, rec("a", 1), "1", now=0), Term(1, 0.0, 10), 10.0, "renew deadline"),
        (observe(None, rec("b", 2), "1", now=0), Term(1, 0.0, 10), 1.0, "held by 'b'"),
        (observe(None, rec("a", 2), "1", now=0), Term(1, 0.0, 10), 1.0, "moved from 1 to 2"),
        (None, Term(1, 0.0, 10), 1.0, "deleted"),
    ],
)
def test_a_leader_steps_down_when_its_deadline_passed_or_the_lease_is_not_its_own(
    observed, term, now, why
):
    d = run(observed, term, now=now)
    assert d.action is Action.STEP_DOWN and why in d.reasons[0] and not d.writes


def test_term_is_measured_from_the_attempt_start_and_ends_at_the_deadline():
    d = run(None, now=3.0)
    term = term_after(d, started_at=2.0, timing=TIMING)
    assert term.token == 0 and term.is_still_leader(11.999) and not term.is_still_leader(12.0)
    with pytest.raises(ValueError):
        term_after(Decision(Action.FOLLOW, ()), started_at=0, timing=TIMING)


@pytest.mark.parametrize(
    ("record", "token", "problem"),
    [
        (rec("a", 3), 3, None),
        (rec("b", 4), 3, "changed hands"),
        (released(rec("a", 3), wall=WALL), 3, "nobody (released)"),
        (None, 3, "no longer exists"),
    ],
)
def test_fence_refuses_a_token_from_another_term(record, token, problem):
    got = fence_problem(record, identity="a", token=token)
    assert got == problem if problem is None else problem in (got or "")


# --- the safety property ------------------------------------------------------------------


@dataclass
class Replica:
    """One elector driven step by step, with its own clock ``offset + rate * t``."""

    name: str
    rate: float
    offset: float
    obs: Observation | None = None
    term: Term | None = None
    phase: str = "idle"  # idle | read | write | written
    started: float = 0.0
    snapshot: tuple[LeaseRecord, str] | None = None
    decision: Decision | None = None
    applied: bool = False
    written: str = ""
    log: list[str] = field(default_factory=list)

    def clock(self, t: float) -> float:
        return self.offset + self.rate * t


@dataclass
class Store:
    """The API server: linearisable reads and compare-and-swap writes on resourceVersion."""

    record: LeaseRecord | None = None
    version: int = 0

    def cas(self, record: LeaseRecord, expect: str | None) -> bool:
        current = None if self.record is None else str(self.version)
        if expect != current:
            return False
        self.record, self.version = record, self.version + 1
        return True


def step(store: Store, r: Replica, op: str, t: float, timing: ElectionTiming, lost: bool) -> None:
    now = r.clock(t)
    if op == "begin" and r.phase == "idle":
        r.started, r.phase = now, "read"
        r.snapshot = None if store.record is None else (store.record, str(store.version))
    elif op == "answer" and r.phase == "read":
        if r.snapshot is not None:
            r.obs = observe(r.obs, r.snapshot[0], r.snapshot[1], now)
        else:
            r.obs = None
        d = decide(r.obs, identity=r.name, now=now, wall=WALL, timing=timing, term=r.term)
        if d.action is Action.STEP_DOWN:
            r.term = None
        r.decision, r.phase = d, ("write" if d.writes else "idle")
    elif op == "apply" and r.phase == "write":
        assert r.decision is not None and r.decision.record is not None
        r.applied, r.phase = store.cas(r.decision.record, r.decision.expect_version), "written"
        r.written = str(store.version)
    elif op == "answer" and r.phase == "written":
        assert r.decision is not None
        if r.applied and not lost and r.decision.action is not Action.STEP_DOWN:
            assert r.decision.record is not None
            r.term = term_after(r.decision, started_at=r.started, timing=timing)
            r.obs = observe(r.obs, r.decision.record, r.written, now)
        r.phase = "idle"
    elif op == "timeout":  # the elector gives up on what is in flight (it may still apply)
        # a write given up before it reached the server never applies; otherwise it stays
        # in flight and may still apply (its answer then never counts)
        if r.phase in ("read", "written") or (r.phase == "write" and not lost):
            r.phase = "idle"
    elif op == "release" and r.phase == "idle" and r.term is not None and r.obs is not None:
        r.term = None  # stop acting first, then write the release
        r.decision = Decision(
            Action.STEP_DOWN, (), released(r.obs.record, wall=WALL), r.obs.version
        )
        r.phase = "write"


def leaders(replicas: list[Replica], t: float) -> list[str]:
    return [r.name for r in replicas if r.term is not None and r.term.is_still_leader(r.clock(t))]


@st.composite
def timings(draw: st.DrawFn) -> ElectionTiming:
    lease = draw(st.integers(1, 20))
    retry = draw(st.floats(0.05, lease / 1.3))
    deadline = draw(st.floats(retry * 1.21, lease * 0.999))
    return ElectionTiming(lease, deadline, retry)


# mostly progress (the replica's next phase), sometimes time passing, rarely trouble
OPS = st.sampled_from(["progress"] * 6 + ["advance"] * 3 + ["timeout", "release"])
NEXT = {"idle": "begin", "read": "answer", "write": "apply", "written": "answer"}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timing=timings(), data=st.data())
def test_never_two_leaders_at_one_instant(timing: ElectionTiming, data: st.DataObject):
    """Any interleaving of N replicas' reads, CAS writes, lost answers, abandoned requests and
    releases, with clock offsets anywhere and clock rates within rho of real time where
    renew_deadline * (1 + rho) < lease_duration * (1 - rho): at most one believes it leads."""
    rho = (
        0.99
        * (timing.lease_duration - timing.renew_deadline)
        / (timing.lease_duration + timing.renew_deadline)
    )
    n = data.draw(st.integers(2, 4), label="replicas")
    replicas = [
        Replica(
            f"r{i}",
            rate=data.draw(st.floats(1 - rho, 1 + rho), label=f"rate{i}"),
            offset=data.draw(st.floats(-1e6, 1e6), label=f"offset{i}"),
        )
        for i in range(n)
    ]
    store, t, terms = Store(), 0.0, set()
    for _ in range(data.draw(st.integers(10, 200), label="steps")):
        op = data.draw(OPS)
        if op == "advance":
            t += data.draw(st.floats(0, timing.lease_duration * 1.2))
            continue
        who = replicas[data.draw(st.integers(0, n - 1))]
        op = NEXT[who.phase] if op == "progress" else op
        step(store, who, op, t, timing, lost=data.draw(st.integers(0, 7)) == 0)
        now_leading = leaders(replicas, t)
        assert len(now_leading) <= 1, (t, now_leading, store)
        terms.update((r.name, r.term.token) for r in replicas if r.term is not None)
    event("terms: " + ("0" if not terms else "1" if len(terms) == 1 else "2+"))


def test_drift_beyond_the_bound_can_give_two_leaders():
    """The checker above can fail: a leader whose clock runs slow past the bound believes it
    still leads when a fast-clocked follower has already waited out the lease."""
    timing = ElectionTiming(lease_duration=4, renew_deadline=3, retry_period=1)
    slow, fast = Replica("slow", rate=0.5, offset=0), Replica("fast", rate=1.5, offset=0)
    store = Store()
    for op in ("begin", "answer", "apply", "answer"):
        step(store, slow, op, 0.0, timing, lost=False)
    assert leaders([slow, fast], 0.0) == ["slow"]
    step(store, fast, "begin", 0.0, timing, lost=False)
    step(store, fast, "answer", 0.0, timing, lost=False)  # first sight of slow's record
    t = 2.7  # fast's clock: 4.05 s, lease waited out; slow's clock: 1.35 s < 3 s deadline
    for op in ("begin", "answer", "apply", "answer"):
        step(store, fast, op, t, timing, lost=False)
    assert sorted(leaders([slow, fast], t)) == ["fast", "slow"]


def test_the_simulation_elects_someone_and_hands_over_on_release():
    timing = ElectionTiming(lease_duration=4, renew_deadline=3, retry_period=1)
    a, b = Replica("a", 1.0, 0.0), Replica("b", 1.0, 5.0)
    store = Store()
    for op in ("begin", "answer", "apply", "answer"):
        step(store, a, op, 0.0, timing, lost=False)
    for op in ("begin", "answer"):
        step(store, b, op, 0.5, timing, lost=False)
    assert leaders([a, b], 0.5) == ["a"] and b.decision is not None
    assert b.decision.action is Action.FOLLOW
    for op in ("release", "apply"):
        step(store, a, op, 1.0, timing, lost=False)
    assert leaders([a, b], 1.0) == []
    for op in ("begin", "answer", "apply", "answer"):
        step(store, b, op, 1.0, timing, lost=False)
    assert leaders([a, b], 1.0) == ["b"] and b.term is not None and b.term.token == 1
