"""``POST /api/decisions/<id>/approve``: a pending decision approved, as the status and body
the service answers (as ``app/supervising.combined_health`` answers ``/healthz``).

200 with the decision when it ran; 401 without ``auth.admin`` credentials; 404 for an unknown
decision; 409 when another replica (or this one) approved it already, or it was cancelled
(expired, or made in another mode or configuration); 503 when this replica does not lead (a
balancer may try another) or the audit store cannot be read (nothing was done)."""

from __future__ import annotations

from typing import Any

from fleetwarden.app.healing import AlreadyApproved, Healer, NotLeading
from fleetwarden.core.policy import Status, UnknownDecision
from fleetwarden.ports.audit import AuditStoreError

__all__ = ["approval"]


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
