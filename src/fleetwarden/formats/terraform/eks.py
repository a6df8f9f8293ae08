"""AWS EKS: ``aws_eks_node_group`` and the terraform-aws-eks module's node groups."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fleetwarden.core.pools import NodePoolSpec, Provider
from fleetwarden.formats.terraform.hcl import Expr, block, source_text
from fleetwarden.formats.terraform.reading import Reader, module_enabled
from fleetwarden.formats.terraform.scope import Scope
from fleetwarden.formats.terraform.sources import eks_module_kind

__all__ = ["module_pools", "node_group_pools"]

# user data / bootstrap arguments that register taints the reader cannot see
_TAINTS_IN_USER_DATA = re.compile(r"node-taints|register-with-taints")
_USER_DATA_KEYS = (
    "bootstrap_extra_args",
    "pre_bootstrap_user_data",
    "post_bootstrap_user_data",
    "cloudinit_pre_nodeadm",
    "cloudinit_post_nodeadm",
)


def node_group_pools(
    path: str, label: str, body: dict[Any, Any], scope: Scope
) -> list[NodePoolSpec]:
    r = Reader(path, f"aws_eks_node_group.{label}", scope)
    if not r.exists(body):
        return []
    scaling = block(body, "scaling_config")
    r.dynamic(body, "taint", "taints")
    return [
        r.spec(
            Provider.AWS,
            name=r.name(body, "node_group_name", label, prefix="node_group_name_prefix"),
            cluster=r.cluster(body.get("cluster_name"), "cluster_name"),
            instance_types=r.texts(body.get("instance_types"), "instance_types", "instanceTypes"),
            disk_size_gib=r.count(body.get("disk_size"), "disk_size", "diskSizeGiB"),
            min_size=r.count(scaling.get("min_size"), "scaling_config.min_size", "minSize"),
            max_size=r.count(scaling.get("max_size"), "scaling_config.max_size", "maxSize"),
            desired_size=r.count(
                scaling.get("desired_size"), "scaling_config.desired_size", "desiredSize"
            ),
            labels=r.labels((body.get("labels"), "labels")),
            taints=r.taints((body.get("taint"), "taint")),
            kubernetes_version=r.text(body.get("version"), "version", "kubernetesVersion"),
            os_family=r.os_family(body.get("ami_type"), "ami_type"),
        )
    ]


def module_pools(
    path: str, label: str, module: dict[Any, Any], scope: Scope, remarks: list[str]
) -> list[NodePoolSpec]:
    kind = eks_module_kind(module)
    where = f"module.{label}"
    if not module_enabled(where, module, scope, remarks):
        return []
    if kind != "cluster":  # a node-group sub-module is itself one group
        r = Reader(path, where, scope)
        r.exists(module)
        cluster = r.cluster(module.get("cluster_name"), "cluster_name")
        return _eks_module_group(r, module, label, cluster, None, managed=kind == "managed")
    cluster_attr = "name" if "name" in module else "cluster_name"
    version_attr = "kubernetes_version" if "kubernetes_version" in module else "cluster_version"
    pools: list[NodePoolSpec] = []
    for section, managed in (
        ("eks_managed_node_groups", True),
        ("self_managed_node_groups", False),
    ):
        if section not in module:
            continue
        defaults_attr = section.replace("_groups", "_group_defaults")
        groups = scope.resolved(module[section])
        defaults = scope.resolved(module.get(defaults_attr, {}))
        if not isinstance(groups, dict) or not isinstance(defaults, dict):
            unknown = groups if not isinstance(groups, dict) else defaults
            remarks.append(f"{where}.{section}: {source_text(unknown)} cannot be read")
            continue
        for key, group in groups.items():
            if not isinstance(group, dict):
                remarks.append(f"{where}.{section}.{key}: {source_text(group)} cannot be read")
                continue
            merged = {**defaults, **group}
            if merged.get("create") is False:
                remarks.append(f"{where}.{section}.{key}: create = false")
                continue
            r = Reader(path, f"{where}.{section}.{key}", scope)
            r.exists(module)
            cluster = r.cluster(module.get(cluster_attr), cluster_attr)
            version = r.text(module.get(version_attr), version_attr, "kubernetesVersion")
            pools.extend(_eks_module_group(r, merged, str(key), cluster, version, managed=managed))
    return pools


def _eks_module_group(
    r: Reader,
    group: Mapping[Any, Any],
    stand_in: str,
    cluster: str | None,
    cluster_version: str | None,
    *,
    managed: bool,
) -> list[NodePoolSpec]:
    """One terraform-aws-eks node group (from the cluster module or a sub-module)."""
    name = r.name(group, "name", stand_in)
    if group.get("use_name_prefix", True) is not False:  # the module's default is true
        r.note("name", f'"{name}-" + a suffix Terraform generates (use_name_prefix)')
        r.name_prefix = f"{name}-"
    if managed:
        types = r.texts(group.get("instance_types"), "instance_types", "instanceTypes")
    else:
        single = r.text(group.get("instance_type"), "instance_type", "instanceTypes")
        types = (single,) if single else ()
    disk_size, disk_type = _eks_module_disk(r, group, managed=managed)
    user_data = " ".join(str(group.get(k, "")) for k in _USER_DATA_KEYS)
    if _TAINTS_IN_USER_DATA.search(user_data):
        r.note("taints", "taints set in user data / bootstrap arguments")
    version_attr = "kubernetes_version" if "kubernetes_version" in group else "cluster_version"
    version = r.text(group.get(version_attr), version_attr, "kubernetesVersion")
    # v19 names the OS in ``platform``, later versions in ``ami_type`` (also with a custom AMI)
    family = r.os_family(group.get("platform"), "platform")
    family = family or r.os_family(group.get("ami_type"), "ami_type")
    return [
        r.spec(
            Provider.AWS,
            name=name,
            cluster=cluster,
            instance_types=types,
            disk_size_gib=disk_size,
            disk_type=disk_type,
            min_size=r.count(group.get("min_size"), "min_size", "minSize"),
            max_size=r.count(group.get("max_size"), "max_size", "maxSize"),
            desired_size=r.count(group.get("desired_size"), "desired_size", "desiredSize"),
            labels=r.labels((group.get("labels"), "labels")) if managed else {},
            taints=r.taints((group.get("taints"), "taints")) if managed else (),
            kubernetes_version=version or cluster_version,
            os_family=family,
        )
    ]


def _eks_module_disk(
    r: Reader, group: Mapping[Any, Any], *, managed: bool
) -> tuple[int | None, str | None]:
    """Disk size and type: from the one block device mapping, or ``disk_size`` (which the
    module only applies when it does not make its own launch template)."""
    if "block_device_mappings" in group:
        mappings = r.scope.resolved(group["block_device_mappings"])
        devices = list(mappings.values()) if isinstance(mappings, dict) else mappings
        if not isinstance(devices, list) or len(devices) != 1:
            if isinstance(devices, Expr):
                r.note("diskSizeGiB", devices.text)
            elif devices:
                r.note("diskSizeGiB", f"block_device_mappings with {len(devices)} devices")
            return None, None
        ebs = block(devices[0], "ebs") if isinstance(devices[0], dict) else {}
        attr = "block_device_mappings.ebs"
        return (
            r.count(ebs.get("volume_size"), f"{attr}.volume_size", "diskSizeGiB"),
            r.text(ebs.get("volume_type"), f"{attr}.volume_type", "diskType"),
        )
    if managed and group.get("use_custom_launch_template") is False:
        return r.count(group.get("disk_size"), "disk_size", "diskSizeGiB"), None
    return None, None
