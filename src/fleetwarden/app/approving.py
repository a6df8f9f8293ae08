"""``POST /api/decisions/<id>/approve``: a pending decision approved, as the status and body
the service answers (as ``app/supervising.combined_health`` answers ``/healthz``).

200 with the decision when it ran; 401 without ``auth.admin`` credentials; 404 for an unknown
decision; 409 when another replica (or this one) approved it already, or it was cancelled
(expired, or made in another mode or configuration); 503 when this replica does not lead (a
balancer may try another) or the audit store cannot be read (nothing was done).

``approval_target`` is the other side, ``fleetwarden approve``: where to send it, with which
token."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleetwarden.app.healing import AlreadyApproved, Healer, NotLeading
from fleetwarden.core.policy import Status, UnknownDecision
from fleetwarden.ports.audit import AuditStoreError

if TYPE_CHECKING:
    from fleetwarden.app.service_config import ServiceConfig

__all__ = ["approval", "approval_target"]

DEFAULT_SERVER = "http://127.0.0.1:8080"


def approval_target(
    config: ServiceConfig | None, server: str | None, token: str | None
) -> tuple[str, str]:
    """The service URL and admin token of ``fleetwarden approve``: ``--server`` and
    ``--token`` when given, else the service config's listen address and first
    ``auth.admin`` token, else the default URL; ``ValueError`` when there is no token."""
    if config is not None:
        server = server or f"http://{config.host}:{config.port}"
        admin = config.auth.get("admin")
        if token is None and admin is not None and admin.bearer_tokens:
            token = admin.bearer_tokens[0]
    if not token:
        raise ValueError(
            "no admin token: give --token, FW_ADMIN_TOKEN or a --config with auth.admin"
        )
    return (server or DEFAULT_SERVER).rstrip("/"), token


async def approval(healer: Healer, decision_id: str, *, admin: bool) -> tuple[int, dict[str, Any]]:
    """Approve ``decision_id`` when the caller is an admin (``admin``); the answer."""
    if not admin:
        return 401, {"error": "approving needs auth.admin credentials"}
    try:
        decision = await healer.approve(decision_id)
    except AlreadyApproved as exc:  # another replica (or this one) ran it
        at = exc.at.isoformat().replace("+00:00", "Z")
        return 409, {"error": str(exc), "holder": exc.holder, "at": at, "status": exc.status}
    except NotLeading as exc:  # the leader approves; a balancer may try another replica
        return 503, {"error": str(exc), "leader": False}
    except UnknownDecision as exc:
        return 404, {"error": str(exc)}
    except AuditStoreError as exc:  # cannot tell whether another replica cancelled it
        return 503, {"error": f"cannot check the audit store, nothing was done: {exc}"}
    if decision.status is Status.CANCELLED:  # expired, or another mode or configuration
        return 409, {
            "error": f"decision {decision.id} was cancelled, nothing was done: "
            f"{decision.reasons[-1]}",
            "decision": decision.to_json(),
        }
    return 200, decision.to_json()
