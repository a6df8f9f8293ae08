"""The source ports: where the desired and the observed state come from, and the clock.

- ``DesiredSource``: the node-pool definitions to compare against (``adapters/files.py`` reads
  them from files; a test passes a list).
- ``ObservedSource``: one cluster's nodes now, or None when nothing is known of it (the
  watchers' warm caches first, else the latest node dump: ``app/serving.py``).
- ``Clock``: the one clock of the app and the adapters, always a parameter named ``clock``
  (default ``SYSTEM_CLOCK``): ``now()`` an aware UTC datetime, ``time()`` the same instant as
  Unix seconds (what signatures, sessions and latencies compare), ``monotonic()`` seconds that
  never go back (durations, timeouts, lease timing: a wall clock may be stepped). Tests pass a
  ``FixedClock`` and step it. The pure core never reads a clock: it is handed ``now`` values.
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

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never decrease (for durations only)."""
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

    def monotonic(self) -> float:
        return _time.monotonic()


SYSTEM_CLOCK: Clock = SystemClock()


@dataclass
class FixedClock:
    """A clock that moves only when told (tests; replays).

    ``advance`` moves the wall clock and the monotonic reading together and never backwards;
    assigning ``at`` alone steps the wall clock (as NTP may) and leaves ``ticks`` as it is.
    """

    at: datetime
    ticks: float = 0.0  # the monotonic reading

    def __post_init__(self) -> None:
        if self.at.tzinfo is None:
            raise ValueError(f"FixedClock: {self.at!r} has no timezone (a clock reads UTC)")
        self.at = self.at.astimezone(UTC)

    def now(self) -> datetime:
        return self.at

    def time(self) -> float:
        return self.at.timestamp()

    def monotonic(self) -> float:
        return self.ticks

    def advance(self, seconds: float | timedelta = 0.0, **units: float) -> datetime:
        """Move on ``seconds`` plus ``units`` (``timedelta``'s: minutes=, hours=, days=), never
        backwards: wall time and the monotonic reading alike. Returns the new ``now()``."""
        step = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
        step += timedelta(**units)
        if step < timedelta(0):
            raise ValueError(f"FixedClock.advance: {step} is negative (set .at to step back)")
        self.at += step
        self.ticks += step.total_seconds()
        return self.at
