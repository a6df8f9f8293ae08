"""The serve pipeline as a use case (app.serving): one tracker for watchers and workers, and
the inspector asking the cluster's live watcher to re-diff (the node dump when there is none).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from fleetwarden.app.serving import Serving, ServingSettings
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.findings import Severity
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.sources import FixedClock

POOL_LABEL = "eks.amazonaws.com/nodegroup"
SPECS = [NodePoolSpec("general", "c1", instance_types=("m5.large",))]


def node(name: str, itype: str) -> ObservedNode:
    labels = {"node.kubernetes.io/instance-type": itype, POOL_LABEL: "general"}
    return ObservedNode(name, labels=labels, kubelet_version="v1.30.4")


def no_client(_endpoint: Any) -> Any:
    raise AssertionError("no cluster is watched live in these tests")


class Queue:  # the pipeline is built, not run: nothing is queued
    async def close(self) -> None: ...


def pipeline(snapshot: dict[str, list[ObservedNode]], **kw: Any) -> Serving:
    return Serving(
        ServingSettings(),
        SPECS,
        Queue(),  # type: ignore[arg-type]
        client_factory=no_client,
        snapshot=snapshot,
        clock=FixedClock(datetime(2026, 1, 1, tzinfo=UTC)),
        **kw,
    )


class LiveWatcher:
    def __init__(self) -> None:
        self.synced = asyncio.Event()
        self.synced.set()
        self.asked: list[str | None] = []

    async def rediff(self, scope: str | None) -> int:
        self.asked.append(scope)
        return 0


async def test_without_a_live_watcher_the_pool_is_diffed_from_the_node_dump():
    counts: list[dict[Severity, int]] = []
    serving = pipeline(
        {"c1": [node("a", "m5.large")]}, on_findings=lambda c: counts.append(dict(c))
    )
    assert serving.knows("c1") and not serving.knows("c2")
    assert await serving.rediff("c1", "general") == 0  # nothing drifted
    serving.snapshot["c1"] = [node("a", "t3.medium")]  # a newer dump: resized
    assert await serving.rediff("c1", "general") == 1
    (event,) = [e for e in serving.events if e["type"] == "finding.appeared"]
    assert event["finding"]["field"] == "instanceType"
    assert [f.field for f in serving.findings()] == ["instanceType"]
    assert counts and sum(counts[-1].values()) == 1, "the severity gauge follows the tracker"


async def test_with_a_synced_live_watcher_the_inspector_asks_it_to_rediff():
    serving = pipeline({"c1": [node("a", "t3.medium")]})
    live = LiveWatcher()
    serving.fleet.watcher = lambda cluster: live if cluster == "c1" else None  # type: ignore[method-assign]
    assert await serving.rediff("c1", "general") == 0
    assert live.asked == ["general"], "the watcher's cache, not the stale dump"
    assert serving.findings() == []
    live.synced.clear()  # not synced yet: the dump is the best there is
    assert await serving.rediff("c1", "general") == 1
    assert live.asked == ["general"]


def test_the_start_up_scan_tracks_the_dump_once_and_emits_to_the_healer_queue():
    serving = pipeline({"c1": [node("a", "t3.medium"), node("b", "m5.large")]})
    serving.initial_scan()
    serving.initial_scan()  # the same state again: nothing new
    appeared = [e for e in serving.events if e["type"] == FindingEventType.APPEARED.value]
    assert len(appeared) == 1
    queued = serving.healer.queue.get_nowait()
    assert isinstance(queued, FindingEvent) and queued.finding.nodes == ("a",)


async def test_a_late_cloud_event_refines_the_actor_of_a_finding_already_open():
    """The watch saw the change first (the finding names kubelet, the provider's agent, from
    managedFields); CloudTrail delivers the node-group update later: the inspector's re-diff
    replaces the actor with the IAM principal -> one finding.changed, queued for the audit."""
    serving = pipeline({"c1": [node("a", "t3.medium")]})
    serving.initial_scan()
    (f,) = serving.findings()
    serving.tracker.annotate(
        ("c1", "general"),
        f.id,
        {
            "actor": {"name": "kubelet", "kind": "provider", "via": "managedFields"},
            "startedAt": "2025-12-31T23:58:00Z",
        },
    )
    serving.healer.queue.get_nowait()  # the appeared event
    event = ChangeEvent(
        "ct-1",
        "aws.eks",
        "UpdateNodegroupConfig",
        EventSource.AWS,
        Operation.UPDATE,
        time=datetime(2025, 12, 31, 23, 57, 50, tzinfo=UTC),
        cluster="c1",
        pool="general",
        actor="arn:aws:iam::1:user/alice",
    )
    serving.attribution.record(event, now=datetime(2026, 1, 1, tzinfo=UTC))
    assert await serving.rediff("c1", "general") == 1
    changed = [e for e in serving.events if e["type"] == "finding.changed"]
    assert [e["finding"]["actor"] for e in changed] == [
        {"name": "arn:aws:iam::1:user/alice", "kind": "human", "via": "cloudEvent"}
    ]
    assert "ct-1" in changed[0]["reason"]
    assert serving.findings()[0].extra["actor"]["via"] == "cloudEvent"
    queued = serving.healer.queue.get_nowait()  # the healer writes its `finding` audit record
    assert queued.type is FindingEventType.CHANGED
    assert await serving.rediff("c1", "general") == 0, "refined once, not on every re-diff"


class Capacity:
    def __init__(self) -> None:
        self.told: list[ChangeEvent] = []

    async def observe(self, event: ChangeEvent) -> None:
        self.told.append(event)


async def test_a_providers_scale_event_reaches_the_clusters_capacity_watcher():
    """Issue 15: pods left pending by a scale-down name who scaled the pool; the watch's own
    pool.scaled has the sizes but no actor, the provider's event (through the inspector's
    re-diff) has the principal."""
    serving = pipeline({"c1": [node("a", "m5.large")]})
    live = LiveWatcher()
    live.capacity = Capacity()  # type: ignore[attr-defined]
    serving.fleet.watcher = lambda cluster: live if cluster == "c1" else None  # type: ignore[method-assign]
    await serving.rediff("c1", "general")
    assert live.capacity.told == [], "no event, nothing to tell"  # type: ignore[attr-defined]
    event = ChangeEvent(
        "asg-1",
        "aws.autoscaling",
        "EC2 Instance Terminate Successful",
        EventSource.AWS,
        Operation.SCALE,
        time=datetime(2025, 12, 31, 23, 59, tzinfo=UTC),
        cluster="c1",
        pool="general",
        actor="arn:aws:iam::1:user/bob",
        detail={"from": 3, "to": 1},
    )
    serving.attribution.record(event, now=datetime(2026, 1, 1, tzinfo=UTC))
    await serving.rediff("c1", "general")
    assert live.capacity.told == [event]  # type: ignore[attr-defined]


# ``general`` of c1 defined in two files (an eksctl group and a Terraform node group, say)
TWICE = [
    NodePoolSpec("general", "c1", instance_types=("m5.large",), source="eksctl.yaml"),
    NodePoolSpec("general", "c1", instance_types=("t3.medium",), source="general.tf"),
]


def test_the_start_up_scan_compares_no_definition_of_a_pool_defined_twice():
    """As ``scan``: neither definition is compared (a resized node is no instanceType finding
    against either), and the pool's nodes are not "outside the desired state" either."""
    serving = Serving(
        ServingSettings(), TWICE, Queue(),  # type: ignore[arg-type]
        client_factory=no_client, snapshot={"c1": [node("a", "t3.medium"), node("b", "m5.large")]},
        clock=FixedClock(datetime(2026, 1, 1, tzinfo=UTC)),
    )  # fmt: skip
    serving.initial_scan()
    assert serving.findings() == []
    assert [e for e in serving.events if e["type"].startswith("finding.")] == []


async def test_an_event_naming_a_pool_defined_twice_compares_neither_definition_from_the_dump():
    """Without a live watcher the inspector re-diffs from the node dump: it compared the last
    definition read (``t3.medium``: node ``b`` was a finding against it)."""
    serving = Serving(
        ServingSettings(), TWICE, Queue(),  # type: ignore[arg-type]
        client_factory=no_client, snapshot={"c1": [node("a", "t3.medium"), node("b", "m5.large")]},
        clock=FixedClock(datetime(2026, 1, 1, tzinfo=UTC)),
    )  # fmt: skip
    assert serving.knows("c1")
    assert await serving.rediff("c1", "general") == 0
    assert serving.findings() == []


def test_the_blast_radius_counts_only_the_pools_compared():
    """The healer may act on a share (10 %, floor 1) of a cluster's pools at once. Its base
    counted every desired pool name: ten names each defined twice, and one whose name is not
    known -- none of them compared, so none ever healed -- doubled c1's share (21 pools: 2
    actions at once) over the ten pools that are compared (1)."""
    from fleetwarden.core.pools import Unresolved

    compared = [NodePoolSpec(f"p{i}", "c1", source="pools.yaml") for i in range(10)]
    twice = [NodePoolSpec(f"d{i}", "c1", source=f) for i in range(10) for f in ("a.yaml", "b.tf")]
    unnamed = NodePoolSpec("custom", "c1", unresolved=(Unresolved("name", "var.name"),))
    serving = Serving(
        ServingSettings(), [*compared, *twice, unnamed], Queue(),  # type: ignore[arg-type]
        client_factory=no_client, snapshot={"c1": []},
        clock=FixedClock(datetime(2026, 1, 1, tzinfo=UTC)),
    )  # fmt: skip
    assert serving.healer.state.pools == {"c1": 10}
    assert serving.healer.policy.guards.cluster_limit(serving.healer.state.pools["c1"]) == 1


def test_the_start_up_scan_says_strays_may_be_the_pool_whose_name_is_not_known():
    """serve's first pass over the node dumps says of nodes of no pool what ``scan`` says:
    the cluster has a pool whose name is not known (file, expression), which they may be."""
    from fleetwarden.core.pools import Unresolved

    unnamed = NodePoolSpec(
        "custom", "c1", source="main.tf", unresolved=(Unresolved("name", "var.name"),)
    )
    stray = ObservedNode("x", labels={POOL_LABEL: "custom-a"}, kubelet_version="v1.30.4")
    serving = Serving(
        ServingSettings(), [*SPECS, unnamed], Queue(),  # type: ignore[arg-type]
        client_factory=no_client, snapshot={"c1": [node("a", "m5.large"), stray]},
        clock=FixedClock(datetime(2026, 1, 1, tzinfo=UTC)),
    )  # fmt: skip
    serving.initial_scan()
    (found,) = serving.findings()
    assert (found.pool, found.field) == ("custom-a", "pool")
    assert found.message.startswith(
        "cluster 'c1' has a pool whose name is not known ('custom' in main.tf: var.name)"
    )


async def test_a_desired_cluster_with_no_endpoint_and_no_dump_is_said_not_compared():
    """c2 is named by a desired pool, but no context, Argo CD Secret or node dump gives it:
    its pools are never compared (scan: a high "no nodes were given" finding). The fleet's
    start says it on the service's stream once (``cluster.not_compared``); c1, compared from
    its dump, is not said; ``pools_not_compared`` (the heatmap, the pool's detail) and
    ``desired_state`` (``/healthz``) say it too. Before, serve said nothing of c2."""
    from fleetwarden.core.skips import Skip

    c2 = NodePoolSpec("batch", "c2", source="c2.yaml")
    unread = Skip("broken.yaml", "YAML syntax error", problem=True)
    serving = Serving(
        ServingSettings(), [*SPECS, c2], Queue(),  # type: ignore[arg-type]
        client_factory=no_client, snapshot={"c1": [node("a", "m5.large")]},
        clock=FixedClock(datetime(2026, 1, 1, tzinfo=UTC)), skipped=[unread],
    )  # fmt: skip
    assert serving.desired_state() == {}  # the pipeline is not running: it says nothing
    serving.pipeline_runs = True  # as Serving.run sets it
    running = asyncio.create_task(serving.fleet.run())
    try:
        for _ in range(100):
            if any(e["type"] == "cluster.not_compared" for e in serving.events):
                break
            await asyncio.sleep(0.01)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    said = [e for e in serving.events if e["type"] == "cluster.not_compared"]
    reason = "no cluster watched is named 'c2': its 1 pools were not compared"
    assert said == [
        {"type": "cluster.not_compared", "cluster": "c2", "at": "2026-01-01T00:00:00Z",
         "reason": reason, "pools": ["batch"], "source": "c2.yaml"}
    ]  # fmt: skip
    (message,) = [m for m in serving.live.since(0) or () if m.data["type"] == said[0]["type"]]
    assert message.kind == "event"
    assert serving.pools_not_compared() == {"c2": [Skip("c2.yaml", reason, pool="batch")]}
    assert serving.desired_state() == {
        "desired": {
            "skipped": [unread.to_json()],
            "clustersNotCompared": [
                {"cluster": "c2", "reason": reason, "pools": ["batch"], "source": "c2.yaml"}
            ],
        }
    }
