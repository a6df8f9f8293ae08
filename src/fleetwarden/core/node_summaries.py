"""A pool's nodes reduced to what its diff reads, so the halves of one dump merge as small data.

``diff_pool`` needs of a pool's nodes only: how many there are; for each distinct combination
of the facts it compares (the values of the labels it checks, the taints, kubelet version, OS
image, disk) the names of the nodes that have it; and, for L3, the allocatable maps in node
order (a median can depend on node order: ``1Gi`` and ``1073741824`` are one amount). A
``NodeSummary`` holds exactly that, built for one desired pool (``Compared``: the labels it
checks, whether it checks disk, whether its medians go by instance type).

Summaries merge: ``merge_summaries(summarise(A), summarise(B)) == summarise(A + B)`` for any
split of a node list into A and B, and so for any number of consecutive parts (first-seen
orders are kept: combinations and groups in the order of their first node, names and runs in
node order). So processes can each reduce the ranges of a dump they read, and only the
summaries cross between them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

from fleetwarden.core.nodes import CONTROL_PLANE_LABELS, INSTANCE_TYPE_LABELS, ObservedNode
from fleetwarden.core.pools import NodePoolSpec, Taint

__all__ = [
    "DISK",
    "ClusterSummary",
    "Compared",
    "Facts",
    "LabelValues",
    "NodeSummary",
    "Row",
    "Run",
    "SummaryBuilder",
    "merge_clusters",
    "merge_summaries",
    "rows_of",
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


LabelValues = tuple[str | None, ...]
"""A node's labels as the values of given label keys, in their order (None: not carried)."""

Row = tuple[
    str,  # name
    LabelValues,  # the values of the builder's ``label_keys``
    tuple[Taint, ...],  # taints
    str | None,  # kubelet version
    str | None,  # OS image
    Mapping[str, str],  # allocatable
    Mapping[str, str],  # capacity
    bool,  # unschedulable (not read)
]
"""A node as a ``SummaryBuilder`` reads it, in ``ObservedNode``'s field order: a reader that
only feeds a summary never makes the node object, and gives only the labels it reads."""


def rows_of(nodes: Iterable[ObservedNode], label_keys: Sequence[str]) -> list[Row]:
    """The nodes as ``SummaryBuilder`` rows for these label keys."""
    return [
        (
            n.name,
            tuple(map(n.labels.get, label_keys)),
            n.taints,
            n.kubelet_version,
            n.os_image,
            n.allocatable,
            n.capacity,
            n.unschedulable,
        )
        for n in nodes
    ]


_STRAY: Facts = ((), (), None, None, None)  # nodes of no desired pool: only names are kept


def summarise_nodes(nodes: Sequence[ObservedNode], compared: Compared | None) -> NodeSummary:
    """The summary of ``nodes`` for a pool comparing ``compared``; None: nodes of no desired
    pool (only their names are kept)."""
    builder = SummaryBuilder(
        lambda _group: compared,
        compared=() if compared is None else (compared,),
        pool_labels=(),
        control_plane=True,
    )
    builder.add(rows_of(nodes, builder.label_keys))
    return builder.summary().groups.get(None) or NodeSummary()


Picker = Callable[[LabelValues], LabelValues]


def _picker(at: Sequence[int]) -> Picker:
    """Picks these positions of a node's label values, as a tuple (even of one or none)."""
    if len(at) >= 2:
        return itemgetter(*at)
    if len(at) == 1:
        i = at[0]
        return lambda values: (values[i],)
    return lambda _values: ()


class _Group:
    """One group's summary while its nodes are added: what it compares and the open run."""

    __slots__ = ("by_type", "disk", "pick", "run_map", "run_names", "run_type", "stray", "summary")

    def __init__(self, compared: Compared | None, at: Mapping[str, int]) -> None:
        self.summary = NodeSummary()
        self.stray = compared is None
        if compared is None:
            compared = Compared()
        self.pick = _picker([at[key] for key in compared.label_keys])
        self.disk, self.by_type = compared.disk, compared.by_type
        self.run_names: list[str] = []
        self.run_map: Mapping[str, str] | None = None
        self.run_type: str | None = None


class SummaryBuilder:
    """A cluster's ``ClusterSummary`` built from its nodes as they are read, a part at a time
    (``add``, in node order), never holding them: the same summary, orders included, as
    summarising the whole node list at once.

    A node's group is the value of the first of ``pool_labels`` it carries (None: none; with
    no ``pool_labels``, every node is in group None); ``compared_of(group)`` says what that
    group's pool compares (None: a group of no desired pool, whose names only are kept), one
    of ``compared``. Control-plane nodes are left out unless ``control_plane``. A row gives
    a node's labels as the values of ``label_keys``: every label the summary reads (pool,
    control-plane and instance-type labels, and the ones each pool compares)."""

    __slots__ = (
        "_at",
        "_compared_of",
        "_control_plane",
        "_groups",
        "_instance_type",
        "_kept",
        "_pools",
        "_taints",
        "label_keys",
    )

    def __init__(
        self,
        compared_of: Callable[[str | None], Compared | None],
        *,
        compared: Iterable[Compared],
        pool_labels: Sequence[str],
        control_plane: bool,
    ) -> None:
        keys = [*pool_labels, *CONTROL_PLANE_LABELS, *INSTANCE_TYPE_LABELS]
        keys += [key for c in compared for key in c.label_keys]
        self.label_keys: tuple[str, ...] = tuple(dict.fromkeys(keys))
        self._at = {key: i for i, key in enumerate(self.label_keys)}
        self._compared_of = compared_of
        self._pools = tuple(self._at[key] for key in pool_labels)
        self._control_plane = (
            None if control_plane else _picker([self._at[key] for key in CONTROL_PLANE_LABELS])
        )
        self._instance_type = tuple(self._at[key] for key in INSTANCE_TYPE_LABELS)
        self._groups: dict[str | None, _Group] = {}
        # taint tuples by identity (nodes read from one dump share them); ``_kept`` holds every
        # tuple whose id is a key, so no id is reused while this builder lives
        self._taints: dict[int, tuple[tuple[str, str | None, str], ...]] = {}
        self._kept: list[object] = []

    def add(self, rows: Iterable[Row]) -> None:
        """The next nodes, in node order."""
        groups = self._groups
        pools = self._pools
        control_plane = self._control_plane
        no_control_plane = (None,) * len(CONTROL_PLANE_LABELS)
        instance_type = self._instance_type
        taint_keys = self._taints
        for name, values, taints, kubelet, os_image, allocatable, capacity, _ in rows:
            if control_plane is not None and control_plane(values) != no_control_plane:
                continue  # a control-plane label is carried (with any value)
            group = None
            for i in pools:
                value = values[i]
                if value:
                    group = value
                    break
            state = groups.get(group)
            if state is None:
                state = groups[group] = _Group(self._compared_of(group), self._at)
            summary = state.summary
            summary.count += 1
            facts = summary.facts
            if state.stray:
                strays = facts.get(_STRAY)
                if strays is None:
                    facts[_STRAY] = [name]
                else:
                    strays.append(name)
                continue
            tkey = taint_keys.get(id(taints))
            if tkey is None:
                tkey = taint_keys[id(taints)] = taints_of(taints)
                self._kept.append(taints)
            key = (
                state.pick(values),
                tkey,
                kubelet,
                os_image,
                capacity.get(DISK) if state.disk else None,
            )
            names = facts.get(key)
            if names is None:
                facts[key] = [name]
            else:
                names.append(name)
            itype = None
            if state.by_type:  # ``ObservedNode.instance_type``: the first one carried
                for i in instance_type:
                    if values[i]:
                        itype = values[i]
                        break
            run_map = state.run_map
            if itype == state.run_type and (allocatable is run_map or allocatable == run_map):
                state.run_names.append(name)
            else:
                state.run_names = [name]
                state.run_map, state.run_type = allocatable, itype
                summary.runs.append((itype, allocatable, state.run_names))

    def summary(self) -> ClusterSummary:
        """The summary of every node added so far, groups in the order of their first node."""
        return ClusterSummary({group: state.summary for group, state in self._groups.items()})


def merge_summaries(*parts: NodeSummary) -> NodeSummary:
    """The summary of the parts' nodes one after the other (all for the same pool), in one
    pass: every name is copied once however many parts there are."""
    facts: dict[Facts, list[str]] = {}
    runs: list[Run] = []
    count = 0
    for part in parts:
        count += part.count
        for key, names in part.facts.items():
            have = facts.get(key)
            if have is None:
                facts[key] = list(names)
            else:
                have.extend(names)
        rest = iter(part.runs)
        if runs:
            first = next(rest, None)
            if first is not None:
                itype, m, names = runs[-1]
                if itype == first[0] and m == first[1]:  # one run across the cut
                    names.extend(first[2])
                else:
                    runs.append((first[0], first[1], list(first[2])))
        runs.extend((itype, m, list(names)) for itype, m, names in rest)
    return NodeSummary(count, facts, runs)


@dataclass(slots=True)
class ClusterSummary:
    """A cluster's nodes by group (the value of their pool label, None: none), each summarised
    for the desired pool it belongs to (``diffing.summarise_cluster``); groups in the order of
    their first node."""

    groups: dict[str | None, NodeSummary] = field(default_factory=dict)

    @property
    def nodes(self) -> int:
        return sum(s.count for s in self.groups.values())


def merge_clusters(*parts: ClusterSummary) -> ClusterSummary:
    """The summary of the parts' nodes one after the other (made for the same desired pools),
    groups in the order of their first node."""
    if len(parts) == 1:
        return parts[0]  # summaries are not changed once made: nothing to copy
    groups: dict[str | None, list[NodeSummary]] = {}
    for part in parts:
        for group, summary in part.groups.items():
            groups.setdefault(group, []).append(summary)
    return ClusterSummary({group: merge_summaries(*each) for group, each in groups.items()})
