"""``fleetwarden gate``: the Argo CD PreSync gate (exit 1 blocks the sync).

Runs in every PreSync hook: it loads the desired state, the node and workload dumps and
only with ``--kubeconfig``/``--in-cluster``/``--argocd-app`` the HTTP clients.
"""

from __future__ import annotations

import typer

from fleetwarden.entrypoints import fleet_cmd

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``gate`` to the command line."""
    app.command("gate")(fleet_cmd.gate_command)
