"""``fleetwarden serve``: the service as ``entrypoints.serve_cmd`` defines it.

Only this command loads the serve stack (Starlette, uvicorn, SQLAlchemy, the queue clients).
"""

from __future__ import annotations

import typer

from fleetwarden.entrypoints import serve_cmd

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the command line."""
    serve_cmd.register(app)
