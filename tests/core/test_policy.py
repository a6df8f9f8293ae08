"""The policy engine: which action a finding gets, in which mode, and the guards that hold it
back (blast radius, flap, cooldown, approval) — each decision with the reasons for it."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import (
    ArgoApp,
    FluxKind,
    FluxRef,
    Owner,
    OwnershipMap,
    OwnershipRule,
    Route,
)
from fleetwarden.core.policy import (
    DEFAULT_POLICY,
    Action,
    Decision,
    Guard,
    Guards,
    Mode,
    NodeRestore,
    Policy,
    PolicyRule,
    PolicyState,
    RequestCancelled,
    Status,
    UnknownDecision,
    approve,
    cancellations,
    decide,
    decide_all,
    fingerprint,
    pause,
    record,
)
from fleetwarden.core.pools import Taint

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HR = FluxRef(FluxKind.HELM_RELEASE, "flux-system", "prod-general", "prod")
APP = ArgoApp("prod-node-config")

# an ownership map that names objects for every pool: one HelmRelease per pool
TARGETS = OwnershipMap(
    [
        OwnershipRule(flux=FluxRef(FluxKind.HELM_RELEASE, "flux-system", "{cluster}-{pool}")),
        OwnershipRule(argocd=ArgoApp("{cluster}-nodes")),
    ]
)


def f(
    layer: Layer = Layer.L1,
    field: str = "labels.team",
    expected: object = "platform",
    actual: object = "payments",
    severity: Severity = Severity.CRITICAL,
    *,
    cluster: str = "prod",
    pool: str | None = "general",
    nodes: tuple[str, ...] = ("n-1",),
) -> Finding:
    return Finding(cluster, pool, layer, field, expected, actual, severity, nodes=nodes)  # type: ignore[arg-type]


def route(owner: Owner, target=None, *, direct: bool = True) -> Route:
    return Route(owner, target, f"test route to {owner.value}", direct)


def fresh(pools: int = 100, cluster: str = "prod") -> PolicyState:
    return PolicyState({cluster: pools})


# --- which action -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("finding", "rt", "action", "target"),
    [
        pytest.param(
            f(),
            route(Owner.CLUSTER),
            Action.RESTORE,
            NodeRestore("prod", "general", ("n-1",), labels=(("team", "platform"),)),
            id="critical label: restore it",
        ),
        pytest.param(
            f(Layer.L1, "labels.spot", None, "true", Severity.HIGH),
            route(Owner.CLUSTER),
            Action.RESTORE,
            NodeRestore("prod", "general", ("n-1",), labels=(("spot", None),)),
            id="unexpected label: remove it",
        ),
        pytest.param(
            f(Layer.L2, "taints.dedicated:NoSchedule", "general", None, Severity.HIGH),
            route(Owner.CLUSTER),
            Action.RESTORE,
            NodeRestore(
                "prod",
                "general",
                ("n-1",),
                taints=(Taint("dedicated", "general", "NoSchedule"),),
                replace=(("dedicated", "NoSchedule"),),
            ),
            id="missing taint: put it back",
        ),
        pytest.param(
            f(Layer.L2, "taints.example.com/x:NoExecute", None, "", Severity.HIGH),
            route(Owner.CLUSTER),
            Action.RESTORE,
            NodeRestore("prod", "general", ("n-1",), replace=(("example.com/x", "NoExecute"),)),
            id="extra taint: remove it",
        ),
        pytest.param(
            f(Layer.L2, "taints.gpu:NoSchedule", "", None, Severity.HIGH),
            route(Owner.CLUSTER),
            Action.RESTORE,
            NodeRestore(
                "prod",
                "general",
                ("n-1",),
                taints=(Taint("gpu", None, "NoSchedule"),),
                replace=(("gpu", "NoSchedule"),),
            ),
            id="taint without value",
        ),
        pytest.param(
            f(), route(Owner.CLUSTER, APP, direct=False), Action.SYNC, APP, id="no direct: sync"
        ),
        pytest.param(
            f(), route(Owner.CLUSTER, direct=False), Action.ALERT, None, id="no direct, no app"
        ),
        pytest.param(
            f(Layer.SPEC, "instanceType", "m5.large", "t3.medium"),
            route(Owner.INFRASTRUCTURE, HR),
            Action.RECONCILE,
            HR,
            id="seed 000: instance type -> Flux reconcile",
        ),
        pytest.param(
            f(Layer.SPEC, "instanceType", "m5.large", "t3.medium"),
            route(Owner.INFRASTRUCTURE),
            Action.ALERT,
            None,
            id="infra without a Flux object: alert",
        ),
        pytest.param(
            f(Layer.L3, "allocatable.memory", "7Gi", "3Gi", Severity.HIGH),
            route(Owner.INFRASTRUCTURE, HR),
            Action.RECONCILE,
            HR,
            id="L3 high -> reconcile",
        ),
        pytest.param(
            f(Layer.L4, "kubeletVersion.mixed", "1.30", None, Severity.MEDIUM),
            route(Owner.INFRASTRUCTURE, HR),
            Action.ALERT,
            None,
            id="medium -> alert",
        ),
        pytest.param(
            f(severity=Severity.LOW), route(Owner.CLUSTER), Action.ALERT, None, id="low -> alert"
        ),
        pytest.param(
            f(severity=Severity.INFO), route(Owner.CLUSTER), Action.IGNORE, None, id="info"
        ),
        pytest.param(
            f(Layer.SPEC, "pool", None, "gpu", Severity.CRITICAL, pool=None),
            route(Owner.NONE),
            Action.ALERT,
            None,
            id="unowned critical: alert",
        ),
        pytest.param(
            f(Layer.WORKLOAD, "image.app", "nginx:1.25", "nginx:1.24", Severity.HIGH),
            route(Owner.CLUSTER, APP),
            Action.SYNC,
            APP,
            id="workload -> Argo CD sync",
        ),
        pytest.param(
            f(nodes=()), route(Owner.CLUSTER), Action.ALERT, None, id="no node to restore"
        ),
        pytest.param(
            f(expected=["a", "b"]), route(Owner.CLUSTER), Action.ALERT, None, id="odd value"
        ),
    ],
)
def test_default_rules_pick_the_action_and_target(finding, rt, action, target):
    d = decide(finding, rt, fresh(), T0, Mode.ENFORCE)
    assert (d.action, d.target) == (action, target)
    remediation = action not in (Action.ALERT, Action.IGNORE)
    assert d.status is (Status.EXECUTE if remediation else Status.PLANNED)
    assert d.notify is (action is Action.ALERT)
    assert len(d.reasons) >= 2 and "matched rule" in d.reasons[1]
    assert d.finding_id == finding.id and d.at == T0
    json.dumps(d.to_json())  # audit-ready


def test_the_default_mode_is_dry_run():
    d = decide(f(), route(Owner.CLUSTER), fresh(), T0)
    assert (d.mode, d.status) == (Mode.DRY_RUN, Status.DRY_RUN)
    assert any("not sent" in r for r in d.reasons)


def test_user_rules_come_first_and_can_roll_back():
    rules = (
        PolicyRule(Action.ROLLBACK, Severity.HIGH, layer="WORKLOAD", cluster="prod", name="rb"),
        *DEFAULT_POLICY.rules,
    )
    policy = Policy(rules=rules)
    finding = f(Layer.WORKLOAD, "image.app", "a", "b", Severity.HIGH)
    d = decide(finding, route(Owner.CLUSTER, APP), fresh(), T0, Mode.ENFORCE, policy=policy)
    assert (d.action, d.target, d.status) == (Action.ROLLBACK, APP, Status.EXECUTE)
    assert "'rb'" in d.reasons[1]


def test_no_matching_rule_alerts_and_says_so():
    d = decide(f(), route(Owner.CLUSTER), fresh(), T0, Mode.ENFORCE, policy=Policy(rules=()))
    assert d.action is Action.ALERT and "no policy rule matches" in d.reasons[1]


# --- blast radius: the storm ------------------------------------------------------------------


def storm(clusters: int, pools: int, total: int = 1000) -> list[Finding]:
    """``total`` critical label findings, round-robin over clusters, then pools, then fields:
    no two are the same drift or the same operation."""
    out = []
    for i in range(total):
        c, p, k = i % clusters, (i // clusters) % pools, i // (clusters * pools)
        node = f"c{c}-p{p}-n1"
        out.append(f(Layer.L1, f"labels.k{k}", cluster=f"c{c}", pool=f"p{p}", nodes=(node,)))
    return out


@pytest.mark.parametrize(
    ("clusters", "pools", "expected"),
    [
        (1, 1000, 100),  # one big cluster: 10 % of 1,000 pools
        (10, 100, 100),  # per cluster 10, fleet 100: both bind at once
        (50, 20, 100),  # per cluster 2 (100 in all), fleet 100
        (200, 5, 100),  # per cluster floor 1 (200 in all): the fleet limit binds
        (5, 8, 4),  # tiny fleet: floor 1 per cluster would allow 5; 10 % of 40 pools is 4
    ],
)
def test_storm_of_1000_critical_findings_lets_exactly_the_allowed_number_through(
    clusters, pools, expected
):
    state = PolicyState({f"c{c}": pools for c in range(clusters)})
    findings = storm(clusters, pools)
    decisions = decide_all(((x, TARGETS.route(x)) for x in findings), state, T0, Mode.ENFORCE)
    assert len(decisions) == 1000
    executed = [d for d in decisions if d.status is Status.EXECUTE]
    blocked = [d for d in decisions if d.status is Status.BLOCKED]
    assert len(executed) == expected
    assert len(blocked) == 1000 - expected
    assert {d.guard for d in blocked} <= {Guard.BLAST_CLUSTER, Guard.BLAST_FLEET}
    assert all(d.notify and "blast radius" in d.reasons[-1] for d in blocked)
    assert all(d.target is not None and d.action is Action.RESTORE for d in decisions)
    per_cluster = defaultdict(int)
    for d in executed:
        per_cluster[d.cluster] += 1
    limit = Guards().cluster_limit(pools)
    assert max(per_cluster.values()) <= limit
    assert state.executed_in_window(T0, timedelta(minutes=10)) == expected


def test_blocked_reasons_carry_the_numbers():
    state = PolicyState({"c0": 20})
    decisions = decide_all(
        ((x, TARGETS.route(x)) for x in storm(1, 20, total=3)), state, T0, Mode.ENFORCE
    )
    assert [d.status for d in decisions] == [Status.EXECUTE, Status.EXECUTE, Status.BLOCKED]
    assert "action 1 of 2 for cluster c0 and 1 of 2 fleet-wide in 10m" in decisions[0].reasons[-1]
    assert decisions[2].reasons[-1] == (
        "blast radius: cluster c0 already had 2 of 2 actions in the last 10m "
        "(10% of 20 pools, floor 1)"
    )


def test_storm_then_the_window_slides():
    state = PolicyState({"c0": 20})  # 2 per 10 minutes
    first = decide_all(
        ((x, TARGETS.route(x)) for x in storm(1, 20, total=20)), state, T0, Mode.ENFORCE
    )
    assert sum(d.executable for d in first) == 2
    later = storm(1, 20, total=40)[20:]  # new findings (other fields)
    at_9 = decide_all(
        ((x, TARGETS.route(x)) for x in later[:5]), state, T0 + timedelta(minutes=9), Mode.ENFORCE
    )
    assert not any(d.executable for d in at_9)
    at_10 = decide_all(
        ((x, TARGETS.route(x)) for x in later[5:]),
        state,
        T0 + timedelta(minutes=10, seconds=1),
        Mode.ENFORCE,
    )
    assert sum(d.executable for d in at_10) == 2


def test_storm_on_one_pool_is_one_heal_but_still_counts_against_blast_radius():
    """1,000 label findings of one pool at once: the flap guard sees one heal; the blast
    radius counts actions, so only the cluster's limit of them run."""
    state = PolicyState({"c0": 20})
    findings = storm(1, 1, total=1000)
    ds = decide_all(((x, TARGETS.route(x)) for x in findings), state, T0, Mode.ENFORCE)
    assert sum(d.executable for d in ds) == 2
    assert all(d.guard is Guard.BLAST_CLUSTER for d in ds if not d.executable)
    assert "part of the heal started at" in ds[1].reasons[-1]


def test_explicit_limits_override_the_fraction_and_zero_stops_everything():
    policy = Policy(guards=Guards(max_per_cluster=3, max_fleet=5))
    state = PolicyState({"c0": 1000, "c1": 1000})
    ds = decide_all(
        ((x, TARGETS.route(x)) for x in storm(2, 100, total=100)),
        state,
        T0,
        Mode.ENFORCE,
        policy=policy,
    )
    assert sum(d.executable for d in ds) == 5
    stop = Policy(guards=Guards(max_per_cluster=0))
    d = decide(f(), route(Owner.CLUSTER), PolicyState(), T0, Mode.ENFORCE, policy=stop)
    assert d.status is Status.BLOCKED and "0 of 0" in d.reasons[-1]


def test_unknown_cluster_gets_the_floor_of_one():
    state = PolicyState()
    ds = decide_all(((x, TARGETS.route(x)) for x in storm(1, 5, total=5)), state, T0, Mode.ENFORCE)
    assert [d.executable for d in ds] == [True, False, False, False, False]


# --- flap, cooldown, coalescing ---------------------------------------------------------------

ROOMY = Policy(guards=Guards(max_per_cluster=1000, max_fleet=1000))


def test_flap_guard_stops_a_pool_healed_k_times_and_alerts():
    state = PolicyState({"prod": 100})
    finding = f()
    statuses = []
    for i in range(6):  # the same label is changed back by hand every 3 minutes
        d = decide(
            finding,
            route(Owner.CLUSTER),
            state,
            T0 + timedelta(minutes=3 * i),
            Mode.ENFORCE,
            policy=ROOMY,
        )
        record(d, state, policy=ROOMY)
        statuses.append((d.status, d.guard))
    assert statuses[:3] == [(Status.EXECUTE, None)] * 3
    assert statuses[3] == (Status.BLOCKED, Guard.FLAP)
    assert statuses[4:] == [(Status.BLOCKED, Guard.QUARANTINE)] * 2
    # after the flap window the pool is acted on again
    d = decide(
        finding,
        route(Owner.CLUSTER),
        state,
        T0 + timedelta(minutes=9 + 31),
        Mode.ENFORCE,
        policy=ROOMY,
    )
    assert d.status is Status.EXECUTE


def test_flap_reason_has_the_numbers():
    state = PolicyState({"prod": 100})
    for i in range(4):
        d = decide(
            f(),
            route(Owner.CLUSTER),
            state,
            T0 + timedelta(minutes=3 * i),
            Mode.ENFORCE,
            policy=ROOMY,
        )
        record(d, state, policy=ROOMY)
    assert d.guard is Guard.FLAP and d.notify
    assert (
        "healed 3 times in the last 30m (limit 3); stop acting on it for 30m and alert"
        in d.reasons[-1]
    )


def test_flap_is_per_pool():
    state = PolicyState({"prod": 100})
    for i in range(4):
        d = decide(
            f(),
            route(Owner.CLUSTER),
            state,
            T0 + timedelta(minutes=3 * i),
            Mode.ENFORCE,
            policy=ROOMY,
        )
        record(d, state, policy=ROOMY)
    assert d.guard is Guard.FLAP
    other = decide(
        f(pool="gpu"),
        route(Owner.CLUSTER),
        state,
        T0 + timedelta(minutes=10),
        Mode.ENFORCE,
        policy=ROOMY,
    )
    assert other.status is Status.EXECUTE


def test_cooldown_blocks_the_same_finding_quietly():
    state = fresh()
    first = decide(f(), route(Owner.CLUSTER), state, T0, Mode.ENFORCE)
    record(first, state)
    again = decide(f(), route(Owner.CLUSTER), state, T0 + timedelta(seconds=90), Mode.ENFORCE)
    assert (again.status, again.guard, again.notify) == (Status.BLOCKED, Guard.COOLDOWN, False)
    assert "90s ago (cooldown 2m)" in again.reasons[-1]


def test_the_same_operation_is_coalesced_onto_the_first_decision():
    """Two label findings of a pool whose fix is an Argo CD sync: one sync, not two."""
    state = fresh()
    rt = route(Owner.CLUSTER, APP, direct=False)
    one = decide(f(field="labels.a"), rt, state, T0, Mode.ENFORCE)
    record(one, state)
    two = decide(f(field="labels.b"), rt, state, T0, Mode.ENFORCE)
    assert (two.status, two.guard) == (Status.PLANNED, Guard.COALESCED)
    assert (
        one.id in two.reasons[-1]
        and "sync of Argo CD application prod-node-config" in two.reasons[-1]
    )


# --- modes ------------------------------------------------------------------------------------


def test_dry_run_is_guarded_like_enforce_but_spends_no_real_budget():
    state = PolicyState({"c0": 20})
    rehearsed = decide_all(((x, TARGETS.route(x)) for x in storm(1, 20, total=10)), state, T0)
    assert [d.status for d in rehearsed].count(Status.DRY_RUN) == 2
    assert all(
        "dry-run: nothing would be sent" in d.reasons
        for d in rehearsed
        if d.status is Status.BLOCKED
    )
    assert state.executed_in_window(T0, timedelta(minutes=10)) == 0
    real = decide_all(
        ((x, TARGETS.route(x)) for x in storm(1, 20, total=10)), state, T0, Mode.ENFORCE
    )
    assert sum(d.executable for d in real) == 2


def test_approval_waits_then_executes_until_its_ttl():
    state = fresh()
    d = decide(f(), route(Owner.CLUSTER), state, T0, Mode.APPROVAL)
    assert (d.status, d.notify) == (Status.PENDING_APPROVAL, True)
    assert d.expires_at == T0 + timedelta(hours=1)
    assert f"fleetwarden approve {d.id}" in d.reasons[-1]
    record(d, state)
    assert state.pending == {d.id: d}
    # the same drift reported again while waiting: no second request
    again = decide(f(), route(Owner.CLUSTER), state, T0 + timedelta(minutes=1), Mode.APPROVAL)
    assert (again.status, again.guard) == (Status.PLANNED, Guard.COALESCED)
    assert d.id in again.reasons[-1]
    # approved five minutes later: executable for 15 minutes, same id
    ok = approve(d.id, state, T0 + timedelta(minutes=5))
    assert (ok.id, ok.status, ok.mode) == (d.id, Status.EXECUTE, Mode.APPROVAL)
    assert ok.approved_at == T0 + timedelta(minutes=5)
    assert ok.expires_at == T0 + timedelta(minutes=20)
    assert not ok.expired(T0 + timedelta(minutes=20)) and ok.expired(T0 + timedelta(minutes=21))
    assert "approved at" in ok.reasons[-1]
    record(ok, state)
    assert state.pending == {} and state.waiting == {}
    assert state.executed_in_window(T0 + timedelta(minutes=5), timedelta(minutes=10)) == 1
    with pytest.raises(UnknownDecision, match=d.id):
        approve(d.id, state, T0 + timedelta(minutes=6))


def test_approving_an_expired_request_cancels_it_and_runs_nothing():
    state = fresh()
    d = decide(f(), route(Owner.CLUSTER), state, T0, Mode.APPROVAL)
    record(d, state)
    late = approve(d.id, state, T0 + timedelta(hours=2))
    assert (late.status, late.guard, late.executable) == (Status.CANCELLED, Guard.EXPIRED, False)
    assert late.cancelled_at == T0 + timedelta(hours=2) and late.approved_at is None
    assert "expired at 2026-03-01T13:00:00Z unapproved" in late.reasons[-1]
    record(late, state)
    assert state.pending == {} and state.waiting == {}
    assert state.executed_in_window(T0 + timedelta(hours=2), timedelta(minutes=10)) == 0
    # approving it again says it was cancelled, and why: nothing to record
    with pytest.raises(RequestCancelled, match=r"was cancelled at .* expired") as again:
        approve(d.id, state, T0 + timedelta(hours=2, minutes=1))
    assert again.value.decision == late


def test_an_expired_request_does_not_swallow_a_new_one_for_the_same_drift():
    """It stays in ``pending`` a while (so that approving it says "expired"), but a drift
    still there after the wait gets a fresh request, not a coalesced nothing."""
    state = fresh()
    d = decide(f(), route(Owner.CLUSTER), state, T0, Mode.APPROVAL)
    record(d, state)
    later = T0 + timedelta(hours=1, minutes=1)
    again = decide(f(), route(Owner.CLUSTER), state, later, Mode.APPROVAL)
    assert (again.status, again.guard) == (Status.PENDING_APPROVAL, None)
    record(again, state)
    assert set(state.pending) == {d.id, again.id}
    assert approve(d.id, state, later).guard is Guard.EXPIRED
    assert approve(again.id, state, later).status is Status.EXECUTE


def test_a_request_records_the_mode_and_configuration_it_was_made_under():
    d = decide(f(), route(Owner.CLUSTER), fresh(), T0, Mode.APPROVAL, config="abc")
    assert (d.status, d.mode, d.config) == (Status.PENDING_APPROVAL, Mode.APPROVAL, "abc")
    assert Decision.from_json(json.loads(json.dumps(d.to_json()))) == d
    assert d.to_json()["config"] == "abc"


@pytest.mark.parametrize(
    ("mode", "config", "guard", "says"),
    [
        (Mode.DRY_RUN, "abc", Guard.MODE_CHANGED, "made in approval mode and the service now "),
        (Mode.ENFORCE, "abc", Guard.MODE_CHANGED, "now runs in enforce mode"),
        (Mode.APPROVAL, "def", Guard.CONFIG_CHANGED, "(configuration abc, now def)"),
        (Mode.APPROVAL, None, Guard.CONFIG_CHANGED, "now not recorded"),
    ],
)
def test_a_request_is_not_approvable_under_another_mode_or_configuration(mode, config, guard, says):
    state = fresh()
    d = decide(f(), route(Owner.CLUSTER), state, T0, Mode.APPROVAL, config="abc")
    record(d, state)
    now = T0 + timedelta(minutes=5)
    refused = approve(d.id, state, now, mode=mode, config=config)
    assert (refused.status, refused.guard, refused.cancelled_at) == (Status.CANCELLED, guard, now)
    assert says in refused.reasons[-1] and "nothing is done" in refused.reasons[-1]
    # the sweep says the same, with the same guard
    (swept,) = cancellations(state, now, mode=mode, config=config)
    assert (swept.id, swept.guard) == (d.id, guard)
    assert swept.reasons[-1].startswith(f"cancelled at {now:%Y-%m-%dT%H:%M:%S}Z: ")
    # under its own mode and configuration it runs; without a mode given nothing is checked
    assert approve(d.id, state, now, mode=Mode.APPROVAL, config="abc").executable
    assert approve(d.id, state, now).executable


def test_the_sweep_cancels_expired_and_outdated_requests_oldest_first_and_keeps_the_rest():
    state = fresh()
    made = []
    for k, (minutes, config) in enumerate([(0, "old"), (10, "abc"), (50, "abc")]):
        x = f(field=f"labels.k{k}")
        d = decide(x, route(Owner.CLUSTER), state, T0 + timedelta(minutes=minutes),
                   Mode.APPROVAL, config=config)  # fmt: skip
        record(d, state)
        made.append(d)
    now = T0 + timedelta(minutes=75)  # the second one expired at T0 + 70m
    swept = cancellations(state, now, mode=Mode.APPROVAL, config="abc")
    assert [(d.id, d.guard) for d in swept] == [
        (made[0].id, Guard.CONFIG_CHANGED),  # the mode and configuration come before expiry
        (made[1].id, Guard.EXPIRED),
    ]
    for d in swept:
        record(d, state)
    assert set(state.pending) == {made[2].id} and set(state.closed) == {made[0].id, made[1].id}
    assert cancellations(state, now, mode=Mode.APPROVAL, config="abc") == []
    # a cancelled request is remembered a while (approving it says so), then forgotten
    with pytest.raises(RequestCancelled, match="configuration old, now abc"):
        approve(made[0].id, state, now)
    much_later = now + timedelta(hours=1, minutes=1)
    record(
        decide(f(field="labels.x"), route(Owner.CLUSTER), state, much_later, Mode.ENFORCE), state
    )
    with pytest.raises(UnknownDecision):
        approve(made[0].id, state, much_later)


def test_the_configuration_fingerprint_follows_rules_and_routing_not_guards():
    base = fingerprint(DEFAULT_POLICY, ownership=[{"pool": "gpu", "owner": "cluster"}])
    assert base == fingerprint(DEFAULT_POLICY, ownership=[{"owner": "cluster", "pool": "gpu"}])
    assert len(base) == 16 and int(base, 16) >= 0
    roomy = Policy(guards=Guards(max_fleet=99, pending_ttl=timedelta(hours=3)))
    assert fingerprint(roomy, ownership=[{"pool": "gpu", "owner": "cluster"}]) == base
    other_rules = Policy(rules=(PolicyRule(Action.ALERT),))
    assert fingerprint(other_rules, ownership=[{"pool": "gpu", "owner": "cluster"}]) != base
    assert fingerprint(DEFAULT_POLICY, ownership=[{"pool": "gpu", "owner": "infra"}]) != base
    assert fingerprint(DEFAULT_POLICY, ownership=[], argocd="https://a") != fingerprint(
        DEFAULT_POLICY, ownership=[], argocd="https://b"
    )
    with pytest.raises(TypeError, match="fingerprint"):
        fingerprint(DEFAULT_POLICY, thing=object())


def test_approval_rechecks_the_blast_radius_at_approval_time():
    state = PolicyState({"c0": 20})
    pending = decide_all(
        ((x, TARGETS.route(x)) for x in storm(1, 20, total=5)), state, T0, Mode.APPROVAL
    )
    assert all(d.status is Status.PENDING_APPROVAL for d in pending)  # nothing spent yet
    results = []
    for d in pending:
        ok = approve(d.id, state, T0 + timedelta(minutes=1))
        record(ok, state)
        results.append(ok.status)
    assert results == [Status.EXECUTE] * 2 + [Status.BLOCKED] * 3


def test_every_decision_has_reasons_and_serialises():
    state = PolicyState({"c0": 20})
    items = [(x, TARGETS.route(x)) for x in storm(1, 20, total=30)]
    items += [(f(severity=s), route(Owner.CLUSTER)) for s in Severity]
    for mode in Mode:
        for d in decide_all(items, state, T0, mode):
            assert d.reasons and all(isinstance(r, str) and r for r in d.reasons)
            assert json.loads(json.dumps(d.to_json()))["status"] == d.status.value


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fraction": 0}, "fraction"),
        ({"fraction": 1.5}, "fraction"),
        ({"floor": 0}, "floor"),
        ({"window": timedelta(0)}, "window"),
        ({"flap_heals": 0}, "flap_heals"),
        ({"heal_burst": timedelta(hours=1)}, "heal_burst"),
        ({"max_fleet": -1}, "max_fleet"),
    ],
)
def test_bad_guard_settings_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Guards(**kwargs)


# --- properties -------------------------------------------------------------------------------

EVENT = st.tuples(
    st.integers(min_value=0, max_value=400),  # seconds since the previous finding
    st.integers(min_value=0, max_value=3),  # cluster
    st.integers(min_value=0, max_value=4),  # pool
    st.integers(min_value=0, max_value=6),  # field
    st.sampled_from([Severity.CRITICAL, Severity.HIGH, Severity.MEDIUM]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(EVENT, max_size=120),
    pools=st.lists(st.integers(min_value=0, max_value=60), min_size=4, max_size=4),
    mode=st.sampled_from([Mode.ENFORCE, Mode.DRY_RUN]),
    flap_heals=st.integers(min_value=1, max_value=4),
)
def test_guards_never_allow_more_than_the_limits_in_any_window(events, pools, mode, flap_heals):
    guards = Guards(flap_heals=flap_heals, cooldown=timedelta(seconds=60))
    policy = Policy(guards=guards)
    state = PolicyState({f"c{i}": n for i, n in enumerate(pools)})
    now = T0
    allowed: list[Decision] = []
    for dt, c, p, k, sev in events:
        now += timedelta(seconds=dt)
        x = f(Layer.L1, f"labels.k{k}", severity=sev, cluster=f"c{c}", pool=f"p{p}")
        d = decide(x, TARGETS.route(x), state, now, mode, policy=policy)
        record(d, state, policy=policy)
        assert d.reasons
        if d.status in (Status.EXECUTE, Status.DRY_RUN):
            allowed.append(d)
    w = guards.window
    fleet_limit = guards.fleet_limit(sum(pools))
    for d in allowed:  # every closed window [t - w, t] ending at an allowed action
        in_window = [e for e in allowed if d.at - w <= e.at <= d.at]
        assert len(in_window) <= fleet_limit
        same = [e for e in in_window if e.cluster == d.cluster]
        assert len(same) <= guards.cluster_limit(pools[int(d.cluster[1:])])
    # flap: heal starts per pool (actions within heal_burst of a start join it)
    starts: dict[tuple[str, str | None], list[datetime]] = defaultdict(list)
    for d in allowed:
        s = starts[(d.cluster, d.pool)]
        if not s or s[-1] < d.at - guards.heal_burst:
            s.append(d.at)
    for s in starts.values():
        for t in s:
            assert sum(t - guards.flap_window <= u <= t for u in s) <= flap_heals


# --- fights --------------------------------------------------------------------------------


def test_a_fought_field_pauses_the_heal_and_counts_against_no_guard():
    state = fresh()
    made = decide(f(), route(Owner.CLUSTER), state, T0, Mode.ENFORCE)
    assert made.status is Status.EXECUTE
    paused = pause(made, ["kubectl-edit, argocd-controller are fighting over labels.team"])
    assert (paused.status, paused.guard, paused.notify) == (Status.BLOCKED, Guard.FIGHT, True)
    assert (
        paused.reasons[-1]
        == "paused: kubectl-edit, argocd-controller are fighting over labels.team"
    )
    record(paused, state)
    # nothing was spent: the same finding decided again right away is executable
    assert decide(f(), route(Owner.CLUSTER), state, T0, Mode.ENFORCE).status is Status.EXECUTE


def test_an_alert_is_not_paused():
    alert = decide(f(Layer.FIGHT, "labels.team", None, None), route(Owner.NONE), fresh(), T0)
    assert pause(alert, ["a fight"]) == alert
