"""``fleetwarden demo``: ``app/demoing.py`` over the simulated fleet (``adapters/simulated``):
its changes (labels by hand, lost taints, console resizes, upgrades, heals) and its scans;
``run_live`` plays them to the console (``presenting/demo.py``)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from rich.console import Console

from fleetwarden.adapters import simulated
from fleetwarden.app import demoing
from fleetwarden.core.findings import Finding
from fleetwarden.core.fleet import FleetReport
from fleetwarden.presenting.demo import change_json_lines, print_change
from fleetwarden.presenting.rendering import demo_intro, findings_table, line

__all__ = ["heal", "live_changes", "run_live", "scan_demo"]

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


def run_live(
    console: Console,
    report: FleetReport,
    *,
    steps: int,
    interval: float,
    seed: int,
    json_lines: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    wide: bool = False,
) -> None:
    """Print the initial state, then one simulated change per ``interval`` and its effect."""
    if not json_lines:
        console.print(findings_table(report.findings, title="demo fleet: current drift", wide=wide))
        console.print(line((demo_intro(steps, interval), "dim")))
    changes = live_changes(report, steps=steps, interval=interval, seed=seed, sleep=sleep)
    for now, what, events in changes:
        if json_lines:
            for text in change_json_lines(now, what, events):
                print(text)
        else:
            print_change(console, now, what, events)
