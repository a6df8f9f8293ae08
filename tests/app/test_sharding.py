"""The Membership shell over in-memory Leases (compare-and-swap like the API server): members
split the clusters with no overlap and no gap, a graceful leave hands its clusters over at the
next round, a silent member's clusters move after its lease duration (and only those), a
joiner takes only its own share, a failing round changes nothing; and the ``sharding`` config
section with errors that name the field."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from fleetwarden.app.sharding import Membership, ShardingConfig, sharding_from
from fleetwarden.core.leadership import ElectionTiming
from fleetwarden.core.sharding import ListedLease, assign
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.kube import Conflict, NotFound
from tests.app.test_electing import MemoryLease

TIMING = ElectionTiming(lease_duration=1, renew_deadline=0.5, retry_period=0.1)
CLUSTERS = [f"c{i:02d}" for i in range(40)]


class MemoryGroup:
    where = "memory/ns/fleetwarden.io/membership=test"

    def __init__(self) -> None:
        self.leases: dict[str, MemoryLease] = {}
        self.lists = 0
        self.deleted: list[str] = []

    def member(self, name: str) -> MemoryLease:
        return self.leases.setdefault(name, MemoryLease())

    async def delete(self, lease: ListedLease) -> None:
        held = self.leases.get(lease.name)
        if held is None or held.record is None:
            raise NotFound("memory", "not found", status=404)
        if str(held.version) != lease.version:
            raise Conflict("memory", "precondition failed", status=409)
        held.record = None
        self.deleted.append(lease.name)

    async def list(self) -> list[ListedLease]:
        self.lists += 1
        return [
            ListedLease(name, lease.record, str(lease.version))
            for name, lease in self.leases.items()
            if lease.record is not None
        ]


class Replica:
    def __init__(self, group: MemoryGroup, name: str, clusters: list[str] = CLUSTERS) -> None:
        self.name = name
        self.calls: list[tuple[frozenset[str], frozenset[str]]] = []
        self.watching: set[str] = set()
        self.membership = Membership(
            group, identity=name, clusters=clusters, timing=TIMING, on_assign=self._on_assign
        )

    def _on_assign(self, added: frozenset[str], removed: frozenset[str]) -> None:
        assert not (added & self.watching), "started a watch twice"
        assert removed <= self.watching, "stopped a watch it did not have"
        self.calls.append((added, removed))
        self.watching = (self.watching | added) - removed


async def until(cond: Callable[[], Any], timeout: float, what: str = "") -> float:
    start = time.monotonic()
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.005)
    return time.monotonic() - start


def steady(replicas: list[Replica], members: list[str]) -> bool:
    """Every cluster watched by exactly the owner the full map gives over ``members``."""
    expected = assign(CLUSTERS, members)
    return all(
        r.watching == {c for c, o in expected.items() if o == r.name}
        for r in replicas
        if r.name in members
    )


async def test_three_members_split_the_clusters_without_overlap_or_gap():
    group = MemoryGroup()
    rs = [Replica(group, f"m{i}") for i in range(3)]
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(r.membership.run()) for r in rs]
        await until(lambda: steady(rs, ["m0", "m1", "m2"]), 5)
        owners = rs[0].membership.owners()
        assert set(owners) == set(CLUSTERS) and set(owners.values()) == {"m0", "m1", "m2"}
        assert all(r.membership.owners() == owners for r in rs), "replicas disagree"
        for t in tasks:
            t.cancel()
    assert all(r.watching == set() for r in rs), "a cancelled member kept watching"
    assert all(
        lease.record and lease.record.holder_identity == "" for lease in group.leases.values()
    )


async def test_a_graceful_leave_hands_over_at_the_next_round_and_moves_only_its_clusters():
    group = MemoryGroup()
    rs = [Replica(group, f"m{i}") for i in range(3)]
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(r.membership.run()) for r in rs]
        await until(lambda: steady(rs, ["m0", "m1", "m2"]), 5)
        before = {r.name: set(r.watching) for r in rs}
        tasks[2].cancel()
        took = await until(lambda: steady(rs[:2], ["m0", "m1"]), 5)
        assert took < TIMING.lease_duration, "the release did not shorten the handover"
        for r in rs[:2]:
            assert before[r.name] <= r.watching, "a survivor lost a cluster"
            assert r.watching - before[r.name] <= before["m2"]
        for t in tasks[:2]:
            t.cancel()


async def test_a_silent_member_keeps_its_clusters_and_peers_take_them_after_its_lease():
    """Its renewals hang (partitioned from the membership API server): it keeps watching (a
    cluster watched twice, never by nobody); peers move its clusters, and only them, once its
    Lease has been unchanged for leaseDuration on their clocks."""
    group = MemoryGroup()
    rs = [Replica(group, f"m{i}") for i in range(3)]
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(r.membership.run()) for r in rs]
        await until(lambda: steady(rs, ["m0", "m1", "m2"]), 5)
        before = {r.name: set(r.watching) for r in rs}
        silent = group.leases[_lease_of(group, "m2")]
        silent.mode = "hang"
        cut = time.monotonic()
        await until(lambda: steady(rs[:2], ["m0", "m1"]), 5)
        took = time.monotonic() - cut
        assert took >= TIMING.lease_duration - TIMING.retry_period, took
        assert took <= TIMING.lease_duration + 2 * TIMING.retry_period + 0.2, took
        assert rs[2].watching == before["m2"], "the silent member dropped its clusters"
        moved = set().union(*(r.watching - before[r.name] for r in rs[:2]))
        assert moved == before["m2"]
        for t in tasks:
            t.cancel()


def _lease_of(group: MemoryGroup, identity: str) -> str:
    return next(
        n
        for n, lease in group.leases.items()
        if lease.record and lease.record.holder_identity == identity
    )


async def test_peers_delete_a_dead_members_lease_so_a_joiner_does_not_wait_for_it():
    group = MemoryGroup()
    rs = [Replica(group, f"m{i}") for i in range(4)]
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(r.membership.run()) for r in rs[:3]]
        await until(lambda: steady(rs[:3], ["m0", "m1", "m2"]), 5)
        dead = _lease_of(group, "m2")
        tasks[2].cancel()  # a crash: its Lease stays as it was, never released
        await until(lambda: tasks[2].done(), 5)
        group.leases[dead].record = group.leases[dead].writes[-2]  # undo the release
        await until(lambda: dead in group.deleted, 5)
        assert group.deleted == [dead], "a live member's lease was deleted"
        tasks.append(tg.create_task(rs[3].membership.run()))
        took = await until(lambda: steady([rs[0], rs[1], rs[3]], ["m0", "m1", "m3"]), 5)
        assert took < TIMING.lease_duration / 2, f"the joiner waited {took:.2f}s for a dead member"
        for t in tasks:
            t.cancel()


async def test_a_joiner_takes_only_the_clusters_that_move_to_it():
    group = MemoryGroup()
    rs = [Replica(group, f"m{i}") for i in range(3)]
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(r.membership.run()) for r in rs[:2]]
        await until(lambda: steady(rs[:2], ["m0", "m1"]), 5)
        before = {r.name: set(r.watching) for r in rs[:2]}
        tasks.append(tg.create_task(rs[2].membership.run()))
        await until(lambda: steady(rs, ["m0", "m1", "m2"]), 5)
        for r in rs[:2]:
            assert r.watching <= before[r.name], "an old member gained a cluster on a join"
            assert all(added == frozenset() for added, _ in r.calls[1:])
        assert rs[2].watching == set(CLUSTERS) - set().union(*(r.watching for r in rs[:2]))
        for t in tasks:
            t.cancel()


async def test_a_failing_round_changes_nothing_and_the_next_good_one_catches_up():
    group = MemoryGroup()
    r = Replica(group, "solo")
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(r.membership.run())
        await until(lambda: r.watching == set(CLUSTERS), 5)
        group.leases[_lease_of(group, "solo")].mode = "fail"
        lists = group.lists
        await until(lambda: "failed" in r.membership.last_reason, 5)
        await asyncio.sleep(3 * TIMING.retry_period)
        assert r.watching == set(CLUSTERS) and group.lists == lists
        group.leases[_lease_of(group, "solo")].mode = "ok"
        await until(lambda: group.lists > lists, 5)
        r.membership.set_clusters([*CLUSTERS[:10], "new"])
        assert r.watching == {*CLUSTERS[:10], "new"}
        task.cancel()


def test_owners_before_the_first_round_are_unknown():
    m = Membership(MemoryGroup(), identity="x", clusters=["a", "b"], timing=TIMING)
    assert m.owners() == {"a": None, "b": None}


# --- the sharding section ---------------------------------------------------------------


def test_the_section_with_defaults():
    got = sharding_from({"context": "mgmt", "namespace": "fw"}, source="serve.yaml")
    assert got == ShardingConfig(namespace="fw", group="fleetwarden", context="mgmt")
    assert got.timing == ElectionTiming(15, 10.0, 2.0)
    assert sharding_from(None, source="serve.yaml") is None


def test_the_section_in_full():
    got = sharding_from(
        {"inCluster": True, "namespace": "fw", "group": "watchers.eu-1", "leaseSeconds": 6},
        source="serve.yaml",
    )
    assert got is not None and got.in_cluster and got.group == "watchers.eu-1"
    assert got.timing == ElectionTiming(6, 4.0, 0.8)


@pytest.mark.parametrize(
    ("raw", "field", "says"),
    [
        ([], "sharding", "must be a mapping"),
        ({"context": "m", "namespace": "fw", "shards": 3}, "sharding.shards", "unknown field"),
        ({"namespace": "fw"}, "sharding", "exactly one"),
        ({"context": "m"}, "sharding.namespace", "required"),
        ({"context": "m", "namespace": "fw", "group": "-x"}, "sharding.group", "label value"),
        ({"context": "m", "namespace": "fw", "group": "a" * 64}, "sharding.group", "1-63"),
        ({"context": "m", "namespace": "fw", "leaseSeconds": 0}, "sharding.leaseSeconds", "whole"),
        (
            {"context": "m", "namespace": "fw", "leaseSeconds": 5, "renewDeadlineSeconds": 6},
            "sharding.renewDeadlineSeconds",
            "shorter than leaseSeconds",
        ),
    ],
)
def test_refusals_name_the_file_and_the_field(raw, field, says):
    with pytest.raises(FormatError) as err:
        sharding_from(raw, source="serve.yaml")
    assert err.value.field == field
    assert says in str(err.value) and "serve.yaml" in str(err.value)
