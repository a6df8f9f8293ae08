"""``fleetwarden fleet versions | diff``: an application's workloads across clusters."""

from __future__ import annotations

import typer

from fleetwarden.entrypoints import fleet_cmd

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``fleet`` group to the command line."""
    fleet = typer.Typer(
        name="fleet",
        help="Workloads across clusters: which image runs where, and every drift from Git.",
        no_args_is_help=True,
        rich_markup_mode=None,  # help prints literally
    )
    fleet.command("versions")(fleet_cmd.versions_command)
    fleet.command("diff")(fleet_cmd.diff_command)
    app.add_typer(fleet, name="fleet")
