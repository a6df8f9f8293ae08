"""The heal authority with sharding (``app/authority.ShardAuthority`` over real ``Membership``
shells on in-memory compare-and-swap Leases and a stepped clock): a replica decides only the
clusters it owns, after the takeover grace, while its membership is healthy; the fence refuses
a remediation whose cluster moved or whose membership Lease is gone or unreadable; the healer
drops the events of clusters it does not decide and records a fenced-off heal as skipped.
Hypothesis steps three replicas through rounds, failures (partitions), slow writes and time:
at no instant do two replicas decide the same cluster."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.authority import HealAuthority, LeaderAuthority, ShardAuthority, authority_for
from fleetwarden.app.electing import Elector
from fleetwarden.app.healing import Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.app.sharding import Membership
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.leadership import ElectionTiming, LeaseRecord
from fleetwarden.core.policy import Action, Decision, Mode, Status
from fleetwarden.core.sharding import ListedLease, heal_problem, member_fence_problem, owner_of
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.audit import AuditStore
from fleetwarden.ports.kube import Transient
from fleetwarden.ports.sources import FixedClock
from tests.app.test_electing import MemoryLease
from tests.app.test_healing_retries import OWNERS, ROOMY, T0, Argo
from tests.app.test_sharding import MemoryGroup

TIMING = ElectionTiming(lease_duration=4, renew_deadline=2.5, retry_period=0.5)
CLUSTERS = [f"c{i}" for i in range(8)]
NAMES = ["r0", "r1", "r2"]


class Clock(FixedClock):
    def __init__(self) -> None:
        super().__init__(T0, ticks=1000.0)
        self.watchers: list[Any] = []

    def advance(self, seconds: float | timedelta = 0.0, **units: float) -> datetime:
        """Move time on in 50 ms steps, checking the invariant at each."""
        step = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
        end = self.at + step + timedelta(**units)
        while self.at < end:
            super().advance(min(timedelta(milliseconds=50), end - self.at))
            for check in self.watchers:
                check()
        return self.at


class Link:
    """One replica's view of the shared group: ``down`` fails every call (a partition),
    ``latency`` passes before a write lands and before a list answers."""

    def __init__(self, group: MemoryGroup, clock: Clock) -> None:
        self.group, self.clock = group, clock
        self.where = group.where
        self.down, self.latency = False, 0.0

    def _gate(self) -> None:
        if self.down:
            raise Transient("memory", "connection refused")
        self.clock.advance(self.latency)

    async def list(self) -> list[ListedLease]:
        self._gate()
        return await self.group.list()

    async def delete(self, lease: ListedLease) -> None:
        self._gate()
        await self.group.delete(lease)

    def member(self, name: str) -> Any:
        link, store = self, self.group.member(name)

        class Store:
            where = store.where

            async def read(self) -> Any:
                link._gate()
                return await store.read()

            async def create(self, record: LeaseRecord) -> str:
                link._gate()
                return await store.create(record)

            async def update(self, record: LeaseRecord, version: str) -> str:
                link._gate()
                return await store.update(record, version)

        return Store()


def replica(group: MemoryGroup, clock: Clock, name: str) -> tuple[Link, ShardAuthority]:
    link = Link(group, clock)
    m = Membership(link, identity=name, clusters=CLUSTERS, timing=TIMING, clock=clock)
    return link, ShardAuthority(m, timeout=1.0)


async def live(clock: Clock, seconds: float, *auths: ShardAuthority) -> None:
    """``seconds`` pass with each replica running a round every retryPeriod."""
    end = clock.monotonic() + seconds
    while clock.monotonic() < end:
        for a in auths:
            await a.membership._round()
        clock.advance(TIMING.retry_period)


def deciders(authorities: list[ShardAuthority]) -> dict[str, list[str]]:
    return {c: [a.membership.identity for a in authorities if a.decides(c)] for c in CLUSTERS}


# --- the pure rules ------------------------------------------------------------------------


def test_heal_problem_needs_health_ownership_and_the_grace():
    owned = {"c0": 100.0}
    ok = {"owned_since": owned, "renewed_at": 103.0, "timing": TIMING}
    assert heal_problem("c0", now=104.0, **ok) is None
    assert "not owned" in (heal_problem("c1", now=104.0, **ok) or "")
    assert "taken over" in (heal_problem("c0", now=103.9, **ok) or "")  # grace: 4 s
    assert "renewDeadline" in (heal_problem("c0", now=105.5, **ok) or "")  # 103 + 2.5
    assert "renewDeadline" in (
        heal_problem("c0", owned_since=owned, renewed_at=None, now=104.0, timing=TIMING) or ""
    )


def test_member_fence_problem_needs_the_lease_in_my_name():
    mine = LeaseRecord("r0", 4, None, None, 0)
    assert member_fence_problem(mine, identity="r0") is None
    assert "no longer exists" in (member_fence_problem(None, identity="r0") or "")
    released = dataclasses.replace(mine, holder_identity="")
    assert "nobody (released)" in (member_fence_problem(released, identity="r0") or "")


def test_authority_for_picks_by_what_is_configured():
    group = MemoryGroup()
    m = Membership(group, identity="r0", clusters=CLUSTERS, timing=TIMING)
    assert type(authority_for()) is HealAuthority
    e = Elector(MemoryLease(), identity="r0", timing=TIMING)
    assert isinstance(authority_for(elector=e), LeaderAuthority)
    both = authority_for(elector=e, membership=m)
    assert isinstance(both, ShardAuthority) and not both.leading  # global duties: leader's
    assert authority_for(membership=m).leading  # no election: shared store guards them


# --- the shell -----------------------------------------------------------------------------


async def test_a_joiner_decides_its_clusters_only_after_the_grace_and_the_old_owner_stops():
    clock, group = Clock(), MemoryGroup()
    _, a = replica(group, clock, "r0")
    await live(clock, TIMING.lease_duration + 0.1, a)
    assert a.decided() == frozenset(CLUSTERS)  # alone: everything, after the grace
    _, b = replica(group, clock, "r1")
    await b.membership._round()
    moving = {c for c in CLUSTERS if owner_of(c, ["r0", "r1"]) == "r1"}
    assert moving and b.membership.owned == moving
    assert b.decided() == frozenset()  # the grace: r0 has not seen r1 yet
    assert a.decided() == frozenset(CLUSTERS)
    await a.membership._round()  # r0 lists r1: gives the moving clusters up at once
    assert a.decided() == frozenset(CLUSTERS) - moving
    await live(clock, TIMING.lease_duration + 0.1, a, b)
    assert b.decided() == moving


async def test_a_partitioned_owner_stops_deciding_before_its_peers_take_over():
    clock, group = Clock(), MemoryGroup()
    la, a = replica(group, clock, "r0")
    _, b = replica(group, clock, "r1")
    await live(clock, TIMING.lease_duration + 1, a, b)
    mine = a.decided()
    assert mine and not (mine & b.decided())
    la.down = True
    stopped = taken = None
    for _ in range(40):
        await a.membership._round()
        await b.membership._round()
        if stopped is None and not a.decided():
            stopped = clock.monotonic()
        if taken is None and mine <= b.decided():
            taken = clock.monotonic()
        assert not (a.decided() & b.decided())
        clock.advance(TIMING.retry_period)
    assert stopped is not None and taken is not None and stopped < taken
    la.down = False  # back: r0 owns its clusters again in its view, but r1 decides them
    await a.membership._round()
    assert a.membership.owned == mine and a.decided() == frozenset()  # the grace again
    await live(clock, TIMING.lease_duration + 0.1, a, b)
    assert a.decided() == mine and not (mine & b.decided())


async def test_the_fence_refuses_a_moved_cluster_a_deleted_lease_and_an_unreadable_one():
    clock, group = Clock(), MemoryGroup()
    link, a = replica(group, clock, "r0")
    await live(clock, TIMING.lease_duration + 0.1, a)
    await a.membership._round()
    c = CLUSTERS[0]
    d = _decision(c)
    assert await a.refusals([d], None) == {}
    link.down = True
    (why,) = (await a.refusals([d], None)).values()
    assert "cannot read the membership lease" in why
    link.down = False
    group.leases[a.membership.lease_name].record = None  # a peer judged r0 gone and deleted it
    (why,) = (await a.refusals([d], None)).values()
    assert "no longer exists" in why
    await a.membership._round()  # the renewal finds it gone (Conflict): read it again
    await a.membership._round()  # recreated within renewDeadline: no lapse, still owned
    assert await a.refusals([d], None) == {}
    a.membership.owned_since.pop(c)  # the cluster moved away
    a.membership.owned = a.membership.owned - {c}
    (why,) = (await a.refusals([d], None)).values()
    assert f"cluster {c} is not owned" in why


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["round", "round", "fail", "fail", "tick", "join"]),
            st.integers(0, 2),
            st.floats(0.0, 2.4),  # a write's latency stays under renewDeadline (its timeout)
        ),
        min_size=5,
        max_size=60,
    )
)
async def test_no_two_replicas_decide_one_cluster_at_any_instant(steps):
    clock, group = Clock(), MemoryGroup()
    links: dict[str, Link] = {}
    auths: dict[str, ShardAuthority] = {}

    def check() -> None:
        for c, who in deciders(list(auths.values())).items():
            assert len(who) <= 1, f"{c} decided by {who} at {clock.monotonic()}"

    clock.watchers.append(check)
    for name in NAMES[:2]:
        links[name], auths[name] = replica(group, clock, name)
    for action, i, dt in steps:
        name = NAMES[i]
        if action == "join" and name not in auths:
            links[name], auths[name] = replica(group, clock, name)
            continue
        if name not in auths:
            continue
        if action == "tick":
            clock.advance(dt)
        else:
            links[name].down = action == "fail"
            links[name].latency = dt / 2
            await auths[name].membership._round()
            links[name].down, links[name].latency = False, 0.0
        check()


# --- the healer under a shard authority ----------------------------------------------------


def _decision(cluster: str) -> Decision:
    return Decision(
        id=f"d-{cluster}", finding_id=f"f-{cluster}", cluster=cluster, pool="general",
        action=next(iter(Action)), mode=Mode.ENFORCE, status=Status.EXECUTE, reasons=(),
        target=None, at=T0,
    )  # fmt: skip


def _event(cluster: str) -> FindingEvent:
    finding = Finding(
        cluster, "general", Layer.L1, "labels.team", "platform", "x", Severity.CRITICAL,
        nodes=("n-1",),
    )  # fmt: skip
    return FindingEvent(FindingEventType.APPEARED, finding, T0)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AuditStore]:
    opened = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    yield opened
    await opened.close()


async def test_the_healer_heals_its_shard_drops_the_others_and_records_a_fenced_heal(store):
    clock, group = Clock(), MemoryGroup()
    link, a = replica(group, clock, "r0")
    _, b = replica(group, clock, "r1")
    await live(clock, TIMING.lease_duration + 1, a, b)
    await a.membership._round()
    mine, theirs = sorted(a.decided()), sorted(set(CLUSTERS) - a.decided())
    assert mine and theirs
    argo = Argo(0, RuntimeError("unused"))
    h = Healer(
        ownership=OWNERS, remediator=Remediator(argocd=argo), audit=store, policy=ROOMY,
        mode=Mode.ENFORCE, authority=a,
    )  # fmt: skip
    h.set_pool_counts(dict.fromkeys(CLUSTERS, 10))
    made = await h.process([_event(mine[0]), _event(theirs[0])])
    assert [d.cluster for d in made] == [mine[0]] and h.ignored == 1
    assert argo.calls == [f"{mine[0]}-nodes"]
    # the cluster is still decided locally, but the membership Lease was deleted meanwhile
    group.leases[a.membership.lease_name].record = None
    (decision,) = await h.process([_event(mine[1] if len(mine) > 1 else mine[0])])
    assert decision.status is Status.EXECUTE and len(argo.calls) == 1
    outcomes = await store.query(kind=AuditKind.OUTCOME, limit=10)
    skipped = [o for o in outcomes if o.payload["outcome"]["status"] == "skipped"]
    assert len(skipped) == 1 and "fenced off" in skipped[0].payload["outcome"]["detail"]
    assert link.down is False


async def test_run_announces_the_clusters_decided_here_once_their_grace_ends():
    """What ``Serving`` hands the healer the current findings of (``_hand_over``)."""
    clock, group = Clock(), MemoryGroup()
    _, a = replica(group, clock, "r0")
    await a.membership._round()
    got: list[frozenset[str]] = []
    task = asyncio.create_task(a.run(got.append))
    try:
        await asyncio.sleep(TIMING.retry_period)  # two looks: nothing decided yet (grace)
        assert got == []
        await live(clock, TIMING.lease_duration + 0.1, a)
        async with asyncio.timeout(5):
            while not got:
                await asyncio.sleep(0.01)
        assert got == [frozenset(CLUSTERS)]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
