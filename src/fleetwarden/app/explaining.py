"""``fleetwarden explain``: the account of every field of the desired pools.

For each pool: every attribute of its source, as compared (with the value and where it came
from), unresolved (with the expression), ignored (with the reason) or unaccounted (an attribute
the reader does not know), plus the defaults the provisioner applies. A pool a scan never
compares (its name not known, or defined more than once in its cluster) is listed with why, and
its fields are left out of the totals, as the scan's fields line leaves them out. Pure over
what the desired-state reader returned; the CLI renders it. ``run_explain`` is the command:
the paths read through the scan's file side (``app.scanning.ScanFiles``), then ``explain``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from fleetwarden.app.scanning import ScanFiles, read_desired, require_pools
from fleetwarden.core.fleet import (
    NothingToCompare,
    defined_twice,
    defined_twice_reason,
    field_counts,
    unnamed_reason,
)
from fleetwarden.core.pools import FieldStatus, NodePoolSpec
from fleetwarden.core.skips import Skip
from fleetwarden.formats.settings import Settings

__all__ = ["Explanation", "explain", "run_explain"]


@dataclass(frozen=True, slots=True)
class Explanation:
    pools: tuple[NodePoolSpec, ...]
    skipped: tuple[Skip, ...] = ()
    assumed: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    # (cluster, name) defined more than once among every pool read, not only those chosen
    twice: Mapping[tuple[str, str], Sequence[NodePoolSpec]] = field(default_factory=dict)

    def not_compared(self, pool: NodePoolSpec) -> str | None:
        """Why a scan never compares ``pool`` (``fleet.assign_pools`` skips it), or None."""
        return _not_compared(pool, self.twice)

    @property
    def uncompared(self) -> int:
        """How many of the pools are never compared (their fields are not in ``counts``)."""
        return sum(1 for p in self.pools if self.not_compared(p) is not None)

    @property
    def unaccounted(self) -> int:
        return self.counts.get(FieldStatus.UNACCOUNTED.value, 0)

    @property
    def unreadable(self) -> int:
        """Files under the paths given that could not be read, and pool definitions a file
        holds beside the pools read that could not be: none of their fields are accounted
        for."""
        return sum(1 for s in self.skipped if s.problem or s.pool is not None)

    def to_json(self) -> dict[str, Any]:
        return {
            "pools": [
                {
                    "cluster": p.cluster,
                    "pool": p.name,
                    "source": p.source,
                    "format": p.source_format,
                    "fields": [a.to_json() for a in p.account],
                    "summary": field_counts([p]),
                    **({"notCompared": why} if (why := self.not_compared(p)) else {}),
                }
                for p in self.pools
            ],
            "summary": {
                "pools": len(self.pools),
                "notCompared": self.uncompared,
                "fields": self.counts,
            },
            "assumed": self.assumed,
            "skipped": [s.to_json() for s in self.skipped],
        }


def explain(
    pools: Sequence[NodePoolSpec],
    *,
    skipped: Sequence[Skip] = (),
    pool: str | None = None,
    cluster: str | None = None,
    assumed: str = "",
) -> Explanation:
    """The pools (filtered by name / cluster globs) and the totals of the accounts of those a
    scan would compare."""
    chosen = tuple(
        p
        for p in pools
        if (pool is None or fnmatchcase(p.name, pool))
        and (cluster is None or fnmatchcase(p.cluster or "", cluster))
    )
    twice = defined_twice(pools)
    counts = field_counts(p for p in chosen if _not_compared(p, twice) is None)
    return Explanation(chosen, tuple(skipped), assumed, counts, twice)


def _not_compared(
    pool: NodePoolSpec, twice: Mapping[tuple[str, str], Sequence[NodePoolSpec]]
) -> str | None:
    if pool.unknown_name is not None:
        return unnamed_reason(pool)
    if pool.cluster is not None and (pool.cluster, pool.name) in twice:
        return defined_twice_reason(pool.cluster, pool.name, twice[(pool.cluster, pool.name)])
    return None


def run_explain(
    files: ScanFiles,
    desired: Sequence[str],
    settings: Settings,
    *,
    pool: str | None = None,
    cluster: str | None = None,
    allow_empty: bool = False,
) -> Explanation:
    """``fleetwarden explain``: the pools under the ``[CLUSTER=]PATH`` arguments ``desired``
    that match ``pool`` and ``cluster``. ``NothingToCompare`` when no pool is found or none
    matches (unless ``allow_empty``); ``FormatError`` when a named file is bad."""
    loaded, labels = read_desired(files, [files.parse_path_arg(a) for a in desired], settings)
    if not allow_empty:
        require_pools(loaded, labels)
    result = explain(
        loaded.pools,
        skipped=loaded.skipped,
        pool=pool,
        cluster=cluster,
        assumed=settings.assume.describe(),
    )
    if not result.pools and loaded.pools and not allow_empty:
        names = ", ".join(sorted({p.name for p in loaded.pools})[:10])
        raise NothingToCompare(
            f"no pool matches --pool {pool or '*'} --cluster {cluster or '*'} (pools: {names})"
        )
    return result
