"""Azure AKS: ``azurerm_kubernetes_cluster_node_pool`` and ``default_node_pool``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetwarden.core.pools import NodePoolSpec, Provider, Taint
from fleetwarden.formats.terraform.hcl import block
from fleetwarden.formats.terraform.reading import Reader
from fleetwarden.formats.terraform.scope import Scope

__all__ = ["default_pool_pools", "node_pool_pools"]


def node_pool_pools(
    path: str, label: str, body: dict[Any, Any], scope: Scope
) -> list[NodePoolSpec]:
    r = Reader(path, f"azurerm_kubernetes_cluster_node_pool.{label}", scope)
    if not r.exists(body):
        return []
    cluster = r.cluster(body.get("kubernetes_cluster_id"), "kubernetes_cluster_id")
    return [_aks_pool(r, body, "", label, cluster, None)]


def default_pool_pools(
    path: str, label: str, body: dict[Any, Any], scope: Scope
) -> list[NodePoolSpec]:
    pool = block(body, "default_node_pool")
    r = Reader(path, f"azurerm_kubernetes_cluster.{label}", scope)
    if not pool or not r.exists(body):
        return []
    cluster = r.text(body.get("name"), "name", "cluster")
    version = r.text(body.get("kubernetes_version"), "kubernetes_version", "kubernetesVersion")
    return [_aks_pool(r, pool, "default_node_pool.", "default", cluster, version)]


def _aks_pool(
    r: Reader,
    pool: Mapping[Any, Any],
    at: str,
    stand_in: str,
    cluster: str | None,
    cluster_version: str | None,
) -> NodePoolSpec:
    vm_size = r.text(pool.get("vm_size"), f"{at}vm_size", "instanceTypes")
    taints = r.taints((pool.get("node_taints"), f"{at}node_taints"))
    if pool.get("only_critical_addons_enabled") is True:  # AKS adds this taint itself
        taints = (*taints, Taint("CriticalAddonsOnly", "true", "NoSchedule"))
    family_attr = "os_sku" if "os_sku" in pool else "os_type"
    version = r.text(
        pool.get("orchestrator_version"), f"{at}orchestrator_version", "kubernetesVersion"
    )
    return r.spec(
        Provider.AZURE,
        name=r.name(pool, "name", stand_in),
        cluster=cluster,
        instance_types=(vm_size,) if vm_size else (),
        disk_size_gib=r.count(pool.get("os_disk_size_gb"), f"{at}os_disk_size_gb", "diskSizeGiB"),
        disk_type=r.text(pool.get("os_disk_type"), f"{at}os_disk_type", "diskType"),
        min_size=r.count(pool.get("min_count"), f"{at}min_count", "minSize"),
        max_size=r.count(pool.get("max_count"), f"{at}max_count", "maxSize"),
        desired_size=r.count(pool.get("node_count"), f"{at}node_count", "desiredSize"),
        labels=r.labels((pool.get("node_labels"), f"{at}node_labels")),
        taints=tuple(sorted(set(taints))),
        kubernetes_version=version or cluster_version,
        os_family=r.os_family(pool.get(family_attr), f"{at}{family_attr}"),
    )
