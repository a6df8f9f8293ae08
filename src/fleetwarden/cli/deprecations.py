"""``fleetwarden deprecations``: the command as ``entrypoints.deprecations_cmd`` defines it.

Thin on purpose: the use case is moving to ``app/deprecating.py``; this module only adds the
command, so it follows that module's arguments wherever they end up.
"""

from __future__ import annotations

import typer

from fleetwarden.entrypoints import deprecations_cmd

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``deprecations`` to the command line."""
    deprecations_cmd.register(app)
