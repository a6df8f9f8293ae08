"""Refusing a request that waits for approval (the dashboard's **deny**): the request becomes
a ``cancelled`` decision with guard ``denied`` and the refuser's name among its reasons, on
record as the same cancellation note an expired request gets (``healing_records``), and
nothing runs.

It is the healer's state that changes, the way ``Healer.approve`` changes it: the leader
refuses (``NotLeading`` elsewhere); with shared guard state in one guarded transaction, after
catching up with the other replicas -- a request another replica approved or cancelled
meanwhile is not pending any more, and refusing it raises ``UnknownDecision`` /
``RequestCancelled``, with nothing recorded. (A module of its own: ``healing.py`` is at its
size limit.)
"""

from __future__ import annotations

from typing import Any

from fleetwarden.app.healing import Healer, NotLeading
from fleetwarden.app.healing_records import cancellation_draft
from fleetwarden.core import policy as policy_mod
from fleetwarden.core.policy import Decision, RequestCancelled, UnknownDecision
from fleetwarden.ports.audit import AuditStoreError

__all__ = ["denial", "deny"]


async def denial(
    healer: Healer, decision_id: str, *, admin: bool, by: str
) -> tuple[int, dict[str, Any]]:
    """``POST /api/decisions/<id>/deny`` as the status and body the service answers (as
    ``app/approving.approval``): 200 with the refused decision; 401 unless the caller is an
    admin (``admin``); 404 for an id that waits for nothing; 409 for one cancelled before;
    503 on a follower or when the store cannot answer (nothing was done)."""
    if not admin:
        return 401, {"error": "denying needs auth.admin credentials"}
    try:
        decision = await deny(healer, decision_id, by=by)
    except RequestCancelled as exc:
        return 409, {"error": str(exc), "decision": exc.decision.to_json()}
    except UnknownDecision as exc:
        return 404, {"error": str(exc)}
    except NotLeading as exc:
        return 503, {"error": str(exc), "leader": False}
    except AuditStoreError as exc:
        return 503, {"error": f"cannot record the refusal, nothing done: {exc}"}
    return 200, decision.to_json()


async def deny(healer: Healer, decision_id: str, *, by: str) -> Decision:
    """The refused request, recorded (see the module docstring)."""
    if not healer.acting:
        raise NotLeading(
            f"this replica ({healer.identity}) is not the leader: deny {decision_id} on the "
            "leader (its /healthz says leader: true)"
        )
    now = healer.clock.now()
    if healer.shared is None:
        decision = policy_mod.deny(decision_id, healer.state, now, by=by)
        policy_mod.record(decision, healer.state, policy=healer.policy)
        healer.decisions[decision.id] = decision
        await healer._append([cancellation_draft(decision)])
        return decision
    async with await healer._guarded() as txn:
        healer._catch_up(txn.news)
        decision = policy_mod.deny(decision_id, healer.state, now, by=by)
        drafts = [cancellation_draft(decision)]
        await txn.append(drafts)
        policy_mod.record(decision, healer.state, policy=healer.policy)
        healer.decisions[decision.id] = decision
        healer._cursor = txn.head
    if healer.on_appended is not None:
        healer.on_appended(drafts)
    return decision
