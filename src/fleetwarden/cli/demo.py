"""``fleetwarden demo``: the embedded fleet, scanned by the same readers and diff as ``scan``.

Live mode plays a scripted stream of changes (console edits, ``kubectl label``, scale-ups,
upgrades, heals) and prints the findings that appear and clear after each one.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console

from fleetwarden.adapters import simulated
from fleetwarden.app.remediating import Remediator
from fleetwarden.cli.common import (
    FailOn,
    FormatOpt,
    OutputFormat,
    WideOpt,
    emit_report,
    exit_code,
)
from fleetwarden.core import policy
from fleetwarden.core.fleet import FleetReport
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.ports.remediation import OutcomeStatus
from fleetwarden.presenting.demo import change_json_lines, print_change
from fleetwarden.presenting.rendering import (
    demo_intro,
    findings_table,
    line,
    make_console,
)

__all__ = ["demo", "register", "run_live"]


Change = Callable[[simulated.SimulatedFleet, random.Random], str]


def _heal(fleet: simulated.SimulatedFleet, rng: random.Random) -> str:
    """A restore as ``serve`` in enforce mode makes it: the default policy picks ``restore``
    for a label or taint drift, and the remediator patches those labels and taints back on
    the nodes (through the simulated Node API). Nothing else is put back: an instance type or
    a kubelet version is the infrastructure's to fix. The demo shows the action, not the
    guards (each restore is decided on a fresh history)."""
    now = datetime.now(UTC)
    restores = [
        d
        for f in simulated.scan_fleet(fleet).findings
        if (d := policy.decide(f, _OWNERS.route(f), policy.PolicyState(), now, _ENFORCE)).action
        is policy.Action.RESTORE
    ]
    if not restores:
        return simulated.drop_taint(fleet, rng)
    decision = rng.choice(restores)
    remediator = Remediator(nodes=lambda cluster: simulated.SimulatedNodeRestorer(fleet, cluster))
    outcome = asyncio.run(remediator.carry_out(decision))
    assert decision.target is not None
    failed = outcome.status is not OutcomeStatus.OK
    done = f" ({outcome.status.value}: {outcome.detail})" if failed else ""
    return f"fleetwarden (policy restore): {decision.target.describe()}{done}"


_OWNERS = OwnershipMap()
_ENFORCE = policy.Mode.ENFORCE


_CHANGES: tuple[Change, ...] = (
    simulated.label_by_hand,
    simulated.drop_taint,
    simulated.console_resize,
    simulated.upgrade,
    _heal,
    _heal,
)


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
    rng = random.Random(seed)
    fleet = simulated.build_fleet()
    desired = simulated.demo_desired()
    current = {f.id: f for f in report.findings}
    if not json_lines:
        console.print(findings_table(report.findings, title="demo fleet: current drift", wide=wide))
        console.print(line((demo_intro(steps, interval), "dim")))
    step = 0
    while steps == 0 or step < steps:
        step += 1
        sleep(interval)
        what = rng.choice(_CHANGES)(fleet, rng)
        after = {f.id: f for f in simulated.scan_fleet(fleet, desired).findings}
        events = [("finding.appeared", after[i]) for i in after if i not in current]
        events += [("finding.cleared", current[i]) for i in current if i not in after]
        events += [
            ("finding.changed", after[i])
            for i in after
            if i in current and after[i].nodes != current[i].nodes
        ]
        current = after
        now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        if json_lines:
            for text in change_json_lines(now, what, events):
                print(text)
        else:
            print_change(console, now, what, events)


def demo(
    once: Annotated[
        bool,
        typer.Option(
            "--once", help="One pass: print the findings and exit (1: the demo fleet has drift)."
        ),
    ] = False,
    output: FormatOpt = OutputFormat.table,
    steps: Annotated[
        int,
        typer.Option(metavar="N", help="Live mode: number of simulated changes (0: endless)."),
    ] = 12,
    interval: Annotated[
        float, typer.Option(metavar="SECONDS", help="Live mode: seconds between changes.")
    ] = 1.5,
    seed: Annotated[int, typer.Option(metavar="N", help="Random seed of the live simulation.")] = 7,
    wide: WideOpt = False,
) -> None:
    """Run on an embedded, reproducible fleet (3 clusters on AWS, GCP and Azure; 14 pools;
    120+ nodes) with drift planted in every layer, including seed 000's incident
    (m5.large -> t3.medium changed in the cloud console)."""
    report = simulated.scan_demo()
    if once:
        emit_report(report, output, wide=wide)
        raise typer.Exit(exit_code(report.findings, FailOn.high))
    run_live(
        make_console(wide=wide),
        report,
        steps=steps,
        interval=interval,
        seed=seed,
        json_lines=output is OutputFormat.json,
        wide=wide,
    )


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the command line."""
    app.command("demo")(demo)
