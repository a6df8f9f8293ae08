"""An embedded, reproducible simulated fleet for ``fleetwarden demo`` (and tests).

Three clusters on three providers: ``prod-eu-1`` (EKS: eksctl + Karpenter), ``prod-us-1``
(GKE) and ``prod-asia-1`` (AKS), the last two from one native file with a ``clusters:``
overlay. Nodes are generated as Kubernetes Node objects, as ``kubectl get nodes -o json`` would
print them, then drift is planted in every layer. The desired files and the node dumps go
through the same readers as real files.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from fleetwarden.adapters.kube.restore import merge_taints
from fleetwarden.core.fleet import FleetReport, diff_fleet
from fleetwarden.core.pools import Taint
from fleetwarden.core.rules import DEFAULT_TRANSIENT_TAINTS
from fleetwarden.formats.desired import DesiredRead, SourceFile, read_desired
from fleetwarden.formats.nodes import parse_nodes

__all__ = [
    "DESIRED_FILES",
    "InstanceShape",
    "SimulatedFleet",
    "SimulatedNodeRestorer",
    "build_fleet",
    "console_resize",
    "demo_desired",
    "drop_taint",
    "label_by_hand",
    "scan_demo",
    "scan_fleet",
    "upgrade",
]

EKSCTL = """\
apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata:
  name: prod-eu-1
  region: eu-west-1
  version: "1.30"
managedNodeGroups:
  - name: general
    instanceType: m5.large
    amiFamily: AmazonLinux2023
    volumeSize: 100
    minSize: 10
    maxSize: 30
    desiredCapacity: 20
    labels: {team: platform, tier: general}
  - name: memory
    instanceType: r5.xlarge
    amiFamily: AmazonLinux2023
    minSize: 2
    maxSize: 6
    desiredCapacity: 4
    labels: {workload: memory}
    taints:
      - {key: workload, value: memory, effect: NoSchedule}
  - name: gpu
    instanceType: g5.xlarge
    amiFamily: Bottlerocket
    minSize: 0
    maxSize: 4
    desiredCapacity: 2
    labels: {accelerator: nvidia}
    taints:
      - {key: nvidia.com/gpu, value: "true", effect: NoSchedule}
  - name: system
    instanceType: m5.large
    amiFamily: AmazonLinux2023
    minSize: 2
    maxSize: 3
    labels: {role: system}
    taints:
      - {key: CriticalAddonsOnly, value: "true", effect: NoSchedule}
"""

KARPENTER = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: spot
spec:
  template:
    metadata:
      labels: {capacity: spot}
    spec:
      requirements:
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-prod-eu-1
  amiSelectorTerms:
    - alias: al2023@latest
"""

NATIVE = """\
# Defined once, reused by every cluster below (seed 001: define once, reuse everywhere).
apiVersion: fleetwarden.io/v1alpha1
kind: NodePools
pools:
  system:
    minSize: 2
    maxSize: 3
    labels: {role: system}
    taints: [{key: CriticalAddonsOnly, value: "true", effect: NoSchedule}]
    kubernetesVersion: "1.30"
  general:
    minSize: 10
    maxSize: 40
    labels: {team: platform, tier: general}
    kubernetesVersion: "1.30"
  batch:
    minSize: 2
    maxSize: 30
    labels: {workload: batch}
    taints: [{key: dedicated, value: batch, effect: NoSchedule}]
    kubernetesVersion: "1.30"
clusters:
  prod-us-1:
    overrides:
      system: {provider: gcp, instanceTypes: [e2-standard-2], osImage: COS_CONTAINERD}
      general: {provider: gcp, instanceTypes: [e2-standard-4], osImage: COS_CONTAINERD}
      batch: {provider: gcp, instanceTypes: [n2-standard-8], osImage: COS_CONTAINERD}
      highmem:
        provider: gcp
        instanceTypes: [n2-highmem-8]
        minSize: 1
        maxSize: 4
        labels: {workload: highmem}
        kubernetesVersion: "1.30"
  prod-asia-1:
    overrides:
      system: {provider: azure, instanceTypes: [Standard_D2s_v5], osImage: AzureLinux}
      general: {provider: azure, instanceTypes: [Standard_D4s_v5], osImage: AzureLinux,
                labels: {region: asia}}
      batch: {provider: azure, instanceTypes: [Standard_F8s_v2], osImage: AzureLinux}
      spot:
        provider: azure
        instanceTypes: [Standard_D4s_v5]
        minSize: 3
        maxSize: 10
        labels: {"kubernetes.azure.com/scalesetpriority": spot}
        taints: [{key: kubernetes.azure.com/scalesetpriority, value: spot, effect: NoSchedule}]
        kubernetesVersion: "1.30"
        osImage: AzureLinux
      ingress:
        provider: azure
        instanceTypes: [Standard_D2s_v5]
        minSize: 2
        maxSize: 4
        labels: {role: ingress}
        kubernetesVersion: "1.30"
        osImage: AzureLinux
"""

# (path, cluster override, text)
DESIRED_FILES: tuple[tuple[str, str | None, str], ...] = (
    ("demo/prod-eu-1/eksctl.yaml", None, EKSCTL),
    ("demo/prod-eu-1/karpenter.yaml", "prod-eu-1", KARPENTER),
    ("demo/fleet/pools.yaml", None, NATIVE),
)


@dataclass(frozen=True, slots=True)
class InstanceShape:
    cpu: str
    memory: str
    pods: str
    category: str


SHAPES = {
    "m5.large": InstanceShape("1930m", "7220184Ki", "29", "m"),
    "t3.medium": InstanceShape("1930m", "3388356Ki", "17", "t"),
    "t3.large": InstanceShape("1930m", "7181732Ki", "35", "t"),
    "r5.xlarge": InstanceShape("3920m", "31548348Ki", "58", "r"),
    "g5.xlarge": InstanceShape("3920m", "15155172Ki", "58", "g"),
    "c5.xlarge": InstanceShape("3920m", "7135608Ki", "58", "c"),
    "m5.xlarge": InstanceShape("3920m", "15160996Ki", "58", "m"),
    "r5.large": InstanceShape("1930m", "15163716Ki", "29", "r"),
    "e2-standard-2": InstanceShape("1930m", "6069972Ki", "110", "e2"),
    "e2-standard-4": InstanceShape("3920m", "13610540Ki", "110", "e2"),
    "n2-standard-8": InstanceShape("7910m", "29339892Ki", "110", "n2"),
    "n2-highmem-8": InstanceShape("7910m", "59626108Ki", "110", "n2"),
    "Standard_D2s_v5": InstanceShape("1900m", "5497684Ki", "110", "D"),
    "Standard_D4s_v5": InstanceShape("3860m", "12880504Ki", "110", "D"),
    "Standard_F8s_v2": InstanceShape("7820m", "12969816Ki", "110", "F"),
    "Standard_B2s": InstanceShape("1900m", "2250212Ki", "110", "B"),
}

_OS = {
    "aws": "Amazon Linux 2023.5.20240916",
    "bottlerocket": "Bottlerocket OS 1.22.0 (aws-k8s-1.30)",
    "gcp": "Container-Optimized OS from Google",
    "azure": "CBL-Mariner/Linux",
}
_KUBELET = {
    "aws": "v1.30.4-eks-a737599",
    "gcp": "v1.30.5-gke.1014001",
    "azure": "v1.30.3",
    "bottlerocket": "v1.30.4-eks-a737599",
}
_POOL_LABEL = {
    "aws": "eks.amazonaws.com/nodegroup",
    "karpenter": "karpenter.sh/nodepool",
    "gcp": "cloud.google.com/gke-nodepool",
    "azure": "kubernetes.azure.com/agentpool",
}
# the root (Bottlerocket: data) volume each pool's provisioner gives its nodes, in GiB:
# eksctl's volumeSize (default 80), Karpenter's default block device (20)
_DISK_GIB = {("prod-eu-1", "general"): 100, ("prod-eu-1", "spot"): 20}
_DEFAULT_DISK_GIB = {"aws": 80, "karpenter": 20}
_ZONES = {
    "aws": ["eu-west-1a", "eu-west-1b", "eu-west-1c"],
    "gcp": ["us-central1-a", "us-central1-b", "us-central1-f"],
    "azure": ["southeastasia-1", "southeastasia-2", "southeastasia-3"],
}


def _node(
    cluster: str,
    name: str,
    provider: str,
    pool: str,
    itype: str,
    labels: dict[str, str],
    taints: list[dict[str, str]],
    zone: str,
    *,
    os_key: str | None = None,
) -> dict[str, Any]:
    shape = SHAPES[itype]
    pool_provider = "aws" if provider == "karpenter" else provider
    os_key = os_key or pool_provider
    disk_gib = _DISK_GIB.get((cluster, pool), _DEFAULT_DISK_GIB.get(provider, 100))
    all_labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": itype,
        "beta.kubernetes.io/instance-type": itype,
        "topology.kubernetes.io/zone": zone,
        _POOL_LABEL[provider]: pool,
        **labels,
    }
    if provider == "aws":  # what eksctl and EKS put on every node of a managed group
        all_labels["alpha.eksctl.io/cluster-name"] = cluster
        all_labels["alpha.eksctl.io/nodegroup-name"] = pool
        all_labels["eks.amazonaws.com/capacityType"] = "ON_DEMAND"
    if provider == "karpenter":
        all_labels["karpenter.k8s.aws/instance-category"] = shape.category
        all_labels["karpenter.sh/capacity-type"] = "spot"
    if provider == "azure":
        all_labels["agentpool"] = pool
    capacity = {
        "cpu": str(int(shape.cpu[:-1]) // 1000 + 1) if shape.cpu.endswith("m") else shape.cpu,
        "memory": shape.memory,
        "pods": shape.pods,
        # the filesystem on the volume: a little smaller than the volume
        "ephemeral-storage": f"{int(disk_gib * 0.9999 * 2**20)}Ki",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {"taints": [dict(t) for t in taints]} if taints else {},
        "status": {
            "allocatable": {
                "cpu": shape.cpu,
                "memory": shape.memory,
                "pods": shape.pods,
                "ephemeral-storage": str(int(disk_gib * 0.9 * 2**30)),
            },
            "capacity": capacity,
            "nodeInfo": {
                "kubeletVersion": _KUBELET[os_key],
                "osImage": _OS[os_key],
                "architecture": "amd64",
                "operatingSystem": "linux",
                "containerRuntimeVersion": "containerd://1.7.22",
            },
        },
    }


@dataclass
class SimulatedFleet:
    """Node objects per cluster; mutate them to simulate changes."""

    nodes: dict[str, list[dict[str, Any]]]

    def node_list(self, cluster: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "List", "items": self.nodes[cluster]}

    def find(self, cluster: str, name: str) -> dict[str, Any]:
        for node in self.nodes[cluster]:
            if node["metadata"]["name"] == name:
                return node
        raise KeyError(f"{cluster}/{name}")

    def copy(self) -> SimulatedFleet:
        return SimulatedFleet(copy.deepcopy(self.nodes))


class SimulatedNodeRestorer:
    """``ports.remediation.NodeRestorer`` over one simulated cluster. It changes what
    ``adapters/kube/restore.py`` patches on a real Node, and nothing else: the labels it is
    given, and the taints it owns (merged by the same ``merge_taints``). Instance type,
    kubelet version, allocatable and the rest of the node stay as they are: restoring them is
    the infrastructure's job (Flux, the cloud provider), not a Node patch."""

    def __init__(
        self,
        fleet: SimulatedFleet,
        cluster: str,
        *,
        transient: Collection[str] = DEFAULT_TRANSIENT_TAINTS,
    ) -> None:
        self.fleet = fleet
        self.cluster = cluster
        self.transient = frozenset(transient)

    async def patch_labels(self, node: str, labels: Mapping[str, str | None]) -> dict[str, Any]:
        have: dict[str, str] = self.fleet.find(self.cluster, node)["metadata"].setdefault(
            "labels", {}
        )
        for key, value in labels.items():
            if value is None:
                have.pop(key, None)
            else:
                have[key] = value
        return {"cluster": self.cluster, "node": node, "labels": {k: have.get(k) for k in labels}}

    async def patch_taints(
        self,
        node: str,
        taints: Sequence[Taint],
        *,
        replace: Collection[tuple[str, str]] | None = None,
    ) -> dict[str, Any]:
        spec = self.fleet.find(self.cluster, node).setdefault("spec", {})
        current = spec.get("taints") or []
        new = merge_taints(current, taints, replace=replace, transient=self.transient)
        spec["taints"] = new
        return {"cluster": self.cluster, "node": node, "taints": new, "changed": new != current}


# (cluster, provider, pool, instance type, count, labels, taints)
_POOLS: tuple[tuple[str, str, str, str, int, dict[str, str], list[dict[str, str]]], ...] = (
    ("prod-eu-1", "aws", "general", "m5.large", 20, {"team": "platform", "tier": "general"}, []),
    (
        "prod-eu-1",
        "aws",
        "memory",
        "r5.xlarge",
        4,
        {"workload": "memory"},
        [{"key": "workload", "value": "memory", "effect": "NoSchedule"}],
    ),
    (
        "prod-eu-1",
        "aws",
        "gpu",
        "g5.xlarge",
        2,
        {"accelerator": "nvidia"},
        [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
    ),
    (
        "prod-eu-1",
        "aws",
        "system",
        "m5.large",
        2,
        {"role": "system"},
        [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}],
    ),
    ("prod-eu-1", "karpenter", "spot", "c5.xlarge", 16, {"capacity": "spot"}, []),
    (
        "prod-us-1",
        "gcp",
        "system",
        "e2-standard-2",
        3,
        {"role": "system"},
        [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}],
    ),
    (
        "prod-us-1",
        "gcp",
        "general",
        "e2-standard-4",
        24,
        {"team": "platform", "tier": "general"},
        [],
    ),
    (
        "prod-us-1",
        "gcp",
        "batch",
        "n2-standard-8",
        18,
        {"workload": "batch"},
        [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
    ),
    (
        "prod-asia-1",
        "azure",
        "system",
        "Standard_D2s_v5",
        3,
        {"role": "system"},
        [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}],
    ),
    (
        "prod-asia-1",
        "azure",
        "general",
        "Standard_D4s_v5",
        20,
        {"team": "platform", "tier": "general", "region": "asia"},
        [],
    ),
    (
        "prod-asia-1",
        "azure",
        "batch",
        "Standard_F8s_v2",
        10,
        {"workload": "batch"},
        [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
    ),
    (
        "prod-asia-1",
        "azure",
        "spot",
        "Standard_D4s_v5",
        1,
        {"kubernetes.azure.com/scalesetpriority": "spot"},
        [{"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"}],
    ),
    ("prod-asia-1", "azure", "ingress", "Standard_D2s_v5", 2, {"role": "ingress"}, []),
)


def _name(cluster: str, provider: str, pool: str, i: int, rng: random.Random) -> str:
    if provider in ("aws", "karpenter"):
        return f"ip-10-0-{rng.randrange(1, 255)}-{rng.randrange(1, 255)}.eu-west-1.compute.internal"
    if provider == "gcp":
        return f"gke-{cluster}-{pool}-{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}"[:63]
    return f"aks-{pool}-{rng.randrange(10**7, 10**8)}-vmss{i:06x}"


def build_fleet(seed: int = 2026) -> SimulatedFleet:
    """The demo fleet with its planted drift (documented in the README)."""
    rng = random.Random(seed)
    nodes: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for cluster, provider, pool, itype, count, labels, taints in _POOLS:
        zones = _ZONES["aws" if provider == "karpenter" else provider]
        for i in range(count):
            name = _name(cluster, provider, pool, i, rng)
            while name in seen:
                name = _name(cluster, provider, pool, i, rng)
            seen.add(name)
            os_key = "bottlerocket" if pool == "gpu" else None
            nodes.setdefault(cluster, []).append(
                _node(
                    cluster,
                    name,
                    provider,
                    pool,
                    itype,
                    labels,
                    taints,
                    zones[i % 3],
                    os_key=os_key,
                )
            )
    fleet = SimulatedFleet(nodes)
    _plant(fleet)
    return fleet


def _pool_nodes(fleet: SimulatedFleet, cluster: str, pool: str) -> list[dict[str, Any]]:
    return [
        n
        for n in fleet.nodes[cluster]
        if pool in (n["metadata"]["labels"].get(k) for k in _POOL_LABEL.values())
    ]


def _plant(fleet: SimulatedFleet) -> None:
    # Seed 000: someone changed general's instance type in the console: m5.large -> t3.medium.
    incident = _pool_nodes(fleet, "prod-eu-1", "general")[3]
    incident["metadata"]["name"] = "ip-10-0-1-23.eu-west-1.compute.internal"
    incident["metadata"]["labels"]["kubernetes.io/hostname"] = incident["metadata"]["name"]
    _retype(incident, "t3.medium")
    # L1: a scale-up node of prod-eu-1/memory came up without the pool's label.
    del _pool_nodes(fleet, "prod-eu-1", "memory")[3]["metadata"]["labels"]["workload"]
    # L2: a GPU node lost its taint: any pod can now land on a GPU.
    _pool_nodes(fleet, "prod-eu-1", "gpu")[1]["spec"] = {}
    # A cordoned node: the unschedulable taint is transient and must not be reported.
    cordoned = _pool_nodes(fleet, "prod-eu-1", "system")[0]
    cordoned["spec"]["unschedulable"] = True
    cordoned["spec"]["taints"].append(
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    )
    # SPEC (Karpenter): a t3.large outside the NodePool's instance-category requirement.
    _retype(_pool_nodes(fleet, "prod-eu-1", "spot")[5], "t3.large")
    # L4: prod-us-1/general half-way through an upgrade: 6 of 24 nodes still on 1.29.
    for node in _pool_nodes(fleet, "prod-us-1", "general")[:6]:
        node["status"]["nodeInfo"]["kubeletVersion"] = "v1.29.8-gke.1211000"
    # L1: `kubectl label node ... tier=experimental --overwrite` by hand.
    _pool_nodes(fleet, "prod-us-1", "general")[10]["metadata"]["labels"]["tier"] = "experimental"
    # L2: two nodes from a batch scale-up without the dedicated taint.
    for node in _pool_nodes(fleet, "prod-us-1", "batch")[-2:]:
        node["spec"] = {}
    # L3: fragmentation: two nodes of prod-asia-1/general with 25 % less allocatable memory.
    for node in _pool_nodes(fleet, "prod-asia-1", "general")[4:6]:
        node["status"]["allocatable"]["memory"] = "9660378Ki"
    # SPEC osImage: a batch node on Ubuntu in an Azure Linux pool.
    _pool_nodes(fleet, "prod-asia-1", "batch")[2]["status"]["nodeInfo"]["osImage"] = (
        "Ubuntu 22.04.4 LTS"
    )
    # SPEC pool: a node of an agent pool that nobody declared.
    stray = copy.deepcopy(_pool_nodes(fleet, "prod-asia-1", "ingress")[0])
    stray["metadata"]["name"] = "aks-legacy-31415926-vmss000000"
    stray["metadata"]["labels"].update(
        {"kubernetes.azure.com/agentpool": "legacy", "agentpool": "legacy", "role": "legacy"}
    )
    fleet.nodes["prod-asia-1"].append(stray)
    # COUNT: prod-us-1/highmem (min 1) has no node; prod-asia-1/spot (min 3) has one.


def _retype(node: dict[str, Any], itype: str) -> None:
    shape = SHAPES[itype]
    labels = node["metadata"]["labels"]
    labels["node.kubernetes.io/instance-type"] = itype
    labels["beta.kubernetes.io/instance-type"] = itype
    if "karpenter.k8s.aws/instance-category" in labels:
        labels["karpenter.k8s.aws/instance-category"] = shape.category
    node["status"]["allocatable"].update(cpu=shape.cpu, memory=shape.memory, pods=shape.pods)
    node["status"]["capacity"].update(memory=shape.memory, pods=shape.pods)


# --- the demo: the fleet scanned, and the changes it goes through ---------------------------


def demo_desired() -> DesiredRead:
    """The fleet's desired pools, read by the same readers as ``scan``."""
    out = DesiredRead()
    for path, cluster, text in DESIRED_FILES:
        got = read_desired([SourceFile(path, text.encode())], cluster=cluster)
        out.pools.extend(got.pools)
        out.skipped.extend(got.skipped)
        out.files += got.files
    return out


def scan_fleet(fleet: SimulatedFleet, desired: DesiredRead | None = None) -> FleetReport:
    """The fleet's nodes now, diffed as ``scan`` diffs dumps."""
    desired = desired or demo_desired()
    observed = {
        cluster: parse_nodes(f"demo/{cluster}/nodes.json", orjson.dumps(fleet.node_list(cluster)))
        for cluster in fleet.nodes
    }
    return diff_fleet(desired.pools, observed, skipped=desired.skipped)


def scan_demo() -> FleetReport:
    return scan_fleet(build_fleet())


def _any_node(
    fleet: SimulatedFleet, rng: random.Random, cluster: str | None = None
) -> tuple[str, dict[str, Any]]:
    cluster = cluster or rng.choice(sorted(fleet.nodes))
    return cluster, rng.choice(fleet.nodes[cluster])


def label_by_hand(fleet: SimulatedFleet, rng: random.Random) -> str:
    """Someone labels a node by hand."""
    cluster, node = _any_node(fleet, rng)
    node["metadata"]["labels"]["team"] = "payments"
    return (
        f"oncall@example.com: kubectl label node {node['metadata']['name']} team=payments "
        f"--overwrite  ({cluster})"
    )


def drop_taint(fleet: SimulatedFleet, rng: random.Random) -> str:
    """A node re-created without its taint."""
    cluster = rng.choice(sorted(fleet.nodes))
    tainted = [n for n in fleet.nodes[cluster] if n["spec"].get("taints")]
    node = rng.choice(tainted)
    node["spec"]["taints"] = node["spec"]["taints"][1:]
    return f"autoscaler: node {node['metadata']['name']} re-created without its taint ({cluster})"


def console_resize(fleet: SimulatedFleet, rng: random.Random) -> str:
    """An instance type changed in the cloud console (seed 000's incident)."""
    _, node = _any_node(fleet, rng, "prod-eu-1")
    _retype(node, "t3.medium")
    return (
        f"arn:aws:iam::123456789012:user/alice: console changed {node['metadata']['name']} "
        "to t3.medium (prod-eu-1)"
    )


def upgrade(fleet: SimulatedFleet, rng: random.Random) -> str:
    """A provider upgrades three nodes' kubelet."""
    behind = [
        n
        for n in fleet.nodes["prod-us-1"]
        if n["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.29")
    ]
    if not behind:
        return label_by_hand(fleet, rng)
    for node in behind[:3]:
        node["status"]["nodeInfo"]["kubeletVersion"] = "v1.30.5-gke.1014001"
    return f"gke: upgraded {min(3, len(behind))} nodes of prod-us-1/general to v1.30.5"
