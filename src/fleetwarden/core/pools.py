"""Desired node pools: what a pool should look like, read from any supported format."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "EFFECTS",
    "NO_ATTRIBUTE",
    "FieldAccount",
    "FieldStatus",
    "NodePoolSpec",
    "Provisioner",
    "Requirement",
    "Taint",
    "Unresolved",
    "normalise_effect",
]

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_EFFECT_ALIASES = {
    "noschedule": "NoSchedule",
    "no_schedule": "NoSchedule",
    "prefernoschedule": "PreferNoSchedule",
    "prefer_no_schedule": "PreferNoSchedule",
    "noexecute": "NoExecute",
    "no_execute": "NoExecute",
}


def normalise_effect(text: str) -> str:
    """Map provider spellings (``NO_SCHEDULE``, ``NoSchedule``) to the Kubernetes one."""
    effect = _EFFECT_ALIASES.get(text.strip().lower())
    if effect is None:
        raise ValueError(f"unknown taint effect {text!r} (expected one of {', '.join(EFFECTS)})")
    return effect


class Provisioner(StrEnum):
    """What defines and provisions a pool's nodes (a cloud's managed node groups, Karpenter,
    Cluster API, or nothing known): ``NodePoolSpec.provider``. Not where a change event came
    from (``events.EventSource``)."""

    AWS = "aws"
    AZURE = "azure"
    GCP = "gcp"
    KARPENTER = "karpenter"
    CAPI = "capi"
    GENERIC = "generic"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str | None
    effect: str

    def _order(self) -> tuple[str, bool, str, str]:
        # no value sorts first; None and a string never compared (two taints of one key, one
        # with a value and one without, made sorted() raise TypeError)
        return (self.key, self.value is not None, self.value or "", self.effect)

    def __lt__(self, other: Taint) -> bool:
        return self._order() < other._order()

    def __le__(self, other: Taint) -> bool:
        return self._order() <= other._order()

    def __gt__(self, other: Taint) -> bool:
        return self._order() > other._order()

    def __ge__(self, other: Taint) -> bool:
        return self._order() >= other._order()

    @property
    def field_name(self) -> str:
        return f"taints.{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Requirement:
    """A Karpenter / node-affinity style requirement on node labels."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()

    def satisfied_by(self, labels: Mapping[str, str]) -> bool | None:
        """True/False, or None when the node does not carry the label (cannot tell)."""
        value = labels.get(self.key)
        op = self.operator
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if value is None:
            return None
        if op == "In":
            return value in self.values
        if op == "NotIn":
            return value not in self.values
        if op in ("Gt", "Lt") and self.values:
            try:
                have, bound = int(value), int(self.values[0])
            except ValueError:
                return None
            return have > bound if op == "Gt" else have < bound
        return None


@dataclass(frozen=True, slots=True)
class Unresolved:
    """A desired value the source does not pin down (a Terraform variable, an expression)."""

    field: str
    expression: str


class FieldStatus(StrEnum):
    """What became of one attribute of a pool's source object (``fleetwarden explain``)."""

    COMPARED = "compared"  # feeds a fact the diff checks against the nodes
    UNRESOLVED = "unresolved"  # states a fact through something not evaluated (a variable)
    IGNORED = "ignored"  # not visible on a Node (IAM, networking, tags ...): the reason says
    UNACCOUNTED = "unaccounted"  # an attribute the reader does not know: not compared


@dataclass(frozen=True, slots=True)
class FieldAccount:
    """One attribute of the source, or one default the provisioner applies.

    ``path`` is the attribute as the source spells it (``volumeSize``,
    ``AWSMachineTemplate/md-0: spec.template.spec.rootVolume.size``); ``fact`` the desired fact
    it feeds (``diskSizeGiB``) when compared; ``detail`` the value, the unresolved expression or
    the reason it is ignored; ``origin`` where the value came from (``file:line``, or
    ``default: eksctl >= 0.190 ...`` for a value the provisioner applies when none is stated).
    """

    path: str
    status: FieldStatus
    detail: str = ""
    fact: str | None = None
    origin: str | None = None

    @property
    def is_default(self) -> bool:
        return (self.origin or "").startswith("default:")

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "status": self.status.value}
        if self.fact is not None:
            out["fact"] = self.fact
        if self.detail:
            key = {
                FieldStatus.COMPARED: "value",
                FieldStatus.UNRESOLVED: "expression",
            }.get(self.status, "reason")
            out[key] = self.detail
        if self.origin is not None:
            out["origin"] = self.origin
        return out


NO_ATTRIBUTE = "(no attribute)"  # the path of an account entry that is a note, not an attribute


def _unattributed(spec: NodePoolSpec) -> tuple[FieldAccount, ...]:
    """The unresolved notes of ``spec`` that no unresolved account entry carries (same fact,
    same expression), as entries; a name matched by its prefix is checked, not unresolved."""
    carried = {(a.fact, a.detail) for a in spec.account if a.status is FieldStatus.UNRESOLVED}
    out: dict[tuple[str, str], FieldAccount] = {}
    for u in spec.unresolved:
        key = (u.field, u.expression)
        if key in carried or key in out or (u.field == "name" and spec.name_prefix is not None):
            continue
        out[key] = FieldAccount(NO_ATTRIBUTE, FieldStatus.UNRESOLVED, u.expression, fact=u.field)
    return tuple(out.values())


# finding field -> the fact of the spec its expected value comes from
_FACT_OF_FIELD = {
    "instanceType": ("instanceTypes", "requirements.node.kubernetes.io/instance-type"),
    "diskSize": ("diskSizeGiB",),
    "osImage": ("osImage",),
    "kubeletVersion": ("kubernetesVersion",),
    "kubeletVersion.mixed": ("kubernetesVersion",),
    "kubeletVersion.unknown": ("kubernetesVersion",),
}
_COUNT_FACTS = ("minSize", "maxSize", "desiredSize")


@dataclass(frozen=True, slots=True)
class NodePoolSpec:
    """The desired state of one node pool in one cluster.

    ``None`` means "not stated by the source": the diff engine then does not check that fact.
    A fact the source states through something unresolvable is listed in ``unresolved``.
    """

    name: str
    cluster: str | None
    provider: Provisioner = Provisioner.GENERIC
    source: str = ""
    source_format: str = ""
    instance_types: tuple[str, ...] = ()
    requirements: tuple[Requirement, ...] = ()
    disk_size_gib: int | None = None
    disk_type: str | None = None
    min_size: int | None = None
    max_size: int | None = None
    desired_size: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    kubernetes_version: str | None = None
    os_family: str | None = None
    # more families the provisioner may have used (a default that changed between releases
    # the files do not name): a node of any of them matches
    os_family_alternatives: tuple[str, ...] = ()
    allocatable: Mapping[str, str] = field(default_factory=dict)
    unresolved: tuple[Unresolved, ...] = ()
    heterogeneous: bool = False  # Karpenter: many instance types by design
    # The provider names the real pool ``<name_prefix><generated suffix>`` (Terraform
    # ``node_group_name_prefix``, terraform-aws-eks ``use_name_prefix``): match by prefix.
    name_prefix: str | None = None
    # fact -> where its value came from: ``file:line`` or ``default: <provisioner> ...``
    # (facts: instanceTypes, diskSizeGiB, minSize, maxSize, desiredSize, labels.<key>,
    # taints.<key>:<effect>, kubernetesVersion, osImage, requirements.<key>, allocatable.<res>)
    provenance: Mapping[str, str] = field(default_factory=dict)
    # every attribute of the source object: compared, unresolved, ignored or unaccounted
    account: tuple[FieldAccount, ...] = ()

    def __post_init__(self) -> None:
        # An unresolved fact a reader noted on no attribute of its own (a per-zone count with
        # no zones stated, a node class not in the tree) is an account entry too: the account
        # is then the one list every count of unresolved values reads (``fleet.field_counts``
        # and ``FleetReport.unresolved``), and ``explain`` shows it.
        extra = _unattributed(self)
        if extra:
            object.__setattr__(self, "account", (*self.account, *extra))

    def __getstate__(self) -> list[object]:
        # readers hand out read-only mappings (types.MappingProxyType), which pickle refuses,
        # and a scan sends the pools to its worker processes: they travel as plain dicts
        return [
            dict(value) if isinstance(value, MappingProxyType) else value
            for value in (getattr(self, f.name) for f in fields(self))
        ]

    def __setstate__(self, state: list[object]) -> None:
        for f, value in zip(fields(self), state, strict=True):
            object.__setattr__(self, f.name, value)

    def origin_of(self, finding_field: str) -> str | None:
        """Where the expected value of a finding on ``finding_field`` was read."""
        prov = self.provenance
        if finding_field == "nodeCount":  # the expectation is min..max, else desired
            bounded = self.min_size is not None or self.max_size is not None
            facts = _COUNT_FACTS[:2] if bounded else _COUNT_FACTS[2:]
            found = {f: prov[f] for f in facts if f in prov}
            origins = set(found.values())
            if len(origins) == 1:
                return origins.pop()
            return "; ".join(f"{f}: {o}" for f, o in found.items()) or None
        for fact in _FACT_OF_FIELD.get(finding_field, (finding_field,)):
            if fact in prov:
                return prov[fact]
        if finding_field.startswith("taints."):
            return prov.get("taints")
        if finding_field.startswith("labels."):
            return prov.get("labels")
        return None

    @property
    def unknown_name(self) -> str | None:
        """Why the name the pool's nodes carry is not known (the expression it comes from, or
        that the provisioner generates it), with no prefix to match it by; None when known.
        Such a pool cannot be matched to nodes, so it is never compared."""
        if self.name_prefix is not None:
            return None
        found = [u.expression for u in self.unresolved if u.field == "name"]
        return "; ".join(found) or None

    @property
    def unresolved_fields(self) -> frozenset[str]:
        return frozenset(u.field for u in self.unresolved)

    def with_cluster(self, cluster: str) -> NodePoolSpec:
        """The pool as part of ``cluster`` (``CLUSTER=PATH``): what its source said of its
        cluster — an unresolved name, say — is then no longer a value left unchecked."""
        why = f"the cluster is given: {cluster} (CLUSTER=PATH)"
        account = tuple(
            replace(a, status=FieldStatus.IGNORED, detail=why, fact=None)
            if a.status is FieldStatus.UNRESOLVED and a.fact == "cluster"
            else a
            for a in self.account
        )
        unresolved = tuple(u for u in self.unresolved if u.field != "cluster")
        return replace(self, cluster=cluster, account=account, unresolved=unresolved)

    @property
    def key(self) -> tuple[str | None, str]:
        return (self.cluster, self.name)
