"""Which module a ``module`` block calls: terraform-aws-eks (and its node-group sub-modules) or
the terraform-google-modules kubernetes-engine module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["eks_module_kind", "is_gke_module"]


def eks_module_kind(module: Mapping[Any, Any]) -> str | None:
    """Which part of terraform-aws-eks a module block calls: the cluster module ("cluster") or
    a node-group sub-module ("managed", "self-managed"); None for any other module. The
    module's own examples call it as ``../..``, so a local path counts when it has groups (any
    major's: v17 ``node_groups``/``worker_groups*``, v18+ ``*_node_groups``)."""
    source = module.get("source")
    if not isinstance(source, str):
        return None
    source = source.split("?", 1)[0].rstrip("/")  # git sources: drop ?ref=...
    local = source.startswith(("./", "../"))
    ours = local or "terraform-aws-modules/eks/aws" in source or "terraform-aws-eks" in source
    if not ours:
        return None
    if source.endswith("modules/eks-managed-node-group"):
        return "managed"
    if source.endswith("modules/self-managed-node-group"):
        return "self-managed"
    if "//" in source.split("://")[-1] and not local:  # another sub-module of the registry
        return None
    groups = (
        "node_groups",  # v17
        "worker_groups",
        "worker_groups_launch_template",
        "eks_managed_node_groups",
        "self_managed_node_groups",
        "compute_config",  # EKS Auto Mode's built-in pools (v21; v20: cluster_compute_config)
        "cluster_compute_config",
    )
    if local and not any(g in module for g in groups):
        return None
    return "cluster"


def is_gke_module(module: Mapping[Any, Any]) -> bool:
    source = module.get("source")
    return isinstance(source, str) and (
        "terraform-google-modules/kubernetes-engine/google" in source
        or "terraform-google-kubernetes-engine" in source
    )
