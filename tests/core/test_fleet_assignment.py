"""Which desired pools a fleet scan compares: a pool name defined twice in one cluster leaves
both definitions uncompared, each said (a shown skip naming the pool) -- nodes are grouped by
the value of their pool label alone, so which definition they follow cannot be told, and
comparing the first one found would pass or fail on a guess."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.fleet import (
    NothingToCompare,
    assign_pools,
    check_comparable,
    diff_fleet,
    field_counts,
)
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import FieldAccount, FieldStatus, NodePoolSpec


def _spec(name: str, source: str, *, cluster: str = "c1", size: int = 1) -> NodePoolSpec:
    return NodePoolSpec(
        name=name,
        cluster=cluster,
        source=source,
        min_size=size,
        max_size=size,
        kubernetes_version="v1.31.4",
    )


def _node(name: str, pool: str) -> ObservedNode:
    return ObservedNode(
        name, labels={"cluster.x-k8s.io/deployment-name": pool}, kubelet_version="v1.30.1"
    )


def test_a_name_defined_twice_in_a_cluster_is_compared_in_neither_definition():
    specs = [_spec("md", "a/md.yaml"), _spec("md", "b/md.yaml", size=3), _spec("web", "w.yaml")]
    assigned = assign_pools(specs, {"c1"})
    by_cluster, skips = assigned.pools, assigned.skips
    assert [s.name for s in by_cluster["c1"]] == ["web"]
    assert [(s.path, s.pool, s.shown) for s in skips] == [
        ("a/md.yaml", "md", True),
        ("b/md.yaml", "md", True),
    ]
    assert "defined 2 times (a/md.yaml, b/md.yaml)" in skips[0].reason
    assert "none is compared" in skips[0].reason


def test_the_scan_does_not_pass_on_the_first_definition():
    """Before, the first definition was compared and the second skipped: a scan whose nodes
    matched the first passed (0 findings) though the second asked for another version and
    three nodes."""
    specs = [_spec("md", "a/md.yaml"), _spec("md", "b/md.yaml", size=3)]
    report = diff_fleet(specs, {"c1": [_node("n1", "md")]})
    assert report.pools == 0
    assert {s.pool for s in report.skipped} == {"md"}
    assert not any(f.field in ("kubeletVersion", "nodeCount") for f in report.findings)


def test_one_name_in_two_clusters_is_two_pools():
    specs = [_spec("md", "a.yaml", cluster="c1"), _spec("md", "b.yaml", cluster="c2")]
    assigned = assign_pools(specs, {"c1", "c2"})
    by_cluster, skips = assigned.pools, assigned.skips
    assert not skips
    assert [s.source for s in by_cluster["c1"]] == ["a.yaml"]
    assert [s.source for s in by_cluster["c2"]] == ["b.yaml"]


@given(st.lists(st.sampled_from(["a", "b", "c"]), max_size=8))
def test_every_definition_is_compared_or_said(names):
    """A pool is compared exactly when its name is defined once; every other definition's file
    is in a shown skip naming it."""
    specs = [_spec(n, f"{i}.yaml") for i, n in enumerate(names)]
    assigned = assign_pools(specs, {"c1"})
    by_cluster, skips = assigned.pools, assigned.skips
    compared = {s.name for s in by_cluster.get("c1", [])}
    assert compared == {n for n in names if names.count(n) == 1}
    skipped = {(s.path, s.pool) for s in skips if s.shown}
    assert skipped == {(f"{i}.yaml", n) for i, n in enumerate(names) if names.count(n) > 1}


def test_the_nodes_of_a_pool_defined_twice_are_not_said_to_be_outside_the_desired_state():
    """They carry a desired pool's name: a SPEC ``pool`` finding ("not in the desired state",
    medium) about them was untrue. They are not compared, and the skip naming the pool is what
    is said of them."""
    specs = [_spec("md", "a/md.yaml"), _spec("md", "b/md.yaml", size=3), _spec("web", "w.yaml")]
    nodes = [_node("n1", "md"), _node("n2", "md"), _node("w1", "web"), _node("x1", "other")]
    report = diff_fleet(specs, {"c1": nodes})
    strays = [(f.pool, f.nodes) for f in report.findings if f.field == "pool"]
    assert strays == [("other", ("x1",))]  # a pool no file defines is still one
    assert not [f for f in report.findings if "n1" in f.nodes or f.pool == "md"]
    assert report.nodes == 4 and report.pools == 1
    assert [(s.path, s.pool) for s in report.skipped] == [("a/md.yaml", "md"), ("b/md.yaml", "md")]


def test_a_pool_defined_twice_with_a_name_prefix_claims_its_suffixed_nodes_too():
    """Nodes a definition would claim by its prefix (``app-`` + a generated suffix) are that
    pool's, so no strays either."""
    specs = [
        NodePoolSpec(name="app", cluster="c1", source=f"{d}.tf", name_prefix="app-")
        for d in ("a", "b")
    ]
    report = diff_fleet(specs, {"c1": [_node("n1", "app-20250101"), _node("n2", "db")]})
    assert [(f.pool, f.field) for f in report.findings] == [("db", "pool")]
    assert {s.pool for s in report.skipped} == {"app"}


def _labelled(name: str, pool: str) -> ObservedNode:
    return ObservedNode(name, labels={"cluster.x-k8s.io/deployment-name": pool})


@given(
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=6),
    st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=8),
)
def test_a_node_is_a_stray_exactly_when_no_file_defines_its_pool(names, groups):
    """Whatever is defined once, twice or not at all: a node gets the SPEC ``pool`` finding iff
    its pool is defined nowhere in its cluster; a node of a pool defined more than once is in
    no finding at all; a pool defined once is compared with its nodes."""
    specs = [_spec(n, f"{i}.yaml") for i, n in enumerate(names)]
    nodes = [_labelled(f"n{i}", g) for i, g in enumerate(groups)]
    report = diff_fleet(specs, {"c1": nodes})
    strays = {n for f in report.findings if f.field == "pool" for n in f.nodes}
    assert strays == {f"n{i}" for i, g in enumerate(groups) if g not in names}
    held = {f"n{i}" for i, g in enumerate(groups) if names.count(g) > 1}
    assert not held & {n for f in report.findings for n in f.nodes}
    assert not {f.pool for f in report.findings} & {n for n in names if names.count(n) > 1}
    assert report.pools == sum(1 for n in set(names) if names.count(n) == 1)


@given(
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=6),
    st.lists(st.sampled_from(["c1", "c2", None]), min_size=6, max_size=6),
)
def test_the_fields_line_counts_the_fields_of_the_pools_compared_only(names, clusters):
    """Defined twice, of a cluster nobody observed (c2), of no cluster: none of those pools'
    fields was compared, so none is counted -- the fields line and ``unresolved`` count the
    accounts of the pools that were, and agree."""
    account = (
        FieldAccount("instanceType", FieldStatus.COMPARED, "m5.large"),
        FieldAccount("labels", FieldStatus.UNRESOLVED, "var.labels", fact="labels"),
    )
    specs = [
        NodePoolSpec(name=n, cluster=c, source=f"{i}.yaml", account=account)
        for i, (n, c) in enumerate(zip(names, clusters, strict=False))
    ]
    report = diff_fleet(specs, {"c1": [_node("n1", "a")]})
    in_c1 = [s.name for s in specs if s.cluster == "c1"]
    once = [s for s in specs if s.cluster == "c1" and in_c1.count(s.name) == 1]
    assert report.fields == field_counts(once)
    assert report.fields["compared"] == report.pools == len(once)
    assert report.fields["unresolved"] == len(report.unresolved) == len(once)


def test_a_run_whose_every_pool_is_defined_twice_compares_nothing_and_is_refused():
    """As when no pool's name is known: nothing would be compared, so no pass (exit 2 unless
    ``--allow-empty``), with the pool and both files named. One pool compared anywhere among
    the clusters observed is a run, whose skips say the rest."""
    specs = [_spec("md", "a/md.yaml"), _spec("md", "b/md.yaml", size=3)]
    with pytest.raises(NothingToCompare) as caught:
        check_comparable(specs, {"c1"}, desired_paths=["desired/"])
    assert str(caught.value).startswith(
        "no pool in desired/ can be compared: pool 'md' of cluster 'c1' is defined 2 times "
        "(a/md.yaml, b/md.yaml)"
    )
    twice_more = [*specs, _spec("db", "a/db.yaml"), _spec("db", "b/db.yaml")]
    with pytest.raises(NothingToCompare, match=r"\(and 1 more pool names so\)"):
        check_comparable(twice_more, {"c1"}, desired_paths=["desired/"])
    check_comparable([*specs, _spec("web", "w.yaml", cluster="c2")], {"c1", "c2"}, desired_paths=[])


def test_strays_beside_a_pool_whose_name_is_not_known_say_they_may_be_its_nodes():
    """The unnamed pool is not compared (a skip says so) and the nodes of no pool are still a
    medium SPEC ``pool`` finding -- but they may be that pool's, which the finding now says,
    naming its file and expression; nodes with no pool label get both reasons. A cluster
    without such a pool (c2) says nothing of it; the pool of another cluster is not c2's."""
    from fleetwarden.core.pools import Unresolved

    unnamed = NodePoolSpec(
        name="custom", cluster="c1", source="main.tf", unresolved=(Unresolved("name", "var.name"),)
    )
    specs = [_spec("web", "w.yaml"), unnamed, _spec("web", "w.yaml", cluster="c2")]
    assigned = assign_pools(specs, {"c1", "c2"})
    assert assigned.unnamed == {"c1": [unnamed]}
    assert assigned.index("c1").unnamed == (unnamed,) and assigned.index("c2").unnamed == ()
    nodes = [_node("w1", "web"), _node("x1", "custom-a"), ObservedNode("bare")]
    report = diff_fleet(specs, {"c1": nodes, "c2": nodes})
    strays = {(f.cluster, f.pool): f.message for f in report.findings if f.field == "pool"}
    note = "cluster 'c1' has a pool whose name is not known ('custom' in main.tf: var.name)"
    assert strays[("c1", "custom-a")] == f"{note}: these nodes may be that pool's"
    assert strays[("c1", None)].startswith("these nodes carry none of the pool labels")
    assert strays[("c1", None)].endswith(f"; {note}: these nodes may be that pool's")
    assert strays[("c2", "custom-a")] == ""
    assert "not known" not in strays[("c2", None)]
