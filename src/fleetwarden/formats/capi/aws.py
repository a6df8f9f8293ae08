"""CAPA (Cluster API Provider AWS): ``AWSMachineTemplate``, ``AWSMachinePool``,
``AWSManagedMachinePool(Template)`` (EKS managed node groups) and ``ROSAMachinePool``.

Defaults, read in CAPA's source (v1.5.0 to v2.11.1):

- OS of a self-managed machine (``ami.id`` unset): the AMI is looked up by
  ``imageLookupFormat`` / ``imageLookupOrg`` / ``imageLookupBaseOS``, each from the machine, else
  from the cluster's ``AWSCluster`` (``AWSManagedControlPlane`` on EKS). The default base OS
  (``defaultMachineAMILookupBaseOS``) is ``ubuntu-18.04`` up to v2.6.1 and ``ubuntu-24.04`` from
  v2.7.0. The file does not name the CAPA release, so both are accepted unless the object pins
  it: a ``v1beta1`` AWSMachineTemplate/AWSMachinePool is not served from v2.4 (so
  ``ubuntu-18.04``), and fields that exist only from v2.8 on (``marketType``,
  ``networkInterfaceType``, ``hostID`` ...) mean ``ubuntu-24.04``. ``imageLookupBaseOS:
  flatcar-stable`` is Flatcar. A lookup format without ``{{.BaseOS}}`` does not say the OS.
- On EKS (the Cluster's control plane is an ``AWSManagedControlPlane``) with none of the three
  lookup fields set, CAPA takes the EKS-optimised AMI from SSM: Amazon Linux 2, or Amazon Linux
  2023 with ``ami.eksLookupType: AmazonLinux2023``.
- ``rootVolume`` unset: no block device is sent and the disk is the AMI's own snapshot size,
  which the file does not say (not compared). ``instanceType`` has no default (required).
- ``spotMarketOptions`` on an AWSMachine: CAPA marks it interruptible and CAPI labels its Node
  ``cluster.x-k8s.io/interruptible=""`` (Machine-backed pools only).
- ``AWSMachinePool``: ``minSize`` / ``maxSize`` default 1 / 1 (CRD defaults): the ASG bounds.
- ``AWSManagedMachinePool``: ``amiType`` defaults to ``AL2_x86_64`` (every CAPA v2 release);
  ``capacityType`` to ``onDemand``, so EKS labels nodes ``eks.amazonaws.com/capacityType=
  ON_DEMAND``; EKS itself picks ``t3.medium`` when no instance type is given (x86_64 AMI types)
  and a 20 GiB disk (50 GiB for Windows) when neither ``diskSize`` nor a launch template is;
  ``eksNodegroupName`` defaults to ``<namespace>_<name>`` (dots as ``_``; a hash when 64
  characters or more, not reproduced here). ``amiType: CUSTOM`` with a launch template boots
  the AMI CAPA looks up for the launch template (the EKS-optimised one by
  ``ami.eksLookupType``). CAPA's webhook refuses an ``instanceType`` or ``diskSize`` beside a
  launch template and a ``scaling.maxSize`` below ``minSize``: errors here too.
- ``ROSAMachinePool``: ``volumeSize`` unset is 300 GiB (CAPA's API reference for the field).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fleetwarden.core import osfamilies
from fleetwarden.formats.accounting import Path
from fleetwarden.formats.capi.objects import Context, Reader, Source
from fleetwarden.formats.provisioners import Release

__all__ = ["READERS"]

_INTERRUPTIBLE = "cluster.x-k8s.io/interruptible"
_CAPACITY = "eks.amazonaws.com/capacityType"
_LOOKUP = ("imageLookupFormat", "imageLookupOrg", "imageLookupBaseOS")
_EKS_LOOKUP = {
    "AmazonLinux": "amazonlinux2",
    "AmazonLinuxGPU": "amazonlinux2",
    "AmazonLinux2023": "amazonlinux2023",
    "AmazonLinux2023GPU": "amazonlinux2023",
}
_BASE_OS = {"amazon-2": "amazonlinux2"}  # CAPA's older published AMIs
_EKS_BOOTSTRAPS = ("EKSConfig", "EKSConfigTemplate", "NodeadmConfig", "NodeadmConfigTemplate")
_KUBEADM_BOOTSTRAPS = ("KubeadmConfig", "KubeadmConfigTemplate")
# fields that exist only from a CAPA release on (AWSMachineSpec / AWSLaunchTemplate)
_MACHINE_SINCE: dict[str, Release] = {
    "networkInterfaceType": (2, 8, 0),
    "marketType": (2, 8, 0),
    "hostID": (2, 9, 0),
    "hostAffinity": (2, 9, 0),
    "capacityReservationPreference": (2, 9, 0),
    "cpuOptions": (2, 10, 0),
    "dynamicHostAllocation": (2, 10, 0),
    "assignPrimaryIPv6": (2, 11, 0),
}
_LAUNCH_SINCE: dict[str, Release] = {
    "marketType": (2, 8, 0),
    "capacityReservationId": (2, 8, 0),
    "capacityReservationPreference": (2, 9, 0),
}
# EKS AMI types whose instances EKS defaults to t3.medium (x86_64, no accelerator)
_T3_MEDIUM_AMI_TYPES = frozenset(
    {
        "AL2_x86_64",
        "AL2023_x86_64_STANDARD",
        "BOTTLEROCKET_x86_64",
        "BOTTLEROCKET_x86_64_FIPS",
        "WINDOWS_CORE_2019_x86_64",
        "WINDOWS_FULL_2019_x86_64",
        "WINDOWS_CORE_2022_x86_64",
        "WINDOWS_FULL_2022_x86_64",
    }
)
_CAPACITY_TYPES = {"onDemand": "ON_DEMAND", "spot": "SPOT", "capacityBlock": "CAPACITY_BLOCK"}

_NOT_ON_NODE = "not visible on a Node"
_VOLUME = f"EBS volume setting: {_NOT_ON_NODE} (its size is compared)"
# AWSMachineSpec: attribute -> why it is not compared
_MACHINE: dict[str, str] = {
    "providerID": "set by CAPA for each Machine: not a desired fact",
    "instanceID": "set by CAPA for each Machine: not a desired fact",
    "additionalTags": f"AWS resource tags: {_NOT_ON_NODE}",
    "tags": f"AWS resource tags: {_NOT_ON_NODE}",
    "iamInstanceProfile": f"IAM instance profile: {_NOT_ON_NODE}",
    "publicIP": f"public IP: {_NOT_ON_NODE}",
    "elasticIpPool": f"public IP pool: {_NOT_ON_NODE}",
    "additionalSecurityGroups": f"security groups: {_NOT_ON_NODE}",
    "securityGroupOverrides": f"security groups: {_NOT_ON_NODE}",
    "subnet": f"subnet: {_NOT_ON_NODE} (zones are not compared for AWSMachines)",
    "failureDomain": "availability zone (a v1beta1 field, dropped by the API server from "
    "v1beta2): zones are not compared for AWSMachines",
    "sshKeyName": f"SSH key: {_NOT_ON_NODE}",
    "nonRootVolumes": "extra EBS volumes: not the kubelet's ephemeral storage",
    "networkInterfaces": f"network interfaces: {_NOT_ON_NODE}",
    "networkInterfaceType": f"network interface type (ENA / EFA): {_NOT_ON_NODE}",
    "assignPrimaryIPv6": f"IPv6 address: {_NOT_ON_NODE}",
    "uncompressedUserData": f"user data delivery: {_NOT_ON_NODE}",
    "cloudInit": f"user data delivery (Secrets Manager / SSM): {_NOT_ON_NODE}",
    "ignition": f"Ignition user data settings: {_NOT_ON_NODE}",
    "placementGroupName": f"EC2 placement group: {_NOT_ON_NODE}",
    "placementGroupPartition": f"EC2 placement group: {_NOT_ON_NODE}",
    "tenancy": f"EC2 tenancy: {_NOT_ON_NODE}",
    "hostID": f"dedicated host: {_NOT_ON_NODE}",
    "hostAffinity": f"dedicated host: {_NOT_ON_NODE}",
    "dynamicHostAllocation": f"dedicated host: {_NOT_ON_NODE}",
    "privateDnsName": "private DNS naming of the instance: node names are not compared",
    "capacityReservationId": f"On-Demand capacity reservation: {_NOT_ON_NODE}",
    "capacityReservationPreference": f"capacity reservation: {_NOT_ON_NODE}",
    "marketType": "EC2 market type: CAPA marks only spotMarketOptions machines interruptible",
    "cpuOptions": "CPU options: not compared (allocatable is compared with the pool's median)",
    "instanceMetadataOptions": f"instance metadata settings: {_NOT_ON_NODE}",
    "rootVolume.type": _VOLUME,
    "rootVolume.iops": _VOLUME,
    "rootVolume.throughput": _VOLUME,
    "rootVolume.encrypted": _VOLUME,
    "rootVolume.encryptionKey": _VOLUME,
    "rootVolume.deviceName": _VOLUME,
}
_LAUNCH: dict[str, str] = {
    key: why
    for key, why in _MACHINE.items()
    if key
    in (
        "iamInstanceProfile",
        "sshKeyName",
        "additionalSecurityGroups",
        "nonRootVolumes",
        "privateDnsName",
        "capacityReservationId",
        "capacityReservationPreference",
        "marketType",
        "instanceMetadataOptions",
    )
    or key.startswith("rootVolume.")
}
_LAUNCH["name"] = f"launch template name: {_NOT_ON_NODE}"
_LAUNCH["versionNumber"] = f"launch template version: {_NOT_ON_NODE}"
_LAUNCH["enclaveOptions"] = f"Nitro Enclaves: {_NOT_ON_NODE}"
_LAUNCH["spotMarketOptions"] = (
    "spot instances of a MachinePool: CAPI labels only Machine-backed nodes interruptible"
)
_ASG: dict[str, str] = {
    "providerID": "set by CAPA: not a desired fact",
    "providerIDList": "set by CAPA: not a desired fact",
    "availabilityZoneSubnetType": f"subnet choice: {_NOT_ON_NODE}",
    "subnets": f"subnets: {_NOT_ON_NODE} (availabilityZones is compared)",
    "additionalTags": f"AWS resource tags: {_NOT_ON_NODE}",
    "defaultCoolDown": f"Auto Scaling group behaviour: {_NOT_ON_NODE}",
    "defaultInstanceWarmup": f"Auto Scaling group behaviour: {_NOT_ON_NODE}",
    "refreshPreferences": f"instance refresh: {_NOT_ON_NODE}",
    "capacityRebalance": f"Auto Scaling group behaviour: {_NOT_ON_NODE}",
    "suspendProcesses": f"Auto Scaling group behaviour: {_NOT_ON_NODE}",
    "ignition": f"Ignition user data settings: {_NOT_ON_NODE}",
    "lifecycleHooks": f"Auto Scaling lifecycle hooks: {_NOT_ON_NODE}",
    "mixedInstancesPolicy.instancesDistribution": "spot / on-demand mix of the Auto Scaling "
    "group: not compared per node",
}
_MANAGED: dict[str, str] = {
    "availabilityZoneSubnetType": f"subnet choice: {_NOT_ON_NODE}",
    "subnetIDs": f"subnets: {_NOT_ON_NODE} (availabilityZones is compared)",
    "additionalTags": f"AWS resource tags: {_NOT_ON_NODE}",
    "roleAdditionalPolicies": f"IAM role: {_NOT_ON_NODE}",
    "roleName": f"IAM role: {_NOT_ON_NODE}",
    "rolePath": f"IAM role: {_NOT_ON_NODE}",
    "rolePermissionsBoundary": f"IAM role: {_NOT_ON_NODE}",
    "amiVersion": "EKS AMI release: not compared (the kubelet version is)",
    "remoteAccess": f"SSH access: {_NOT_ON_NODE}",
    "providerIDList": "set by CAPA: not a desired fact",
    "updateConfig": f"rolling update settings: {_NOT_ON_NODE}",
    "lifecycleHooks": f"Auto Scaling lifecycle hooks: {_NOT_ON_NODE}",
    "nodeRepairConfig": f"EKS node auto-repair: {_NOT_ON_NODE}",
}
_ROSA: dict[str, str] = {
    "nodePoolName": "ROSA node pool name: nodes are grouped by the pool label",
    "version": "OpenShift version: not the kubelet's version (not compared)",
    "availabilityZone": f"zone: {_NOT_ON_NODE} as stated (not compared)",
    "subnet": f"subnet: {_NOT_ON_NODE}",
    "additionalTags": f"AWS resource tags: {_NOT_ON_NODE}",
    "autoRepair": f"auto repair: {_NOT_ON_NODE}",
    "tuningConfigs": "node tuning: not compared",
    "additionalSecurityGroups": f"security groups: {_NOT_ON_NODE}",
    "providerIDList": "set by CAPA: not a desired fact",
    "nodeDrainGracePeriod": f"drain behaviour: {_NOT_ON_NODE}",
    "updateConfig": f"rolling update settings: {_NOT_ON_NODE}",
    "capacityReservationID": f"capacity reservation: {_NOT_ON_NODE}",
}
_TEMPLATE_METADATA = "labels/annotations of the generated AWS objects: not on Nodes"


def _release(version: Release) -> str:
    return f"v{version[0]}.{version[1]}"


# ---------------------------------------------------------------------------------------------
# the cluster around a machine


def _eks(src: Source, ctx: Context) -> bool | None:
    """Is the pool's cluster EKS (CAPA's ``IsEKSManaged``: an AWSManagedControlPlane)?"""
    if ctx.cluster is not None:
        cluster = Source(ctx.cluster, src.pool)
        ref = cluster.ref(("spec", "controlPlaneRef"))
        if ref is not None:
            return ref[0] == "AWSManagedControlPlane"
        infra = cluster.ref(("spec", "infrastructureRef"))
        if infra is not None:
            return infra[0] == "AWSManagedCluster"
    if ctx.bootstrap in _EKS_BOOTSTRAPS:
        return True
    if ctx.bootstrap in _KUBEADM_BOOTSTRAPS:
        return False
    return None


def _cluster_lookup(src: Source, ctx: Context, eks: bool | None) -> Source | None:
    """The object holding the cluster-wide AMI lookup fields (AWSCluster, or the
    AWSManagedControlPlane on EKS), when it is in the tree."""
    if ctx.cluster is None or eks is None:
        return None
    cluster = Source(ctx.cluster, src.pool)
    ref = cluster.ref(("spec", "controlPlaneRef" if eks else "infrastructureRef"))
    if ref is None or ref[0] not in ("AWSCluster", "AWSManagedControlPlane"):
        return None
    doc = ctx.tree.find(ref[0], ref[1], ref[2], ctx.cluster.path)
    return Source(doc, src.pool) if doc is not None else None


# ---------------------------------------------------------------------------------------------
# the OS of an AMI lookup


@dataclass(frozen=True, slots=True)
class _Os:
    families: tuple[str, ...]
    path: Path  # the attribute the value comes from (or would, when defaulted)
    why: str | None = None  # a default: why; None when stated (already noted compared)


def _ami_os(
    src: Source, base: Path, ctx: Context, since: Mapping[str, Release], *, eks: bool | None
) -> _Os | None:
    """The OS family an AWSMachineSpec / AWSLaunchTemplate at ``base`` boots (None: not
    known; the reason is noted)."""
    spec = src.at(base)
    ami: Path = (*base, "ami")
    ami_spec = src.at(ami)
    if eks is None and ami_spec.get("eksLookupType") is not None:
        eks = True  # nobody states an EKS lookup type for a self-managed cluster
    if ami_spec.get("id") is not None:
        if src.text((*ami, "id"), "osImage") is not None:
            src.ignored((*ami, "id"), "AMI id: nodes report only its OS (not compared)")
            src.unstated(
                (*ami, "id"), "osImage", "a custom AMI: its OS is not in the file (not compared)"
            )
        for key in (*_LOOKUP, "eksLookupType"):
            path = (*base, key) if key in _LOOKUP else (*ami, key)
            if src.get(path) is not None:
                src.ignored(path, "not used: ami.id is set")
        return None
    found: dict[str, tuple[Source, Path]] = {}
    unresolved = False
    for key in _LOOKUP:
        if spec.get(key) is not None:
            found[key] = (src, (*base, key))
    cluster = _cluster_lookup(src, ctx, eks) if len(found) < len(_LOOKUP) else None
    if cluster is not None:
        cluster_spec = cluster.at(("spec",))
        for key in _LOOKUP:
            if key not in found and cluster_spec.get(key) is not None:
                found[key] = (cluster, ("spec", key))
    values: dict[str, str] = {}
    for key, (owner, path) in found.items():
        text = owner.text(path, "osImage")
        if text is None:
            unresolved = True
        else:
            values[key] = text
    lookup_type: Path = (*ami, "eksLookupType")
    if unresolved:
        if ami_spec.get("eksLookupType") is not None:
            src.ignored(lookup_type, "the image lookup fields are unresolved")
        return None
    if eks and not found:
        return _eks_os(src, lookup_type)
    if ami_spec.get("eksLookupType") is not None:
        src.ignored(lookup_type, "used only on EKS clusters when no image lookup field is set")
    image_format = values.get("imageLookupFormat")
    for key in ("imageLookupOrg", "imageLookupFormat"):
        if key in found:
            owner, path = found[key]
            owner.ignored(path, "AMI owner / name format: not visible on a Node")
    if image_format is not None and "{{.BaseOS}}" not in image_format:
        if "imageLookupBaseOS" in found:
            owner, path = found["imageLookupBaseOS"]
            owner.ignored(path, "not in imageLookupFormat: does not choose the AMI")
        src.unstated(
            (*base, "imageLookupFormat"),
            "osImage",
            "the AMI name format has no {{.BaseOS}}: the file does not say the OS",
        )
        return None
    if "imageLookupBaseOS" in found:
        owner, path = found["imageLookupBaseOS"]
        value = values["imageLookupBaseOS"]
        family = _BASE_OS.get(value) or osfamilies.family_of_setting(value)
        if family is None:
            owner.ignored(path, f"base OS {value!r}: not an OS family fleetwarden knows")
            return None
        owner.compared(path, "osImage", value)
        return _Os((family,), path)
    if eks is None:
        return _Os(
            ("ubuntu-24.04", "ubuntu-18.04", "amazonlinux2"),
            (*base, "imageLookupBaseOS"),
            "CAPA: ubuntu-24.04 (>= v2.7) or ubuntu-18.04 (<= v2.6) on a self-managed cluster, "
            "the EKS-optimised Amazon Linux 2 AMI on EKS (the Cluster is not in the tree)",
        )
    families, why = _default_base_os(src, base, since)
    return _Os(families, (*base, "imageLookupBaseOS"), why)


def _eks_os(src: Source, lookup_type: Path) -> _Os | None:
    value = src.text(lookup_type, "osImage")
    if value is not None:
        family = _EKS_LOOKUP.get(value)
        if family is None:
            src.ignored(lookup_type, f"EKS lookup type {value!r}: not known to fleetwarden")
            return None
        src.compared(lookup_type, "osImage", value)
        return _Os((family,), lookup_type)
    if src.get(lookup_type) is not None:
        return None  # unresolved, noted
    return _Os(
        ("amazonlinux2",),
        lookup_type,
        "CAPA on EKS: the EKS-optimised Amazon Linux 2 AMI from SSM when no image lookup "
        "field is set (ami.eksLookupType: AmazonLinux2023 picks AL2023)",
    )


def _default_base_os(
    src: Source, base: Path, since: Mapping[str, Release]
) -> tuple[tuple[str, ...], str]:
    """CAPA's defaultMachineAMILookupBaseOS, pinned by the apiVersion or a field if they can."""
    version = src.doc.api_version.rpartition("/")[2]
    if version == "v1beta1":
        return ("ubuntu-18.04",), (
            f"CAPA < v2.4 ({src.doc.kind} v1beta1 is not served from v2.4): "
            "defaultMachineAMILookupBaseOS ubuntu-18.04"
        )
    spec = src.at(base)
    newer = sorted((release, key) for key, release in since.items() if spec.get(key) is not None)
    if newer:
        release, key = newer[-1]
        return ("ubuntu-24.04",), (
            f"CAPA >= {_release(release)} ({key} exists from then): "
            "defaultMachineAMILookupBaseOS ubuntu-24.04"
        )
    return ("ubuntu-24.04", "ubuntu-18.04"), (
        "CAPA: defaultMachineAMILookupBaseOS ubuntu-24.04 since v2.7, ubuntu-18.04 up to v2.6 "
        "(the CAPA release is not in the file: both are accepted)"
    )


def _set_os(src: Source, os: _Os | None) -> None:
    if os is None:
        return
    if os.why is None or src.default(os.path, "osImage", " or ".join(os.families), os.why):
        src.pool.os_families = os.families


# ---------------------------------------------------------------------------------------------
# pieces shared by the kinds


def _instance_type(src: Source, path: Path) -> bool:
    """The instance type at ``path``; True when the file states one (even unresolved)."""
    if src.get(path) is None:
        return False
    text = src.text(path, "instanceTypes")
    if text:
        src.pool.instance_types.append(text)
        src.compared(path, "instanceTypes", text)
    return True


def _root_volume(src: Source, base: Path, *, unstated: str) -> None:
    volume: Path = (*base, "rootVolume")
    if not src.at(volume):
        src.unstated(volume, "diskSizeGiB", unstated)
        return
    size_path: Path = (*volume, "size")
    if src.get(size_path) is None and src.patch_of(size_path) is None:
        # api/v1beta2/types.go Volume: `json:"size"`, required by the CRD
        raise src.error(size_path, "required: CAPA's CRD refuses a rootVolume without a size")
    size = src.count(size_path, "diskSizeGiB")
    if size is not None and size < 8:
        raise src.error(size_path, f"{size} GiB: CAPA's CRD refuses a root volume below 8 GiB")
    if size:
        src.pool.disk_size_gib = size
        src.compared(size_path, "diskSizeGiB", size)
    kind = src.text((*volume, "type"), "diskType")
    if kind:
        src.pool.disk_type = kind
        src.compared((*volume, "type"), "diskType", kind)


_AMI_SIZE = (
    "rootVolume not stated: the root disk is the AMI's snapshot size (CAPA sends no block "
    "device), which the file does not say"
)


def _taints(src: Source, path: Path) -> None:
    for taint, _, where in src.taint_objects(path):
        src.pool.taints.append(taint)
        src.compared(where, taint.field_name, f"{taint.key}={taint.value or ''}:{taint.effect}")


def _bounds(src: Source, low: Path, high: Path) -> bool:
    """min/max sizes at the two paths; True when either is stated."""
    stated = False
    for path, fact in ((low, "minSize"), (high, "maxSize")):
        if src.get(path) is None:
            continue
        stated = True
        value = src.count(path, fact)
        if value is not None:
            setattr(src.pool, "min_size" if fact == "minSize" else "max_size", value)
            src.compared(path, fact, value)
    return stated


# ---------------------------------------------------------------------------------------------
# the kinds


def _machine(src: Source, base: Path, ctx: Context) -> None:
    """AWSMachineTemplate ``spec.template.spec`` (an AWSMachineSpec)."""
    _instance_type(src, (*base, "instanceType"))
    _root_volume(src, base, unstated=_AMI_SIZE)
    _set_os(src, _ami_os(src, base, ctx, _MACHINE_SINCE, eks=_eks(src, ctx)))
    spot: Path = (*base, "spotMarketOptions")
    if "spotMarketOptions" in src.at(base):
        if ctx.owner in ("MachineDeployment", "MachineSet"):
            src.pool.labels[_INTERRUPTIBLE] = ""
            src.compared(spot, f"labels.{_INTERRUPTIBLE}", f"spot: {_INTERRUPTIBLE}=''")
        else:
            src.ignored(spot, _LAUNCH["spotMarketOptions"])
    src.close(
        ("spec",), {"template.metadata": _TEMPLATE_METADATA, **_under("template.spec", _MACHINE)}
    )


def _machine_pool(src: Source, base: Path, ctx: Context) -> None:
    """AWSMachinePool ``spec``: an Auto Scaling group and its launch template."""
    pool = src.pool
    stated = _bounds(src, (*base, "minSize"), (*base, "maxSize"))
    if not stated and pool.min_size is None and pool.max_size is None:
        why = "CAPA AWSMachinePool CRD default: the Auto Scaling group's bounds"
        if src.default((*base, "minSize"), "minSize", 1, why):
            pool.min_size = 1
        if src.default((*base, "maxSize"), "maxSize", 1, why):
            pool.max_size = 1
    launch: Path = (*base, "awsLaunchTemplate")
    mixed: Path = (*base, "mixedInstancesPolicy", "overrides")
    overrides = src.items(src.get(mixed), mixed)
    if overrides:  # the ASG launches these types, not the launch template's
        for i, item in enumerate(overrides):
            where: Path = (*mixed, i)
            src.mapping(item, where)
            _instance_type(src, (*where, "instanceType"))
        if src.get((*launch, "instanceType")) is not None:
            src.ignored(
                (*launch, "instanceType"), "the mixed instances policy's overrides launch instead"
            )
    else:
        _instance_type(src, (*launch, "instanceType"))
    _root_volume(src, launch, unstated=_AMI_SIZE)
    _set_os(src, _ami_os(src, launch, ctx, _LAUNCH_SINCE, eks=_eks(src, ctx)))
    src.zones((*base, "availabilityZones"))
    src.close(("spec",), {**_ASG, **_under("awsLaunchTemplate", _LAUNCH)})


def _managed_pool(src: Source, base: Path, ctx: Context) -> None:
    """AWSManagedMachinePool(Template): an EKS managed node group."""
    pool = src.pool
    if not ctx.topology:
        _nodegroup_name(src, base)
    elif src.get((*base, "eksNodegroupName")) is not None:
        src.ignored((*base, "eksNodegroupName"), "a ClusterClass template's name is generated")
    launch: Path = (*base, "awsLaunchTemplate")
    has_launch = bool(src.at(launch))
    if has_launch:
        _launch_template_conflicts(src, base)
    ami_type = _ami_type(src, base, launch, ctx)
    typed = _instance_type(src, (*base, "instanceType"))
    if has_launch:
        typed = _instance_type(src, (*launch, "instanceType")) or typed
    if not typed:
        if ami_type in _T3_MEDIUM_AMI_TYPES:
            if src.default(
                (*base, "instanceType"),
                "instanceTypes",
                "t3.medium",
                "EKS: t3.medium when a node group states no instance type (CAPA sends none)",
            ):
                pool.instance_types.append("t3.medium")
        else:
            src.unstated(
                (*base, "instanceType"),
                "instanceTypes",
                f"not stated: EKS picks a default for {ami_type or 'this AMI type'} that "
                "fleetwarden does not know",
            )
    scaling: Path = (*base, "scaling")
    if src.get((*scaling, "maxSize")) is None and src.get((*scaling, "minSize")) is not None:
        # CAPA's scalingConfig sends minSize only together with maxSize
        src.ignored((*scaling, "minSize"), "not sent to EKS without scaling.maxSize (CAPA)")
    else:
        _bounds(src, (*scaling, "minSize"), (*scaling, "maxSize"))
        _ordered_bounds(src, (*scaling, "minSize"), (*scaling, "maxSize"))
    _managed_disk(src, base, launch, has_launch, ami_type)
    src.labels((*base, "labels"))
    _taints(src, (*base, "taints"))
    _capacity_type(src, base)
    src.zones((*base, "availabilityZones"))
    src.close(("spec",), _managed_table(base))


def _launch_template_conflicts(src: Source, base: Path) -> None:
    """CAPA's AWSManagedMachinePool webhook (exp/webhooks/awsmanagedmachinepool_webhook.go,
    validateLaunchTemplate) refuses an instance type or a disk size beside a launch template."""
    for key in ("instanceType", "diskSize"):
        if src.get((*base, key)) is not None:
            raise src.error(
                (*base, key),
                f"{key} cannot be set beside awsLaunchTemplate: CAPA refuses the object (set "
                "it in the launch template)",
            )


def _ordered_bounds(src: Source, low: Path, high: Path) -> None:
    """CAPA's webhook (validateScaling) refuses a maxSize below minSize."""
    lo, hi = src.get(low), src.get(high)
    if isinstance(lo, int) and isinstance(hi, int) and hi < lo:
        raise src.error(high, f"maxSize {hi} is below minSize {lo}: CAPA refuses the object")


def _managed_table(base: Path) -> dict[str, str]:
    inner = {**_MANAGED, **_under("awsLaunchTemplate", _LAUNCH)}
    if base == ("spec",):
        return inner
    return {"template.metadata": _TEMPLATE_METADATA, **_under("template.spec", inner)}


def _nodegroup_name(src: Source, base: Path) -> None:
    path: Path = (*base, "eksNodegroupName")
    if src.get(path) is not None:
        name = src.text(path, "name")
        if name:
            src.pool.rename(name)  # nodes carry eks.amazonaws.com/nodegroup=<this>
            src.compared(path, "name", name)
        return
    name, namespace = src.doc.name or "", src.doc.namespace
    generated = f"{namespace}_{name.replace('.', '_')}" if namespace else ""
    if not namespace or "${" in generated or len(generated) >= 64:
        src.pool.unresolve("name", "EKS node group name generated by CAPA (no eksNodegroupName)")
        src.view.unresolved(
            path,
            "generated by CAPA: <namespace>_<name> (a hash when 64 characters or more); "
            + ("the namespace is not stated" if not namespace else f"{generated}"),
            "name",
        )
        return
    if src.default(path, "name", generated, "CAPA webhook: eksNodegroupName <namespace>_<name>"):
        src.pool.rename(generated)


def _ami_type(src: Source, base: Path, launch: Path, ctx: Context) -> str | None:
    """Read amiType (default AL2_x86_64) and the OS it gives; returns the AMI type."""
    path: Path = (*base, "amiType")
    custom = src.get((*launch, "ami", "id")) is not None
    if custom:
        if src.get(path) is not None:
            src.ignored(path, "not sent: the launch template names an AMI")
        _set_os(src, _ami_os(src, launch, ctx, _LAUNCH_SINCE, eks=True))
        return None
    value = src.text(path, "osImage")
    if value is None and src.get(path) is not None:
        return None  # unresolved, noted
    families: tuple[str, ...]
    if value is None:
        value = "AL2_x86_64"
        families = ("amazonlinux2",)
        why: str | None = "CAPA AWSManagedMachinePool CRD default amiType AL2_x86_64"
    elif value == "CUSTOM" and src.at(launch):
        # the launch template's AMI, which CAPA looks up (DiscoverLaunchTemplateAMI: the
        # EKS-optimised one for ami.eksLookupType when no image lookup field is set)
        src.ignored(path, "CUSTOM: the launch template's AMI decides the OS (read there)")
        _set_os(src, _ami_os(src, launch, ctx, _LAUNCH_SINCE, eks=True))
        return value
    else:
        family = osfamilies.family_of_setting(value)
        if family is None:
            src.ignored(path, f"AMI type {value!r}: no OS family fleetwarden knows")
            return value
        families, why = (family,), None
        src.compared(path, "osImage", value)
    if src.at(launch):  # CAPA also looks an AMI up for the launch template
        extra = _ami_os(src, launch, ctx, _LAUNCH_SINCE, eks=True)
        if extra is not None:
            families = tuple(dict.fromkeys((*families, *extra.families)))
    _set_os(src, _Os(families, path, why))
    return value


def _managed_disk(
    src: Source, base: Path, launch: Path, has_launch: bool, ami_type: str | None
) -> None:
    path: Path = (*base, "diskSize")
    if src.get(path) is not None:
        size = src.count(path, "diskSizeGiB")
        if size:
            src.pool.disk_size_gib = size
            src.compared(path, "diskSizeGiB", size)
        return
    if has_launch:
        _root_volume(src, launch, unstated=_AMI_SIZE)
        return
    if ami_type is None:
        return
    windows = ami_type.startswith("WINDOWS")
    size = 50 if windows else 20
    if src.default(
        path,
        "diskSizeGiB",
        size,
        f"EKS: {size} GiB when a node group states no disk size "
        f"({'Windows' if windows else 'Linux and Bottlerocket'}; CAPA sends none)",
    ):
        src.pool.disk_size_gib = size


def _capacity_type(src: Source, base: Path) -> None:
    path: Path = (*base, "capacityType")
    fact = f"labels.{_CAPACITY}"
    if src.get(path) is None:
        if src.default(
            path,
            fact,
            "ON_DEMAND",
            "CAPA: capacityType onDemand (CRD default); EKS labels the nodes with it",
        ):
            src.pool.labels[_CAPACITY] = "ON_DEMAND"
        return
    value = src.text(path, fact)
    if value is None:
        return
    label = _CAPACITY_TYPES.get(value)
    if label is None:
        src.ignored(path, f"capacity type {value!r}: not known to fleetwarden")
        return
    src.pool.labels[_CAPACITY] = label
    src.compared(path, fact, label)


def _rosa_pool(src: Source, base: Path, ctx: Context) -> None:
    """ROSAMachinePool: a ROSA hosted-control-plane node pool."""
    _instance_type(src, (*base, "instanceType"))
    scaling: Path = (*base, "autoscaling")
    _bounds(src, (*scaling, "minReplicas"), (*scaling, "maxReplicas"))
    path: Path = (*base, "volumeSize")
    if src.get(path) is not None:
        size = src.count(path, "diskSizeGiB")
        if size:
            src.pool.disk_size_gib = size
            src.compared(path, "diskSizeGiB", size)
    elif src.default(
        path,
        "diskSizeGiB",
        300,
        "ROSA: 300 GiB when volumeSize is unset (CAPA's ROSAMachinePool API reference)",
    ):
        src.pool.disk_size_gib = 300
    src.labels((*base, "labels"))
    _taints(src, (*base, "taints"))
    image: Path = (*base, "imageType")
    value = src.text(image, "osImage")
    if value == "Windows":
        src.pool.os_families = ("windows",)
        src.compared(image, "osImage", value)
    elif value is not None:
        src.ignored(image, "the default (Linux) image: its OS family is not asserted")
    src.close(("spec",), _ROSA)


def _under(prefix: str, table: Mapping[str, str]) -> dict[str, str]:
    return {f"{prefix}.{key}": why for key, why in table.items()}


READERS: dict[str, tuple[Reader, Path]] = {
    "AWSMachineTemplate": (_machine, ("spec", "template", "spec")),
    "AWSMachinePool": (_machine_pool, ("spec",)),
    "AWSManagedMachinePool": (_managed_pool, ("spec",)),
    "AWSManagedMachinePoolTemplate": (_managed_pool, ("spec", "template", "spec")),
    "ROSAMachinePool": (_rosa_pool, ("spec",)),
}
