"""``fleetwarden approve ID``: let a decision that waits in approval mode run now."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from fleetwarden.adapters.approvals import ApprovalError
from fleetwarden.cli.common import config_option, failing, warn
from fleetwarden.wiring import approving

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command()
    def approve(
        decision_id: Annotated[
            str,
            typer.Argument(
                metavar="ID",
                help="The decision id (d-...), "
                "from GET /api/decisions?status="
                "pending-approval or the audit log.",
            ),
        ],
        config: Annotated[
            Path | None,
            config_option("The service config: its listen address and auth.admin token are used."),
        ] = None,
        server: Annotated[
            str | None,
            typer.Option(
                metavar="URL",
                help="The service URL (default: from --config, else http://127.0.0.1:8080).",
            ),
        ] = None,
        token: Annotated[
            str | None,
            typer.Option(
                metavar="TOKEN",
                envvar="FW_ADMIN_TOKEN",
                show_envvar=True,
                help="The admin bearer token (default: auth.admin of --config).",
            ),
        ] = None,
    ) -> None:
        """Approve a pending remediation: the service checks its guards again and, if they
        still allow it, carries it out and records it in the audit log. A request that
        expired, or was made in another policy mode or under another configuration, was
        cancelled: this says so and exits 1, and nothing is done."""
        with failing(ValueError, ApprovalError):  # the config (FormatError), no token, the call
            status, body = approving.approve(decision_id, config=config, server=server, token=token)
        if status == 409:  # cancelled: expired, or another mode or configuration
            typer.echo(json.dumps(body.get("decision"), indent=2))
            warn(body.get("error", "the request was cancelled; nothing was done"))
            raise typer.Exit(1)
        typer.echo(json.dumps(body, indent=2))
        raise typer.Exit(0 if body.get("status") == "execute" else 1)
