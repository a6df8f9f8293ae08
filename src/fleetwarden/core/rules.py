"""Severity overrides and ignore rules: the knobs a platform team turns in its config."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from fleetwarden.core.findings import Finding, Severity

__all__ = [
    "DEFAULT_TRANSIENT_TAINTS",
    "DiffOptions",
    "IgnoreRule",
    "SeverityRule",
    "apply_rules",
]

# Taints that nodes carry for a while as part of normal life, not as configuration.
DEFAULT_TRANSIENT_TAINTS: tuple[str, ...] = (
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable",
    "node.kubernetes.io/out-of-service",
    "node.cloudprovider.kubernetes.io/uninitialized",
    "node.cloudprovider.kubernetes.io/shutdown",
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
    "karpenter.sh/disrupted",
    "karpenter.sh/disruption",
    "karpenter.sh/unregistered",
    "node.cilium.io/agent-not-ready",
)


@dataclass(frozen=True, slots=True)
class SeverityRule:
    """``match`` is ``LAYER/field`` with shell globs, e.g. ``L1/labels.team`` or ``SPEC/*``."""

    match: str
    severity: Severity

    def applies(self, finding: Finding) -> bool:
        return fnmatchcase(f"{finding.layer.value}/{finding.field}", self.match)


@dataclass(frozen=True, slots=True)
class IgnoreRule:
    cluster: str = "*"
    pool: str = "*"
    field: str = "*"
    layer: str = "*"

    def applies(self, finding: Finding) -> bool:
        return (
            fnmatchcase(finding.cluster, self.cluster)
            and fnmatchcase(finding.pool or "", self.pool)
            and fnmatchcase(finding.field, self.field)
            and fnmatchcase(finding.layer.value, self.layer)
        )


@dataclass(frozen=True, slots=True)
class DiffOptions:
    tolerance: float = 0.05
    disk_tolerance: float = 0.15
    resources: tuple[str, ...] = ("cpu", "memory", "pods")
    median_min_nodes: int = 3
    transient_taints: tuple[str, ...] = DEFAULT_TRANSIENT_TAINTS
    pool_labels: tuple[str, ...] | None = None  # None: the provider labels in nodes.POOL_LABELS
    include_control_plane: bool = False
    severities: tuple[SeverityRule, ...] = ()
    ignores: tuple[IgnoreRule, ...] = ()


def apply_rules(
    findings: Iterable[Finding],
    *,
    severities: Sequence[SeverityRule],
    ignores: Sequence[IgnoreRule],
) -> list[Finding]:
    """Drop ignored findings and apply the first matching severity override."""
    out: list[Finding] = []
    for f in findings:
        if any(rule.applies(f) for rule in ignores):
            continue
        for rule in severities:
            if rule.applies(f):
                if rule.severity is not f.severity:
                    f = Finding(
                        cluster=f.cluster,
                        pool=f.pool,
                        layer=f.layer,
                        field=f.field,
                        expected=f.expected,
                        actual=f.actual,
                        severity=rule.severity,
                        nodes=f.nodes,
                        source=f.source,
                        message=f.message,
                        extra=f.extra,
                        subject=f.subject,
                    )
                break
        out.append(f)
    return out
