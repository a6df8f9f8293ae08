"""Churn in the live watcher (app.churning): removals the autoscaler explains are held for a
replacement, reported once; a person's removal is no churn and ends the pool's churn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetwarden.app.churning import ChurnWatch, snapshot_of
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec, Taint

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
POOL = "eks.amazonaws.com/nodegroup"
SPEC = NodePoolSpec("general", "c", instance_types=("m5.large",), min_size=1)
SHORT = Finding("c", "general", Layer.COUNT, "nodeCount", 1, 0, Severity.HIGH)


def node(name: str, *taints: str, itype: str = "m5.large") -> ObservedNode:
    labels = {POOL: "general", "node.kubernetes.io/instance-type": itype}
    return ObservedNode(name, labels, tuple(Taint(t, None, "NoSchedule") for t in taints))


def test_a_replacement_within_the_grace_is_one_replaced_churn_and_explains_the_count():
    watch = ChurnWatch("c")
    gone = snapshot_of(node("a", "ToBeDeletedByClusterAutoscaler"))
    assert watch.removed(gone, "general", SPEC, T0) == []  # held for its replacement
    assert watch.explains(SHORT, T0)
    (d,) = watch.added(snapshot_of(node("b")), "general", SPEC, T0 + timedelta(seconds=5))
    assert (d.to_json()["change"], d.to_json()["removed"], d.to_json()["added"]) == (
        "replaced",
        ["a"],
        ["b"],
    )
    assert watch.flush(T0 + timedelta(hours=1)) == []


def test_a_removal_without_replacement_is_reported_alone_after_the_grace():
    watch = ChurnWatch("c", grace=timedelta(minutes=2))
    watch.removed(snapshot_of(node("a", "karpenter.sh/disrupted")), "general", SPEC, T0)
    assert watch.flush(T0 + timedelta(minutes=1)) == []
    (d,) = watch.flush(T0 + timedelta(minutes=2))
    assert (d.to_json()["change"], d.to_json()["causes"]) == ("removed", ["karpenter-disruption"])


def test_a_replacement_that_does_not_match_the_pool_is_no_churn_but_the_removal_was():
    watch = ChurnWatch("c")
    watch.removed(snapshot_of(node("a", "ToBeDeletedByClusterAutoscaler")), "general", SPEC, T0)
    (d,) = watch.added(snapshot_of(node("b", itype="t3.small")), "general", SPEC, T0)
    assert d.to_json()["change"] == "removed"


def test_a_hand_deleted_node_is_no_churn_and_ends_the_pool_s_churn():
    watch = ChurnWatch("c")
    watch.removed(snapshot_of(node("a", "ToBeDeletedByClusterAutoscaler")), "general", SPEC, T0)
    watch.added(snapshot_of(node("b")), "general", SPEC, T0)
    assert watch.explains(SHORT, T0)
    assert watch.removed(snapshot_of(node("b")), "general", SPEC, T0) == []
    assert not watch.explains(SHORT, T0)
