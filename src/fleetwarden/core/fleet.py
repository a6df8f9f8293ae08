"""A whole fleet: desired pools of many clusters against the nodes observed in each."""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwarden.core.diffing import ClusterDiff, PoolIndex, diff_cluster
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NO_ATTRIBUTE, FieldStatus, NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.skips import Skip
from fleetwarden.core.subjects import NodePoolRef

__all__ = [
    "Assignment",
    "FleetReport",
    "NothingToCompare",
    "UnresolvedFact",
    "assemble_report",
    "assign_pools",
    "check_comparable",
    "cluster_unknown",
    "coverage_findings",
    "defined_twice",
    "defined_twice_reason",
    "diff_fleet",
    "field_counts",
    "nearest",
    "not_found",
    "severity_order",
    "unnamed_reason",
    "unobserved",
    "unresolved_values",
]


class NothingToCompare(ValueError):
    """The inputs compare nothing (no pool, or no desired cluster among the observed ones):
    a pass would be silent, so the command exits 2 unless ``--allow-empty``."""


def nearest(name: str, candidates: Collection[str]) -> str | None:
    """The closest other name (a typo: ``cluster39`` for ``cluster-39``), if any is close."""
    found = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


def _did_you_mean(name: str, candidates: Collection[str]) -> str:
    near = nearest(name, candidates)
    return f" (did you mean {near!r}?)" if near else ""


def check_comparable(
    specs: Sequence[NodePoolSpec], observed: Collection[str], *, desired_paths: Sequence[str]
) -> None:
    """Raise ``NothingToCompare`` when nothing would be compared, naming both sides."""
    where = ", ".join(desired_paths) or "--desired"
    if not specs:
        raise NothingToCompare(f"no node-pool definition found in {where}")
    named = {s.cluster for s in specs if s.cluster is not None}
    if not named:
        pools = ", ".join(sorted({s.name for s in specs})[:5])
        raise NothingToCompare(
            f"no pool in {where} names its cluster (pools: {pools}); give it as "
            "--desired CLUSTER=PATH"
        )
    named = {s.cluster for s in specs if s.cluster is not None and s.unknown_name is None}
    if not named:
        unnamed = "; ".join(f"{s.name!r}: {s.unknown_name}" for s in specs if s.unknown_name)
        raise NothingToCompare(
            f"no pool in {where} can be matched to nodes: their names are not known "
            f"({unnamed[:300]}); state the names their node groups really have"
        )
    if observed and not named & set(observed):
        desired_list = ", ".join(sorted(named)[:8])
        observed_list = ", ".join(sorted(observed)[:8])
        hints = [f"{d!r} -> {near!r}" for d in sorted(named) if (near := nearest(d, observed))]
        hint = f"; did you mean: {', '.join(hints[:4])}?" if hints else ""
        raise NothingToCompare(
            f"no desired cluster matches an observed one: desired {desired_list} (from "
            f"{where}); observed {observed_list} (node dumps are named by CLUSTER= or the "
            f"file's stem){hint}"
        )
    if observed and not assign_pools(specs, observed).compared:
        # every pool of the observed clusters is defined more than once there: as when no name
        # is known, a run that would compare nothing is refused rather than passed
        twice = [(key, found) for key, found in defined_twice(specs).items() if key[0] in observed]
        (cluster, name), defined = twice[0]
        more = f" (and {len(twice) - 1} more pool names so)" if len(twice) > 1 else ""
        raise NothingToCompare(
            f"no pool in {where} can be compared: "
            f"{defined_twice_reason(cluster, name, defined)}{more}; keep one definition of "
            "each pool per cluster"
        )


def unobserved(
    specs: Iterable[NodePoolSpec], observed: Collection[str]
) -> dict[str, list[NodePoolSpec]]:
    """Each desired cluster nobody observed (sorted), with its pools that would be compared
    there: those whose name is not known are compared nowhere, and ``assign_pools`` says so."""
    missing: dict[str, list[NodePoolSpec]] = defaultdict(list)
    for spec in specs:
        if spec.unknown_name is not None:
            continue  # not compared wherever its cluster is: assign_pools says so
        if spec.cluster is not None and spec.cluster not in observed:
            missing[spec.cluster].append(spec)
    return dict(sorted(missing.items()))


def coverage_findings(specs: Sequence[NodePoolSpec], observed: Collection[str]) -> list[Finding]:
    """One high COUNT finding per desired cluster nobody observed: its pools were not compared,
    which must never pass quietly."""
    out = []
    for cluster, pools in unobserved(specs, observed).items():
        names = sorted({p.name for p in pools})
        out.append(
            Finding(
                cluster=cluster,
                pool=None,
                layer=Layer.COUNT,
                field="cluster",
                expected=names,
                actual=None,
                severity=Severity.HIGH,
                source=pools[0].source or None,
                message=f"no nodes were given for desired cluster {cluster!r}"
                f"{_did_you_mean(cluster, observed)}: its {len(names)} pools were not compared",
                subject=NodePoolRef(cluster, None),
            )
        )
    return out


def not_found(
    cluster: str, pools: Sequence[NodePoolSpec], found: Collection[str]
) -> dict[str, Any]:
    """What a live watch says of a desired cluster it never found among those it watches
    (``unobserved``): the ``cluster.not_compared`` details -- ``reason``, ``pools`` (the names
    not compared) and ``source`` (the first pool's file), as ``coverage_findings`` says it."""
    names = sorted({p.name for p in pools})
    return {
        "reason": f"no cluster watched is named {cluster!r}{_did_you_mean(cluster, found)}: "
        f"its {len(names)} pools were not compared",
        "pools": names,
        "source": pools[0].source or None,
    }


@dataclass(frozen=True, slots=True)
class UnresolvedFact:
    """One desired value not checked: an unresolved entry of a pool's account (``field`` the
    fact it leaves open, else the attribute; ``attribute`` None for a note on no attribute)."""

    cluster: str | None
    pool: str
    field: str
    expression: str
    source: str
    attribute: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "pool": self.pool,
            "field": self.field,
            "expression": self.expression,
            "source": self.source,
            "attribute": self.attribute,
        }


def unresolved_values(spec: NodePoolSpec) -> list[UnresolvedFact]:
    """The desired values of a pool that are not checked: exactly the unresolved entries of
    its account, which ``field_counts`` counts (a note on no attribute is one of them)."""
    return [
        UnresolvedFact(
            spec.cluster,
            spec.name,
            a.fact or a.path,
            a.detail,
            spec.source,
            None if a.path == NO_ATTRIBUTE else a.path,
        )
        for a in spec.account
        if a.status is FieldStatus.UNRESOLVED
    ]


@dataclass(slots=True)
class FleetReport:
    findings: list[Finding]
    clusters: int
    pools: int
    nodes: int
    skipped: list[Skip] = field(default_factory=list)
    unresolved: list[UnresolvedFact] = field(default_factory=list)
    # attributes of the desired pools by what became of them, plus "defaults" applied
    fields: dict[str, int] = field(default_factory=dict)

    def by_severity(self) -> dict[str, int]:
        counts = {s.value: 0 for s in reversed(Severity)}
        for f in self.findings:
            counts[f.severity.value] += 1
        return counts

    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings), key=lambda s: s.rank, default=None)

    def to_json(self) -> dict[str, Any]:
        return {
            "findings": [f.to_json() for f in self.findings],
            "summary": {
                "clusters": self.clusters,
                "pools": self.pools,
                "nodes": self.nodes,
                "findings": len(self.findings),
                "bySeverity": self.by_severity(),
                "fields": self.fields,
            },
            "skipped": [s.to_json() for s in self.skipped],
            "unresolved": [u.to_json() for u in self.unresolved],
        }


def field_counts(specs: Iterable[NodePoolSpec]) -> dict[str, int]:
    """How many attributes of these pools were compared, unresolved, ignored or unaccounted,
    and how many provisioner defaults were applied."""
    counts = {status.value: 0 for status in FieldStatus}
    counts["defaults"] = 0
    for spec in specs:
        for entry in spec.account:
            counts[entry.status.value] += 1
            if entry.is_default:
                counts["defaults"] += 1
    return counts


def severity_order(f: Finding) -> tuple[int, str, str, str, str]:
    return (-f.severity.rank, f.cluster, f.pool or "", f.layer.value, f.field)


def unnamed_reason(spec: NodePoolSpec) -> str:
    """Why a pool whose name is unknown is not compared (``NodePoolSpec.unknown_name``)."""
    return (
        f"pool defined as {spec.name!r}: not compared, its name is not known "
        f"({spec.unknown_name}), so its nodes cannot be told apart"
    )


@dataclass(frozen=True, slots=True)
class Assignment:
    """Which desired pools a fleet compares (``assign_pools``).

    ``pools``: per observed cluster, the pools compared. ``held``: per observed cluster, the
    definitions of a pool name defined more than once there -- compared in none, and their
    nodes are no strays either (``diffing.diff_summary``'s ``held``): they do carry a desired
    pool's name, only which definition they follow cannot be told. ``skips``: why each pool
    left out is not compared (held ones included). ``compared``: every compared pool, in the
    order given -- the pools whose fields the report counts (``field_counts``). ``unnamed``: per
    observed cluster, its pools whose name is not known (skipped too): the nodes of no pool
    there may be theirs, which the strays' finding says."""

    pools: dict[str, list[NodePoolSpec]]
    held: dict[str, list[NodePoolSpec]]
    skips: list[Skip]
    compared: tuple[NodePoolSpec, ...]
    unnamed: dict[str, list[NodePoolSpec]] = field(default_factory=dict)

    def index(self, cluster: str) -> PoolIndex:
        """Which pool a node group of ``cluster`` belongs to: its compared pools, and its held
        ones (whose nodes are neither compared nor strays) -- what a live re-diff looks up;
        its ``unnamed`` pools the strays' finding names."""
        return PoolIndex(
            self.pools.get(cluster, ()),
            held=self.held.get(cluster, ()),
            unnamed=self.unnamed.get(cluster, ()),
        )


def defined_twice(specs: Iterable[NodePoolSpec]) -> dict[tuple[str, str], list[NodePoolSpec]]:
    """Every (cluster, name) defined more than once among pools with a known cluster and name,
    with its definitions in the order given."""
    defined: dict[tuple[str, str], list[NodePoolSpec]] = defaultdict(list)
    for spec in specs:
        if spec.cluster is not None and spec.unknown_name is None:
            defined[(spec.cluster, spec.name)].append(spec)
    return {key: found for key, found in defined.items() if len(found) > 1}


def defined_twice_reason(cluster: str, name: str, defined: Sequence[NodePoolSpec]) -> str:
    """Why no definition of a pool name defined more than once in a cluster is compared."""
    places = ", ".join(_places(defined))
    return (
        f"pool {name!r} of cluster {cluster!r} is defined {len(defined)} times ({places}): "
        "its nodes carry only the pool's name, so which definition they follow cannot be "
        "told; none is compared"
    )


def cluster_unknown(specs: Iterable[NodePoolSpec]) -> list[Skip]:
    """The skips of the pools whose cluster is not known (give it as ``CLUSTER=PATH``): compared
    in no cluster, wherever they are looked for (``assign_pools`` says the same)."""
    return [_cluster_unknown(s) for s in specs if s.cluster is None]


def _cluster_unknown(spec: NodePoolSpec) -> Skip:
    reason = f"pool {spec.name!r}: cluster unknown (give it as CLUSTER=PATH)"
    return Skip(spec.source or "<desired>", reason, pool=spec.name)


def _places(defined: Iterable[NodePoolSpec]) -> list[str]:
    return list(dict.fromkeys(s.source or "<desired>" for s in defined))


def assign_pools(specs: Sequence[NodePoolSpec], clusters: Collection[str]) -> Assignment:
    """Desired pools per observed cluster, and why the others cannot be compared.

    Pools without a cluster, or whose name is unknown, are reported as skipped with the
    reason; pools of clusters nobody observed are left to ``coverage_findings``. A name defined
    more than once in one cluster (two MachineDeployments in two namespaces, an eksctl group and
    a Karpenter NodePool) leaves every definition uncompared (``held``), each a skip saying so:
    nodes are grouped by the value of their pool label alone (``nodes.pool_of``), so which
    definition a node follows cannot be told, and comparing any one of them would be a guess.
    Nothing is silently dropped.
    """
    skips: list[Skip] = []
    by_cluster: dict[str, list[NodePoolSpec]] = defaultdict(list)
    held: dict[str, list[NodePoolSpec]] = defaultdict(list)
    unnamed: dict[str, list[NodePoolSpec]] = defaultdict(list)
    twice = {key: defined for key, defined in defined_twice(specs).items() if key[0] in clusters}
    compared: list[NodePoolSpec] = []
    for spec in specs:
        if spec.cluster is None:
            skips.append(_cluster_unknown(spec))
            continue
        if spec.unknown_name is not None:
            skips.append(Skip(spec.source or "<desired>", unnamed_reason(spec), pool=spec.name))
            if spec.cluster in clusters:
                unnamed[spec.cluster].append(spec)
            continue
        if spec.cluster not in clusters:
            continue  # a coverage finding (coverage_findings) says so
        if (spec.cluster, spec.name) in twice:
            held[spec.cluster].append(spec)
            continue
        by_cluster[spec.cluster].append(spec)
        compared.append(spec)
    for (cluster, name), defined in twice.items():
        reason = defined_twice_reason(cluster, name, defined)
        skips.extend(Skip(place, reason, pool=name) for place in _places(defined))
    return Assignment(dict(by_cluster), dict(held), skips, tuple(compared), dict(unnamed))


def assemble_report(
    results: Iterable[ClusterDiff],
    *,
    specs: Sequence[NodePoolSpec],
    compared: Sequence[NodePoolSpec],
    skipped: Sequence[Skip],
    observed: Collection[str] | None = None,
) -> FleetReport:
    """The report of a fleet; with ``observed``, desired clusters outside it are findings.

    ``compared``: the pools the results compared (``Assignment.compared``): the fields line
    and ``unresolved`` count their accounts only -- a pool not compared (skipped, held,
    of a cluster nobody observed) had none of its fields compared, and its skip or coverage
    finding already says so."""
    findings: list[Finding] = []
    if observed is not None:
        findings.extend(coverage_findings(specs, observed))
    clusters = pools = nodes = 0
    for result in results:
        clusters += 1
        findings.extend(result.findings)
        pools += result.pools
        nodes += result.nodes
    findings.sort(key=severity_order)
    # the account's unresolved entries, as field_counts counts them (a name completed by a
    # generated suffix is matched by its prefix: checked, so in neither)
    unresolved = [u for s in compared for u in unresolved_values(s)]
    return FleetReport(
        findings=findings,
        clusters=clusters,
        pools=pools,
        nodes=nodes,
        fields=field_counts(compared),
        skipped=list(skipped),
        unresolved=unresolved,
    )


def diff_fleet(
    specs: Sequence[NodePoolSpec],
    observed: Mapping[str, Sequence[ObservedNode]],
    *,
    options: DiffOptions = DiffOptions(),
    skipped: Sequence[Skip] = (),
) -> FleetReport:
    """Diff every observed cluster against its desired pools."""
    assigned = assign_pools(specs, observed.keys())
    results = (
        diff_cluster(
            cluster,
            assigned.pools.get(cluster, []),
            nodes,
            options=options,
            held=assigned.held.get(cluster, ()),
            unnamed=assigned.unnamed.get(cluster, ()),
        )
        for cluster, nodes in observed.items()
    )
    return assemble_report(
        results,
        specs=specs,
        compared=assigned.compared,
        skipped=[*skipped, *assigned.skips],
        observed=list(observed),
    )
