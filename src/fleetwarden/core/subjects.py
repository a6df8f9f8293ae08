"""What a finding is about: a node pool, a workload object, or an application.

``Finding.pool`` is one string for all three (a pool name, an object reference such as
``Deployment/shop/api``, or nothing); ``Finding.subject`` says which it is, typed, so code that
needs the kind of subject reads it here instead of parsing the string. ``NodePoolRef`` is also
the one spelling of a ``(cluster, pool)`` pair.

JSON (``Finding.to_json()["subject"]``):
``{"kind": "nodePool", "cluster": ..., "pool": ...}``,
``{"kind": "workload", "cluster": ..., "namespace": ..., "objectKind": ..., "name": ...}``,
``{"kind": "app", "cluster": ..., "name": ...}``. Values only, pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["AppRef", "NodePoolRef", "Subject", "WorkloadRef"]


@dataclass(frozen=True, slots=True)
class NodePoolRef:
    """One node pool of one cluster. ``pool`` None: the cluster's nodes as a whole (nodes of no
    desired pool, or a desired cluster nobody observed)."""

    KIND: ClassVar[str] = "nodePool"

    cluster: str
    pool: str | None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.KIND, "cluster": self.cluster, "pool": self.pool}


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """One Kubernetes object of an application (a Deployment, StatefulSet, DaemonSet, ConfigMap,
    Secret or HorizontalPodAutoscaler) in one cluster. ``namespace`` None: not stated."""

    KIND: ClassVar[str] = "workload"

    cluster: str
    namespace: str | None
    kind: str
    name: str

    @property
    def ref(self) -> str:
        """The object's reference as findings spell it in ``pool``: ``Kind/namespace/name``."""
        return f"{self.kind}/{self.namespace or '-'}/{self.name}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.KIND,
            "cluster": self.cluster,
            "namespace": self.namespace,
            "objectKind": self.kind,
            "name": self.name,
        }


@dataclass(frozen=True, slots=True)
class AppRef:
    """One application (an Argo CD Application), in one cluster or (``cluster`` None) in all."""

    KIND: ClassVar[str] = "app"

    name: str
    cluster: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.KIND, "cluster": self.cluster, "name": self.name}


Subject = NodePoolRef | WorkloadRef | AppRef
