"""Google GKE: ``google_container_node_pool``, ``google_container_cluster`` pools and the
terraform-google-modules kubernetes-engine module."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwarden.core.pools import NodePoolSpec, Provider
from fleetwarden.formats.terraform.hcl import Expr, block, blocks, first_unknown, source_text
from fleetwarden.formats.terraform.reading import Reader, module_enabled
from fleetwarden.formats.terraform.scope import Scope

__all__ = ["cluster_pools", "module_pools", "node_pool_pools"]

_ZONE = re.compile(r"[a-z]+-[a-z]+\d+-[a-z]")
_REGION = re.compile(r"[a-z]+-[a-z]+\d+")
# google_container_cluster attributes that describe its implicit default-pool
_GKE_DEFAULT_POOL = (
    ("node_config", "node_config"),
    ("initial_node_count", "initial_node_count"),
    ("version", "node_version"),
)


def node_pool_pools(
    path: str, label: str, body: dict[Any, Any], scope: Scope
) -> list[NodePoolSpec]:
    r = Reader(path, f"google_container_node_pool.{label}", scope)
    if not r.exists(body):
        return []
    cluster = r.cluster(body.get("cluster"), "cluster")
    zones = _gke_zones(r, body, scope.cluster_of(body.get("cluster")))
    return [_gke_pool(r, body, "", label, cluster, zones)]


def cluster_pools(path: str, label: str, body: dict[Any, Any], scope: Scope) -> list[NodePoolSpec]:
    """The cluster's ``node_pool`` blocks; without any, GKE's own ``default-pool`` unless the
    cluster removes it."""
    where = f"google_container_cluster.{label}"
    if not Reader(path, where, scope).exists(body) or body.get("enable_autopilot") is True:
        return []
    inline = body.get("node_pool")
    pools: list[NodePoolSpec] = []
    for i, pool in enumerate(inline if isinstance(inline, list) else ()):
        if isinstance(pool, dict):
            r = Reader(path, where, scope)
            cluster = r.text(body.get("name"), "name", "cluster")
            zones = _gke_zones(r, pool, body)
            pools.append(_gke_pool(r, pool, f"node_pool[{i}].", f"node_pool-{i}", cluster, zones))
    dynamic = any(label == "node_pool" for label, _content in blocks(body, "dynamic", 1))
    if pools or dynamic or scope.resolved(body.get("remove_default_node_pool")) is True:
        return pools
    r = Reader(path, where, scope)
    if isinstance(body.get("remove_default_node_pool"), Expr):
        r.note("count", f"remove_default_node_pool = {body['remove_default_node_pool'].text}")
    cluster = r.text(body.get("name"), "name", "cluster")
    default: dict[Any, Any] = {"name": "default-pool"}
    for pool_attr, cluster_attr in _GKE_DEFAULT_POOL:
        if cluster_attr in body:
            default[pool_attr] = body[cluster_attr]
    return [_gke_pool(r, default, "", "default-pool", cluster, _gke_zones(r, {}, body))]


def _gke_pool(
    r: Reader,
    pool: Mapping[Any, Any],
    at: str,
    stand_in: str,
    cluster: str | None,
    zones: int | None,
) -> NodePoolSpec:
    """A GKE pool (resource or ``node_pool`` block): counts are per zone unless total_*."""
    config = block(pool, "node_config")
    scaling = block(pool, "autoscaling")
    r.dynamic(config, "taint", "taints")
    per_zone = _PerZone(r, zones)
    scaled = f"{at}autoscaling"
    lo = r.count(scaling.get("total_min_node_count"), f"{scaled}.total_min_node_count", "minSize")
    if lo is None:
        lo = per_zone.total(scaling.get("min_node_count"), f"{scaled}.min_node_count", "minSize")
    hi = r.count(scaling.get("total_max_node_count"), f"{scaled}.total_max_node_count", "maxSize")
    if hi is None:
        hi = per_zone.total(scaling.get("max_node_count"), f"{scaled}.max_node_count", "maxSize")
    count_attr = "node_count" if "node_count" in pool else "initial_node_count"
    machine = r.text(config.get("machine_type"), f"{at}node_config.machine_type", "instanceTypes")
    return r.spec(
        Provider.GCP,
        name=r.name(pool, "name", stand_in, prefix="name_prefix"),
        cluster=cluster,
        instance_types=(machine,) if machine else (),
        disk_size_gib=r.count(
            config.get("disk_size_gb"), f"{at}node_config.disk_size_gb", "diskSizeGiB"
        ),
        disk_type=r.text(config.get("disk_type"), f"{at}node_config.disk_type", "diskType"),
        min_size=lo,
        max_size=hi,
        desired_size=per_zone.total(pool.get(count_attr), f"{at}{count_attr}", "desiredSize"),
        labels=r.labels((config.get("labels"), f"{at}node_config.labels")),
        taints=r.taints((config.get("taint"), f"{at}node_config.taint")),
        kubernetes_version=r.text(pool.get("version"), f"{at}version", "kubernetesVersion"),
        os_family=r.os_family(config.get("image_type"), f"{at}node_config.image_type"),
    )


@dataclass(frozen=True, slots=True)
class _PerZone:
    """GKE counts are per zone: a total needs the number of zones, else it is unresolved."""

    reader: Reader
    zones: int | None

    def total(self, raw: Any, attr: str, fact: str) -> int | None:
        count = self.reader.count(raw, attr, fact)
        if count is None:
            return None
        if self.zones is None:
            name = attr.rsplit(".", 1)[-1]
            self.reader.note(fact, f"{name} = {count} per zone; the number of zones is not stated")
            return None
        return count * self.zones


def _gke_zones(r: Reader, pool: Mapping[Any, Any], cluster: Mapping[Any, Any] | None) -> int | None:
    """How many zones a pool spans, when the text states it: the pool's ``node_locations``,
    else the cluster's zone plus its ``node_locations``, else one for a zonal cluster."""
    zones = r.scope.resolved(pool.get("node_locations"))
    if isinstance(zones, list) and zones and first_unknown(zones) is None:
        return len(set(map(str, zones)))
    cluster = cluster or {}
    location = r.scope.resolved(cluster.get("location", pool.get("location")))
    extra = r.scope.resolved(cluster.get("node_locations"))
    stated = isinstance(extra, list) and extra and first_unknown(extra) is None
    if isinstance(location, str) and _ZONE.fullmatch(location):
        return len({location, *map(str, extra)}) if stated else 1
    if isinstance(location, str) and _REGION.fullmatch(location) and stated:
        return len(set(map(str, extra)))
    return None


def module_pools(
    path: str, label: str, module: dict[Any, Any], scope: Scope, remarks: list[str]
) -> list[NodePoolSpec]:
    """terraform-google-modules/kubernetes-engine: ``node_pools`` and ``windows_node_pools``
    lists, with the per-pool maps (``node_pools_labels`` ...) keyed by pool name or ``all``."""
    where = f"module.{label}"
    if not module_enabled(where, module, scope, remarks):
        return []
    labels = scope.resolved(module.get("node_pools_labels", {}))
    taints = scope.resolved(module.get("node_pools_taints", {}))
    pools: list[NodePoolSpec] = []
    for section in ("node_pools", "windows_node_pools"):
        listed = scope.resolved(module.get(section, []))
        if not isinstance(listed, list):
            remarks.append(f"{where}.{section}: {source_text(listed)} cannot be read")
            continue
        for i, pool in enumerate(listed):
            if not isinstance(pool, dict):
                remarks.append(f"{where}.{section}[{i}]: {source_text(pool)} cannot be read")
                continue
            r = Reader(path, f"{where}.{section}[{i}]", scope)
            r.exists(module)
            pools.append(_gke_module_pool(r, module, pool, labels, taints))
    return pools


def _gke_module_pool(
    r: Reader, module: Mapping[Any, Any], pool: Mapping[Any, Any], labels: Any, taints: Any
) -> NodePoolSpec:
    name = r.name(pool, "name", "pool")
    autoscaling = pool.get("autoscaling", True) is not False  # the module's default is true
    per_zone = _PerZone(r, _gke_module_zones(r, module, pool))

    def per_pool(maps: Any, attr: str) -> list[tuple[Any, str]]:
        if not isinstance(maps, dict):
            return [(maps, attr)]
        return [(maps.get(key), f"{attr}.{key}") for key in ("all", name)]

    lo = r.count(pool.get("total_min_count"), "total_min_count", "minSize")
    if lo is None and autoscaling:
        lo = per_zone.total(pool.get("min_count"), "min_count", "minSize")
    hi = r.count(pool.get("total_max_count"), "total_max_count", "maxSize")
    if hi is None and autoscaling:
        hi = per_zone.total(pool.get("max_count"), "max_count", "maxSize")
    count_attr = "node_count" if not autoscaling else "initial_node_count"
    machine = r.text(pool.get("machine_type"), "machine_type", "instanceTypes")
    return r.spec(
        Provider.GCP,
        name=name,
        cluster=r.cluster(module.get("name"), "name"),
        instance_types=(machine,) if machine else (),
        disk_size_gib=r.count(pool.get("disk_size_gb"), "disk_size_gb", "diskSizeGiB"),
        disk_type=r.text(pool.get("disk_type"), "disk_type", "diskType"),
        min_size=lo,
        max_size=hi,
        desired_size=per_zone.total(pool.get(count_attr), count_attr, "desiredSize"),
        labels=r.labels(*per_pool(labels, "node_pools_labels")),
        taints=r.taints(*per_pool(taints, "node_pools_taints")),
        kubernetes_version=r.text(pool.get("version"), "version", "kubernetesVersion"),
        os_family=r.os_family(pool.get("image_type"), "image_type"),
    )


def _gke_module_zones(r: Reader, module: Mapping[Any, Any], pool: Mapping[Any, Any]) -> int | None:
    """The pool's ``node_locations`` ("a,b"), else the module's ``zones`` when listed."""
    locations = r.scope.resolved(pool.get("node_locations"))
    if isinstance(locations, str) and locations.strip():
        return len({z.strip() for z in locations.split(",") if z.strip()})
    zones = r.scope.resolved(module.get("zones"))
    if isinstance(zones, list) and zones and first_unknown(zones) is None:
        return len(set(map(str, zones)))
    return None
