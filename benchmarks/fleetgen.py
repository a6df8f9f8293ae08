"""Synthetic fleets for benchmarks: realistic `kubectl get nodes -o json` dumps + desired pools.

Nodes look like real EKS nodes (labels, annotations, conditions, images, nodeInfo; ~4 KB of JSON
each). Drift is planted at fixed rates and returned, so a benchmark can check what was found.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

POOLS = [
    # name, instance type, cpu, memory, pods, labels, taints
    (
        "general",
        "m5.large",
        "1930m",
        "7220184Ki",
        "29",
        {"team": "platform", "tier": "general"},
        [],
    ),
    (
        "memory",
        "r5.xlarge",
        "3920m",
        "31548348Ki",
        "58",
        {"workload": "memory"},
        [{"key": "workload", "value": "memory", "effect": "NoSchedule"}],
    ),
    (
        "compute",
        "c5.2xlarge",
        "7910m",
        "14919524Ki",
        "58",
        {"workload": "compute"},
        [{"key": "workload", "value": "compute", "effect": "NoSchedule"}],
    ),
    (
        "system",
        "m5.large",
        "1930m",
        "7220184Ki",
        "29",
        {"role": "system"},
        [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}],
    ),
    (
        "batch",
        "m5.2xlarge",
        "7910m",
        "31457664Ki",
        "58",
        {"workload": "batch"},
        [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
    ),
]
VERSION = "v1.30.4-eks-a737599"
OLD_VERSION = "v1.29.8-eks-a737599"


def make_pools(count: int = len(POOLS)) -> list[tuple[Any, ...]]:
    """``count`` pools: the five above, then copies of them named ``<name>-<k>`` (a 200-pool
    cluster is five kinds of pool in 40 variants, as large EKS clusters are laid out)."""
    if count <= len(POOLS):
        return POOLS[:count]
    out = []
    for k in range(count):
        name, *rest = POOLS[k % len(POOLS)]
        out.append((f"{name}-{k // len(POOLS):03d}", *rest))
    return out


def desired_yaml(clusters: list[str], pools: list[tuple[Any, ...]] | None = None) -> str:
    lines = ["apiVersion: fleetwarden.io/v1alpha1", "kind: NodePools", "pools:"]
    for name, itype, _cpu, _mem, _pods, labels, taints in pools or POOLS:
        lines += [
            f"  {name}:",
            "    provider: aws",
            f"    instanceTypes: [{itype}]",
            "    minSize: 1",
            "    maxSize: 1000",
            '    kubernetesVersion: "1.30"',
            "    osImage: AmazonLinux2023",
            f"    labels: {json.dumps(labels)}",
            f"    taints: {json.dumps(taints)}",
        ]
    lines.append("clusters:")
    lines += [f"  {c}: {{}}" for c in clusters]
    return "\n".join(lines) + "\n"


def node(cluster: str, i: int, pool: tuple[Any, ...], rng: random.Random) -> dict[str, Any]:
    name_, itype, cpu, mem, pods, labels, taints = pool
    ip = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
    name = f"ip-{ip.replace('.', '-')}-{i}.{cluster}.compute.internal"
    zone = f"eu-west-1{'abc'[i % 3]}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"{rng.getrandbits(128):032x}",
            "resourceVersion": str(rng.randrange(10**6, 10**8)),
            "creationTimestamp": "2026-11-01T10:00:00Z",
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": ip,
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": f"i-{i:017x}"}),
            },
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": itype,
                "beta.kubernetes.io/os": "linux",
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
                "eks.amazonaws.com/nodegroup": name_,
                "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
                "eks.amazonaws.com/sourceLaunchTemplateId": "lt-0123456789abcdef0",
                "failure-domain.beta.kubernetes.io/region": "eu-west-1",
                "failure-domain.beta.kubernetes.io/zone": zone,
                "k8s.io/cloud-provider-aws": "a3bb0e5c9e7d4b7f",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": itype,
                "topology.ebs.csi.aws.com/zone": zone,
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": zone,
                **labels,
            },
        },
        "spec": {"providerID": f"aws:///{zone}/i-{i:017x}", "taints": [dict(t) for t in taints]},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
                {"type": "InternalDNS", "address": name},
            ],
            "allocatable": {
                "cpu": cpu,
                "ephemeral-storage": "95491281146",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": mem,
                "pods": pods,
            },
            "capacity": {
                "cpu": str(int(cpu[:-1]) // 1000 + 1),
                "ephemeral-storage": "104845292Ki",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": mem,
                "pods": pods,
            },
            "conditions": [
                {
                    "type": t,
                    "status": "False" if t != "Ready" else "True",
                    "lastHeartbeatTime": "2026-11-29T10:00:00Z",
                    "lastTransitionTime": "2026-11-01T10:00:00Z",
                    "reason": f"Kubelet{t}",
                    "message": f"kubelet condition {t}",
                }
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": [
                {
                    "names": [
                        f"602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/img{k}@sha256:"
                        f"{rng.getrandbits(256):064x}",
                        f"602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/img{k}:v1.{k}.0",
                    ],
                    "sizeBytes": rng.randrange(10**7, 10**9),
                }
                for k in range(8)
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"{rng.getrandbits(128):032x}",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.1.109-118.189.amzn2023.x86_64",
                "kubeProxyVersion": VERSION,
                "kubeletVersion": VERSION,
                "machineID": f"{rng.getrandbits(128):032x}",
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.5.20240916",
                "systemUUID": f"{rng.getrandbits(128):032x}",
            },
        },
    }


def plant(n: dict[str, Any], rng: random.Random, pool: tuple[Any, ...] | None = None) -> str | None:
    """Plant one kind of drift on ~2 % of nodes; return its kind (for checking)."""
    roll = rng.random()
    labels = n["metadata"]["labels"]
    if roll < 0.006:
        if pool is None:
            pool = POOLS_BY_NAME[labels["eks.amazonaws.com/nodegroup"]]
        key = next(k for k in pool[5])
        labels[key] = "hand-edited"
        return "L1"
    if roll < 0.010 and n["spec"]["taints"]:
        n["spec"]["taints"] = []
        return "L2"
    if roll < 0.015:
        n["status"]["nodeInfo"]["kubeletVersion"] = OLD_VERSION
        return "L4"
    if roll < 0.017:
        labels["node.kubernetes.io/instance-type"] = "t3.medium"
        return "SPEC"
    return None


POOLS_BY_NAME = {p[0]: p for p in POOLS}


def write_fleet(
    out: Path, *, clusters: int, nodes_per_cluster: int, seed: int = 1, pools: int = len(POOLS)
) -> dict[str, Any]:
    """Write desired.yaml and nodes/<cluster>.json; return counts of planted drift.

    Each dump is written item by item, laid out as ``kubectl get nodes -o json`` prints it
    (4-space indent), so a 100,000-node cluster never sits in memory whole."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    (out / "nodes").mkdir(exist_ok=True)
    names = [f"cluster-{c:04d}" for c in range(clusters)]
    kinds = make_pools(pools)
    (out / "desired.yaml").write_text(desired_yaml(names, kinds))
    planted: dict[str, int] = {}
    planted_nodes: dict[str, list[str]] = {}
    for cluster in names:
        with (out / "nodes" / f"{cluster}.json").open("w") as fh:
            # kubectl's key order (apiVersion, items, kind, metadata): the kind comes last
            fh.write('{\n    "apiVersion": "v1",\n    "items": [')
            for i in range(nodes_per_cluster):
                pool = kinds[i % len(kinds)]
                n = node(cluster, i, pool, rng)
                kind = plant(n, rng, pool)
                if kind:
                    planted[kind] = planted.get(kind, 0) + 1
                    planted_nodes.setdefault(kind, []).append(n["metadata"]["name"])
                item = json.dumps(n, indent=4).replace("\n", "\n        ")
                fh.write(("," if i else "") + "\n        " + item)
            fh.write('\n    ],\n    "kind": "List",\n')
            fh.write('    "metadata": {\n        "resourceVersion": ""\n    }\n}\n')
    return {
        "clusters": clusters,
        "nodes": clusters * nodes_per_cluster,
        "pools": [p[0] for p in kinds],
        "planted": planted,
        "planted_nodes": planted_nodes,
    }
