"""Azure AKS: ``azurerm_kubernetes_cluster_node_pool`` and the ``default_node_pool`` block of
``azurerm_kubernetes_cluster`` (azurerm v3 and v4 spellings: ``enable_auto_scaling`` /
``auto_scaling_enabled``, ``enable_node_public_ip`` / ``node_public_ip_enabled`` ...).

Defaults, as desired values with their provenance (azurerm schema, AKS docs):

- count: with autoscaling, ``min_count..max_count`` (``node_count`` is only the initial size);
  without, ``node_count``; a node pool without either gets 0 nodes (azurerm sends 0; a System
  default pool cannot, so there it is left unstated);
- OS: ``os_sku`` unset is Ubuntu for Linux (its release follows Kubernetes: not compared),
  Windows for ``os_type = "Windows"`` (the year is not compared);
- OS disk: unset and managed (azurerm's default ``os_disk_type``), AKS sizes it by vCPUs; only
  1-7 vCPUs (128 GB) is asserted, and only for VM sizes whose vCPU count the name says for sure:
  larger sizes depend on when the pool was created (from July 2022 256/512/1024 GB), an
  ephemeral OS disk or ``kubelet_disk_type = "Temporary"`` is the VM's own storage: not compared;
- ``priority = "Spot"``: AKS labels ``kubernetes.azure.com/scalesetpriority=spot`` and taints
  ``...=spot:NoSchedule``; ``only_critical_addons_enabled``: ``CriticalAddonsOnly=true:NoSchedule``;
- ``vm_size`` unset (azurerm >= 4.32): AKS picks one, not known: not compared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fleetwarden.core.pools import NodePoolSpec, Provisioner, Taint
from fleetwarden.formats.terraform.hcl import blocks
from fleetwarden.formats.terraform.lines import Path
from fleetwarden.formats.terraform.reading import META_IGNORED, Context, Obj, Reader

__all__ = [
    "CRITICAL_TAINT",
    "POOL_IGNORED",
    "default_pool_pools",
    "disk_of",
    "node_pool_pools",
    "os_of",
    "pool_of",
    "vcpus_of",
]

_SPOT_KEY = "kubernetes.azure.com/scalesetpriority"
_SPOT_TAINT = Taint(_SPOT_KEY, "spot", "NoSchedule")
CRITICAL_TAINT = Taint("CriticalAddonsOnly", "true", "NoSchedule")
_NOT_ON_NODE = "not visible on a Node"
_AKS = "AKS"
POOL_IGNORED: dict[str, str] = {
    **META_IGNORED,
    **{
        key: why
        for keys, why in (
            (
                (
                    "vnet_subnet_id",
                    "pod_subnet_id",
                    "node_public_ip_enabled",
                    "enable_node_public_ip",
                    "node_public_ip_prefix_id",
                    "node_network_profile",
                ),
                f"networking: {_NOT_ON_NODE}",
            ),
            (
                (
                    "host_encryption_enabled",
                    "enable_host_encryption",
                    "fips_enabled",
                    "ultra_ssd_enabled",
                    "custom_ca_trust_enabled",
                ),
                f"VM security / disk setting: {_NOT_ON_NODE}",
            ),
            (("eviction_policy", "spot_max_price"), f"Spot eviction: {_NOT_ON_NODE}"),
            (
                (
                    "proximity_placement_group_id",
                    "host_group_id",
                    "capacity_reservation_group_id",
                    "snapshot_id",
                    "gpu_instance",
                    "workload_runtime",
                    "message_of_the_day",
                ),
                f"VM placement / image setting: {_NOT_ON_NODE}",
            ),
            (("tags",), f"Azure tags: {_NOT_ON_NODE}"),
            (
                ("upgrade_settings", "scale_down_mode", "temporary_name_for_rotation", "type"),
                f"scaling / upgrade behaviour: {_NOT_ON_NODE}",
            ),
            (
                ("kubelet_config", "linux_os_config", "windows_profile"),
                "kubelet / OS configuration: not compared",
            ),
            (("zones",), "availability zones: not compared"),
            (("mode",), f"System or User pool: {_NOT_ON_NODE}"),
            (("os_disk_type", "kubelet_disk_type"), "read: whether the OS disk size is compared"),
            (("gpu_driver",), "GPU driver installation: not compared"),
        )
        for key in keys
    },
}


def node_pool_pools(ctx: Context, label: str, body: Mapping[Any, Any]) -> list[NodePoolSpec]:
    """One ``azurerm_kubernetes_cluster_node_pool``."""
    kind = "azurerm_kubernetes_cluster_node_pool"
    r = Reader(ctx, f"{kind}.{label}")
    obj = r.obj(body, ("resource", kind, label), POOL_IGNORED)
    if not r.exists(obj):
        return []
    cluster = r.cluster(obj, "kubernetes_cluster_id")
    return [pool_of(r, obj, label, cluster, None, default_pool=False)]


def default_pool_pools(
    ctx: Context, label: str, body: Mapping[Any, Any], remarks: list[str]
) -> list[NodePoolSpec]:
    """The ``default_node_pool`` of one ``azurerm_kubernetes_cluster``: the block, or the
    ``content`` of a ``dynamic "default_node_pool"`` (whether its ``for_each`` yields it is
    unresolved unless it is a literal list)."""
    kind = "azurerm_kubernetes_cluster"
    base: Path = ("resource", kind, label)
    found: list[tuple[Any, Path, str, tuple[Path, Any] | None]] = []
    block = body.get("default_node_pool")
    if isinstance(block, list) and block and isinstance(block[0], dict):
        found.append((block[0], (*base, "default_node_pool", 0), "default_node_pool", None))
    for i, (name, dyn) in enumerate(blocks(body, "dynamic", 1)):
        content = dyn.get("content") if name == "default_node_pool" else None
        if isinstance(content, list) and content and isinstance(content[0], dict):
            at: Path = (*base, "dynamic", i, name)
            where = f'dynamic "default_node_pool"[{i}]'
            found.append((content[0], (*at, "content", 0), where, (at, dyn)))
    if not found and "agent_pool_profile" in body:
        remarks.append(
            f"{kind}.{label}: agent_pool_profile is azurerm 1.x (default_node_pool since 2.0): "
            "not read, its pool is not compared"
        )
    pools: list[NodePoolSpec] = []
    for content, at, where, dynamic in found:
        r = Reader(ctx, f"{kind}.{label}.{where}")
        root = r.obj(body, base, {}, close=False, label=f"{kind}.{label}")
        if not r.exists(root) or (dynamic and not r.yields(*dynamic, "default_node_pool", most=1)):
            continue
        pool = r.obj(content, at, POOL_IGNORED)
        pools.append(_default_pool(r, root, pool))
    return pools


def _default_pool(r: Reader, root: Obj, pool: Obj) -> NodePoolSpec:
    cluster = r.text(root, "name", "cluster")
    version = None
    if root.has("kubernetes_version"):
        version = r.text(root, "kubernetes_version", "kubernetesVersion", note=False)
    return pool_of(r, pool, "default", cluster, (root, version), default_pool=True)


def pool_of(
    r: Reader,
    obj: Obj,
    stand_in: str,
    cluster: str | None,
    cluster_version: tuple[Obj, str | None] | None,
    *,
    default_pool: bool,
) -> NodePoolSpec:
    name = r.name(obj, "name", stand_in)
    vm_size = r.text(obj, "vm_size", "instanceTypes")
    if not obj.has("vm_size"):
        r.unstated(
            "instanceTypes", "vm_size", "not stated (azurerm >= 4.32): AKS picks a size, not known"
        )
    lo, hi, desired = _counts(r, obj, default_pool)
    labels, taints = _spot(r, obj)
    if obj.has("only_critical_addons_enabled"):
        critical = r.flag(
            obj, "only_critical_addons_enabled", CRITICAL_TAINT.field_name, note=False
        )
        if critical is True:  # AKS adds this taint itself
            taints.append(CRITICAL_TAINT)
            r.compared(obj, "only_critical_addons_enabled", CRITICAL_TAINT.field_name, True)
        elif critical is False:
            obj.view.ignored(("only_critical_addons_enabled",), "false: no taint")
    labels.update(r.labels(obj, "node_labels") or {})
    taints.extend(r.taints(obj, "node_taints") or ())
    family = os_of(r, obj)
    disk = disk_of(r, obj, vm_size)
    disk_type = r.scope.resolved(obj.raw("os_disk_type"))
    pods = r.count(obj, "max_pods", "allocatable.pods")
    version = r.text(obj, "orchestrator_version", "kubernetesVersion")
    if version is None and not obj.has("orchestrator_version"):
        if cluster_version is not None and cluster_version[1] is not None:
            version = cluster_version[1]
            r.compared(cluster_version[0], "kubernetes_version", "kubernetesVersion", version)
        else:
            r.unstated(
                "kubernetesVersion",
                "orchestrator_version",
                "not stated: the cluster's version (not compared)",
            )
    return r.spec(
        Provisioner.AZURE,
        name=name,
        cluster=cluster,
        instance_types=(vm_size,) if vm_size else (),
        disk_size_gib=disk,
        disk_type=disk_type if isinstance(disk_type, str) else None,
        min_size=lo,
        max_size=hi,
        desired_size=desired,
        labels=labels,
        taints=tuple(sorted(set(taints))),
        kubernetes_version=version,
        os_family=family,
        allocatable={"pods": str(pods)} if pods is not None else {},
    )


def _counts(r: Reader, obj: Obj, default_pool: bool) -> tuple[int | None, int | None, int | None]:
    """min..max with autoscaling (v3 ``enable_auto_scaling``, v4 ``auto_scaling_enabled``),
    else ``node_count``; without either, azurerm sends 0."""
    scaling = None
    for key in ("auto_scaling_enabled", "enable_auto_scaling"):
        if obj.has(key):
            scaling = r.flag(obj, key, "minSize")
    lo = r.count(obj, "min_count", "minSize")
    hi = r.count(obj, "max_count", "maxSize")
    desired = r.count(obj, "node_count", "desiredSize")
    if desired is None and not obj.has("node_count") and scaling is not True and lo is None:
        if default_pool:
            r.unstated(
                "desiredSize",
                "node_count",
                "not stated: azurerm sends 0, which AKS refuses for a System pool",
            )
        else:
            desired = 0
            r.default(
                "desiredSize",
                "node_count",
                0,
                "azurerm: without autoscaling or node_count, the pool gets 0 nodes",
            )
    return lo, hi, desired


def _spot(r: Reader, obj: Obj) -> tuple[dict[str, str], list[Taint]]:
    priority = r.text(obj, "priority", f"labels.{_SPOT_KEY}", note=False)
    if priority != "Spot":
        if priority is not None:
            obj.view.ignored(("priority",), f"{priority}: no label or taint")
        return {}, []
    r.compared(obj, "priority", f"labels.{_SPOT_KEY}", priority)
    r.default(
        f"labels.{_SPOT_KEY}",
        f"labels.{_SPOT_KEY}",
        "spot",
        f"{_AKS}: Spot pools are labelled {_SPOT_KEY}=spot",
    )
    r.default(
        _SPOT_TAINT.field_name,
        _SPOT_TAINT.field_name,
        "spot:NoSchedule",
        f"{_AKS}: Spot pools are tainted {_SPOT_KEY}=spot:NoSchedule",
    )
    return {_SPOT_KEY: "spot"}, [_SPOT_TAINT]


def os_of(r: Reader, obj: Obj) -> str | None:
    os_type = r.text(obj, "os_type", "osImage", note=False)
    if obj.has("os_sku"):
        if obj.has("os_type"):
            r.compared(obj, "os_type", "osImage", os_type)
        return r.os_family(obj, "os_sku")
    if os_type is None and obj.has("os_type"):
        return None  # unresolved, noted
    if os_type is not None and os_type.lower() == "windows":
        r.compared(obj, "os_type", "osImage", os_type)
        r.default(
            "osImage",
            "os_sku",
            "Windows",
            f"{_AKS}: the Windows Server year follows Kubernetes (not compared)",
        )
        return "windows"
    if os_type is not None:
        r.compared(obj, "os_type", "osImage", os_type)
    r.default(
        "osImage",
        "os_sku",
        "Ubuntu",
        f"{_AKS}: os_sku Ubuntu for Linux (its release follows Kubernetes: not compared)",
    )
    return "ubuntu"


# Azure VM size names: Standard_<family><vCPUs>[-<constrained vCPUs>]<features>[_<extras>][_v<N>]
_VM_SIZE = re.compile(
    r"^Standard_(?P<family>[A-Z]+)(?P<n>\d+)(?:-(?P<c>\d+))?[a-z]*(?P<rest>(?:_[A-Za-z0-9]+)*)$"
)
# Dv2 / DSv2 sizes do not carry their vCPU count in the name
_D_V2_VCPUS = {1: 1, 2: 2, 3: 4, 4: 8, 5: 16, 11: 2, 12: 4, 13: 8, 14: 16, 15: 20}


def vcpus_of(vm_size: str) -> int | None:
    """vCPUs of an Azure VM size when its name says so for certain, else None."""
    match = _VM_SIZE.match(vm_size)
    if match is None:
        return None
    family, n = match["family"], int(match["n"])
    version = re.search(r"_v(\d+)$", match["rest"] or "")
    major = int(version[1]) if version else 1
    if family in ("D", "DS") and major == 2:
        return _D_V2_VCPUS.get(n)
    if major >= 3 or family == "B" or (major == 2 and family in ("A", "F", "FS", "L", "LS", "M")):
        return int(match["c"]) if match["c"] else n
    return None


def disk_of(r: Reader, obj: Obj, vm_size: str | None) -> int | None:
    size = r.count(obj, "os_disk_size_gb", "diskSizeGiB")
    if size is not None or obj.has("os_disk_size_gb"):
        if size == 0:  # 0: "the default size for the VM size"
            size = None
        else:
            return size
    disk_type = r.text(obj, "os_disk_type", "diskSizeGiB", note=False)
    kubelet_disk = r.text(obj, "kubelet_disk_type", "diskSizeGiB", note=False)
    if disk_type not in (None, "Managed") or (disk_type is None and obj.has("os_disk_type")):
        r.unstated(
            "diskSizeGiB",
            "os_disk_size_gb",
            f"os_disk_type {disk_type}: the VM's own storage (not compared)",
        )
        return None
    if kubelet_disk not in (None, "OS"):
        r.unstated(
            "diskSizeGiB",
            "os_disk_size_gb",
            f"kubelet_disk_type {kubelet_disk}: the kubelet's storage is not the OS disk",
        )
        return None
    vcpus = vcpus_of(vm_size) if vm_size else None
    if vcpus is None:
        why = f"{vm_size}: its vCPU count is not known" if vm_size else "the VM size is not known"
        r.unstated("diskSizeGiB", "os_disk_size_gb", f"{_AKS} sizes the OS disk by vCPUs; {why}")
        return None
    if vcpus >= 8:
        r.unstated(
            "diskSizeGiB",
            "os_disk_size_gb",
            f"{_AKS} sizes the OS disk by vCPUs ({vcpus}): 256 GB or more for pools created from "
            "July 2022, which the files do not say (not compared)",
        )
        return None
    r.default(
        "diskSizeGiB",
        "os_disk_size_gb",
        128,
        f"{_AKS}: a managed OS disk is 128 GB for 1-7 vCPUs ({vm_size}: {vcpus})",
    )
    return 128
