"""Joining stamped findings with an audit log (app.audit_joining): a finding whose actor came
from managedFields is re-stamped ``via: audit`` from the event that wrote it, also when that
event reaches the log after the watch saw the change; with no such event the wait is bounded
and the managedFields actor stays."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from fleetwarden.app.audit_joining import join_audit, joinable
from fleetwarden.app.stamping import stamp_events
from fleetwarden.core.actors import AuditEvent
from fleetwarden.core.tracking import FindingTracker
from tests.app.test_stamping import AFTER, BEFORE, label

WRITE = datetime(2026, 5, 1, 12, 0, 1, 250_000, tzinfo=UTC)  # AFTER's kubectl-edit write
NOW = datetime(2026, 5, 1, 12, 0, 5, tzinfo=UTC)


class ListLog:
    """An in-memory audit log whose lines arrive on the n-th poll (the file's order)."""

    where = "memory"

    def __init__(self, arrivals: Sequence[tuple[int, AuditEvent]]) -> None:
        self.arrivals, self.polls, self.events = list(arrivals), 0, []

    def poll(self) -> int:
        self.polls += 1
        new = [e for n, e in self.arrivals if n == self.polls]
        self.events.extend(new)
        return len(new)

    def about(self, resource: str, name: str, namespace: str | None) -> Sequence[AuditEvent]:
        return [
            e
            for e in self.events
            if (e.resource, e.name, e.namespace) == (resource, name, namespace)
        ]

    def latest(self) -> datetime | None:
        return self.events[-1].at if self.events else None

    @property
    def bad(self) -> int:
        return 0


def audit(id: str, at: datetime, user: str = "alice", name: str = "n-1") -> AuditEvent:
    return AuditEvent(
        id, "c", user, "patch", "nodes", name, at, user_agent="kubectl/v1.36.3",
        source_ips=("10.0.0.9",), received_at=at - timedelta(milliseconds=5), code=200,
        field_manager="kubectl-edit",
    )  # fmt: skip


def stamped(tracker: FindingTracker):
    events = tracker.update(("c", "general"), [label("x")], now=NOW)
    return stamp_events(
        tracker, ("c", "general"), events, managed={"n-1": AFTER}.get, changed=("n-1", BEFORE)
    )


async def test_an_audit_event_that_arrives_after_the_watch_event_still_names_the_user():
    tracker = FindingTracker()
    events = stamped(tracker)
    assert joinable(events[0].finding) is not None
    log = ListLog([(3, audit("late", WRITE)), (4, audit("after", WRITE + timedelta(seconds=3)))])
    (out,) = await join_audit(tracker, ("c", "general"), events, log, poll_interval=0.001)
    actor = out.finding.extra["actor"]
    assert (actor["name"], actor["via"], actor["manager"]) == ("alice", "audit", "kubectl-edit")
    assert out.finding.extra["startedAt"] == "2026-05-01T12:00:01Z"
    (kept,) = tracker.current()
    assert kept.extra["actor"]["via"] == "audit"
    assert log.polls == 3  # stopped polling once it matched


async def test_with_no_event_of_that_write_the_managed_fields_actor_stays_and_the_wait_ends():
    tracker = FindingTracker()
    events = stamped(tracker)
    log = ListLog([(1, audit("other-node", WRITE, name="n-9"))])
    started = time.monotonic()
    (out,) = await join_audit(
        tracker, ("c", "general"), events, log, settle=0.2, poll_interval=0.01
    )
    assert time.monotonic() - started < 2
    assert out.finding.extra["actor"]["via"] == "managedFields"


async def test_a_log_already_past_the_write_is_not_waited_on():
    tracker = FindingTracker()
    events = stamped(tracker)
    log = ListLog([(1, audit("later", WRITE + timedelta(seconds=30), name="n-9"))])
    await join_audit(tracker, ("c", "general"), events, log, settle=30, poll_interval=0.01)
    assert log.polls == 1


async def test_a_later_request_logged_first_does_not_end_the_wait_for_the_write():
    """Requests finish out of order: another node's event, finished after the write, can be
    in the log before the write's own; the join still waits for it."""
    tracker = FindingTracker()
    events = stamped(tracker)
    other = audit("other", WRITE + timedelta(seconds=1.5), user="bob", name="n-9")
    log = ListLog([(1, other), (3, audit("write", WRITE))])
    (out,) = await join_audit(tracker, ("c", "general"), events, log, poll_interval=0.001)
    assert out.finding.extra["actor"]["name"] == "alice"
