"""The source ports: where the desired and the observed state come from, and the clock.

- ``DesiredSource``: the node-pool definitions to compare against (``adapters/files.py`` reads
  them from files; a test passes a list).
- ``ObservedSource``: one cluster's nodes now, or None when nothing is known of it (the
  watchers' warm caches first, else the latest node dump: ``app/serving.py``).
- ``Clock``: the one clock of the app and the serve path: ``now()`` an aware UTC datetime,
  ``time()`` the same instant as Unix seconds (what signatures, sessions and latencies
  compare). Tests pass a ``FixedClock`` and step it. The pure core never reads a clock: it is
  handed ``now`` values.
"""

from __future__ import annotations

import time as _time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec

__all__ = [
    "SYSTEM_CLOCK",
    "Clock",
    "DesiredSource",
    "FixedClock",
    "ObservedSource",
    "SystemClock",
]


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware, in UTC."""
        ...

    def time(self) -> float:
        """The current instant as Unix seconds."""
        ...


class DesiredSource(Protocol):
    def pools(self) -> Sequence[NodePoolSpec]:
        """Every desired node pool (a pool's ``cluster`` may be None: not yet assigned)."""
        ...


class ObservedSource(Protocol):
    def __call__(self, cluster: str) -> Sequence[ObservedNode] | None:
        """The cluster's nodes now; None when nothing is known of the cluster."""
        ...


class SystemClock:
    """The machine's wall clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def time(self) -> float:
        return _time.time()


SYSTEM_CLOCK: Clock = SystemClock()


@dataclass
class FixedClock:
    """A clock that moves only when told (tests; replays)."""

    at: datetime

    def now(self) -> datetime:
        return self.at

    def time(self) -> float:
        return self.at.timestamp()

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)
