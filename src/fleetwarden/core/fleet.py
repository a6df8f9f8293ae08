"""A whole fleet: desired pools of many clusters against the nodes observed in each."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwarden.core.diffing import ClusterDiff, diff_cluster
from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions

__all__ = [
    "FleetReport",
    "Skip",
    "UnresolvedFact",
    "assemble_report",
    "assign_pools",
    "diff_fleet",
    "severity_order",
]


@dataclass(frozen=True, slots=True)
class Skip:
    path: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class UnresolvedFact:
    cluster: str | None
    pool: str
    field: str
    expression: str
    source: str

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "pool": self.pool,
            "field": self.field,
            "expression": self.expression,
            "source": self.source,
        }


@dataclass(slots=True)
class FleetReport:
    findings: list[Finding]
    clusters: int
    pools: int
    nodes: int
    skipped: list[Skip] = field(default_factory=list)
    unresolved: list[UnresolvedFact] = field(default_factory=list)

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
            },
            "skipped": [s.to_json() for s in self.skipped],
            "unresolved": [u.to_json() for u in self.unresolved],
        }


def severity_order(f: Finding) -> tuple[int, str, str, str, str]:
    return (-f.severity.rank, f.cluster, f.pool or "", f.layer.value, f.field)


def assign_pools(
    specs: Sequence[NodePoolSpec], clusters: Collection[str]
) -> tuple[dict[str, list[NodePoolSpec]], list[Skip]]:
    """Desired pools per observed cluster, and why the others cannot be compared.

    Pools without a cluster, and pools of clusters nobody observed, are reported as skipped
    with the reason, never silently dropped.
    """
    skips: list[Skip] = []
    by_cluster: dict[str, list[NodePoolSpec]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    for spec in specs:
        where = spec.source or "<desired>"
        if spec.cluster is None:
            skips.append(
                Skip(where, f"pool {spec.name!r}: cluster unknown (give it as CLUSTER=PATH)")
            )
            continue
        if spec.cluster not in clusters:
            skips.append(
                Skip(where, f"pool {spec.name!r}: no observed nodes for cluster {spec.cluster!r}")
            )
            continue
        if (spec.cluster, spec.name) in seen:
            skips.append(
                Skip(
                    where,
                    f"pool {spec.name!r} of cluster {spec.cluster!r} is "
                    "defined more than once; the first definition is used",
                )
            )
            continue
        seen.add((spec.cluster, spec.name))
        by_cluster[spec.cluster].append(spec)
    return by_cluster, skips


def assemble_report(
    results: Iterable[ClusterDiff],
    *,
    specs: Sequence[NodePoolSpec],
    skipped: Sequence[Skip],
) -> FleetReport:
    findings: list[Finding] = []
    clusters = pools = nodes = 0
    for result in results:
        clusters += 1
        findings.extend(result.findings)
        pools += result.pools
        nodes += result.nodes
    findings.sort(key=severity_order)
    unresolved = [
        UnresolvedFact(s.cluster, s.name, u.field, u.expression, s.source)
        for s in specs
        for u in s.unresolved
    ]
    return FleetReport(
        findings=findings,
        clusters=clusters,
        pools=pools,
        nodes=nodes,
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
    by_cluster, skips = assign_pools(specs, observed.keys())
    results = (
        diff_cluster(cluster, by_cluster.get(cluster, []), nodes, options=options)
        for cluster, nodes in observed.items()
    )
    return assemble_report(results, specs=specs, skipped=[*skipped, *skips])
