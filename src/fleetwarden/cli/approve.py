"""``fleetwarden approve ID``: let a pending remediation run (approval mode)."""

from __future__ import annotations

import typer

from fleetwarden.entrypoints import approve_cmd

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``approve`` to the command line."""
    approve_cmd.register(app)
