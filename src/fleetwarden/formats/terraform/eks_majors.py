"""Which terraform-aws-eks major version a module block uses: its defaults depend on it.

In order of evidence:

1. the ``source`` git ref (``?ref=v19.21.0``) or the ``version`` constraint, when every version
   it allows has one major (``~> 21.0``, ``20.8.4``, ``>= 19, < 20``; ``~> 20`` and ``>= 19``
   do not pin one: Terraform installs the newest version that matches);
2. otherwise ``Assumed.terraform_aws_eks`` (config ``scan.provisioners``), when the block could
   be that major;
3. otherwise every supported major the block could be, from the inputs it uses (Terraform refuses
   an input a major does not have): ``node_groups`` / ``worker_groups*`` are v17; ``name`` or
   ``kubernetes_version`` are v21; ``cluster_name``, ``cluster_version`` or
   ``*_node_group_defaults`` are v18-v20. Readers then accept every value those majors give.

Each major is read as its last release (v17.24, v18.31, v19.21, v20.37, v21.19), as researched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleetwarden.formats.provisioners import Assumed
from fleetwarden.formats.terraform.scope import Scope
from fleetwarden.formats.terraform.sources import eks_module_kind

__all__ = ["SUPPORTED", "Majors", "constraint_majors", "majors_of", "same_checkout", "span"]

SUPPORTED = (17, 18, 19, 20, 21)
_V17_KEYS = (
    "node_groups",
    "node_groups_defaults",
    "worker_groups",
    "worker_groups_launch_template",
    "workers_group_defaults",
)
_V18_20_ROOT_KEYS = (
    "cluster_name",
    "cluster_version",
    "eks_managed_node_group_defaults",
    "self_managed_node_group_defaults",
)
_CLAUSE = re.compile(r"(~>|>=|<=|!=|=|>|<)?\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[-+][\w.-]*)?")
_REF = re.compile(r"[?&]ref=v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:&|$)")

Version = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Majors:
    """The majors a module block may be, and how that was found."""

    majors: tuple[int, ...]
    why: str

    @property
    def label(self) -> str:
        return f"terraform-aws-eks {span(self.majors)} ({self.why})"

    @property
    def pinned(self) -> bool:
        return len(self.majors) == 1


def span(majors: tuple[int, ...]) -> str:
    """(18, 19, 20) -> "v18-v20"; (18, 21) -> "v18, v21"."""
    if not majors:
        return "(none)"
    ordered = sorted(majors)
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 1:
        return f"v{ordered[0]}-v{ordered[-1]}"
    return ", ".join(f"v{m}" for m in ordered)


def _bump(version: Version, components: int) -> Version:
    """The first version above every ``version`` that keeps its first ``components`` - 1."""
    if components <= 1:
        return (version[0] + 1, 0, 0)
    if components == 2:
        return (version[0], version[1] + 1, 0)
    return (version[0], version[1], version[2] + 1)


def constraint_majors(text: str) -> tuple[int, int | None] | None:
    """The majors a Terraform version constraint allows, as (first, last); last None when it
    has no upper bound; None when the constraint cannot be read or allows nothing."""
    lo: Version = (0, 0, 0)
    hi: Version | None = None  # exclusive
    for clause in text.split(","):
        clause = clause.strip()
        if not clause:
            continue
        match = _CLAUSE.fullmatch(clause)
        if match is None:
            return None
        op = match[1] or "="
        parts = [int(p) for p in match.groups()[1:] if p is not None]
        given = len(parts)
        padded = [*parts, 0, 0]
        version: Version = (padded[0], padded[1], padded[2])
        upper: Version | None = None
        if op == "=":
            lo, upper = max(lo, version), _bump(version, 3)
        elif op == ">=":
            lo = max(lo, version)
        elif op == ">":
            lo = max(lo, _bump(version, 3))
        elif op == "<":
            upper = version
        elif op == "<=":
            upper = _bump(version, 3)
        elif op == "~>":
            lo = max(lo, version)
            if given >= 2:  # "~> 20" alone allows every later major too
                upper = _bump(version, given - 1)
        if upper is not None:
            hi = upper if hi is None else min(hi, upper)
    if hi is not None and hi <= lo:
        return None
    if hi is None:
        return lo[0], None
    last = hi[0] - 1 if hi[1:] == (0, 0) else hi[0]
    return lo[0], last


def _pin(module: Mapping[Any, Any]) -> tuple[int, int | None, str] | None:
    source = module.get("source")
    if isinstance(source, str) and (match := _REF.search(source)):
        return int(match[1]), int(match[1]), f"source ref v{match[1]}"
    version = module.get("version")
    if isinstance(version, str):
        found = constraint_majors(version)
        if found is not None:
            return found[0], found[1], f'version "{version}"'
    return None


def _signature(module: Mapping[Any, Any], kind: str) -> tuple[frozenset[int], str]:
    """The majors whose inputs the block uses."""
    if kind == "cluster":
        if any(k in module for k in _V17_KEYS):
            return frozenset({17}), "node_groups / worker_groups are v17 inputs"
        if "kubernetes_version" in module or "name" in module:
            return frozenset({21}), "name / kubernetes_version are v21 inputs"
        if any(k in module for k in _V18_20_ROOT_KEYS):
            return frozenset({18, 19, 20}), "cluster_name / cluster_version are v18-v20 inputs"
        return frozenset({18, 19, 20, 21}), "its inputs fit v18-v21"
    if "kubernetes_version" in module:
        return frozenset({21}), "kubernetes_version is a v21 input"
    if "cluster_version" in module or "platform" in module:
        return frozenset({18, 19, 20}), "cluster_version / platform are v18-v20 inputs"
    return frozenset({18, 19, 20, 21}), "its inputs fit v18-v21"


def majors_of(module: Mapping[Any, Any], kind: str, assume: Assumed) -> Majors:
    """The majors a terraform-aws-eks module block (``kind``: cluster, managed, self-managed)
    may be, per the rules of the module docstring."""
    signature, because = _signature(module, kind)
    pin = _pin(module)
    if pin is not None:
        first, last, text = pin
        if first == last and first in SUPPORTED:
            return Majors((first,), text)
        allowed = frozenset(m for m in SUPPORTED if m >= first and (last is None or m <= last))
        if first == last:
            because = f"{text}: v{first} is not known to fleetwarden; {because}"
        elif allowed & signature:
            signature = allowed & signature
            because = f"{text} does not pin a major; {because}"
    else:
        because = f"version not pinned; {because}"
    assumed = assume.terraform_aws_eks
    if assumed is not None and assumed in signature:
        return Majors((assumed,), f"assumed: scan.provisioners; {because}")
    return Majors(tuple(sorted(signature)), because)


def same_checkout(
    scope: Scope, module: Mapping[Any, Any], majors: Majors, assume: Assumed
) -> Majors:
    """A sub-module called by a local path (``../../modules/eks-managed-node-group``) comes
    from the same checkout as a cluster module of this directory called by its root
    (``../..``): that block's major, when it pins one the sub-module could be."""
    source = module.get("source")
    if not isinstance(source, str) or not source.startswith(("./", "../")):
        return majors
    root = source.split("/modules/", 1)[0]
    for name in scope.modules:
        other = scope.module(name)  # defined once in the directory, else ambiguous
        if other is None or other.get("source") != root or eks_module_kind(other) != "cluster":
            continue
        found = majors_of(other, "cluster", assume)
        if found.pinned and set(found.majors) <= set(majors.majors):
            return Majors(found.majors, f"the checkout of module.{name}: {found.why}")
    return majors
