"""CAPZ (Cluster API Provider Azure): ``AzureMachineTemplate``, ``AzureMachinePool``,
``AzureManagedMachinePool(Template)`` (AKS agent pools) and
``AzureASOManagedMachinePool(Template)`` (AKS through Azure Service Operator resources).

Defaults, read in CAPZ's source (v1.0.0 to v1.26.0) and the AKS documentation:

- ``image`` unset: ``osDisk.osType`` (default ``Linux``) picks CAPZ's reference image. Linux:
  Ubuntu (marketplace ``cncf-upstream``/``capi`` up to v1.17, the community gallery image
  ``capi-ubun2-2404`` from v1.18; the Ubuntu release follows the CAPZ release and the Kubernetes
  version, so any Ubuntu matches). Windows: Windows Server 2019 up to v1.24, 2022 from v1.25;
  the AzureMachine annotation ``windowsServerVersion: windows-YYYY`` picks the year. The CAPZ
  release is not in the file (every release serves ``v1beta1``), so both years are accepted.
- ``image`` stated: the marketplace / compute gallery / shared gallery names (and a purchase
  ``plan``) give the family: publisher ``kinvolk`` or ``flatcar`` in a name is Flatcar (CAPZ's
  ``flatcar`` and ``flatcar-sysext`` flavors), ``ubuntu`` / ``ubun2`` Ubuntu (with its release
  when the SKU or name says it), ``windows`` / ``win-`` Windows Server, Azure Linux / Mariner.
  An ``image.id`` or a name without any of these does not say the OS (not compared).
- ``osDisk.diskSizeGB`` unset: Azure uses the image's own OS disk size (30 GB for CAPZ's
  reference images, unknown for others): not compared.
- AKS pools: ``osType`` defaults to ``Linux`` and AKS then uses the ``Ubuntu`` OS SKU (CAPZ's
  AzureManagedMachinePool has no ``osSKU`` field: the API server drops one; an
  ``asoManagedClustersAgentPoolPatches`` entry can set it, and is read). Windows pools run
  Windows Server (the year follows the Kubernetes version: not compared).
  ``scaleSetPriority: Spot`` makes AKS label the nodes ``kubernetes.azure.com/scalesetpriority=
  spot`` and taint them ``kubernetes.azure.com/scalesetpriority=spot:NoSchedule``. An unset or 0
  ``osDiskSizeGB`` is sized by AKS from the VM's vCPU count (not compared); with
  ``kubeletDiskType: Temporary`` the kubelet's storage is not on the OS disk (not compared).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from fleetwarden.core import osfamilies
from fleetwarden.core.pools import Taint
from fleetwarden.formats.accounting import Path
from fleetwarden.formats.capi.objects import Context, Reader, Source, placeholder, required_name

__all__ = ["READERS", "family_of_image_names"]

_SPOT_LABEL = "kubernetes.azure.com/scalesetpriority"
_SPOT_TAINT = Taint(_SPOT_LABEL, "spot", "NoSchedule")
_NOT_ON_NODE = "not visible on a Node"
_WINDOWS_ANNOTATION = "windowsServerVersion"

# AzureMachineSpec (AzureMachineTemplate spec.template.spec, AzureMachinePool spec.template)
_MACHINE: dict[str, str] = {
    "providerID": "set by CAPZ for each Machine: not a desired fact",
    "failureDomain": "availability zone: CAPZ places the VM in it; zones are not compared",
    "identity": f"managed identity: {_NOT_ON_NODE}",
    "userAssignedIdentities": f"managed identity: {_NOT_ON_NODE}",
    "systemAssignedIdentityRole": f"managed identity: {_NOT_ON_NODE}",
    "roleAssignmentName": f"managed identity: {_NOT_ON_NODE}",
    "dataDisks": "extra data disks: not the kubelet's ephemeral storage",
    "sshPublicKey": f"SSH key: {_NOT_ON_NODE}",
    "additionalTags": f"Azure resource tags: {_NOT_ON_NODE}",
    "additionalCapabilities": f"VM capabilities (ultra SSD, hibernation): {_NOT_ON_NODE}",
    "allocatePublicIP": f"public IP: {_NOT_ON_NODE}",
    "enableIPForwarding": f"networking: {_NOT_ON_NODE}",
    "acceleratedNetworking": f"networking: {_NOT_ON_NODE}",
    "networkInterfaces": f"networking: {_NOT_ON_NODE}",
    "subnetName": f"subnet: {_NOT_ON_NODE}",
    "dnsServers": f"DNS servers: {_NOT_ON_NODE}",
    "diagnostics": f"boot diagnostics: {_NOT_ON_NODE}",
    "spotVMOptions": "spot VMs: CAPZ was not found to set the interruptible label (not compared)",
    "securityProfile": f"security settings (trusted launch, encryption): {_NOT_ON_NODE}",
    "disableExtensionOperations": f"VM extensions: {_NOT_ON_NODE}",
    "disableVMBootstrapExtension": f"VM extensions: {_NOT_ON_NODE}",
    "vmExtensions": f"VM extensions: {_NOT_ON_NODE}",
    "capacityReservationGroupID": f"capacity reservation: {_NOT_ON_NODE}",
    "terminateNotificationTimeout": f"scale set termination notice: {_NOT_ON_NODE}",
    "osDisk.cachingType": f"OS disk caching: {_NOT_ON_NODE}",
    "osDisk.diffDiskSettings": f"ephemeral OS disk placement: {_NOT_ON_NODE}",
    "osDisk.managedDisk.diskEncryptionSet": f"disk encryption: {_NOT_ON_NODE}",
    "osDisk.managedDisk.securityProfile": f"disk encryption: {_NOT_ON_NODE}",
}
# AzureMachinePool spec (outside spec.template)
_SCALE_SET: dict[str, str] = {
    "location": f"Azure region: {_NOT_ON_NODE} as stated (not compared)",
    "strategy": f"rolling update settings: {_NOT_ON_NODE}",
    "identity": f"managed identity: {_NOT_ON_NODE}",
    "systemAssignedIdentityRole": f"managed identity: {_NOT_ON_NODE}",
    "userAssignedIdentities": f"managed identity: {_NOT_ON_NODE}",
    "roleAssignmentName": f"managed identity: {_NOT_ON_NODE}",
    "additionalTags": f"Azure resource tags: {_NOT_ON_NODE}",
    "providerID": "set by CAPZ: not a desired fact",
    "providerIDList": "set by CAPZ: not a desired fact",
    "orchestrationMode": f"scale set orchestration mode: {_NOT_ON_NODE}",
    "platformFaultDomainCount": f"fault domains: {_NOT_ON_NODE}",
    "zoneBalance": f"zone balancing: {_NOT_ON_NODE}",
}
# AzureManagedMachinePool (AKS agent pool)
_AKS: dict[str, str] = {
    "mode": "System / User: not compared (AKS's label for it is not on every node version)",
    "availabilityZones": "zones: AKS labels nodes <region>-<zone>, the region is not here "
    "(not compared)",
    "additionalTags": f"Azure resource tags: {_NOT_ON_NODE}",
    "enableUltraSSD": f"ultra SSD: {_NOT_ON_NODE}",
    "enableNodePublicIP": f"public IPs: {_NOT_ON_NODE}",
    "nodePublicIPPrefixID": f"public IPs: {_NOT_ON_NODE}",
    "scaleDownMode": f"autoscaler scale-down mode: {_NOT_ON_NODE}",
    "spotMaxPrice": f"spot price cap: {_NOT_ON_NODE}",
    "kubeletConfig": "kubelet configuration: not compared (allocatable is compared with the "
    "pool's median)",
    "linuxOSConfig": f"OS tuning (sysctls, swap, THP): {_NOT_ON_NODE}",
    "subnetName": f"subnet: {_NOT_ON_NODE}",
    "enableFIPS": "FIPS-enabled image: the OS family is the same (not compared)",
    "enableEncryptionAtHost": f"host encryption: {_NOT_ON_NODE}",
    "providerIDList": "set by CAPZ: not a desired fact",
    "osSKU": "not a field of CAPZ's AzureManagedMachinePool: the API server drops it (set it "
    "with asoManagedClustersAgentPoolPatches)",
}
# ASO ManagedClustersAgentPool spec
_ASO: dict[str, str] = {
    "owner": "the owning managed cluster: not a node fact",
    "mode": _AKS["mode"],
    "type": "agent pool type (VirtualMachineScaleSets): not visible on a Node",
    "count": "set by CAPZ from the MachinePool's replicas",
    "enableAutoScaling": "autoscaling switch: minCount / maxCount are compared",
    "orchestratorVersion": "set by CAPZ from the MachinePool's version (compared there)",
    "availabilityZones": _AKS["availabilityZones"],
    "tags": f"Azure resource tags: {_NOT_ON_NODE}",
    "enableUltraSSD": _AKS["enableUltraSSD"],
    "enableNodePublicIP": _AKS["enableNodePublicIP"],
    "nodePublicIPPrefixReference": _AKS["nodePublicIPPrefixID"],
    "scaleDownMode": _AKS["scaleDownMode"],
    "spotMaxPrice": _AKS["spotMaxPrice"],
    "kubeletConfig": _AKS["kubeletConfig"],
    "linuxOSConfig": _AKS["linuxOSConfig"],
    "vnetSubnetReference": f"subnet: {_NOT_ON_NODE}",
    "podSubnetReference": f"subnet: {_NOT_ON_NODE}",
    "enableFIPS": _AKS["enableFIPS"],
    "enableEncryptionAtHost": _AKS["enableEncryptionAtHost"],
    "upgradeSettings": f"rolling update settings: {_NOT_ON_NODE}",
    "operatorSpec": f"ASO operator settings: {_NOT_ON_NODE}",
    "proximityPlacementGroupReference": f"placement group: {_NOT_ON_NODE}",
    "hostGroupReference": f"dedicated host: {_NOT_ON_NODE}",
    "capacityReservationGroupReference": f"capacity reservation: {_NOT_ON_NODE}",
    "gpuInstanceProfile": "GPU partitioning: not compared",
    "networkProfile": f"networking: {_NOT_ON_NODE}",
    "securityProfile": f"security settings: {_NOT_ON_NODE}",
    "workloadRuntime": "workload runtime: not compared",
}
_TEMPLATE_METADATA = (
    "labels/annotations of the generated Azure objects: not on Nodes (a windowsServerVersion "
    "annotation, which picks the default Windows image, is read)"
)


def _under(prefix: str, table: Mapping[str, str]) -> dict[str, str]:
    return {f"{prefix}.{key}": why for key, why in table.items()}


# ---------------------------------------------------------------------------------------------
# images

_UBUNTU_RELEASE = re.compile(r"(?<!\d)(18|20|22|24|26)[-_.]?04(?!\d)")
_WINDOWS_YEAR = re.compile(r"(?<!\d)(2016|2019|2022|2025)(?!\d)")
_WINDOWS = re.compile(r"(?<![a-z])win(?:dows)?(?![a-z])")  # not "winter", "darwin"


def family_of_image_names(*names: str) -> str | None:
    """The OS family an Azure image's publisher / offer / SKU / gallery / definition names
    say (``kinvolk``, ``flatcar-stable-amd64-capi-v1.31.1``, ``capi-ubun2-2404``,
    ``ubuntu-2204-gen1``, ``capi-win-2022-containerd``), or None."""
    text = " ".join(n.lower() for n in names)
    if "flatcar" in text or "kinvolk" in text:
        return "flatcar"
    if _WINDOWS.search(text):
        year = _WINDOWS_YEAR.search(text)
        return f"windows-{year[1]}" if year else "windows"
    if "ubun" in text:
        release = _UBUNTU_RELEASE.search(text)
        return f"ubuntu-{release[1]}.04" if release else "ubuntu"
    if "mariner" in text or "azurelinux" in text or "azure-linux" in text:
        return "azurelinux"
    if "rhel" in text or "redhat" in text:
        return "rhel"
    if "debian" in text:
        return "debian"
    return None


_IMAGE_NAMES = {
    "marketplace": ("publisher", "offer", "sku"),
    "computeGallery": ("gallery", "name"),
    "sharedGallery": ("gallery", "name", "publisher", "offer", "sku"),
}


def _image(src: Source, base: Path) -> bool:
    """The OS family of a stated ``image``; True when an image is stated."""
    path: Path = (*base, "image")
    image = src.at(path)
    if not image:
        return False
    why = src.patch_of(path)
    if why is not None:
        src.unresolved(path, "osImage", why)
        return True
    names: list[str] = []
    for form, keys in _IMAGE_NAMES.items():
        spec = src.at((*path, form))
        names.extend(src.string(spec.get(key), (*path, form, key)) or "" for key in keys)
        plan = src.at((*path, form, "plan"))
        names.extend(src.string(plan.get(key), (*path, form, "plan", key)) or "" for key in plan)
    image_id = src.string(image.get("id"), (*path, "id")) or ""
    names.append(image_id)
    shown = ", ".join(n for n in names if n)
    family = family_of_image_names(*(n for n in names if n and not placeholder(n)))
    if family is not None:
        src.pool.os_families = (family,)
        src.compared(path, "osImage", shown)
    elif any(placeholder(n) for n in names):
        src.unresolved(path, "osImage", shown)
    else:
        src.ignored(path, f"image {shown}: its OS is not in the file (not compared)")
    return True


def _os(src: Source, base: Path, annotations: Path) -> None:
    """The OS: the stated image's, else CAPZ's default image for ``osDisk.osType``."""
    os_type: Path = (*base, "osDisk", "osType")
    if _image(src, base):
        if src.get(os_type) is not None:
            src.ignored(
                os_type,
                "the image decides the OS (osType picks the default image and the bootstrap "
                "extension)",
            )
        return
    value = src.text(os_type, "osImage")
    if value is None and src.get(os_type) is not None:
        return  # unresolved, noted
    if value is not None:
        src.compared(os_type, "osImage", value)
    if (value or "Linux") == "Linux":
        _default_os(
            src,
            (*base, "image"),
            ("ubuntu",),
            "CAPZ reference image for Linux: Ubuntu (cncf-upstream marketplace up to v1.17, "
            "the ClusterAPI community gallery's capi-ubun2-2404 from v1.18; the release follows "
            "the CAPZ release and Kubernetes version, so any Ubuntu matches)",
        )
        return
    if value != "Windows":
        src.unstated((*base, "image"), "osImage", f"osType {value!r}: no default image known")
        return
    version_path: Path = (*annotations, _WINDOWS_ANNOTATION)
    if src.get(version_path) is not None:
        chosen = src.text(version_path, "osImage")
        if chosen is None:  # unresolved: any year
            _default_os(
                src,
                (*base, "image"),
                ("windows",),
                "CAPZ reference image for Windows, its year from an unresolved "
                f"{_WINDOWS_ANNOTATION} annotation",
            )
            return
        family = osfamilies.family_of_setting(chosen)
        if family is not None and family.startswith("windows"):
            src.pool.os_families = (family,)
            src.compared(version_path, "osImage", chosen)
            return
        if chosen:
            src.ignored(version_path, f"{chosen!r} is not windows-YYYY: CAPZ refuses it")
    _default_os(
        src,
        (*base, "image"),
        ("windows-2022", "windows-2019"),
        "CAPZ reference image for Windows: Windows Server 2022 from v1.25, 2019 up to v1.24 "
        "(the CAPZ release is not in the file: both are accepted)",
    )


def _default_os(src: Source, path: Path, families: tuple[str, ...], why: str) -> None:
    if src.default(path, "osImage", " or ".join(families), why):
        src.pool.os_families = families


def _disk(src: Source, base: Path) -> None:
    disk: Path = (*base, "osDisk")
    size_path: Path = (*disk, "diskSizeGB")
    if src.get(size_path) is not None:
        size = src.count(size_path, "diskSizeGiB")
        if size:
            src.pool.disk_size_gib = size
            src.compared(size_path, "diskSizeGiB", size)
    else:
        src.unstated(
            size_path,
            "diskSizeGiB",
            "not stated: Azure uses the image's own OS disk size (30 GB for CAPZ's reference "
            "images, unknown for others): not compared",
        )
    account: Path = (*disk, "managedDisk", "storageAccountType")
    kind = src.text(account, "diskType")
    if kind:
        src.pool.disk_type = kind
        src.compared(account, "diskType", kind)


def _vm(src: Source, base: Path, annotations: Path) -> None:
    vm_size: Path = (*base, "vmSize")
    text = src.text(vm_size, "instanceTypes")
    if text:
        src.pool.instance_types.append(text)
        src.compared(vm_size, "instanceTypes", text)
    _disk(src, base)
    _os(src, base, annotations)


def _machine(src: Source, base: Path, ctx: Context) -> None:
    """AzureMachineTemplate ``spec.template.spec``."""
    _vm(src, base, ("spec", "template", "metadata", "annotations"))
    src.close(
        ("spec",), {"template.metadata": _TEMPLATE_METADATA, **_under("template.spec", _MACHINE)}
    )


def _machine_pool(src: Source, base: Path, ctx: Context) -> None:
    """AzureMachinePool ``spec.template`` (a scale set); its own annotations choose the
    default Windows image."""
    _vm(src, base, ("metadata", "annotations"))
    src.close(("spec",), {**_SCALE_SET, **_under("template", _MACHINE)})


# ---------------------------------------------------------------------------------------------
# AKS


def _aks_pool(src: Source, base: Path, ctx: Context) -> None:
    """AzureManagedMachinePool(Template): an AKS agent pool (named ``spec.name``, else the
    object's name; nodes carry ``kubernetes.azure.com/agentpool=<it>``)."""
    # CAPZ's webhooks default spec.name to the object's name -- for a ClusterClass template,
    # the template's (azuremanagedmachinepooltemplate_webhook.go), which every cluster's clone
    # copies: the agent pool's name is known in a topology too
    name_path: Path = (*base, "name")
    if src.get(name_path) is not None:
        name = src.text(name_path, "name")
        if name:
            src.pool.rename(name)
            src.compared(name_path, "name", name)
    else:
        own = required_name(src.doc)
        src.pool.rename(own)
        why = f"CAPZ: spec.name defaults to the {src.doc.kind}'s name"
        if placeholder(own):
            src.view.unresolved(name_path, f"{own} ({why})", "name")
        else:
            src.default(name_path, "name", own, why)
    _instance_type(src, (*base, "sku"))
    scaling: Path = (*base, "scaling")
    _bounds(src, (*scaling, "minSize"), (*scaling, "maxSize"))
    _aks_disk(src, base, "osDiskSizeGB", "osDiskType", "kubeletDiskType")
    src.labels((*base, "nodeLabels"))
    taints: Path = (*base, "taints")
    raw = src.get(taints)
    if isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        for taint in src.taint_strings(raw, taints):
            _taint(src, taint, taints)
    else:
        for taint, _, where in src.taint_objects(taints):
            _taint(src, taint, where)
    _max_pods(src, (*base, "maxPods"))
    _aks_spot(src, (*base, "scaleSetPriority"))
    _aks_os(src, base, None)
    _aks_patches(src, (*base, "asoManagedClustersAgentPoolPatches"))
    table = dict(_AKS)
    if base != ("spec",):
        table = {"template.metadata": _TEMPLATE_METADATA, **_under("template.spec", table)}
    src.close(("spec",), table)


def _aso_pool(src: Source, base: Path, ctx: Context) -> None:
    """AzureASOManagedMachinePool(Template): the ASO ``ManagedClustersAgentPool`` among its
    ``resources``."""
    resources: Path = (*base, "resources")
    seen = False
    for i, item in enumerate(src.items(src.get(resources), resources)):
        where: Path = (*resources, i)
        resource = src.mapping(item, where)
        kind = src.string(resource.get("kind"), (*where, "kind"))
        if kind not in ("ManagedClustersAgentPool", "AgentPool") or seen:
            src.ignored(where, f"{kind or 'a resource'}: not the agent pool")
            continue
        seen = True
        src.ignored((*where, "apiVersion"), "ASO API version")
        src.ignored((*where, "kind"), "the agent pool's kind")
        meta: Path = (*where, "metadata")
        src.ignored((*meta, "annotations"), "ASO annotations (credentials): not on Nodes")
        spec: Path = (*where, "spec")
        pool_spec = src.at(spec)
        if not ctx.topology:
            # ASO names the agent pool azureName, else the resource's own name
            for path in ((*spec, "azureName"), (*meta, "name")):
                agent = src.string(src.get(path), path)
                if agent:
                    src.pool.rename(agent)
                    src.compared(path, "name", agent)
                    break
        _instance_type(src, (*spec, "vmSize"))
        _bounds(src, (*spec, "minCount"), (*spec, "maxCount"))
        _aks_disk(src, spec, "osDiskSizeGB", "osDiskType", "kubeletDiskType")
        src.labels((*spec, "nodeLabels"))
        taints: Path = (*spec, "nodeTaints")
        texts = [
            src.string(x, (*taints, j), allow_none=False) or ""
            for j, x in enumerate(src.items(src.get(taints), taints))
        ]
        for taint in src.taint_strings(texts, taints):
            _taint(src, taint, taints)
        startup: Path = (*spec, "nodeInitializationTaints")
        texts = [
            src.string(x, (*startup, j), allow_none=False) or ""
            for j, x in enumerate(src.items(src.get(startup), startup))
        ]
        for taint in src.taint_strings(texts, startup):
            # AKS sets them on new nodes only; workloads may remove them
            src.pool.startup_taints.append(taint)
            src.compared(startup, f"startupTaints.{taint.key}", f"{taint.key}:{taint.effect}")
        _max_pods(src, (*spec, "maxPods"))
        _aks_spot(src, (*spec, "scaleSetPriority"))
        _aks_os(src, spec, "osSKU")
        if pool_spec:
            src.close(spec, _ASO)
        src.close(meta, {"name": "the ASO resource's name"})
    src.close(("spec",), {"template.metadata": _TEMPLATE_METADATA})


def _instance_type(src: Source, path: Path) -> None:
    text = src.text(path, "instanceTypes")
    if text:
        src.pool.instance_types.append(text)
        src.compared(path, "instanceTypes", text)


def _bounds(src: Source, low: Path, high: Path) -> None:
    for path, attr, fact in ((low, "min_size", "minSize"), (high, "max_size", "maxSize")):
        value = src.count(path, fact)
        if value is not None:
            setattr(src.pool, attr, value)
            src.compared(path, fact, value)


def _aks_disk(src: Source, base: Path, size_key: str, type_key: str, kubelet_key: str) -> None:
    size_path: Path = (*base, size_key)
    kubelet = src.text((*base, kubelet_key), "kubeletDiskType")
    if kubelet is not None:
        src.compared((*base, kubelet_key), "kubeletDiskType", kubelet)
    size = src.count(size_path, "diskSizeGiB")
    if kubelet == "Temporary":
        if size:
            src.ignored(
                size_path,
                "kubeletDiskType Temporary: the kubelet's storage is not on the OS disk",
            )
    elif size:  # 0 means "AKS default"
        src.pool.disk_size_gib = size
        src.compared(size_path, "diskSizeGiB", size)
    elif size == 0 or src.get(size_path) is None:
        src.unstated(
            size_path,
            "diskSizeGiB",
            "not stated (or 0): AKS sizes the OS disk by the VM's vCPU count (128 GB for 1-7 "
            "vCPUs, more above), which the file does not say: not compared",
        )
    kind = src.text((*base, type_key), "diskType")
    if kind:
        src.pool.disk_type = kind
        src.compared((*base, type_key), "diskType", kind)


def _max_pods(src: Source, path: Path) -> None:
    pods = src.count(path, "allocatable.pods")
    if pods is not None:
        src.pool.allocatable["pods"] = str(pods)
        src.compared(path, "allocatable.pods", pods)


def _taint(src: Source, taint: Taint, where: Path) -> None:
    src.pool.taints.append(taint)
    src.compared(where, taint.field_name, f"{taint.key}={taint.value or ''}:{taint.effect}")


def _aks_spot(src: Source, path: Path) -> None:
    value = src.text(path, "labels")
    if value is None:
        return
    if value != "Spot":
        src.ignored(path, f"{value} priority: no label or taint of its own")
        return
    origin = src.compared(path, "scaleSetPriority", value)
    why = f"AKS: Spot node pools get this label and taint (scaleSetPriority Spot, {origin})"
    if src.default(path, f"labels.{_SPOT_LABEL}", "spot", why):
        src.pool.labels[_SPOT_LABEL] = "spot"
    if src.default(path, _SPOT_TAINT.field_name, f"{_SPOT_LABEL}=spot:NoSchedule", why):
        src.pool.taints.append(_SPOT_TAINT)


def _aks_os(src: Source, base: Path, sku_key: str | None) -> None:
    """OS SKU (ASO) or OS type; AKS's Ubuntu when Linux and no SKU is stated."""
    if sku_key is not None and src.get((*base, sku_key)) is not None:
        value = src.text((*base, sku_key), "osImage")
        if value is None:
            return
        family = osfamilies.family_of_setting(value)
        if family is None:
            src.ignored((*base, sku_key), f"OS SKU {value!r}: not known to fleetwarden")
        else:
            src.pool.os_families = (family,)
            src.compared((*base, sku_key), "osImage", value)
        if src.get((*base, "osType")) is not None:
            src.ignored((*base, "osType"), "the OS SKU decides the OS")
        return
    os_type: Path = (*base, "osType")
    value = src.text(os_type, "osImage")
    if value is None and src.get(os_type) is not None:
        return
    if value is not None:
        src.compared(os_type, "osImage", value)
    if (value or "Linux") == "Linux":
        _default_os(
            src,
            os_type,
            ("ubuntu",),
            "AKS: the Ubuntu OS SKU for Linux pools when none is set (its release follows the "
            "Kubernetes version)",
        )
    elif value == "Windows":
        _default_os(
            src,
            os_type,
            ("windows",),
            "AKS: Windows Server for Windows pools (the year follows the Kubernetes version)",
        )


def _aks_patches(src: Source, path: Path) -> None:
    """JSON merge patches onto the ASO agent pool CAPZ creates: their literal values win."""
    for i, raw in enumerate(src.items(src.get(path), path)):
        where: Path = (*path, i)
        text = src.string(raw, where, allow_none=False) or ""
        if placeholder(text):
            src.unresolved(where, "osImage", text)
            continue
        try:
            patch = json.loads(text)
        except ValueError:
            src.ignored(where, "not JSON: CAPZ refuses it")
            continue
        spec = patch.get("spec") if isinstance(patch, Mapping) else None
        if not isinstance(spec, Mapping):
            src.ignored(where, "patches no agent pool spec field")
            continue
        _patch_fields(src, where, spec)


def _patch_fields(src: Source, where: Path, spec: Mapping[str, Any]) -> None:
    pool, used = src.pool, []
    sku = spec.get("osSKU") or spec.get("osType")
    if isinstance(sku, str):
        family = osfamilies.family_of_setting(sku)
        if family is not None:
            pool.os_families = (family,)
            src.compared(where, "osImage", f"osSKU {sku}")
            used.append("osSKU")
    size = spec.get("vmSize")
    if isinstance(size, str):
        pool.instance_types = [size]
        src.compared(where, "instanceTypes", size)
        used.append("vmSize")
    pods = spec.get("maxPods")
    if isinstance(pods, int) and not isinstance(pods, bool) and pods >= 0:
        pool.allocatable["pods"] = str(pods)
        src.compared(where, "allocatable.pods", pods)
        used.append("maxPods")
    labels = spec.get("nodeLabels")
    if isinstance(labels, Mapping):
        for key, value in labels.items():
            if isinstance(key, str) and isinstance(value, str):
                pool.labels[key] = value
                src.compared(where, f"labels.{key}", value)
        used.append("nodeLabels")
    rest = ", ".join(sorted(str(k) for k in spec if k not in ("osSKU", "osType", *used)))
    if not used:
        src.ignored(where, f"patched fields not compared: {rest or 'none'}")
    else:
        shown = ", ".join(used) + (f" (not compared: {rest})" if rest else "")
        src.compared(where, "asoPatch", shown)


READERS: dict[str, tuple[Reader, Path]] = {
    "AzureMachineTemplate": (_machine, ("spec", "template", "spec")),
    "AzureMachinePool": (_machine_pool, ("spec", "template")),
    "AzureManagedMachinePool": (_aks_pool, ("spec",)),
    "AzureManagedMachinePoolTemplate": (_aks_pool, ("spec", "template", "spec")),
    "AzureASOManagedMachinePool": (_aso_pool, ("spec",)),
    "AzureASOManagedMachinePoolTemplate": (_aso_pool, ("spec", "template", "spec")),
}
