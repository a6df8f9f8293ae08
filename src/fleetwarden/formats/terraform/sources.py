"""Which module a ``module`` block calls: terraform-aws-eks (and its node-group sub-modules), the
terraform-google-modules kubernetes-engine module (and its sub-modules), or Azure/aks/azurerm."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fleetwarden.formats.terraform.aks_module_inputs import AKS_MODULE_INPUTS

__all__ = [
    "eks_module_kind",
    "gke_module_kind",
    "is_aks_module",
    "is_gke_module",
    "is_gke_update_variant",
    "local_module_dir",
]


def eks_module_kind(module: Mapping[Any, Any]) -> str | None:
    """Which part of terraform-aws-eks a module block calls: the cluster module ("cluster") or
    a node-group sub-module ("managed", "self-managed"); None for any other module. The
    module's own examples call it as ``../..``, so a local path counts when it has groups (any
    major's: v17 ``node_groups``/``worker_groups*``, v18+ ``*_node_groups``)."""
    source = module.get("source")
    if not isinstance(source, str):
        return None
    source = _path_of(source)
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


# the kubernetes-engine sub-modules that name each pool ``<name>-<4 hex>`` (a random_id)
_GKE_UPDATE_VARIANTS = (
    "beta-private-cluster-update-variant",
    "private-cluster-update-variant",
    "beta-public-cluster-update-variant",
    "public-cluster-update-variant",
)


def _path_of(source: str) -> str:
    return source.split("?", 1)[0].rstrip("/")  # git sources: drop ?ref=...


def is_gke_module(module: Mapping[Any, Any]) -> bool:
    """The kubernetes-engine module: its registry or repository name, or (a local or git
    copy) a path ending in one of its update-variant sub-modules."""
    source = module.get("source")
    if not isinstance(source, str):
        return False
    return (
        "terraform-google-modules/kubernetes-engine/google" in source
        or "terraform-google-kubernetes-engine" in source
        or _path_of(source).rsplit("/", 1)[-1] in _GKE_UPDATE_VARIANTS
    )


# the kubernetes-engine module and the sub-modules that take its ``node_pools`` list (v5-v44
# variables.tf: ``default = [{ name = "default-node-pool" }]``)
_GKE_POOL_LIST_MODULES = (
    "",  # the root module
    "private-cluster",
    "beta-private-cluster",
    "beta-public-cluster",
    "safer-cluster",
    "safer-cluster-update-variant",
    *_GKE_UPDATE_VARIANTS,
)


def _gke_sub_module(source: str) -> str | None:
    """The sub-module a kubernetes-engine source names ("" for the root module); None when
    the path cannot say (a local copy that is not one of its sub-modules)."""
    path = _path_of(source)
    remote = "terraform-google-modules/kubernetes-engine/google" in source or (
        "terraform-google-kubernetes-engine" in source
    )
    if remote:
        _, sep, sub = path.split("://")[-1].partition("//")
        return sub.removeprefix("modules/").strip("/") if sep else ""
    last = path.rsplit("/", 1)[-1]
    return last if last in _GKE_UPDATE_VARIANTS else None


def gke_module_kind(module: Mapping[Any, Any]) -> str | None:
    """Which part of the kubernetes-engine module a block calls: one that takes a
    ``node_pools`` list ("pools": the root module, the private / beta / safer clusters and
    their update variants), another sub-module ("other": autopilot, gke-standard-cluster,
    gke-node-pool, auth, workload-identity ...), or None for any other module."""
    source = module.get("source")
    if not isinstance(source, str) or not is_gke_module(module):
        return None
    return "pools" if _gke_sub_module(source) in _GKE_POOL_LIST_MODULES else "other"


def is_gke_update_variant(module: Mapping[Any, Any]) -> bool:
    """A kubernetes-engine ``*-update-variant`` sub-module: each pool's real name is
    ``<name>-`` and 4 hex characters Terraform generates."""
    source = module.get("source")
    return (
        is_gke_module(module)
        and isinstance(source, str)
        and _path_of(source).endswith("-update-variant")
    )


# a module block's own arguments, not inputs of the module it calls
_MODULE_META = frozenset({"source", "version", "providers", "depends_on", "count", "for_each"})
# variables every Azure/aks/azurerm release declares (variables.tf, 4.0-11.5)
_AKS_SIGNATURE = frozenset({"prefix", "resource_group_name", "agents_size"})


def is_aks_module(module: Mapping[Any, Any], *, called: frozenset[str] | None = None) -> bool:
    """The Azure/aks/azurerm module (registry, or its repository terraform-azurerm-aks), not one
    of its sub-modules. Its own examples call it as ``../..``; a local path counts when the
    directory it names declares the module's own variables (``called``: the variables its
    files declare, when they are among the files read: then that decides), else when the
    block has its ``agents_*`` inputs or gives ``resource_group_name`` and no input the module
    does not declare (``aks_module_inputs``): a wrapper module has inputs of its own."""
    source = module.get("source")
    if not isinstance(source, str):
        return False
    path = _path_of(source)
    if path.startswith(("./", "../")) or path in (".", ".."):
        if called is not None:
            return called >= _AKS_SIGNATURE
        inputs = {
            k for k in module if isinstance(k, str) and k not in _MODULE_META and k[:2] != "__"
        }
        if any(k.startswith("agents_") for k in inputs):
            return True
        return "resource_group_name" in inputs and inputs <= AKS_MODULE_INPUTS
    registry = path.lower().removeprefix("registry.terraform.io/")
    return registry.lower() == "azure/aks/azurerm" or (
        "terraform-azurerm-aks" in path and "//" not in path.split("://")[-1]
    )


def local_module_dir(file: str, module: Mapping[Any, Any]) -> str | None:
    """The directory a local ``source`` names, relative to the calling file's directory as
    Terraform resolves it (normalised like the paths of the files read); None otherwise."""
    source = module.get("source")
    if not isinstance(source, str):
        return None
    path = _path_of(source)
    if not (path.startswith(("./", "../")) or path in (".", "..")):
        return None
    return os.path.normpath(os.path.join(os.path.dirname(file), path))
