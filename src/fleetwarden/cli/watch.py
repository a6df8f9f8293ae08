"""``fleetwarden watch``: live clusters, findings and lifecycle events as they happen."""

from __future__ import annotations

import typer

from fleetwarden.entrypoints import watch_cmd

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``watch`` to the command line."""
    watch_cmd.register(app)
