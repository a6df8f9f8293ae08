"""A pool's nodes reduced to what its diff reads, so the halves of one dump merge as small data.

``diff_pool`` needs of a pool's nodes only: how many there are; for each distinct combination
of the facts it compares (the values of the labels it checks, the taints, kubelet version, OS
image, disk) the names of the nodes that have it; and, for L3, the allocatable maps in node
order (a median can depend on node order: ``1Gi`` and ``1073741824`` are one amount). A
``NodeSummary`` holds exactly that, built for one desired pool (``Compared``: the labels it
checks, whether it checks disk, whether its medians go by instance type).

Summaries merge: ``merge_summaries(summarise(A), summarise(B)) == summarise(A + B)`` for any
split of a node list into A and B (first-seen orders are kept: combinations and groups in the
order of their first node, names and runs in node order). So two processes can each reduce the
half of a dump they read, and only the summaries cross between them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fleetwarden.core.nodes import INSTANCE_TYPE_LABELS, ObservedNode
from fleetwarden.core.pools import NodePoolSpec, Taint

__all__ = [
    "DISK",
    "ClusterSummary",
    "Compared",
    "Facts",
    "NodeSummary",
    "Run",
    "merge_clusters",
    "merge_summaries",
    "summarise_nodes",
    "taints_of",
]

DISK = "ephemeral-storage"
"""The capacity that stands for a node's disk."""

Facts = tuple[
    tuple[str | None, ...],  # the values of ``Compared.label_keys`` (None: label absent)
    tuple[tuple[str, str | None, str], ...],  # taints: key, value, effect
    str | None,  # kubelet version
    str | None,  # OS image
    str | None,  # the disk capacity's text, when the pool states a disk size
]
"""What the node checks of ``diff_pool`` read of one node (L1, L2, L4, SPEC)."""

Run = tuple[str | None, Mapping[str, str], list[str]]
"""Consecutive nodes with one allocatable map (equal content) and, when the pool's medians go
by instance type, one instance type: (instance type or None, map, names)."""


@dataclass(frozen=True, slots=True)
class Compared:
    """What a pool's diff compares, so what a summary of its nodes must keep."""

    label_keys: tuple[str, ...] = ()
    disk: bool = False
    by_type: bool = False

    @classmethod
    def of(cls, spec: NodePoolSpec) -> Compared:
        labels = () if "labels" in spec.unresolved_fields else tuple(spec.labels)
        keys = (*labels, *INSTANCE_TYPE_LABELS, *(r.key for r in spec.requirements))
        return cls(
            label_keys=tuple(dict.fromkeys(keys)),
            disk=bool(spec.disk_size_gib),
            by_type=spec.heterogeneous or len(spec.instance_types) > 1,
        )


@dataclass(slots=True)
class NodeSummary:
    """Some nodes of one pool as its diff reads them (see the module docstring)."""

    count: int = 0
    facts: dict[Facts, list[str]] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)

    def names(self) -> list[str]:
        """Every node's name (grouped by facts, not in node order)."""
        return [name for names in self.facts.values() for name in names]

    def stand_in(self, facts: Facts, compared: Compared) -> ObservedNode:
        """A node with exactly these facts: what the checks read of every node that has them."""
        values, taints, kubelet, os_image, disk = facts
        labels = {k: v for k, v in zip(compared.label_keys, values, strict=True) if v is not None}
        return ObservedNode(
            "",
            labels,
            tuple(Taint(*t) for t in taints),
            kubelet,
            os_image,
            capacity={} if disk is None else {DISK: disk},
        )


def taints_of(taints: Sequence[Taint]) -> tuple[tuple[str, str | None, str], ...]:
    return tuple((t.key, t.value, t.effect) for t in taints)


def summarise_nodes(nodes: Sequence[ObservedNode], compared: Compared | None) -> NodeSummary:
    """The summary of ``nodes`` for a pool comparing ``compared``; None: nodes of no desired
    pool (only their names are kept)."""
    out = NodeSummary(count=len(nodes))
    facts = out.facts
    if compared is None:
        if nodes:
            facts[((), (), None, None, None)] = [n.name for n in nodes]
        return out
    keys = compared.label_keys
    disk = compared.disk
    by_type = compared.by_type
    # taint tuples by identity (nodes read from one dump share them); ``kept`` holds every
    # tuple whose id is a key, so no id is reused while this runs
    taint_keys: dict[int, tuple[tuple[str, str | None, str], ...]] = {}
    kept: list[object] = []
    runs = out.runs
    run_names: list[str] = []
    run_map: Mapping[str, str] | None = None
    run_type: str | None = None
    for node in nodes:
        taints = node.taints
        tkey = taint_keys.get(id(taints))
        if tkey is None:
            tkey = taint_keys[id(taints)] = taints_of(taints)
            kept.append(taints)
        key = (
            tuple(map(node.labels.get, keys)),
            tkey,
            node.kubelet_version,
            node.os_image,
            node.capacity.get(DISK) if disk else None,
        )
        name = node.name
        names = facts.get(key)
        if names is None:
            facts[key] = [name]
        else:
            names.append(name)
        m = node.allocatable
        itype = node.instance_type if by_type else None
        if itype == run_type and (m is run_map or m == run_map):
            run_names.append(name)
        else:
            run_names = [name]
            run_map, run_type = m, itype
            runs.append((itype, m, run_names))
    return out


def merge_summaries(a: NodeSummary, b: NodeSummary) -> NodeSummary:
    """The summary of ``a``'s nodes followed by ``b``'s (both for the same pool)."""
    facts = dict(a.facts)
    for key, names in b.facts.items():
        have = facts.get(key)
        facts[key] = names if have is None else [*have, *names]
    runs = list(a.runs)
    rest = b.runs
    if runs and rest:
        (t1, m1, n1), (t2, m2, n2) = runs[-1], rest[0]
        if t1 == t2 and m1 == m2:  # one run across the cut, as if read in one piece
            runs[-1] = (t1, m1, [*n1, *n2])
            rest = rest[1:]
    runs.extend(rest)
    return NodeSummary(a.count + b.count, facts, runs)


@dataclass(slots=True)
class ClusterSummary:
    """A cluster's nodes by group (the value of their pool label, None: none), each summarised
    for the desired pool it belongs to (``diffing.summarise_cluster``); groups in the order of
    their first node."""

    groups: dict[str | None, NodeSummary] = field(default_factory=dict)

    @property
    def nodes(self) -> int:
        return sum(s.count for s in self.groups.values())


def merge_clusters(a: ClusterSummary, b: ClusterSummary) -> ClusterSummary:
    """The summary of ``a``'s nodes followed by ``b``'s (made for the same desired pools)."""
    groups = dict(a.groups)
    for group, summary in b.groups.items():
        have = groups.get(group)
        groups[group] = summary if have is None else merge_summaries(have, summary)
    return ClusterSummary(groups)
