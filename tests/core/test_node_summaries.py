"""Summaries of consecutive parts of a node list merge into the summary of the whole, so two
processes can each reduce the half of a dump they read and only the summaries cross.

Pinned for any split point (hypothesis): the merged summary is the whole's, in every order it
keeps (combinations and groups by first node, names and allocatable runs in node order), and
its diff is the node-by-node diff (``tests/support/plain_diff.py``) -- including L3 medians
that depend on node order (``1Gi`` and ``1073741824`` read as one amount), prefixed pools that
gather several groups, nodes of no desired pool and control-plane nodes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core import diffing
from fleetwarden.core.findings import Finding, Layer
from fleetwarden.core.node_summaries import (
    ClusterSummary,
    Compared,
    NodeSummary,
    merge_clusters,
    merge_summaries,
    summarise_nodes,
)
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from tests.core.test_diffing_shared import QUANTITY, pools_and_nodes
from tests.support.plain_diff import plain_cluster_findings, plain_findings

OPTIONS = st.sampled_from([DiffOptions(), DiffOptions(median_min_nodes=1)])


def _shape(summary: NodeSummary) -> tuple[Any, ...]:
    """Everything a summary holds, orders included (dict equality ignores order)."""
    return summary.count, list(summary.facts.items()), summary.runs


def _cluster_shape(summary: ClusterSummary) -> list[Any]:
    return [(group, _shape(part)) for group, part in summary.groups.items()]


def _shown(findings: list[Finding]) -> list[tuple[Any, ...]]:
    return [
        (f.pool, f.layer, f.field, f.expected, f.actual, f.severity, f.nodes, f.message)
        for f in findings
    ]


@settings(max_examples=300, deadline=None)
@given(pools_and_nodes(), OPTIONS, st.data())
def test_a_pool_s_halves_merge_into_the_whole_at_any_split_point(case, options, data):
    spec, nodes = case
    cut = data.draw(st.integers(0, len(nodes)), label="cut")
    compared = Compared.of(spec)
    whole = summarise_nodes(nodes, compared)
    merged = merge_summaries(
        summarise_nodes(nodes[:cut], compared), summarise_nodes(nodes[cut:], compared)
    )
    assert _shape(merged) == _shape(whole)
    got = diffing._diff_summary(spec, merged, cluster=None, options=options)
    assert _shown(got) == _shown(plain_findings(spec, nodes, options))


def test_the_median_text_follows_node_order_across_the_cut():
    """``1Gi`` and ``1073741824`` are one amount: the stable sort's median is the text that
    comes first in node order at that position, wherever the nodes were cut."""
    big = {"memory": "4Gi"}
    spec = NodePoolSpec(name="p", cluster="c")
    for order in (["1Gi", "1073741824", "1Gi"], ["1073741824", "1Gi", "1073741824"]):
        nodes = [ObservedNode(f"n{i}", allocatable={"memory": m}) for i, m in enumerate(order)]
        nodes += [ObservedNode("odd", allocatable=big), ObservedNode("odd2", allocatable=big)]
        for cut in range(len(nodes) + 1):
            a = summarise_nodes(nodes[:cut], Compared.of(spec))
            b = summarise_nodes(nodes[cut:], Compared.of(spec))
            merged = merge_summaries(a, b)
            got = diffing._diff_summary(spec, merged, cluster=None, options=DiffOptions())
            l3 = [f for f in got if f.layer is Layer.L3]
            assert l3 and l3[0].expected == order[2], cut  # (5 - 1) // 2 of the stable sort
            assert _shown(got) == _shown(plain_findings(spec, nodes, DiffOptions()))


# --- whole clusters: groups, prefixed pools, strays, control-plane nodes ----------------------

GROUPS = st.sampled_from(["web", "web-2", "db", "gpu-a", "gpu-b", "lost", None])


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[NodePoolSpec], list[ObservedNode]]:
    """Pools ``web`` and ``db`` by name, ``gpu-`` by prefix (two groups in one pool); nodes of
    groups ``lost`` and of no group are strays; some nodes are control-plane nodes."""
    base, nodes = draw(pools_and_nodes())
    specs = [
        NodePoolSpec(**{**_fields(base), "name": "web", "desired_size": 3}),
        NodePoolSpec(**{**_fields(base), "name": "db", "labels": {"tier": "a"}}),
        NodePoolSpec(**{**_fields(base), "name": "gpu", "name_prefix": "gpu-"}),
        NodePoolSpec(name="empty", cluster="c", min_size=1),
    ]
    out = []
    for node in nodes:
        labels = dict(node.labels)
        group = draw(GROUPS)
        if group is not None:
            labels["eks.amazonaws.com/nodegroup"] = group
        if draw(st.integers(0, 9)) == 0:
            labels["node-role.kubernetes.io/control-plane"] = ""
        alloc = node.allocatable
        if draw(st.booleans()):
            alloc = {"memory": draw(QUANTITY)}
        out.append(
            ObservedNode(
                node.name,
                labels,
                node.taints,
                node.kubelet_version,
                node.os_image,
                alloc,
                node.capacity,
            )
        )
    return specs, out


def _fields(spec: NodePoolSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in spec.__slots__ if not name.startswith("_")}


@settings(max_examples=300, deadline=None)
@given(clusters(), OPTIONS, st.data())
def test_a_cluster_s_parts_merge_into_the_whole_at_any_split_points(case, options, data):
    specs, nodes = case
    cuts = sorted(data.draw(st.lists(st.integers(0, len(nodes)), max_size=3), label="cuts"))
    parts = [nodes[a:b] for a, b in zip([0, *cuts], [*cuts, len(nodes)], strict=True)]
    summaries = [diffing.summarise_cluster(specs, part, options=options) for part in parts]
    merged = summaries[0]
    for summary in summaries[1:]:
        merged = merge_clusters(merged, summary)
    whole = diffing.summarise_cluster(specs, nodes, options=options)
    assert _cluster_shape(merged) == _cluster_shape(whole)
    got = diffing.diff_summary("c", specs, merged, options=options)
    plain = plain_cluster_findings("c", specs, nodes, options)
    assert _shown(got.findings) == _shown(plain)
    assert got.nodes == sum(len(v) for v in diffing.group_nodes(nodes, options=options).values())
