"""EKS Auto Mode's built-in NodePools, as desired pools.

An Auto Mode cluster (eksctl ``autoModeConfig``, the EKS API's ``computeConfig``) names which of
its two built-in NodePools to create — ``general-purpose`` and ``system`` — not their contents:
AWS manages them and they cannot be edited, only enabled or disabled. What they are is
documented (Amazon EKS user guide, "Enable or Disable Built-in NodePools") and shows in the
NodePool objects EKS creates:

- both: the default EKS NodeClass, on-demand capacity only (``karpenter.sh/capacity-type In
  [on-demand]``), the C, M and R families (``eks.amazonaws.com/instance-category In [c, m,
  r]``), generation 5 or newer (``eks.amazonaws.com/instance-generation Gt 4``), Linux;
- ``system``: the ``CriticalAddonsOnly:NoSchedule`` taint, amd64 and arm64;
- ``general-purpose``: amd64 only, no taint.

Their nodes carry ``karpenter.sh/nodepool: <name>``, so a node dump or a live cluster is
diffed against these requirements and taints like any Karpenter pool's. Every value is a
default with that origin (``fleetwarden explain``).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

from fleetwarden.core.pools import NodePoolSpec, Provisioner, Requirement, Taint
from fleetwarden.formats.accounting import Ledger

__all__ = ["BUILT_IN", "DOCS", "builtin_pool", "check_names"]

GENERAL_PURPOSE = "general-purpose"
SYSTEM = "system"
BUILT_IN: tuple[str, ...] = (GENERAL_PURPOSE, SYSTEM)  # eksctl: AutoModeKnownNodePools
DOCS = (
    "EKS Auto Mode built-in NodePool (Amazon EKS user guide: Enable or Disable Built-in NodePools)"
)

_COMMON = (
    Requirement("karpenter.sh/capacity-type", "In", ("on-demand",)),
    Requirement("eks.amazonaws.com/instance-category", "In", ("c", "m", "r")),
    Requirement("eks.amazonaws.com/instance-generation", "Gt", ("4",)),
    Requirement("kubernetes.io/os", "In", ("linux",)),
)
_ARCH = {
    GENERAL_PURPOSE: Requirement("kubernetes.io/arch", "In", ("amd64",)),
    SYSTEM: Requirement("kubernetes.io/arch", "In", ("amd64", "arm64")),
}
_TAINTS: dict[str, tuple[Taint, ...]] = {
    GENERAL_PURPOSE: (),
    SYSTEM: (Taint("CriticalAddonsOnly", None, "NoSchedule"),),
}


def builtin_pool(
    name: str,
    *,
    cluster: str | None,
    source: str,
    source_format: str,
    attr: str,
    ledger: Ledger,
    kubernetes_version: str | None = None,
) -> NodePoolSpec:
    """The built-in NodePool ``name`` (one of ``BUILT_IN``) of ``cluster``, its facts noted in
    ``ledger`` as defaults stated at ``attr`` (where the file names the pool)."""
    requirements = (*_COMMON, _ARCH[name])
    for req in requirements:
        shown = f"{req.key} {req.operator} {list(req.values)}"
        ledger.default(f"requirements.{req.key}", attr, shown, DOCS)
    taints = _TAINTS[name]
    for taint in taints:
        ledger.default(taint.field_name, attr, f"{taint.key}:{taint.effect}", DOCS)
    if not taints:
        ledger.unstated("taints", attr, f"{DOCS}: {name} has no taint")
    return NodePoolSpec(
        name=name,
        cluster=cluster,
        provider=Provisioner.KARPENTER,
        source=source,
        source_format=source_format,
        requirements=requirements,
        labels=MappingProxyType({}),
        taints=taints,
        kubernetes_version=kubernetes_version,
        heterogeneous=True,
        provenance=dict(ledger.provenance),
        account=ledger.entries(),
    )


def check_names(names: Sequence[str]) -> str | None:
    """Why ``names`` is not a valid built-in NodePool list (eksctl's ValidateAutoModeConfig),
    or None."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return f"found duplicate node pool: {name!r}"
        if name not in BUILT_IN:
            known = ", ".join(BUILT_IN)
            return f"invalid NodePool {name!r} (EKS Auto Mode's built-in NodePools: {known})"
        seen.add(name)
    return None
