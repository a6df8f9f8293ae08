"""Defaults the provisioner applies are desired values: one drift per default is found, and
nodes exactly as the provisioner creates them give no finding (issue #10: no false negatives,
and defaults never invent drift)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from fleetwarden.core.diffing import diff_cluster
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.formats.desired import SourceFile, read_desired
from fleetwarden.formats.provisioners import Assumed
from tests.support.nodes import node, observed


def _specs(path: str, text: str, assume: Assumed | None = None) -> list[NodePoolSpec]:
    return read_desired([SourceFile(path, text.encode())], assume=assume).pools


# -- eksctl -----------------------------------------------------------------------------------

EKSCTL_BARE = """\
apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata:
  name: prod
  region: eu-west-1
  version: "1.31"
nodeGroups:
  - name: ng-1
managedNodeGroups:
  - name: mng-1
"""


def _eksctl_nodes() -> list[dict[str, Any]]:
    """What eksctl really creates for EKSCTL_BARE: 2 m5.large AL2023 nodes of 80 GiB each."""
    base = {"alpha.eksctl.io/cluster-name": "prod"}
    out = []
    for i in range(2):
        out.append(
            node(
                f"ng-{i}",
                labels={**base, "alpha.eksctl.io/nodegroup-name": "ng-1"},
                instance_type="m5.large",
            )
        )
        out.append(
            node(
                f"mng-{i}",
                labels={
                    **base,
                    "alpha.eksctl.io/nodegroup-name": "mng-1",
                    "eks.amazonaws.com/nodegroup": "mng-1",
                    "eks.amazonaws.com/capacityType": "ON_DEMAND",
                },
                instance_type="m5.large",
            )
        )
    return out


def _set(name: str, change: Callable[[dict[str, Any]], None]):
    def apply(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for n in nodes:
            if n["metadata"]["name"] == name:
                change(n)
        return nodes

    return apply


def _label(key: str, value: str | None) -> Callable[[dict[str, Any]], None]:
    def change(n: dict[str, Any]) -> None:
        if value is None:
            n["metadata"]["labels"].pop(key, None)
        else:
            n["metadata"]["labels"][key] = value

    return change


def _more(count: int, like: str) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    def apply(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        model = next(n for n in nodes if n["metadata"]["name"] == like)
        for i in range(count):
            extra = copy.deepcopy(model)
            extra["metadata"]["name"] = f"{like}-extra-{i}"
            nodes.append(extra)
        return nodes

    return apply


EKSCTL_DRIFTS = [
    (
        "instance type",
        _set("ng-0", _label("node.kubernetes.io/instance-type", "t3.medium")),
        "ng-1",
        "instanceType",
        "m5.large",
    ),
    ("node count", _more(3, "ng-0"), "ng-1", "nodeCount", "2..2"),
    (
        "AMI family",
        _set(
            "ng-1", lambda n: n["status"]["nodeInfo"].__setitem__("osImage", "Ubuntu 22.04.4 LTS")
        ),
        "ng-1",
        "osImage",
        ["amazonlinux2023", "amazonlinux2"],
    ),
    (
        "volume size",
        _set(
            "mng-0",
            lambda n: n["status"]["capacity"].__setitem__("ephemeral-storage", "20959212Ki"),
        ),
        "mng-1",
        "diskSize",
        80,
    ),
    (
        "cluster label",
        _set("ng-1", _label("alpha.eksctl.io/cluster-name", None)),
        "ng-1",
        "labels.alpha.eksctl.io/cluster-name",
        "prod",
    ),
    (
        "capacity type",
        _set("mng-1", _label("eks.amazonaws.com/capacityType", "SPOT")),
        "mng-1",
        "labels.eks.amazonaws.com/capacityType",
        "ON_DEMAND",
    ),
]


def test_eksctl_nodes_as_eksctl_creates_them_match_its_defaults():
    specs = _specs("eks.yaml", EKSCTL_BARE)
    assert diff_cluster("prod", specs, observed(*_eksctl_nodes())).findings == []


@pytest.mark.parametrize(
    ("change", "pool", "field", "expected"),
    [d[1:] for d in EKSCTL_DRIFTS],
    ids=[d[0] for d in EKSCTL_DRIFTS],
)
def test_eksctl_drift_from_a_default_is_found_with_its_provenance(change, pool, field, expected):
    specs = _specs("eks.yaml", EKSCTL_BARE)
    found = diff_cluster("prod", specs, observed(*change(_eksctl_nodes()))).findings
    assert [(f.pool, f.field, f.expected) for f in found] == [(pool, field, expected)]
    assert "default: " in (found[0].provenance or ""), found[0].provenance


def test_the_issue_example_an_eksctl_group_stating_nothing_is_compared():
    """Five t3.medium Ubuntu nodes with 20 GiB disks in a group that states nothing used to give
    0 findings and exit 0."""
    spec = _specs("eks.yaml", EKSCTL_BARE)[0]
    nodes = [
        node(
            f"n{i}",
            labels={
                "alpha.eksctl.io/nodegroup-name": "ng-1",
                "alpha.eksctl.io/cluster-name": "prod",
            },
            instance_type="t3.medium",
            os_image="Ubuntu 22.04.4 LTS",
            disk_gib=20,
        )
        for i in range(5)
    ]
    found = diff_cluster("prod", [spec], observed(*nodes)).findings
    assert {f.field for f in found} == {"instanceType", "osImage", "diskSize", "nodeCount"}


def test_a_stated_value_carries_its_file_and_line():
    text = EKSCTL_BARE.replace("  - name: ng-1\n", "  - name: ng-1\n    instanceType: c5.large\n")
    spec = _specs("eks.yaml", text)[0]
    assert spec.provenance["instanceTypes"] == "eks.yaml:9"
    found = diff_cluster("prod", [spec], observed(*_eksctl_nodes()[::2])).findings
    assert {(f.field, f.provenance) for f in found} == {("instanceType", "eks.yaml:9")}


@pytest.mark.parametrize(
    ("release", "version", "families"),
    [
        (None, "1.31", ("amazonlinux2023", "amazonlinux2")),
        (None, "1.33", ("amazonlinux2023",)),
        ((0, 190, 0), "1.31", ("amazonlinux2",)),
        ((0, 219, 0), "1.29", ("amazonlinux2023",)),
        ((0, 210, 0), "1.33", ("amazonlinux2023",)),
    ],
)
def test_eksctl_ami_family_default_follows_the_release(release, version, families):
    text = EKSCTL_BARE.replace('"1.31"', f'"{version}"')
    spec = _specs("eks.yaml", text, Assumed(eksctl=release))[0]  # the unmanaged group
    assert (spec.os_family, *spec.os_family_alternatives) == families


def test_eksctl_managed_group_with_a_launch_template_takes_no_type_or_disk_default():
    text = EKSCTL_BARE + "  - name: lt\n    launchTemplate: {id: lt-1, version: '2'}\n"
    spec = {s.name: s for s in _specs("eks.yaml", text)}["lt"]
    assert spec.instance_types == () and spec.disk_size_gib is None
    assert {u.field for u in spec.unresolved} == {"instanceTypes"}


# -- Karpenter --------------------------------------------------------------------------------

KARPENTER_V1 = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
"""

KARPENTER_V1ALPHA5 = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  providerRef: {name: default}
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {karpenter.sh/discovery: prod}
"""


def _karpenter_nodes(**labels: str) -> list[dict[str, Any]]:
    base = {
        "karpenter.sh/nodepool": "default",
        "karpenter.sh/provisioner-name": "default",
        "karpenter.k8s.aws/instance-category": "m",
        "karpenter.k8s.aws/instance-generation": "6",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "karpenter.sh/capacity-type": "spot",
        **labels,
    }
    return [
        node(f"k{i}", labels=dict(base), instance_type="m6i.large", disk_gib=20) for i in range(3)
    ]


def test_karpenter_v1_nodes_as_karpenter_creates_them_match_its_defaults():
    """No requirement default in v1: a spot node of a pool that does not pin the capacity type
    is fine (Karpenter even prefers spot); AL2023 from the alias; 20 GiB default volume."""
    specs = [s.with_cluster("prod") for s in _specs("np.yaml", KARPENTER_V1)]
    assert diff_cluster("prod", specs, observed(*_karpenter_nodes())).findings == []


@pytest.mark.parametrize(
    ("change", "field", "expected"),
    [
        (
            _set("k0", lambda n: n["status"]["capacity"].__setitem__("ephemeral-storage", "80Gi")),
            "diskSize",
            20,
        ),
        (
            _set(
                "k1",
                lambda n: n["status"]["nodeInfo"].__setitem__(
                    "osImage", "Bottlerocket OS 1.19.4 (aws-k8s-1.30)"
                ),
            ),
            "osImage",
            "amazonlinux2023",
        ),
    ],
    ids=["default volume", "alias family"],
)
def test_karpenter_v1_drift_from_a_default_is_found(change, field, expected):
    specs = [s.with_cluster("prod") for s in _specs("np.yaml", KARPENTER_V1)]
    found = diff_cluster("prod", specs, observed(*change(_karpenter_nodes()))).findings
    assert [(f.field, f.expected) for f in found] == [(field, expected)]
    assert found[0].provenance is not None


def test_karpenter_v1alpha5_webhook_defaults_are_desired_values():
    specs = [s.with_cluster("prod") for s in _specs("p.yaml", KARPENTER_V1ALPHA5)]
    nodes = _karpenter_nodes(**{"karpenter.sh/capacity-type": "on-demand"})
    for n in nodes:
        n["status"]["nodeInfo"]["osImage"] = "Amazon Linux 2"
    assert diff_cluster("prod", specs, observed(*nodes)).findings == []
    for key, value, field in (
        ("karpenter.sh/capacity-type", "spot", "requirements.karpenter.sh/capacity-type"),
        ("kubernetes.io/arch", "arm64", "requirements.kubernetes.io/arch"),
        (
            "karpenter.k8s.aws/instance-category",
            "t",
            "requirements.karpenter.k8s.aws/instance-category",
        ),
    ):
        drifted = copy.deepcopy(nodes)
        drifted[0]["metadata"]["labels"][key] = value
        found = diff_cluster("prod", specs, observed(*drifted)).findings
        assert [f.field for f in found] == [field]
        assert "v1alpha5" in (found[0].provenance or "")


def test_karpenter_v1alpha5_aliased_labels_count_as_stated_so_no_default_is_added():
    """Karpenter normalises beta.kubernetes.io/* (and failure-domain.beta...) requirement keys to
    the stable labels before its webhook looks for arch / instance constraints."""
    text = KARPENTER_V1ALPHA5.replace(
        "  providerRef: {name: default}\n",
        "  providerRef: {name: default}\n  requirements:\n"
        "  - {key: beta.kubernetes.io/instance-type, operator: In, values: [m6g.large]}\n"
        "  - {key: beta.kubernetes.io/arch, operator: In, values: [arm64]}\n"
        "  - {key: failure-domain.beta.kubernetes.io/zone, operator: In, values: [eu-west-1a]}\n",
    )
    (spec,) = _specs("p.yaml", text)
    assert {(r.key, r.values) for r in spec.requirements} == {
        ("node.kubernetes.io/instance-type", ("m6g.large",)),
        ("kubernetes.io/arch", ("arm64",)),
        ("topology.kubernetes.io/zone", ("eu-west-1a",)),
        ("kubernetes.io/os", ("linux",)),
        ("karpenter.sh/capacity-type", ("on-demand",)),
    }
    labels = {
        "karpenter.sh/provisioner-name": "default",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "arm64",
        "topology.kubernetes.io/zone": "eu-west-1a",
        "karpenter.sh/capacity-type": "on-demand",
    }
    nodes = [node("a", labels=labels, instance_type="m6g.large", disk_gib=20)]
    nodes[0]["status"]["nodeInfo"]["osImage"] = "Amazon Linux 2"
    assert diff_cluster("prod", [spec.with_cluster("prod")], observed(*nodes)).findings == []


AKS_NODE_CLASS_BARE = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements: [{key: kubernetes.io/os, operator: In, values: [linux]}]
---
apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata: {name: default}
spec:
  tags: {team: web}
"""


def test_karpenter_aks_node_class_crd_defaults_are_desired_values():
    """An AKSNodeClass stating nothing gets the CRD's Ubuntu image family (any release: the
    default moved from Ubuntu2204 to Ubuntu, 24.04 from Kubernetes 1.34) and a 128 GB OS disk."""
    (spec,) = _specs("aks.yaml", AKS_NODE_CLASS_BARE)
    assert (spec.os_family, spec.disk_size_gib) == ("ubuntu", 128)
    assert "AKSNodeClass CRD" in spec.provenance["osImage"]
    assert "AKSNodeClass CRD" in spec.provenance["diskSizeGiB"]
    (tags,) = [a for a in spec.account if a.path.endswith("spec.tags")]
    assert "Azure" in tags.detail and "AWS" not in tags.detail
    specs = [spec.with_cluster("prod")]
    labels = {"karpenter.sh/nodepool": "default", "kubernetes.io/os": "linux"}
    for image in ("Ubuntu 22.04.5 LTS", "Ubuntu 24.04.2 LTS"):
        nodes = [node("a", labels=labels, os_image=image, disk_gib=128)]
        assert diff_cluster("prod", specs, observed(*nodes)).findings == []
    drifted = [node("a", labels=labels, os_image="CBL-Mariner/Linux", disk_gib=64)]
    found = diff_cluster("prod", specs, observed(*drifted)).findings
    assert sorted(f.field for f in found) == ["diskSize", "osImage"]


def test_karpenter_v1alpha5_ami_family_default_names_its_node_template():
    (spec,) = _specs("p.yaml", KARPENTER_V1ALPHA5)
    (family,) = [a for a in spec.account if a.fact == "osImage"]
    assert family.path == "AWSNodeTemplate/default: spec.amiFamily"
    assert family.is_default and spec.os_family == "amazonlinux2"
