"""Schedulability and the PreSync gate over real node dumps (../shared/realdata/nodes) and real
workload manifests (../shared/realdata/manifests).

Each test pins one decision: schedules / would not schedule (and why), a targeted pool's drift
blocks at the threshold, a pool the app does not target never does.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core import workloads as wl
from fleetwarden.core.findings import Layer, Severity
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec, Provisioner, Requirement, Taint
from fleetwarden.core.schedulability import (
    GateCluster,
    PlannedWorkload,
    check_schedulability,
    decide_gate,
    node_rejection,
    pool_states,
    requirement_matches,
    spec_accepts,
)
from fleetwarden.core.subjects import NodePoolRef, WorkloadRef
from fleetwarden.formats.nodes import node_from_object
from tests.core.test_workloads import load_docs

EKS = "honeycomb-eks-nodelist-arm64.json"  # 2 nodes of custom-1, tainted type=hound
DOKS = "troubleshoot-nodelist-mixed-doks-microk8s-aws.json"  # 3 DOKS pools + others
KIND = "popeye-kind-nodelist.yaml"


def node_items(realdata: Path, name: str) -> list[dict[str, Any]]:
    return json.loads((realdata / "nodes" / name).read_text())["items"]


def nodes_of(items: list[dict[str, Any]]) -> list[ObservedNode]:
    return [node_from_object(i) for i in items]


def podinfo(realdata: Path, **pod: Any) -> dict[str, Any]:
    (doc,) = load_docs(realdata / "manifests" / "podinfo-kustomize-deployment.yaml")
    doc["spec"]["template"]["spec"].update(pod)
    return doc


def model(doc: dict[str, Any]) -> wl.Workload:
    m = wl.model_from(doc)
    assert isinstance(m, wl.Workload)
    return m


def planned(doc: dict[str, Any], pods: int = 1) -> PlannedWorkload:
    m = model(doc)
    return PlannedWorkload(m, m.key.ref, pods)


HOUND = [{"key": "type", "operator": "Equal", "value": "hound", "effect": "NoSchedule"}]


def eks_spec(**changes: Any) -> NodePoolSpec:
    """The desired state the real EKS nodes of custom-1 satisfy."""
    base: dict[str, Any] = dict(
        name="custom-1",
        cluster="duckboat",
        provider=Provisioner.AWS,
        source="pools/eksctl.yaml",
        instance_types=("m6gd.2xlarge",),
        min_size=1,
        max_size=2,
        labels={"workload-type": "batch"},
        taints=(Taint("type", "hound", "NoSchedule"),),
        kubernetes_version="1.21",
    )
    base.update(changes)
    return NodePoolSpec(**base)


@pytest.fixture()
def eks(realdata: Path) -> list[dict[str, Any]]:
    items = node_items(realdata, EKS)
    for item in items:  # the pool as Git wants it: its label on every node
        item["metadata"]["labels"]["workload-type"] = "batch"
    return items


def gate(
    app_docs: list[dict[str, Any]],
    items: list[dict[str, Any]],
    specs: list[NodePoolSpec],
    *,
    fail_on: Severity = Severity.HIGH,
    cluster: str = "duckboat",
) -> Any:
    cluster_input = GateCluster(cluster, nodes_of(items), specs, [planned(d) for d in app_docs])
    return decide_gate("podinfo", [cluster_input], fail_on=fail_on)


# --------------------------------------------------------------------------- the gate


def test_tolerating_workload_on_a_clean_pool_passes(realdata, eks):
    doc = podinfo(realdata, nodeSelector={"workload-type": "batch"}, tolerations=HOUND)
    result = gate([doc], eks, [eks_spec()])
    assert not result.blocked, result.reasons
    assert result.findings == []
    (placement,) = result.checks[0].placements
    assert placement.candidates == ("custom-1",) and placement.targets == ("custom-1",)
    assert result.to_json()["decision"] == "pass"


def test_a_pool_that_lost_its_label_blocks_the_sync(realdata, eks):
    """seed 004 3.5: the nodeSelector matches no node because the pool lost its label."""
    for item in eks:
        del item["metadata"]["labels"]["workload-type"]  # e.g. a node group re-created by hand
    doc = podinfo(realdata, nodeSelector={"workload-type": "batch"}, tolerations=HOUND)
    result = gate([doc], eks, [eks_spec()])
    assert result.blocked
    by_field = {f.field: f for f in result.findings}
    schedule = by_field["schedule.nodeSelector"]
    assert (schedule.severity, schedule.expected, schedule.actual) == (
        Severity.CRITICAL,
        ["workload-type=batch"],
        None,
    )
    assert schedule.pool == "Deployment/-/podinfo"
    assert schedule.extra["wouldNotSchedule"] and schedule.extra["pools"] == ["custom-1"]
    assert "'custom-1' should take it" in schedule.message
    label = by_field["labels.workload-type"]
    assert (label.layer, label.expected, label.actual, label.nodes) == (
        Layer.L1,
        "batch",
        None,
        ("duckboat-01", "duckboat-02"),
    )
    assert any("matches no node" in r for r in result.reasons)
    assert any("pool 'custom-1'" in r and "labels.workload-type" in r for r in result.reasons)


def test_untolerated_taint_would_not_schedule(realdata, eks):
    doc = podinfo(realdata, nodeSelector={"workload-type": "batch"})
    result = gate([doc], eks, [eks_spec()])
    assert result.blocked
    (f,) = result.findings
    assert (f.field, f.expected, f.nodes) == (
        "schedule.tolerations",
        ["type=hound:NoSchedule"],
        ("duckboat-01", "duckboat-02"),
    )


def test_targeted_pool_drift_blocks_at_the_threshold_only(realdata, eks):
    for item in eks:
        item["status"]["nodeInfo"]["kubeletVersion"] = "v1.20.4-eks-6b7464"
    doc = podinfo(realdata, nodeSelector={"workload-type": "batch"}, tolerations=HOUND)
    blocked = gate([doc], eks, [eks_spec()])
    assert blocked.blocked
    assert [f.field for f in blocked.findings] == ["kubeletVersion"]
    assert gate([doc], eks, [eks_spec()], fail_on=Severity.CRITICAL).blocked is False


def test_medium_pool_drift_passes_by_default(realdata, eks):
    doc = podinfo(realdata, nodeSelector={"workload-type": "batch"}, tolerations=HOUND)
    spec = eks_spec(max_size=2, allocatable={"cpu": "7910m"})
    eks[0]["status"]["allocatable"]["cpu"] = "6000m"  # L3 cpu: medium
    result = gate([doc], eks, [spec])
    assert [(f.field, f.severity) for f in result.findings] == [
        ("allocatable.cpu", Severity.MEDIUM)
    ]
    assert not result.blocked
    assert gate([doc], eks, [spec], fail_on=Severity.MEDIUM).blocked


@pytest.fixture()
def doks(realdata: Path) -> list[dict[str, Any]]:
    return node_items(realdata, DOKS)


def doks_spec(name: str, **changes: Any) -> NodePoolSpec:
    return NodePoolSpec(name=name, cluster="doks", source="pools/doks.yaml", **changes)


def test_drift_of_a_pool_the_app_does_not_target_never_blocks(realdata, doks):
    doc = podinfo(realdata, nodeSelector={"doks.digitalocean.com/node-pool": "biggernode"})
    specs = [
        doks_spec("biggernode", instance_types=("g-8vcpu-32gb",)),
        doks_spec("smallnode", instance_types=("s-4vcpu-8gb",)),  # critical drift, elsewhere
    ]
    result = gate([doc], doks, specs, cluster="doks")
    assert not result.blocked, result.reasons
    assert result.checks[0].placements[0].targets == ("biggernode",)
    assert result.findings == []


def test_a_workload_without_constraints_targets_every_pool(realdata, doks):
    doc = podinfo(realdata)
    specs = [doks_spec("smallnode", instance_types=("s-4vcpu-8gb",))]
    result = gate([doc], doks, specs, cluster="doks")
    assert result.blocked  # it may land on smallnode, whose instance type drifted
    assert {f.field for f in result.findings} == {"instanceType"}
    assert "(no pool)" in result.checks[0].placements[0].targets
    notes = " ".join(result.notes)
    assert "'biggernode'" in notes and "not checked" in notes


def test_one_pod_larger_than_any_node(realdata, doks):
    doc = podinfo(realdata)
    doc["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "40Gi"
    check = check_schedulability("doks", [planned(doc)], pool_states(nodes_of(doks)))
    (f,) = check.findings
    assert (f.field, f.severity, f.expected) == (
        "schedule.requests.memory",
        Severity.CRITICAL,
        "40Gi",
    )
    assert f.extra["wouldNotSchedule"]


def test_extended_resources_count_as_zero_where_absent(realdata, doks):
    doc = podinfo(realdata)
    resources = doc["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["limits"]["nvidia.com/gpu"] = "1"
    check = check_schedulability("doks", [planned(doc)], pool_states(nodes_of(doks)))
    assert check.findings == []
    assert check.placements[0].candidates  # the GPU node (a control-plane node, untainted)
    resources["limits"]["nvidia.com/gpu"] = "2"
    check = check_schedulability("doks", [planned(doc)], pool_states(nodes_of(doks)))
    assert [f.field for f in check.findings] == ["schedule.requests.nvidia.com/gpu"]


def test_sum_of_requests_against_the_pools_allocatable(realdata, doks):
    doc = podinfo(realdata, nodeSelector={"doks.digitalocean.com/node-pool": "pool-yd23sqk7u"})
    doc["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "2Gi"
    nodes = nodes_of(doks)
    fixed = pool_states(nodes, [doks_spec("pool-yd23sqk7u", min_size=3, max_size=3)])
    check = check_schedulability("doks", [planned(doc, pods=6)], fixed)
    (f,) = check.findings  # 3 nodes x 3110Mi < 6 x 2Gi
    assert (f.field, f.severity, f.expected, f.actual) == (
        "schedule.capacity.memory",
        Severity.HIGH,
        "12Gi",
        "9330Mi",
    )
    assert f.extra["wouldNotSchedule"]
    growing = pool_states(nodes, [doks_spec("pool-yd23sqk7u", min_size=3, max_size=8)])
    (g,) = check_schedulability("doks", [planned(doc, pods=6)], growing).findings
    assert g.severity is Severity.MEDIUM and not g.extra["wouldNotSchedule"]
    assert g.message.startswith("needs a scale-up")
    assert check_schedulability("doks", [planned(doc, pods=4)], fixed).findings == []


def test_workloads_pinned_to_one_pool_are_summed_together(realdata, doks):
    a = podinfo(realdata, nodeSelector={"doks.digitalocean.com/node-pool": "smallnode"})
    a["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "600m"
    b = copy.deepcopy(a)
    b["metadata"]["name"] = "podinfo-canary"
    check = check_schedulability("doks", [planned(a), planned(b)], pool_states(nodes_of(doks)))
    (f,) = check.findings  # each fits the 1-CPU node; together they need 1200m
    assert (f.pool, f.field, f.expected, f.actual) == (
        "smallnode",
        "schedule.capacity.cpu",
        "1200m",
        "1",
    )
    assert f.subject == NodePoolRef("doks", "smallnode")  # about the pool, not one workload
    (g,) = check_schedulability("doks", [planned(a, pods=3)], pool_states(nodes_of(doks))).findings
    assert g.field == "schedule.capacity.cpu" and isinstance(g.subject, WorkloadRef)
    assert g.subject.ref == g.pool


def test_cordoned_nodes_and_daemonsets(realdata):
    items = [i for i in _kind_items(realdata) if i["metadata"]["name"] == "n4"]  # cordoned
    doc = podinfo(realdata)
    check = check_schedulability("kind", [planned(doc)], pool_states(nodes_of(items)))
    assert [f.field for f in check.findings] == ["schedule.cordoned"]
    ds = copy.deepcopy(doc)
    ds["kind"] = "DaemonSet"
    check = check_schedulability("kind", [planned(ds)], pool_states(nodes_of(items)))
    assert check.findings == []


def _kind_items(realdata: Path) -> list[dict[str, Any]]:
    docs = load_docs(realdata / "nodes" / KIND)
    return docs[0]["items"]


def test_nodes_without_allocatable_are_unknown_not_empty(realdata):
    items = [i for i in _kind_items(realdata) if i["metadata"]["name"] == "n3"]
    doc = podinfo(realdata)
    check = check_schedulability("kind", [planned(doc, pods=50)], pool_states(nodes_of(items)))
    assert check.findings == []


def test_no_node_at_all():
    w = wl.Workload("Deployment", "shop", "api", containers=(wl.Container("c", "x"),))
    check = check_schedulability("empty", [PlannedWorkload(w, "Deployment/shop/api")], [])
    assert [f.field for f in check.findings] == ["schedule.nodes"]


def test_affinity_that_matches_nothing(realdata, doks):
    doc = podinfo(
        realdata,
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/arch", "operator": "In", "values": ["s390x"]}
                            ]
                        }
                    ]
                }
            }
        },
    )
    check = check_schedulability("doks", [planned(doc)], pool_states(nodes_of(doks)))
    (f,) = check.findings
    assert f.field == "schedule.affinity"
    assert f.expected == ["kubernetes.io/arch In ['s390x']"]


# --------------------------------------------------------------------------- semantics


@pytest.mark.parametrize(
    ("op", "values", "labels", "expected"),
    [
        ("In", ("a", "b"), {"k": "a"}, True),
        ("In", ("a",), {}, False),
        ("NotIn", ("a",), {}, True),
        ("NotIn", ("a",), {"k": "a"}, False),
        ("Exists", (), {"k": ""}, True),
        ("DoesNotExist", (), {"k": "x"}, False),
        ("Gt", ("3",), {"k": "4"}, True),
        ("Lt", ("3",), {"k": "4"}, False),
        ("Gt", ("3",), {"k": "four"}, False),
        ("Bogus", ("a",), {"k": "a"}, False),
    ],
)
def test_node_selector_requirement_semantics(op, values, labels, expected):
    assert requirement_matches(Requirement("k", op, values), labels, "node-1") is expected


def test_match_fields_on_the_node_name():
    req = Requirement("field:metadata.name", "In", ("node-1",))
    assert requirement_matches(req, {}, "node-1") and not requirement_matches(req, {}, "node-2")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (
            wl.Toleration("type", "Equal", "hound", "NoSchedule"),
            Taint("type", "hound", "NoSchedule"),
            True,
        ),
        (
            wl.Toleration("type", "Equal", "cat", "NoSchedule"),
            Taint("type", "hound", "NoSchedule"),
            False,
        ),
        (wl.Toleration("type", "Exists", None, None), Taint("type", "hound", "NoExecute"), True),
        (wl.Toleration(None, "Exists", None, None), Taint("anything", "x", "NoSchedule"), True),
        (wl.Toleration(None, "Equal", None, None), Taint("anything", "x", "NoSchedule"), False),
        (
            wl.Toleration("type", "Equal", "hound", "NoExecute"),
            Taint("type", "hound", "NoSchedule"),
            False,
        ),
        (wl.Toleration("t2", "Equal", None, "NoSchedule"), Taint("t2", None, "NoSchedule"), True),
    ],
)
def test_toleration_semantics(toleration, taint, expected):
    assert toleration.tolerates(taint) is expected


def test_prefer_no_schedule_never_rejects():
    node = ObservedNode("n", taints=(Taint("soft", "x", "PreferNoSchedule"),))
    w = wl.Workload("Deployment", "ns", "w")
    assert node_rejection(w, node) is None


def test_desired_pool_labels_decide_intent():
    spec = NodePoolSpec(
        name="gpu", cluster="c", labels={"accel": "t4"}, taints=(Taint("gpu", None, "NoSchedule"),)
    )
    sel = (("accel", "t4"),)
    assert not spec_accepts(wl.Workload("Deployment", "ns", "w", node_selector=sel), spec)
    tolerant = wl.Workload(
        "Deployment",
        "ns",
        "w",
        node_selector=sel,
        tolerations=(wl.Toleration("gpu", "Exists", None, None),),
    )
    assert spec_accepts(tolerant, spec)
    by_pool_label = wl.Workload(
        "Deployment", "ns", "w", node_selector=(("eks.amazonaws.com/nodegroup", "gpu"),)
    )
    assert not spec_accepts(by_pool_label, spec)  # tainted
    untainted = NodePoolSpec(name="gpu", cluster="c")
    assert spec_accepts(by_pool_label, untainted)


def test_pod_requests_count_init_containers_and_native_sidecars():
    def c(name: str, cpu: str, **kw: Any) -> wl.Container:
        return wl.Container(name, "img", requests=(("cpu", cpu),), **kw)

    w = wl.Workload(
        "Deployment",
        "ns",
        "w",
        containers=(c("app", "500m"), c("proxy", "100m")),
        init_containers=(c("sidecar", "200m", sidecar=True), c("migrate", "2")),
    )
    # init "migrate" runs beside the sidecar started before it: 2 + 0.2 > 0.5 + 0.1 + 0.2
    assert w.pod_requests() == {"cpu": pytest.approx(2.2)}
    limits_only = wl.Workload(
        "Deployment", "ns", "w", containers=(wl.Container("a", "i", limits=(("memory", "1Gi"),)),)
    )
    assert limits_only.pod_requests() == {"memory": 2**30}


# --------------------------------------------------------------------------- properties

LABELS = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2"]), max_size=3)
TAINTS = st.lists(
    st.builds(
        Taint,
        st.sampled_from(["a", "b", "dedicated"]),
        st.sampled_from([None, "1", "x"]),
        st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
    ),
    max_size=3,
    unique_by=lambda t: (t.key, t.effect),
)
TOLERATIONS = st.lists(
    st.builds(
        wl.Toleration,
        st.sampled_from([None, "a", "b", "dedicated"]),
        st.sampled_from(["Equal", "Exists"]),
        st.sampled_from([None, "1", "x"]),
        st.sampled_from([None, "NoSchedule", "NoExecute"]),
    ),
    max_size=3,
)


@settings(max_examples=300)
@given(LABELS, TAINTS, LABELS, TOLERATIONS, TOLERATIONS)
def test_more_tolerations_never_reject_more_nodes(labels, taints, selector, tols, more):
    node = ObservedNode("n", labels=labels, taints=tuple(taints))
    w = wl.Workload(
        "Deployment",
        "ns",
        "w",
        node_selector=tuple(sorted(selector.items())),
        tolerations=tuple(tols),
    )
    wider = wl.Workload(
        "Deployment", "ns", "w", node_selector=w.node_selector, tolerations=(*tols, *more)
    )
    if node_rejection(w, node) is None:
        assert node_rejection(wider, node) is None


@settings(max_examples=300)
@given(LABELS, TAINTS)
def test_an_unconstrained_workload_takes_any_node_without_hard_taints(labels, taints):
    node = ObservedNode("n", labels=labels, taints=tuple(taints))
    hard = any(t.effect != "PreferNoSchedule" for t in taints)
    assert (node_rejection(wl.Workload("Deployment", "ns", "w"), node) is None) is not hard


def test_nodes_that_are_not_ready_say_so(realdata, eks):
    for item in eks:
        item["spec"]["taints"].append(
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
        )
    doc = podinfo(realdata, nodeSelector={"workload-type": "batch"}, tolerations=HOUND)
    result = gate([doc], eks, [eks_spec()])
    (f,) = [f for f in result.findings if f.field == "schedule.tolerations"]
    assert "not ready or under pressure" in f.message
    assert f.expected == ["node.kubernetes.io/not-ready=:NoSchedule"]
