"""``fleetwarden demo``: the embedded simulated fleet, once or live."""

from __future__ import annotations

from typing import Annotated

import typer

from fleetwarden.cli.common import FORMAT_METAVAR, FailOn, OutputFormat, emit_report, exit_code
from fleetwarden.cli.rendering import make_console
from fleetwarden.entrypoints import demo as demo_mod

__all__ = ["demo", "register"]


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
) -> None:
    """Run on an embedded, reproducible fleet (3 clusters on AWS, GCP and Azure; 14 pools;
    120+ nodes) with drift planted in every layer, including seed 000's incident
    (m5.large -> t3.medium changed in the cloud console)."""
    report = demo_mod.scan_demo()
    if once:
        emit_report(report, output)
        raise typer.Exit(exit_code(report.findings, FailOn.high))
    demo_mod.run_live(
        make_console(),
        report,
        steps=steps,
        interval=interval,
        seed=seed,
        json_lines=output is OutputFormat.json,
    )


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the command line."""
    app.command("demo")(demo)
