"""The service demo's cloud (``app.demoing.play_cloud``) on the real simulated fleet and its
scripted changes: what a change touched is found by comparing Node objects, the service's view
of each touched cluster is refreshed before the provider's event for each touched pool goes
out, and the event names who made the change."""

from __future__ import annotations

import copy
import random

from fleetwarden.adapters import simulated
from fleetwarden.app import demoing


def test_changed_pools_names_each_pool_a_change_touched_once():
    fleet = simulated.build_fleet()
    before = copy.deepcopy(fleet.nodes)
    assert demoing.changed_pools(before, fleet.nodes) == []
    simulated.upgrade(fleet, random.Random(1))  # three prod-us-1/general kubelets
    assert demoing.changed_pools(before, fleet.nodes) == [("prod-us-1", "general")]
    gone = fleet.nodes["prod-asia-1"].pop()  # a node removed counts, by its own pool
    labels = gone["metadata"]["labels"]
    assert ("prod-asia-1", labels["kubernetes.azure.com/agentpool"]) in demoing.changed_pools(
        before, fleet.nodes
    )


def test_actor_of_a_scripted_change():
    assert demoing.actor_of("arn:aws:iam::123456789012:user/alice: console changed x") == (
        "arn:aws:iam::123456789012:user/alice"
    )
    assert demoing.actor_of("oncall@example.com: kubectl label node n") == "oncall@example.com"
    assert demoing.actor_of("no actor here") == "console"


async def test_each_change_refreshes_then_delivers_the_touched_pools_events():
    fleet = simulated.build_fleet()
    log: list[tuple[str, ...]] = []
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def deliver(cluster: str, pool: str, actor: str) -> None:
        log.append(("deliver", cluster, pool, actor))

    changes = (simulated.label_by_hand, simulated.console_resize, simulated.upgrade)
    await demoing.play_cloud(
        fleet, lambda f: f.nodes, changes, random.Random(5), interval=2.5, steps=6,
        refresh=lambda cluster: log.append(("refresh", cluster)), deliver=deliver, sleep=sleep,
    )  # fmt: skip
    assert slept == [2.5] * 6
    delivered = [e for e in log if e[0] == "deliver"]
    assert len(delivered) >= 6  # every change touches at least one pool
    for i, entry in enumerate(log):
        if entry[0] == "deliver":  # its cluster was refreshed before
            assert ("refresh", entry[1]) in log[:i]
    actors = {e[3] for e in delivered}
    assert actors <= {"oncall@example.com", "arn:aws:iam::123456789012:user/alice", "gke"}
    assert len(actors) >= 2
