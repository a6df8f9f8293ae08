"""Node objects as the API serves them, built for tests of what a pool's nodes look like."""

from __future__ import annotations

from typing import Any

from fleetwarden.core.nodes import ObservedNode
from fleetwarden.formats.nodes import node_from_object

# ephemeral-storage capacity is the filesystem on the volume: a little below the volume size
FS_SHARE = 0.96


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    instance_type: str | None = None,
    os_image: str = "Amazon Linux 2023.6.20250218",
    kubelet: str = "v1.31.4-eks-2d5f260",
    disk_gib: float | None = 80,
    taints: list[dict[str, str]] | None = None,
    pods: int = 110,
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if instance_type:
        all_labels["node.kubernetes.io/instance-type"] = instance_type
    capacity = {"cpu": "2", "memory": "8006892Ki", "pods": str(pods)}
    if disk_gib is not None:
        capacity["ephemeral-storage"] = f"{int(disk_gib * FS_SHARE * 2**20)}Ki"
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {"taints": taints or []},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "nodeInfo": {"kubeletVersion": kubelet, "osImage": os_image},
        },
    }


def observed(*objects: dict[str, Any]) -> list[ObservedNode]:
    return [node_from_object(o) for o in objects]
