"""Test clocks built on ``ports.sources.FixedClock``.

``TickingClock``: every reading moves the clock on ``step`` seconds first, so records written
one after another carry increasing times without the test stepping the clock by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fleetwarden.ports.sources import FixedClock


@dataclass
class TickingClock(FixedClock):
    step: float = 1.0

    def now(self) -> datetime:
        return self.advance(self.step)

    def time(self) -> float:
        return self.advance(self.step).timestamp()

    def monotonic(self) -> float:
        self.advance(self.step)
        return self.ticks
