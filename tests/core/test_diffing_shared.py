"""The diff checks each distinct combination of a node's compared facts once (nodes of a pool
share them) and finds L3 medians by counting texts: the findings must be exactly those of the
plain node-by-node pass (``tests/support/plain_diff.py``, the diff as it was before
the sharing); hypothesis draws pools and nodes whose facts collide, repeat, are shared by
identity or only by content, and quantities that read as the same amount from different texts
(which makes the median depend on node order)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core import diffing
from fleetwarden.core.findings import Finding, Layer
from fleetwarden.core.nodes import INSTANCE_TYPE_LABELS, ObservedNode
from fleetwarden.core.pools import NodePoolSpec, Requirement, Taint
from fleetwarden.core.rules import DiffOptions
from tests.support.plain_diff import plain_findings

# --- what hypothesis draws: few distinct values, so nodes collide and share ----------------

SMALL = st.sampled_from(["a", "b", "m5.large", "t3.medium", ""])
QUANTITY = st.sampled_from(
    ["1Gi", "1073741824", "1024Mi", "2Gi", "1", "1000m", "2", "950m", "29", "x", "110", "0"]
)
TAINT = st.builds(
    Taint,
    st.sampled_from(["dedicated", "gpu", "node.kubernetes.io/not-ready"]),
    st.sampled_from([None, "", "a", "b"]),
    st.sampled_from(["NoSchedule", "NoExecute"]),
)
LABEL_KEYS = st.sampled_from(["team", "tier", *INSTANCE_TYPE_LABELS, "zone"])


@st.composite
def pools_and_nodes(draw: st.DrawFn) -> tuple[NodePoolSpec, list[ObservedNode]]:
    spec = NodePoolSpec(
        name="p",
        cluster="c",
        instance_types=tuple(draw(st.lists(SMALL.filter(bool), max_size=2, unique=True))),
        requirements=tuple(
            draw(
                st.lists(
                    st.builds(
                        Requirement,
                        LABEL_KEYS,
                        st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt"]),
                        st.lists(SMALL | st.sampled_from(["3", "10"]), max_size=2).map(tuple),
                    ),
                    max_size=2,
                )
            )
        ),
        labels=draw(st.dictionaries(LABEL_KEYS, SMALL, max_size=3)),
        taints=tuple(draw(st.lists(TAINT, max_size=2))),
        kubernetes_version=draw(st.sampled_from([None, "1.29", "1.30", "1.30.2"])),
        os_family=draw(st.sampled_from([None, "AmazonLinux2", "Bottlerocket"])),
        disk_size_gib=draw(st.sampled_from([None, 20, 100])),
        allocatable=draw(st.dictionaries(st.sampled_from(["cpu", "memory"]), QUANTITY, max_size=1)),
        heterogeneous=draw(st.booleans()),
    )
    # a few shared objects (as the stream reader shares them) and fresh equal copies
    taint_sets = draw(st.lists(st.lists(TAINT, max_size=3).map(tuple), min_size=1, max_size=3))
    maps = draw(
        st.lists(
            st.dictionaries(st.sampled_from(["cpu", "memory", "pods"]), QUANTITY, max_size=3),
            min_size=1,
            max_size=4,
        )
    )
    nodes = []
    for i in range(draw(st.integers(0, 14))):
        taints = draw(st.sampled_from(taint_sets))
        alloc = draw(st.sampled_from(maps))
        nodes.append(
            ObservedNode(
                name=f"n{i}",
                labels=draw(st.dictionaries(LABEL_KEYS, SMALL, max_size=4)),
                taints=tuple(taints) if draw(st.booleans()) else taints,
                kubelet_version=draw(st.sampled_from([None, "v1.30.2", "v1.29.1-eks", "x"])),
                os_image=draw(
                    st.sampled_from([None, "Amazon Linux 2", "Bottlerocket OS 1.19", "Ubuntu"])
                ),
                allocatable=dict(alloc) if draw(st.booleans()) else alloc,
                capacity=draw(
                    st.sampled_from([{}, {"ephemeral-storage": "20Gi"}, {"ephemeral-storage": "x"}])
                ),
            )
        )
    return spec, nodes


def _shown(findings: list[Finding]) -> list[tuple[Any, ...]]:
    return [
        (f.layer, f.field, f.expected, f.actual, f.severity, f.nodes, f.provenance)
        for f in findings
    ]


@settings(max_examples=400, deadline=None)
@given(pools_and_nodes(), st.sampled_from([DiffOptions(), DiffOptions(median_min_nodes=1)]))
def test_shared_checks_give_exactly_the_node_by_node_findings(case, options):
    spec, nodes = case
    assert _shown(diffing.diff_pool(spec, nodes, options=options)) == _shown(
        plain_findings(spec, nodes, options)
    )


def test_the_median_text_follows_node_order_when_two_texts_are_one_amount():
    """1Gi and 1073741824 are one amount: the stable sort's median is the text of whichever
    comes first in node order at that position, and the finding quotes that text."""
    big = {"memory": "4Gi"}
    for order in (["1Gi", "1073741824", "1Gi"], ["1073741824", "1Gi", "1073741824"]):
        nodes = [ObservedNode(f"n{i}", allocatable={"memory": m}) for i, m in enumerate(order)]
        nodes.append(ObservedNode("odd", allocatable=big))
        nodes.append(ObservedNode("odd2", allocatable=big))
        spec = NodePoolSpec(name="p", cluster="c")
        got = [f for f in diffing.diff_pool(spec, nodes) if f.layer is Layer.L3]
        plain = [f for f in plain_findings(spec, nodes, DiffOptions()) if f.layer is Layer.L3]
        assert _shown(got) == _shown(plain)
        assert got and got[0].expected == order[2]  # (5 - 1) // 2 of the stable sort
