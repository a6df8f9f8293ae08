"""``fleetwarden upgrade plan | run`` for people: the plan's header, pre-flight checks and
steps; a run's step records and progress lines."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fleetwarden.app.upgrading import Progress
from fleetwarden.core.upgrades import StepRecord, UpgradePlan
from fleetwarden.presenting.rendering import literal

__all__ = ["print_plan", "print_progress", "print_step"]


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
