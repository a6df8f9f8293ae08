"""``fleetwarden upgrade plan | run`` for people: the plan's header, pre-flight checks and
steps; a run's step records and progress lines (on stderr), its findings. For machines: the
plan's and the run report's JSON, indented, on stdout."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from rich.console import Console
from rich.table import Table

from fleetwarden.app.upgrading import Progress, RunReport
from fleetwarden.core.upgrades import StepRecord, UpgradePlan
from fleetwarden.presenting.rendering import findings_table, literal, make_console

__all__ = [
    "emit_plan",
    "emit_run_report",
    "print_plan",
    "print_progress",
    "print_step",
    "run_printers",
]


def _write_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    sys.stdout.flush()


def emit_plan(plan: UpgradePlan, *, as_json: bool) -> None:
    """``upgrade plan``'s answer: the plan as JSON, or its tables for people."""
    if as_json:
        _write_json(plan.to_json())
    else:
        print_plan(make_console(), plan)


def emit_run_report(report: RunReport, *, as_json: bool) -> None:
    """``upgrade run``'s answer: the report as JSON, or for people its findings (if any; the
    steps were printed as they went)."""
    if as_json:
        _write_json(report.to_json())
    elif report.findings:
        make_console().print(findings_table(report.findings, title="upgrade findings"))


def run_printers(*, quiet: bool) -> tuple[Callable[[Progress], None], Callable[[StepRecord], None]]:
    """``upgrade run``'s progress and step lines on stderr (``quiet``, for JSON: none)."""
    if quiet:
        return (lambda p: None), (lambda r: None)
    console = make_console(stderr=True)
    return partial(print_progress, console), partial(print_step, console)


def print_plan(console: Console, plan: UpgradePlan) -> None:
    """The plan: its header line, the pre-flight checks, the ordered steps."""
    console.print(
        literal(
            f"upgrade {plan.cluster}/{plan.pool}: {', '.join(plan.from_versions) or 'no node'} "
            f"-> {plan.to_version} (run {plan.run_id}, budget {plan.budget})",
            "bold",
        )
    )
    checks = Table("pre-flight", "result", "details", header_style="bold")
    for c in plan.checks:
        details = "\n".join([*c.blocking, *c.notes])
        checks.add_row(literal(c.name), literal("BLOCKS" if not c.ok else "ok"), literal(details))
    console.print(checks)
    steps = Table("#", "step", "what", header_style="bold")
    for i, s in enumerate(plan.steps, 1):
        steps.add_row(str(i), literal(s.kind.value), literal(s.description))
    console.print(steps)


def print_step(console: Console, record: StepRecord) -> None:
    """One line per step record of ``upgrade run``: step, status, detail."""
    console.print(literal(f"{record.step.value}: {record.status.value}: {record.detail}"))


def print_progress(console: Console, progress: Progress) -> None:
    """A dim line while the pool rolls: what rolled so far and the findings of the moment."""
    note = f"upgrade in progress: {progress.roll.describe()}"
    console.print(literal(f"{note}; {len(progress.drift.findings)} finding(s)", "dim"))
