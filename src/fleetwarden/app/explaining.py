"""``fleetwarden explain``: the account of every field of the desired pools.

For each pool: every attribute of its source, as compared (with the value and where it came
from), unresolved (with the expression), ignored (with the reason) or unaccounted (an attribute
the reader does not know), plus the defaults the provisioner applies. Pure over what the
desired-state reader returned; the CLI renders it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from fleetwarden.core.fleet import field_counts
from fleetwarden.core.pools import FieldStatus, NodePoolSpec
from fleetwarden.core.skips import Skip

__all__ = ["Explanation", "explain"]


@dataclass(frozen=True, slots=True)
class Explanation:
    pools: tuple[NodePoolSpec, ...]
    skipped: tuple[Skip, ...] = ()
    assumed: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def unaccounted(self) -> int:
        return self.counts.get(FieldStatus.UNACCOUNTED.value, 0)

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
                }
                for p in self.pools
            ],
            "summary": {"pools": len(self.pools), "fields": self.counts},
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
    """The pools (filtered by name / cluster globs) and the totals of their accounts."""
    chosen = tuple(
        p
        for p in pools
        if (pool is None or fnmatchcase(p.name, pool))
        and (cluster is None or fnmatchcase(p.cluster or "", cluster))
    )
    return Explanation(chosen, tuple(skipped), assumed, field_counts(chosen))
