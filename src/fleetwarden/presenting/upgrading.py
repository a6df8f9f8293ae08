"""``fleetwarden upgrade plan`` for people: the plan's header, pre-flight checks and steps."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fleetwarden.core.upgrades import UpgradePlan
from fleetwarden.presenting.rendering import literal

__all__ = ["print_plan"]


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
