"""The four-layer diff over real Node dumps from ../shared/realdata/nodes, mutated.

Each test plants one drift into a real node and pins the exact finding that must come out
(and that a clean pool gives none).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.diffing import diff_cluster, diff_pool
from fleetwarden.core.findings import Layer, Severity
from fleetwarden.core.pools import NodePoolSpec, Provisioner, Requirement, Taint
from fleetwarden.core.rules import DiffOptions, IgnoreRule, SeverityRule
from fleetwarden.formats.nodes import node_from_object, parse_nodes

EKS = "honeycomb-eks-nodelist-arm64.json"  # 2 nodes, managed nodegroup custom-1
DOKS = "troubleshoot-nodelist-mixed-doks-microk8s-aws.json"  # DOKS pools + others


def _items(realdata: Path, name: str) -> list[dict[str, Any]]:
    return json.loads((realdata / "nodes" / name).read_text())["items"]


@pytest.fixture()
def eks_items(realdata: Path) -> list[dict[str, Any]]:
    return _items(realdata, EKS)


def eks_spec(**changes: Any) -> NodePoolSpec:
    """The desired state that the real EKS nodes of custom-1 satisfy exactly."""
    base: dict[str, Any] = dict(
        name="custom-1",
        cluster="duckboat",
        provider=Provisioner.AWS,
        source="eks.yaml",
        instance_types=("m6gd.2xlarge",),
        min_size=1,
        max_size=3,
        labels={"eks.amazonaws.com/nodegroup": "custom-1", "kubernetes.io/arch": "arm64"},
        taints=(Taint("type", "hound", "NoSchedule"),),
        kubernetes_version="1.21",
        os_family="amazonlinux2",
    )
    base.update(changes)
    return NodePoolSpec(**base)


def nodes_of(items: list[dict[str, Any]]):
    return [node_from_object(i) for i in items]


def test_clean_real_pool_gives_no_finding(eks_items):
    assert diff_pool(eks_spec(), nodes_of(eks_items)) == []


def _mutate(items, index, fn):
    items = copy.deepcopy(items)
    fn(items[index])
    return items


MUTATIONS = [
    # (id, mutation on node 1, layer, field, expected, actual, severity)
    (
        "label removed",
        lambda n: n["metadata"]["labels"].pop("kubernetes.io/arch"),
        Layer.L1,
        "labels.kubernetes.io/arch",
        "arm64",
        None,
        Severity.HIGH,
    ),
    (
        "label changed by hand",
        lambda n: n["metadata"]["labels"].__setitem__("kubernetes.io/arch", "amd64"),
        Layer.L1,
        "labels.kubernetes.io/arch",
        "arm64",
        "amd64",
        Severity.HIGH,
    ),
    (
        "taint removed",
        lambda n: n["spec"].pop("taints"),
        Layer.L2,
        "taints.type:NoSchedule",
        "hound",
        None,
        Severity.HIGH,
    ),
    (
        "taint value changed",
        lambda n: n["spec"]["taints"][0].__setitem__("value", "beagle"),
        Layer.L2,
        "taints.type:NoSchedule",
        "hound",
        "beagle",
        Severity.HIGH,
    ),
    (
        "extra taint",
        lambda n: n["spec"]["taints"].append({"key": "x", "value": "y", "effect": "NoExecute"}),
        Layer.L2,
        "taints.x:NoExecute",
        None,
        "y",
        Severity.HIGH,
    ),
    (
        "instance type changed in the console",
        lambda n: n["metadata"]["labels"].__setitem__(
            "node.kubernetes.io/instance-type", "t4g.medium"
        ),
        Layer.SPEC,
        "instanceType",
        "m6gd.2xlarge",
        "t4g.medium",
        Severity.CRITICAL,
    ),
    (
        "os image changed",
        lambda n: n["status"]["nodeInfo"].__setitem__("osImage", "Bottlerocket OS 1.9.0"),
        Layer.SPEC,
        "osImage",
        "amazonlinux2",
        "Bottlerocket OS 1.9.0",
        Severity.HIGH,
    ),
]


@pytest.mark.parametrize(
    ("mutation", "layer", "field", "expected", "actual", "severity"),
    [m[1:] for m in MUTATIONS],
    ids=[m[0] for m in MUTATIONS],
)
def test_planted_drift_is_found_exactly(
    eks_items, mutation, layer, field, expected, actual, severity
):
    items = _mutate(eks_items, 1, mutation)
    findings = diff_pool(eks_spec(), nodes_of(items))
    assert [(f.layer, f.field, f.expected, f.actual, f.severity, f.nodes) for f in findings] == [
        (layer, field, expected, actual, severity, ("duckboat-02",))
    ]


def test_kubelet_version_drift_is_not_also_reported_as_a_mixed_pool(eks_items):
    """The node on the wrong version is one kubeletVersion finding; the pool's mix is that same
    fact again, so no kubeletVersion.mixed is derived from it (issue #10, part 6)."""
    items = _mutate(
        eks_items,
        0,
        lambda n: n["status"]["nodeInfo"].__setitem__("kubeletVersion", "v1.20.7-eks-d88609"),
    )
    findings = {(f.field, f.severity): f for f in diff_pool(eks_spec(), nodes_of(items))}
    node = findings[("kubeletVersion", Severity.HIGH)]
    assert (node.expected, node.actual, node.nodes) == (
        "1.21",
        "v1.20.7-eks-d88609",
        ("duckboat-01",),
    )
    assert list(findings) == [("kubeletVersion", Severity.HIGH)]


def test_mixed_versions_are_reported_when_no_version_finding_covers_them(eks_items):
    """Without a pool version (nothing to compare each node with), or with a minor version both
    patches satisfy, the mix is the only signal of a stuck upgrade."""
    items = _mutate(
        eks_items,
        0,
        lambda n: n["status"]["nodeInfo"].__setitem__("kubeletVersion", "v1.21.9-eks-1"),
    )
    for spec in (eks_spec(kubernetes_version=None), eks_spec(kubernetes_version="1.21")):
        found = diff_pool(spec, nodes_of(items))
        assert [f.field for f in found] == ["kubeletVersion.mixed"]
        assert found[0].actual == ["v1.21.2-13+d2965f0db10712", "v1.21.9-eks-1"]


@pytest.mark.parametrize("reported", [None, "banana", ""])
def test_a_node_whose_version_is_unknown_is_a_finding_when_the_pool_has_one(eks_items, reported):
    """No kubelet version, or text that is not a version: the node cannot be shown to run the
    pool's version, so it does not pass in silence (nor is it called a wrong version)."""

    def report(n: dict[str, Any]) -> None:
        if reported is None:
            del n["status"]["nodeInfo"]["kubeletVersion"]
        else:
            n["status"]["nodeInfo"]["kubeletVersion"] = reported

    items = _mutate(eks_items, 1, report)
    found = diff_pool(eks_spec(), nodes_of(items))
    assert [(f.layer, f.field, f.expected, f.actual, f.severity, f.nodes) for f in found] == [
        (
            Layer.L4,
            "kubeletVersion.unknown",
            "1.21",
            reported,
            Severity.HIGH,
            ("duckboat-02",),
        )
    ]
    assert "no kubelet version" in found[0].message
    assert found[0].provenance == eks_spec().origin_of("kubeletVersion")
    # without a version to compare with there is nothing to say
    assert diff_pool(eks_spec(kubernetes_version=None), nodes_of(items)) == []


def test_patch_level_counts_only_when_the_pool_names_one(eks_items):
    assert diff_pool(eks_spec(kubernetes_version="1.21"), nodes_of(eks_items)) == []
    found = diff_pool(eks_spec(kubernetes_version="1.21.5"), nodes_of(eks_items))
    assert {f.field for f in found} == {"kubeletVersion"}
    assert found[0].nodes == ("duckboat-01", "duckboat-02")


def test_allocatable_against_stated_expectation(eks_items):
    # real allocatable memory is 31127824Ki; 10 % more expected -> both nodes are off
    spec = eks_spec(allocatable={"memory": "34240606Ki"})
    (f,) = diff_pool(spec, nodes_of(eks_items))
    assert (f.layer, f.field, f.expected, f.actual) == (
        Layer.L3,
        "allocatable.memory",
        "34240606Ki",
        "31127824Ki",
    )
    # within 5 %: nothing
    assert diff_pool(eks_spec(allocatable={"memory": "30000000Ki"}), nodes_of(eks_items)) == []


def test_allocatable_against_pool_median_finds_fragmented_node(realdata):
    items = [
        i
        for i in _items(realdata, DOKS)
        if i["metadata"]["labels"].get("doks.digitalocean.com/node-pool") == "pool-yd23sqk7u"
    ]
    assert len(items) == 3
    spec = NodePoolSpec(name="pool-yd23sqk7u", cluster="do", instance_types=("s-2vcpu-4gb",))
    assert diff_pool(spec, nodes_of(items)) == []
    items = _mutate(items, 2, lambda n: n["status"]["allocatable"].__setitem__("memory", "2800Mi"))
    (f,) = diff_pool(spec, nodes_of(items))
    assert (f.layer, f.field, f.expected, f.actual, f.severity) == (
        Layer.L3,
        "allocatable.memory",
        "3110Mi",
        "2800Mi",
        Severity.HIGH,
    )
    assert f.nodes == (items[2]["metadata"]["name"],)


def test_median_needs_enough_nodes(eks_items):
    items = _mutate(eks_items, 1, lambda n: n["status"]["allocatable"].__setitem__("cpu", "1"))
    assert diff_pool(eks_spec(), nodes_of(items)) == []  # 2 nodes: no median to trust


def test_transient_taints_are_ignored_and_configurable(eks_items):
    items = _mutate(
        eks_items,
        1,
        lambda n: n["spec"]["taints"].append(
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
        ),
    )
    assert diff_pool(eks_spec(), nodes_of(items)) == []
    strict = DiffOptions(transient_taints=())
    (f,) = diff_pool(eks_spec(), nodes_of(items), options=strict)
    assert f.field == "taints.node.kubernetes.io/unschedulable:NoSchedule"


def test_count_below_min_above_max_and_empty(eks_items):
    nodes = nodes_of(eks_items)
    (low,) = diff_pool(eks_spec(min_size=3, max_size=5), nodes)
    assert (low.layer, low.field, low.expected, low.actual, low.severity) == (
        Layer.COUNT,
        "nodeCount",
        "3..5",
        2,
        Severity.HIGH,
    )
    (high,) = diff_pool(eks_spec(min_size=0, max_size=1), nodes)
    assert (high.actual, high.severity) == (2, Severity.MEDIUM)
    (empty,) = diff_pool(eks_spec(), [])
    assert (empty.layer, empty.field, empty.actual, empty.nodes) == (
        Layer.COUNT,
        "nodeCount",
        0,
        (),
    )
    (zero_ok,) = diff_pool(eks_spec(min_size=0), [])
    assert zero_ok.severity is Severity.INFO


def test_cluster_reports_unknown_pools_and_skips_control_plane(realdata):
    nodes = parse_nodes(DOKS, (realdata / "nodes" / DOKS).read_bytes())
    spec = NodePoolSpec(name="pool-yd23sqk7u", cluster="do")
    result = diff_cluster("do", [spec], nodes)
    strays = {(f.pool, f.nodes) for f in result.findings if f.field == "pool"}
    assert ("biggernode", ("biggernode-3i745",)) in strays
    assert ("smallnode", ("smallnode-3i74t",)) in strays
    # the node without any pool label (microk8s) is reported with pool None
    assert any(p is None for p, _ in strays)
    names = {n for f in result.findings for n in f.nodes}
    assert "ip-172-31-21-92" not in names  # control plane: not part of any node pool


def test_karpenter_requirements_flag_instance_outside_them(eks_items):
    spec = eks_spec(
        provider=Provisioner.KARPENTER,
        instance_types=(),
        heterogeneous=True,
        min_size=None,
        max_size=None,
        requirements=(
            Requirement("node.kubernetes.io/instance-type", "In", ("m6gd.2xlarge", "m6g.2xlarge")),
            Requirement("kubernetes.io/arch", "In", ("arm64",)),
        ),
    )
    assert diff_pool(spec, nodes_of(eks_items)) == []
    items = _mutate(
        eks_items,
        0,
        lambda n: n["metadata"]["labels"].__setitem__(
            "node.kubernetes.io/instance-type", "c7g.large"
        ),
    )
    (f,) = diff_pool(spec, nodes_of(items))
    assert (f.layer, f.field, f.expected, f.actual, f.severity) == (
        Layer.SPEC,
        "instanceType",
        "In [m6gd.2xlarge, m6g.2xlarge]",
        "c7g.large",
        Severity.CRITICAL,
    )


def test_severity_overrides_and_ignores(eks_items):
    items = _mutate(eks_items, 1, lambda n: n["metadata"]["labels"].pop("kubernetes.io/arch"))
    opts = DiffOptions(severities=(SeverityRule("L1/labels.kubernetes.io/*", Severity.LOW),))
    (f,) = diff_pool(eks_spec(), nodes_of(items), options=opts)
    assert f.severity is Severity.LOW
    ignore = DiffOptions(ignores=(IgnoreRule(cluster="duck*", field="labels.*"),))
    assert diff_pool(eks_spec(), nodes_of(items), options=ignore) == []
    other = DiffOptions(ignores=(IgnoreRule(cluster="prod-*", field="labels.*"),))
    assert len(diff_pool(eks_spec(), nodes_of(items), options=other)) == 1


def test_same_drift_on_many_nodes_is_one_finding_with_stable_id(eks_items):
    items = copy.deepcopy(eks_items)
    for n in items:
        n["metadata"]["labels"]["kubernetes.io/arch"] = "amd64"
    (f,) = diff_pool(eks_spec(), nodes_of(items))
    assert f.nodes == ("duckboat-01", "duckboat-02")
    (g,) = diff_pool(eks_spec(), nodes_of(items[:1]))
    assert f.id == g.id  # fewer nodes: the same finding, changed


# --- properties -------------------------------------------------------------------------

_keys = st.text(alphabet="abcdefghijklmnop./-", min_size=1, max_size=12)
_vals = st.text(alphabet="abcxyz0123", max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    want=st.dictionaries(_keys, _vals, max_size=6), have=st.dictionaries(_keys, _vals, max_size=8)
)
def test_l1_reports_exactly_the_pool_labels_a_node_lacks_or_differs_on(want, have):
    spec = NodePoolSpec(name="p", cluster="c", labels=want)
    node = node_from_object({"metadata": {"name": "n", "labels": {**have, "agentpool": "p"}}})
    if "agentpool" in want:
        return
    got = {f.field for f in diff_pool(spec, [node]) if f.layer is Layer.L1}
    assert got == {f"labels.{k}" for k, v in want.items() if have.get(k) != v}


_taint = st.builds(
    Taint,
    key=_keys,
    value=st.one_of(st.none(), _vals),
    effect=st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
)


@settings(max_examples=300, deadline=None)
@given(
    want=st.lists(_taint, max_size=4, unique_by=lambda t: (t.key, t.effect)),
    have=st.lists(_taint, max_size=4, unique_by=lambda t: (t.key, t.effect)),
)
def test_l2_is_set_equality_by_key_value_effect(want, have):
    spec = NodePoolSpec(name="p", cluster="c", taints=tuple(want))
    node = node_from_object(
        {
            "metadata": {"name": "n", "labels": {"agentpool": "p"}},
            "spec": {
                "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in have]
            },
        },
    )
    findings = [
        f
        for f in diff_pool(spec, [node], options=DiffOptions(transient_taints=()))
        if f.layer is Layer.L2
    ]
    norm = lambda ts: {(t.key, t.effect, t.value or "") for t in ts}  # noqa: E731
    assert (not findings) == (norm(want) == norm(have))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_pool_described_by_its_own_node_has_no_drift(realdata, data):
    items = _items(realdata, DOKS) + _items(realdata, EKS)
    item = data.draw(st.sampled_from([i for i in items if i.get("status")]))
    node = node_from_object(item)
    spec = NodePoolSpec(
        name="p",
        cluster="c",
        labels=dict(node.labels),
        taints=node.taints,
        instance_types=(node.instance_type,) if node.instance_type else (),
        kubernetes_version=node.kubelet_version,
        allocatable=dict(node.allocatable),
    )
    assert [f for f in diff_pool(spec, [node]) if f.layer is not Layer.COUNT] == []


def test_unresolved_taints_and_labels_are_not_checked(eks_items):
    from fleetwarden.core.pools import Unresolved

    spec = eks_spec(
        taints=(),
        labels={},
        unresolved=(Unresolved("taints", 'dynamic "taint"'), Unresolved("labels", "var.labels")),
    )
    assert diff_pool(spec, nodes_of(eks_items)) == []  # the real nodes' taint is not "extra"
    assert [f.field for f in diff_pool(eks_spec(taints=()), nodes_of(eks_items))] == [
        "taints.type:NoSchedule"
    ]


def test_prefix_named_pools_claim_their_generated_node_groups(eks_items):
    items = copy.deepcopy(eks_items)
    for n in items:
        n["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] = "custom-1-20261129abcdef"
    labels = {"kubernetes.io/arch": "arm64"}
    spec = eks_spec(name="custom", name_prefix="custom-", labels=labels)
    result = diff_cluster("duckboat", [spec], nodes_of(items))
    assert result.findings == []
    other = eks_spec(name="custom", name_prefix=None, labels=labels)
    fields = {f.field for f in diff_cluster("duckboat", [other], nodes_of(items)).findings}
    assert fields == {"nodeCount", "pool"}


def test_a_node_without_any_pool_label_says_which_labels_were_looked_for():
    from tests.support.nodes import node, observed

    bare = observed(node("lonely", labels={"kubernetes.io/os": "linux"}))
    (f,) = diff_cluster("c", [], bare).findings
    assert (f.pool, f.field, f.nodes) == (None, "pool", ("lonely",))
    assert "eks.amazonaws.com/nodegroup" in f.message and "poolLabels" in f.message
    custom = DiffOptions(pool_labels=("example.com/pool",))
    (f,) = diff_cluster("c", [], bare, options=custom).findings
    assert "example.com/pool" in f.message and "eks.amazonaws.com" not in f.message


def test_os_family_alternatives_accept_either_family():
    from tests.support.nodes import node, observed

    spec = NodePoolSpec(
        name="ng",
        cluster="c",
        os_family="amazonlinux2023",
        os_family_alternatives=("amazonlinux2",),
    )
    labels = {"eks.amazonaws.com/nodegroup": "ng"}
    fine = observed(
        node("a", labels=labels, os_image="Amazon Linux 2"),
        node("b", labels=labels, os_image="Amazon Linux 2023.6.20250218"),
    )
    assert diff_pool(spec, fine) == []
    (f,) = diff_pool(spec, observed(node("c", labels=labels, os_image="Ubuntu 22.04.4 LTS")))
    assert (f.field, f.expected) == ("osImage", ["amazonlinux2023", "amazonlinux2"])


def test_the_longest_name_prefix_claims_a_node_group_and_an_exact_name_beats_any():
    """Pools ``app`` and ``app-gpu`` with generated suffixes: ``app-gpu-2025...`` is app-gpu's,
    whichever order the pools come in; a pool named exactly as the group wins over prefixes."""
    from fleetwarden.core.diffing import PoolIndex

    app = eks_spec(name="app", name_prefix="app-")
    gpu = eks_spec(name="app-gpu", name_prefix="app-gpu-")
    exact = eks_spec(name="app-gpu-1", name_prefix=None)
    for specs in ([app, gpu], [gpu, app]):
        index = PoolIndex(specs)
        assert index.spec_for("app-gpu-20250601123456789000000002") is gpu
        assert index.spec_for("app-20250601123456789000000001") is app
    assert PoolIndex([app, gpu, exact]).spec_for("app-gpu-1") is exact


def test_a_pool_whose_name_is_unknown_claims_no_node_and_gives_no_count_finding(eks_items):
    """Its name stands in for nothing real: the nodes are strays, not its members, and its
    (unknowable) count is not compared."""
    from fleetwarden.core.pools import Unresolved

    unnamed = eks_spec(name="custom-1", unresolved=(Unresolved("name", "var.name"),))
    assert unnamed.unknown_name == "var.name"
    result = diff_cluster("duckboat", [unnamed], nodes_of(eks_items))
    assert {(f.pool, f.field) for f in result.findings} == {("custom-1", "pool")}  # strays
    assert result.pools == 0
    prefixed = eks_spec(unresolved=(Unresolved("name", "a suffix"),), name_prefix="custom-")
    assert prefixed.unknown_name is None  # matched by its prefix


def test_a_pool_meant_to_have_no_node_and_having_none_gives_no_finding():
    """Expected 0, actual 0 says nothing; an empty pool that may scale (min 0) is still an
    info finding, and a node in a pool meant to be empty is still drift."""
    from tests.support.nodes import node, observed

    fixed_zero = eks_spec(name="idle", min_size=None, max_size=None, desired_size=0)
    assert diff_pool(fixed_zero, []) == []
    scaled = eks_spec(name="idle", min_size=0, max_size=3)
    assert [(f.field, f.severity) for f in diff_pool(scaled, [])] == [("nodeCount", Severity.INFO)]
    one = observed(node("a", labels={"eks.amazonaws.com/nodegroup": "idle"}))
    assert "nodeCount" in {f.field for f in diff_cluster("duckboat", [fixed_zero], one).findings}


def test_a_prefixed_name_is_not_reported_as_an_unresolved_value():
    """The scan's "N desired values unresolved" must not count a name matched by its prefix
    (its field count says 0 unresolved): only names that stay unknown are listed."""
    from fleetwarden.core.fleet import assemble_report
    from fleetwarden.core.pools import Unresolved

    suffix = Unresolved("name", '"app-" + a suffix Terraform generates (use_name_prefix)')
    prefixed = eks_spec(name="app", name_prefix="app-", unresolved=(suffix,))
    unknown = eks_spec(name="this", unresolved=(Unresolved("name", "var.name"),))
    report = assemble_report(
        [], specs=[prefixed, unknown], compared=[prefixed, unknown], skipped=[]
    )
    assert [(u.pool, u.expression) for u in report.unresolved] == [("this", "var.name")]


def test_a_held_pool_claims_its_groups_but_is_no_pool_to_compare():
    """``PoolIndex(held=...)``: a pool defined twice (``fleet.assign_pools``) claims its node
    groups, by name or by prefix, so they are no strays (``held_for``), and ``spec_for`` (what
    is compared) gives None for them; the compared pools are unaffected."""
    from fleetwarden.core.diffing import PoolIndex

    app = eks_spec(name="app", name_prefix="app-")
    first = eks_spec(name="general", name_prefix="general-")
    second = eks_spec(name="general", name_prefix="general-", instance_types=("m5.xlarge",))
    index = PoolIndex([app], held=[first, second])
    assert list(index.specs) == ["app"] and index.held == {"general"}
    for group in ("general", "general-20250601"):
        assert (index.spec_for(group), index.held_for(group)) == (None, "general")
    assert (index.spec_for("app-1"), index.held_for("app-1")) == (app, None)
    assert (index.spec_for("ghost"), index.held_for("ghost")) == (None, None)
