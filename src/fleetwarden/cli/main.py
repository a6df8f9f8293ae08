"""The ``fleetwarden`` Typer application: every command, loaded only when it runs.

Exit codes: 0 clean, 1 drift at or above ``--fail-on``, 2 bad arguments or input.

Why lazy: each command pulls its own stack (the scan its parsers; ``serve`` Starlette,
uvicorn and SQLAlchemy; ``watch`` httpx), and ``--help``, ``--version``, ``scan`` and
``gate`` run thousands of times a day in CI jobs and Argo CD PreSync hooks. The group below
knows each command by name and one-line summary; the command's module (``fleetwarden.cli.X``;
``serve``'s is ``fleetwarden.entrypoints.serve_cmd``) is imported, and its ``register``
called, only when that command is resolved (``adapters.typer_cli.LazyGroup``).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from fleetwarden.adapters.typer_cli import LazyCommand, LazyGroup, drop_unreadable_sizes

__all__ = ["COMMANDS", "app", "main"]


COMMANDS: dict[str, LazyCommand] = {
    "scan": LazyCommand("fleetwarden.cli.scan", "Diff desired node pools against node dumps."),
    "explain": LazyCommand(
        "fleetwarden.cli.scan", "Account for every field of the desired pools and its source."
    ),
    "demo": LazyCommand("fleetwarden.cli.demo", "Run on an embedded fleet with planted drift."),
    "deprecations": LazyCommand(
        "fleetwarden.cli.deprecations",
        "Find manifests using APIs deprecated or removed at a Kubernetes version.",
    ),
    "watch": LazyCommand(
        "fleetwarden.cli.watch", "Watch live clusters: findings and cluster events as they happen."
    ),
    "serve": LazyCommand(  # its options beside the HTTP side they start
        "fleetwarden.entrypoints.serve_cmd",
        "Run the event gateway, queue, workers, watchers and dashboard.",
    ),
    "approve": LazyCommand("fleetwarden.cli.approve", "Approve a pending remediation."),
    "gate": LazyCommand(
        "fleetwarden.cli.gate",
        "Argo CD PreSync gate: exit 1 when the app would not schedule or its pools drift.",
    ),
    "audit": LazyCommand("fleetwarden.cli.audit", "The audit store: verify, query, export."),
    "report": LazyCommand(
        "fleetwarden.cli.report", "MTTD, MTTR and drift counts from the audit store."
    ),
    "fleet": LazyCommand(
        "fleetwarden.cli.fleet", "Workloads across clusters: image versions and drift from Git."
    ),
    "upgrade": LazyCommand(
        "fleetwarden.cli.upgrade",
        "Plan and run an ordered pool upgrade: infrastructure, roll, cluster layer, verify.",
    ),
}


class _Commands(LazyGroup):
    catalogue = COMMANDS


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"fleetwarden {version('fleetwarden')}")
        except PackageNotFoundError:  # running from a source tree that was never installed
            typer.echo("fleetwarden (not installed)")
        raise typer.Exit(0)


app = typer.Typer(
    name="fleetwarden",
    cls=_Commands,
    help="Keep a fleet of Kubernetes clusters honest: find node-pool drift between the desired "
    "state (eksctl, Karpenter, Cluster API, Terraform, native YAML) and the real nodes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help and usage errors print literally: [CLUSTER=]PATH, [/x]
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Keep a fleet of Kubernetes clusters honest: find node-pool drift between the desired
    state (eksctl, Karpenter, Cluster API, Terraform, native YAML) and the real nodes."""


def main() -> None:
    drop_unreadable_sizes()
    try:
        app(prog_name="fleetwarden")
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
