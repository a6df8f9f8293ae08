"""The terraform-google-modules kubernetes-engine module: its ``node_pools`` /
``windows_node_pools`` lists, its cluster's own ``default-pool``, and the ``gke-node-pool`` and
``gke-standard-cluster`` sub-modules (v38+). Each pool is read with ``gke``'s GKE rules (zones,
per-zone counts, GKE's own taints); the defaults are the module's, per major, each with its
provenance.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from fleetwarden.core import osfamilies
from fleetwarden.core.pools import NodePoolSpec, Provisioner, Taint
from fleetwarden.formats.terraform.eks_majors import constraint_majors
from fleetwarden.formats.terraform.gke import (
    _DISK_GB,
    _MACHINE,
    _auto_taints,
    _autoscaling,
    _Counts,
    _initial,
    _PerZone,
    _pool,
    _resource_zones,
    _Shape,
    _spot,
    _text_or_none,
    _Zones,
)
from fleetwarden.formats.terraform.gke_ignored import (
    _MAP_REASONS,
    _MODULE_POOL_IGNORED,
    _PROVIDER,
    _STANDARD_CLUSTER_IGNORED,
    _SUB_MODULE_IGNORED,
)
from fleetwarden.formats.terraform.hcl import Expr, first_unknown, source_text
from fleetwarden.formats.terraform.lines import Path
from fleetwarden.formats.terraform.reading import Aside, Context, Obj, Reader, module_enabled
from fleetwarden.formats.terraform.scope import Scope
from fleetwarden.formats.terraform.sources import gke_module_kind, is_gke_update_variant

__all__ = ["module_pools", "standard_cluster_pools", "sub_module_pools"]

_STANDARD_CLUSTER_SUB = re.compile(r"//modules/gke-standard-cluster/?(\?|$)")
_NODE_POOL_SUB = re.compile(r"//modules/gke-node-pool/?(\?|$)")
_DEFAULT_MODULE_POOL = "default-node-pool"  # kubernetes-engine variables.tf, node_pools (v5-v44)
# the sub-modules whose cluster has no default-pool (modules/safer-cluster/main.tf, v10-v44:
# remove_default_node_pool = true)
_SAFER = re.compile(r"//modules/safer-cluster(-update-variant)?/?(\?|$)")


# -- the kubernetes-engine module ---------------------------------------------------------------


def module_pools(
    ctx: Context, label: str, module: Mapping[Any, Any], remarks: list[str]
) -> list[NodePoolSpec]:
    """terraform-google-modules/kubernetes-engine: ``node_pools`` and ``windows_node_pools``
    lists, with the per-pool maps (``node_pools_labels`` ...) keyed by pool name or ``all``."""
    where = f"module.{label}"
    if not module_enabled(where, module, ctx.scope, remarks):
        return []
    if gke_module_kind(module) == "other" and _NODE_POOL_SUB.search(str(module.get("source"))):
        return sub_module_pools(ctx, label, module)
    if gke_module_kind(module) == "other" and _STANDARD_CLUSTER_SUB.search(
        str(module.get("source"))
    ):
        return standard_cluster_pools(ctx, label, module, remarks)
    pools: list[NodePoolSpec] = []
    suffixed = is_gke_update_variant(module)
    for section in ("node_pools", "windows_node_pools"):
        implicit = section == "node_pools" and section not in module
        if implicit and gke_module_kind(module) == "pools":
            # the module's own default: one pool of its defaults, named default-node-pool
            listed: Any = [{}]
        else:
            listed = ctx.scope.resolved(module.get(section, []))
        if not isinstance(listed, list):
            remarks.append(f"{where}.{section}: {source_text(listed)} cannot be read")
            continue
        for i, pool in enumerate(listed):
            if not isinstance(pool, dict):
                remarks.append(f"{where}.{section}[{i}]: {source_text(pool)} cannot be read")
                continue
            r = Reader(ctx, f"{where}.{section}[{i}]")
            root = r.obj(module, ("module", label), {}, label=where, close=False)
            obj = r.obj(pool, ("module", label, section, i), _MODULE_POOL_IGNORED)
            r.exists(root)
            windows = section == "windows_node_pools"
            pools.append(
                _module_pool(r, root, obj, windows=windows, suffixed=suffixed, implicit=implicit)
            )
    if gke_module_kind(module) == "pools" and not _SAFER.search(str(module.get("source"))):
        pools.extend(_module_default_pool(ctx, label, module))
    return pools


def _module_default_pool(ctx: Context, label: str, module: Mapping[Any, Any]) -> list[NodePoolSpec]:
    """The ``default-pool`` the module's ``google_container_cluster`` declares in a
    ``node_pool`` block (``cluster.tf``, v5-v44, every sub-module that takes ``node_pools``
    but the safer clusters, which set ``remove_default_node_pool = true``): it exists unless
    ``remove_default_node_pool`` (default false), with ``initial_node_count`` (default 0) nodes
    per zone. Its node_config: from v17.2, ``machine_type`` and ``image_type`` of
    ``node_pools[0]`` (else e2-medium and COS_CONTAINERD, COS up to v18); before, none (GKE's
    defaults); never a disk size (GKE's 100 GB), labels or taints. The module ignores later
    changes to it (``lifecycle { ignore_changes = [node_pool, initial_node_count] }``): what
    the files say is what it was created with."""
    where = f"module.{label}"
    removed = ctx.scope.resolved(module.get("remove_default_node_pool"))
    if removed is True or removed == "true":  # Terraform converts "true" to a bool
        return []
    r = Reader(ctx, f"{where} default-pool")
    root = r.obj(module, ("module", label), {}, label=where, close=False)
    if isinstance(removed, Expr):
        r.unresolve(root, "remove_default_node_pool", "count", removed.text)
    elif root.has("remove_default_node_pool"):
        r.flag(root, "remove_default_node_pool", "count")
    major = _module_major(root)
    origin = "terraform-google-modules/kubernetes-engine " + (
        f"v{major}" if major is not None else "(version not pinned: the newest)"
    )
    cluster = r.cluster(root, "name")
    zones = _module_zones(r, root, r.obj({}, ("module", label), {}, close=False))
    per_zone = _PerZone(r, zones)
    if root.has("initial_node_count"):
        count = r.count(root, "initial_node_count", "desiredSize", note=False)
        desired = per_zone.total(root, ("initial_node_count",), "desiredSize", count)
    else:
        desired = per_zone.default(
            "desiredSize", "initial_node_count", 0, f"{origin}: initial_node_count 0"
        )
    head = _head_pool(r, root, label)
    machine = _default_pool_setting(r, head, "machine_type", "instanceTypes", _MACHINE, major)
    fallback = "COS" if major is not None and major <= 18 else "COS_CONTAINERD"
    image = _default_pool_setting(r, head, "image_type", "osImage", fallback, major)
    family = osfamilies.family_of_setting(image) if image is not None else None
    r.default(
        "diskSizeGiB",
        "node_config.disk_size_gb",
        _DISK_GB,
        f"{_PROVIDER}: disk_size_gb 100 (the module sets no disk size on default-pool)",
    )
    _auto_taints(r, family, machine, False, False)
    pods = None
    if root.has("default_max_pods_per_node"):
        pods = r.count(root, "default_max_pods_per_node", "allocatable.pods")
    r.unstated("kubernetesVersion", "node_version", "the cluster's version (not compared)")
    return [
        r.spec(
            Provisioner.GCP,
            name="default-pool",
            cluster=cluster,
            instance_types=(machine,) if machine else (),
            disk_size_gib=_DISK_GB,
            desired_size=desired,
            os_family=family,
            allocatable={"pods": str(pods)} if pods is not None else {},
        )
    ]


def _head_pool(r: Reader, root: Obj, label: str) -> Obj | None:
    """``node_pools[0]``, whose settings the module copies onto default-pool (its default
    list when ``node_pools`` is not set: ``{}``); None when the list is not known."""
    raw = root.raw("node_pools")
    listed = r.scope.resolved(raw) if raw is not None else [{}]
    if isinstance(listed, list) and not listed:
        return r.obj({}, ("module", label), {}, close=False)  # v44: no pools, no head
    if not isinstance(listed, list) or not isinstance(listed[0], dict):
        for fact in ("instanceTypes", "osImage"):
            r.unresolve(root, "node_pools", fact, f"node_pools[0]: {source_text(listed)}")
        return None
    at: Path = ("module", label, "node_pools", 0)
    return r.obj(listed[0], at, {}, label=f"module.{label}.node_pools[0]", close=False)


def _default_pool_setting(
    r: Reader, head: Obj | None, key: str, fact: str, fallback: str, major: int | None
) -> str | None:
    """``key`` of default-pool's node_config: ``node_pools[0]``'s, else ``fallback`` (v17.2+),
    or GKE's default before v17.2 (e2-medium, COS; v17 with a stated value: either, so not
    compared). An image setting whose OS family is not known is ignored, said so."""
    module = "terraform-google-modules/kubernetes-engine"
    if head is None:
        return None
    if major is not None and major < 17:
        if major < 10 and key == "machine_type":
            r.unstated(fact, key, f"{module} v{major}: GKE's default when the cluster was created")
            return None
        gke = _MACHINE if key == "machine_type" else "COS"
        why = f"{_PROVIDER}: {key} {gke} ({module} v{major} sets none on default-pool)"
        r.default(fact, f"node_config.{key}", gke, why)
        return gke
    if head.has(key) and major == 17:
        why = f"{module} v17: from v17.2 node_pools[0].{key}, before GKE's default: not compared"
        r.unstated(fact, key, why)
        return None
    if head.has(key):
        value = r.text(head, key, fact, note=False)
        if value is None:
            return None
        if key == "image_type" and osfamilies.family_of_setting(value) is None:
            head.view.ignored((key,), f"unknown image setting {value!r}: not compared")
            return None
        r.compared(head, key, fact, value)
        return value
    version = f"v{major}" if major is not None else "(version not pinned: the newest)"
    why = f"{module} {version}: default-pool {key} {fallback}"
    r.default(fact, f"node_config.{key}", fallback, why)
    return fallback


def _module_major(module: Obj) -> int | None:
    version = module.raw("version")
    found = constraint_majors(version) if isinstance(version, str) else None
    return found[0] if found is not None else None


def _module_pool(
    r: Reader, root: Obj, obj: Obj, *, windows: bool, suffixed: bool, implicit: bool = False
) -> NodePoolSpec:
    """One map of ``node_pools`` (``implicit``: the module's default list, not stated)."""
    major = _module_major(root)
    known = major is None or major >= 10
    origin = "terraform-google-modules/kubernetes-engine " + (
        f"v{major}" if major is not None else "(version not pinned: the newest)"
    )
    if implicit:
        name = _DEFAULT_MODULE_POOL
        why = f"{origin}: node_pools not set: its default, one pool named {name}"
        r.default("name", "node_pools", name, why)
    else:
        name = r.name(obj, "name", "pool")
    if suffixed and (implicit or obj.has("name")) and r.name_known:
        # the update-variant modules name the pool by a random_id: "<name>-" + 2 bytes in hex
        r.note("name", f'"{name}-" + 4 hex characters Terraform generates (update-variant module)')
        r.name_prefix = f"{name}-"
    cluster = r.cluster(root, "name")
    autoscaling = r.flag(obj, "autoscaling", "count")
    if autoscaling is None and not obj.has("autoscaling"):
        autoscaling = True
    zones = _module_zones(r, root, obj)
    per_zone = _PerZone(r, zones)
    lo = hi = None
    desired = None
    if autoscaling is not False:
        lo = _module_count(r, obj, per_zone, "total_min_count", "min_count", "minSize", 1, origin)
        hi = _module_count(r, obj, per_zone, "total_max_count", "max_count", "maxSize", 100, origin)
        if obj.has("initial_node_count"):
            count = r.count(obj, "initial_node_count", "desiredSize", note=False)
            desired = per_zone.total(obj, ("initial_node_count",), "desiredSize", count)
        r.ignore(obj, "node_count", "no effect with autoscaling (initial_node_count is used)")
    else:
        if obj.has("node_count"):
            count = r.count(obj, "node_count", "desiredSize", note=False)
            desired = per_zone.total(obj, ("node_count",), "desiredSize", count)
        else:
            desired = per_zone.default("desiredSize", "node_count", 1, f"{origin}: node_count 1")
        for key in (
            "min_count",
            "max_count",
            "total_min_count",
            "total_max_count",
            "initial_node_count",
        ):
            r.ignore(obj, key, "no effect with autoscaling = false")
    machine = r.text(obj, "machine_type", "instanceTypes")
    if machine is None and not obj.has("machine_type") and known:
        machine = _MACHINE
        r.default("instanceTypes", "machine_type", _MACHINE, f"{origin}: machine_type e2-medium")
    disk = r.count(obj, "disk_size_gb", "diskSizeGiB")
    local_ssd = r.count(
        obj, "local_ssd_ephemeral_storage_count", "diskSizeGiB", note=False
    ) or r.count(obj, "local_ssd_ephemeral_count", "diskSizeGiB", note=False)
    for key in ("local_ssd_ephemeral_storage_count", "local_ssd_ephemeral_count"):
        if obj.has(key):
            why = "local SSDs for ephemeral storage: the disk size is not compared"
            obj.view.ignored((key,), why)
    if local_ssd:
        if disk is not None:
            obj.view.ignored(("disk_size_gb",), "ephemeral storage is on local SSDs: not compared")
        disk = None
        r.unstated("diskSizeGiB", "disk_size_gb", "ephemeral storage on local SSDs: not compared")
    elif disk is None and not obj.has("disk_size_gb") and known:
        disk = _DISK_GB
        r.default("diskSizeGiB", "disk_size_gb", _DISK_GB, f"{origin}: disk_size_gb 100")
    family = r.os_family(obj, "image_type") if obj.has("image_type") else None
    if not obj.has("image_type"):
        family = "cos"
        default_image = "COS" if major is not None and major <= 18 else "COS_CONTAINERD"
        r.default("osImage", "image_type", default_image, f"{origin}: image_type {default_image}")
    for attr, fact in (("node_pools_labels", "labels"), ("node_pools_taints", "taints")):
        whole = r.scope.resolved(root.raw(attr))
        if isinstance(whole, Expr):  # the per-pool maps are not known: nor their facts
            r.unresolve(root, attr, fact, whole.text)
    labels = _module_labels(r, root, name, cluster, origin)
    labels.update(_spot(r, obj, ()))
    taints: list[Taint] = []
    for key in ("all", name):
        if root.has(("node_pools_taints", key)):
            taints.extend(r.taints(root, ("node_pools_taints", key)) or ())
    _module_maps(r, root, name)
    gpu = bool(obj.has("accelerator_count") and obj.raw("accelerator_count") != 0)
    _auto_taints(
        r,
        family if not windows else family or "windows",
        machine,
        gpu,
        obj.raw("sandbox_enabled") is True,
    )
    pods = r.count(obj, "max_pods_per_node", "allocatable.pods")
    if pods is None and not obj.has("max_pods_per_node") and root.has("default_max_pods_per_node"):
        pods = r.count(root, "default_max_pods_per_node", "allocatable.pods")
    version = _module_version(r, root, obj)
    return r.spec(
        Provisioner.GCP,
        name=name,
        cluster=cluster,
        instance_types=(machine,) if machine else (),
        disk_size_gib=disk,
        disk_type=_text_or_none(r.scope.resolved(obj.raw("disk_type"))),
        min_size=lo,
        max_size=hi,
        desired_size=desired,
        labels=labels,
        taints=tuple(sorted(set(taints))),
        kubernetes_version=version,
        os_family=family,
        allocatable={"pods": str(pods)} if pods is not None else {},
    )


def _module_count(
    r: Reader,
    obj: Obj,
    per_zone: _PerZone,
    total_key: str,
    key: str,
    fact: str,
    fallback: int,
    origin: str,
) -> int | None:
    if obj.has(total_key):
        if obj.has(key):
            obj.view.ignored((key,), f"no effect: {total_key} is set")
        return r.count(obj, total_key, fact)
    if obj.has(key):
        count = r.count(obj, key, fact, note=False)
        return per_zone.total(obj, (key,), fact, count)
    return per_zone.default(fact, key, fallback, f"{origin}: {key} {fallback}")


def _module_zones(r: Reader, root: Obj, obj: Obj) -> _Zones:
    """The pool's ``node_locations`` ("a,b"), else the module's ``zones``: all of them for a
    zonal cluster (``regional = false``), the listed ones for a regional cluster."""
    locations = r.text(obj, "node_locations", "zones", note=False)
    if locations is not None and locations.strip():
        count = len({z.strip() for z in locations.split(",") if z.strip()})
        return _Zones(count, "node_locations", [(obj, ("node_locations",))])
    if obj.has("node_locations"):
        return _Zones(None, "node_locations is not resolved")
    regional = r.flag(root, "regional", "zones", note=False)
    if regional is None and root.has("regional"):
        return _Zones(None, "regional is not resolved")
    raw = root.raw("zones")
    zones = r.scope.resolved(raw) if raw is not None else None
    uses = [(root, (key,)) for key in ("regional", "zones") if root.has(key)]
    if not isinstance(zones, list):
        if raw is not None and not isinstance(zones, list):
            r.unresolve(root, "zones", "zones", source_text(zones))
        if regional is False:
            return _Zones(None, "a zonal cluster whose zones are not resolved")
        return _Zones(None, "a regional cluster: the module picks 3 zones of the region at random")
    if regional is False:
        if not zones:
            return _Zones(None, "a zonal cluster without zones")
        known = [z for z in zones if not isinstance(z, Expr)]
        distinct = len(set(map(str, known))) + (len(zones) - len(known))
        return _Zones(distinct, "a zonal cluster: every zone listed in zones", uses)
    if zones and first_unknown(zones) is None:
        return _Zones(len(set(map(str, zones))), "a regional cluster's zones", uses)
    return _Zones(None, "a regional cluster whose zones are not listed (or not resolved)")


def _module_labels(
    r: Reader, root: Obj, name: str, cluster: str | None, origin: str
) -> dict[str, str]:
    """The labels the module always adds (unless ``default_values`` says not), then the
    ``all`` and per-pool maps of ``node_pools_labels`` (later wins)."""
    labels: dict[str, str] = {}
    switches = r.scope.resolved(root.raw(("node_pools_labels", "default_values")))
    for key, value in (("cluster_name", cluster), ("node_pool", name)):
        switch = switches.get(key, True) if isinstance(switches, dict) else True
        if switch is False:
            continue
        if value is None:
            r.note(
                f"labels.{key}", f"the module's {key} label: its value (the name) is not resolved"
            )
            r.unstated(f"labels.{key}", key, "the module adds it; its value is not resolved")
            continue
        labels[key] = value
        r.default(f"labels.{key}", key, value, f"{origin}: the label it adds to every pool")
    if root.has(("node_pools_labels", "default_values")):
        r.compared(root, ("node_pools_labels", "default_values"), "labels", switches)
    for key in ("all", name):
        if root.has(("node_pools_labels", key)):
            labels.update(r.labels(root, ("node_pools_labels", key)) or {})
    return labels


def _module_maps(r: Reader, root: Obj, name: str) -> None:
    """The module's other per-pool maps, for this pool: noted as ignored."""
    for attr in root.body:
        if not isinstance(attr, str) or not attr.startswith("node_pools_"):
            continue
        if attr in ("node_pools_labels", "node_pools_taints"):
            continue
        why = _MAP_REASONS.get(attr, "node OS / kubelet configuration: not compared")
        for key in ("all", name):
            if root.has((attr, key)) or root.raw((attr, key)) == {}:
                root.view.ignored((attr, key), why)


def _module_version(r: Reader, root: Obj, obj: Obj) -> str | None:
    """A pool's version counts only without auto-upgrade (the module's default is
    ``regional || release_channel != UNSPECIFIED``): else nodes follow the cluster."""
    upgrade = r.flag(obj, "auto_upgrade", "kubernetesVersion", note=False)
    if upgrade is None and not obj.has("auto_upgrade"):
        regional = r.scope.resolved(root.raw("regional"))
        channel = r.scope.resolved(root.raw("release_channel"))
        upgrade = not (regional is False and channel == "UNSPECIFIED")  # the module's default
    if upgrade is not False:
        r.ignore(obj, "auto_upgrade", "auto-upgrade: the version follows the cluster")
        r.ignore(obj, "version", "no effect: the pool auto-upgrades with the cluster")
        r.unstated("kubernetesVersion", "version", "auto-upgraded with the cluster: not compared")
        return None
    r.ignore(obj, "auto_upgrade", "false: the pool keeps its version")
    if obj.has("version"):
        return r.text(obj, "version", "kubernetesVersion")
    r.unstated("kubernetesVersion", "version", "not stated: the cluster's version (not compared)")
    return None


# -- the gke-node-pool sub-module (v38+) ----------------------------------------------------------

_NODE_POOL_MODULE = "terraform-google-modules/kubernetes-engine gke-node-pool"


def sub_module_pools(ctx: Context, label: str, module: Mapping[Any, Any]) -> list[NodePoolSpec]:
    """``modules/gke-node-pool`` (v38+): one ``google_container_node_pool`` whose inputs are
    the resource's attributes, ``node_config`` and ``autoscaling`` as objects and the version
    as ``kubernetes_version``. Its ``variables.tf`` defaults (v38-v44, unchanged): ``node_count``
    1 and ``autoscaling`` min 1 / max 100 per zone, ``node_config`` e2-medium, 100 GB,
    COS_CONTAINERD (an object given in its place replaces it: GKE's defaults, the same values,
    fill what it leaves unset), ``management`` auto-upgrade on (the version then follows the
    cluster). No labels are added. ``initial_node_count`` beside a non-zero ``node_count`` is
    refused, as the Google provider refuses it."""
    where = f"module.{label}"
    r = Reader(ctx, where)
    module = _objects_resolved(ctx.scope, module, ("node_config", "autoscaling", "management"))
    obj = r.obj(module, ("module", label), _SUB_MODULE_IGNORED, label=where)
    major = _module_major(obj)
    if major is not None and major < 38:
        raise r.error(obj, "version", f"the gke-node-pool sub-module exists from v38, not v{major}")
    if not r.exists(obj):
        return []
    version = f"v{major}" if major is not None else "(version not pinned: the newest)"
    origin = f"{_NODE_POOL_MODULE} {version}"
    # an object given for node_config replaces the module's default object: GKE's defaults
    defaults = _PROVIDER if "node_config" in module else f"{origin}: node_config default"
    shape = _Shape(
        ("node_config",),
        ("autoscaling",),
        defaults,
        counts=functools.partial(_sub_module_counts, origin=origin),
        version=_sub_module_version,
    )
    cluster = r.cluster(obj, "cluster")
    target = ctx.scope.cluster_of(obj.raw("cluster"))
    zones = _resource_zones(r, obj, target)
    return [_pool(r, obj, "gke-node-pool", cluster, zones, shape=shape)]


def _sub_module_counts(r: Reader, obj: Obj, per_zone: _PerZone, *, origin: str) -> _Counts:
    """Autoscaling (the module's default min 1 / max 100 per zone unless ``autoscaling`` is
    given; ``null`` turns it off) and the count (``node_count``, default 1, which the module
    passes even beside autoscaling)."""
    module = origin
    scaling = obj.raw("autoscaling")
    if isinstance(scaling, Expr):  # not known: nor whether the pool autoscales
        lo = hi = None
        for fact in ("minSize", "maxSize"):
            r.unresolve(obj, "autoscaling", fact, scaling.text)
    elif "autoscaling" not in obj.body:
        at, why = "autoscaling.", f"{module}: autoscaling"
        lo = per_zone.default("minSize", f"{at}min_node_count", 1, f"{why} min_node_count 1")
        hi = per_zone.default("maxSize", f"{at}max_node_count", 100, f"{why} max_node_count 100")
    else:
        lo, hi = _autoscaling(r, obj, per_zone, ("autoscaling",))
        for key in ("min_node_count", "max_node_count"):
            if obj.has(("autoscaling", f"total_{key}")) and obj.has(("autoscaling", key)):
                why = f"no effect: total_{key} is set (the module passes null)"
                obj.view.ignored(("autoscaling", key), why)
    initial = r.scope.resolved(obj.raw("initial_node_count"))
    count = r.scope.resolved(obj.raw("node_count")) if "node_count" in obj.body else 1
    if _nonzero(initial) and _nonzero(count):
        stated = "node_count" if "node_count" in obj.body else "node_count (the module's default 1)"
        raise r.error(
            obj,
            "initial_node_count",
            f"the Google provider refuses initial_node_count beside {stated}: "
            "set node_count = null to use initial_node_count",
        )
    if "node_count" not in obj.body:
        if obj.has("initial_node_count"):
            obj.view.ignored(("initial_node_count",), "0: node_count is used")
        return lo, hi, per_zone.default("desiredSize", "node_count", 1, f"{module}: node_count 1")
    return lo, hi, _initial(r, obj, per_zone, False)


def _nonzero(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value != 0


def _sub_module_version(r: Reader, obj: Obj) -> str | None:
    """``kubernetes_version`` counts only without auto-upgrade (``management``'s default, and
    GKE's when the module passes null): else the nodes follow the cluster."""
    if "management" not in obj.body:
        upgrade: bool | None = True
    elif obj.has("management") and obj.has(("management", "auto_upgrade")):
        upgrade = r.flag(obj, ("management", "auto_upgrade"), "kubernetesVersion")
    else:
        upgrade = True if not isinstance(obj.raw("management"), Expr) else None
    if upgrade is False:
        version = r.text(obj, "kubernetes_version", "kubernetesVersion")
        if not obj.has("kubernetes_version"):
            r.unstated(
                "kubernetesVersion",
                "kubernetes_version",
                "not stated: the cluster's version (not compared)",
            )
        return version
    why = "auto-upgraded with the cluster (management.auto_upgrade, default true): not compared"
    if upgrade is None:
        r.unresolve(obj, "management", "kubernetesVersion", source_text(obj.raw("management")))
        why = "management is not resolved: whether the pool auto-upgrades is not known"
    r.ignore(obj, "kubernetes_version", why)
    r.unstated("kubernetesVersion", "kubernetes_version", why)
    return None


def _objects_resolved(
    scope: Scope, module: Mapping[Any, Any], keys: tuple[str, ...]
) -> Mapping[Any, Any]:
    """The module block with its object inputs ``keys`` replaced by their values where a
    reference names a known one (``node_config = local.node_config``), so that their attributes
    are read as if written in place; what is not known stays the expression."""
    out = dict(module)
    for key in keys:
        value = scope.resolved(module[key]) if key in module else None
        if isinstance(value, dict | Expr):
            out[key] = value
    return out


# -- the gke-standard-cluster sub-module (v38+) ---------------------------------------------------

_STANDARD_MODULE = "terraform-google-modules/kubernetes-engine gke-standard-cluster"
_MAX_PODS = 110  # variables.tf default_max_pods_per_node (v38-v44), and GKE's own default
# GKE's answer to a cluster created with no node pool and no initial nodes
_NO_NODES = "GKE refuses it (Cluster.initial_node_count must be greater than zero)"


def standard_cluster_pools(
    ctx: Context, label: str, module: Mapping[Any, Any], remarks: list[str]
) -> list[NodePoolSpec]:
    """``modules/gke-standard-cluster`` (v38+): one ``google_container_cluster`` whose inputs
    are the resource's attributes, ``node_config`` an object and ``node_pool`` a list of
    objects. Its pool is GKE's ``default-pool``, which exists unless
    ``remove_default_node_pool`` (the module's default: true), read as the resource's:
    ``initial_node_count`` nodes per zone (default 0, with which GKE refuses to create the
    cluster: the count is then not known), ``node_config`` (default null: GKE's e2-medium,
    100 GB, COS_CONTAINERD fill what it leaves unset), ``default_max_pods_per_node`` (default
    110) as the nodes' allocatable pods; the module sets no management for it, so it
    auto-upgrades (GKE's default) and ``node_version`` is not compared. The module ignores
    later changes of ``initial_node_count`` and ``node_pool`` (``lifecycle``): what the files
    say is what the cluster was created with.

    ``node_pool``: every release so far (v38.0.0-v44.2.0) sets each block's ``version`` from
    ``node_pool.value.version``, an attribute the variable's object type does not have (it
    declares ``kubernetes_version``), so Terraform refuses any pool in the list ("Unsupported
    attribute"): an error here as well, naming the way that works (the gke-node-pool
    sub-module)."""
    where = f"module.{label}"
    r = Reader(ctx, where)
    module = _objects_resolved(ctx.scope, module, ("node_config",))
    obj = r.obj(module, ("module", label), _STANDARD_CLUSTER_IGNORED, label=where)
    major = _module_major(obj)
    if major is not None and major < 38:
        raise r.error(
            obj, "version", f"the gke-standard-cluster sub-module exists from v38, not v{major}"
        )
    _standard_node_pools(r, obj, remarks)
    if "remove_default_node_pool" in module:
        removed = r.flag(obj, "remove_default_node_pool", "count", note=False)
        if removed is False:
            r.compared(obj, "remove_default_node_pool", "count", False)
    else:
        removed = True  # variables.tf (v38-v44): default true
    if removed is True:
        why = "remove_default_node_pool" + (
            "" if obj.has("remove_default_node_pool") else ", default true"
        )
        remarks.append(
            Aside(
                f"{where}: the gke-standard-cluster sub-module removes GKE's default-pool ({why})"
            )
        )
        return []
    if not r.exists(obj):
        return []
    version = f"v{major}" if major is not None else "(version not pinned: the newest)"
    origin = f"{_STANDARD_MODULE} {version}"
    shape = _Shape(
        cfg=("node_config",),
        origin=_PROVIDER,  # the module passes node_config as given (default null)
        counts=functools.partial(_standard_counts, origin=origin),
        version=_standard_version,
        pods=functools.partial(_standard_pods, origin=origin),
    )
    cluster = r.cluster(obj, "name")
    zones = _resource_zones(r, None, module, root=obj)
    return [_pool(r, obj, "default-pool", cluster, zones, default_pool=True, shape=shape)]


def _standard_node_pools(r: Reader, obj: Obj, remarks: list[str]) -> None:
    """``node_pool``: a list with any pool in it is refused (see ``standard_cluster_pools``);
    one that is not known is said (its pools, if any, are not read)."""
    if not obj.has("node_pool"):
        return
    listed = r.scope.resolved(obj.raw("node_pool"))
    if isinstance(listed, list) and listed:
        raise r.error(
            obj,
            "node_pool",
            "Terraform refuses node pools in this module (v38-v44): its main.tf reads "
            "node_pool.value.version, which the node_pool variable's type does not declare "
            "(Unsupported attribute); make each pool a gke-node-pool sub-module call instead",
        )
    if isinstance(listed, list):
        return  # empty: no pool (and no note needed: an empty value states nothing)
    if not isinstance(listed, Expr):
        raise r.error(
            obj, "node_pool", f"expected a list of node pools, got {source_text(listed):.40}"
        )
    text = f"{r.where}.node_pool: {listed.text} cannot be read"
    remarks.append(text)
    obj.view.ignored(("node_pool",), f"{listed.text}: not known; its pools are not read (said)")


def _standard_counts(r: Reader, obj: Obj, per_zone: _PerZone, *, origin: str) -> _Counts:
    """No autoscaling (the module has none for default-pool); ``initial_node_count`` per zone
    (default 0; null is the provider's 0): with 0, GKE refuses to create the cluster, so the
    pool that exists was created with another count, which the files do not say."""
    if obj.has("initial_node_count"):
        count = r.count(obj, "initial_node_count", "desiredSize", note=False)
        stated = True
    else:
        count, stated = 0, False
    if count != 0:
        return None, None, per_zone.total(obj, ("initial_node_count",), "desiredSize", count)
    why = (
        f"{_NO_NODES} and the module ignores later changes: the count the pool was "
        "created with is not in the files (not compared)"
    )
    if stated:
        obj.view.ignored(("initial_node_count",), f"0: {why}")
    elif "initial_node_count" in obj.body:
        obj.view.ignored(("initial_node_count",), f"null (the provider's 0): {why}")
    r.unstated("desiredSize", "initial_node_count", f"{origin}: initial_node_count 0: {why}")
    return None, None, None


def _standard_version(r: Reader, obj: Obj) -> str | None:
    """The module gives default-pool no ``management``: GKE's default auto-upgrade, so the
    nodes follow the cluster's version whatever ``node_version`` says at creation."""
    why = (
        "auto-upgraded with the cluster (GKE's default: the module sets no management for "
        "default-pool): not compared"
    )
    r.ignore(obj, "node_version", why)
    r.unstated("kubernetesVersion", "node_version", why)
    return None


def _standard_pods(r: Reader, obj: Obj, *, origin: str) -> int | None:
    """``default_max_pods_per_node`` (default 110; null: GKE's 110) is default-pool's
    maximum pods per node: its nodes' allocatable pods."""
    if obj.has("default_max_pods_per_node"):
        return r.count(obj, "default_max_pods_per_node", "allocatable.pods")
    if "default_max_pods_per_node" in obj.body:
        why = f"{_PROVIDER}: null: GKE's {_MAX_PODS} pods per node"
        obj.view.ignored(("default_max_pods_per_node",), f"null: GKE's default {_MAX_PODS}")
    else:
        why = f"{origin}: default_max_pods_per_node {_MAX_PODS}"
    r.default("allocatable.pods", "default_max_pods_per_node", _MAX_PODS, why)
    return _MAX_PODS
