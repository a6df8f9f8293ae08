"""``fleetwarden demo``: the embedded fleet, scanned by the same readers and diff as ``scan``
(the simulation: ``wiring/demo.py``).

Live mode plays a scripted stream of changes (console edits, ``kubectl label``, scale-ups,
upgrades, heals) and prints the findings that appear and clear after each one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console

from fleetwarden.cli.common import (
    FailOn,
    FormatOpt,
    OutputFormat,
    WideOpt,
    emit_report,
    exit_code,
    fail,
)
from fleetwarden.core.fleet import FleetReport
from fleetwarden.core.policy import Mode
from fleetwarden.presenting.demo import change_json_lines, print_change
from fleetwarden.presenting.rendering import demo_intro, findings_table, line, make_console
from fleetwarden.wiring import demo

__all__ = ["demo_command", "register", "run_live"]


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
    changes = demo.live_changes(report, steps=steps, interval=interval, seed=seed, sleep=sleep)
    for now, what, events in changes:
        if json_lines:
            for text in change_json_lines(now, what, events):
                print(text)
        else:
            print_change(console, now, what, events)


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
            help="No service: print N simulated changes and their findings (0: endless).",
        ),
    ] = None,
    port: Annotated[int, typer.Option(metavar="PORT", help="The service's port.")] = 8765,
    mode: Annotated[
        Mode,
        typer.Option(help="The service's healing: say what it would do, ask first, or act."),
    ] = Mode.DRY_RUN,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the dashboard (with a display).")
    ] = True,
    interval: Annotated[
        float, typer.Option(metavar="SECONDS", help="Live mode: seconds between changes.")
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
        emit_report(report, output, wide=wide)
        raise typer.Exit(exit_code(report.findings, FailOn.high))
    if steps is None and output is not OutputFormat.json:  # the service, until Ctrl-C
        _serve(make_console(), port, interval, seed, open_browser, mode.value)
        return
    run_live(
        make_console(wide=wide),
        report,
        steps=12 if steps is None else steps,
        interval=interval,
        seed=seed,
        json_lines=output is OutputFormat.json,
        wide=wide,
    )


def _serve(console: Any, port: int, interval: float, seed: int, browse: bool, mode: str) -> None:
    """The demo service until Ctrl-C: the URL and tokens printed, the browser opened when
    there is a display; everything started is stopped on the way out."""
    import asyncio
    import contextlib
    import socket
    import webbrowser

    from fleetwarden import logs
    from fleetwarden.entrypoints.serve_cmd import build_service
    from fleetwarden.presenting.demo import demo_service_text
    from fleetwarden.wiring import demo_service

    with socket.socket() as probe:  # a taken port: say which option to change
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            fail(f"demo: cannot listen on 127.0.0.1:{port} ({exc.strerror}): pass --port N")

    def ready(url: str, tokens: dict[str, str], service: Any) -> None:
        live = service.config.kubeconfig is not None
        text = demo_service_text(url, tokens["read"], tokens["admin"], interval, mode, live=live)
        console.print(text)
        if browse and demo_service.has_display():
            webbrowser.open(url)

    logs.configure("console", "warning")  # what goes wrong, not every request
    run = demo_service.run(
        port=port,
        interval=interval,
        seed=seed,
        mode=mode,
        on_ready=ready,
        build=build_service,
        real=True,  # real kube-apiservers when this checkout has their binaries cached
    )
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner() as runner:
        runner.run(run)
    console.print("demo stopped: service, simulated cloud and temporary store removed")


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the command line."""
    app.command("demo")(demo_command)
