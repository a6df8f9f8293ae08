"""Google GKE: ``google_container_node_pool``, the ``node_pool`` blocks (or else the implicit
``default-pool``) of ``google_container_cluster``, and the terraform-google-modules
kubernetes-engine module's ``node_pools`` / ``windows_node_pools``, its cluster's
``default-pool``, its ``gke-node-pool`` sub-module and its ``gke-standard-cluster`` sub-module's
``default-pool`` (read in ``gke_module`` with the rules here: zones, per-zone counts, a pool's
node facts).

Defaults, as desired values with their provenance:

- resources (provider docs, GKE): ``machine_type`` e2-medium; ``disk_size_gb`` 100; an unset
  ``image_type`` gives Container-Optimized OS; a pool with neither ``node_count`` nor
  ``initial_node_count`` is created empty (``InitialNodeCount`` 0);
- the module (v10-v44, ``cluster.tf``): without ``node_pools``, its default list, one pool
  named ``default-node-pool`` (``variables.tf``, v5-v44; the root module and the sub-modules that
  take the list: private, beta and safer clusters and their update variants); ``machine_type``
  e2-medium, ``disk_size_gb`` 100, ``image_type`` COS_CONTAINERD (COS up to v18: the same
  family), ``autoscaling`` true with ``min_count`` 1 / ``max_count`` 100 per zone, else
  ``node_count`` 1 per zone; the node labels it always adds, ``cluster_name`` (the module's
  ``name``) and ``node_pool`` (the pool's), unless ``node_pools_labels.default_values`` turns them
  off; labels and taints of ``node_pools_labels`` /
  ``node_pools_taints`` for ``all`` and the pool;
- the module's own ``default-pool`` (its cluster's ``node_pool`` block), the ``gke-node-pool``
  sub-module and the ``gke-standard-cluster`` sub-module (v38+): see ``gke_module``.

Counts are per zone (``total_*`` are totals): they are multiplied by the number of zones when the
files fix it — the pool's ``node_locations``; a zonal cluster's zone plus its ``node_locations``;
a regional cluster's ``node_locations``; for the module, the pool's ``node_locations``, else
``zones`` (``regional = false``: all listed zones, even when their names are variables).
A regional cluster without listed zones gets zones GKE (or the module, at random) picks: the
count is then not compared. ``spot`` / ``preemptible`` pools carry ``cloud.google.com/gke-spot``
/ ``cloud.google.com/gke-preemptible`` = "true". Taints GKE adds on its own (Windows, Arm, GPU
and gVisor nodes) are tolerated, never reported. Disk type is not visible on a Node: ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleetwarden.core.pools import NodePoolSpec, Provisioner, Taint
from fleetwarden.formats.terraform.gke_ignored import (
    _CLUSTER_IGNORED,
    _POOL_IGNORED,
    _PROVIDER,
)
from fleetwarden.formats.terraform.hcl import Expr, blocks, first_unknown, source_text
from fleetwarden.formats.terraform.lines import Path
from fleetwarden.formats.terraform.reading import (
    Context,
    Obj,
    Reader,
)

__all__ = ["cluster_pools", "node_pool_pools"]

_ZONE = re.compile(r"[a-z]+-[a-z]+\d+-[a-z]")
_REGION = re.compile(r"[a-z]+-[a-z]+\d+")
_ARM = re.compile(r"^(t2a|c4a|n4a)-")
_MACHINE = "e2-medium"
_DISK_GB = 100
_SPOT_LABEL = "cloud.google.com/gke-spot"
_PREEMPTIBLE_LABEL = "cloud.google.com/gke-preemptible"

# taints GKE puts on nodes by itself: tolerated, never reported
_WINDOWS_TAINT = Taint("node.kubernetes.io/os", "windows", "NoSchedule")
_ARM_TAINT = Taint("kubernetes.io/arch", "arm64", "NoSchedule")
_GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
_GVISOR_TAINT = Taint("sandbox.gke.io/runtime", "gvisor", "NoSchedule")


def node_pool_pools(ctx: Context, label: str, body: Mapping[Any, Any]) -> list[NodePoolSpec]:
    """One ``google_container_node_pool``."""
    r = Reader(ctx, f"google_container_node_pool.{label}")
    obj = r.obj(body, ("resource", "google_container_node_pool", label), _POOL_IGNORED)
    if not r.exists(obj):
        return []
    cluster = r.cluster(obj, "cluster")
    target = ctx.scope.cluster_of(obj.raw("cluster"))
    zones = _resource_zones(r, obj, target)
    return [_pool(r, obj, label, cluster, zones, channel=_channel(r, target))]


def cluster_pools(ctx: Context, label: str, body: Mapping[Any, Any]) -> list[NodePoolSpec]:
    """The cluster's ``node_pool`` blocks (a ``dynamic "node_pool"``: its ``content``, how
    many unresolved unless ``for_each`` is a literal); without any, GKE's own ``default-pool``
    unless the cluster removes it."""
    where = f"google_container_cluster.{label}"
    base: Path = ("resource", "google_container_cluster", label)
    if ctx.scope.resolved(body.get("enable_autopilot")) is True:
        return []
    probe = Reader(ctx, where)
    if not probe.exists(probe.obj(body, base, {}, close=False)):
        return []
    inline = body.get("node_pool")
    pools: list[NodePoolSpec] = []
    for i, block in enumerate(inline if isinstance(inline, list) else ()):
        if isinstance(block, dict):
            r = Reader(ctx, f"{where}.node_pool[{i}]")
            root = r.obj(body, base, {}, close=False, label=where)
            obj = r.obj(block, (*base, "node_pool", i), _POOL_IGNORED)
            cluster = r.text(root, "name", "cluster")
            zones = _resource_zones(r, obj, body, root=root)
            pools.append(_pool(r, obj, f"node_pool-{i}", cluster, zones, channel=_channel(r, body)))
    dynamic = False
    for i, (lbl, dyn) in enumerate(blocks(body, "dynamic", 1)):
        content = dyn.get("content") if lbl == "node_pool" else None
        if not isinstance(content, list) or not content or not isinstance(content[0], dict):
            continue
        dynamic = True  # a dynamic node_pool: no default-pool either way
        r = Reader(ctx, f'{where}.dynamic "node_pool"[{i}]')
        root = r.obj(body, base, {}, close=False, label=where)
        at: Path = (*base, "dynamic", i, "node_pool")
        if r.yields(at, dyn, "node_pool", most=None):
            obj = r.obj(content[0], (*at, "content", 0), _POOL_IGNORED)
            cluster = r.text(root, "name", "cluster")
            zones = _resource_zones(r, obj, body, root=root)
            name = f"dynamic-node_pool-{i}"
            pools.append(_pool(r, obj, name, cluster, zones, channel=_channel(r, body)))
    removed = ctx.scope.resolved(body.get("remove_default_node_pool"))
    if pools or dynamic or removed is True or removed == "true":  # Terraform converts "true"
        return pools
    r = Reader(ctx, where)
    obj = r.obj(body, base, _CLUSTER_IGNORED)
    r.exists(obj)
    if isinstance(removed, Expr):
        r.unresolve(obj, "remove_default_node_pool", "count", removed.text)
    cluster = r.text(obj, "name", "cluster")
    zones = _resource_zones(r, None, body, root=obj)
    return [_pool(r, obj, "default-pool", cluster, zones, default_pool=True)]


# -- zones -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Zones:
    """How many zones a pool spans (None: not fixed by the files), and why."""

    count: int | None
    why: str
    uses: Sequence[tuple[Obj, Path]] = ()


def _resource_zones(
    r: Reader, pool: Obj | None, cluster: Mapping[Any, Any] | None, *, root: Obj | None = None
) -> _Zones:
    """The pool's ``node_locations``, else the cluster's zone plus its ``node_locations``, else
    one for a zonal cluster; a regional cluster without listed zones: not known."""
    zones = r.scope.resolved(pool.raw("node_locations")) if pool is not None else None
    if pool is not None and isinstance(zones, list) and zones and first_unknown(zones) is None:
        return _Zones(len(set(map(str, zones))), "node_locations", [(pool, ("node_locations",))])
    if pool is not None and pool.has("node_locations"):
        r.unresolve(pool, "node_locations", "zones", source_text(zones))
        return _Zones(None, "node_locations is not resolved")
    if cluster is None:
        return _Zones(None, "the cluster is not in these files: its zones are not known")
    location = r.scope.resolved(cluster.get("location"))
    extra = r.scope.resolved(cluster.get("node_locations"))
    for key, value in (("location", location), ("node_locations", extra)):
        unknown = first_unknown(value)
        if unknown is not None:  # any zone may be in it: no count of zones
            return _Zones(None, f"the cluster's {key} is not resolved ({unknown.text})")
    listed = isinstance(extra, list) and bool(extra)
    uses = [(root, (key,)) for key in ("location", "node_locations") if root and root.has(key)]
    if isinstance(location, str) and _ZONE.fullmatch(location):
        count = len({location, *map(str, extra)}) if listed else 1
        return _Zones(count, "a zonal cluster's zone and node_locations", uses)
    if isinstance(location, str) and _REGION.fullmatch(location):
        if listed:
            return _Zones(len(set(map(str, extra))), "the regional cluster's node_locations", uses)
        return _Zones(None, "a regional cluster's zones are GKE's choice (not stated)")
    return _Zones(None, "the cluster's location is not known")


class _PerZone:
    """GKE counts are per zone: a total needs the number of zones, else it is unresolved."""

    def __init__(self, r: Reader, zones: _Zones) -> None:
        self.r, self.zones = r, zones

    def total(self, obj: Obj, attr: Path, fact: str, per_zone: int | None) -> int | None:
        if per_zone is None:
            return None
        if per_zone == 0:  # none in any number of zones
            self.r.compared(obj, attr, fact, 0)
            return 0
        if self.zones.count is None:
            name = str(attr[-1])
            expression = f"{name} = {per_zone} per zone; the number of zones is not stated"
            if obj.has(attr):
                self.r.unresolve(obj, attr, fact, expression)
            else:
                self.r.note(fact, expression)
                self.r.unstated(fact, name, f"{per_zone} per zone: {self.zones.why}")
            return None
        for zone_obj, path in self.zones.uses:
            self.r.compared(zone_obj, path, "zones", self.zones.count)
        total = per_zone * self.zones.count
        if obj.has(attr):
            self.r.compared(obj, attr, fact, f"{per_zone} per zone x {self.zones.count} zones")
        return total

    def default(self, fact: str, attr: str, per_zone: int, origin: str) -> int | None:
        if per_zone == 0:
            self.r.default(fact, attr, 0, origin)
            return 0
        if self.zones.count is None:
            self.r.note(fact, f"{attr} = {per_zone} per zone; the number of zones is not stated")
            self.r.unstated(fact, attr, f"{origin}: {per_zone} per zone; {self.zones.why}")
            return None
        for zone_obj, path in self.zones.uses:
            self.r.compared(zone_obj, path, "zones", self.zones.count)
        total = per_zone * self.zones.count
        self.r.default(
            fact, attr, total, f"{origin}: {per_zone} per zone x {self.zones.count} zones"
        )
        return total


# -- a resource pool -------------------------------------------------------------------------------


_Counts = tuple[int | None, int | None, int | None]  # min, max, desired


@dataclass(frozen=True, slots=True)
class _Shape:
    """Where a pool's settings sit: a resource's blocks (``node_config[0]``), or a module's
    object inputs (``node_config``, ``autoscaling``); whose defaults fill an unset machine
    type, disk size and image (``origin``); and, for a module, how it reads the counts, the
    version and the pods per node (else the resource's rules)."""

    cfg: Path = ("node_config", 0)
    scaling: Path = ("autoscaling", 0)
    origin: str = _PROVIDER
    counts: Callable[[Reader, Obj, _PerZone], _Counts] | None = None
    version: Callable[[Reader, Obj], str | None] | None = None
    pods: Callable[[Reader, Obj], int | None] | None = None


_RESOURCE = _Shape()
# the facts a pool's node_config states (or GKE's defaults fill)
_CONFIG_FACTS = ("instanceTypes", "diskSizeGiB", "osImage", "labels", "taints")


def _pool(
    r: Reader,
    obj: Obj,
    stand_in: str,
    cluster: str | None,
    zones: _Zones,
    *,
    default_pool: bool = False,
    shape: _Shape = _RESOURCE,
    channel: Any = None,
) -> NodePoolSpec:
    """A GKE pool (resource, ``node_pool`` block, a cluster's default-pool, the gke-node-pool
    sub-module, or the gke-standard-cluster sub-module's default-pool)."""
    cfg = shape.cfg
    name = "default-pool" if default_pool else r.name(obj, "name", stand_in, prefix="name_prefix")
    whole = r.scope.resolved(obj.raw(cfg))
    known = not isinstance(whole, Expr)  # a module's node_config input that is not known
    if not known:
        for fact in _CONFIG_FACTS:  # none of its facts, and no default in their place
            r.unresolve(obj, cfg, fact, whole.text)
    r.dynamic(obj, "taint", "taints", at=cfg)
    machine = r.text(obj, (*cfg, "machine_type"), "instanceTypes")
    if machine is None and not obj.has((*cfg, "machine_type")) and known:
        machine = _MACHINE
        r.default(
            "instanceTypes",
            "node_config.machine_type",
            _MACHINE,
            f"{shape.origin}: machine_type e2-medium",
        )
    local_ssds = [
        key
        for key in ("ephemeral_storage_local_ssd_config", "ephemeral_storage_config")
        if obj.has((*cfg, key))
    ]
    disk: int | None = None
    if local_ssds:  # the nodes' ephemeral storage is the local SSDs, not the boot disk
        why = "local SSDs for ephemeral storage: the disk size is not compared"
        for key in local_ssds:
            obj.view.ignored((*cfg, key), why)
        r.ignore(obj, (*cfg, "disk_size_gb"), "ephemeral storage is on local SSDs: not compared")
        r.unstated(
            "diskSizeGiB",
            "node_config.disk_size_gb",
            "ephemeral storage on local SSDs: the boot disk is not compared",
        )
    elif known:
        disk = r.count(obj, (*cfg, "disk_size_gb"), "diskSizeGiB")
        if disk is None and not obj.has((*cfg, "disk_size_gb")):
            disk = _DISK_GB
            r.default(
                "diskSizeGiB",
                "node_config.disk_size_gb",
                _DISK_GB,
                f"{shape.origin}: disk_size_gb 100",
            )
    image = r.text(obj, (*cfg, "image_type"), "osImage", note=False)
    family = r.os_family(obj, (*cfg, "image_type")) if image is not None else None
    if not obj.has((*cfg, "image_type")) and known:
        family = "cos"
        r.default(
            "osImage",
            "node_config.image_type",
            "COS_CONTAINERD",
            f"{shape.origin}: an unset image_type is Container-Optimized OS",
        )
    labels = dict(r.labels(obj, (*cfg, "labels")) or {})
    labels.update(_spot(r, obj, cfg))
    taints = r.taints(obj, (*cfg, "taint")) or ()
    _auto_taints(
        r, family, machine, obj.has((*cfg, "guest_accelerator")), obj.has((*cfg, "sandbox_config"))
    )
    if shape.pods is not None:
        pods = shape.pods(r, obj)
    else:
        pods = r.count(obj, "max_pods_per_node", "allocatable.pods")
    per_zone = _PerZone(r, zones)
    if shape.counts is not None:
        lo, hi, desired = shape.counts(r, obj, per_zone)
    else:
        lo, hi = _autoscaling(r, obj, per_zone)
        desired = _initial(r, obj, per_zone, default_pool)
    if shape.version is not None:
        version = shape.version(r, obj)
    else:
        version = _resource_version(r, obj, channel, default_pool=default_pool)
    return r.spec(
        Provisioner.GCP,
        name=name,
        cluster=cluster,
        instance_types=(machine,) if machine else (),
        disk_size_gib=disk,
        disk_type=_text_or_none(r.scope.resolved(obj.raw((*cfg, "disk_type")))),
        min_size=lo,
        max_size=hi,
        desired_size=desired,
        labels=labels,
        taints=taints,
        kubernetes_version=version,
        os_family=family,
        allocatable={"pods": str(pods)} if pods is not None else {},
    )


def _resource_version(r: Reader, obj: Obj, channel: Any, *, default_pool: bool) -> str | None:
    """A pool's ``version`` (a default-pool's ``node_version``) counts only without auto-upgrade:
    with it GKE moves the nodes past the stated version. ``management.auto_upgrade`` defaults to
    true (the provider's ``Default: true`` on ``google_container_node_pool``; GKE's default where
    ``management`` is not sent, and always for a cluster's default-pool, which has no
    ``management``); a cluster on a release channel (``release_channel.channel`` other than
    UNSPECIFIED) cannot turn it off. ``channel`` is the cluster's resolved channel, if stated."""
    attr = "node_version" if default_pool else "version"
    at: Path = ("management", 0, "auto_upgrade")
    upgrade: bool | None = True
    if not default_pool and obj.has(at):
        upgrade = r.flag(obj, at, "kubernetesVersion", note=False)
        if upgrade is None:  # not known: neither compared nor ignored
            r.unresolve(obj, at, "kubernetesVersion", source_text(obj.raw(at)))
            r.ignore(obj, attr, "auto_upgrade is not resolved: whether it applies is not known")
            return None
    why = "auto-upgraded with the cluster (management.auto_upgrade, default true): not compared"
    if default_pool:
        why = "auto-upgraded with the cluster (GKE's default for the default-pool): not compared"
    if upgrade is False:
        if isinstance(channel, Expr):
            r.unresolve(obj, at, "kubernetesVersion", f"release_channel {channel.text}")
            r.ignore(obj, attr, "the cluster's release channel is not resolved")
            return None
        if isinstance(channel, str) and channel != "UNSPECIFIED":
            obj.view.ignored(at, f"the cluster's release channel {channel} forces auto-upgrade")
            why = f"auto-upgraded: the cluster's release channel {channel} forces it; not compared"
        else:
            r.compared(obj, at, "kubernetesVersion", False)
            version = r.text(obj, attr, "kubernetesVersion")
            if not obj.has(attr):
                r.unstated(
                    "kubernetesVersion", attr, "not stated: the cluster's version (not compared)"
                )
            return version
    elif obj.has(at):
        obj.view.ignored(at, "true: the version follows the cluster")
    if obj.has(attr):
        r.ignore(obj, attr, why)
    else:
        r.unstated("kubernetesVersion", attr, why)
    return None


def _channel(r: Reader, cluster: Mapping[Any, Any] | None) -> Any:
    """The cluster's ``release_channel.channel`` (resolved, or an ``Expr``), None if not stated."""
    block = cluster.get("release_channel") if cluster is not None else None
    if not isinstance(block, list) or not block or not isinstance(block[0], Mapping):
        return None
    return r.scope.resolved(block[0].get("channel"))


def _autoscaling(
    r: Reader, obj: Obj, per_zone: _PerZone, scaling: Path = ("autoscaling", 0)
) -> tuple[int | None, int | None]:
    if not obj.has(scaling):
        return None, None
    out: list[int | None] = []
    for total_key, key, fact in (
        ("total_min_node_count", "min_node_count", "minSize"),
        ("total_max_node_count", "max_node_count", "maxSize"),
    ):
        total = r.count(obj, (*scaling, total_key), fact)
        if total is None and not obj.has((*scaling, total_key)):
            count = r.count(obj, (*scaling, key), fact, note=False)
            total = per_zone.total(obj, (*scaling, key), fact, count)
        out.append(total)
    return out[0], out[1]


def _initial(r: Reader, obj: Obj, per_zone: _PerZone, default_pool: bool) -> int | None:
    for key in ("node_count", "initial_node_count"):
        if obj.has(key):
            count = r.count(obj, key, "desiredSize", note=False)
            return per_zone.total(obj, (key,), "desiredSize", count)
    if default_pool:
        r.unstated(
            "desiredSize",
            "initial_node_count",
            "not stated (the provider requires it for the default-pool)",
        )
        return None
    return per_zone.default(
        "desiredSize",
        "node_count",
        0,
        "Google provider: neither node_count nor initial_node_count: the pool is created empty",
    )


def _spot(r: Reader, obj: Obj, at: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, label in (("spot", _SPOT_LABEL), ("preemptible", _PREEMPTIBLE_LABEL)):
        value = r.flag(obj, (*at, key), f"labels.{label}", note=False)
        if value is True:
            r.compared(obj, (*at, key), f"labels.{label}", True)
            out[label] = "true"
        elif value is False:
            obj.view.ignored((*at, key), "false: no label asserted")
    return out


def _auto_taints(
    r: Reader, family: str | None, machine: str | None, gpu: bool, sandbox: bool
) -> None:
    """Taints GKE adds on its own: tolerated on the pool's nodes, never asserted."""
    if family is not None and family.startswith("windows"):
        r.startup_taints.append(_WINDOWS_TAINT)
    if machine is not None and _ARM.match(machine):
        r.startup_taints.append(_ARM_TAINT)
    if gpu:
        r.startup_taints.append(_GPU_TAINT)
    if sandbox:
        r.startup_taints.append(_GVISOR_TAINT)


def _text_or_none(value: Any) -> str | None:
    """A stated value shown on the spec, not compared (disk type is not visible on a Node)."""
    return value if isinstance(value, str) else None
