"""What every command shares: the one error path (exit 2) and the console it writes to.

Command modules import this at the top (it imports no command module, so there is no cycle
to hide by importing inside functions).
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

from fleetwarden.cli.rendering import line

__all__ = ["err_console", "fail", "warn"]

# rich wraps at 80 columns when stderr is not a terminal: messages are printed soft-wrapped
# (never broken), so a long error stays one line in a log or a pipe.
err_console = Console(stderr=True)


def fail(message: str) -> NoReturn:
    """Print ``fleetwarden: error: MESSAGE`` on stderr, literally and on one line; exit 2."""
    err_console.print(
        line(("fleetwarden: error:", "bold red"), " ", message), soft_wrap=True, highlight=False
    )
    raise typer.Exit(2)


def warn(message: str) -> None:
    """``fleetwarden: warning: MESSAGE`` on stderr, literally and on one line."""
    err_console.print(
        line(("fleetwarden: warning:", "yellow"), " ", message), soft_wrap=True, highlight=False
    )
