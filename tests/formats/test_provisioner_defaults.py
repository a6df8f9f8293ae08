"""Defaults the provisioner applies are desired values: one drift per default is found, and
nodes exactly as the provisioner creates them give no finding (issue #10: no false negatives,
and defaults never invent drift)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.diffing import diff_cluster
from fleetwarden.core.pools import FieldStatus, NodePoolSpec
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


def _gpu_group(version: str, types: str, *, managed: bool = True) -> str:
    """eksctl's examples/23-kubeflow-spot-instance.yaml shape: a GPU group, no amiFamily."""
    section = "managedNodeGroups" if managed else "nodeGroups"
    return (
        "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\n"
        f"metadata: {{name: prod, region: us-west-2, version: '{version}'}}\n"
        f"{section}:\n  - name: 1-gpu-g5-xlarge\n{types}"
        "    minSize: 0\n    maxSize: 10\n    desiredCapacity: 0\n"
    )


_GPU_TYPES = [
    "    instanceType: g5.xlarge\n",
    "    instanceType: p3.2xlarge\n",
    "    instanceType: inf1.xlarge\n",
    "    instanceType: g5g.xlarge\n",
    "    instanceTypes: [g4dn.xlarge, g5.xlarge]\n",
]


@pytest.mark.parametrize("types", _GPU_TYPES, ids=lambda t: t.split(":")[1].strip())
@pytest.mark.parametrize("version", ["1.30", "1.32"])
def test_eksctl_gpu_managed_group_without_ami_family_leaves_the_os_unresolved(version, types):
    """eksctl's default for a managed group of GPU types on Kubernetes 1.30-1.32 changed with
    its release (refused, AmazonLinux2, AmazonLinux2023: SetManagedNodeGroupDefaults in
    pkg/apis/eksctl.io/v1alpha5/defaults.go, v0.179.0-v0.208.0), and the file does not say
    which eksctl applied it: amiFamily / osImage are unresolved with that reason, never an
    assumed family (no osImage finding whatever the nodes run)."""
    (spec,) = _specs("eks.yaml", _gpu_group(version, types))
    assert spec.os_family is None and spec.os_family_alternatives == ()
    (note,) = [u for u in spec.unresolved if u.field == "osImage"]
    assert "0.183-0.191" in note.expression and "scan.provisioners.eksctl" in note.expression
    (entry,) = [a for a in spec.account if a.path == "amiFamily"]
    assert entry.status is FieldStatus.UNRESOLVED and entry.fact == "osImage"
    nodes = [
        node(
            f"gpu-{i}",
            labels={
                "alpha.eksctl.io/cluster-name": "prod",
                "alpha.eksctl.io/nodegroup-name": "1-gpu-g5-xlarge",
                "eks.amazonaws.com/nodegroup": "1-gpu-g5-xlarge",
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
            },
            instance_type=types.split(":")[1].strip(" []\n").split(",")[0],
            os_image=image,
        )
        for i, image in enumerate(["Amazon Linux 2", "Amazon Linux 2023.6.20250203"])
    ]
    found = diff_cluster("prod", [spec], observed(*nodes)).findings
    assert "osImage" not in {f.field for f in found}


@pytest.mark.parametrize(
    ("release", "version", "types", "families"),
    [
        ((0, 182, 0), "1.29", _GPU_TYPES[0], ("amazonlinux2",)),
        ((0, 182, 0), "1.30", _GPU_TYPES[0], ()),  # AL2023, which 0.182 refuses for GPUs
        ((0, 190, 0), "1.30", _GPU_TYPES[0], ("amazonlinux2",)),
        ((0, 190, 0), "1.31", _GPU_TYPES[2], ("amazonlinux2",)),  # Neuron: IsGPUInstanceType
        ((0, 200, 0), "1.31", _GPU_TYPES[0], ("amazonlinux2023",)),
        ((0, 200, 0), "1.31", _GPU_TYPES[3], ("amazonlinux2",)),  # g5g: ARM GPU rule to 0.207
        ((0, 208, 0), "1.31", _GPU_TYPES[3], ("amazonlinux2023",)),
        ((0, 219, 0), "1.29", _GPU_TYPES[0], ("amazonlinux2023",)),
        (None, "1.29", _GPU_TYPES[0], ("amazonlinux2023", "amazonlinux2")),  # no GPU rule <1.30
        (None, "1.33", _GPU_TYPES[0], ("amazonlinux2023",)),
    ],
)
def test_eksctl_gpu_managed_group_default_per_release(release, version, types, families):
    """With the release assumed (scan.provisioners.eksctl), the family eksctl's
    SetManagedNodeGroupDefaults gives GPU types in that release; below 1.30 and from 1.33 the
    release's general default (no GPU rule there)."""
    (spec,) = _specs("eks.yaml", _gpu_group(version, types), Assumed(eksctl=release))
    got = (spec.os_family, *spec.os_family_alternatives) if spec.os_family else ()
    assert got == families
    assert ("osImage" in spec.unresolved_fields) == (families == ())


@settings(max_examples=150, deadline=None)
@given(
    instance=st.sampled_from(
        [
            "m5.large",
            "t3.medium",
            "g4dn.xlarge",
            "p4d.24xlarge",
            "g5g.2xlarge",
            "trn1.2xlarge",
            "c7g.large",
            "g6.xlarge",
        ]
    ),
    minor=st.integers(24, 35),
    release=st.none() | st.tuples(st.just(0), st.integers(170, 230), st.just(0)),
)
def test_eksctl_managed_os_is_a_family_or_unresolved_never_both(instance, minor, release):
    """Any managed group without amiFamily: an OS family to compare, or osImage unresolved
    with its reason — the latter exactly for GPU types on 1.30-1.32 where the release decides
    and is not known (or is one that refuses them)."""
    types = f"    instanceType: {instance}\n"
    (spec,) = _specs("eks.yaml", _gpu_group(f"1.{minor}", types), Assumed(eksctl=release))
    unresolved = "osImage" in spec.unresolved_fields
    assert unresolved == (spec.os_family is None)
    gpu = instance.startswith(("g4", "g5", "g6", "p4", "trn"))
    refusing = release is not None and (0, 179, 0) <= release < (0, 183, 0)
    if unresolved:
        assert gpu and 30 <= minor < 33 and (release is None or refusing)
    elif gpu and 30 <= minor < 33 and release is None:
        raise AssertionError("a GPU default assumed without the release")


def test_eksctl_gpu_unmanaged_group_takes_the_general_default():
    """Unmanaged groups had no GPU rule (SetNodeGroupDefaults: DefaultNodeImageFamily)."""
    (spec,) = _specs("eks.yaml", _gpu_group("1.31", _GPU_TYPES[1], managed=False))
    assert (spec.os_family, *spec.os_family_alternatives) == ("amazonlinux2023", "amazonlinux2")


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
