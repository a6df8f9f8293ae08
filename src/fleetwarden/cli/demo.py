"""``fleetwarden demo``: the embedded fleet, scanned by the same readers and diff as ``scan``.

Live mode plays a scripted stream of changes (console edits, ``kubectl label``, scale-ups,
upgrades, heals) and prints the findings that appear and clear after each one.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console

from fleetwarden.adapters import simulated
from fleetwarden.app.remediating import Remediator
from fleetwarden.cli.common import (
    FORMAT_METAVAR,
    FailOn,
    OutputFormat,
    WideOpt,
    emit_report,
    exit_code,
)
from fleetwarden.core import policy
from fleetwarden.core.describing import describe_drift
from fleetwarden.core.findings import Finding
from fleetwarden.core.fleet import FleetReport, diff_fleet
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.formats.desired import DesiredRead, SourceFile, read_desired
from fleetwarden.formats.nodes import parse_nodes
from fleetwarden.ports.remediation import OutcomeStatus
from fleetwarden.presenting.rendering import (
    SEVERITY_STYLE,
    demo_intro,
    findings_table,
    line,
    make_console,
)

__all__ = ["demo", "demo_desired", "register", "run_live", "scan_demo", "scan_fleet"]


def demo_desired() -> DesiredRead:
    out = DesiredRead()
    for path, cluster, text in simulated.DESIRED_FILES:
        got = read_desired([SourceFile(path, text.encode())], cluster=cluster)
        out.pools.extend(got.pools)
        out.skipped.extend(got.skipped)
        out.files += got.files
    return out


def scan_fleet(fleet: simulated.SimulatedFleet, desired: DesiredRead | None = None) -> FleetReport:
    desired = desired or demo_desired()
    observed = {
        cluster: parse_nodes(f"demo/{cluster}/nodes.json", orjson.dumps(fleet.node_list(cluster)))
        for cluster in fleet.nodes
    }
    return diff_fleet(desired.pools, observed, skipped=desired.skipped)


def scan_demo() -> FleetReport:
    return scan_fleet(simulated.build_fleet())


Change = Callable[[simulated.SimulatedFleet, random.Random], str]


def _any_node(
    fleet: simulated.SimulatedFleet, rng: random.Random, cluster: str | None = None
) -> tuple[str, dict[str, Any]]:
    cluster = cluster or rng.choice(sorted(fleet.nodes))
    return cluster, rng.choice(fleet.nodes[cluster])


def _label_by_hand(fleet: simulated.SimulatedFleet, rng: random.Random) -> str:
    cluster, node = _any_node(fleet, rng)
    node["metadata"]["labels"]["team"] = "payments"
    return (
        f"oncall@example.com: kubectl label node {node['metadata']['name']} team=payments "
        f"--overwrite  ({cluster})"
    )


def _drop_taint(fleet: simulated.SimulatedFleet, rng: random.Random) -> str:
    cluster = rng.choice(sorted(fleet.nodes))
    tainted = [n for n in fleet.nodes[cluster] if n["spec"].get("taints")]
    node = rng.choice(tainted)
    node["spec"]["taints"] = node["spec"]["taints"][1:]
    return f"autoscaler: node {node['metadata']['name']} re-created without its taint ({cluster})"


def _console_resize(fleet: simulated.SimulatedFleet, rng: random.Random) -> str:
    _, node = _any_node(fleet, rng, "prod-eu-1")
    simulated._retype(node, "t3.medium")
    return (
        f"arn:aws:iam::123456789012:user/alice: console changed {node['metadata']['name']} "
        "to t3.medium (prod-eu-1)"
    )


def _upgrade(fleet: simulated.SimulatedFleet, rng: random.Random) -> str:
    behind = [
        n
        for n in fleet.nodes["prod-us-1"]
        if n["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.29")
    ]
    if not behind:
        return _label_by_hand(fleet, rng)
    for node in behind[:3]:
        node["status"]["nodeInfo"]["kubeletVersion"] = "v1.30.5-gke.1014001"
    return f"gke: upgraded {min(3, len(behind))} nodes of prod-us-1/general to v1.30.5"


def _heal(fleet: simulated.SimulatedFleet, rng: random.Random) -> str:
    """A restore as ``serve`` in enforce mode makes it: the default policy picks ``restore``
    for a label or taint drift, and the remediator patches those labels and taints back on
    the nodes (through the simulated Node API). Nothing else is put back: an instance type or
    a kubelet version is the infrastructure's to fix. The demo shows the action, not the
    guards (each restore is decided on a fresh history)."""
    now = datetime.now(UTC)
    restores = [
        d
        for f in scan_fleet(fleet).findings
        if (d := policy.decide(f, _OWNERS.route(f), policy.PolicyState(), now, _ENFORCE)).action
        is policy.Action.RESTORE
    ]
    if not restores:
        return _drop_taint(fleet, rng)
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
    _label_by_hand,
    _drop_taint,
    _console_resize,
    _upgrade,
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
    desired = demo_desired()
    current = {f.id: f for f in report.findings}
    if not json_lines:
        console.print(findings_table(report.findings, title="demo fleet: current drift", wide=wide))
        console.print(line((demo_intro(steps, interval), "dim")))
    step = 0
    while steps == 0 or step < steps:
        step += 1
        sleep(interval)
        what = rng.choice(_CHANGES)(fleet, rng)
        after = {f.id: f for f in scan_fleet(fleet, desired).findings}
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
            print(json.dumps({"type": "change", "what": what, "at": now}))
            for kind, f in events:
                print(json.dumps({"type": kind, "id": f.id, "finding": f.to_json(), "at": now}))
            continue
        console.print(line((now, "bold"), " ", what), highlight=False)
        for kind, f in events:
            mark = {
                "finding.appeared": ("+", "red"),
                "finding.cleared": ("-", "green"),
                "finding.changed": ("~", "yellow"),
            }[kind]
            console.print(
                line(
                    "   ",
                    mark,
                    " ",
                    (f.severity.value, SEVERITY_STYLE[f.severity]),
                    f" {f.cluster}/{f.pool} {f.layer.value} {f.field}: {_short(f)}",
                ),
                highlight=False,
            )


def _short(f: Finding) -> str:
    return describe_drift(f.expected, f.actual, f.nodes)


def demo(
    once: Annotated[
        bool,
        typer.Option(
            "--once", help="One pass: print the findings and exit (1: the demo fleet has drift)."
        ),
    ] = False,
    output: Annotated[
        OutputFormat,
        typer.Option(
            "--format", "-o", metavar=FORMAT_METAVAR, help="table for people, json for machines."
        ),
    ] = OutputFormat.table,
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
    report = scan_demo()
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
