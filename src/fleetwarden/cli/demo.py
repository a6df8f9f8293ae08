"""``fleetwarden demo``: the embedded fleet, scanned by the same readers and diff as ``scan``
(the simulation: ``wiring/demo.py``).

Live mode plays a scripted stream of changes (console edits, ``kubectl label``, scale-ups,
upgrades, heals) and prints the findings that appear and clear after each one.
"""

from __future__ import annotations

from typing import Annotated

import typer

from fleetwarden.cli.common import (
    FormatOpt,
    OutputFormat,
    WideOpt,
    exit_code,
    fail,
)
from fleetwarden.core.findings import Severity
from fleetwarden.core.policy import Mode
from fleetwarden.presenting.rendering import emit_report, make_console
from fleetwarden.wiring import demo

__all__ = ["demo_command", "register"]


def demo_command(
    once: Annotated[
        bool,
        typer.Option(
            "--once", help="One pass: print the findings and exit (1: the demo fleet has drift)."
        ),
    ] = False,
    output: FormatOpt = OutputFormat.table,
    steps: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            min=0,
            help="No service: print N simulated changes and their findings (0: endless).",
        ),
    ] = None,
    port: Annotated[
        int, typer.Option(metavar="PORT", min=1, max=65535, help="The service's port.")
    ] = 8765,
    mode: Annotated[
        Mode,
        typer.Option(help="The service's healing: say what it would do, ask first, or act."),
    ] = Mode.DRY_RUN,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the dashboard (with a display).")
    ] = True,
    interval: Annotated[
        float,
        typer.Option(metavar="SECONDS", min=0.0, help="Live mode: seconds between changes."),
    ] = 1.5,
    seed: Annotated[int, typer.Option(metavar="N", help="Random seed of the live simulation.")] = 7,
    wide: WideOpt = False,
) -> None:
    """Without options: the real service (gateway, queue, healer in dry-run, audit store,
    dashboard) on the embedded fleet, a simulated cloud posting change events to it, until
    Ctrl-C. The fleet: an embedded, reproducible fleet (3 clusters on AWS, GCP and Azure; 14 pools;
    120+ nodes) with drift planted in every layer, including seed 000's incident
    (m5.large -> t3.medium changed in the cloud console)."""
    report = demo.scan_demo()
    if once:
        emit_report(report, output is OutputFormat.json, wide=wide)
        raise typer.Exit(exit_code(report.findings, Severity.HIGH))
    if steps is None and output is not OutputFormat.json:  # the service, until Ctrl-C
        from fleetwarden.entrypoints.serve_cmd import build_service
        from fleetwarden.wiring import demo_service

        if (problem := demo_service.port_problem(port)) is not None:
            fail(problem)
        demo_service.serve_demo(
            make_console(), port=port, interval=interval, seed=seed, browse=open_browser,
            mode=mode.value, build=build_service,
        )  # fmt: skip
        return
    demo.run_live(
        make_console(wide=wide),
        report,
        steps=12 if steps is None else steps,
        interval=interval,
        seed=seed,
        json_lines=output is OutputFormat.json,
        wide=wide,
    )


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the command line."""
    app.command("demo")(demo_command)
