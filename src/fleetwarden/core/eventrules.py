"""Rules over canonical change events: whom they concern, and how to batch their inspection.

Pure and total: no I/O, no clock. ``flag_unknown`` marks (never drops) an event about a
cluster or pool fleetwarden does not know; ``coalesce_key`` says which pool's inspection an
event asks for, so a burst of events on one pool becomes one inspection.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from fleetwarden.core.events import ChangeEvent, EventFlag
from fleetwarden.core.subjects import NodePoolRef

__all__ = ["coalesce_key", "flag_unknown", "known_flags"]

_KNOWLEDGE_FLAGS = frozenset({EventFlag.UNKNOWN_CLUSTER, EventFlag.UNKNOWN_POOL})


def flag_unknown(event: ChangeEvent, clusters: Mapping[str, Collection[str]]) -> ChangeEvent:
    """The event, flagged against ``clusters`` (``known_flags``)."""
    flags = known_flags(event, clusters)
    return event if flags == event.flags else event.replaced(flags=flags)


def known_flags(
    event: ChangeEvent, clusters: Mapping[str, Collection[str]]
) -> tuple[EventFlag, ...]:
    """The event's flags against ``clusters`` (cluster name -> the pools desired state defines).

    * no cluster named: NO_CLUSTER (the payload said nothing fleetwarden can act on);
    * a cluster not in ``clusters``: UNKNOWN_CLUSTER (the pool is then unknown too; one flag
      says it);
    * a pool not among its cluster's pools: UNKNOWN_POOL.

    Earlier UNKNOWN_* flags are recomputed, so flagging again against a newer known set (a
    replay after a cluster was added) gives the current answer. Names compare exactly.
    """
    flags = event.flags
    kept = tuple(f for f in flags if f not in _KNOWLEDGE_FLAGS) if flags else flags
    extra: list[EventFlag] = []
    if event.cluster is None:
        extra.append(EventFlag.NO_CLUSTER)
    elif event.cluster not in clusters:
        extra.append(EventFlag.UNKNOWN_CLUSTER)
    elif event.pool is not None and event.pool not in clusters[event.cluster]:
        extra.append(EventFlag.UNKNOWN_POOL)
    if not extra and len(kept) < 2:
        return kept
    return tuple(dict.fromkeys((*kept, *extra)))


def coalesce_key(event: ChangeEvent) -> NodePoolRef | None:
    """The pool the event asks to inspect; pool None means the whole cluster.

    None when the event names no cluster: there is nothing to inspect, only to record.
    """
    if event.cluster is None:
        return None
    return NodePoolRef(event.cluster, event.pool)
