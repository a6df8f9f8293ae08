"""``fleetwarden approve``'s call assembled: the service config read when one is given (its
schema and store checks load SQLAlchemy: only then), the target and token chosen by
``app.approving.approval_target``, and the POST made by ``adapters.approvals``.

Errors: ``FormatError`` (the config), ``ValueError`` (no admin token), ``ApprovalError`` (the
service could not be asked or said no), each naming the file, option or server; what the
answer means for the exit code is the command's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleetwarden.adapters.approvals import post_approval
from fleetwarden.app.approving import approval_target

__all__ = ["approve"]


def approve(
    decision_id: str, *, config: Path | None, server: str | None, token: str | None
) -> tuple[int, Any]:
    """The service's answer to approving ``decision_id`` (``post_approval``'s)."""
    cfg = None
    if config is not None:
        from fleetwarden.wiring.service_config import load_service_config

        cfg = load_service_config(config)
    url, admin_token = approval_target(cfg, server, token)
    return post_approval(url, decision_id, admin_token)
