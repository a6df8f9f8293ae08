"""Issue 12's clock: what one reading costs through ``ports.sources.Clock`` beside the bare
callables it replaced (``lambda: datetime.now(UTC)``, ``time.time``, ``time.monotonic``,
``lambda: T`` in tests), measured side by side in one run so the machine's load cancels.

    .venv/bin/python benchmarks/clock_reads.py                 # 200,000 reads x 7 rounds
    .venv/bin/python benchmarks/clock_reads.py --reads 20000 --rounds 3

Each round times every pair in turn (the order alternating between rounds); the figures are
nanoseconds per read, best and median over the rounds (on a loaded machine the best is the
cost, the median the cost plus the neighbours), and the ratio Clock / callable of each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from datetime import UTC, datetime

from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock, FixedClock

T = datetime(2026, 1, 1, tzinfo=UTC)


class Holder:
    """An app object as the app holds its time source: before, a callable attribute read as
    ``self.now()``; now, a Clock attribute read as ``self.clock.now()``."""

    def __init__(self) -> None:
        self.wall: Callable[[], datetime] = lambda: datetime.now(UTC)
        self.unix: Callable[[], float] = time.time
        self.mono: Callable[[], float] = time.monotonic
        self.fixed: Callable[[], datetime] = lambda: T
        self.clock: Clock = SYSTEM_CLOCK
        self.test_clock: Clock = FixedClock(T)


# what is read -> (the callable it replaced, the Clock method called now)
PAIRS: dict[str, tuple[str, str]] = {
    "wall datetime": ("h.wall()", "h.clock.now()"),
    "unix seconds": ("h.unix()", "h.clock.time()"),
    "monotonic": ("h.mono()", "h.clock.monotonic()"),
    "test clock": ("h.fixed()", "h.test_clock.now()"),
}


def per_read_ns(stmt: str, reads: int) -> float:
    timer = timeit.Timer(stmt, globals={"h": Holder()})
    return timer.timeit(number=reads) / reads * 1e9


def row(*cells: str) -> str:
    first, *rest = cells
    return f"{first:<14}" + "".join(
        f" {c:>8}" if i != 3 else f" | {c:>8}" for i, c in enumerate(rest)
    )


def _three(pair: tuple[float, float]) -> tuple[str, str, str]:
    return f"{pair[0]:.1f}", f"{pair[1]:.1f}", f"{pair[1] / pair[0]:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    samples: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in PAIRS}
    for r in range(args.rounds):
        for what, (old, new) in PAIRS.items():
            order = [(0, old), (1, new)]
            for side, stmt in order if r % 2 == 0 else reversed(order):
                samples[what][side].append(per_read_ns(stmt, args.reads))
    print(f"{args.reads:,} reads x {args.rounds} rounds, ns per read: best | median")
    print(row("reading", "callable", "Clock", "ratio", "callable", "Clock", "ratio"))
    for what, (before, after) in samples.items():
        best = min(before), min(after)
        mid = statistics.median(before), statistics.median(after)
        print(row(what, *_three(best), *_three(mid)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
