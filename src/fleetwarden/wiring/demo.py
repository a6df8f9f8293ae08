"""``fleetwarden demo``: ``app/demoing.py`` over the simulated fleet (``adapters/simulated``):
its changes (labels by hand, lost taints, console resizes, upgrades, heals) and its scans."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from fleetwarden.adapters import simulated
from fleetwarden.app import demoing
from fleetwarden.core.findings import Finding
from fleetwarden.core.fleet import FleetReport

__all__ = ["heal", "live_changes", "scan_demo"]

scan_demo = simulated.scan_demo


def heal(fleet: simulated.SimulatedFleet, rng: random.Random) -> str:
    """``app.demoing.heal`` on the simulated Node API (a lost taint when nothing to heal)."""
    healed = demoing.heal(
        simulated.scan_fleet(fleet).findings, rng, now=datetime.now(UTC),
        nodes=lambda cluster: simulated.SimulatedNodeRestorer(fleet, cluster),
    )  # fmt: skip
    return healed or simulated.drop_taint(fleet, rng)


_CHANGES: tuple[demoing.Change, ...] = (
    simulated.label_by_hand,
    simulated.drop_taint,
    simulated.console_resize,
    simulated.upgrade,
    heal,
    heal,
)


def live_changes(
    report: FleetReport, *, steps: int, interval: float, seed: int, sleep: Callable[[float], None]
) -> Iterator[tuple[str, str, list[tuple[str, Finding]]]]:
    """One simulated change per ``interval`` (``steps`` 0: for ever): when, what, its effect
    on the findings since ``report``."""
    fleet, desired = simulated.build_fleet(), simulated.demo_desired()
    return demoing.simulate(
        fleet, report, lambda: simulated.scan_fleet(fleet, desired), _CHANGES,
        random.Random(seed), steps=steps, interval=interval, sleep=sleep,
    )  # fmt: skip
