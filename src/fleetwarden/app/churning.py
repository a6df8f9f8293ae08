"""Churn is not drift, live: the node adds and removals one watched cluster sees, classified by
``core.churn.classify`` into ``churn`` events, and the pool-level findings they explain held back.

A removal the provider or an autoscaler explains (a Karpenter disruption taint, the
cluster-autoscaler's ``ToBeDeletedByClusterAutoscaler``, an automated actor) is held for
``grace``: a node added to the same pool meanwhile makes one ``replaced`` change, classified
again with the new node (churn while it matches the pool; drift when it does not — the diff's
findings then stand). Without a replacement, the removal is reported alone once ``grace`` has
passed (``flush``, from the watcher's probe loop). An add no removal explains is classified on
its own (a node Karpenter launched is churn). A removal nothing explains — a person deleting a
node — is no churn: the count it leaves short is a finding, even right after churn in the pool
(the pool's earlier churn no longer explains its state).

``explains(finding, now)`` (``core.churn.explained_by_churn``): a pool-level transitional
finding (``nodeCount``, ``kubeletVersion.mixed``) of a pool with churn under way is not
reported. Bounded: at most ``max_recent`` decisions are kept, the oldest dropped first.

Not done here: Kubernetes node Events and cloud events as evidence (``Evidence``) — only the
nodes' own taints, labels and annotations are read; a held-back finding appears at the pool's
next re-diff after the window, not by a timer of its own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fleetwarden.core.churn import (
    ChurnDecision,
    NodeChange,
    NodeChangeKind,
    NodeSnapshot,
    Verdict,
    classify,
    explained_by_churn,
)
from fleetwarden.core.findings import Finding
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions

__all__ = ["ChurnWatch", "snapshot_of"]


def snapshot_of(node: ObservedNode, obj: Mapping[str, Any] | None = None) -> NodeSnapshot:
    """A node with the annotations and conditions of its raw object (when at hand)."""
    if obj is None:
        return NodeSnapshot(node)
    meta = obj.get("metadata")
    raw = meta.get("annotations") if isinstance(meta, Mapping) else None
    annotations = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
    status = obj.get("status")
    items = status.get("conditions") if isinstance(status, Mapping) else None
    conditions = {
        str(c.get("type")): str(c.get("status"))
        for c in items or ()
        if isinstance(c, Mapping) and c.get("type")
    }
    return NodeSnapshot(node, annotations, conditions)


@dataclass
class _Held:
    decision: ChurnDecision
    since: datetime


class ChurnWatch:
    """One cluster's churn: ``removed``/``added`` return the decisions to report now."""

    def __init__(
        self,
        cluster: str,
        *,
        options: DiffOptions = DiffOptions(),
        grace: timedelta = timedelta(minutes=2),
        window: timedelta = timedelta(hours=1),
        max_recent: int = 1000,
    ) -> None:
        self.cluster, self.options, self.grace, self.window = cluster, options, grace, window
        self.recent: deque[ChurnDecision] = deque(maxlen=max_recent)
        self.held: dict[str | None, _Held] = {}

    def removed(
        self, snap: NodeSnapshot, pool: str | None, spec: NodePoolSpec | None, now: datetime
    ) -> list[ChurnDecision]:
        change = NodeChange(self.cluster, pool, NodeChangeKind.REMOVED, now, removed=(snap,))
        decision = classify(change, spec=spec, options=self.options)
        if decision.verdict is not Verdict.CHURN:
            # a removal nothing explains (a person's): the pool's state is no longer a churn's
            # passing state, so what it leaves short is reported
            kept = [d for d in self.recent if d.change.pool != pool]
            self.recent = deque(kept, maxlen=self.recent.maxlen)
            return []
        self.recent.append(decision)
        out = self.flush(now, pool=pool)  # an earlier removal of the pool is reported alone
        self.held[pool] = _Held(decision, now)
        return out

    def added(
        self, snap: NodeSnapshot, pool: str | None, spec: NodePoolSpec | None, now: datetime
    ) -> list[ChurnDecision]:
        held = self.held.pop(pool, None)
        removed = held.decision.change.removed if held is not None else ()
        kind = NodeChangeKind.REPLACED if held is not None else NodeChangeKind.ADDED
        change = NodeChange(self.cluster, pool, kind, now, removed=removed, added=(snap,))
        decision = classify(change, spec=spec, options=self.options)
        if decision.verdict is Verdict.CHURN:
            self.recent.append(decision)
            return [decision]
        # the new node is drift (its findings stand); the removal was churn all the same
        return [held.decision] if held is not None else []

    def flush(self, now: datetime, *, pool: str | None = None) -> list[ChurnDecision]:
        """Held removals to report alone: past ``grace``, or (``pool``) that pool's now."""
        due = [
            p
            for p, h in self.held.items()
            if (pool is not None and p == pool) or now - h.since >= self.grace
        ]
        return [self.held.pop(p).decision for p in due]

    def explains(self, finding: Finding, now: datetime) -> bool:
        return explained_by_churn(finding, self.recent, now=now, window=self.window) is not None
