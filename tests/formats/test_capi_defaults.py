"""Cluster API defaults are desired values: one drift per default is found, with its provenance,
and nodes exactly as CAPI / CAPA / CAPZ create them give no finding (issue #10: no false
negatives, and defaults never invent drift)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from fleetwarden.core.diffing import diff_cluster
from fleetwarden.core.nodes import POOL_LABELS
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.formats.desired import SourceFile, read_desired
from tests.support.nodes import node, observed

POOL = "example.com/pool"
OPTIONS = DiffOptions(pool_labels=(POOL, *POOL_LABELS))

# One cluster: a self-managed CAPA cluster with two MachineDeployments, a CAPZ MachinePool,
# an EKS managed node group and an AKS agent pool, each stating as little as it may.
TREE = """\
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: prod, namespace: fleet}
spec:
  infrastructureRef:
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
    kind: AWSCluster
    name: prod
  controlPlaneRef:
    apiVersion: controlplane.cluster.x-k8s.io/v1beta1
    kind: KubeadmControlPlane
    name: prod-cp
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSCluster
metadata: {name: prod, namespace: fleet}
spec: {region: eu-west-1}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: web, namespace: fleet}
spec:
  clusterName: prod
  template:
    spec:
      clusterName: prod
      version: v1.31.4
      bootstrap:
        configRef:
          apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
          kind: KubeadmConfigTemplate
          name: web
      infrastructureRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
        kind: AWSMachineTemplate
        name: web
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSMachineTemplate
metadata: {name: web, namespace: fleet}
spec:
  template:
    spec:
      instanceType: m5.large
      iamInstanceProfile: nodes.cluster-api-provider-aws.sigs.k8s.io
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: KubeadmConfigTemplate
metadata: {name: web, namespace: fleet}
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          kubeletExtraArgs: {cloud-provider: external, node-labels: "example.com/pool=web"}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata:
  name: batch
  namespace: fleet
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "2"
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "5"
spec:
  clusterName: prod
  template:
    spec:
      clusterName: prod
      version: v1.31.4
      bootstrap:
        configRef:
          apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
          kind: KubeadmConfigTemplate
          name: batch
      infrastructureRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
        kind: AWSMachineTemplate
        name: batch
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSMachineTemplate
metadata: {name: batch, namespace: fleet}
spec:
  template:
    spec:
      instanceType: c5.xlarge
      imageLookupBaseOS: flatcar-stable
      spotMarketOptions: {}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: KubeadmConfigTemplate
metadata: {name: batch, namespace: fleet}
spec:
  template:
    spec:
      format: ignition
      joinConfiguration:
        nodeRegistration:
          kubeletExtraArgs: {node-labels: "example.com/pool=batch"}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachinePool
metadata: {name: vmss, namespace: fleet}
spec:
  clusterName: prod
  replicas: 2
  template:
    spec:
      clusterName: prod
      version: v1.31.4
      bootstrap:
        configRef:
          apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
          kind: KubeadmConfig
          name: vmss
      infrastructureRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: AzureMachinePool
        name: vmss
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: AzureMachinePool
metadata: {name: vmss, namespace: fleet}
spec:
  location: westeurope
  template:
    vmSize: Standard_D4s_v5
    osDisk: {diskSizeGB: 64, osType: Linux}
    image:
      marketplace:
        publisher: kinvolk
        offer: flatcar-container-linux-corevm-amd64
        sku: stable-gen2
        version: latest
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: KubeadmConfig
metadata: {name: vmss, namespace: fleet}
spec:
  format: ignition
  joinConfiguration:
    nodeRegistration:
      kubeletExtraArgs: {node-labels: "example.com/pool=vmss"}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachinePool
metadata: {name: eks-pool, namespace: fleet}
spec:
  clusterName: prod
  replicas: 2
  template:
    spec:
      clusterName: prod
      version: v1.31.4
      bootstrap: {dataSecretName: ""}
      infrastructureRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
        kind: AWSManagedMachinePool
        name: eks-pool
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSManagedMachinePool
metadata: {name: eks-pool, namespace: fleet}
spec: {}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachinePool
metadata: {name: aks-pool, namespace: fleet}
spec:
  clusterName: prod
  replicas: 2
  template:
    spec:
      clusterName: prod
      version: v1.31.4
      bootstrap: {dataSecretName: ""}
      infrastructureRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: AzureManagedMachinePool
        name: aks-pool
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: AzureManagedMachinePool
metadata: {name: aks-pool, namespace: fleet}
spec: {mode: User, name: user1, sku: Standard_D2s_v3}
"""

KUBELET = "v1.31.4"
UBUNTU = "Ubuntu 24.04.1 LTS"
FLATCAR = "Flatcar Container Linux by Kinvolk 4081.2.0 (Oklo)"
_STARTUP = [
    {"key": "node.cluster.x-k8s.io/uninitialized", "effect": "NoSchedule"},
    {"key": "node.cluster.x-k8s.io/outdated-revision", "effect": "PreferNoSchedule"},
]


def _specs(text: str = TREE) -> list[NodePoolSpec]:
    return read_desired([SourceFile("capi/prod.yaml", text.encode())]).pools


def _nodes() -> list[dict[str, Any]]:
    """The nodes CAPI, CAPA, CAPZ, EKS and AKS create for TREE (a web node mid-rollout)."""
    out = [
        node(
            "web-0",
            labels={POOL: "web"},
            instance_type="m5.large",
            os_image=UBUNTU,
            kubelet=KUBELET,
            disk_gib=None,
            taints=_STARTUP,
        )
    ]
    out += [
        node(
            f"batch-{i}",
            labels={POOL: "batch", "cluster.x-k8s.io/interruptible": ""},
            instance_type="c5.xlarge",
            os_image=FLATCAR,
            kubelet=KUBELET,
            disk_gib=None,
        )
        for i in range(3)
    ]
    out += [
        node(
            f"vmss-{i}",
            labels={POOL: "vmss"},
            instance_type="Standard_D4s_v5",
            os_image=FLATCAR,
            kubelet=KUBELET,
            disk_gib=64,
        )
        for i in range(2)
    ]
    out += [
        node(
            f"eks-{i}",
            labels={
                "eks.amazonaws.com/nodegroup": "fleet_eks-pool",
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
            },
            instance_type="t3.medium",
            os_image="Amazon Linux 2",
            kubelet="v1.31.4-eks-2d5f260",
            disk_gib=20,
        )
        for i in range(2)
    ]
    out += [
        node(
            f"aks-{i}",
            labels={"kubernetes.azure.com/agentpool": "user1"},
            instance_type="Standard_D2s_v3",
            os_image="Ubuntu 22.04.5 LTS",
            kubelet=KUBELET,
            disk_gib=124,
        )
        for i in range(2)
    ]
    return out


Change = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def _on(name: str, edit: Callable[[dict[str, Any]], None]) -> Change:
    def apply(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for n in nodes:
            if n["metadata"]["name"] == name:
                edit(n)
        return nodes

    return apply


def _os(image: str) -> Callable[[dict[str, Any]], None]:
    return lambda n: n["status"]["nodeInfo"].__setitem__("osImage", image)


def _label(key: str, value: str | None) -> Callable[[dict[str, Any]], None]:
    def edit(n: dict[str, Any]) -> None:
        if value is None:
            n["metadata"]["labels"].pop(key, None)
        else:
            n["metadata"]["labels"][key] = value

    return edit


def _disk(gib: int) -> Callable[[dict[str, Any]], None]:
    return lambda n: n["status"]["capacity"].__setitem__(
        "ephemeral-storage", f"{int(gib * 0.96 * 2**20)}Ki"
    )


def _count(name: str, delta: int) -> Change:
    """``delta`` more (or fewer) nodes like ``<name>-0``."""

    def apply(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if delta < 0:
            mine = [n for n in nodes if n["metadata"]["name"].startswith(f"{name}-")]
            drop = {n["metadata"]["name"] for n in mine[delta:]}
            return [n for n in nodes if n["metadata"]["name"] not in drop]
        model = next(n for n in nodes if n["metadata"]["name"] == f"{name}-0")
        for i in range(delta):
            extra = copy.deepcopy(model)
            extra["metadata"]["name"] = f"{name}-extra-{i}"
            nodes.append(extra)
        return nodes

    return apply


# (what, change, pool, field, expected, provenance is a default?)
DRIFTS: list[tuple[str, Change, str, str, Any, bool]] = [
    ("MachineDeployment replicas default", _count("web", 1), "web", "nodeCount", 1, True),
    ("autoscaler range: above max", _count("batch", 3), "batch", "nodeCount", "2..5", False),
    ("autoscaler range: below min", _count("batch", -2), "batch", "nodeCount", "2..5", False),
    (
        "CAPA default OS",
        _on("web-0", _os("Amazon Linux 2023.6.20250218")),
        "web",
        "osImage",
        ["ubuntu-24.04", "ubuntu-18.04"],
        True,
    ),
    (
        "CAPA Flatcar template (imageLookupBaseOS)",
        _on("batch-1", _os(UBUNTU)),
        "batch",
        "osImage",
        "flatcar",
        False,
    ),
    (
        "CAPA spot: the interruptible label",
        _on("batch-2", _label("cluster.x-k8s.io/interruptible", None)),
        "batch",
        "labels.cluster.x-k8s.io/interruptible",
        "",
        False,
    ),
    (
        "CAPZ Flatcar marketplace image",
        _on("vmss-1", _os(UBUNTU)),
        "vmss",
        "osImage",
        "flatcar",
        False,
    ),
    (
        "AKS default OS SKU (Ubuntu)",
        _on("aks-0", _os("Microsoft Azure Linux 3.0")),
        "user1",
        "osImage",
        "ubuntu",
        True,
    ),
    (
        "EKS default instance type",
        _on("eks-0", _label("node.kubernetes.io/instance-type", "t3.large")),
        "fleet_eks-pool",
        "instanceType",
        "t3.medium",
        True,
    ),
    ("EKS default disk size", _on("eks-1", _disk(80)), "fleet_eks-pool", "diskSize", 20, True),
    (
        "EKS default AMI type (AL2_x86_64)",
        _on("eks-1", _os("Amazon Linux 2023.6.20250218")),
        "fleet_eks-pool",
        "osImage",
        "amazonlinux2",
        True,
    ),
    (
        "EKS default capacity type label",
        _on("eks-0", _label("eks.amazonaws.com/capacityType", "SPOT")),
        "fleet_eks-pool",
        "labels.eks.amazonaws.com/capacityType",
        "ON_DEMAND",
        True,
    ),
]


def test_nodes_as_the_provisioners_create_them_give_no_finding():
    """Defaults never invent drift: rollout / bootstrap taints, the AKS-sized disk, an EKS
    kubelet suffix and the generated EKS node group name all match."""
    found = diff_cluster("prod", _specs(), observed(*_nodes()), options=OPTIONS).findings
    assert found == []


@pytest.mark.parametrize(
    ("change", "pool", "field", "expected", "default"),
    [d[1:] for d in DRIFTS],
    ids=[d[0] for d in DRIFTS],
)
def test_one_drift_per_default_is_found_with_its_provenance(
    change: Change, pool: str, field: str, expected: Any, default: bool
):
    found = diff_cluster("prod", _specs(), observed(*change(_nodes())), options=OPTIONS).findings
    assert [(f.pool, f.field, f.expected) for f in found] == [(pool, field, expected)]
    provenance = found[0].provenance or ""
    if default:
        assert provenance.startswith("default: "), provenance
    else:
        # stated in the file (a range names both annotations' lines)
        assert "capi/prod.yaml:" in provenance and "default:" not in provenance, provenance


def test_an_unset_count_without_annotations_is_one():
    spec = {s.name: s for s in _specs()}["web"]
    assert (spec.desired_size, spec.min_size, spec.max_size) == (1, None, None)
    assert spec.provenance["desiredSize"].startswith("default: CAPI: replicas 1")


def test_both_autoscaler_annotations_make_the_count_a_range_even_with_replicas():
    marker = 'max-size: "5"\nspec:\n'
    assert marker in TREE
    text = TREE.replace(marker, marker + "  replicas: 4\n")
    spec = {s.name: s for s in _specs(text)}["batch"]
    assert (spec.min_size, spec.max_size, spec.desired_size) == (2, 5, 4)
    found = diff_cluster("prod", [spec], observed(*_nodes()[1:4]), options=OPTIONS).findings
    assert found == []  # 3 nodes: inside 2..5, though replicas says 4
