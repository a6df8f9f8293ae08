"""``fleetwarden audit verify | query | export``: the audit store from the command line."""

from __future__ import annotations

import typer

from fleetwarden.entrypoints import audit_cmd

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``audit`` group to the command line."""
    audit_cmd.register(app)
