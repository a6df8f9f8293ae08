"""Nodes -> diff -> track: the one path from a set of observed nodes to finding events.

Every place that re-reads nodes and wants to know what changed goes through ``diff_and_track``:
the live watcher when a node changes (``app.watching``), the event inspector when a cloud
event names a pool (``app.inspecting``), and the service's first pass over its node dumps
(``cluster_groups`` then ``diff_and_track``; ``serve``'s ``initial_scan``). The diff is the
core's (``diff_pool`` for a desired pool, ``diff_strays`` for nodes of no desired pool);
the tracker turns each scope's findings into appeared / changed / cleared events.

Pure of I/O: the caller emits the events it gets back, with its own clock's ``now``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from fleetwarden.core.diffing import PoolIndex, diff_pool, diff_strays, group_nodes
from fleetwarden.core.findings import Finding
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.tracking import FindingEvent, FindingTracker

__all__ = ["Groups", "cluster_groups", "diff_and_track", "diff_group"]

# pool scope (a desired pool's name, a stray group's label value, None: no pool label) ->
# its desired pool (None: nodes of no desired pool) and its member nodes
Groups = Mapping[str | None, tuple[NodePoolSpec | None, Sequence[ObservedNode]]]


def diff_group(
    cluster: str,
    scope: str | None,
    spec: NodePoolSpec | None,
    nodes: Sequence[ObservedNode],
    *,
    options: DiffOptions,
    unnamed: Sequence[NodePoolSpec] = (),
) -> list[Finding]:
    """A desired pool against its nodes; nodes of no desired pool as strays (``unnamed``: the
    cluster's pools whose name is not known, which they may belong to); else nothing."""
    if spec is not None:
        return diff_pool(spec, nodes, cluster=cluster, options=options)
    if nodes:
        return diff_strays(cluster, scope, nodes, options=options, unnamed=unnamed)
    return []


def diff_and_track(
    tracker: FindingTracker,
    cluster: str,
    groups: Groups,
    *,
    options: DiffOptions,
    now: datetime,
    keep: Callable[[Finding], bool] | None = None,
    unnamed: Sequence[NodePoolSpec] = (),
) -> list[FindingEvent]:
    """Diff every group of ``cluster`` and record the findings of each scope (a scope with no
    finding clears what it had); return the events in order. ``keep``: which findings to
    report (the live watcher holds back what churn under way explains). ``unnamed``: the
    cluster's pools whose name is not known (``PoolIndex.unnamed``), named by strays."""
    events: list[FindingEvent] = []
    for scope, (spec, nodes) in groups.items():
        findings = diff_group(cluster, scope, spec, nodes, options=options, unnamed=unnamed)
        if keep is not None:
            findings = [f for f in findings if keep(f)]
        events.extend(tracker.update((cluster, scope), findings, now=now))
    return events


def cluster_groups(
    specs: Sequence[NodePoolSpec],
    nodes: Sequence[ObservedNode],
    *,
    options: DiffOptions,
    held: Sequence[NodePoolSpec] = (),
) -> dict[str | None, tuple[NodePoolSpec | None, list[ObservedNode]]]:
    """A whole cluster as ``diff_cluster`` sees it: every desired pool (with its nodes, maybe
    none) and every group of nodes that belongs to no desired pool. The nodes of a ``held``
    pool (defined more than once: ``fleet.assign_pools``) are in no group: neither compared
    nor strays, as in ``diff_cluster``."""
    index = PoolIndex(specs, held=held)
    out: dict[str | None, tuple[NodePoolSpec | None, list[ObservedNode]]] = {
        spec.name: (spec, []) for spec in index.specs.values()
    }
    for group, members in group_nodes(nodes, options=options).items():
        spec = index.spec_for(group)
        if spec is not None:
            out[spec.name][1].extend(members)
        elif index.held_for(group) is None:
            out[group] = (None, list(members))
    return out
