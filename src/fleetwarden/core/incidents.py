"""Incidents: findings with one root cause, grouped and ranked. Pure.

One root cause is, in order of evidence:

1. **one desired-state commit** (``Cause.commit``: the Git revision a GitOps sync or a
   ``desired`` reload applied) — every finding it produced, whatever the change;
2. **the same actor making the same change** across pools or clusters: the actor's name and
   kind, and the change (layer, field, expected, actual) — ``kubectl-edit`` setting
   ``labels.team=x`` on three clusters is one incident, the same person setting two different
   labels is two;
3. **one desired value not applied**: the same change (layer, field, expected, actual) read
   from the same desired-state source (``Cause.source``: the file the desired value came
   from) across pools or clusters, when no actor is known -- a kubelet version that one
   Terraform module sets and three pools did not get is one incident;
4. otherwise the finding is an incident of its own.

Ranking: blast radius first (nodes, then clusters), then age (older first), then the id so
the order is total. Ids hash the group's key only — never its membership — so an incident
keeps its id as findings join or clear; a singleton's id is derived from its finding's id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from fleetwarden.core.actors import Actor, ActorKind
from fleetwarden.core.findings import Finding

__all__ = ["Cause", "Incident", "group_incidents"]


@dataclass(frozen=True, slots=True)
class Cause:
    """What is known of one finding's origin (the shell keeps it beside the finding)."""

    finding: Finding
    actor: Actor | None = None
    started_at: datetime | None = None
    commit: str | None = None  # the desired-state revision that produced it
    source: str | None = None  # where its desired value was read (a file, an application)


@dataclass(frozen=True, slots=True)
class Incident:
    id: str
    root_cause: str
    findings: tuple[Finding, ...]
    clusters: tuple[str, ...]
    nodes: int
    started_at: datetime | None
    actor: Actor | None
    commit: str | None
    reasons: tuple[str, ...]

    def age(self, now: datetime) -> float | None:
        return None if self.started_at is None else (now - self.started_at).total_seconds()

    def to_json(self, now: datetime) -> dict[str, object]:
        """One entry of ``/api/incidents``."""
        return {
            "id": self.id,
            "rootCause": self.root_cause,
            "findings": [f.id for f in self.findings],
            "clusters": list(self.clusters),
            "pools": sorted({f"{f.cluster}/{f.pool or '-'}" for f in self.findings}),
            "nodes": self.nodes,
            "startedAt": (
                self.started_at.isoformat().replace("+00:00", "Z") if self.started_at else None
            ),
            "ageSeconds": self.age(now),
            "actor": self.actor.to_json() if self.actor else None,
            "commit": self.commit,
            "reasons": list(self.reasons),
        }


def _key(cause: Cause) -> tuple[list[object], str, str]:
    """The group key, the root-cause text and the reason for grouping."""
    f = cause.finding
    if cause.commit:
        return (
            ["commit", cause.commit],
            f"desired-state commit {cause.commit}",
            f"finding {f.id} was produced by commit {cause.commit}",
        )
    a = cause.actor
    if a is not None and a.kind is not ActorKind.UNKNOWN:
        change = [f.layer.value, f.field, f.expected, f.actual]
        return (
            ["change", a.name, a.kind.value, *change],
            f"{a.name} ({a.kind.value}) set {f.field} to {f.actual!r}",
            f"finding {f.id}: {a.name} made this change (via {a.via.value})",
        )
    if cause.source:
        change = [f.layer.value, f.field, f.expected, f.actual]
        return (
            ["source", cause.source, *change],
            f"{f.field} {f.expected!r} from {cause.source} not applied "
            f"({'missing' if f.actual is None else f'is {f.actual!r}'})",
            f"finding {f.id}: the same desired value from {cause.source}, no actor known",
        )
    return (
        ["finding", f.id],
        f"{f.field} in {f.cluster}/{f.pool or '-'}",
        f"finding {f.id}: no shared actor or commit known",
    )


_VIA_RANK = {"audit": 0, "cloudEvent": 1, "managedFields": 2}


def _preference(cause: Cause) -> tuple[int, int, float, str, str, int, str]:
    a = cause.actor
    return (
        0 if cause.commit else 1,
        _VIA_RANK.get(a.via.value, 3) if a else 4,
        cause.started_at.timestamp() if cause.started_at else float("inf"),
        a.name if a else "",
        cause.commit or "",
        0 if cause.source else 1,  # a known source over none, then by name: order-free
        cause.source or "",
    )


def group_incidents(causes: Iterable[Cause]) -> list[Incident]:
    """The incidents, ranked (module docstring). A finding given twice counts once, with the
    cause that has a commit, else the strongest actor evidence, else the earliest start, else
    one with a source (so the answer does not depend on the order of the input)."""
    groups: dict[str, tuple[str, list[Cause], list[str]]] = {}
    best: dict[str, Cause] = {}
    for cause in causes:
        fid = cause.finding.id
        if fid not in best or _preference(cause) < _preference(best[fid]):
            best[fid] = cause
    for fid in sorted(best):
        cause = best[fid]
        key, text, why = _key(cause)
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        entry = groups.setdefault(digest, (text, [], []))
        entry[1].append(cause)
        entry[2].append(why)
    incidents = []
    for digest, (text, members, reasons) in groups.items():
        findings = tuple(c.finding for c in members)
        starts = [c.started_at for c in members if c.started_at is not None]
        nodes = {(f.cluster, n) for f in findings for n in f.nodes}
        clusters = tuple(sorted({f.cluster for f in findings}))
        actors = {c.actor for c in members if c.actor is not None}
        incidents.append(
            Incident(
                id=digest,
                root_cause=text,
                findings=findings,
                clusters=clusters,
                nodes=len(nodes),
                started_at=min(starts) if starts else None,
                actor=actors.pop() if len(actors) == 1 else None,
                commit=members[0].commit,
                reasons=tuple(reasons),
            )
        )

    def rank(i: Incident) -> tuple[int, int, float, str]:
        # an incident of unknown start sorts after every dated one of the same radius
        started = i.started_at.timestamp() if i.started_at else float("inf")
        return (-i.nodes, -len(i.clusters), started, i.id)

    return sorted(incidents, key=rank)
