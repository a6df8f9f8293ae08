"""The one nodes -> diff -> track path (app.rediffing): what the watcher, the inspector and
the service's first pass share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetwarden.app.rediffing import cluster_groups, diff_and_track, diff_group
from fleetwarden.core.diffing import diff_cluster
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.tracking import FindingEventType, FindingTracker

NOW = datetime(2026, 1, 1, tzinfo=UTC)
OPTIONS = DiffOptions()
POOL_LABEL = "eks.amazonaws.com/nodegroup"


def node(name: str, pool: str | None, itype: str = "m5.large", **labels: str) -> ObservedNode:
    base = {"node.kubernetes.io/instance-type": itype, **labels}
    if pool is not None:
        base[POOL_LABEL] = pool
    return ObservedNode(name, labels=base, kubelet_version="v1.30.4")


SPECS = [
    NodePoolSpec("general", "c1", instance_types=("m5.large",), labels={"tier": "web"}),
    NodePoolSpec("empty", "c1", instance_types=("m5.large",), min_size=1),
]
NODES = [
    node("a", "general", tier="web"),
    node("b", "general", itype="t3.medium", tier="web"),  # the console resize
    node("c", "ghost"),  # a group no desired pool claims
    node("d", None),  # no pool label at all
]


def ids(findings):
    return sorted(f.id for f in findings)


def test_a_whole_cluster_gives_exactly_the_findings_of_the_scan():
    groups = cluster_groups(SPECS, NODES, options=OPTIONS)
    assert set(groups) == {"general", "empty", "ghost", None}
    assert groups["empty"] == (SPECS[1], [])
    tracker = FindingTracker()
    events = diff_and_track(tracker, "c1", groups, options=OPTIONS, now=NOW)
    scanned = diff_cluster("c1", SPECS, NODES, options=OPTIONS).findings
    assert scanned  # the fixture carries drift
    assert ids(e.finding for e in events) == ids(scanned)
    assert {e.type for e in events} == {FindingEventType.APPEARED}
    assert ids(tracker.current()) == ids(scanned)


def test_a_scope_that_no_longer_drifts_clears_its_findings_and_only_its_own():
    tracker = FindingTracker()
    diff_and_track(tracker, "c1", cluster_groups(SPECS, NODES, options=OPTIONS),
                   options=OPTIONS, now=NOW)  # fmt: skip
    fixed = [node("a", "general", tier="web"), node("b", "general", tier="web")]
    later = NOW + timedelta(seconds=5)
    events = diff_and_track(tracker, "c1", {"general": (SPECS[0], fixed)}, options=OPTIONS,
                            now=later)  # fmt: skip
    assert events and {e.type for e in events} == {FindingEventType.CLEARED}
    assert all(e.finding.pool == "general" and e.at == later for e in events)
    # the other scopes (the empty pool, the strays) keep theirs
    assert {f.pool for f in tracker.current()} >= {"empty", "ghost"}


def test_a_group_with_no_desired_pool_and_no_node_has_no_finding():
    assert diff_group("c1", "gone", None, [], options=OPTIONS) == []
    strays = diff_group("c1", "ghost", None, [node("c", "ghost")], options=OPTIONS)
    assert strays and all(f.pool == "ghost" for f in strays)


def test_the_nodes_of_a_pool_defined_twice_are_in_no_group_as_in_the_scan():
    """Serve's first pass (``cluster_groups`` over ``assign_pools``): ``general`` defined in
    two files is compared in neither, and its nodes are no strays either -- no group holds
    them, so no finding says "not in the desired state" of them; the scan says the same."""
    from fleetwarden.core.fleet import assign_pools

    twice = [
        NodePoolSpec("general", "c1", instance_types=("m5.large",), source="a.yaml"),
        NodePoolSpec("general", "c1", instance_types=("m5.xlarge",), source="b.tf"),
        SPECS[1],
    ]
    assigned = assign_pools(twice, ["c1"])
    pools, held = assigned.pools["c1"], assigned.held["c1"]
    groups = cluster_groups(pools, NODES, options=OPTIONS, held=held)
    assert set(groups) == {"empty", "ghost", None}
    events = diff_and_track(FindingTracker(), "c1", groups, options=OPTIONS, now=NOW)
    assert "general" not in {e.finding.pool for e in events}
    scanned = diff_cluster("c1", pools, NODES, options=OPTIONS, held=held).findings
    assert ids(e.finding for e in events) == ids(scanned)
