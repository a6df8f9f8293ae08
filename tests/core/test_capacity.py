"""Capacity after scaling: unschedulable pods linked to the scale-down that caused them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core import capacity
from fleetwarden.core.actors import ActorKind
from fleetwarden.core.capacity import (
    CapacityState,
    PodObservation,
    ScaleDown,
    capacity_findings,
    observe_pod,
    observe_scale,
    pod_observation,
    scale_down_from_change,
    scale_down_from_lifecycle,
)
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.findings import Layer, Severity

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ARN = "arn:aws:sts::111122223333:assumed-role/Admin/alice"


def pod(name: str, *, at: datetime | None, unschedulable: bool = True, cluster: str = "prod"):
    return PodObservation(cluster, "shop", name, unschedulable, at)


def scaled(pool: str = "general", at: datetime = T0, cluster: str = "prod") -> ScaleDown:
    found = scale_down_from_lifecycle(cluster, {"pool": pool, "from": 5, "to": 3}, at)
    assert found is not None
    return found


def test_a_pod_unschedulable_after_a_scale_down_is_one_high_capacity_finding():
    state = observe_scale(CapacityState(), scaled(), now=T0)
    state = observe_pod(state, pod("api-1", at=T0 + timedelta(minutes=2)), now=T0)
    [f] = capacity_findings(state)
    assert (f.cluster, f.pool, f.layer, f.field) == (
        "prod",
        "general",
        Layer.CAPACITY,
        "pods.unschedulable",
    )
    assert f.severity is Severity.HIGH
    assert f.extra["pods"] == ["shop/api-1"]
    assert f.extra["scaledDown"]["from"] == 5 and f.extra["scaledDown"]["to"] == 3
    assert f.to_json()["layer"] == "CAPACITY"


def test_the_finding_clears_when_the_pod_schedules_or_is_deleted():
    state = observe_scale(CapacityState(), scaled(), now=T0)
    later = T0 + timedelta(minutes=1)
    state = observe_pod(state, pod("a", at=later), now=later)
    state = observe_pod(state, pod("b", at=later), now=later)
    state = observe_pod(state, pod("a", at=None, unschedulable=False), now=later)
    assert capacity_findings(state)[0].extra["pods"] == ["shop/b"]
    gone = pod_observation("prod", {"metadata": {"namespace": "shop", "name": "b"}}, deleted=True)
    assert capacity_findings(observe_pod(state, gone, now=later)) == []


def test_outside_the_window_or_before_the_scale_down_nothing_is_linked():
    state = observe_scale(CapacityState(), scaled(), now=T0)
    late = T0 + capacity.DEFAULT_WINDOW + timedelta(seconds=1)
    assert capacity_findings(observe_pod(state, pod("x", at=late), now=late)) == []
    early = T0 - timedelta(seconds=1)
    assert capacity_findings(observe_pod(state, pod("y", at=early), now=T0)) == []
    other_cluster = pod("z", at=T0 + timedelta(minutes=1), cluster="staging")
    assert capacity_findings(observe_pod(state, other_cluster, now=T0)) == []


def test_a_scale_up_is_no_scale_down():
    assert scale_down_from_lifecycle("prod", {"pool": "g", "from": 3, "to": 5}, T0) is None
    assert scale_down_from_lifecycle("prod", {"pool": None, "from": 5, "to": 3}, T0) is None


def test_the_providers_scale_event_names_who_scaled_it_and_merges_with_the_watchs():
    """The watch sees the nodes go first; the provider's event (minutes later) brings the actor."""
    event = ChangeEvent(
        id="e1", source="aws.autoscaling", type="aws.eks.UpdateNodegroupConfig",
        provider=EventSource.AWS, operation=Operation.SCALE, time=T0 + timedelta(seconds=30),
        cluster="prod", pool="general", actor=ARN, detail={"desiredCapacity": 3},
    )  # fmt: skip
    from_cloud = scale_down_from_change(event)
    assert from_cloud is not None and from_cloud.actor is not None
    assert from_cloud.actor.kind is ActorKind.HUMAN
    state = observe_scale(CapacityState(), scaled(), now=T0)
    state = observe_scale(state, from_cloud, now=T0 + timedelta(minutes=3))
    assert len(state.scale_downs) == 1
    state = observe_pod(state, pod("api", at=T0 + timedelta(minutes=4)), now=T0)
    [f] = capacity_findings(state)
    assert f.extra["actor"] == {"name": ARN, "kind": "human", "via": "cloudEvent"}
    assert ARN in f.message and "from 5 to 3" in f.message


def test_failed_or_growing_provider_scale_events_are_not_scale_downs():
    base = dict(
        id="e", source="s", type="t", provider=EventSource.AWS, operation=Operation.SCALE,
        time=T0, cluster="prod", pool="general",
    )  # fmt: skip
    assert scale_down_from_change(ChangeEvent(**base, outcome="failure")) is None
    assert scale_down_from_change(ChangeEvent(**base, detail={"from": 2, "to": 4})) is None
    assert scale_down_from_change(ChangeEvent(**{**base, "operation": Operation.UPDATE})) is None


def test_pod_observation_reads_the_schedulers_condition():
    obj = {
        "metadata": {"namespace": "shop", "name": "api-1"},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient cpu.",
                    "lastTransitionTime": "2026-03-01T12:03:00Z",
                }
            ],
        },
    }
    seen = pod_observation("prod", obj)
    assert seen.unschedulable and seen.since == T0 + timedelta(minutes=3)
    assert "Insufficient cpu" in seen.message
    obj["status"]["conditions"][0]["reason"] = "SchedulingGated"
    assert not pod_observation("prod", obj).unschedulable


def test_the_finding_id_stays_while_more_pods_join():
    state = observe_scale(CapacityState(), scaled(), now=T0)
    state = observe_pod(state, pod("a", at=T0), now=T0)
    first = capacity_findings(state)[0].id
    state = observe_pod(state, pod("b", at=T0), now=T0)
    assert capacity_findings(state)[0].id == first


# --- properties ------------------------------------------------------------------------------

_minutes = st.integers(min_value=-5, max_value=30)
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("scale"), st.sampled_from(["a", "b"]), _minutes),
        st.tuples(
            st.just("pod"),
            st.sampled_from(["p1", "p2", "p3"]),
            _minutes,
            st.booleans(),
        ),
    ),
    max_size=25,
)


def _run(ops):
    state, now = CapacityState(), T0
    for op in ops:
        now = max(now, T0 + timedelta(minutes=op[2]))
        if op[0] == "scale":
            state = observe_scale(state, scaled(op[1], T0 + timedelta(minutes=op[2])), now=now)
        else:
            state = observe_pod(
                state, pod(op[1], at=T0 + timedelta(minutes=op[2]), unschedulable=op[3]), now=now
            )
    return state, now


@settings(max_examples=200, deadline=None)
@given(_ops)
def test_every_linked_pod_is_unschedulable_within_the_window_after_its_scale_down(ops):
    state, _ = _run(ops)
    last = {}
    for op in ops:
        if op[0] == "pod":
            last[op[1]] = op[3]
    for (_, ref), link in state.links.items():
        assert last[ref.split("/")[1]] is True  # a pod seen schedulable last is never linked
        scale = state.scale_downs[link.scale]
        assert scale.at <= link.since <= scale.at + state.window
    named = sorted(p for f in capacity_findings(state) for p in f.extra["pods"])
    assert named == sorted(ref for (_, ref) in state.links)


@settings(max_examples=200, deadline=None)
@given(_ops)
def test_once_every_pod_schedules_no_finding_is_left(ops):
    state, now = _run(ops)
    for name in ("p1", "p2", "p3"):
        state = observe_pod(state, pod(name, at=None, unschedulable=False), now=now)
    assert capacity_findings(state) == []
    assert all(now - s.at <= state.window for s in state.scale_downs.values())
