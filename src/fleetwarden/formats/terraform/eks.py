"""AWS EKS managed node groups: ``aws_eks_node_group``, and the EKS API defaults both it and the
terraform-aws-eks module's managed groups rely on.

What EKS applies when ``CreateNodegroup`` does not say (botocore ``CreateNodegroupRequest``; EKS
User Guide; the provider's ``eks_node_group`` page):

- instance type ``t3.medium`` when neither ``instance_types`` nor a launch template names one;
- disk 20 GiB (Linux, Bottlerocket) / 50 GiB (Windows) when no launch template is used; with one,
  the template's block device mapping, else the AMI's own (AL2/AL2023 20 GiB root, Bottlerocket
  20 GiB data volume; Windows and GPU/NVIDIA/Neuron AMIs: not known, so not compared);
- capacity ``ON_DEMAND``, shown as ``eks.amazonaws.com/capacityType`` on every node;
- AMI type: AL2023 for groups created on Kubernetes >= 1.30, AL2 before. The default is fixed at
  creation and the files do not say when that was, so below 1.30 AL2, from 1.33 (no AL2 AMIs)
  AL2023, and in between or with the version unknown either is accepted;
- version: the cluster's (not compared when the group does not state one).

A group's ``desired_size`` is only its initial size (Terraform ignores it after creation in the
module, and the autoscaler moves it): the node count is checked against ``min_size..max_size``.
During updates EKS taints old nodes ``eks.amazonaws.com/nodegroup=unschedulable:NoSchedule``:
that taint is tolerated, never reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwarden.core import osfamilies, versions
from fleetwarden.core.pools import NodePoolSpec, Provisioner, Taint
from fleetwarden.formats.terraform.hcl import source_text
from fleetwarden.formats.terraform.lines import Path
from fleetwarden.formats.terraform.reading import META_IGNORED, Context, Obj, Reader

__all__ = [
    "CAPACITY_LABEL",
    "DEFAULT_INSTANCE_TYPE",
    "UPDATE_TAINT",
    "AmiDefault",
    "ami_default_disk",
    "api_default_disk",
    "check_accepted",
    "check_sizes",
    "default_families",
    "family_of_ami_type",
    "node_group_pools",
    "root_device",
]

DEFAULT_INSTANCE_TYPE = "t3.medium"
CAPACITY_LABEL = "eks.amazonaws.com/capacityType"
# the values EKS's API takes (Nodegroup amiType / capacityType): any other is rejected
_ACCEPTED: dict[str, tuple[str, ...]] = {
    "ami_type": (
        "AL2_x86_64",
        "AL2_x86_64_GPU",
        "AL2_ARM_64",
        "CUSTOM",
        "BOTTLEROCKET_ARM_64",
        "BOTTLEROCKET_x86_64",
        "BOTTLEROCKET_ARM_64_FIPS",
        "BOTTLEROCKET_x86_64_FIPS",
        "BOTTLEROCKET_ARM_64_NVIDIA",
        "BOTTLEROCKET_x86_64_NVIDIA",
        "WINDOWS_CORE_2019_x86_64",
        "WINDOWS_FULL_2019_x86_64",
        "WINDOWS_CORE_2022_x86_64",
        "WINDOWS_FULL_2022_x86_64",
        "AL2023_x86_64_STANDARD",
        "AL2023_ARM_64_STANDARD",
        "AL2023_x86_64_NEURON",
        "AL2023_x86_64_NVIDIA",
        "AL2023_ARM_64_NVIDIA",
    ),
    "capacity_type": ("ON_DEMAND", "SPOT", "CAPACITY_BLOCK"),
}
UPDATE_TAINT = Taint("eks.amazonaws.com/nodegroup", "unschedulable", "NoSchedule")
_AL2, _AL2023, _BOTTLEROCKET, _WINDOWS = (
    "amazonlinux2",
    "amazonlinux2023",
    "bottlerocket",
    "windows",
)
_NOT_ON_NODE = "not visible on a Node"

_NODE_GROUP_IGNORED: dict[str, str] = {
    **META_IGNORED,
    "node_role_arn": f"IAM role: {_NOT_ON_NODE}",
    "subnet_ids": f"subnets: {_NOT_ON_NODE}",
    "remote_access": f"SSH access: {_NOT_ON_NODE}",
    "tags": f"AWS resource tags: {_NOT_ON_NODE}",
    "tags_all": f"AWS resource tags: {_NOT_ON_NODE}",
    "force_update_version": f"rollout behaviour: {_NOT_ON_NODE}",
    "update_config": f"rolling update settings: {_NOT_ON_NODE}",
    "node_repair_config": f"EKS node auto-repair: {_NOT_ON_NODE}",
    "release_version": "AMI release: not compared (the kubelet minor is, through version)",
    "region": f"AWS region: {_NOT_ON_NODE}",
}


def check_accepted(r: Reader, obj: Obj, attr: str) -> None:
    """A literal ``ami_type`` / ``capacity_type`` EKS would reject is a FormatError naming the
    values it takes; an expression is left to the caller (unresolved)."""
    value = r.scope.resolved(obj.raw(attr))
    accepted = _ACCEPTED[attr]
    if isinstance(value, str) and value not in accepted:
        shown = source_text(value)[:60]
        raise r.error(obj, attr, f"{shown} is not a value EKS accepts: {', '.join(accepted)}")


# a size stated as a literal: the object, the attribute's path in it, the value
Stated = tuple[Obj, Path, int]


def check_sizes(r: Reader, lo: Stated | None, hi: Stated | None, desired: Stated | None) -> None:
    """Stated sizes EKS's API rejects (``desiredSize`` outside ``minSize..maxSize``, or
    ``minSize`` above ``maxSize``) are a FormatError on the attribute at fault."""
    if lo is not None and hi is not None and lo[2] > hi[2]:
        raise r.error(lo[0], lo[1], f"min size {lo[2]} is above max size {hi[2]}: EKS rejects it")
    if desired is None:
        return
    obj, attr, value = desired
    if hi is not None and value > hi[2]:
        raise r.error(obj, attr, f"desired size {value} is above max size {hi[2]}: EKS rejects it")
    if lo is not None and value < lo[2]:
        raise r.error(obj, attr, f"desired size {value} is below min size {lo[2]}: EKS rejects it")


def family_of_ami_type(ami_type: str) -> str | None:
    """``AL2023_x86_64_STANDARD`` -> amazonlinux2023 ...; None for ``CUSTOM`` or unknown."""
    return osfamilies.family_of_setting(ami_type)


def default_families(version: str | None) -> tuple[tuple[str, ...], str]:
    """The AMI family EKS picks when a managed group states no ``ami_type``."""
    parsed = versions.parse_version(version) if version else None
    minor = parsed[:2] if parsed is not None else None
    rule = "EKS: AL2023 for managed groups created on Kubernetes >= 1.30, AL2 before"
    if minor is None:
        return (_AL2023, _AL2), f"{rule} (the version is not stated: either is accepted)"
    if minor >= (1, 33):
        return (_AL2023,), f"{rule}; no AL2 AMIs from 1.33"
    if minor < (1, 30):
        return (_AL2,), f"{rule}; it runs {version}, so it was created before 1.30"
    return (_AL2023, _AL2), f"{rule} (it runs {version}: created then, or earlier and upgraded)"


@dataclass(frozen=True, slots=True)
class AmiDefault:
    """A disk size the AMI or EKS gives, or why none is known."""

    size: int | None
    why: str


def _is_gpu(ami_type: str | None) -> bool:
    text = (ami_type or "").upper()
    return any(part in text for part in ("GPU", "NVIDIA", "NEURON"))


def api_default_disk(families: tuple[str, ...]) -> AmiDefault:
    """EKS's ``diskSize`` default (its own launch template): 20 GiB Linux, 50 GiB Windows."""
    sizes = {50 if f.startswith(_WINDOWS) else 20 for f in families}
    if len(sizes) != 1:
        return AmiDefault(None, "EKS default disk depends on the OS, which is not known")
    size = sizes.pop()
    kind = "Windows" if size == 50 else "Linux and Bottlerocket"
    return AmiDefault(size, f"EKS: diskSize defaults to {size} GiB for {kind}")


def ami_default_disk(families: tuple[str, ...], ami_type: str | None) -> AmiDefault:
    """The AMI's own volume size (a custom launch template without block device mappings)."""
    if not families:
        return AmiDefault(None, "the AMI's own volume size: the AMI is not known")
    if _is_gpu(ami_type):
        return AmiDefault(None, f"the {ami_type} AMI's volume size is not known: not compared")
    if any(f.startswith(_WINDOWS) for f in families):
        return AmiDefault(None, "the Windows AMI's volume size is not known: not compared")
    if set(families) <= {_AL2, _AL2023}:
        return AmiDefault(20, "the EKS AL2/AL2023 AMI's root volume is 20 GiB")
    if set(families) == {_BOTTLEROCKET}:
        return AmiDefault(20, "the Bottlerocket AMI's data volume (/dev/xvdb) is 20 GiB")
    return AmiDefault(None, "the AMI's own volume size is not known: not compared")


def root_device(families: tuple[str, ...]) -> str | None:
    """The device holding the kubelet's ephemeral storage: ``/dev/xvda`` on AL2/AL2023, the
    data volume ``/dev/xvdb`` on Bottlerocket; None when not known (Windows, mixed)."""
    if families and set(families) <= {_AL2, _AL2023}:
        return "/dev/xvda"
    if families and set(families) == {_BOTTLEROCKET}:
        return "/dev/xvdb"
    return None


def node_group_pools(ctx: Context, label: str, body: Mapping[Any, Any]) -> list[NodePoolSpec]:
    """One ``aws_eks_node_group`` (none when ``count = 0``)."""
    r = Reader(ctx, f"aws_eks_node_group.{label}")
    obj = r.obj(body, ("resource", "aws_eks_node_group", label), _NODE_GROUP_IGNORED)
    if not r.exists(obj):
        return []
    name = r.name(obj, "node_group_name", label, prefix="node_group_name_prefix")
    cluster = r.cluster(obj, "cluster_name")
    version = r.text(obj, "version", "kubernetesVersion")
    if not obj.has("version"):
        r.unstated(
            "kubernetesVersion",
            "version",
            "not stated: EKS uses the cluster's version (not compared)",
        )
    launch = _launch_template(r, obj)
    types = r.texts(obj, "instance_types", "instanceTypes")
    if not obj.has("instance_types"):
        if launch:
            r.note("instanceTypes", f"{launch}: the instance type may come from it")
        else:
            types = (DEFAULT_INSTANCE_TYPE,)
            r.default(
                "instanceTypes",
                "instance_types",
                DEFAULT_INSTANCE_TYPE,
                "EKS: t3.medium when neither instance_types nor a launch template names one",
            )
    labels = _capacity(r, obj)
    labels.update(r.labels(obj, "labels") or {})
    families = _families(r, obj, version, launch)
    disk = _disk(r, obj, families, launch)
    scaling = ("scaling_config", 0)
    lo = r.count(obj, (*scaling, "min_size"), "minSize")
    hi = r.count(obj, (*scaling, "max_size"), "maxSize")
    desired = r.count(obj, (*scaling, "desired_size"), "desiredSize")
    check_sizes(
        r,
        *(
            (obj, (*scaling, attr), value) if value is not None else None
            for attr, value in (("min_size", lo), ("max_size", hi), ("desired_size", desired))
        ),
    )
    taints = r.taints(obj, "taint") or ()
    r.dynamic(obj, "taint", "taints")
    r.startup_taints.append(UPDATE_TAINT)
    return [
        r.spec(
            Provisioner.AWS,
            name=name,
            cluster=cluster,
            instance_types=types or (),
            disk_size_gib=disk,
            min_size=lo,
            max_size=hi,
            desired_size=desired,
            labels=labels,
            taints=taints,
            kubernetes_version=version,
            os_family=families[0] if families else None,
            os_family_alternatives=families[1:],
        )
    ]


def _launch_template(r: Reader, obj: Obj) -> str | None:
    """``launch_template { id | name, version }``: what it states is not followed."""
    if not obj.has("launch_template"):
        return None
    spec = obj.raw(("launch_template", 0))
    shown = source_text(spec) if spec is not None else "{}"
    what = f"launch_template {shown}"
    obj.view.unresolved(("launch_template",), f"{what}: not followed", "diskSizeGiB")
    return "launch_template"


def _capacity(r: Reader, obj: Obj) -> dict[str, str]:
    """``capacity_type`` (ON_DEMAND by default) is the node label eks.amazonaws.com/capacityType."""
    fact = f"labels.{CAPACITY_LABEL}"
    check_accepted(r, obj, "capacity_type")
    stated = r.text(obj, "capacity_type", fact, note=False)
    if stated is None and not obj.has("capacity_type"):
        r.default(fact, "capacity_type", "ON_DEMAND", "EKS: managed node groups are ON_DEMAND")
        return {CAPACITY_LABEL: "ON_DEMAND"}
    if stated in ("ON_DEMAND", "SPOT"):
        r.compared(obj, "capacity_type", fact, stated)
        return {CAPACITY_LABEL: stated}
    if stated is not None:
        obj.view.ignored(("capacity_type",), f"{stated}: its node label is not known")
    return {}


def _families(r: Reader, obj: Obj, version: str | None, launch: str | None) -> tuple[str, ...]:
    check_accepted(r, obj, "ami_type")
    ami_type = r.text(obj, "ami_type", "osImage", note=False)
    if ami_type is not None:
        family = family_of_ami_type(ami_type)
        if family is None:
            obj.view.ignored(("ami_type",), f"{ami_type}: the AMI's OS is not known")
            return ()
        r.compared(obj, "ami_type", "osImage", ami_type)
        return (family,)
    if obj.has("ami_type"):
        return ()  # unresolved, noted
    if launch:
        r.note("osImage", f"{launch}: may name a custom AMI")
        return ()
    families, why = default_families(version)
    r.default("osImage", "ami_type", " or ".join(families), why)
    return families


def _disk(r: Reader, obj: Obj, families: tuple[str, ...], launch: str | None) -> int | None:
    size = r.count(obj, "disk_size", "diskSizeGiB")
    if size is not None or obj.has("disk_size"):
        return size
    if launch:
        r.note("diskSizeGiB", f"{launch}: its block device mapping, else the AMI's")
        return None
    found = api_default_disk(families)
    if found.size is None:
        r.unstated("diskSizeGiB", "disk_size", found.why)
    else:
        r.default("diskSizeGiB", "disk_size", found.size, found.why)
    return found.size
