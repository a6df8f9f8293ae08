"""Leader election on a Lease record: what to do next, decided from what was observed.

The semantics are client-go's ``tools/leaderelection`` (facts, not code, carried over):

* A record names a holder, the lease duration it promises to renew within, when it acquired
  and last renewed, and how many times the lease changed hands (``leaseTransitions``).
* A candidate judges expiry on **its own clock**: it remembers when it first saw the record
  in its current form (``Observation.observed_at``, a local monotonic time) and may take the
  lease only when it has seen the same record, unchanged, for the record's
  ``leaseDurationSeconds``. Wall-clock times in the record (``acquireTime``/``renewTime``) are
  for people; nobody compares them across machines, so clock *offsets* do not matter.
* An empty holder (a released lease) may be taken at once.
* Taking a lease that someone else held, or that was released, adds one to
  ``leaseTransitions``; renewing keeps it. The value at acquisition is the **fencing token**
  of that term. Unlike client-go, a replica that holds no term in memory but finds the lease
  in its own name (it restarted, or it stepped down and nobody took over) starts a *new* term
  (``leaseTransitions + 1``): a token is then never shared by two terms of one identity.
* A leader stops acting once ``renewDeadline`` has passed since the start of its last
  successful renewal attempt (``Term.is_still_leader``), which is before any other replica
  may take the lease (``renewDeadline < leaseDuration``, checked by ``ElectionTiming``).

Safety bound (pinned by the property tests in ``tests/core/test_leadership.py``): at most one
replica believes it leads at any instant if every write is a compare-and-swap on the record's
version (the API server's ``resourceVersion``), each replica's clock only *measures intervals*
(offsets are irrelevant), and clock rates differ by at most ``rho`` with
``renew_deadline * (1 + rho) < lease_duration * (1 - rho)`` — e.g. 10 s / 15 s tolerates 20 %.
Network delay does not weaken it: a term is measured from the *start* of the attempt that
renewed it, and a follower's wait from *after* it read the record.

Pure: no I/O, no clock reads (``now`` is a local monotonic reading in seconds, ``wall`` the
wall-clock time written into the record), no logging.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

__all__ = [
    "JITTER_FACTOR",
    "Action",
    "Decision",
    "ElectionTiming",
    "LeaseRecord",
    "Observation",
    "Term",
    "decide",
    "fence_problem",
    "observe",
    "released",
    "term_after",
]

# client-go requires renewDeadline > JitterFactor * retryPeriod: a renewal gets at least one
# retry (jittered by up to 20 %) before its deadline
JITTER_FACTOR = 1.2


@dataclass(frozen=True, slots=True)
class ElectionTiming:
    """How long a lease lasts, how long a leader keeps trying to renew before it stops acting,
    and how often everyone retries. Seconds; invalid combinations raise ``ValueError``."""

    lease_duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not (isinstance(self.lease_duration, int) and self.lease_duration >= 1):
            raise ValueError("leaseDuration must be a whole number of seconds, at least 1")
        for name, value in (
            ("renewDeadline", self.renew_deadline),
            ("retryPeriod", self.retry_period),
        ):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds")
        if not self.renew_deadline < self.lease_duration:
            raise ValueError(
                f"renewDeadline ({self.renew_deadline:g}s) must be shorter than leaseDuration "
                f"({self.lease_duration}s): a leader must stop acting before others may take over"
            )
        if not self.renew_deadline > JITTER_FACTOR * self.retry_period:
            raise ValueError(
                f"renewDeadline ({self.renew_deadline:g}s) must be longer than "
                f"{JITTER_FACTOR:g} x retryPeriod ({self.retry_period:g}s): a leader needs at "
                "least one retry before it steps down"
            )


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The spec of a coordination.k8s.io/v1 Lease, as far as election uses it. An empty
    ``holder_identity`` is a released (or never held) lease."""

    holder_identity: str
    lease_duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    lease_transitions: int


@dataclass(frozen=True, slots=True)
class Observation:
    """A record as read, its version (the API server's ``resourceVersion``: every write
    changes it) and the local time this exact version was first seen."""

    record: LeaseRecord
    version: str
    observed_at: float


@dataclass(frozen=True, slots=True)
class Term:
    """One replica's leadership: its fencing token and the local time at which its last
    successful acquire/renew *attempt started* (never when the answer came back)."""

    token: int
    renewed_at: float
    renew_deadline: float

    def deadline(self) -> float:
        return self.renewed_at + self.renew_deadline

    def is_still_leader(self, now: float) -> bool:
        """True until renewDeadline has passed without a successful renewal."""
        return now < self.deadline()


class Action(StrEnum):
    ACQUIRE = "acquire"  # write ``Decision.record`` (create when ``expect_version`` is None)
    RENEW = "renew"  # write ``Decision.record`` over ``expect_version``
    FOLLOW = "follow"  # someone else holds a live lease: do nothing, look again later
    STEP_DOWN = "step-down"  # stop acting at once (then, next round, follow or acquire)


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reasons: tuple[str, ...]
    record: LeaseRecord | None = None  # what to write (acquire/renew)
    expect_version: str | None = None  # compare-and-swap on this version; None: create

    @property
    def writes(self) -> bool:
        return self.record is not None


def observe(
    previous: Observation | None, record: LeaseRecord, version: str, now: float
) -> Observation:
    """The observation after reading ``record`` at ``version``: the first-seen time is kept
    while the version is unchanged and restarts at ``now`` when anything was written."""
    if previous is not None and previous.version == version and previous.record == record:
        return previous
    return Observation(record, version, now)


def decide(
    observed: Observation | None,
    *,
    identity: str,
    now: float,
    wall: datetime,
    timing: ElectionTiming,
    term: Term | None,
) -> Decision:
    """What ``identity`` does next, given the lease as last read (None: no Lease exists), its
    own term (None: it does not lead), the local monotonic ``now`` and the ``wall`` time to
    write into the record."""
    if term is not None and not term.is_still_leader(now):
        return Decision(
            Action.STEP_DOWN,
            (
                f"no successful renewal for {now - term.renewed_at:.3f}s: the renew deadline "
                f"({timing.renew_deadline:g}s) has passed",
            ),
        )
    mine = _mine(identity, timing, wall)
    if observed is None:
        if term is not None:
            return Decision(Action.STEP_DOWN, ("the lease was deleted while I led",))
        return Decision(
            Action.ACQUIRE,
            ("no lease exists: create it",),
            replace(mine, acquire_time=wall, lease_transitions=0),
            None,
        )
    held = observed.record
    if held.holder_identity == identity and term is not None:
        if held.lease_transitions != term.token:
            return Decision(
                Action.STEP_DOWN,
                (f"leaseTransitions moved from {term.token} to {held.lease_transitions}",),
            )
        return Decision(
            Action.RENEW,
            (f"I hold the lease (term {term.token}): renew it",),
            replace(mine, acquire_time=held.acquire_time, lease_transitions=held.lease_transitions),
            observed.version,
        )
    taken = replace(mine, acquire_time=wall, lease_transitions=held.lease_transitions + 1)
    if not held.holder_identity:
        return Decision(
            Action.ACQUIRE, ("the lease was released: take it",), taken, observed.version
        )
    if held.holder_identity == identity:
        return Decision(
            Action.ACQUIRE,
            ("the lease names me but I hold no term (restarted or stepped down): start a new one",),
            taken,
            observed.version,
        )
    expires = observed.observed_at + held.lease_duration_seconds
    if term is not None:
        return Decision(
            Action.STEP_DOWN, (f"the lease is held by {held.holder_identity!r}, not by me",)
        )
    if now < expires:
        return Decision(
            Action.FOLLOW,
            (
                f"held by {held.holder_identity!r}; unchanged for "
                f"{now - observed.observed_at:.3f}s of its {held.lease_duration_seconds}s",
            ),
        )
    return Decision(
        Action.ACQUIRE,
        (
            f"held by {held.holder_identity!r} but not renewed for "
            f"{now - observed.observed_at:.3f}s (lease {held.lease_duration_seconds}s): take it",
        ),
        taken,
        observed.version,
    )


def _mine(identity: str, timing: ElectionTiming, wall: datetime) -> LeaseRecord:
    return LeaseRecord(identity, timing.lease_duration, wall, wall, 0)


def term_after(decision: Decision, *, started_at: float, timing: ElectionTiming) -> Term:
    """The term a *successful* acquire/renew write gives, measured from ``started_at``: the
    local time before the attempt (its read) began."""
    if decision.record is None:
        raise ValueError(f"a {decision.action} decision writes nothing")
    return Term(decision.record.lease_transitions, started_at, timing.renew_deadline)


def released(record: LeaseRecord, *, wall: datetime) -> LeaseRecord:
    """The record a leader writes on graceful shutdown (client-go's ReleaseOnCancel): no
    holder, a one-second duration, ``leaseTransitions`` kept so the next holder's is new."""
    return replace(
        record, holder_identity="", lease_duration_seconds=1, acquire_time=wall, renew_time=wall
    )


def fence_problem(record: LeaseRecord | None, *, identity: str, token: int) -> str | None:
    """Why an action fenced by ``token`` must not run given the current record (None: it may):
    the lease is gone, held by another, released, or changed hands since the token was issued."""
    if record is None:
        return "the lease no longer exists"
    if record.lease_transitions != token:
        return (
            f"the lease changed hands: leaseTransitions is {record.lease_transitions}, "
            f"the action carries {token}"
        )
    if record.holder_identity != identity:
        holder = record.holder_identity or "nobody (released)"
        return f"the lease is held by {holder}, not by {identity}"
    return None
