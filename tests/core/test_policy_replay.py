"""The guards' history across a restart: a decision comes back from the JSON the audit store
keeps of it (and anything else is refused by field), and replaying the stored decisions gives a
``PolicyState`` under which the next decision is the one the lost state would have made."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.core import audit
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import ArgoApp, FluxKind, FluxRef, OwnershipMap, OwnershipRule
from fleetwarden.core.policy import (
    Action,
    Decision,
    Guard,
    Guards,
    MalformedDecision,
    Mode,
    Policy,
    PolicyState,
    Status,
    approve,
    cancellations,
    decide,
    record,
    restore_state,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# labels and taints are restored directly, except on p3 where the cluster's Argo CD app is
# synced (one operation for many findings: coalescing); instance types go to Flux per pool
OWNERS = OwnershipMap(
    [
        OwnershipRule(pool="p3", direct_restore=False),
        OwnershipRule(flux=FluxRef(FluxKind.HELM_RELEASE, "flux-system", "{cluster}-{pool}")),
        OwnershipRule(argocd=ArgoApp("{cluster}-nodes")),
    ]
)


def finding(c: int, p: int, k: int, kind: int, severity: Severity = Severity.CRITICAL) -> Finding:
    """kind 0: a label, 1: a taint (both restored), 2: an instance type (Flux reconcile)."""
    cluster, pool, nodes = f"c{c}", f"p{p}", (f"c{c}-p{p}-n1",)
    if kind == 0:
        return Finding(
            cluster, pool, Layer.L1, f"labels.k{k}", "platform", "x", severity, nodes=nodes
        )
    if kind == 1:
        return Finding(
            cluster, pool, Layer.L2, f"taints.t{k}:NoSchedule", "v", None, severity, nodes=nodes
        )
    return Finding(cluster, pool, Layer.SPEC, "instanceType", "m5.large", f"t{k}", severity)


def stored(d: Decision) -> Any:
    """What the audit store keeps of a decision: its JSON, redacted and canonical."""
    return json.loads(audit.redacted_json({"decision": d.to_json()}))["decision"]


_DECISION_ID = re.compile(r"\bd-[0-9a-f]{16}\b")


def same(d: Decision) -> Decision:
    """A decision without decision ids: they hash the state's record counter, which counts the
    records since the process started, so neither its own id nor one it names in a reason
    ("already waiting for approval as d-...") is comparable across a restart (at the very
    instant of a restart the two counters can even make a new id equal a pending one's)."""
    return replace(d, id="-", reasons=tuple(_DECISION_ID.sub("-", r) for r in d.reasons))


# --- reading a decision back ------------------------------------------------------------------


def every_kind_of_decision() -> list[Decision]:
    """Each action, mode, status and guard the engine produces, approvals included."""
    roomy = Policy(guards=Guards(max_per_cluster=1000, max_fleet=1000))
    out: list[Decision] = []
    for mode in Mode:
        state = PolicyState({"c0": 20, "c1": 20})
        for i, x in enumerate(
            [
                finding(0, p, k, kind, sev)
                for p in (0, 3)
                for k in (0, 1)
                for kind in (0, 1, 2)
                for sev in (Severity.CRITICAL, Severity.MEDIUM, Severity.INFO)
            ]
        ):
            d = decide(x, OWNERS.route(x), state, T0 + timedelta(seconds=i), mode)
            record(d, state)
            out.append(d)
        again = finding(0, 0, 0, 0)  # the first drift, reported again within the cooldown
        d = decide(again, OWNERS.route(again), state, T0 + timedelta(seconds=40), mode)
        record(d, state)
        out.append(d)
        for did in list(state.pending)[:3]:
            ok = approve(did, state, T0 + timedelta(minutes=1))
            record(ok, state)
            out.append(ok)
        if state.pending:  # one request approved too late
            out.append(approve(next(iter(state.pending)), state, T0 + timedelta(hours=3)))
        if len(state.pending) >= 2:  # requests outliving their mode and their configuration
            first, second = sorted(state.pending)[:2]
            later = T0 + timedelta(minutes=2)
            out.append(approve(first, state, later, mode=Mode.DRY_RUN, config=None))
            out.append(approve(second, state, later, mode=mode, config="another"))
        flap = PolicyState({"c0": 20})
        for i in range(5):
            x = finding(0, 0, 0, 0)
            d = decide(x, OWNERS.route(x), flap, T0 + timedelta(minutes=3 * i), mode, policy=roomy)
            record(d, flap, policy=roomy)
            out.append(d)
    return out


DECISIONS = every_kind_of_decision()


def test_the_fixture_covers_every_action_status_mode_and_guard():
    assert {d.action for d in DECISIONS} == set(Action) - {Action.ROLLBACK}
    assert {d.status for d in DECISIONS} == set(Status)
    assert {d.mode for d in DECISIONS} == set(Mode)
    assert {d.guard for d in DECISIONS} >= {
        None,
        Guard.COOLDOWN,
        Guard.COALESCED,
        Guard.FLAP,
        Guard.QUARANTINE,
        Guard.BLAST_CLUSTER,
        Guard.EXPIRED,
        Guard.MODE_CHANGED,
        Guard.CONFIG_CHANGED,
    }


@pytest.mark.parametrize("d", DECISIONS, ids=lambda d: f"{d.mode}-{d.action}-{d.status}")
def test_a_stored_decision_reads_back_as_the_same_value(d):
    assert Decision.from_json(stored(d)) == d


def test_a_rollback_and_a_flux_object_in_another_cluster_read_back():
    base = DECISIONS[0]
    for action, target in [
        (Action.ROLLBACK, ArgoApp("prod-nodes")),
        (Action.RECONCILE, FluxRef(FluxKind.KUSTOMIZATION, "flux-system", "pools", "mgmt")),
    ]:
        d = replace(base, action=action, target=target)
        assert Decision.from_json(stored(d)) == d


GOOD = stored(next(d for d in DECISIONS if d.status is Status.PENDING_APPROVAL))


def broken(**changes: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if value is KeyError:
            del out[key]
        else:
            out[key] = value
    return out


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param([GOOD], "decision: expected an object", id="not an object"),
        pytest.param(broken(id=KeyError), "decision.id", id="no id"),
        pytest.param(broken(id=""), "decision.id", id="empty id"),
        pytest.param(broken(findingId=7), "decision.findingId", id="id not text"),
        pytest.param(broken(action="reboot"), "decision.action", id="unknown action"),
        pytest.param(broken(mode=None), "decision.mode", id="no mode"),
        pytest.param(broken(status="done"), "decision.status", id="unknown status"),
        pytest.param(broken(guard="luck"), "decision.guard", id="unknown guard"),
        pytest.param(broken(reasons="because"), "decision.reasons", id="reasons not a list"),
        pytest.param(broken(at="2026-03-01T12:00:00"), "decision.at", id="time without offset"),
        pytest.param(broken(at="yesterday"), "decision.at", id="not a time"),
        pytest.param(broken(notify="yes"), "decision.notify", id="notify not a flag"),
        pytest.param(broken(expiresAt=KeyError), "expiresAt", id="request without expiry"),
        pytest.param(broken(target=None), "needs a target", id="request without target"),
        pytest.param(broken(target=[]), "decision.target: expected an object", id="target list"),
        pytest.param(
            broken(target={"application": "x"}), "decision.target.cluster", id="wrong target"
        ),
        pytest.param(
            broken(action="alert"), "alert decisions have no target", id="alert with target"
        ),
        pytest.param(
            broken(target={**GOOD["target"], "taints": [{"key": "a", "effect": 3}]}),
            "decision.target.taints[0].effect",
            id="bad taint",
        ),
        pytest.param(
            broken(target={**GOOD["target"], "labels": {"team": 1}}),
            "decision.target.labels",
            id="label value not text",
        ),
        pytest.param(
            broken(target={**GOOD["target"], "replace": [["a"]]}),
            "decision.target.replace",
            id="replace not pairs",
        ),
    ],
)
def test_anything_else_is_refused_naming_the_field(data, field):
    with pytest.raises(MalformedDecision, match=field.replace("[", r"\[").replace("]", r"\]")):
        Decision.from_json(data)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(
    base=st.sampled_from(DECISIONS),
    key=st.sampled_from(sorted(GOOD)),
    value=JSON | st.just(KeyError),
)
def test_a_damaged_record_is_a_decision_or_malformed_never_a_crash(base, key, value):
    data = stored(base)
    if value is KeyError:
        data.pop(key, None)
    else:
        data[key] = value
    with contextlib.suppress(MalformedDecision):
        Decision.from_json(data)


@given(data=JSON)
def test_any_json_is_a_decision_or_malformed_never_a_crash(data):
    with contextlib.suppress(MalformedDecision):
        Decision.from_json(data)


# --- replaying ------------------------------------------------------------------------------


def test_nothing_recorded_restores_an_empty_state_with_the_pool_counts():
    replay = restore_state([], T0, pools={"c0": 20})
    assert (replay.replayed, replay.too_old, replay.pending) == (0, 0, ())
    assert replay.state.pools == {"c0": 20} and replay.state.fleet_pools == 20


def test_replayed_blast_radius_blocks_the_next_action():
    state = PolicyState({"c0": 20})  # 2 actions per 10 minutes
    log = []
    for k in range(2):
        x = finding(0, k, 0, 0)
        d = decide(x, OWNERS.route(x), state, T0, Mode.ENFORCE)
        record(d, state)
        log.append(d)
    x = finding(0, 2, 0, 0)
    later = T0 + timedelta(minutes=5)
    replay = restore_state([Decision.from_json(stored(d)) for d in log], later, pools=state.pools)
    after = decide(x, OWNERS.route(x), replay.state, later, Mode.ENFORCE)
    assert (after.status, after.guard) == (Status.BLOCKED, Guard.BLAST_CLUSTER)
    fresh = decide(x, OWNERS.route(x), PolicyState({"c0": 20}), later, Mode.ENFORCE)
    assert fresh.status is Status.EXECUTE  # what a restart without the replay would do


def test_requests_come_back_unless_decided_and_expired_ones_wait_to_be_cancelled():
    g = Guards(pending_ttl=timedelta(minutes=30))  # replay span: 1h, twice the wait
    policy = Policy(guards=g)
    state = PolicyState({"c0": 100})
    log = []

    def keep(d: Decision) -> Decision:
        record(d, state, policy=policy)
        log.append(d)
        return d

    def request(k: int, at: datetime) -> Decision:
        x = finding(0, k, 0, 0)
        return keep(decide(x, OWNERS.route(x), state, at, Mode.APPROVAL, policy=policy))

    first = request(0, T0)
    second = request(1, T0 + timedelta(minutes=10))
    ok = keep(approve(second.id, state, T0 + timedelta(minutes=35), policy=policy))
    assert ok.status is Status.EXECUTE
    third = request(2, T0 + timedelta(minutes=40))
    now = T0 + timedelta(minutes=45)  # the first expired at T0 + 30m, unapproved
    replay = restore_state(log, now, policy=policy, pools=state.pools)
    assert [d.id for d in replay.pending] == [third.id]
    assert [d.id for d in replay.expired] == [first.id]  # kept, to be cancelled on record
    assert set(replay.state.pending) == {first.id, third.id}
    assert (replay.replayed, replay.too_old) == (4, 0)
    (cancel,) = cancellations(replay.state, now, mode=Mode.APPROVAL, config=None)
    assert (cancel.id, cancel.status, cancel.guard) == (first.id, Status.CANCELLED, Guard.EXPIRED)
    record(cancel, replay.state, policy=policy)
    keep(cancel)
    # the restored request can be approved, with the guards seeing the approved one
    result = approve(third.id, replay.state, now, policy=policy)
    assert result.status is Status.EXECUTE
    assert replay.state.executed_in_window(now, g.window) == 1
    keep(result)

    # a later start: what is older than the span is not read; what was closed stays closed
    fourth = request(3, T0 + timedelta(minutes=46))
    at_restart = T0 + timedelta(minutes=78)  # the fourth expired at T0 + 76m, unapproved
    again = restore_state(log, at_restart, policy=policy, pools=state.pools)
    assert (again.replayed, again.too_old) == (5, 2)  # the first and second requests
    assert again.pending == () and [d.id for d in again.expired] == [fourth.id]
    assert set(again.state.pending) == {fourth.id}  # the first: cancelled on record
    (late,) = cancellations(again.state, at_restart, mode=Mode.APPROVAL, config=None)
    assert (late.id, late.guard) == (fourth.id, Guard.EXPIRED)
    keep(late)
    last = restore_state(log, at_restart, policy=policy, pools=state.pools)
    assert last.expired == () and fourth.id in last.state.closed
    assert cancellations(last.state, at_restart, mode=Mode.APPROVAL, config=None) == []


def test_an_approval_counts_from_when_it_was_approved():
    """The request is older than the replay span, its approval is not: the action counts."""
    # span: 33m, the horizon and its bursts (longer than twice the 15m approval wait)
    g = Guards(window=timedelta(minutes=30), pending_ttl=timedelta(minutes=15))
    policy = Policy(guards=g)
    state = PolicyState({"c0": 100})
    x = finding(0, 0, 0, 0)
    request = decide(x, OWNERS.route(x), state, T0, Mode.APPROVAL, policy=policy)
    record(request, state, policy=policy)
    ok = approve(request.id, state, T0 + timedelta(minutes=14), policy=policy)
    record(ok, state, policy=policy)
    now = T0 + timedelta(minutes=40)
    replay = restore_state([request, ok], now, policy=policy, pools=state.pools)
    assert (replay.replayed, replay.too_old, replay.pending) == (1, 1, ())
    assert replay.state.executed_in_window(now, g.window) == 1
    again = decide(x, OWNERS.route(x), replay.state, now, Mode.ENFORCE, policy=policy)
    assert same(again) == same(decide(x, OWNERS.route(x), state, now, Mode.ENFORCE, policy=policy))


def test_decisions_are_replayed_in_time_order_whatever_order_they_were_stored_in():
    """Two replicas, or an approval stored while a batch decided earlier was still being
    written: the heal that began first is the one the later action joins."""
    state = PolicyState({"c0": 100})
    log = []
    for k, offset in [(0, 0), (1, 10)]:
        x = finding(0, 0, k, 0)
        d = decide(x, OWNERS.route(x), state, T0 + timedelta(seconds=offset), Mode.ENFORCE)
        record(d, state)
        log.append(d)
    now = T0 + timedelta(seconds=35)  # a new heal: 35s after the heal began at T0
    x = finding(0, 0, 2, 0)
    want = decide(x, OWNERS.route(x), state, now, Mode.ENFORCE)
    assert "heal 2 of at most 3" in want.reasons[-1]
    restored = restore_state(reversed(log), now, pools=state.pools).state
    assert same(decide(x, OWNERS.route(x), restored, now, Mode.ENFORCE)) == same(want)


def test_decisions_older_than_the_replay_span_are_counted_not_replayed():
    state = PolicyState({"c0": 100})
    x = finding(0, 0, 0, 0)
    d = decide(x, OWNERS.route(x), state, T0, Mode.ENFORCE)
    span = Guards().replay_span
    replay = restore_state([d], T0 + span + timedelta(seconds=1))
    assert (replay.replayed, replay.too_old) == (0, 1)
    replay = restore_state([d], T0 + span)
    assert (replay.replayed, replay.too_old) == (1, 0)


def test_the_replay_span_covers_the_guards_bursts_and_approvals():
    g = Guards()
    assert g.replay_span >= g.horizon + 2 * g.flap_heals * g.heal_burst
    assert g.replay_span >= 2 * g.pending_ttl  # approvable, and expired but remembered
    assert Guards(pending_ttl=timedelta(hours=5)).replay_span == timedelta(hours=10)


@pytest.mark.parametrize(
    ("flap_heals", "burst", "actions", "probe", "too_short"),
    [
        pytest.param(1, 300, [0, 240], 1980, lambda g: g.horizon, id="one burst"),
        pytest.param(
            2,
            180,
            [0, 162, 288, 468, 2016],
            2214,
            lambda g: g.horizon + 2 * g.heal_burst,
            id="a chain of bursts",
        ),
    ],
)
def test_heal_bursts_straddling_the_horizon_need_the_replay_span(
    flap_heals, burst, actions, probe, too_short
):
    """Why the span reaches past the horizon: an action that joined a heal begun before the
    cut is replayed as a heal of its own, which can shift the heals after it (a chain), and
    the flap guard then stops a heal the lost state allowed. Replaying ``too_short`` of the
    history shows it; the replay span does not."""
    g = Guards(
        flap_heals=flap_heals,
        heal_burst=timedelta(seconds=burst),
        window=timedelta(minutes=1),
        max_per_cluster=100,
        max_fleet=100,
        pending_ttl=timedelta(minutes=1),  # so that the bursts decide the span
    )
    policy = Policy(guards=g)
    state = PolicyState({"c0": 10})
    log = []
    for k, offset in enumerate(actions):  # drifts of one pool, each healed
        x = finding(0, 0, k, 0)
        at = T0 + timedelta(seconds=offset)
        d = decide(x, OWNERS.route(x), state, at, Mode.ENFORCE, policy=policy)
        record(d, state, policy=policy)
        log.append(d)
    assert [d.status for d in log] == [Status.EXECUTE] * len(actions)
    now = T0 + timedelta(seconds=probe)
    x = finding(0, 0, 9, 0)
    want = decide(x, OWNERS.route(x), state, now, Mode.ENFORCE, policy=policy)
    assert want.status is Status.EXECUTE
    replay = restore_state(log, now, policy=policy, pools=state.pools)
    assert replay.too_old == 0
    got = decide(x, OWNERS.route(x), replay.state, now, Mode.ENFORCE, policy=policy)
    assert same(got) == same(want)
    cut = restore_state(
        [d for d in log if d.at >= now - too_short(g)], now, policy=policy, pools=state.pools
    ).state
    wrong = decide(x, OWNERS.route(x), cut, now, Mode.ENFORCE, policy=policy)
    assert (wrong.status, wrong.guard) == (Status.BLOCKED, Guard.FLAP)


@settings(max_examples=200, deadline=None)
@given(
    # gaps in tenths of a heal burst: mostly within two bursts, now and then a long pause
    gaps=st.lists(
        st.integers(min_value=0, max_value=21) | st.integers(min_value=0, max_value=300),
        max_size=60,
    ),
    flap_heals=st.integers(min_value=1, max_value=4),
    heal_burst=st.sampled_from([30, 60, 120, 180]),
)
def test_heal_bursts_on_one_pool_replay_to_the_same_flap_verdict(gaps, flap_heals, heal_burst):
    """Many drifts of one pool, close together (overlapping heal bursts: the flap guard's
    hardest case), and a restart before every one of them: the replayed state starts a heal,
    joins one, or stops the pool exactly as the lost state does, wherever the replay span
    cuts the history."""
    guards = Guards(
        flap_heals=flap_heals,
        heal_burst=timedelta(seconds=heal_burst),
        pending_ttl=timedelta(seconds=60),  # the bursts decide the span
        max_per_cluster=1000,
        max_fleet=1000,
    )
    policy = Policy(guards=guards)
    state = PolicyState({"c0": 10})
    log: list[Decision] = []
    now = T0
    for i, gap in enumerate(gaps):
        now += guards.heal_burst * gap / 10
        x = Finding("c0", "p0", Layer.L1, f"labels.k{i}", "a", "b", Severity.HIGH, nodes=("n",))
        restored = restore_state(log, now, policy=policy, pools=state.pools).state
        after = decide(x, OWNERS.route(x), restored, now, Mode.ENFORCE, policy=policy)
        d = decide(x, OWNERS.route(x), state, now, Mode.ENFORCE, policy=policy)
        assert same(after) == same(d), i
        record(d, state, policy=policy)
        log.append(d)


CONFIGS = ["A", "B", None]  # configuration fingerprints: two configs, and none recorded


def steps(modes: list[Mode], decisions: int = 1) -> st.SearchStrategy[tuple[Any, ...]]:
    """One step of a run: a decision in one of ``modes`` (``decisions`` times as likely as
    the rest), an approval, or the shell's sweep."""
    decision = st.tuples(
        st.just("decide"),
        st.sampled_from([0, 0, 1, 5, 20, 45, 100, 300, 900]),  # seconds since the last step
        st.integers(min_value=0, max_value=2),  # cluster
        st.integers(min_value=0, max_value=4),  # pool
        st.integers(min_value=0, max_value=2),  # field
        st.integers(min_value=0, max_value=2),  # kind of drift
        st.sampled_from([Severity.CRITICAL, Severity.HIGH, Severity.MEDIUM]),
        st.sampled_from(modes),
        st.sampled_from(CONFIGS[:2]),
    )
    approval = st.tuples(
        st.just("approve"),
        st.sampled_from([0, 1, 30, 300, 1800]),
        st.integers(min_value=0, max_value=1000),  # which pending request
        st.sampled_from([None, *Mode]),  # the approver's mode (None: not checked)
        st.sampled_from(CONFIGS[:2]),
    )
    sweep = st.tuples(  # the shell's sweep (at a start-up, or on its timer): cancel what is stale
        st.just("sweep"),
        st.sampled_from([0, 60, 600, 3600]),
        st.sampled_from(list(Mode)),
        st.sampled_from(CONFIGS),
    )
    kinds = {"decide": decision, "approve": approval, "sweep": sweep}
    return st.sampled_from(["decide"] * decisions + ["approve", "sweep"]).flatmap(kinds.__getitem__)


STEP = steps(list(Mode))
PROBES = [
    finding(c, p, k, kind)
    for c in range(3)
    for p in range(5)
    for k in range(3)
    for kind in range(3)
]


@dataclass
class Run:
    """What a run left: the live state, the log as stored, and which requests were made and
    which of them were closed (approved, refused, cancelled)."""

    state: PolicyState
    log: list[Any] = field(default_factory=list)
    requested: set[str] = field(default_factory=set)
    closed: set[str] = field(default_factory=set)
    now: datetime = T0


def drive(run_steps: list[tuple[Any, ...]], policy: Policy, counts: dict[str, int]) -> Run:
    """decide / approve / sweep, each result recorded and stored, as the shell does."""
    run = Run(PolicyState(counts))
    state = run.state
    for step in run_steps:
        run.now += timedelta(seconds=step[1])
        made: list[Decision] = []
        if step[0] == "decide":
            _, _, c, p, k, kind, sev, mode, config = step
            x = finding(c, p, k, kind, sev)
            made = [decide(x, OWNERS.route(x), state, run.now, mode, policy=policy, config=config)]
        elif step[0] == "approve" and state.pending:
            _, _, which, mode, config = step
            ids = sorted(state.pending)
            did = ids[which % len(ids)]
            made = [approve(did, state, run.now, policy=policy, mode=mode, config=config)]
        elif step[0] == "sweep":
            _, _, mode, config = step
            made = cancellations(state, run.now, mode=mode, config=config)
        for d in made:
            if d.status is Status.PENDING_APPROVAL:
                run.requested.add(d.id)
            elif d.id in run.requested:
                run.closed.add(d.id)
            record(d, state, policy=policy)
            run.log.append(stored(d))
    return run


def restart_and_sweep(
    run: Run, now: datetime, policy: Policy, counts: dict[str, int], mode: Mode, config: str | None
) -> PolicyState:
    """Replay the stored log at ``now`` and check what comes back against the lost state;
    then the start-up sweep on both (in the new process's ``mode`` and ``config``), checked
    too. Returns the restored state, swept; ``run.state`` is swept likewise."""
    guards = policy.guards
    state = run.state
    replay = restore_state(
        [Decision.from_json(data) for data in run.log], now, policy=policy, pools=counts
    )
    restored = replay.state
    assert replay.replayed + replay.too_old == len(run.log)

    def approvable(s: PolicyState) -> set[str]:
        return {did for did, p in s.pending.items() if not p.expired(now)}

    live = approvable(state)
    assert approvable(restored) == live == {d.id for d in replay.pending}
    assert {d.id for d in replay.expired} == set(restored.pending) - live
    for did in live:
        for m, c in [(None, None), *((m, c) for m in Mode for c in CONFIGS)]:
            assert approve(did, restored, now, policy=policy, mode=m, config=c) == approve(
                did, state, now, policy=policy, mode=m, config=c
            )

    lost = {d.id: d for d in cancellations(state, now, mode=mode, config=config)}
    got = {d.id: d for d in cancellations(restored, now, mode=mode, config=config)}
    assert not set(got) & run.closed  # nothing approved, refused or cancelled comes back
    assert set(got) <= run.requested
    assert all(d.status is Status.CANCELLED and not d.executable for d in got.values())
    # a request the lost state still held (it forgets an expired one a while after its
    # expiry) and made within the replay span is cancelled after the restart, for the same
    # reason; one the lost state had forgotten may be cancelled on record only now
    keeps = now - guards.pending_ttl
    must = {
        did
        for did, d in lost.items()
        if d.at >= now - guards.replay_span and (d.expires_at is None or d.expires_at >= keeps)
    }
    assert must <= set(got)
    assert all(same(got[did]) == same(lost[did]) for did in must)
    assert all(got[did].guard is Guard.EXPIRED for did in set(got) - set(lost))
    for d in lost.values():
        record(d, state, policy=policy)
    for d in got.values():
        record(d, restored, policy=policy)
    assert approvable(restored) == approvable(state)
    return restored


def make_policy(flap_heals: int, heal_burst: int, pending_ttl: int, approval_ttl: int) -> Policy:
    guards = Guards(
        flap_heals=flap_heals,
        cooldown=timedelta(seconds=60),
        heal_burst=timedelta(seconds=heal_burst),
        pending_ttl=timedelta(seconds=pending_ttl),
        approval_ttl=timedelta(seconds=approval_ttl),
    )
    assert 2 * guards.flap_heals * guards.heal_burst <= guards.flap_window  # exactness bound
    return Policy(guards=guards)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    run_steps=st.lists(STEP, max_size=120),
    pools=st.lists(st.integers(min_value=0, max_value=40), min_size=3, max_size=3),
    flap_heals=st.integers(min_value=1, max_value=4),
    heal_burst=st.sampled_from([0, 30, 90, 180]),
    pending_ttl=st.sampled_from([120, 600, 3600]),
    approval_ttl=st.sampled_from([60, 900]),
    restart_after=st.sampled_from([0, 1, 30, 200, 3000]),
    restart_mode=st.sampled_from(list(Mode)),
    restart_config=st.sampled_from(CONFIGS),
)
def test_after_a_replay_the_next_decision_is_the_one_the_lost_state_would_make(
    run_steps,
    pools,
    flap_heals,
    heal_burst,
    pending_ttl,
    approval_ttl,
    restart_after,
    restart_mode,
    restart_config,
):
    """Drive decide + record (+ approve, + the sweep that cancels stale requests) over hours,
    in every mode and under two configurations, keep every decision as the store would,
    restart and sweep: the replayed state has the same approvable requests, answers approving
    each the same way, cancels what the lost state would (``restart_and_sweep``), and then
    gives the same decision for every probe finding in every mode."""
    policy = make_policy(flap_heals, heal_burst, pending_ttl, approval_ttl)
    guards = policy.guards
    counts = {f"c{i}": n for i, n in enumerate(pools)}
    run = drive(run_steps, policy, counts)
    now = run.now + timedelta(seconds=restart_after)
    restored = restart_and_sweep(run, now, policy, counts, restart_mode, restart_config)
    state = run.state
    for cluster in (None, *counts):
        for window in (guards.window, guards.flap_window):
            assert restored.executed_in_window(
                now, window, cluster=cluster
            ) == state.executed_in_window(now, window, cluster=cluster)
    for x in PROBES:
        rt = OWNERS.route(x)
        for mode in Mode:
            before = decide(x, rt, state, now, mode, policy=policy, config=restart_config)
            after = decide(x, rt, restored, now, mode, policy=policy, config=restart_config)
            assert same(after) == same(before), (x.id, mode)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # mostly requests, and long enough runs for them to be approved, expire and be swept
    run_steps=st.lists(
        steps([Mode.APPROVAL] * 4 + [Mode.ENFORCE], decisions=3), min_size=10, max_size=80
    ),
    pending_ttl=st.sampled_from([120, 600, 3600]),
    restart_after=st.sampled_from([0, 30, 200, 1000, 3000, 7000]),
    restart_mode=st.sampled_from([Mode.APPROVAL] * 3 + [Mode.DRY_RUN, Mode.ENFORCE]),
    restart_config=st.sampled_from(["A", "A", "B", None]),
)
def test_after_a_replay_requests_are_approvable_or_cancelled_exactly_as_before(
    run_steps, pending_ttl, restart_after, restart_mode, restart_config
):
    """The approval lifecycle alone, across a restart: requests made under two configurations,
    approved (in the right and the wrong mode), expiring and swept; the restart — in the same
    mode or another, under the same configuration or another — brings back exactly the
    approvable ones and cancels exactly the stale ones (``restart_and_sweep``)."""
    policy = make_policy(3, 30, pending_ttl, 900)
    counts = {"c0": 40, "c1": 40, "c2": 40}
    run = drive(run_steps, policy, counts)
    now = run.now + timedelta(seconds=restart_after)
    restart_and_sweep(run, now, policy, counts, restart_mode, restart_config)
