"""The Azure/aks/azurerm module (terraform-azurerm-aks v4-v11): its default node pool, made of
the ``agents_*`` inputs, and the pools of its ``node_pools`` map (v6+).

Defaults, from the module's ``variables.tf`` (the same from v4 to v11): ``agents_pool_name``
"nodepool", ``agents_size`` Standard_D2s_v3, ``agents_count`` 2 (without autoscaling:
``enable_auto_scaling`` up to v10, ``auto_scaling_enabled`` from v11, both false),
``os_disk_size_gb`` 50, ``os_disk_type`` Managed; ``os_sku`` unset is AKS's Ubuntu. The cluster is
``cluster_name``, else ``<prefix>-aks`` (v7+: ``trim("${prefix}-aks", "-")``, so "aks" for the
default empty prefix; a ``cluster_name_random_suffix`` makes it unknown).

``node_pools`` values take ``azurerm_kubernetes_cluster_node_pool``'s argument names (the module
passes them on; its ``optional()`` defaults are the provider's), so each is read as that resource
(``aks``). Their real names: as given in v6; the name and 4 generated characters from v7 (v8+:
unless ``create_before_destroy = false``): such a pool claims the node pools named so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fleetwarden.core.pools import NodePoolSpec, Provisioner, Taint
from fleetwarden.formats.terraform import aks
from fleetwarden.formats.terraform.eks_majors import constraint_majors
from fleetwarden.formats.terraform.hcl import source_text
from fleetwarden.formats.terraform.lines import Path
from fleetwarden.formats.terraform.reading import Context, Obj, Reader
from fleetwarden.formats.terraform.reading import module_enabled as _enabled

__all__ = ["module_pools"]

_ORIGIN = "Azure/aks/azurerm"
_NOT_ON_NODE = "not visible on a Node"
# module inputs of the default pool that are never compared, with the reason
_DEFAULT_POOL_IGNORED: dict[str, str] = {
    **{
        key: why
        for keys, why in (
            (
                (
                    "vnet_subnet_id",
                    "vnet_subnet",
                    "pod_subnet_id",
                    "pod_subnet",
                    "enable_node_public_ip",
                    "node_public_ip_enabled",
                    "agents_proximity_placement_group_id",
                ),
                f"networking / placement: {_NOT_ON_NODE}",
            ),
            (
                (
                    "enable_host_encryption",
                    "host_encryption_enabled",
                    "default_node_pool_fips_enabled",
                    "ultra_ssd_enabled",
                    "snapshot_id",
                ),
                f"VM security / disk setting: {_NOT_ON_NODE}",
            ),
            (("agents_tags",), f"Azure tags: {_NOT_ON_NODE}"),
            (
                (
                    "agents_type",
                    "scale_down_mode",
                    "temporary_name_for_rotation",
                    "agents_pool_max_surge",
                    "agents_pool_drain_timeout_in_minutes",
                    "agents_pool_node_soak_duration_in_minutes",
                    "agents_pool_undrainable_node_behavior",
                ),
                f"scaling / upgrade behaviour: {_NOT_ON_NODE}",
            ),
            (
                (
                    "agents_pool_kubelet_configs",
                    "agents_pool_linux_os_configs",
                    "agents_pool_local_dns_config",
                ),
                "kubelet / OS configuration: not compared",
            ),
            (("agents_availability_zones",), "availability zones: not compared"),
            (("os_disk_type",), "read: whether the OS disk size is compared"),
        )
        for key in keys
    },
}
# the module's own keys of a node_pools value, beside the resource's arguments
_NODE_POOL_IGNORED: dict[str, str] = {
    **aks.POOL_IGNORED,
    "vnet_subnet": f"networking: {_NOT_ON_NODE}",
    "pod_subnet": f"networking: {_NOT_ON_NODE}",
    "create_before_destroy": "read: whether the name gets a generated suffix",
}
_DEFAULT_POOL_INPUTS = (
    "agents_",
    "enable_auto_scaling",
    "auto_scaling_enabled",
    "os_disk_size_gb",
    "os_sku",
    "orchestrator_version",
    "only_critical_addons_enabled",
    *_DEFAULT_POOL_IGNORED,
)


def module_pools(
    ctx: Context, label: str, module: Mapping[Any, Any], remarks: list[str]
) -> list[NodePoolSpec]:
    """The module's default node pool and each value of its ``node_pools`` map."""
    where = f"module.{label}"
    if not _enabled(where, module, ctx.scope, remarks):
        return []
    base: Path = ("module", label)
    pools = [_default_pool(ctx, label, module)]
    listed = ctx.scope.resolved(module.get("node_pools", {}))
    if not isinstance(listed, dict):
        # pools exist but cannot be told apart: one pool of unknown name says so (a scan lists
        # it as not compared, with the expression), beside the default pool
        r = Reader(ctx, f"{where}.node_pools")
        root = r.obj(module, base, {}, close=False, label=where)
        r.unresolve(root, "node_pools", "name", source_text(listed))
        pools.append(r.spec(Provisioner.AZURE, name="node_pools", cluster=_cluster(r, root)))
        return pools
    for key, value in listed.items():
        r = Reader(ctx, f"{where}.node_pools[{json.dumps(str(key))}]")
        root = r.obj(module, base, {}, close=False, label=where)
        if not isinstance(value, dict):
            raise r.error(root, ("node_pools", str(key)), "expected a node pool object")
        r.exists(root)
        obj = r.obj(value, (*base, "node_pools", str(key)), _NODE_POOL_IGNORED)
        cluster = _cluster(r, root)
        _suffix(r, root, obj)
        pools.append(aks.pool_of(r, obj, str(key), cluster, _version(r, root), default_pool=False))
    return pools


def _origin(root: Obj) -> tuple[str, list[int] | None]:
    version = root.raw("version")
    majors = constraint_majors(version) if isinstance(version, str) else None
    shown = f' (version "{version}")' if isinstance(version, str) else " (version not pinned)"
    return f"{_ORIGIN}{shown}", majors


def _cluster(r: Reader, root: Obj) -> str | None:
    """``cluster_name``, else ``<prefix>-aks`` (trimmed of "-": v7+), unless a random suffix."""
    suffix = r.flag(root, "cluster_name_random_suffix", "cluster", note=False)
    if suffix is True or (suffix is None and root.has("cluster_name_random_suffix")):
        r.unresolve(root, "cluster_name_random_suffix", "cluster", "a random suffix")
        return None
    if root.has("cluster_name"):
        return r.text(root, "cluster_name", "cluster")
    prefix = r.text(root, "prefix", "cluster", note=False)
    if prefix is None and root.has("prefix"):
        return None  # unresolved, noted
    name = f"{prefix or ''}-aks".strip("-") or "aks"
    if root.has("prefix"):
        r.compared(root, "prefix", "cluster", name)
    else:
        r.default("cluster", "cluster_name", name, f"{_origin(root)[0]}: prefix unset: {name}")
    return name


def _version(r: Reader, root: Obj) -> tuple[Obj, str | None]:
    version = None
    if root.has("kubernetes_version"):
        version = r.text(root, "kubernetes_version", "kubernetesVersion", note=False)
    return root, version


def _suffix(r: Reader, root: Obj, obj: Obj) -> None:
    """v7+ name each pool ``<name>`` and 4 generated characters (v8+: unless
    ``create_before_destroy = false``); v6 as given; unpinned: the newest."""
    origin, majors = _origin(root)
    before = r.flag(obj, "create_before_destroy", "name", note=False)
    if before is False:
        obj.view.ignored(("create_before_destroy",), "false: the pool keeps its name")
        return
    if before is None and obj.has("create_before_destroy"):
        return  # unresolved, noted: the name may or may not carry a suffix
    if majors is not None and max(majors) <= 6:
        return
    name = r.scope.resolved(obj.raw("name"))
    if isinstance(name, str):
        r.note("name", f"{origin}: {json.dumps(name)} and 4 characters Terraform generates")
        r.name_prefix = name


def _default_pool(ctx: Context, label: str, module: Mapping[Any, Any]) -> NodePoolSpec:
    """The cluster's ``default_node_pool``, from the ``agents_*`` inputs and the module's
    defaults."""
    where = f"module.{label}"
    r = Reader(ctx, f"{where}.default_node_pool")
    base: Path = ("module", label)
    root = r.obj(module, base, {}, close=False, label=where)
    inputs = {
        k: v for k, v in module.items() if isinstance(k, str) and k.startswith(_DEFAULT_POOL_INPUTS)
    }
    obj = r.obj(inputs, base, _DEFAULT_POOL_IGNORED)
    r.exists(root)
    origin, _majors = _origin(root)
    cluster = _cluster(r, root)
    name = "nodepool"
    if obj.has("agents_pool_name"):
        name = r.name(obj, "agents_pool_name", name)
    else:
        r.default("name", "agents_pool_name", name, f"{origin}: agents_pool_name {name}")
    vm_size = r.text(obj, "agents_size", "instanceTypes")
    if not obj.has("agents_size"):
        vm_size = "Standard_D2s_v3"
        r.default("instanceTypes", "agents_size", vm_size, f"{origin}: agents_size {vm_size}")
    lo, hi, desired = _counts(r, obj, origin)
    taints: list[Taint] = []
    critical = aks.CRITICAL_TAINT.field_name
    if r.flag(obj, "only_critical_addons_enabled", critical, note=False) is True:
        taints.append(aks.CRITICAL_TAINT)  # AKS adds this taint itself
        r.compared(obj, "only_critical_addons_enabled", critical, True)
    elif obj.has("only_critical_addons_enabled"):
        r.ignore(obj, "only_critical_addons_enabled", "false or unresolved: no taint asserted")
    labels = dict(r.labels(obj, "agents_labels") or {})
    taints.extend(r.taints(obj, "agents_taints") or ())
    family = aks.os_of(r, obj)
    disk = None
    if obj.has("os_disk_size_gb"):
        disk = aks.disk_of(r, obj, vm_size)
    elif r.scope.resolved(obj.raw("os_disk_type")) in (None, "Managed"):
        disk = 50
        r.default("diskSizeGiB", "os_disk_size_gb", 50, f"{origin}: os_disk_size_gb 50")
    else:
        disk = aks.disk_of(r, obj, vm_size)
    pods = r.count(obj, "agents_max_pods", "allocatable.pods")
    version = r.text(obj, "orchestrator_version", "kubernetesVersion")
    if version is None and not obj.has("orchestrator_version"):
        _root, version = _version(r, root)
        if version is not None:
            r.compared(root, "kubernetes_version", "kubernetesVersion", version)
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
        disk_type=None,
        min_size=lo,
        max_size=hi,
        desired_size=desired,
        labels=labels,
        taints=tuple(sorted(set(taints))),
        kubernetes_version=version,
        os_family=family,
        allocatable={"pods": str(pods)} if pods is not None else {},
    )


def _counts(r: Reader, obj: Obj, origin: str) -> tuple[int | None, int | None, int | None]:
    """min..max with autoscaling, else ``agents_count`` (the module's default 2)."""
    scaling: bool | None = False
    for key in ("auto_scaling_enabled", "enable_auto_scaling"):
        if obj.has(key):
            scaling = r.flag(obj, key, "minSize")
    if scaling is None:  # unresolved: the counts read, which of them applies is not known
        for key in ("agents_min_count", "agents_max_count", "agents_count"):
            if obj.has(key):
                r.unresolve(obj, key, "count", "whether autoscaling is on is not resolved")
        return None, None, None
    if scaling:
        r.ignore(obj, "agents_count", "the initial size only: autoscaling sets the count")
        lo = r.count(obj, "agents_min_count", "minSize")
        hi = r.count(obj, "agents_max_count", "maxSize")
        return lo, hi, None
    for key in ("agents_min_count", "agents_max_count"):
        r.ignore(obj, key, "no effect without autoscaling")
    desired = r.count(obj, "agents_count", "desiredSize")
    if not obj.has("agents_count"):
        desired = 2
        r.default("desiredSize", "agents_count", 2, f"{origin}: agents_count 2")
    return None, None, desired
