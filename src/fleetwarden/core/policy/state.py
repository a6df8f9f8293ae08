"""The guards' history: the ledgers of decisions, heals and pending requests that ``record``
writes and ``decide`` reads. State only; the rules that read it live in ``deciding``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from fleetwarden.core.policy.decisions import Decision, DecisionTarget
from fleetwarden.core.policy.policies import Action

__all__ = ["PolicyState"]

# --- state ---------------------------------------------------------------------------------

PoolKey = tuple[str, str | None]
_K = TypeVar("_K")
OpKey = tuple[Action, DecisionTarget]


@dataclass(slots=True)
class _Ledger:
    """What the guards need, for one kind of history (real or rehearsed). Time lists are kept
    sorted, so a window count is one bisection even if callers' clocks step back a little."""

    fleet: list[datetime] = field(default_factory=list)
    by_cluster: dict[str, list[datetime]] = field(default_factory=dict)
    heals: dict[PoolKey, list[datetime]] = field(default_factory=dict)  # heal start times
    quarantine: dict[PoolKey, datetime] = field(default_factory=dict)  # pool → stopped until
    findings: dict[str, datetime] = field(default_factory=dict)  # finding id → last acted on
    ops: dict[OpKey, tuple[datetime, str]] = field(default_factory=dict)  # → (at, decision id)
    pruned_at: datetime | None = None


class PolicyState:
    """The guards' history. ``pools``: pool count per cluster (the blast-radius base).
    Change it only through ``record`` (and ``set_pools``)."""

    __slots__ = ("_ledgers", "closed", "pending", "pools", "recorded", "waiting")

    def __init__(self, pools: Mapping[str, int] | None = None) -> None:
        self.pools: dict[str, int] = dict(pools or {})
        self.pending: dict[str, Decision] = {}  # id → decision waiting for approval
        self.waiting: dict[str | OpKey, str] = {}  # finding id / operation → pending id
        self.closed: dict[str, Decision] = {}  # id → its cancellation (kept a while)
        self.recorded = 0
        self._ledgers = {False: _Ledger(), True: _Ledger()}  # keyed by "rehearsal"

    def set_pools(self, cluster: str, count: int) -> None:
        self.pools[cluster] = count

    def forget_pending(self, decision_id: str) -> None:
        d = self.pending.pop(decision_id)
        keys: list[str | OpKey] = [d.finding_id]
        if d.target is not None:
            keys.append((d.action, d.target))
        for key in keys:
            if self.waiting.get(key) == decision_id:
                del self.waiting[key]

    @property
    def fleet_pools(self) -> int:
        return sum(self.pools.values())

    def ledger(self, *, rehearsal: bool) -> _Ledger:
        return self._ledgers[rehearsal]

    def executed_in_window(
        self, now: datetime, window: timedelta, *, cluster: str | None = None
    ) -> int:
        """Real actions in [now - window, now] (fleet-wide, or of one cluster)."""
        ledger = self._ledgers[False]
        times = ledger.fleet if cluster is None else ledger.by_cluster.get(cluster, [])
        return _count_since(times, now - window)


def _count_since(times: Sequence[datetime], cutoff: datetime) -> int:
    return len(times) - bisect_left(times, cutoff)
