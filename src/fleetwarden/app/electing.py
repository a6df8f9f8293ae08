"""Leader election for the replicas of ``serve``: one ``Elector`` per process, in a TaskGroup.

Every ``retry_period`` (followers: plus up to 20 % jitter, so they do not all ask at once) the
elector reads the Lease, asks ``core.leadership.decide`` what to do, and carries it out with one
compare-and-swap write. A write that another replica beat (``Conflict``) or that fails or times
out simply leaves the term where it was: it lapses by itself when ``renew_deadline`` has passed
since the start of the last successful attempt. The elector wakes at that deadline, so
``leading`` turns false and ``on_stopped_leading`` runs *then*, whatever the network does — a
leader partitioned from the API server stops acting before any other replica may take over.

On cancellation (graceful shutdown) a leader stops leading first and then releases the Lease
(holder cleared, one-second duration: client-go's ``ReleaseOnCancel``), so a follower takes
over at its next retry instead of after the whole lease duration.

``Fence.check(token)`` is what every remediation calls right before it acts: it refuses
(``FenceRefused``) unless this process still leads *and* a fresh read of the Lease shows the
same holder and ``leaseTransitions`` as the token's term.

Not done here: metrics, ``/healthz`` and gating the healer — the service reads ``leading``,
``fencing_token`` and the callbacks.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
from collections.abc import Callable, Mapping

from fleetwarden.core.leadership import (
    Action,
    ElectionTiming,
    Observation,
    Term,
    decide,
    fence_problem,
    observe,
    released,
    term_after,
)
from fleetwarden.logs import get_logger
from fleetwarden.ports.kube import Conflict, KubeError
from fleetwarden.ports.leases import LeaseStore
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["Elector", "Fence", "FenceRefused", "default_identity"]

log = get_logger("fleetwarden.electing")


def default_identity(env: Mapping[str, str] | None = None) -> str:
    """``$POD_NAME`` (a Deployment's pods are unique), else ``host_pid`` for this process."""
    env = os.environ if env is None else env
    return env.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


class FenceRefused(Exception):
    """An action fenced by a leadership token must not run: this process no longer leads,
    the Lease changed hands since the token was issued, or it could not be read to tell.
    ``reason`` says which; the action should be dropped (the new leader decides again)."""

    def __init__(self, token: int | None, reason: str) -> None:
        self.token, self.reason = token, reason
        super().__init__(f"fencing token {token}: {reason}")


class Elector:
    """Campaigns for one Lease for as long as ``run`` runs.

    ``on_started_leading(token)`` and ``on_stopped_leading(reason)`` are called from the
    elector's task, in order, once per change; ``leading_event`` is set while leading and
    ``following_event`` while not. ``clock.monotonic()`` times the lease, ``clock.now()`` is
    the time written into it."""

    def __init__(
        self,
        store: LeaseStore,
        *,
        identity: str,
        timing: ElectionTiming,
        on_started_leading: Callable[[int], None] | None = None,
        on_stopped_leading: Callable[[str], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self.store, self.identity, self.timing = store, identity, timing
        self.on_started_leading, self.on_stopped_leading = on_started_leading, on_stopped_leading
        self.clock = clock
        self._rng = rng or random.Random()
        self._term: Term | None = None
        self._observed: Observation | None = None
        self._announced: int | None = None  # the token last announced as leading
        self.leading_event, self.following_event = asyncio.Event(), asyncio.Event()
        self.following_event.set()
        self.last_reason = "not started"

    @property
    def leading(self) -> bool:
        return self._term is not None and self._term.is_still_leader(self.clock.monotonic())

    @property
    def fencing_token(self) -> int | None:
        """The current term's token (the Lease's leaseTransitions when it was acquired)."""
        return self._term.token if self.leading and self._term is not None else None

    async def run(self) -> None:
        """Campaign until cancelled; then release the Lease if this process holds it."""
        try:
            while True:
                await self._round()
                await self._pause()
        finally:
            await self._release()

    # --- one round ---------------------------------------------------------------------

    async def _round(self) -> None:
        started = self.clock.monotonic()
        if self._term is not None and not self._term.is_still_leader(started):
            self._term = None  # lapsed: the next success starts a new term (a new token)
        self._announce("the renew deadline passed without a successful renewal")
        decision = None
        try:
            async with asyncio.timeout(self._attempt_budget(started)):
                got = await self.store.read()
                now = self.clock.monotonic()
                self._observed = None if got is None else observe(self._observed, *got, now)
                decision = decide(
                    self._observed,
                    identity=self.identity,
                    now=now,
                    wall=self.clock.now(),
                    timing=self.timing,
                    term=self._term,
                )
                if decision.action is Action.STEP_DOWN:
                    self._term = None
                    self._announce("; ".join(decision.reasons))
                    return
                if decision.record is None:
                    self.last_reason = "; ".join(decision.reasons)
                    return
                if decision.expect_version is None:
                    version = await self.store.create(decision.record)
                else:
                    version = await self.store.update(decision.record, decision.expect_version)
        except Conflict:
            self.last_reason = "another replica wrote the lease first"
            log.debug("lease write lost the race", lease=self.store.where)
        except TimeoutError:
            self.last_reason = "the lease request timed out"
            log.info("lease request timed out", lease=self.store.where)
        except KubeError as exc:
            self.last_reason = f"the lease request failed: {exc}"
            log.info("lease request failed", lease=self.store.where, error=str(exc))
        else:
            assert decision is not None and decision.record is not None
            self._observed = observe(
                self._observed, decision.record, version, self.clock.monotonic()
            )
            self._term = term_after(decision, started_at=started, timing=self.timing)
            self.last_reason = "; ".join(decision.reasons)
        self._announce("the renew deadline passed without a successful renewal")

    def _attempt_budget(self, started: float) -> float:
        """A leader's attempt may last until its deadline; a follower's one renewDeadline."""
        if self._term is not None:
            return max(self._term.deadline() - started, 0.001)
        return self.timing.renew_deadline

    async def _pause(self) -> None:
        pause = self.timing.retry_period
        if self._term is None:
            pause *= 1 + 0.2 * self._rng.random()
        if self._term is not None:  # wake at the deadline to stop acting on time
            pause = min(pause, max(self._term.deadline() - self.clock.monotonic(), 0.0))
        await asyncio.sleep(pause)

    def _announce(self, why_stopped: str) -> None:
        """Tell the callbacks and events what changed since they last heard."""
        token = self.fencing_token
        if token == self._announced:
            return
        if self._announced is not None:
            self._announced = None
            self.leading_event.clear()
            self.following_event.set()
            log.warning("stopped leading", lease=self.store.where, reason=why_stopped)
            if self.on_stopped_leading is not None:
                self.on_stopped_leading(why_stopped)
        if token is not None:
            self._announced = token
            self.following_event.clear()
            self.leading_event.set()
            log.warning("started leading", lease=self.store.where, term=token)
            if self.on_started_leading is not None:
                self.on_started_leading(token)

    async def _release(self) -> None:
        term, observed = self._term, self._observed
        self._term = None  # stop acting before the lease can be taken by anyone
        self._announce("shutting down")
        if term is None or observed is None or observed.record.holder_identity != self.identity:
            return
        if not term.is_still_leader(self.clock.monotonic()):
            return  # someone may already have taken it: do not touch it
        record = released(observed.record, wall=self.clock.now())
        try:
            async with asyncio.timeout(self.timing.retry_period):
                await self.store.update(record, observed.version)
        except (KubeError, TimeoutError) as exc:
            log.info("lease not released", lease=self.store.where, error=str(exc))


class Fence:
    """The check every remediation makes before it acts (see ``FenceRefused``)."""

    def __init__(self, elector: Elector, *, timeout: float | None = None) -> None:
        self.elector = elector
        self.timeout = elector.timing.retry_period if timeout is None else timeout

    async def check(self, token: int | None) -> None:
        """Return if ``token`` is the current term's and the Lease, read now, agrees."""
        self._local(token)
        assert token is not None
        try:
            async with asyncio.timeout(self.timeout):
                got = await self.elector.store.read()
        except (KubeError, TimeoutError) as exc:
            raise FenceRefused(token, f"cannot read the lease to check: {exc}") from None
        problem = fence_problem(
            None if got is None else got[0], identity=self.elector.identity, token=token
        )
        if problem is not None:
            raise FenceRefused(token, problem)
        self._local(token)  # the read took time: the term may have lapsed meanwhile

    def _local(self, token: int | None) -> None:
        current = self.elector.fencing_token
        if token is None or current is None:
            raise FenceRefused(token, "this replica is not the leader")
        if current != token:
            raise FenceRefused(token, f"this replica's term is now {current}")
