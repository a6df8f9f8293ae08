"""eksctl's default AMI family (``DefaultNodeImageFamily`` and the managed-group rules of
``SetNodeGroupDefaults`` / ``SetManagedNodeGroupDefaults``, pkg/apis/eksctl.io/v1alpha5/
defaults.go), per eksctl release and Kubernetes version, GPU instance types included.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleetwarden.core import versions
from fleetwarden.formats.provisioners import Release

__all__ = ["default_families", "gpu_kind"]

# eksctl's IsGPUInstanceType (pkg/utils/instance/instance.go, v0.183.0-v0.191.0: NVIDIA p2-p5 and
# g3-g6, Inferentia inf1, Trainium trn1; later releases read a table of the same families, and
# newer ones — p6, inf2, trn2 — are taken in too) and IsARMGPUInstanceType (g5g)
_GPU_PREFIXES = ("p2", "p3", "p4", "p5", "p6", "g3", "g4", "g5", "g6", "inf", "trn")
_ARM_GPU_PREFIXES = ("g5g",)
_GPU_BY_RELEASE = (
    "eksctl's default AMI family for a managed group of GPU instance types on Kubernetes "
    ">= 1.30 depends on its release (SetManagedNodeGroupDefaults, pkg/apis/eksctl.io/v1alpha5/"
    "defaults.go): AmazonLinux2023, which it then refuses for GPUs (0.179-0.182); AmazonLinux2 "
    "(0.183-0.191, and to 0.207 for ARM GPUs, g5g); AmazonLinux2023 (x86 GPUs from 0.192, every "
    "type from 0.208). The file does not say which eksctl applied it: state amiFamily, or set "
    "scan.provisioners.eksctl"
)


def gpu_kind(types: Sequence[str]) -> str | None:
    """ "arm-gpu" (g5g), "gpu" or None: what eksctl's GPU default rules look at."""
    if any(t.startswith(_ARM_GPU_PREFIXES) for t in types):
        return "arm-gpu"
    if any(t.startswith(_GPU_PREFIXES) for t in types):
        return "gpu"
    return None


def _gpu_families(
    release: Release | None, minor: tuple[int, ...] | None, gpu: str
) -> tuple[tuple[str, ...], str] | None:
    """The AMI family a managed group of GPU instance types gets where eksctl's GPU rules
    apply (Kubernetes >= 1.30, or a version not stated), else None (the general default).

    SetManagedNodeGroupDefaults (pkg/apis/eksctl.io/v1alpha5/defaults.go) by tag: v0.179.0-
    v0.182.0 AmazonLinux2023 on >= 1.30 with no GPU rule, and validation.go then refuses NVIDIA
    (and Neuron) types on AmazonLinux2023; v0.183.0-v0.191.0 AmazonLinux2 for any
    IsGPUInstanceType or IsARMGPUInstanceType; v0.192.0-v0.207.0 only IsARMGPUInstanceType;
    v0.208.0 on no GPU rule (AmazonLinux2023 on >= 1.30; from v0.219.0 on every version). The
    rule reads ``instanceType``; with ``instanceTypes`` validation picks the first GPU type."""
    if minor is not None and (minor < (1, 30) or minor >= (1, 33)):
        return None  # below 1.30 no rule differs for GPUs; from 1.33 only AmazonLinux2023
    if release is None:
        return (), _GPU_BY_RELEASE
    shown = ".".join(map(str, release))
    if release >= (0, 208, 0) or release < (0, 179, 0) or (gpu == "gpu" and release >= (0, 192, 0)):
        return None
    if release >= (0, 183, 0):
        return ("amazonlinux2",), f"eksctl {shown}: AmazonLinux2 for GPU instance types"
    why = (
        f"eksctl {shown} defaults to AmazonLinux2023 on Kubernetes >= 1.30 and refuses GPU "
        "instance types on it (state amiFamily)"
    )
    return (), why if minor is not None else f"{why}; below 1.30: AmazonLinux2"


def default_families(
    release: Release | None, version: str | None, *, managed: bool, gpu: str | None = None
) -> tuple[tuple[str, ...], str]:
    """The AMI family eksctl defaults to, per release (eksctl's DefaultNodeImageFamily); no
    family (with why) when it depends on a release the file does not state."""
    al2, al2023 = "amazonlinux2", "amazonlinux2023"
    parsed = versions.parse_version(version) if version else None
    minor = parsed[:2] if parsed is not None else None
    if gpu is not None and managed:
        found = _gpu_families(release, minor, gpu)
        if found is not None:
            return found
    if release is None:
        if minor is not None and minor >= (1, 33):
            return (al2023,), "eksctl: AmazonLinux2023 (EKS has no AmazonLinux2 AMIs from 1.33)"
        return (al2023, al2), (
            "eksctl: AmazonLinux2023 since 0.219, AmazonLinux2 before (the eksctl release is "
            "not stated: set scan.provisioners.eksctl to pick one)"
        )
    shown = ".".join(map(str, release))
    if release >= (0, 219, 0):
        return (al2023,), f"eksctl {shown}: DefaultNodeImageFamily AmazonLinux2023"
    threshold = (1, 30) if managed else (1, 33)
    first = (0, 179, 0) if managed else (0, 209, 0)
    if release >= first and minor is not None and minor >= threshold:
        return (
            al2023,
        ), f"eksctl {shown}: AmazonLinux2023 on Kubernetes >= {threshold[0]}.{threshold[1]}"
    if release >= first and minor is None:
        return (
            al2023,
            al2,
        ), f"eksctl {shown}: AmazonLinux2023 or AmazonLinux2 by Kubernetes version"
    return (al2,), f"eksctl {shown}: DefaultNodeImageFamily AmazonLinux2"
