"""Cluster sharding on a real kube-apiserver (scripts/k8s-test-env): three member processes
with 100 cluster names own every cluster exactly once; after kill -9 of one, the survivors
own every cluster again within leaseSeconds + two (jittered) retry periods and only the dead
member's clusters moved; a joiner takes only the clusters that move to it; SIGTERM hands over
at the next round. Per-process RSS and CPU are measured and printed."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.kube.lease import KubeLeaseGroup
from fleetwarden.app.sharding import MEMBERSHIP_LABEL
from fleetwarden.core.sharding import ListedLease, assign
from fleetwarden.ports.kube import Conflict
from tests.support.shard_member import (
    MemberProc,
    cluster_names,
    put_probes,
    rss_and_cpu,
    spawn,
)

pytestmark = pytest.mark.live

NS = "default"
LEASE, DEADLINE, RETRY = 4, 2.5, 0.5
CLUSTERS = cluster_names(100)
# a survivor first sees the dead member's last renewal up to one retry after it, judges it
# gone leaseSeconds later and acts at its next round: two jittered retries after the lease
BUDGET = LEASE + 2 * 1.2 * RETRY


@pytest.fixture()
def endpoint(k8s):
    return load_kubeconfig(Path(k8s["kubeconfig"]))[0]


@pytest.fixture()
def group() -> str:
    return f"fw-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture()
def procs() -> Iterator[list[MemberProc]]:
    started: list[MemberProc] = []
    yield started
    for p in started:
        p.stop()


def start(
    procs: list[MemberProc], k8s: Any, endpoint: Any, group: str, who: str, **kw: Any
) -> MemberProc:
    p = MemberProc(
        who,
        spawn(
            k8s["kubeconfig"],
            endpoint.name,
            NS,
            group,
            who,
            clusters=kw.pop("clusters", len(CLUSTERS)),
            lease=LEASE,
            deadline=DEADLINE,
            retry=RETRY,
            **kw,
        ),
    )
    procs.append(p)
    return p


def wait_sync(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := cond():
            return got
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def steady(ps: list[MemberProc]) -> bool:
    """Every cluster owned by exactly one of ``ps``: the owner the full map gives."""
    expected = assign(CLUSTERS, [p.name for p in ps])
    return all(p.owned == {c for c, o in expected.items() if o == p.name} for p in ps)


def assert_exactly_once(ps: list[MemberProc]) -> None:
    owned = [p.owned for p in ps]
    assert sum(len(o) for o in owned) == len(CLUSTERS), [len(o) for o in owned]
    assert set().union(*owned) == set(CLUSTERS)


def lease_holders(endpoint: Any, group: str) -> list[str]:
    async def listed() -> list[str]:
        async with KubeClient(endpoint) as api:
            g = KubeLeaseGroup(api, namespace=NS, label=MEMBERSHIP_LABEL, value=group)
            return sorted(lease.record.holder_identity for lease in await g.list())

    return asyncio.run(listed())


def test_100_clusters_over_3_processes_kill_9_and_a_join(procs, k8s, endpoint, group):
    ps = [start(procs, k8s, endpoint, group, f"member-{i}") for i in range(3)]
    wait_sync(lambda: steady(ps), 30, "three members to split the clusters")
    assert_exactly_once(ps)
    # hold steady for three lease durations' worth of rounds: no churn
    usage0 = {p.name: rss_and_cpu(p.popen.pid) for p in ps}
    t0 = time.monotonic()
    settled = {p.name: len(p.assigns()) for p in ps}
    end = time.monotonic() + 3
    while time.monotonic() < end:
        assert steady(ps)
        time.sleep(0.05)
    assert {p.name: len(p.assigns()) for p in ps} == settled, "ownership churned at steady state"
    usage1 = {p.name: rss_and_cpu(p.popen.pid) for p in ps}
    span = time.monotonic() - t0
    for p in ps:
        rss, cpu = usage1[p.name]
        print(
            f"\n{p.name}: owns {len(p.owned)}, RSS {rss / 2**20:.1f} MiB, "
            f"CPU {100 * (cpu - usage0[p.name][1]) / span:.2f}% at steady state"
        )

    dead, survivors = ps[2], ps[:2]
    before = {p.name: set(p.owned) for p in ps}
    os.kill(dead.popen.pid, signal.SIGKILL)
    killed = time.time()
    dead.popen.wait(10)
    wait_sync(lambda: steady(survivors), BUDGET + 5, "the survivors to own every cluster")
    took = max(e["t"] for p in survivors for e in p.assigns(since=killed)) - killed
    print(f"\nkill -9: every cluster owned again after {took:.3f}s (budget {BUDGET:g}s)")
    assert LEASE - 1.2 * RETRY <= took <= BUDGET + 1.0, took
    assert_exactly_once(survivors)
    for p in survivors:
        gained = p.owned - before[p.name]
        assert before[p.name] <= p.owned, f"{p.name} lost a cluster it had"
        assert gained <= before[dead.name], f"{p.name} gained a cluster the dead one never had"
        assert not any(e["removed"] for e in p.assigns(since=killed))
    assert set().union(*(p.owned - before[p.name] for p in survivors)) == before[dead.name]

    wait_sync(
        lambda: lease_holders(endpoint, group) == ["member-0", "member-1"],
        2 * RETRY + 2,
        "a survivor to delete the dead member's lease",
    )
    before = {p.name: set(p.owned) for p in survivors}
    joined = time.time()
    newcomer = start(procs, k8s, endpoint, group, "member-3")
    members = [*survivors, newcomer]
    wait_sync(lambda: steady(members), BUDGET + 10, "the newcomer to take its share")
    took = max(e["t"] for p in members for e in p.assigns(since=joined)) - joined
    started = min(e["t"] for e in newcomer.events)
    print(
        f"\njoin: settled after {took:.3f}s ({took - (started - joined):.3f}s after the "
        "process was ready)"
    )
    assert took - (started - joined) < 2 * 1.2 * RETRY + 1.0, "the join waited for a lease"
    assert_exactly_once(members)
    for p in survivors:
        assert p.owned <= before[p.name], f"{p.name} gained a cluster on a join"
        assert not any(e["added"] for e in p.assigns(since=joined))
    moved = set().union(*(before[p.name] - p.owned for p in survivors))
    assert moved == newcomer.owned, "a cluster changed owner without moving to the newcomer"
    assert moved, "the newcomer got nothing"
    for p in members:
        rss, cpu = rss_and_cpu(p.popen.pid)
        print(f"{p.name}: owns {len(p.owned)}, RSS {rss / 2**20:.1f} MiB, CPU {cpu:.2f}s total")


def test_sigterm_releases_and_the_peers_take_over_at_their_next_round(procs, k8s, endpoint, group):
    ps = [start(procs, k8s, endpoint, group, f"member-{i}") for i in range(2)]
    wait_sync(lambda: steady(ps), 30, "two members to split the clusters")
    leaving, staying = ps
    leaving.popen.terminate()
    sent = time.time()
    assert leaving.popen.wait(10) == 0
    assert leaving.owned == set(), "the leaving member did not give up its clusters"
    wait_sync(lambda: staying.owned == set(CLUSTERS), LEASE + 5, "the other to own all")
    took = staying.assigns()[-1]["t"] - sent
    print(f"\nSIGTERM handover: {took:.3f}s")
    assert took < LEASE, "the release did not shorten the handover"


async def test_the_membership_leases_are_labelled_and_released(procs, k8s, endpoint, group):
    p = start(procs, k8s, endpoint, group, "Host_1234")
    wait_sync(lambda: p.owned == set(CLUSTERS), 30, "the member to own every cluster")
    async with KubeClient(endpoint) as api:
        g = KubeLeaseGroup(api, namespace=NS, label=MEMBERSHIP_LABEL, value=group)
        (lease,) = await g.list()
        assert lease.name.startswith("fleetwarden-member-host-1234-")
        assert lease.record.holder_identity == "Host_1234"
        assert lease.record.lease_duration_seconds == LEASE
        p.popen.terminate()
        p.popen.wait(10)
        (lease,) = await g.list()
        assert lease.record.holder_identity == ""
        with pytest.raises(Conflict):  # only the version judged gone is deleted
            await g.delete(ListedLease(lease.name, lease.record, str(int(lease.version) - 1)))
        await g.delete(lease)
        assert await g.list() == []


def test_changes_made_while_a_dead_members_clusters_were_unwatched_are_found_after_relist(
    procs, k8s, endpoint, group
):
    """The watchers' use of ``on_assign``: each member watches the ConfigMaps of the clusters
    it owns (namespaces on the second API server). After kill -9, every change written to the
    dead member's clusters while nobody watched them is reported by the new owner."""
    fleet = load_kubeconfig(Path(k8s["kubeconfig"]))[1]
    clusters = cluster_names(20)
    asyncio.run(_probes(fleet, clusters, "v0", create=True))
    ps = [
        start(procs, k8s, endpoint, group, f"w-{i}", clusters=20, watch_context=fleet.name)
        for i in range(3)
    ]
    expected = assign(clusters, [p.name for p in ps])
    wait_sync(
        lambda: all(seen(p, c, "v0") for c, o in expected.items() for p in ps if p.name == o),
        30,
        "every owner to list its clusters",
    )
    dead, survivors = ps[0], ps[1:]
    lost = sorted(c for c, o in expected.items() if o == dead.name)
    assert lost, "the member to kill owns nothing"
    os.kill(dead.popen.pid, signal.SIGKILL)
    killed = time.time()
    dead.popen.wait(10)
    asyncio.run(_probes(fleet, lost, "gap"))
    after = assign(clusters, [p.name for p in survivors])
    owner = {p.name: p for p in survivors}
    wait_sync(
        lambda: all(seen(owner[after[c]], c, "gap") for c in lost),
        BUDGET + 5,
        "every change made in the gap to be found",
    )
    took = max(seen(owner[after[c]], c, "gap") or 0.0 for c in lost) - killed
    print(f"\n{len(lost)} changes made in the gap all found {took:.3f}s after kill -9")
    for p in survivors:  # the clusters they kept were never relisted
        kept = [c for c in clusters if expected[c] == p.name]
        assert all(len([e for e in p.events if e.get("cluster") == c]) == 1 for c in kept)


def seen(p: MemberProc, cluster: str, value: str) -> float | None:
    for e in list(p.events):
        if e["event"] == "seen" and e["cluster"] == cluster and e["value"] == value:
            return float(e["t"])
    return None


async def _probes(fleet: Any, clusters: list[str], value: str, *, create: bool = False) -> None:
    async with KubeClient(fleet) as api:
        await put_probes(api, clusters, value, create_namespaces=create)
