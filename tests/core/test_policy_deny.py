"""``core.policy.deny``: an operator refuses a request waiting for approval -- it is closed as
a cancellation (guard ``denied``, the refuser named), counts against no guard, and can be
neither approved nor refused again."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleetwarden.core.ownership import Owner
from fleetwarden.core.policy import (
    Decision,
    Guard,
    Mode,
    RequestCancelled,
    Status,
    UnknownDecision,
    approve,
    decide,
    deny,
    record,
)
from tests.core.test_policy import T0, f, fresh, route


def test_a_denied_request_is_closed_runs_nothing_and_cannot_be_approved():
    state = fresh()
    request = decide(f(), route(Owner.CLUSTER), state, T0, Mode.APPROVAL)
    record(request, state)
    later = T0 + timedelta(minutes=3)
    refused = deny(request.id, state, later, by="alice")
    assert (refused.id, refused.status, refused.guard) == (
        request.id,
        Status.CANCELLED,
        Guard.DENIED,
    )
    assert refused.cancelled_at == later and not refused.executable
    assert "denied at" in refused.reasons[-1] and "by alice" in refused.reasons[-1]
    assert state.pending == {request.id: request}  # deny changes nothing; record does
    record(refused, state)
    assert state.pending == {} and state.waiting == {}
    assert state.executed_in_window(later, timedelta(minutes=10)) == 0
    with pytest.raises(RequestCancelled):
        approve(request.id, state, later)
    with pytest.raises(RequestCancelled):
        deny(request.id, state, later, by="bob")
    # as stored and read back (the audit's cancellation note): the same decision
    assert Decision.from_json(refused.to_json()) == refused


def test_denying_what_waits_for_nothing_says_so():
    state = fresh()
    with pytest.raises(UnknownDecision, match="d-nothing"):
        deny("d-nothing", state, T0, by="alice")
    executed = decide(f(), route(Owner.CLUSTER), state, T0, Mode.ENFORCE)
    record(executed, state)
    with pytest.raises(UnknownDecision):
        deny(executed.id, state, T0, by="alice")
