"""Scanning many clusters at once, spread over worker processes.

Each cluster is read and diffed in one job, so node objects never cross process boundaries:
only findings come back. ``load`` is the I/O seam (a picklable callable from an adapter): it
gives a cluster's nodes reduced to what the diff reads (``diffing.summarise_cluster``). With
one cluster (fewer clusters than workers) the processes go to the loader instead, which may
split one big dump between them: each process summarises the part it read, and the summaries
are merged (``node_summaries.merge_clusters``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from functools import partial
from typing import Protocol

from fleetwarden.core.diffing import ClusterDiff, diff_summary, summarise_cluster
from fleetwarden.core.fleet import FleetReport, assemble_report, assign_pools
from fleetwarden.core.node_summaries import ClusterSummary, merge_clusters
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.skips import Skip

__all__ = ["NodeLoader", "scan_clusters"]


class NodeLoader(Protocol):
    """The nodes of one cluster's dump files, ``summarise``d (``workers`` processes may share
    the reading, each summarising its part; the parts are ``merge``d in order)."""

    def __call__(
        self,
        paths: Sequence[str],
        /,
        *,
        summarise: Callable[[list[ObservedNode]], ClusterSummary],
        merge: Callable[[ClusterSummary, ClusterSummary], ClusterSummary],
        workers: int = 1,
    ) -> ClusterSummary: ...


def _job(
    cluster: str,
    sources: Sequence[str],
    specs: Sequence[NodePoolSpec],
    options: DiffOptions,
    load: NodeLoader,
    workers: int = 1,
) -> ClusterDiff:
    summarise = partial(summarise_cluster, specs, options=options)
    summary = load(sources, summarise=summarise, merge=merge_clusters, workers=workers)
    return diff_summary(cluster, specs, summary, options=options)


def scan_clusters(
    specs: Sequence[NodePoolSpec],
    sources: Mapping[str, Sequence[str]],
    load: NodeLoader,
    *,
    options: DiffOptions = DiffOptions(),
    skipped: Sequence[Skip] = (),
    workers: int = 1,
    on_done: Callable[[str], None] | None = None,
) -> FleetReport:
    """Diff every cluster in ``sources`` (cluster -> its node dump paths)."""
    by_cluster, skips = assign_pools(specs, sources.keys())
    results: list[ClusterDiff] = []
    if workers <= 1 or len(sources) <= 1:
        for cluster, paths in sources.items():
            results.append(
                _job(cluster, paths, by_cluster.get(cluster, []), options, load, workers)
            )
            if on_done:
                on_done(cluster)
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            pending: dict[Future[ClusterDiff], str] = {
                pool.submit(_job, c, p, by_cluster.get(c, []), options, load): c
                for c, p in sources.items()
            }
            try:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in done:
                        cluster = pending.pop(fut)
                        results.append(fut.result())  # a FormatError re-raises here
                        if on_done:
                            on_done(cluster)
            except BaseException:
                for fut in pending:
                    fut.cancel()
                raise
    order = {c: i for i, c in enumerate(sources)}
    results.sort(key=lambda r: order[r.cluster])
    return assemble_report(results, specs=specs, skipped=[*skipped, *skips], observed=list(sources))
