"""Scanning many clusters at once, spread over worker processes.

``run_scan`` is ``fleetwarden scan``: the paths given read through ``ScanFiles`` (the file
adapter), nothing-to-compare refused, the workers and the progress bar chosen by the dumps'
size, then ``scan_clusters``.

Each cluster is read and diffed in one job, so node objects never cross process boundaries:
only findings come back. ``load`` is the I/O seam (a picklable callable from an adapter): it
gives a cluster's nodes reduced to what the diff reads (``diffing.ClusterSummariser``: a reader
that can feeds it each node as it reads it, never making the node object). With one cluster
(fewer clusters than workers) the processes go to the loader instead, which may split one big
dump between them: each process summarises the ranges it read, and the summaries are merged
(``node_summaries.merge_clusters``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from fleetwarden.core.diffing import ClusterDiff, ClusterSummariser, diff_summary
from fleetwarden.core.fleet import (
    FleetReport,
    NothingToCompare,
    assemble_report,
    assign_pools,
    check_comparable,
)
from fleetwarden.core.node_summaries import ClusterSummary, merge_clusters
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.skips import Skip

if TYPE_CHECKING:
    from concurrent.futures import Future

    from fleetwarden.formats.desired import DesiredRead
    from fleetwarden.formats.provisioners import Assumed
    from fleetwarden.formats.settings import Settings

__all__ = [
    "NodeLoader",
    "ProgressBar",
    "ScanFiles",
    "ScanRequest",
    "read_desired",
    "require_pools",
    "run_scan",
    "scan_clusters",
]

PROGRESS_MIN_BYTES = 1_000_000  # about a few hundred nodes of kubectl JSON
PARALLEL_MIN_BYTES = 32 * 2**20

# a progress bar over ``total`` bytes: entered, it takes the bytes of each cluster done
ProgressBar = Callable[[int], AbstractContextManager[Callable[[int], None]]]


class NodeLoader(Protocol):
    """The nodes of one cluster's dump files, ``summarise``d (``workers`` processes may share
    the reading, each summarising its part; the parts are ``merge``d in order)."""

    def __call__(
        self,
        paths: Sequence[str],
        /,
        *,
        summarise: Callable[[list[ObservedNode]], ClusterSummary],
        merge: Callable[..., ClusterSummary],
        workers: int = 1,
    ) -> ClusterSummary: ...


class ScanFiles(Protocol):
    """The files a scan reads (``adapters.files`` is one): ``[CLUSTER=]PATH`` arguments,
    the desired pools under them, and the node dumps per cluster."""

    def parse_path_arg(self, text: str, /) -> Any: ...

    def start_reading(self, args: Sequence[Any], /, *, workers: int | None, limit: int) -> None:
        """Let worker processes start on one big dump while the desired state is read."""

    def load_desired(
        self, args: Sequence[Any], /, *, limit: int, assume: Assumed | None
    ) -> DesiredRead: ...

    def node_sources(self, args: Sequence[Any], /) -> dict[str, list[str]]: ...

    def file_size(self, path: str, /) -> int: ...

    @property
    def summarise_node_files(self) -> Callable[..., ClusterSummary]:
        """A ``NodeLoader`` once given ``limit=`` (module-level: picklable for workers)."""


@dataclass(frozen=True, slots=True)
class ScanRequest:
    """What ``scan`` was asked: the ``[CLUSTER=]PATH`` arguments as given, and how to run."""

    desired: Sequence[str]
    nodes: Sequence[str]
    settings: Settings
    allow_empty: bool = False  # nothing to compare is a report, not an error
    jobs: int | None = None  # worker processes; None: all cores for big dumps, else 1
    progress: bool | None = None  # None: on a terminal, for dumps over ~1 MB


def read_desired(
    files: ScanFiles, args: Sequence[Any], settings: Settings
) -> tuple[DesiredRead, list[str]]:
    """The desired pools under the parsed ``args`` and the arguments' labels (``FormatError``
    when a file named directly is bad)."""
    loaded = files.load_desired(args, limit=settings.desired_file_limit, assume=settings.assume)
    return loaded, [a.label for a in args]


def require_pools(loaded: DesiredRead, labels: Sequence[str]) -> None:
    """``NothingToCompare`` naming what was read when no pool was found."""
    if not loaded.pools:
        raise NothingToCompare(loaded.nothing_found(labels))


def run_scan(
    request: ScanRequest,
    files: ScanFiles,
    *,
    progress: ProgressBar,
    terminal: Callable[[], bool],
) -> FleetReport:
    """``fleetwarden scan``: the pools under ``request.desired`` against the dumps under
    ``request.nodes``. ``progress`` shows a bar (when asked, or by default for big dumps when
    ``terminal()`` says the bar would be seen; asked after the reading has started). Raises
    ``FormatError`` (a bad input) or ``NothingToCompare``."""
    settings = request.settings
    desired_args = [files.parse_path_arg(a) for a in request.desired]
    nodes_args = [files.parse_path_arg(a) for a in request.nodes]
    files.start_reading(nodes_args, workers=request.jobs, limit=settings.nodes_file_limit)
    loaded, labels = read_desired(files, desired_args, settings)
    sources = files.node_sources(nodes_args)
    if not request.allow_empty:
        require_pools(loaded, labels)
        check_comparable(loaded.pools, sources.keys(), desired_paths=labels)
    sizes = {c: sum(files.file_size(p) for p in paths) for c, paths in sources.items()}
    total = sum(sizes.values())
    jobs = request.jobs
    if jobs is None:  # processes pay off only for big inputs
        jobs = (os.cpu_count() or 1) if total > PARALLEL_MIN_BYTES else 1
    load = functools.partial(files.summarise_node_files, limit=settings.nodes_file_limit)
    run = functools.partial(
        scan_clusters, loaded.pools, sources, load, options=settings.diff,
        skipped=loaded.skipped, workers=jobs,
    )  # fmt: skip
    show = request.progress
    if show is None:
        show = total > PROGRESS_MIN_BYTES and terminal()
    if not show:
        return run()
    with progress(total) as advance:
        return run(on_done=lambda cluster: advance(sizes[cluster]))


def _job(
    cluster: str,
    sources: Sequence[str],
    specs: Sequence[NodePoolSpec],
    options: DiffOptions,
    load: NodeLoader,
    workers: int = 1,
    held: Sequence[NodePoolSpec] = (),
    unnamed: Sequence[NodePoolSpec] = (),
) -> ClusterDiff:
    summarise = ClusterSummariser(tuple(specs), options)
    summary = load(sources, summarise=summarise, merge=merge_clusters, workers=workers)
    return diff_summary(cluster, specs, summary, options=options, held=held, unnamed=unnamed)


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
    assigned = assign_pools(specs, sources.keys())
    pools, held, unnamed = assigned.pools, assigned.held, assigned.unnamed
    results: list[ClusterDiff] = []
    if workers <= 1 or len(sources) <= 1:
        for cluster, paths in sources.items():
            mine = pools.get(cluster, [])
            uncompared = held.get(cluster, []), unnamed.get(cluster, [])
            results.append(_job(cluster, paths, mine, options, load, workers, *uncompared))
            if on_done:
                on_done(cluster)
    else:  # imported here: a scan of one cluster starts its reader processes without it
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        with ProcessPoolExecutor(max_workers=workers) as pool:
            pending: dict[Future[ClusterDiff], str] = {
                pool.submit(
                    _job, c, p, pools.get(c, []), options, load, 1,
                    held.get(c, []), unnamed.get(c, []),
                ): c
                for c, p in sources.items()
            }  # fmt: skip
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
    return assemble_report(
        results,
        specs=specs,
        compared=assigned.compared,
        skipped=[*skipped, *assigned.skips],
        observed=list(sources),
    )
