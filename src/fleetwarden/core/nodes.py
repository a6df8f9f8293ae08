"""Observed nodes (from ``kubectl get nodes`` or a watch) and how they map to pools."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fleetwarden.core.pools import Taint

__all__ = [
    "CONTROL_PLANE_LABELS",
    "INSTANCE_TYPE_LABELS",
    "POOL_LABELS",
    "ObservedNode",
    "pool_of",
]

# Provider labels that name a node's pool, in the order they are consulted.
POOL_LABELS: tuple[str, ...] = (
    "eks.amazonaws.com/nodegroup",
    "alpha.eksctl.io/nodegroup-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/provisioner-name",  # Karpenter v1alpha5
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "cloud.google.com/gke-nodepool",
    "cluster.x-k8s.io/deployment-name",
    "cluster.x-k8s.io/pool-name",
    "doks.digitalocean.com/node-pool",
    "node.kubernetes.io/pool",  # a generic label some installers set
)

INSTANCE_TYPE_LABELS: tuple[str, ...] = (
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
)

CONTROL_PLANE_LABELS: tuple[str, ...] = (
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
)


@dataclass(frozen=True, slots=True)
class ObservedNode:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    kubelet_version: str | None = None
    os_image: str | None = None
    allocatable: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False

    @property
    def instance_type(self) -> str | None:
        for key in INSTANCE_TYPE_LABELS:
            value = self.labels.get(key)
            if value:
                return value
        return None

    @property
    def is_control_plane(self) -> bool:
        labels = self.labels
        for key in CONTROL_PLANE_LABELS:  # noqa: SIM110 (any() of a generator: slower, per node)
            if key in labels:
                return True
        return False


def pool_of(node: ObservedNode, *, pool_labels: Sequence[str] = POOL_LABELS) -> str | None:
    """The pool a node belongs to, read from the first pool label it carries."""
    labels = node.labels
    for key in pool_labels:
        value = labels.get(key)
        if value:
            return value
    return None
