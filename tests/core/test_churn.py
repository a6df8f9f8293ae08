"""Churn vs drift: node changes explained by Karpenter, cluster-autoscaler, node-group scaling
and updates, auto-repair or GKE operations are churn while the new nodes match their pool; a
new node that does not match is drift; a change nobody automated explains is unexplained."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.core import churn
from fleetwarden.core.actors import Actor, ActorKind, Via
from fleetwarden.core.churn import (
    ChurnCause,
    Evidence,
    KubeEvent,
    NodeChange,
    NodeChangeKind,
    NodeSnapshot,
    Verdict,
)
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.pools import NodePoolSpec, Provisioner, Taint
from fleetwarden.formats.events import aws
from fleetwarden.formats.nodes import node_from_object

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
EKS = "honeycomb-eks-nodelist-arm64.json"


def spec(**changes: Any) -> NodePoolSpec:
    """The desired pool the real EKS nodes of ``custom-1`` match exactly."""
    base: dict[str, Any] = dict(
        name="custom-1",
        cluster="duckboat",
        provider=Provisioner.AWS,
        instance_types=("m6gd.2xlarge",),
        labels={"eks.amazonaws.com/nodegroup": "custom-1", "kubernetes.io/arch": "arm64"},
        taints=(Taint("type", "hound", "NoSchedule"),),
        kubernetes_version="1.21",
        os_family="amazonlinux2",
    )
    base.update(changes)
    return NodePoolSpec(**base)


@pytest.fixture()
def item(realdata: Path) -> dict[str, Any]:
    return json.loads((realdata / "nodes" / EKS).read_text())["items"][0]


def snap(obj: dict[str, Any], *, name: str | None = None, **mutate: Any) -> NodeSnapshot:
    obj = copy.deepcopy(obj)
    if name:
        obj["metadata"]["name"] = name
    for key, value in mutate.get("labels", {}).items():
        obj["metadata"]["labels"][key] = value
    if "taints" in mutate:
        obj["spec"]["taints"] = mutate["taints"]
    return NodeSnapshot(
        node_from_object(obj),
        annotations=mutate.get("annotations", obj["metadata"].get("annotations", {})),
        conditions=mutate.get(
            "conditions", {c["type"]: c["status"] for c in obj["status"]["conditions"]}
        ),
    )


def change(kind, removed=(), added=(), actor=None, pool="custom-1"):
    return NodeChange("duckboat", pool, kind, T0, tuple(removed), tuple(added), actor)


HOUND = {"key": "type", "value": "hound", "effect": "NoSchedule"}


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("taint", "event", "cause"),
    [
        ("karpenter.sh/disrupted", "Disrupting Node: Drifted", ChurnCause.KARPENTER_DRIFT),
        (
            "karpenter.sh/disrupted",
            "Disrupting Node: Underutilized",
            ChurnCause.KARPENTER_CONSOLIDATION,
        ),
        ("karpenter.sh/disruption", "Disrupting Node: Empty", ChurnCause.KARPENTER_CONSOLIDATION),
        ("karpenter.sh/disrupted", None, ChurnCause.KARPENTER_DISRUPTION),
        ("ToBeDeletedByClusterAutoscaler", None, ChurnCause.CLUSTER_AUTOSCALER),
    ],
)
def test_a_replacement_by_an_autoscaler_is_churn_with_its_cause(item, taint, event, cause):
    old = snap(item, taints=[HOUND, {"key": taint, "effect": "NoSchedule"}])
    new = snap(item, name="duckboat-new")
    events = ()
    if event:
        events = (KubeEvent("DisruptionTerminating", "karpenter", old.node.name, T0, event),)
    d = churn.classify(
        change(NodeChangeKind.REPLACED, [old], [new]), spec=spec(), evidence=Evidence(events)
    )
    assert d.verdict is Verdict.CHURN, d.reasons
    assert cause in d.causes
    assert d.to_json()["verdict"] == "churn"


@pytest.mark.realdata
def test_a_replacement_whose_new_node_does_not_match_the_pool_is_drift(item):
    old = snap(item, taints=[HOUND, {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
    wrong = snap(item, name="duckboat-new", labels={"node.kubernetes.io/instance-type": "t3.large"})
    d = churn.classify(change(NodeChangeKind.REPLACED, [old], [wrong]), spec=spec())
    assert d.verdict is Verdict.DRIFT
    assert [f.field for f in d.findings] == ["instanceType"]


@pytest.mark.realdata
def test_a_removal_nothing_explains_is_unexplained_and_a_person_is_never_churn(item):
    plain = churn.classify(change(NodeChangeKind.REMOVED, [snap(item)]), spec=spec())
    assert plain.verdict is Verdict.UNEXPLAINED and plain.causes == ()
    tainted = snap(
        item, taints=[HOUND, {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]
    )
    by_hand = churn.classify(
        change(
            NodeChangeKind.REMOVED,
            [tainted],
            actor=Actor("alice", ActorKind.HUMAN, Via.AUDIT),
        ),
        spec=spec(),
    )
    assert by_hand.verdict is Verdict.UNEXPLAINED
    assert any("alice" in r for r in by_hand.reasons)


@pytest.mark.realdata
def test_an_unhealthy_node_replaced_is_auto_repair(item):
    sick = snap(item, conditions={"Ready": "True", "KernelReady": "False"})
    d = churn.classify(
        change(NodeChangeKind.REPLACED, [sick], [snap(item, name="fresh")]), spec=spec()
    )
    assert d.verdict is Verdict.CHURN and d.causes == (ChurnCause.AUTO_REPAIR,)


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("operation", "cause"),
    [
        ("AUTO_REPAIR_NODES", ChurnCause.AUTO_REPAIR),
        ("AUTO_UPGRADE_NODES", ChurnCause.AUTO_UPGRADE),
        ("UPGRADE_NODES", ChurnCause.SURGE_UPGRADE),
    ],
)
def test_gke_operation_annotations_name_the_cause(item, operation, cause):
    old = snap(item, annotations={"gke-current-operation": operation})
    d = churn.classify(change(NodeChangeKind.REMOVED, [old]), spec=spec())
    assert d.verdict is Verdict.CHURN and d.causes == (cause,)


def _asg_event(realdata: Path, name: str, at: datetime, pool: str = "custom-1"):
    body = json.loads((realdata / "events" / name).read_text())
    body["time"] = at.isoformat().replace("+00:00", "Z")
    body["detail"]["Tags"] = [
        {"Key": "eks:cluster-name", "Value": "duckboat"},
        {"Key": "eks:nodegroup-name", "Value": pool},
    ]
    (event,) = aws.parse(body, {}, at).events
    return event


@pytest.mark.realdata
def test_real_auto_scaling_events_explain_node_group_scaling_in_their_window(realdata, item):
    launch = _asg_event(realdata, "aws-autoscaling-event-launch-successful.json", T0)
    added = change(NodeChangeKind.ADDED, added=[snap(item, name="scaled")])
    d = churn.classify(added, spec=spec(), evidence=Evidence(cloud=(launch,)))
    assert d.verdict is Verdict.CHURN and d.causes == (ChurnCause.NODEGROUP_SCALING,)
    late = _asg_event(
        realdata, "aws-autoscaling-event-launch-successful.json", T0 + timedelta(hours=2)
    )
    other = _asg_event(realdata, "aws-autoscaling-event-launch-successful.json", T0, pool="gpu")
    for event in (late, other):
        d = churn.classify(added, spec=spec(), evidence=Evidence(cloud=(event,)))
        assert d.verdict is Verdict.UNEXPLAINED


@pytest.mark.realdata
def test_a_karpenter_launch_in_a_karpenter_pool_is_provisioning(item):
    karp = spec(
        name="default",
        provider=Provisioner.KARPENTER,
        labels={"karpenter.sh/nodepool": "default"},
        taints=(),
    )
    new = snap(item, name="k1", labels={"karpenter.sh/nodepool": "default"}, taints=[])
    d = churn.classify(change(NodeChangeKind.ADDED, added=[new], pool="default"), spec=karp)
    assert d.verdict is Verdict.CHURN and d.causes == (ChurnCause.KARPENTER_PROVISIONING,)
    unknown_pool = churn.classify(change(NodeChangeKind.ADDED, added=[new], pool="x"), spec=None)
    assert unknown_pool.verdict is Verdict.DRIFT


@pytest.mark.realdata
def test_only_pool_level_transitions_of_recent_churn_in_the_same_pool_are_explained(item):
    done = churn.classify(
        change(
            NodeChangeKind.REPLACED,
            [snap(item, conditions={"Ready": "False"})],
            [snap(item, name="n")],
        ),
        spec=spec(),
    )
    assert done.verdict is Verdict.CHURN

    def f(field, pool="custom-1"):
        return Finding("duckboat", pool, Layer.L4, field, "1.21", ["a", "b"], Severity.MEDIUM)

    hit = churn.explained_by_churn(
        f("kubeletVersion.mixed"), [done], now=T0 + timedelta(minutes=30)
    )
    assert hit is not None and hit.churn is done and "auto-repair" in hit.reason
    assert churn.explained_by_churn(f("kubeletVersion"), [done], now=T0) is None
    assert churn.explained_by_churn(f("nodeCount", pool="gpu"), [done], now=T0) is None
    assert churn.explained_by_churn(f("nodeCount"), [done], now=T0 + timedelta(hours=2)) is None
    assert churn.explained_by_churn(f("nodeCount"), [done], now=T0 - timedelta(minutes=1)) is None
