"""What every command shares: the one error path (exit 2), the option enums, the exit code.

Command modules import this at the top; it imports no command module (no cycle to hide) and
nothing heavy: ``rich`` is loaded by ``fail``/``warn`` only when there is something to print,
so ``fleetwarden --help`` and ``--version`` stay at Typer's own start-up cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from fleetwarden.core.findings import Finding, Severity

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from fleetwarden.formats.settings import Settings

__all__ = [
    "FAIL_ON_METAVAR",
    "FORMAT_METAVAR",
    "AuditLogOpt",
    "FailOnOpt",
    "FormatOpt",
    "OutputFormat",
    "WideOpt",
    "argocd_server_option",
    "config_option",
    "err_console",
    "exit_code",
    "fail",
    "failing",
    "load_settings_or_fail",
    "warn",
]


class OutputFormat(StrEnum):
    """``--format``: ``table`` for people, ``json`` for machines."""

    table = "table"
    json = "json"


# help placeholders that name the values (Typer would print <table|json> or <str>)
FORMAT_METAVAR = "|".join(OutputFormat)
FAIL_ON_METAVAR = "|".join(Severity)

# the options every command spells the same way
FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format", "-o", metavar=FORMAT_METAVAR, help="table for people, json for machines."
    ),
]
# --fail-on: the lowest severity that makes the command exit 1
FailOnOpt = Annotated[
    Severity,
    typer.Option(
        "--fail-on",
        metavar=FAIL_ON_METAVAR,
        help="Exit 1 when a finding is at or above this severity.",
    ),
]

# watch and deprecations --live: a cluster's API-server audit log (or `auditLogs:` in --config)
AuditLogOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--audit-log",
        metavar="[CLUSTER=]PATH",
        help="The API server's audit log of CLUSTER (JSON lines, --audit-log-path; rotated "
        "backups beside it are read too). Repeat per cluster; `auditLogs:` in --config.",
    ),
]

# every command that prints a table (rendering.Grid) takes it
WideOpt = Annotated[
    bool,
    typer.Option(
        "--wide",
        help="Tables: every column, every value in full (words never split; lines may then "
        "be wider than the terminal). Without it, columns that do not fit are dropped or "
        "abbreviated, and the table says which.",
    ),
]


def config_option(help: str) -> Any:
    """``--config/-c FILE`` with what the command reads of the file (its help)."""
    return typer.Option("--config", "-c", metavar="FILE", help=help)


def argocd_server_option(help: str, *, from_env: bool = True) -> Any:
    """``--argocd-server URL`` with what the command asks Argo CD (its help); ``from_env``:
    the environment variable ``ARGOCD_SERVER`` when the option is not given."""
    envvar = "ARGOCD_SERVER" if from_env else None
    return typer.Option("--argocd-server", metavar="URL", envvar=envvar, help=help)


_err: Console | None = None


def err_console() -> Console:
    """The stderr console, made on first use. rich wraps at 80 columns when stderr is not a
    terminal: messages are printed soft-wrapped (never broken), so a long error stays one line
    in a log or a pipe."""
    global _err
    if _err is None:
        from rich.console import Console

        _err = Console(stderr=True)
    return _err


def exit_code(findings: Iterable[Finding], fail_on: Severity) -> int:
    """1 when a finding is at or above ``fail_on``, else 0."""
    return 1 if any(f.severity.at_least(fail_on) for f in findings) else 0


def fail(message: str) -> NoReturn:
    """Print ``fleetwarden: error: MESSAGE`` on stderr, literally and on one line; exit 2."""
    _say("fleetwarden: error:", "bold red", message)
    raise typer.Exit(2)


def warn(message: str) -> None:
    """``fleetwarden: warning: MESSAGE`` on stderr, literally and on one line."""
    _say("fleetwarden: warning:", "yellow", message)


def _say(label: str, style: str, message: str) -> None:
    from fleetwarden.presenting.rendering import line

    err_console().print(line((label, style), " ", message), soft_wrap=True, highlight=False)


@contextmanager
def failing(*errors: type[Exception]) -> Iterator[None]:
    """An error of ``errors`` (default: ``FormatError``, a bad input) raised inside: exit 2
    with its message, which names the file, field or option (or, for one without a message,
    its type; for a kubeconfig's ``CredentialError``, its reason, which names the context's
    exec plugin)."""
    if not errors:
        from fleetwarden.formats.errors import FormatError

        errors = (FormatError,)
    try:
        yield
    except errors as exc:
        from fleetwarden.ports.kube import CredentialError

        fail(exc.reason if isinstance(exc, CredentialError) else str(exc) or type(exc).__name__)


def load_settings_or_fail(config: Path | None) -> Settings:
    """The ``--config`` settings (``scan:`` and the rest); a bad file exits 2 naming it."""
    from fleetwarden.formats.settings import load_settings

    with failing():
        return load_settings(config)
