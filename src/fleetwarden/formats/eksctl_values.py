"""What eksctl itself refuses in a ``ClusterConfig``, refused here too, with the reason.

eksctl reads its file strictly (``pkg/eks/api.go``: ``yaml.UnmarshalStrict`` into typed Go
structs) and validates it before it creates anything (``pkg/apis/eksctl.io/v1alpha5``
``validation.go``, ``defaults.go``; ``pkg/cfn/builder/nodegroup.go``; ``pkg/utils/taints``). A
file eksctl would refuse never built a cluster, so it is not a desired state to compare: the
readers here raise ``FormatError`` naming the field, the value and what eksctl accepts. Values
that hold an envsubst variable (``${VAR}``: many published eksctl files are templates) are not
refused; the reader lists them as unresolved.
"""

from __future__ import annotations

import re
from typing import Any

from fleetwarden.formats import bootstrap
from fleetwarden.formats.documents import Document, describe_type, expect_int
from fleetwarden.formats.errors import FormatError

__all__ = [
    "API_VERSION",
    "EFFECTS",
    "check_labels",
    "check_sizes",
    "count",
    "family",
    "flag",
    "override_refusal",
    "placeholder",
    "text",
    "version",
]

API_VERSION = "eksctl.io/v1alpha5"
"""The one version of the ``eksctl.io`` API eksctl serves (``pkg/apis/eksctl.io``)."""

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
"""Taint effects eksctl accepts, spelt as Kubernetes spells them (``validateTaintEffect``)."""

_INT64_MAX = 2**63 - 1

# every AMI family some eksctl release accepts (SupportedAMIFamilies, matched ignoring case by
# normalizeAMIFamily; Ubuntu1804 and the two semi-annual Windows releases in older releases)
_FAMILIES = {
    name.lower(): name
    for name in (
        "AmazonLinux2023",
        "AmazonLinux2",
        "Ubuntu2604",
        "UbuntuPro2604",
        "Ubuntu2404",
        "UbuntuPro2404",
        "Ubuntu2204",
        "UbuntuPro2204",
        "Ubuntu2004",
        "UbuntuPro2004",
        "Ubuntu1804",
        "Bottlerocket",
        "BottlerocketFips",
        "WindowsServer2019CoreContainer",
        "WindowsServer2019FullContainer",
        "WindowsServer2022CoreContainer",
        "WindowsServer2022FullContainer",
        "WindowsServer2025CoreContainer",
        "WindowsServer2025FullContainer",
        "WindowsServer2004CoreContainer",
        "WindowsServer20H2CoreContainer",
    )
}
_NATIVE = ("amazonlinux2023", "amazonlinux2", "bottlerocket", "bottlerocketfips")
_VERSION = re.compile(r"[0-9]+\.[0-9]+")
_AL2_LAST_MINOR = (1, 32)  # AmazonLinux2EOLVersion 1.33: eksctl refuses AL2 from there on


def placeholder(value: Any) -> bool:
    """An envsubst variable (``${VAR}``) in a string value: a template, not a value."""
    return isinstance(value, str) and "${" in value


def text(doc: Document, value: Any, where: str, *, allow_none: bool = True) -> str | None:
    """A string field: a number or a boolean there is refused, as eksctl refuses it (a YAML
    ``1.30`` is the number 1.3, not the text)."""
    if value is None and allow_none:
        return None
    if isinstance(value, str):
        return value
    hint = ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        hint = ' (eksctl refuses a number here: quote the value, e.g. "1.30")'
    raise FormatError(
        doc.path, f"expected a string, got {describe_type(value)}{hint}", field=doc.where(where)
    )


def count(doc: Document, value: Any, where: str) -> int | None:
    """A whole number field (sizes, volume size, max pods): a string is refused (eksctl's
    Go integers take no quoted numbers), as are negative and out-of-range numbers."""
    if isinstance(value, str):  # expect_int takes "3": eksctl does not
        raise FormatError(
            doc.path, f"expected an integer, got a string {value!r:.40}", field=doc.where(where)
        )
    number = expect_int(doc, value, where)
    if number is not None and number > _INT64_MAX:
        raise FormatError(doc.path, f"out of range: {number}", field=doc.where(where))
    return number


def flag(doc: Document, value: Any, where: str) -> bool | None:
    """A true/false field (``spot``): a quoted ``"true"`` is refused, as eksctl refuses it."""
    if value is None or isinstance(value, bool):
        return value
    raise FormatError(
        doc.path,
        f"expected true or false, got {describe_type(value)} {value!r:.40}",
        field=doc.where(where),
    )


def version(doc: Document, value: Any) -> tuple[str | None, str | None]:
    """``metadata.version``: (the version, None), or (None, why it is not known) for a value
    eksctl resolves itself (``auto``, ``latest``: per eksctl release) or a variable."""
    raw = text(doc, value, "metadata.version")
    if raw is None or raw == "":
        return None, None
    if placeholder(raw):
        return None, raw
    if raw in ("auto", "latest"):
        which = "default" if raw == "auto" else "newest"
        return None, f"{raw}: the {which} Kubernetes version of the eksctl release that applied it"
    if not _VERSION.fullmatch(raw):
        raise FormatError(
            doc.path,
            f"{raw!r} is not a Kubernetes version eksctl accepts (MAJOR.MINOR such as "
            '"1.30", or auto / latest)',
            field=doc.where("metadata.version"),
        )
    return raw, None


def family(doc: Document, setting: str, where: str, kube_version: str | None) -> str:
    """``amiFamily`` as eksctl names it; an unknown family, or AmazonLinux2 from Kubernetes
    1.33 on, is refused as eksctl refuses it."""
    name = _FAMILIES.get(setting.lower())
    if name is None:
        known = ", ".join(n for n in _FAMILIES.values() if "2004Core" not in n and "20H2" not in n)
        raise FormatError(
            doc.path,
            f"AMI family {setting!r} is not one eksctl knows (one of: {known})",
            field=doc.where(where),
        )
    if name == "AmazonLinux2" and kube_version:
        major, minor = (int(p) for p in kube_version.split(".")[:2])
        if (major, minor) > _AL2_LAST_MINOR:
            raise FormatError(
                doc.path,
                f"AmazonLinux2 is not supported for Kubernetes {kube_version} (eksctl refuses "
                "it from 1.33: EKS has no AmazonLinux2 AMIs there)",
                field=doc.where(where),
            )
    return name


def native_family(name: str | None) -> bool:
    """Does EKS itself provide the AMI of this family (an AMI type of managed node groups)?
    Others (Ubuntu) are AMIs eksctl looks up: to EKS a custom AMI."""
    return name is None or name.lower() in _NATIVE or name.lower().startswith("windows")


def check_sizes(
    doc: Document,
    where: str,
    stated: tuple[int | None, int | None, int | None],
    resolved: tuple[int, int],
) -> None:
    """eksctl's checks of a group's sizes (``nodegroup.go``, ``validation.go``): a stated
    ``desiredCapacity`` within the stated ``minSize`` / ``maxSize``, and ``minSize`` (stated
    or defaulted) at most ``maxSize``."""
    desired, lo, hi = stated
    low, high = resolved
    if desired is not None and lo is not None and desired < lo:
        raise FormatError(
            doc.path,
            f"desiredCapacity ({desired}) is below minSize ({lo}): eksctl refuses it",
            field=doc.where(f"{where}.desiredCapacity"),
        )
    if desired is not None and hi is not None and desired > hi:
        raise FormatError(
            doc.path,
            f"desiredCapacity ({desired}) is above maxSize ({hi}): eksctl refuses it",
            field=doc.where(f"{where}.desiredCapacity"),
        )
    if hi is not None and high < low:
        why = "" if lo is not None else ", eksctl's default without minSize or desiredCapacity"
        raise FormatError(
            doc.path,
            f"minSize ({low}{why}) is above maxSize ({high}): eksctl refuses it",
            field=doc.where(f"{where}.maxSize"),
        )


def check_labels(doc: Document, labels: dict[str, str], where: str) -> None:
    """eksctl's ``validateLabels`` (node groups and managed node groups alike): a key with more
    than one ``/``, one that is no qualified name, a value that is no label value, and a key in
    the kubernetes.io / k8s.io namespaces the kubelet may not set itself (``isKubernetesLabel``
    and not ``kubeletapis.IsKubeletLabel``: only ``kubelet.kubernetes.io/*``,
    ``node.kubernetes.io/*`` and the well-known labels; ``node-role.kubernetes.io/worker`` is
    refused) are refused, "as they would prevent kubelets to start up properly". ``labels``
    holds what the file states; a key or value holding a variable is left to the reader."""
    disallowed: list[str] = []
    for key, value in labels.items():
        if placeholder(key):
            continue
        field_ = doc.where(f"{where}.{key}")
        if key.count("/") > 1:
            raise FormatError(
                doc.path,
                f"node label key {key!r} is of invalid format, can only use one '/' separator "
                "(eksctl refuses it)",
                field=field_,
            )
        if not bootstrap.qualified_name(key):
            raise FormatError(
                doc.path,
                f"label {key!r} is invalid: not a qualified name (eksctl refuses it)",
                field=field_,
            )
        if not placeholder(value) and not bootstrap.label_value(value):
            raise FormatError(
                doc.path,
                f"label {key!r} has invalid value {value!r} (eksctl refuses it)",
                field=field_,
            )
        if "/" in key and not bootstrap.kubelet_may_set(key):
            disallowed.append(key)
    if disallowed:
        raise FormatError(
            doc.path,
            "the following nodegroup labels are disallowed as they have reserved prefixes "
            f"[kubernetes.io/, k8s.io/]: {disallowed} (eksctl refuses them: the kubelet may "
            "set only kubelet.kubernetes.io/*, node.kubernetes.io/* and the well-known labels "
            "in those namespaces)",
            field=doc.where(f"{where}.{disallowed[0]}"),
        )


_UNMARSHALLING = 'unmarshalling "overrideBootstrapCommand" into "nodeadm.NodeConfig"'


def override_refusal(exc: bootstrap.KubeletFlagError) -> str:
    """Why an AmazonLinux2023 ``overrideBootstrapCommand`` is refused, and by which tool. eksctl
    unmarshals its first YAML document into the nodeadm NodeConfig type (``stringToNodeConfig``,
    sigs.k8s.io/yaml: kind and apiVersion unchecked, unknown fields dropped) and refuses text
    that is not YAML or does not unmarshal (a shell script is a YAML string); what does, it
    writes into the user data as a NodeConfig part, which nodeadm refuses unless its kind and
    apiVersion are a NodeConfig's -- and the node does not join."""
    if isinstance(exc, bootstrap.NodeConfigYAMLError):
        return f"not YAML ({exc.problem}): eksctl refuses it ({_UNMARSHALLING})"
    if isinstance(exc, bootstrap.NotNodeConfigError) and not exc.decodes:
        return (
            f"{exc.problem}: eksctl refuses it ({_UNMARSHALLING}: on AmazonLinux2023 "
            "overrideBootstrapCommand is a nodeadm NodeConfig, not a script)"
        )
    if isinstance(exc, bootstrap.NotNodeConfigError):
        return (
            f"{exc.problem}: eksctl writes it into the user data as a NodeConfig part, which "
            "nodeadm refuses: it applies no NodeConfig and the node does not join"
        )
    return str(exc)
