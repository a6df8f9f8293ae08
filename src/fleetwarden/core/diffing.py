"""The four-layer node-pool diff: desired ``NodePoolSpec`` vs the nodes that carry it.

L1 labels, L2 taints, L3 allocatable, L4 kubelet version, SPEC (instance type, OS image, disk,
pool membership) and COUNT. Pure and fast: one pass over a pool's nodes (plus one for L3
medians); findings are aggregated so one drift shown by many nodes is one finding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fleetwarden.core import osfamilies, versions
from fleetwarden.core.findings import Finding, JsonValue, Layer, Severity
from fleetwarden.core.node_summaries import (
    DISK,
    ClusterSummary,
    Compared,
    NodeSummary,
    Run,
    SummaryBuilder,
    merge_summaries,
    rows_of,
    summarise_nodes,
)
from fleetwarden.core.nodes import INSTANCE_TYPE_LABELS, POOL_LABELS, ObservedNode, pool_of
from fleetwarden.core.pools import NodePoolSpec, Provisioner
from fleetwarden.core.quantities import parse_quantity
from fleetwarden.core.rules import DiffOptions, apply_rules
from fleetwarden.core.subjects import NodePoolRef

__all__ = [
    "ClusterDiff",
    "ClusterSummariser",
    "PoolIndex",
    "comparable",
    "diff_cluster",
    "diff_pool",
    "diff_strays",
    "diff_summary",
    "group_nodes",
    "summarise_cluster",
]

_GIB = float(2**30)

VERSION_UNKNOWN = "kubeletVersion.unknown"
"""The field of a node whose kubelet version cannot be compared with its pool's."""
_VERSION_UNKNOWN_WHY = (
    "the node reports no kubelet version (status.nodeInfo.kubeletVersion), or one that is "
    "not a version: whether it runs the pool's version is unknown"
)
_Key = tuple[Layer, str, object, object, Severity]


class _Collector:
    """Aggregates per-node observations into findings keyed by what differs."""

    __slots__ = ("_messages", "_nodes", "cluster", "pool", "source", "spec")

    def __init__(
        self,
        cluster: str,
        pool: str | None,
        source: str | None,
        spec: NodePoolSpec | None = None,
    ) -> None:
        self.cluster, self.pool, self.source, self.spec = cluster, pool, source, spec
        self._nodes: dict[_Key, list[str]] = {}
        self._messages: dict[str, str] = {}  # field -> message

    def add(
        self,
        layer: Layer,
        field_: str,
        expected: object,
        actual: object,
        severity: Severity,
        node: str | None,
    ) -> None:
        key = (layer, field_, _hashable(expected), _hashable(actual), severity)
        names = self._nodes.get(key)
        if names is None:
            names = self._nodes[key] = []
        if node is not None:
            names.append(node)

    def add_all(
        self,
        layer: Layer,
        field_: str,
        expected: object,
        actual: object,
        severity: Severity,
        nodes: list[str],
    ) -> None:
        """``add`` for each of ``nodes`` (their order within a finding does not matter: a
        finding lists its nodes sorted)."""
        key = (layer, field_, _hashable(expected), _hashable(actual), severity)
        names = self._nodes.get(key)
        if names is None:
            names = self._nodes[key] = []
        names.extend(nodes)

    def explain(self, field_: str, message: str) -> None:
        self._messages[field_] = message

    def findings(self) -> list[Finding]:
        out = []
        spec = self.spec
        for (layer, field_, expected, actual, severity), names in self._nodes.items():
            out.append(
                Finding(
                    cluster=self.cluster,
                    pool=self.pool,
                    layer=layer,
                    field=field_,
                    expected=_jsonable(expected),
                    actual=_jsonable(actual),
                    severity=severity,
                    nodes=tuple(sorted(names)),
                    source=self.source,
                    message=self._messages.get(field_, ""),
                    provenance=spec.origin_of(field_) if spec is not None else None,
                    subject=NodePoolRef(self.cluster, self.pool),
                )
            )
        return out


def _hashable(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def _jsonable(value: object) -> JsonValue:
    if isinstance(value, tuple):
        return list(value)
    return value  # type: ignore[return-value]


def _count_expectation(spec: NodePoolSpec) -> JsonValue:
    if spec.min_size is not None or spec.max_size is not None:
        lo = "" if spec.min_size is None else str(spec.min_size)
        hi = "" if spec.max_size is None else str(spec.max_size)
        return f"{lo}..{hi}"
    return spec.desired_size


def diff_pool(
    spec: NodePoolSpec,
    nodes: Sequence[ObservedNode],
    *,
    cluster: str | None = None,
    options: DiffOptions = DiffOptions(),
) -> list[Finding]:
    """All findings for one pool, given the nodes that belong to it (possibly none)."""
    summary = summarise_nodes(nodes, Compared.of(spec))
    return _diff_summary(spec, summary, cluster=cluster, options=options)


def _diff_summary(
    spec: NodePoolSpec, summary: NodeSummary, *, cluster: str | None, options: DiffOptions
) -> list[Finding]:
    """``diff_pool`` of the nodes ``summary`` was made of (``summarise_nodes`` for this pool)."""
    cluster_name = cluster or spec.cluster or ""
    out = _Collector(cluster_name, spec.name, spec.source or None, spec)
    _diff_count(spec, summary.count, out)
    if summary.count:
        _diff_nodes(spec, summary, out, options)
        _diff_allocatable(spec, summary.runs, out, options)
        _diff_versions_mixed(spec, summary, out)
    return apply_rules(out.findings(), severities=options.severities, ignores=options.ignores)


def _diff_count(spec: NodePoolSpec, n: int, out: _Collector) -> None:
    expected = _count_expectation(spec)
    exactly_none = spec.max_size == 0 or (
        spec.min_size is None and spec.max_size is None and spec.desired_size == 0
    )
    if n == 0 and exactly_none:
        return  # no node is what the pool asks for: nothing to report
    if n == 0:
        floor = spec.min_size if spec.min_size is not None else spec.desired_size
        if floor is None:
            severity = Severity.INFO if spec.provider is Provisioner.KARPENTER else Severity.MEDIUM
        else:
            severity = Severity.HIGH if floor > 0 else Severity.INFO
        out.add(Layer.COUNT, "nodeCount", expected, 0, severity, None)
        return
    if spec.min_size is not None and n < spec.min_size:
        out.add(Layer.COUNT, "nodeCount", expected, n, Severity.HIGH, None)
    elif spec.max_size is not None and n > spec.max_size:
        out.add(Layer.COUNT, "nodeCount", expected, n, Severity.MEDIUM, None)
    elif (
        spec.min_size is None
        and spec.max_size is None
        and spec.desired_size is not None
        and n != spec.desired_size
    ):
        sev = Severity.HIGH if n < spec.desired_size else Severity.MEDIUM
        out.add(Layer.COUNT, "nodeCount", expected, n, sev, None)


def _diff_nodes(
    spec: NodePoolSpec, summary: NodeSummary, out: _Collector, options: DiffOptions
) -> None:
    """L1, L2, L4 (per node) and SPEC.

    What a node shows depends only on the facts a summary keeps of it (the values of the
    labels checked, its taints, kubelet version, OS image, disk); nodes of a pool mostly share
    them, so each distinct combination is checked once (``_node_drifts``) and its drifts are
    added for every node that has it. Combinations come in the order of their first node, so
    findings are listed as by checking every node in order."""
    check = _NodeCheck(spec, options)
    add = out.add_all
    for facts, names in summary.facts.items():
        for layer, field_, expected, actual, severity in _node_drifts(
            check, summary.stand_in(facts, check.compared)
        ):
            add(layer, field_, expected, actual, severity, names)
            if field_ == VERSION_UNKNOWN:
                out.explain(field_, _VERSION_UNKNOWN_WHY)


_Drift = tuple[Layer, str, object, object, Severity]


class _NodeCheck:
    """A pool's expectations, prepared once for checking its nodes one by one."""

    __slots__ = (
        "check_taints",
        "compared",
        "disk",
        "disk_hi",
        "disk_lo",
        "families",
        "family_shown",
        "labels",
        "os_ok",
        "requirements",
        "single_type",
        "transient",
        "types",
        "version",
        "version_parsed",
        "want_taints",
    )

    def __init__(self, spec: NodePoolSpec, options: DiffOptions) -> None:
        unresolved = spec.unresolved_fields
        # a fact the source leaves open (a variable, a dynamic block) is not checked at all:
        # an empty set would otherwise read as "no labels/taints" and report false drift
        self.labels = () if "labels" in unresolved else tuple(spec.labels.items())
        self.check_taints = "taints" not in unresolved
        self.transient = frozenset(options.transient_taints) | {t.key for t in spec.startup_taints}
        self.want_taints = {(t.key, t.effect): (t.value or "") for t in spec.taints}
        self.types = frozenset(spec.instance_types)
        self.single_type: JsonValue = (
            spec.instance_types[0] if len(spec.instance_types) == 1 else list(spec.instance_types)
        )
        self.requirements = spec.requirements
        self.version = spec.kubernetes_version
        self.version_parsed = (
            bool(self.version) and versions.parse_version(self.version) is not None
        )
        self.families = (spec.os_family, *spec.os_family_alternatives) if spec.os_family else ()
        self.family_shown: JsonValue = (
            self.families[0] if len(self.families) == 1 else list(self.families)
        )
        self.os_ok: dict[str, bool] = {}
        disk = self.disk = spec.disk_size_gib
        self.disk_lo = disk * (1 - options.disk_tolerance) if disk else 0.0
        self.disk_hi = disk * (1 + 0.05) if disk else 0.0
        self.compared = Compared.of(spec)  # every label the checks read, and the disk


def _node_drifts(check: _NodeCheck, node: ObservedNode) -> list[_Drift]:
    """What one node shows against its pool (L1, L2, L4, SPEC), in the order reported.
    Reads only the labels named in ``check.compared.label_keys``, the taints, kubelet version,
    OS image and the disk capacity (``NodeSummary.stand_in`` relies on it)."""
    out: list[_Drift] = []
    add = out.append
    node_labels = node.labels
    # L1: every pool label, with the node's value
    for key, value in check.labels:
        have = node_labels.get(key)
        if have != value:
            add((Layer.L1, f"labels.{key}", value, have, Severity.HIGH))
    # L2: taints, set equality by key + value + effect
    want_taints = check.want_taints
    if check.check_taints and (want_taints or node.taints):
        seen = set()
        for t in node.taints:
            if t.key in check.transient:
                continue
            k = (t.key, t.effect)
            seen.add(k)
            have_value = t.value or ""
            if k not in want_taints:
                add((Layer.L2, f"taints.{t.key}:{t.effect}", None, have_value, Severity.HIGH))
            elif want_taints[k] != have_value:
                add(
                    (
                        Layer.L2,
                        f"taints.{t.key}:{t.effect}",
                        want_taints[k],
                        have_value,
                        Severity.HIGH,
                    )
                )
        for k, want in want_taints.items():
            if k not in seen:
                add((Layer.L2, f"taints.{k[0]}:{k[1]}", want, None, Severity.HIGH))
    # L4: kubelet version
    version = check.version
    if version:
        have = node.kubelet_version
        ok = versions.matches(version, have) if have else None
        if ok is False:
            add((Layer.L4, "kubeletVersion", version, have, Severity.HIGH))
        elif ok is None and check.version_parsed:  # no version, or not one: cannot tell
            add((Layer.L4, VERSION_UNKNOWN, version, have, Severity.HIGH))
    # SPEC: instance type
    itype = node.instance_type
    if itype is not None:
        if check.types and itype not in check.types:
            add((Layer.SPEC, "instanceType", check.single_type, itype, Severity.CRITICAL))
        for req in check.requirements:
            if req.satisfied_by(node_labels) is False:
                is_type = req.key in INSTANCE_TYPE_LABELS
                field_ = "instanceType" if is_type else f"requirements.{req.key}"
                vals = ", ".join(req.values)
                rule = (
                    f"{req.operator} [{vals}]" if is_type else f"{req.key} {req.operator} [{vals}]"
                )
                actual = itype if is_type else node_labels.get(req.key)
                sev = Severity.CRITICAL if is_type else Severity.HIGH
                add((Layer.SPEC, field_, rule, actual, sev))
    # SPEC: OS image family
    os_image = node.os_image
    families = check.families
    if families and os_image:
        ok = check.os_ok.get(os_image)
        if ok is None:  # nodes of a pool share a handful of images: decide each once
            have_family = osfamilies.family_of_image(os_image)
            ok = check.os_ok[os_image] = have_family is None or any(
                osfamilies.family_matches(f, have_family) for f in families
            )
        if not ok:
            add((Layer.SPEC, "osImage", check.family_shown, os_image, Severity.HIGH))
    # SPEC: disk size, seen as the ephemeral-storage capacity of the root filesystem
    disk = check.disk
    if disk:
        raw = node.capacity.get(DISK)
        if raw:
            try:
                gib = parse_quantity(raw) / _GIB
            except ValueError:
                gib = None
            if gib is not None and not (check.disk_lo <= gib <= check.disk_hi):
                add((Layer.SPEC, "diskSize", disk, round(gib), Severity.MEDIUM))
    return out


def _diff_allocatable(
    spec: NodePoolSpec, runs: Sequence[Run], out: _Collector, options: DiffOptions
) -> None:
    """L3: allocatable within tolerance of the pool's expectation, else of its own median.

    Nodes come as runs of one allocatable map (``NodeSummary.runs``, in node order), so each
    distinct map is looked at once per resource. Findings come out as from a node-by-node
    pass: a finding's first node decides where it is listed, and maps are visited in the order
    of their first node."""
    tol = options.tolerance
    everyone: list[_MapNodes] | None = None
    groups: list[tuple[list[Run], list[_MapNodes]]] | None = None
    for resource in options.resources:
        stated = spec.allocatable.get(resource)
        if stated is not None:
            try:
                want = parse_quantity(stated)
            except ValueError:
                continue
            if everyone is None:
                everyone = _by_map(runs)
            _flag_outliers(resource, stated, want, everyone, tol, out)
            continue
        if groups is None:  # by instance type when the pool's medians go by type (else None)
            by_type: dict[str | None, list[Run]] = defaultdict(list)
            for run in runs:
                by_type[run[0]].append(run)
            groups = [
                (members, _by_map(members))
                for members in by_type.values()
                if sum(len(names) for _t, _m, names in members) >= options.median_min_nodes
            ]
        for members, maps in groups:
            median = _median(resource, members, maps, options.median_min_nodes)
            if median is not None:
                _flag_outliers(resource, median[1], median[0], maps, tol, out)


_MapNodes = tuple[Mapping[str, str], list[str]]


def _by_map(runs: Sequence[Run]) -> list[_MapNodes]:
    """Each distinct allocatable map (by identity) with the names of its nodes, in the order
    of the first node that has it."""
    index: dict[int, list[str]] = {}
    out: list[_MapNodes] = []
    for _type, m, run in runs:
        names = index.get(id(m))
        if names is None:
            names = index[id(m)] = []
            out.append((m, names))
        names.extend(run)
    return out


def _quantity(raw: str) -> float | None:
    try:
        return parse_quantity(raw)
    except ValueError:
        return None


def _median(
    resource: str, members: Sequence[Run], maps: list[_MapNodes], min_nodes: int
) -> tuple[float, str] | None:
    """The median of the members' parsable ``resource`` values and the text it was read from:
    the element at ``(n - 1) // 2`` of the values sorted stably by amount. None when fewer
    than ``min_nodes`` values.

    Nodes of a pool share a few distinct texts, so the texts are counted and the median found
    by walking the counts; when two texts read as the same amount (``1Gi`` and
    ``1073741824``) which one is the median depends on node order, so the sorted list itself
    is built (from the runs, which are in node order)."""
    counts: dict[str, int] = {}
    for m, names in maps:
        raw = m.get(resource)
        if raw is not None:
            counts[raw] = counts.get(raw, 0) + len(names)
    amounts: dict[float, str] = {}
    total = 0
    for raw, n in counts.items():
        value = _quantity(raw)
        if value is None:
            continue
        if amounts.setdefault(value, raw) != raw:
            return _median_sorted(resource, members, min_nodes)
        total += n
    if total < min_nodes:
        return None
    at = (total - 1) // 2
    for value in sorted(amounts):
        raw = amounts[value]
        at -= counts[raw]
        if at < 0:
            return value, raw
    raise AssertionError("unreachable: the counts add up to the total")


def _median_sorted(
    resource: str, members: Sequence[Run], min_nodes: int
) -> tuple[float, str] | None:
    values: list[tuple[float, str]] = []
    for _type, m, names in members:
        raw = m.get(resource)
        if raw is None:
            continue
        value = _quantity(raw)
        if value is not None:
            values.extend([(value, raw)] * len(names))
    if len(values) < min_nodes:
        return None
    values.sort(key=lambda pair: pair[0])
    return values[(len(values) - 1) // 2]


def _flag_outliers(
    resource: str,
    expected_raw: str,
    expected: float,
    maps: list[_MapNodes],
    tol: float,
    out: _Collector,
) -> None:
    if expected <= 0:
        return
    severity = Severity.HIGH if resource == "memory" else Severity.MEDIUM
    field_ = f"allocatable.{resource}"
    for m, names in maps:
        raw = m.get(resource)
        if raw is None:
            continue
        have = _quantity(raw)
        if have is not None and abs(have - expected) / expected > tol:
            out.add_all(Layer.L3, field_, expected_raw, raw, severity, names)


def _diff_versions_mixed(spec: NodePoolSpec, summary: NodeSummary, out: _Collector) -> None:
    """A pool whose nodes run more than one kubelet version (an upgrade under way or stuck).

    Derived, so never double counted: nodes a ``kubeletVersion`` finding already names (they
    run another version than the pool's) are left out; the rest must still disagree.
    """
    want = spec.kubernetes_version
    distinct = {facts[2] for facts in summary.facts if facts[2]}
    if len(distinct) < 2:
        return
    seen: dict[tuple[int, int, int | None], str] = {}
    for have in sorted(distinct):
        if want and versions.matches(want, have) is False:
            continue
        parsed = versions.parse_version(have)
        if parsed is not None and parsed not in seen:
            seen[parsed] = have
    if len(seen) > 1:
        actual = [seen[k] for k in sorted(seen, key=lambda v: (v[0], v[1], v[2] or 0))]
        out.add(Layer.L4, "kubeletVersion.mixed", want, actual, Severity.MEDIUM, None)


@dataclass(frozen=True, slots=True)
class ClusterDiff:
    cluster: str
    findings: list[Finding]
    pools: int
    nodes: int


def group_nodes(
    nodes: Iterable[ObservedNode], *, options: DiffOptions = DiffOptions()
) -> dict[str | None, list[ObservedNode]]:
    """Nodes by pool name (``None``: no pool label). Control-plane nodes are left out
    unless ``include_control_plane``."""
    labels = options.pool_labels or POOL_LABELS
    skip_control_plane = not options.include_control_plane
    groups: dict[str | None, list[ObservedNode]] = defaultdict(list)
    for node in nodes:
        if skip_control_plane and node.is_control_plane:
            continue
        groups[pool_of(node, pool_labels=labels)].append(node)
    return groups


def comparable(specs: Sequence[NodePoolSpec]) -> list[NodePoolSpec]:
    """The pools that can be matched to nodes: not those whose name is unknown (an expression,
    or generated): their nodes cannot be told apart, so comparing them would only invent
    findings. ``fleet.assign_pools`` reports each one left out."""
    return [s for s in specs if s.unknown_name is None]


class PoolIndex:
    """Which desired pool a node group (the value of its pool label) belongs to.

    Exact names win; a pool with ``name_prefix`` claims groups named ``<prefix><suffix>``, the
    longest prefix first (``app-gpu-`` claims ``app-gpu-2025...`` before ``app-`` can).

    ``held``: definitions of a pool name defined more than once in the cluster
    (``fleet.assign_pools``). They claim groups as any pool does, but are compared in none:
    ``spec_for`` gives None for their groups and ``held_for`` their name -- their nodes are
    neither compared nor strays. ``specs`` holds the compared pools only.

    ``unnamed``: the cluster's pools whose name is not known (``unknown_name``; those among
    ``specs`` too). They claim no group, but any stray group may be theirs: the strays'
    finding says so (``_strays``).
    """

    def __init__(
        self,
        specs: Sequence[NodePoolSpec],
        *,
        held: Sequence[NodePoolSpec] = (),
        unnamed: Sequence[NodePoolSpec] = (),
    ) -> None:
        every_given = [*specs, *held, *unnamed]
        found = {id(s): s for s in every_given if s.unknown_name is not None}  # each once
        self.unnamed: tuple[NodePoolSpec, ...] = tuple(found.values())
        specs = comparable(specs)
        self.specs = {s.name: s for s in specs}
        self.held = frozenset(s.name for s in comparable(held))
        every = [*specs, *comparable(held)]
        self._named = {s.name: s for s in every}
        self._prefixed = sorted(
            (s for s in every if s.name_prefix), key=lambda s: -len(s.name_prefix or "")
        )
        self._cache: dict[str | None, NodePoolSpec | None] = {}

    def _claim(self, group: str | None) -> NodePoolSpec | None:
        if group in self._cache:
            return self._cache[group]
        found = self._named.get(group) if group is not None else None
        if found is None and group:
            for spec in self._prefixed:
                assert spec.name_prefix is not None
                if group.startswith(spec.name_prefix):
                    found = spec
                    break
        self._cache[group] = found
        return found

    def spec_for(self, group: str | None) -> NodePoolSpec | None:
        """The compared pool the group belongs to (None: a held pool's, or no pool's)."""
        found = self._claim(group)
        return None if found is None or found.name in self.held else found

    def held_for(self, group: str | None) -> str | None:
        """The name of the held pool (defined more than once) the group belongs to, if any."""
        found = self._claim(group)
        return found.name if found is not None and found.name in self.held else None


def diff_strays(
    cluster: str,
    group: str | None,
    nodes: Sequence[ObservedNode],
    *,
    options: DiffOptions = DiffOptions(),
    unnamed: Sequence[NodePoolSpec] = (),
) -> list[Finding]:
    """Nodes whose pool is not in the desired state (or who carry no pool label at all).
    ``unnamed``: the cluster's pools whose name is not known (``PoolIndex.unnamed``)."""
    return _strays(cluster, group, [node.name for node in nodes], options, unnamed)


def _strays(
    cluster: str,
    group: str | None,
    names: list[str],
    options: DiffOptions,
    unnamed: Sequence[NodePoolSpec] = (),
) -> list[Finding]:
    collector = _Collector(cluster, group, None)
    if names:
        collector.add_all(Layer.SPEC, "pool", None, group, Severity.MEDIUM, names)
    why = []
    if group is None:
        looked = ", ".join(options.pool_labels or POOL_LABELS)
        why.append(
            f"these nodes carry none of the pool labels looked for ({looked}); name the label "
            "your nodes carry under scan.poolLabels in --config (e.g. poolLabels: "
            "[example.com/pool])"
        )
    if unnamed:
        why.append(_unnamed_note(cluster, unnamed))
    if why:
        collector.explain("pool", "; ".join(why))
    return apply_rules(collector.findings(), severities=options.severities, ignores=options.ignores)


def _unnamed_note(cluster: str, unnamed: Sequence[NodePoolSpec]) -> str:
    """Why a stray group may not be stray: a pool of the cluster whose name is not known
    (not compared: ``fleet.unnamed_reason``) may be the one its nodes belong to."""
    pools = "; ".join(f"{s.name!r} in {s.source or '<desired>'}: {s.unknown_name}" for s in unnamed)
    if len(unnamed) == 1:
        return (
            f"cluster {cluster!r} has a pool whose name is not known ({pools}): these nodes "
            "may be that pool's"
        )
    return (
        f"cluster {cluster!r} has {len(unnamed)} pools whose names are not known ({pools}): "
        "these nodes may be one of those pools'"
    )


def summarise_cluster(
    specs: Sequence[NodePoolSpec],
    nodes: Sequence[ObservedNode],
    *,
    options: DiffOptions = DiffOptions(),
) -> ClusterSummary:
    """One cluster's nodes reduced to what ``diff_summary`` reads: each group summarised for
    the desired pool it belongs to. Summaries of consecutive parts of a node list merge
    (``node_summaries.merge_clusters``) into the summary of the whole."""
    builder = ClusterSummariser(tuple(specs), options).builder()
    builder.add(rows_of(nodes, builder.label_keys))
    return builder.summary()


@dataclass(frozen=True, slots=True)
class ClusterSummariser:
    """``summarise_cluster`` for these pools and options as one picklable value (a reader
    process is sent it); ``builder()`` summarises the nodes as they are read instead, without
    making them (``node_summaries.SummaryBuilder``: the same summary)."""

    specs: tuple[NodePoolSpec, ...]
    options: DiffOptions = DiffOptions()

    def __call__(self, nodes: Sequence[ObservedNode]) -> ClusterSummary:
        return summarise_cluster(self.specs, nodes, options=self.options)

    def builder(self) -> SummaryBuilder:
        index = PoolIndex(self.specs)
        compared = {spec.name: Compared.of(spec) for spec in index.specs.values()}

        def compared_of(group: str | None) -> Compared | None:
            spec = index.spec_for(group)
            return None if spec is None else compared[spec.name]

        options = self.options
        return SummaryBuilder(
            compared_of,
            compared=compared.values(),
            pool_labels=options.pool_labels or POOL_LABELS,
            control_plane=options.include_control_plane,
        )


def diff_summary(
    cluster: str,
    specs: Sequence[NodePoolSpec],
    summary: ClusterSummary,
    *,
    options: DiffOptions = DiffOptions(),
    held: Sequence[NodePoolSpec] = (),
    unnamed: Sequence[NodePoolSpec] = (),
) -> ClusterDiff:
    """``diff_cluster`` of the nodes ``summary`` was made of (``summarise_cluster`` with the
    same specs and options). Pools whose name is unknown are not compared (``comparable``);
    with them (among ``specs`` or in ``unnamed``), the strays' finding says its nodes may be
    theirs.

    ``held``: desired pools of this cluster that are not compared because their name is
    defined more than once (``fleet.assign_pools``). The nodes they would claim are in the
    desired state, so they are no strays; which definition they follow cannot be told, so
    they are not compared either: the skip that names the pool is what is said of them."""
    index = PoolIndex(specs, held=held, unnamed=unnamed)
    specs = comparable(specs)
    members: dict[str, NodeSummary | None] = {spec.name: None for spec in specs}
    findings: list[Finding] = []
    for group, part in summary.groups.items():
        spec = index.spec_for(group)
        if spec is None:
            if index.held_for(group) is None:
                findings.extend(_strays(cluster, group, part.names(), options, index.unnamed))
        else:  # a pool's groups in the order of their first node, as diff_cluster lists them
            have = members[spec.name]
            members[spec.name] = part if have is None else merge_summaries(have, part)
    for spec in specs:
        part = members[spec.name] or NodeSummary()
        findings.extend(_diff_summary(spec, part, cluster=cluster, options=options))
    return ClusterDiff(cluster=cluster, findings=findings, pools=len(specs), nodes=summary.nodes)


def diff_cluster(
    cluster: str,
    specs: Sequence[NodePoolSpec],
    nodes: Sequence[ObservedNode],
    *,
    options: DiffOptions = DiffOptions(),
    held: Sequence[NodePoolSpec] = (),
    unnamed: Sequence[NodePoolSpec] = (),
) -> ClusterDiff:
    """Every pool of one cluster, plus nodes that belong to no desired pool (``held``,
    ``unnamed``: as in ``diff_summary``)."""
    summary = summarise_cluster(specs, nodes, options=options)
    return diff_summary(cluster, specs, summary, options=options, held=held, unnamed=unnamed)
