"""Restoring the guards' history after a restart: replay the decisions of the last
``Guards.replay_span`` from the audit log through ``record``. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from fleetwarden.core.policy.deciding import record
from fleetwarden.core.policy.decisions import Decision
from fleetwarden.core.policy.policies import DEFAULT_POLICY, Policy
from fleetwarden.core.policy.state import PolicyState

__all__ = ["Replay", "restore_state"]

# --- restoring -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Replay:
    """What ``restore_state`` rebuilt, and from how much."""

    state: PolicyState
    replayed: int  # decisions recorded into ``state``
    too_old: int  # decisions before the replay span: no guard looks at them any more
    pending: tuple[Decision, ...]  # requests that wait for approval again, oldest first
    expired: tuple[Decision, ...] = ()  # requests that expired without a cancellation


def restore_state(
    decisions: Iterable[Decision],
    now: datetime,
    *,
    policy: Policy = DEFAULT_POLICY,
    pools: Mapping[str, int] | None = None,
) -> Replay:
    """The ``PolicyState`` that recording ``decisions`` built, rebuilt at ``now``.

    ``decisions``: every decision, every approval's result (``approve``) and every
    cancellation that was recorded, in the order it was stored (several may share one time).
    Each one that took effect (``Decision.effective_at``) within ``policy.guards.replay_span``
    before ``now`` goes through ``record`` again, in time order: blast-radius counts, heals,
    quarantines, cooldowns and coalescing come back, rehearsed (dry-run) ones apart from real
    ones. Requests that were approved, refused or cancelled leave ``pending`` as they did.
    ``Replay.pending`` lists the requests still approvable by time; requests whose
    ``expires_at`` has passed by ``now`` with no cancellation on record stay in the state and
    are listed in ``Replay.expired``: ``cancellations`` turns them (and requests of another
    mode or configuration) into the cancellations to record. ``pools``: the blast-radius
    base (pool counts are configuration, not history). Pure: reads the values given, changes
    nothing else.
    """
    g = policy.guards
    since = now - g.replay_span
    kept: list[tuple[datetime, Decision]] = []
    too_old = 0
    for decision in decisions:
        took_effect = decision.effective_at
        if took_effect < since:
            too_old += 1
        else:
            kept.append((took_effect, decision))
    kept.sort(key=lambda pair: pair[0])  # stable: one batch keeps its stored order
    state = PolicyState(pools)
    for _, decision in kept:
        record(decision, state, policy=policy)
    waiting = sorted(state.pending.values(), key=lambda d: d.at)
    pending = tuple(d for d in waiting if not d.expired(now))
    expired = tuple(d for d in waiting if d.expired(now))
    return Replay(state, len(kept), too_old, pending, expired)
