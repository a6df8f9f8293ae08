"""Findings: one observed difference between desired and actual state.

The JSON shape is the contract in ``shared/CONTRACT.md`` (``scan --format json``). ``pool`` is a
node pool's name, or the reference of the workload object a finding is about; ``subject`` says
which, typed (``core.subjects``), and is serialised beside it. The id hashes ``pool``, never
``subject``: ids stay what audit records and approvals already hold.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fleetwarden.core.subjects import NodePoolRef, Subject

__all__ = ["Finding", "JsonValue", "Layer", "Severity", "finding_id"]

JsonValue = str | int | float | bool | None | list[Any]


class Severity(StrEnum):
    INFO = "info"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def at_least(self, other: Severity) -> bool:
        return _RANK[self] >= _RANK[other]

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.strip().lower())
        except ValueError:
            names = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown severity {text!r} (expected one of: {names})") from None


_RANK = {s: i for i, s in enumerate(Severity)}


class Layer(StrEnum):
    L1 = "L1"  # labels
    L2 = "L2"  # taints
    L3 = "L3"  # allocatable resources
    L4 = "L4"  # kubelet versions
    SPEC = "SPEC"  # pool-level facts: instance type, disk, OS image, pool membership
    COUNT = "COUNT"  # node counts
    WORKLOAD = "WORKLOAD"
    FIGHT = "FIGHT"  # two or more writers alternating on one field (``core.fights``)


# the default of ``Finding.subject``: replaced by the finding's own node pool on creation
_POOL_SUBJECT = NodePoolRef("", None)


@dataclass(frozen=True, slots=True)
class Finding:
    cluster: str
    pool: str | None
    layer: Layer
    field: str
    expected: JsonValue
    actual: JsonValue
    severity: Severity
    nodes: tuple[str, ...] = ()
    source: str | None = None
    message: str = ""
    # where the expected value was read: ``file:line``, or ``default: <provisioner> ...``
    provenance: str | None = dataclasses.field(default=None, compare=False, hash=False)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)
    # what the finding is about; not given: the node pool ``NodePoolRef(cluster, pool)``
    subject: Subject = dataclasses.field(default=_POOL_SUBJECT, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.subject is _POOL_SUBJECT:
            object.__setattr__(self, "subject", NodePoolRef(self.cluster, self.pool))

    @property
    def id(self) -> str:
        return finding_id(
            self.cluster, self.pool, self.layer, self.field, self.expected, self.actual
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "cluster": self.cluster,
            "pool": self.pool,
            "layer": self.layer.value,
            "field": self.field,
            "expected": self.expected,
            "actual": self.actual,
            "severity": self.severity.value,
            "nodes": list(self.nodes),
            "source": self.source,
            "subject": self.subject.to_json(),
        }
        if self.provenance is not None:
            out["provenance"] = self.provenance
        if self.message:
            out["message"] = self.message
        out.update(self.extra)
        return out


def finding_id(
    cluster: str,
    pool: str | None,
    layer: Layer,
    field_: str,
    expected: JsonValue,
    actual: JsonValue,
) -> str:
    """A stable id: the same drift (same place, same values) always has the same id.

    The node list is deliberately not part of it: one more node showing the same drift
    *changes* a finding rather than creating a new one. Pool-level states whose actual value
    moves with time (a node count, the set of kubelet versions in a pool mid-upgrade) are
    identified without it, for the same reason.
    """
    if layer is Layer.COUNT or field_.endswith(".mixed"):
        actual = None
    key = json.dumps([cluster, pool, layer.value, field_, expected, actual], sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]
