"""The ``fleetwarden`` Typer application: every command, loaded only when it runs.

Exit codes: 0 clean, 1 drift at or above ``--fail-on``, 2 bad arguments or input.

Why lazy: each command pulls its own stack (the scan its parsers; ``serve`` Starlette,
uvicorn and SQLAlchemy; ``watch`` httpx), and ``--help``, ``--version``, ``scan`` and
``gate`` run thousands of times a day in CI jobs and Argo CD PreSync hooks. The group below
knows each command by name and one-line summary; the command's module (``fleetwarden.cli.X``;
``serve``'s is ``fleetwarden.entrypoints.serve_cmd``) is imported, and its ``register``
called, only when that command is resolved (run, or asked for its own ``--help``). The
top-level help lists the summaries without importing anything.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from fleetwarden.core.integers import ascii_int

__all__ = ["COMMANDS", "app", "main"]


@dataclass(frozen=True, slots=True)
class _Command:
    module: str  # has register(app: typer.Typer) adding the command
    summary: str  # the line shown by ``fleetwarden --help`` (never cut)


COMMANDS: dict[str, _Command] = {
    "scan": _Command("fleetwarden.cli.scan", "Diff desired node pools against node dumps."),
    "explain": _Command(
        "fleetwarden.cli.scan", "Account for every field of the desired pools and its source."
    ),
    "demo": _Command("fleetwarden.cli.demo", "Run on an embedded fleet with planted drift."),
    "deprecations": _Command(
        "fleetwarden.cli.deprecations",
        "Find manifests using APIs deprecated or removed at a Kubernetes version.",
    ),
    "watch": _Command(
        "fleetwarden.cli.watch", "Watch live clusters: findings and cluster events as they happen."
    ),
    "serve": _Command(  # its options beside the HTTP side they start
        "fleetwarden.entrypoints.serve_cmd",
        "Run the event gateway, queue, workers, watchers and dashboard.",
    ),
    "approve": _Command("fleetwarden.cli.approve", "Approve a pending remediation."),
    "gate": _Command(
        "fleetwarden.cli.gate",
        "Argo CD PreSync gate: exit 1 when the app would not schedule or its pools drift.",
    ),
    "audit": _Command("fleetwarden.cli.audit", "The audit store: verify, query, export."),
    "report": _Command(
        "fleetwarden.cli.report", "MTTD, MTTR and drift counts from the audit store."
    ),
    "fleet": _Command(
        "fleetwarden.cli.fleet", "Workloads across clusters: image versions and drift from Git."
    ),
    "upgrade": _Command(
        "fleetwarden.cli.upgrade",
        "Plan and run an ordered pool upgrade: infrastructure, roll, cluster layer, verify.",
    ),
}


class _LazyGroup(TyperGroup):
    """A Typer group whose commands are imported when resolved, not at start-up."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*self.commands, *(n for n in COMMANDS if n not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return self.commands.get(cmd_name)
        module = importlib.import_module(COMMANDS[cmd_name].module)
        sub = typer.Typer(rich_markup_mode=None, add_completion=False)
        module.register(sub)
        for name, command in typer.main.get_group(sub).commands.items():
            command.short_help = COMMANDS[name].summary if name in COMMANDS else None
            _name_values(command)
            self.commands.setdefault(name, command)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in COMMANDS and args[0] not in self.commands:
            # a typo: suggest from every known name, not only the ones loaded so far
            for name in COMMANDS:
                self.commands.setdefault(name, _Placeholder(name))
            try:
                return super().resolve_command(ctx, args)
            finally:
                for name in [n for n, c in self.commands.items() if isinstance(c, _Placeholder)]:
                    del self.commands[name]
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, COMMANDS[name].summary) for name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _name_values(command: Any) -> None:
    """Placeholders that name the values: an option of a fixed set of values without a
    metavar shows them bare (``--format table|json``, not Typer's ``<table|json>``); an
    argument with a metavar does not repeat its Python type after it (``ID``, not
    ``ID <str>``)."""
    for param in getattr(command, "params", ()):
        kind = getattr(param, "param_type_name", None)
        if kind == "argument" and param.metavar:
            param.display_type_rich = lambda ctx: None
        elif kind == "option" and param.metavar is None and not param.is_flag:
            choices = _choices(param)
            if choices:
                param.metavar = "|".join(dict.fromkeys(choices))
    for sub in getattr(command, "commands", {}).values():
        _name_values(sub)


def _choices(param: Any) -> list[str]:
    """The values an option takes from a fixed set (an Enum or a Literal), as typed on the
    command line; empty for any other option. Typer keeps them on the parameter's type
    descriptor (0.29) or its Choice type (before)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        found = descriptor.choices if getattr(descriptor, "is_choice", False) else None
    else:
        found = getattr(getattr(param, "type", None), "choices", None)
    return [str(getattr(c, "value", c)) for c in found or ()]


class _Placeholder:
    """Stands for an unloaded command while a typo's suggestions are computed."""

    hidden = True

    def __init__(self, name: str) -> None:
        self.name = name


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
    cls=_LazyGroup,
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


def _drop_unreadable_sizes() -> None:
    """rich (and so Typer's help) reads ``COLUMNS`` and ``LINES`` with ``str.isdigit()`` and
    then ``int()``: a value such as "²" passes the one and fails the other, a traceback before
    any command runs. Such a value is no size; it is dropped, as if unset."""
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is not None and value.strip() and ascii_int(value.strip(), max_digits=6) is None:
            del os.environ[name]


def main() -> None:
    _drop_unreadable_sizes()
    try:
        app(prog_name="fleetwarden")
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
