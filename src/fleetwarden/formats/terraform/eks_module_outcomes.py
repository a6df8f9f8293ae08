"""The values ``eks_module`` works out per terraform-aws-eks major: one fact as one major
reads it (``_Out``), what the user data registers at boot (``_Boot``), and the small
helpers that show and merge them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from fleetwarden.core.integers import ascii_int
from fleetwarden.formats import bootstrap
from fleetwarden.formats.terraform import eks
from fleetwarden.formats.terraform.hcl import Expr, first_unknown
from fleetwarden.formats.terraform.lines import Path
from fleetwarden.formats.terraform.reading import Obj, Reader

__all__: list[str] = []

# -- per-major outcomes -------------------------------------------------------------------------

Use = tuple[Obj, Path]
# attribute -> the fact an unresolved value of it leaves open
_FACTS = {
    "instance_types": "instanceTypes",
    "instance_type": "instanceTypes",
    "ami_type": "osImage",
    "platform": "osImage",
    "min_size": "minSize",
    "max_size": "maxSize",
    "desired_size": "desiredSize",
    "disk_size": "diskSizeGiB",
    "block_device_mappings": "diskSizeGiB",
    "cluster_version": "kubernetesVersion",
    "kubernetes_version": "kubernetesVersion",
    "capacity_type": f"labels.{eks.CAPACITY_LABEL}",
    "schedules": "minSize",
    "mixed_instances_policy": "instanceTypes",
}


@dataclass(frozen=True, slots=True)
class _Out:
    """One fact as one major works it out.

    ``value`` None means no value: ``origin`` then says why, and ``uses`` are the attributes
    that leave it open (noted as unresolved with that reason). With a value, ``uses`` are the
    stated attributes it is read from and ``origin`` is the default's origin, if any.
    """

    value: Any = None
    origin: str = ""
    uses: tuple[Use, ...] = ()
    default: bool = False
    drops: tuple[tuple[Use, str], ...] = ()  # attributes without effect, and why


@dataclass(slots=True)
class _Boot:
    """Labels, taints and max-pods registered at boot, as one major renders the user data."""

    facts: bootstrap.BootFacts = field(default_factory=bootstrap.BootFacts)
    uses: list[Use] = field(default_factory=list)
    drops: list[tuple[Use, str]] = field(default_factory=list)
    opaque: list[tuple[Use, bootstrap.BootFacts]] = field(default_factory=list)

    def key(self) -> tuple[Any, ...]:
        f = self.facts
        return (tuple(sorted(f.labels.items())), tuple(sorted(f.taints)), f.max_pods)

    def read(
        self, r: Reader, use: Use, parse: Callable[[str], bootstrap.BootFacts], text: str
    ) -> None:
        """What ``text`` registers, read by ``parse``, for user data that applies at ``use``:
        a value the kubelet refuses (no node of the group would join) is an error naming the
        attribute."""
        try:
            self.facts.merge(parse(text))
        except bootstrap.KubeletFlagError as exc:
            raise r.error(use[0], use[1], str(exc)) from None
        self.uses.append(use)

    def read_nodeadm_parts(self, r: Reader, use: Use, parts: Any) -> None:
        """``cloudinit_pre_nodeadm``: each NodeConfig part read as nodeadm reads it; the other
        parts (shell scripts) read as the module's other shell user data, never asserted."""
        configs, scripts = _nodeadm_parts(parts)
        if not configs:  # read even if none: the attribute is accounted for
            self.read(r, use, bootstrap.from_nodeadm, "")
        for i, config in configs:  # each a part nodeadm decodes: an empty one is refused
            named = partial(bootstrap.from_nodeadm, part=f"{use[1][-1]}[{i}]")
            self.read(r, use, named, config)
        opaque = bootstrap.read_opaque(bootstrap.from_user_data, scripts)
        if first_unknown(parts) is not None:  # a part not resolved: it may set any
            opaque.found = True
        if opaque.found:
            self.opaque.append((use, opaque))


def _known(obj: Obj, attr: str, value: Any) -> tuple[Use, ...]:
    """The attribute as a use, when its value is known (an unresolved one is noted already)."""
    return ((obj, (attr,)),) if value is not None else ()


def _content(value: Any) -> str:
    """User data text: a string, or the ``content`` of cloud-init parts (one per line)."""
    if isinstance(value, str):
        return value
    parts = value if isinstance(value, list) else [value]
    found = (p.get("content") for p in parts if isinstance(p, dict))
    return "\n".join(c for c in found if isinstance(c, str))


def _nodeadm_parts(value: Any) -> tuple[list[tuple[int, str]], str]:
    """``cloudinit_pre_nodeadm`` parts as (the NodeConfig parts' index and text, the other
    parts' text):
    nodeadm reads a part of type ``application/node.eks.aws`` only; the others are cloud-init's
    (shell scripts). One without a type is ``text/plain`` (the cloudinit provider's default),
    which nodeadm never reads even if it holds a NodeConfig: read with the others, so what it
    seems to set is not asserted."""
    parts = value if isinstance(value, list) else [value]
    configs: list[tuple[int, str]] = []
    others: list[str] = []
    for i, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("content"), str):
            continue
        kind, content = part.get("content_type"), part["content"]
        if isinstance(kind, str) and "node.eks.aws" in kind:
            configs.append((i, content))
        else:
            others.append(content)
    return configs, "\n".join(others)


def _format_of_ami_type(ami_type: str) -> str | None:
    upper = ami_type.upper()
    for prefix, fmt in (
        ("AL2023", "al2023"),
        ("AL2_", "al2"),
        ("BOTTLEROCKET", "bottlerocket"),
        ("WINDOWS", "windows"),
    ):
        if upper.startswith(prefix):
            return fmt
    return None


def _union(values: list[Any]) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        out.extend(value or ())
    return tuple(dict.fromkeys(out))


def _shown(value: Any) -> str:
    if isinstance(value, tuple | list):
        return " or ".join(map(str, value))
    return str(value)


def _sized_by_mappings(
    use: Use, value: Any, families: tuple[str, ...]
) -> tuple[_Out | None, tuple[tuple[Use, str], ...], str | None]:
    """The size of the volume holding ephemeral storage from stated ``block_device_mappings``
    (``value``: resolved as far as it goes, None when not resolved), with the volume's type;
    no outcome when they do not size it (the AMI's own size then applies: the mappings are
    dropped, with why, when they size another device)."""
    if value is None:
        return _Out(None, "block_device_mappings are not resolved"), (), None
    entries = list(value.values()) if isinstance(value, dict) else value
    if not isinstance(entries, list) or not entries:
        return None, (), None
    device = eks.root_device(families)
    if device is None:
        why = "which device holds ephemeral storage is not known for this OS"
        return _Out(None, why, (use,)), (), None
    for entry in entries:
        if not isinstance(entry, dict) or isinstance(entry.get("device_name"), Expr):
            why = "a device name in block_device_mappings is not resolved"
            return _Out(None, why, (use,)), (), None
        if entry.get("device_name") != device:
            continue
        ebs = entry.get("ebs")
        size = ebs.get("volume_size") if isinstance(ebs, dict) else None
        if isinstance(size, str) and (number := ascii_int(size.strip())) is not None:
            size = number
        if isinstance(size, int) and not isinstance(size, bool):
            kind = ebs.get("volume_type") if isinstance(ebs, dict) else None
            return _Out(size, uses=(use,)), (), kind if isinstance(kind, str) else None
        if size is not None:
            return _Out(None, f"the {device} volume_size is not resolved", (use,)), (), None
    return None, ((use, f"sizes no {device}: the AMI's size applies"),), None


def _written_empty(objs: tuple[Obj | None, ...], attr: str) -> Use | None:
    """The attribute as the first of ``objs`` that writes it empty (null, "", [], {}) does."""
    for obj in objs:
        if obj is not None and obj.body.get(attr, 0) in (None, "", [], {}):
            return obj, (attr,)
    return None
