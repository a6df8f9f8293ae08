"""CAPG (Cluster API Provider GCP): ``GCPMachineTemplate`` and ``GCPMachinePool`` (Compute
Engine VMs, a managed instance group) and ``GCPManagedMachinePool(Template)`` (GKE node pools).

Defaults, read in CAPG's source (v1.3.0 to v1.12.0) and the GKE API reference CAPG's types
quote:

- VMs (``cloud/scope/machine.go`` / ``machinepool.go``, ``InstanceImageSpec``): with neither
  ``image`` nor ``imageFamily`` the boot image is the ``capi-ubuntu-1804-k8s-vX-Y`` family of
  the cluster's project (Ubuntu; any release is accepted, as the family is the user's to fill);
  an image or family name says the OS where it names one (``ubuntu``, ``cos``, ``rhel``,
  ``flatcar``, ``windows`` ...). ``rootDeviceType`` unset is ``pd-standard``; an unset (0)
  ``rootDeviceSize`` is sent as 0 and Compute Engine sizes the disk from the image, which the
  file does not say (CAPG's "defaults to 30" comment is not what its code sends): not compared.
  CAPG sets no interruptible status, so preemptible / Spot VMs carry no CAPI label.
- GKE node pools (``ConvertToSdkNodePool``): named ``nodePoolName``, else the object's name
  (nodes carry ``cloud.google.com/gke-nodepool``); machine type ``instanceType``, else
  ``machineType``, else GKE's ``e2-medium``; disk ``diskSizeGB``, else ``diskSizeGb``, else
  GKE's 100 GB; image type GKE's ``COS_CONTAINERD`` when unset; ``spot`` / ``preemptible``
  nodes are labelled ``cloud.google.com/gke-spot`` / ``gke-preemptible`` ``"true"``;
  ``maxPodsPerNode`` is the kubelet's max-pods. GKE's own taints (Windows, Arm machine types,
  gVisor) are tolerated, never asserted.
- GKE node counts (``ConvertToSdkAutoscaling``, ``checkDiffAndPrepareUpdateSize``): from CAPG
  v1.6 autoscaling is on unless ``scaling.enableAutoscaling: false``, with *total* counts
  ``minCount`` (default 0) .. ``maxCount`` (default 1) -- also when ``scaling`` is unset, so
  such a pool holds 0..1 nodes whatever the MachinePool's replicas (CAPG then never resizes
  it). Up to v1.5 ``scaling`` set per-zone bounds and a pool without it kept the replicas.
  Fields that exist only from v1.6 (every field but ``nodePoolName``, ``scaling.minCount`` /
  ``maxCount``, ``kubernetesLabels`` / ``kubernetesTaints``, ``additionalLabels``) pin the
  release; otherwise every count either release gives is accepted, and the provenance says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fleetwarden.core import osfamilies
from fleetwarden.core.pools import Taint
from fleetwarden.formats.accounting import Path
from fleetwarden.formats.capi.azure import family_of_image_names
from fleetwarden.formats.capi.objects import Context, Reader, Source, placeholder

__all__ = ["READERS", "family_of_gcp_image"]

_NOT_ON_NODE = "not visible on a Node"
_SPOT_LABEL = "cloud.google.com/gke-spot"
_PREEMPTIBLE_LABEL = "cloud.google.com/gke-preemptible"
_MACHINE_TYPE = "e2-medium"
_DISK_GB = 100
_IMAGE_TYPE = "COS_CONTAINERD"
_ARM = re.compile(r"^(t2a|c4a|n4a)-")
_COS = re.compile(r"(?<![a-z])cos(?![a-z])")
# taints GKE puts on nodes by itself (the same as formats/terraform/gke.py tolerates)
_WINDOWS_TAINT = Taint("node.kubernetes.io/os", "windows", "NoSchedule")
_ARM_TAINT = Taint("kubernetes.io/arch", "arm64", "NoSchedule")
_GVISOR_TAINT = Taint("sandbox.gke.io/runtime", "gvisor", "NoSchedule")
# GCPManagedMachinePool fields that exist only from CAPG v1.6 (v1.5 had nodePoolName, scaling
# min/max, kubernetesLabels/Taints, additionalLabels, providerIDList)
_SINCE_1_6 = (
    "machineType",
    "diskSizeGb",
    "localSsdCount",
    "nodeLocations",
    "imageType",
    "instanceType",
    "diskType",
    "diskSizeGB",
    "maxPodsPerNode",
    "nodeNetwork",
    "nodeSecurity",
    "management",
    "linuxNodeConfig",
    "spot",
    "preemptible",
)

# GCPMachineSpec (GCPMachineTemplate spec.template.spec, GCPMachinePool spec): attribute -> why
# it is not compared
_VM: dict[str, str] = {
    "providerID": "set by CAPG for each Machine: not a desired fact",
    "providerIDList": "set by CAPG: not a desired fact",
    "subnet": f"subnet: {_NOT_ON_NODE}",
    "aliasIPRanges": f"alias IP ranges: {_NOT_ON_NODE}",
    "additionalLabels": f"GCP resource labels (not Kubernetes labels): {_NOT_ON_NODE}",
    "additionalMetadata": f"instance metadata: {_NOT_ON_NODE}",
    "publicIP": f"public IP: {_NOT_ON_NODE}",
    "additionalNetworkTags": f"network tags: {_NOT_ON_NODE}",
    "resourceManagerTags": f"resource manager tags: {_NOT_ON_NODE}",
    "additionalDisks": "extra disks: not the kubelet's ephemeral storage",
    "serviceAccounts": f"service account: {_NOT_ON_NODE}",
    "preemptible": "preemptible VMs: CAPG sets no interruptible status, so no node label (not "
    "compared)",
    "provisioningModel": "Spot VMs: CAPG sets no interruptible status, so no node label (not "
    "compared)",
    "ipForwarding": f"IP forwarding: {_NOT_ON_NODE}",
    "shieldedInstanceConfig": f"Shielded VM settings: {_NOT_ON_NODE}",
    "onHostMaintenance": f"host maintenance policy: {_NOT_ON_NODE}",
    "confidentialCompute": f"confidential computing: {_NOT_ON_NODE}",
    "rootDiskEncryptionKey": f"disk encryption: {_NOT_ON_NODE}",
    "guestAccelerators": "GPUs: their allocatable resources appear only with a device plugin "
    "(not compared)",
}
# GCPManagedMachinePool spec (GKE node pool)
_GKE: dict[str, str] = {
    "providerIDList": "set by CAPG: not a desired fact",
    "localSsdCount": "local SSDs: not the boot disk (not compared)",
    "additionalLabels": f"GCP resource labels (not Kubernetes labels): {_NOT_ON_NODE}",
    "diskType": f"boot disk type: {_NOT_ON_NODE}",
    "nodeNetwork": f"node networking: {_NOT_ON_NODE}",
    "nodeSecurity.serviceAccount": f"service account: {_NOT_ON_NODE}",
    "nodeSecurity.enableSecureBoot": f"Shielded VM settings: {_NOT_ON_NODE}",
    "nodeSecurity.enableIntegrityMonitoring": f"Shielded VM settings: {_NOT_ON_NODE}",
    "management": f"auto-upgrade / auto-repair: {_NOT_ON_NODE}",
    "linuxNodeConfig": f"OS tuning (sysctls, cgroup mode): {_NOT_ON_NODE}",
    "scaling.locationPolicy": f"autoscaler location policy: {_NOT_ON_NODE}",
    "scaling.enableAutoscaling": "autoscaling switch: the counts compared follow it",
}
_TEMPLATE_METADATA = "labels/annotations of the generated GCP objects: not on Nodes"


def _under(prefix: str, table: Mapping[str, str]) -> dict[str, str]:
    return {f"{prefix}.{key}": why for key, why in table.items()}


# ---------------------------------------------------------------------------------------------
# Compute Engine VMs


def family_of_gcp_image(name: str) -> str | None:
    """The OS family a Compute Engine image or image family reference names
    (``projects/cos-cloud/global/images/family/cos-stable``,
    ``projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts``,
    ``capi-ubuntu-2204-k8s-v1-31``), or None."""
    if _COS.search(name.lower()):
        return "cos"
    return family_of_image_names(name)


def _vm(src: Source, base: Path, ctx: Context) -> None:
    """GCPMachineTemplate ``spec.template.spec`` / GCPMachinePool ``spec``."""
    path: Path = (*base, "instanceType")
    text = src.text(path, "instanceTypes")
    if text:
        src.pool.instance_types.append(text)
        src.compared(path, "instanceTypes", text)
    _vm_image(src, base)
    size: Path = (*base, "rootDeviceSize")
    gib = src.count(size, "diskSizeGiB") if src.get(size) is not None else None
    if gib:
        src.pool.disk_size_gib = gib
        src.compared(size, "diskSizeGiB", gib)
    elif gib is not None or src.get(size) is None:
        src.unstated(
            size,
            "diskSizeGiB",
            "not stated (or 0): CAPG sends 0 and Compute Engine sizes the boot disk from the "
            "image, which the file does not say: not compared",
        )
    kind: Path = (*base, "rootDeviceType")
    disk_type = src.text(kind, "diskType")
    if disk_type:
        src.pool.disk_type = disk_type
        src.compared(kind, "diskType", disk_type)
    elif src.get(kind) is None and src.default(
        kind, "diskType", "pd-standard", "CAPG: rootDeviceType pd-standard when unset"
    ):
        src.pool.disk_type = "pd-standard"
    if base == ("spec",):
        src.close(("spec",), _VM)
    else:
        src.close(
            ("spec",), {"template.metadata": _TEMPLATE_METADATA, **_under("template.spec", _VM)}
        )


def _vm_image(src: Source, base: Path) -> None:
    """``image`` wins over ``imageFamily``; without either, CAPG's Ubuntu image family."""
    image: Path = (*base, "image")
    family: Path = (*base, "imageFamily")
    chosen = image if src.get(image) is not None else family
    if src.get(chosen) is None:
        if src.default(
            image,
            "osImage",
            "ubuntu",
            "CAPG: the capi-ubuntu-1804-k8s-vX-Y image family of the cluster's project when "
            "neither image nor imageFamily is set (any Ubuntu release matches)",
        ):
            src.pool.os_families = ("ubuntu",)
        return
    if chosen == image and src.get(family) is not None:
        src.ignored(family, "not used: image is set (CAPG: image takes precedence)")
    name = src.text(chosen, "osImage")
    if name is None:
        return  # unresolved, noted
    found = family_of_gcp_image(name)
    if found is None:
        src.ignored(chosen, f"image {name}: its OS is not in the name (not compared)")
        return
    src.pool.os_families = (found,)
    src.compared(chosen, "osImage", name)


# ---------------------------------------------------------------------------------------------
# GKE node pools


def _gke_pool(src: Source, base: Path, ctx: Context) -> None:
    """GCPManagedMachinePool(Template): a GKE node pool."""
    pool = src.pool
    spec = src.at(base)
    since = sorted(key for key in _SINCE_1_6 if spec.get(key) is not None)
    scaling_spec = src.at((*base, "scaling"))
    since += [f"scaling.{k}" for k in ("enableAutoscaling", "locationPolicy") if k in scaling_spec]
    _gke_name(src, base, ctx)
    machine = _gke_machine_type(src, base)
    _gke_disk(src, base)
    family = _gke_image(src, base)
    src.labels((*base, "kubernetesLabels"))
    for taint, _, where in src.taint_objects((*base, "kubernetesTaints")):
        pool.taints.append(taint)
        src.compared(where, taint.field_name, f"{taint.key}={taint.value or ''}:{taint.effect}")
    for key, label in (("spot", _SPOT_LABEL), ("preemptible", _PREEMPTIBLE_LABEL)):
        _gke_flag_label(src, (*base, key), label)
    pods: Path = (*base, "maxPodsPerNode")
    if src.get(pods) is not None:
        count = src.count(pods, "allocatable.pods")
        if count is not None:
            pool.allocatable["pods"] = str(count)
            src.compared(pods, "allocatable.pods", count)
    src.zones((*base, "nodeLocations"))
    sandbox: Path = (*base, "nodeSecurity", "sandboxType")
    sandbox_type = src.text(sandbox, "taints")
    if sandbox_type is not None:
        src.ignored(sandbox, "sandbox: GKE's gVisor taint is tolerated, never asserted")
        if sandbox_type.upper() == "GVISOR":
            pool.startup_taints.append(_GVISOR_TAINT)
    # GKE's own taints: tolerated on the pool's nodes, never asserted
    if family is not None and family.startswith("windows"):
        pool.startup_taints.append(_WINDOWS_TAINT)
    if machine is not None and _ARM.match(machine):
        pool.startup_taints.append(_ARM_TAINT)
    _gke_counts(src, base, since)
    table = dict(_GKE)
    if base != ("spec",):
        table = {"template.metadata": _TEMPLATE_METADATA, **_under("template.spec", table)}
    src.close(("spec",), table)


def _gke_name(src: Source, base: Path, ctx: Context) -> None:
    """``nodePoolName``, else the object's name (generated in a ClusterClass topology)."""
    path: Path = (*base, "nodePoolName")
    name = src.text(path, "name") if src.get(path) is not None else None
    if name:
        src.pool.rename(name)  # copied as is into every cluster's clone of a template
        src.compared(path, "name", name)
    elif src.get(path) is None and not ctx.topology and src.doc.name:
        src.pool.rename(src.doc.name)
        why = "CAPG: the GKE node pool is named after the object when nodePoolName is unset"
        if placeholder(src.doc.name):
            src.view.unresolved(path, f"{src.doc.name} ({why})", "name")
        else:
            src.default(path, "name", src.doc.name, why)


def _gke_machine_type(src: Source, base: Path) -> str | None:
    """``instanceType`` wins over ``machineType`` (CAPG sets it last); GKE's e2-medium."""
    instance: Path = (*base, "instanceType")
    machine: Path = (*base, "machineType")
    chosen = instance if src.get(instance) is not None else machine
    if src.get(chosen) is None:
        if src.default(
            machine,
            "instanceTypes",
            _MACHINE_TYPE,
            "GKE: e2-medium when a node pool states no machine type (CAPG sends none)",
        ):
            src.pool.instance_types.append(_MACHINE_TYPE)
            return _MACHINE_TYPE
        return None
    if chosen == instance and src.get(machine) is not None:
        src.ignored(machine, "not used: instanceType is set (CAPG sends it last)")
    text = src.text(chosen, "instanceTypes")
    if text:
        src.pool.instance_types.append(text)
        src.compared(chosen, "instanceTypes", text)
    return text


def _gke_disk(src: Source, base: Path) -> None:
    """``diskSizeGB`` wins over ``diskSizeGb`` (CAPG sets it last); GKE's 100 GB."""
    big: Path = (*base, "diskSizeGB")
    small: Path = (*base, "diskSizeGb")
    chosen = big if src.get(big) is not None else small
    if src.get(chosen) is None:
        if src.default(
            big,
            "diskSizeGiB",
            _DISK_GB,
            "GKE: 100 GB when a node pool states no disk size (CAPG sends none)",
        ):
            src.pool.disk_size_gib = _DISK_GB
        return
    if chosen == big and src.get(small) is not None:
        src.ignored(small, "not used: diskSizeGB is set (CAPG sends it last)")
    size = src.count(chosen, "diskSizeGiB")
    if size:
        src.pool.disk_size_gib = size
        src.compared(chosen, "diskSizeGiB", size)


def _gke_image(src: Source, base: Path) -> str | None:
    """The OS family of ``imageType`` (GKE's COS_CONTAINERD when unset)."""
    path: Path = (*base, "imageType")
    if src.get(path) is None:
        if src.default(
            path,
            "osImage",
            _IMAGE_TYPE,
            "GKE: Container-Optimized OS (COS_CONTAINERD) when a node pool states no image type",
        ):
            src.pool.os_families = ("cos",)
            return "cos"
        return None
    value = src.text(path, "osImage")
    if value is None:
        return None
    family = osfamilies.family_of_setting(value)
    if family is None:
        src.ignored(path, f"image type {value!r}: no OS family fleetwarden knows")
        return None
    src.pool.os_families = (family,)
    src.compared(path, "osImage", value)
    return family


def _gke_flag_label(src: Source, path: Path, label: str) -> None:
    value = src.get(path)
    if value is None:
        return
    if not isinstance(value, bool):
        raise src.error(path, f"expected true or false, got {value!r:.40}")
    if not value:
        src.ignored(path, "false: no label asserted")
        return
    src.pool.labels[label] = "true"
    src.compared(path, f"labels.{label}", f"{label}=true (GKE labels the nodes)")


def _gke_counts(src: Source, base: Path, since: list[str]) -> None:
    """Node counts (see the module docstring): a total min..max under GKE's autoscaler, or
    the MachinePool's replicas when autoscaling is off."""
    pool = src.pool
    scaling: Path = (*base, "scaling")
    stated = src.get(scaling) is not None
    enabled_path: Path = (*scaling, "enableAutoscaling")
    enabled = src.get(enabled_path)
    if enabled is not None and not isinstance(enabled, bool):
        raise src.error(enabled_path, f"expected true or false, got {enabled!r:.40}")
    if stated and enabled is False:
        for key in ("minCount", "maxCount"):
            if src.get((*scaling, key)) is not None:
                src.ignored((*scaling, key), "autoscaling is off: the replicas are the count")
        return
    pinned = f"CAPG >= v1.6 ({since[0]} exists from then)" if since else None
    lo_path, hi_path = (*scaling, "minCount"), (*scaling, "maxCount")
    if not stated:
        if pinned is not None:
            why = (
                f"{pinned}: GKE autoscaling on with 0..1 nodes in all when scaling is unset "
                "(ConvertToSdkAutoscaling); the MachinePool's replicas only size the new pool"
            )
            if src.default(lo_path, "minSize", 0, why):
                pool.min_size = 0
            if src.default(hi_path, "maxSize", 1, why):
                pool.max_size = 1
            return
        replicas = pool.desired_size
        high = max(1, replicas) if replicas is not None else None
        why = (
            "CAPG, release not stated: from v1.6 autoscaling with 0..1 nodes in all when scaling "
            "is unset, up to v1.5 the MachinePool's replicas; both are accepted"
        )
        if src.default(lo_path, "minSize", 0, why):
            pool.min_size = 0
        if high is None:
            src.unstated(hi_path, "maxSize", f"{why}: the replicas are unresolved")
        elif src.default(hi_path, "maxSize", high, why):
            pool.max_size = high
        return
    low = src.count(lo_path, "minSize") if src.get(lo_path) is not None else 0
    high_count = src.count(hi_path, "maxSize") if src.get(hi_path) is not None else 1
    for path, fact, value, attr, default in (
        (lo_path, "minSize", low, "min_size", 0),
        (hi_path, "maxSize", high_count, "max_size", 1),
    ):
        if value is None:
            continue  # unresolved, noted
        if src.get(path) is None:
            if not src.default(path, fact, default, "CAPG: autoscaling total count when unset"):
                continue
        else:
            src.compared(path, fact, value)
        if fact == "maxSize" and pinned is None:
            # up to v1.5 the bounds were per zone; CAPG's regional default is 3 zones
            value *= 3
            pool.ledger.provenance[fact] += (
                " (CAPG release not stated: up to v1.5 per zone, so up to 3 times this)"
            )
        setattr(pool, attr, value)
    if isinstance(low, int) and isinstance(high_count, int) and high_count < low:
        raise src.error(hi_path, f"maxCount {high_count} is below minCount {low}: GKE refuses it")


READERS: dict[str, tuple[Reader, Path]] = {
    "GCPMachineTemplate": (_vm, ("spec", "template", "spec")),
    "GCPMachinePool": (_vm, ("spec",)),
    "GCPManagedMachinePool": (_gke_pool, ("spec",)),
    "GCPManagedMachinePoolTemplate": (_gke_pool, ("spec", "template", "spec")),
}
