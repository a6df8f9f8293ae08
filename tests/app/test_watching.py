"""Watching clusters against an in-memory API server: what is emitted on list, watch events,
410 relists and transient errors, and how the fleet adds, reconnects and removes clusters.

The fake serves ``list`` from its current objects and ``watch`` from a queue the test feeds;
a scripted ``Gone``/``Transient`` in the queue is raised by the stream. Time comes from a fake
clock. Synchronisation is by condition (events seen, stream items acknowledged), never by sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
from collections.abc import AsyncIterator, Awaitable, Iterable
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetwarden.app import reflecting, watching
from fleetwarden.app.watching import ClusterWatcher, FleetWatcher, WatchSettings
from fleetwarden.core.clusters import ClusterEndpoint, Credentials
from fleetwarden.core.lifecycle import LifecycleEvent
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.tracking import FindingEvent, FindingTracker
from fleetwarden.ports.kube import Gone, KubeApi, ListResult, Transient, Unauthorized, WatchEvent
from fleetwarden.ports.notify import Backoff
from fleetwarden.ports.sources import FixedClock
from tests.support.waiting import wait_for

POOL_LABEL = "eks.amazonaws.com/nodegroup"
CLUSTER = "c1"
END = object()  # closes the watch stream normally (its timeoutSeconds ran out)


T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)  # where each test's clock starts


def node(name: str, pool: str | None = "general", **labels: str) -> dict[str, Any]:
    all_labels = {"team": "platform", **labels}
    if pool:
        all_labels[POOL_LABEL] = pool
    return {"metadata": {"name": name, "labels": all_labels}}


class FakeKube:
    """Implements ``KubeApi`` for ``/api/v1/nodes`` in memory."""

    def __init__(self, cluster: str = CLUSTER, nodes: Iterable[dict[str, Any]] = ()) -> None:
        self.cluster = cluster
        self.rv = 100
        self.objects: dict[str, dict[str, Any]] = {}
        for obj in nodes:
            self._put(obj)
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.list_calls = 0
        self.watch_rvs: list[str] = []
        self.acked = 0  # stream items the consumer has finished with
        self.closed = self.closing = False
        self.close_gate = asyncio.Event()
        self.close_gate.set()
        self.ready: bool | Exception = True
        self.server_version = "v1.30.2"

    def _put(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[obj["metadata"]["name"]] = obj
        return obj

    # the server changes; ``silently``: the watcher is not told (it happens during a gap)
    def upsert(self, obj: dict[str, Any], *, silently: bool = False) -> None:
        kind = "MODIFIED" if obj["metadata"]["name"] in self.objects else "ADDED"
        stored = self._put(obj)
        if not silently:
            self.queue.put_nowait(WatchEvent(kind, copy.deepcopy(stored)))

    def delete(self, name: str, *, silently: bool = False) -> None:
        obj = self.objects.pop(name)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        if not silently:
            self.queue.put_nowait(WatchEvent("DELETED", obj))

    def bookmark(self) -> str:
        self.rv += 1
        self.queue.put_nowait(
            WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": str(self.rv)}})
        )
        return str(self.rv)

    def fail(self, exc: Exception) -> None:
        self.queue.put_nowait(exc)

    # --- KubeApi ---
    async def list(
        self, path: str, *, label_selector: str | None = None, limit: int = 500
    ) -> ListResult:
        assert path == watching.NODES
        self.list_calls += 1
        return ListResult(copy.deepcopy(list(self.objects.values())), str(self.rv))

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[WatchEvent]:
        assert path == watching.NODES
        self.watch_rvs.append(resource_version)
        while True:
            item = await self.queue.get()
            if isinstance(item, Exception):
                self.acked += 1
                raise item
            if item is END:
                self.acked += 1
                return
            yield item
            self.acked += 1  # resumed: the consumer has applied the event

    async def get(self, path: str, **params: Any) -> Any:
        raise NotImplementedError

    async def patch(self, path: str, body: Any, *, content_type: str = "") -> Any:
        raise NotImplementedError

    async def readyz(self, *, timeout: float = 5.0) -> tuple[bool, str]:
        if isinstance(self.ready, Exception):
            raise self.ready
        return self.ready, "ok" if self.ready else "[-]etcd failed"

    async def version(self, *, timeout: float = 5.0) -> str:
        return self.server_version

    async def aclose(self) -> None:
        self.closing = True
        await self.close_gate.wait()  # a test may hold the close open
        self.closed = True


class Recorder:
    def __init__(self) -> None:
        self.events: list[FindingEvent | LifecycleEvent] = []

    def emit(self, event: FindingEvent | LifecycleEvent) -> None:
        self.events.append(event)

    def findings(self, kind: str | None = None, since: int = 0) -> list[FindingEvent]:
        return [
            e
            for e in self.events[since:]
            if isinstance(e, FindingEvent) and (kind is None or e.type.value == kind)
        ]

    def lifecycle(self, kind: str, since: int = 0) -> list[LifecycleEvent]:
        return [
            e for e in self.events[since:] if isinstance(e, LifecycleEvent) and e.type.value == kind
        ]

    def summary(self, since: int = 0) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for e in self.events[since:]:
            if isinstance(e, FindingEvent):
                f = e.finding
                out.append((e.type.value, f.pool, f.field, f.actual, f.nodes))
            else:
                out.append(
                    (
                        e.type.value,
                        e.details.get("pool"),
                        e.details.get("from"),
                        e.details.get("to"),
                    )
                )
        return out


async def within(awaitable: Awaitable[Any], seconds: float = 2.0) -> Any:
    """Await with a deadline: a fleet operation that hangs fails the test instead."""
    async with asyncio.timeout(seconds):
        return await awaitable


SPECS = [
    NodePoolSpec(
        name="general", cluster=CLUSTER, labels={"team": "platform"}, min_size=1, max_size=10
    ),
    NodePoolSpec(
        name="batch", cluster=CLUSTER, labels={"team": "platform"}, min_size=1, max_size=10
    ),
]


class Harness:
    def __init__(self, fake: FakeKube, watcher: ClusterWatcher, rec: Recorder) -> None:
        self.fake, self.watcher, self.rec = fake, watcher, rec
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.watcher.watch_nodes())
        await wait_for(lambda: self.fake.watch_rvs, what="first watch call")

    async def settle(self) -> None:
        """Wait until the watcher has finished with everything queued so far."""
        want = self.fake.acked + self.fake.queue.qsize()
        await wait_for(lambda: self.fake.acked >= want, what=f"{want} items acknowledged")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                async with asyncio.timeout(2):  # a watcher that ignores cancel fails the test
                    await self.task


@pytest.fixture
async def harness_factory():
    made: list[Harness] = []

    def make(nodes: list[dict[str, Any]], *, settings=None, clock=None, specs=SPECS) -> Harness:
        fake = FakeKube(nodes=nodes)
        rec = Recorder()
        watcher = ClusterWatcher(
            ClusterEndpoint(CLUSTER, "https://c1.example"),
            fake,
            specs,
            FindingTracker(),
            rec.emit,
            settings=settings or WatchSettings(),
            clock=clock or FixedClock(T0),
        )
        h = Harness(fake, watcher, rec)
        made.append(h)
        return h

    yield make
    for h in made:
        await h.stop()


@pytest.fixture
def tiny_backoff(monkeypatch):
    """Back-offs of (almost) no time; the instances are kept to read their attempts."""
    made: list[Backoff] = []

    def factory() -> Backoff:
        b = Backoff(base=0.0001, cap=0.0001, rng=random.Random(0))
        made.append(b)
        return b

    monkeypatch.setattr(reflecting, "Backoff", factory)
    return made


def test_fake_keeps_up_with_the_port():
    """If ``KubeApi`` grows a member, this fake (and the tests' trust in it) must follow."""
    members = {n for n in vars(KubeApi) if not n.startswith("_")} | {"cluster"}
    fake = FakeKube()
    assert all(hasattr(fake, n) for n in members), members - set(dir(fake))


# --- initial list -------------------------------------------------------------------------


async def test_initial_list_emits_each_finding_once_with_the_clock_time(harness_factory):
    clock = FixedClock(T0)
    h = harness_factory(
        [node("n-1"), node("n-2", team="payments"), node("b-1", "batch"), node("s-1", pool=None)],
        clock=clock,
    )
    await h.start()
    assert h.watcher.synced.is_set() and h.fake.list_calls == 1
    assert h.fake.watch_rvs == [str(h.fake.rv)]
    assert sorted(h.rec.summary(), key=str) == sorted(
        [
            ("finding.appeared", "general", "labels.team", "payments", ("n-2",)),
            ("finding.appeared", None, "pool", None, ("s-1",)),
        ],
        key=str,
    )
    assert {e.at for e in h.rec.events} == {clock.at}
    assert h.rec.lifecycle("pool.scaled") == []  # the first inventory is not a scale event


async def test_empty_desired_pool_is_reported_on_the_initial_list(harness_factory):
    h = harness_factory([node("n-1")])
    await h.start()
    (count,) = h.rec.findings("finding.appeared")
    assert (count.finding.pool, count.finding.field, count.finding.actual) == (
        "batch",
        "nodeCount",
        0,
    )


async def test_control_plane_nodes_are_ignored(harness_factory):
    cp = node("cp-1", pool=None, **{"node-role.kubernetes.io/control-plane": ""})
    master = node("m-1", pool=None, **{"node-role.kubernetes.io/master": ""})
    h = harness_factory([node("n-1"), node("b-1", "batch"), cp])
    await h.start()
    h.fake.upsert(master)
    h.fake.upsert(node("cp-1", pool=None, x="y", **{"node-role.kubernetes.io/control-plane": ""}))
    await h.settle()
    assert sorted(h.watcher.nodes) == ["b-1", "n-1"]
    assert h.rec.events == []  # no stray "pool" finding, no scale event


# --- watch events -------------------------------------------------------------------------


async def test_modified_rediffs_only_the_affected_pool(harness_factory):
    h = harness_factory([node("n-1"), node("n-2"), node("b-1", "batch")])
    await h.start()
    rediffed: list[str | None] = []
    original = h.watcher._rediff

    async def spy(scope, **kwargs):
        rediffed.append(scope)
        await original(scope, **kwargs)

    h.watcher._rediff = spy  # type: ignore[method-assign]
    h.fake.upsert(node("n-2", team="payments"))
    await h.settle()
    assert rediffed == ["general"]
    assert h.rec.summary() == [("finding.appeared", "general", "labels.team", "payments", ("n-2",))]
    # the same drift on a second node changes the finding, it does not add one
    h.fake.upsert(node("n-1", team="payments"))
    await h.settle()
    assert rediffed == ["general", "general"]
    assert h.rec.summary()[1:] == [
        ("finding.changed", "general", "labels.team", "payments", ("n-1", "n-2"))
    ]
    # healed: cleared
    h.fake.upsert(node("n-1"))
    h.fake.upsert(node("n-2"))
    await h.settle()
    assert [s[0] for s in h.rec.summary()[2:]] == ["finding.changed", "finding.cleared"]
    assert h.watcher.resource_version == str(h.fake.rv)


async def test_node_moving_between_pools_scales_both(harness_factory):
    h = harness_factory([node("n-1"), node("n-2"), node("b-1", "batch")])
    await h.start()
    h.fake.upsert(node("n-2", "batch"))
    await h.settle()
    scaled = {
        e.details["pool"]: (e.details["from"], e.details["to"])
        for e in h.rec.lifecycle("pool.scaled")
    }
    assert scaled == {"general": (2, 1), "batch": (1, 2)}
    assert len(h.rec.lifecycle("pool.scaled")) == 2
    assert h.watcher.groups == {"general": {"n-1"}, "batch": {"b-1", "n-2"}}


async def test_added_and_deleted_nodes_scale_and_clear(harness_factory):
    h = harness_factory([node("n-1"), node("b-1", "batch")])
    await h.start()
    h.fake.upsert(node("s-1", pool=None))
    await h.settle()
    # a node of no pool is a stray finding, not a scale event
    assert h.rec.summary() == [("finding.appeared", None, "pool", None, ("s-1",))]
    h.fake.upsert(node("n-2"))
    h.fake.delete("n-1")
    h.fake.delete("s-1")
    h.fake.queue.put_nowait(WatchEvent("DELETED", node("never-cached")))  # nothing to say
    await h.settle()
    assert h.rec.summary()[1:] == [
        ("pool.scaled", "general", 1, 2),
        ("pool.scaled", "general", 2, 1),
        ("finding.cleared", None, "pool", None, ("s-1",)),
    ]


async def test_last_node_of_a_pool_deleted_reports_the_empty_pool(harness_factory):
    h = harness_factory([node("n-1"), node("b-1", "batch")])
    await h.start()
    h.fake.delete("b-1")
    await h.settle()
    assert h.rec.summary() == [
        ("finding.appeared", "batch", "nodeCount", 0, ()),
        ("pool.scaled", "batch", 1, 0),
    ]


# --- 410 Gone: relist ---------------------------------------------------------------------


async def test_gone_relists_without_repeating_known_findings_and_reports_the_gap(harness_factory):
    h = harness_factory([node("n-1", team="payments"), node("n-2"), node("b-1", "batch")])
    await h.start()
    known = h.rec.findings("finding.appeared")
    assert [e.finding.nodes for e in known] == [("n-1",)]
    before = len(h.rec.events)
    # while the stream is down: n-2 drifts, b-1 makes way for b-2 and b-3; nobody is told
    h.fake.upsert(node("n-2", team="ops"), silently=True)
    h.fake.delete("b-1", silently=True)
    h.fake.upsert(node("b-2", "batch"), silently=True)
    h.fake.upsert(node("b-3", "batch"), silently=True)
    h.fake.fail(Gone(CLUSTER, "too old resource version", status=410))
    await wait_for(lambda: len(h.fake.watch_rvs) == 2, what="watch resumed after relist")
    assert (h.fake.list_calls, h.watcher.relists) == (2, 2)
    assert h.fake.watch_rvs[1] == str(h.fake.rv)  # resumes from the relist, not the old rv
    assert sorted(h.rec.summary(before), key=str) == sorted(
        [
            ("finding.appeared", "general", "labels.team", "ops", ("n-2",)),
            ("pool.scaled", "batch", 1, 2),
        ],
        key=str,
    )
    assert sorted(h.watcher.nodes) == ["b-2", "b-3", "n-1", "n-2"]


async def test_relist_that_heals_a_finding_clears_it_once(harness_factory):
    h = harness_factory([node("n-1", team="payments"), node("b-1", "batch")])
    await h.start()
    h.fake.upsert(node("n-1"), silently=True)
    h.fake.fail(Gone(CLUSTER, "expired"))
    await wait_for(lambda: len(h.fake.watch_rvs) == 2)
    assert [s[0] for s in h.rec.summary()] == ["finding.appeared", "finding.cleared"]
    h.fake.fail(Gone(CLUSTER, "expired"))
    await wait_for(lambda: len(h.fake.watch_rvs) == 3)
    assert len(h.rec.events) == 2  # a relist with nothing new says nothing


# --- transient errors: back off, resume ---------------------------------------------------


async def test_transient_error_backs_off_and_resumes_from_the_last_resource_version(
    harness_factory, tiny_backoff
):
    h = harness_factory([node("n-1"), node("b-1", "batch")])
    await h.start()
    h.fake.upsert(node("n-1", team="payments"))
    event_rv = str(h.fake.rv)
    h.fake.fail(Transient(CLUSTER, "connection reset"))
    await wait_for(lambda: len(h.fake.watch_rvs) == 2, what="second watch")
    (backoff,) = tiny_backoff
    assert backoff.attempt == 1
    assert h.fake.watch_rvs[1] == event_rv
    assert h.fake.list_calls == 1  # no relist for a transient error
    # twice in a row: the attempt grows; a bookmark moves the resume point
    bookmark = h.fake.bookmark()
    h.fake.fail(Transient(CLUSTER, "503"))
    await wait_for(lambda: len(h.fake.watch_rvs) == 3)
    assert h.fake.watch_rvs[2] == bookmark
    assert backoff.attempt == 1  # the bookmark reset it, the error counted once
    h.fake.fail(Transient(CLUSTER, "503"))
    await wait_for(lambda: len(h.fake.watch_rvs) == 4)
    assert backoff.attempt == 2
    # a stream that simply ends (timeoutSeconds) is resumed without back-off or relist
    h.fake.queue.put_nowait(END)
    await wait_for(lambda: len(h.fake.watch_rvs) == 5)
    assert (backoff.attempt, h.fake.list_calls) == (2, 1)
    # nothing was reported twice
    assert [s[0] for s in h.rec.summary()] == ["finding.appeared"]


async def test_permanent_api_error_waits_at_least_five_seconds(harness_factory, monkeypatch):
    real_sleep = asyncio.sleep
    delays: list[float] = []

    async def fake_sleep(delay: float, result: Any = None) -> Any:
        delays.append(delay)
        return await real_sleep(0, result)

    h = harness_factory([node("n-1"), node("b-1", "batch")])
    await h.start()
    monkeypatch.setattr(watching.asyncio, "sleep", fake_sleep)
    h.fake.fail(Unauthorized(CLUSTER, "401 token expired", status=401))
    await wait_for(lambda: len(h.fake.watch_rvs) == 2)
    monkeypatch.undo()
    assert [d for d in delays if d > 0.01] and min(d for d in delays if d > 0.01) >= 5.0


def test_backoff_is_full_jitter_capped_and_resettable():
    b = Backoff(base=0.5, cap=4.0, rng=random.Random(7))
    delays = [b.next() for _ in range(10)]
    bounds = [min(4.0, 0.5 * 2**i) for i in range(10)]
    assert all(0 <= d <= hi for d, hi in zip(delays, bounds, strict=True))
    assert max(delays[5:]) <= 4.0 and b.attempt == 10
    b.reset()
    assert b.attempt == 0 and b.next() <= 0.5


# --- bounded cache ------------------------------------------------------------------------


async def test_bounded_cache_refuses_nodes_beyond_max_nodes(harness_factory):
    nodes = [node("n-1"), node("n-2"), node("b-1", "batch"), node("n-4", team="payments")]
    h = harness_factory(nodes, settings=WatchSettings(max_nodes=3))
    await h.start()
    assert sorted(h.watcher.nodes) == ["b-1", "n-1", "n-2"]
    assert h.rec.findings() == []  # the refused node's drift is not judged
    # ... and the refusal is said, once, as a cluster event
    (full,) = h.rec.lifecycle("cluster.cache_full")
    assert full.details["maxNodes"] == 3 and full.details["refused"] == 1
    h.rec.events.clear()
    h.fake.upsert(node("n-5", team="payments"))
    await h.settle()
    assert "n-5" not in h.watcher.nodes and h.rec.events == []
    # a cached node still updates when the cache is full
    h.fake.upsert(node("n-1", team="payments"))
    await h.settle()
    assert [s[:3] for s in h.rec.summary()] == [("finding.appeared", "general", "labels.team")]
    # room again after a delete
    h.fake.delete("n-2")
    h.fake.upsert(node("n-6"))
    await h.settle()
    assert "n-6" in h.watcher.nodes and len(h.watcher.nodes) == 3


# --- health probes ------------------------------------------------------------------------


async def test_probe_reports_health_and_upgrades_with_the_clock(harness_factory):
    clock = FixedClock(T0)
    upgrades: list[tuple[str, str]] = []
    h = harness_factory([], settings=WatchSettings(failure_threshold=2), clock=clock)

    async def on_upgrade(cluster: str, version: str) -> None:
        upgrades.append((cluster, version))

    h.watcher.on_upgrade = on_upgrade
    await h.watcher.probe_once()
    h.fake.ready = Transient(CLUSTER, "connection refused")
    clock.advance(10)
    await h.watcher.probe_once()
    assert h.rec.lifecycle("cluster.health")[-1].details["to"] == "Healthy"
    clock.advance(10)
    await h.watcher.probe_once()
    down = h.rec.lifecycle("cluster.health")[-1]
    assert (down.details["to"], down.at) == ("Unreachable", clock.at)
    assert "connection refused" in down.details["reason"]
    h.fake.ready, h.fake.server_version = True, "v1.31.0"
    await h.watcher.probe_once()
    assert [e.details["to"] for e in h.rec.lifecycle("cluster.health")] == [
        "Healthy",
        "Unreachable",
        "Healthy",
    ]
    (up,) = h.rec.lifecycle("cluster.upgraded")
    assert up.details == {"from": "v1.30.2", "to": "v1.31.0"}
    assert upgrades == [(CLUSTER, "v1.31.0")]


async def test_cancelling_a_watcher_mid_probe_stops_it(harness_factory):
    """A cancel that lands just as ``/readyz`` answered must not be swallowed (Python 3.11's
    ``asyncio.wait_for`` returns the result instead): the watcher would live on, and
    ``FleetWatcher.update``/``remove`` would wait for it forever."""
    h = harness_factory([], settings=WatchSettings(probe_interval=3600))
    answered = asyncio.Event()
    readyz = h.fake.readyz

    async def signalling_readyz(*, timeout: float = 5.0) -> tuple[bool, str]:
        answered.set()
        return await readyz(timeout=timeout)

    h.fake.readyz = signalling_readyz  # type: ignore[method-assign]
    task = asyncio.create_task(h.watcher.probe_forever())
    async with asyncio.timeout(1):
        await answered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(1):
            await task
    assert task.cancelled()


# --- FleetWatcher -------------------------------------------------------------------------


def endpoint(token: str = "token-a", **labels: str) -> ClusterEndpoint:
    return ClusterEndpoint(
        CLUSTER,
        "https://c1.example",
        credentials=Credentials(token=token),
        labels=tuple(labels.items()),
    )


class Fleet:
    def __init__(self, nodes: list[dict[str, Any]], specs: list[NodePoolSpec] = SPECS) -> None:
        self.nodes = nodes
        self.clients: list[FakeKube] = []
        self.rec = Recorder()
        self.clock = FixedClock(T0)
        self.fleet = FleetWatcher(
            specs,
            self.factory,
            self.rec.emit,
            settings=WatchSettings(probe_interval=3600),
            clock=self.clock,
        )
        self.runner: asyncio.Task[None] | None = None

    def factory(self, ep: ClusterEndpoint) -> FakeKube:
        client = FakeKube(ep.name, self.nodes)
        self.clients.append(client)
        return client

    async def start(self, *endpoints: ClusterEndpoint) -> None:
        self.runner = asyncio.create_task(self.fleet.run(list(endpoints)))
        await wait_for(lambda: self.clients and self.clients[-1].watch_rvs, what="watching")
        await wait_for(lambda: self.rec.lifecycle("cluster.health"), what="first probe")

    async def stop(self) -> None:
        if self.runner is not None:
            self.runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                async with asyncio.timeout(2):
                    await self.runner


@pytest.fixture
async def fleet():
    made: list[Fleet] = []

    def make(nodes: list[dict[str, Any]], specs: list[NodePoolSpec] = SPECS) -> Fleet:
        f = Fleet(nodes, specs)
        made.append(f)
        return f

    yield make
    for f in made:
        await f.stop()


async def test_remove_clears_findings_with_the_reason_then_removes_the_cluster(fleet):
    f = fleet([node("n-1", team="payments"), node("s-1", pool=None)])
    await f.start(endpoint())
    assert len(f.rec.findings("finding.appeared")) == 3  # label, stray, empty batch pool
    before = len(f.rec.events)
    await within(f.fleet.remove(CLUSTER, reason="Argo CD secret argocd/cluster-c1 deleted"))
    tail = f.rec.events[before:]
    cleared = [e for e in tail if isinstance(e, FindingEvent)]
    assert len(cleared) == 3 and {e.type.value for e in cleared} == {"finding.cleared"}
    assert {e.reason for e in cleared} == {"Argo CD secret argocd/cluster-c1 deleted"}
    assert isinstance(tail[-1], LifecycleEvent) and tail[-1].type.value == "cluster.removed"
    assert tail[-1].details == {"reason": "Argo CD secret argocd/cluster-c1 deleted"}
    assert f.clients[0].closed and f.fleet.watcher(CLUSTER) is None
    assert f.fleet.tracker.current() == []
    await within(f.fleet.remove(CLUSTER, reason="again"))  # unknown now: nothing more
    assert len(f.rec.events) == before + 4


async def test_update_with_the_same_fingerprint_does_nothing(fleet):
    f = fleet([node("n-1"), node("b-1", "batch")])
    await f.start(endpoint())
    before = len(f.rec.events)
    await within(f.fleet.update(endpoint(env="prod")))  # labels are not part of the connection
    await within(f.fleet.add(endpoint()))
    assert len(f.clients) == 1 and not f.clients[0].closed
    assert f.rec.events[before:] == []


async def test_update_with_a_new_token_reconnects_without_repeating_findings(fleet):
    f = fleet([node("n-1", team="payments"), node("b-1", "batch")])
    await f.start(endpoint())
    (added,) = f.rec.lifecycle("cluster.added")
    assert added.details == {"server": "https://c1.example", "source": "kubeconfig", "pools": 2}
    assert len(f.rec.findings("finding.appeared")) == 1
    before = len(f.rec.events)
    await within(f.fleet.update(endpoint("token-b")))
    await wait_for(lambda: len(f.clients) == 2 and f.clients[1].watch_rvs, what="reconnected")
    assert f.clients[0].closed and not f.clients[1].closed
    assert f.clients[1].list_calls == 1
    assert [e.details for e in f.rec.lifecycle("cluster.added", before)] == [
        {"server": "https://c1.example", "source": "kubeconfig", "reconnected": True}
    ]
    assert f.rec.findings(since=before) == []  # the new watcher's list knew nothing new
    assert f.fleet.running[CLUSTER].endpoint.credentials.token == "token-b"


async def test_two_quick_reconnects_leave_one_watcher_on_the_last_credentials(fleet):
    f = fleet([node("n-1", team="payments"), node("b-1", "batch")])
    await f.start(endpoint())
    before = len(f.rec.events)
    await within(f.fleet.update(endpoint("token-b")))
    await within(f.fleet.update(endpoint("token-c")))
    await wait_for(lambda: len(f.clients) == 3 and f.clients[2].watch_rvs, what="reconnected")
    assert [c.closed for c in f.clients] == [True, True, False]
    assert f.fleet.running[CLUSTER].endpoint.credentials.token == "token-c"
    assert f.rec.findings(since=before) == []


@pytest.mark.parametrize("operation", ["update", "remove"])
async def test_cancelling_the_caller_while_a_watcher_stops_is_not_swallowed(fleet, operation):
    """Shutdown may cancel the Argo CD Secret watcher while it waits for an old watcher to
    stop: that cancel must reach it, or the fleet never shuts down."""
    f = fleet([node("n-1"), node("b-1", "batch")])
    await f.start(endpoint())
    old = f.clients[0]
    old.close_gate.clear()
    if operation == "update":
        call = asyncio.create_task(f.fleet.update(endpoint("token-b")))
    else:
        call = asyncio.create_task(f.fleet.remove(CLUSTER, reason="gone"))
    await wait_for(lambda: old.closing, what="old watcher closing")
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await within(call)
    assert call.cancelled()


async def test_a_cluster_silent_for_gone_after_probes_is_declared_gone_once(harness_factory):
    """Issue 15: probes failing ``gone_after`` times in a row (default 5) make one
    cluster.removed with declaredGone (the orphan monitor names its apps); not before."""
    h = harness_factory([], settings=WatchSettings(failure_threshold=2))
    assert h.watcher.settings.gone_after == 5
    h.fake.ready = Transient(CLUSTER, "connection refused")
    for _ in range(4):
        await h.watcher.probe_once()
    assert h.rec.lifecycle("cluster.removed") == []
    for _ in range(3):
        await h.watcher.probe_once()
    (gone,) = h.rec.lifecycle("cluster.removed")
    assert gone.details["declaredGone"] is True


# --- a pool defined twice -----------------------------------------------------------------

# ``general`` of c1 in two files that disagree on its team label (an eksctl group and a
# Terraform node group, say), and ``batch`` once
TWICE = [
    NodePoolSpec(
        name="general", cluster=CLUSTER, labels={"team": "platform"}, min_size=1, max_size=10,
        source="eksctl.yaml",
    ),
    NodePoolSpec(
        name="general", cluster=CLUSTER, labels={"team": "payments"}, min_size=5, max_size=10,
        source="general.tf",
    ),
    SPECS[1],
]  # fmt: skip


async def test_a_pool_defined_twice_is_compared_in_neither_definition_as_nodes_come_and_go(
    harness_factory,
):
    """Before, the watcher's index kept the last definition read and compared it: every
    ``general`` node was a ``labels.team`` finding against general.tf (and the pool below its
    min_size 5), a silent guess. Now, as ``scan``: no definition is compared, and its nodes are
    not "outside the desired state" either -- on the first list, on watch events, on a relist;
    ``batch`` is compared as before."""
    h = harness_factory(
        [node("n-1"), node("n-2", team="ops"), node("b-1", "batch", team="ops")], specs=TWICE
    )
    await h.start()
    assert h.rec.summary() == [("finding.appeared", "batch", "labels.team", "ops", ("b-1",))]
    assert [(s.path, s.pool) for s in h.watcher.skips] == [
        ("eksctl.yaml", "general"),
        ("general.tf", "general"),
    ]
    before = len(h.rec.events)
    h.fake.upsert(node("n-1", team="payments"))
    h.fake.upsert(node("n-3", team="ops"))
    h.fake.delete("n-2")
    await h.settle()
    h.fake.fail(Gone(CLUSTER, "too old resource version", status=410))
    await wait_for(lambda: len(h.fake.watch_rvs) == 2, what="watch resumed after relist")
    assert h.rec.findings(since=before) == []
    assert [s[:2] for s in h.rec.summary(before)] == [("pool.scaled", "general")] * 2
    assert sorted(n.name for n in h.watcher.nodes_of("general")) == ["n-1", "n-3"]
    assert h.watcher.tracker.current()[0].pool == "batch"
    assert len(h.watcher.tracker.current()) == 1


async def test_a_cluster_added_says_each_definition_of_a_pool_defined_twice_is_not_compared(fleet):
    """``pool.not_compared`` events after ``cluster.added`` (whose ``pools`` counts the pools
    compared): one per file, each the ``scan`` ``skipped[]`` entry (path, reason, pool); the
    fleet keeps them for the live view. A reconnect does not repeat them."""
    f = fleet([node("n-1"), node("b-1", "batch")], TWICE)
    await f.start(endpoint())
    (added,) = f.rec.lifecycle("cluster.added")
    assert added.details["pools"] == 1
    said = [e.to_json() for e in f.rec.lifecycle("pool.not_compared")]
    assert [(e["cluster"], e["pool"], e["path"]) for e in said] == [
        (CLUSTER, "general", "eksctl.yaml"),
        (CLUSTER, "general", "general.tf"),
    ]
    for e in said:
        assert "'general' of cluster 'c1' is defined 2 times" in e["reason"]
        assert "none is compared" in e["reason"]
    events = f.rec.events
    assert events.index(f.rec.lifecycle("pool.not_compared")[0]) == events.index(added) + 1
    assert f.rec.findings() == []
    assert {c: [s.path for s in skips] for c, skips in f.fleet.pools_not_compared().items()} == {
        CLUSTER: ["eksctl.yaml", "general.tf"]
    }
    await within(f.fleet.update(endpoint("token-b")))
    await wait_for(lambda: len(f.clients) == 2 and f.clients[1].watch_rvs, what="reconnected")
    assert len(f.rec.lifecycle("pool.not_compared")) == 2


async def test_strays_beside_a_pool_whose_name_is_not_known_say_they_may_be_its_nodes(
    harness_factory,
):
    """As ``scan``: the pool of unknown name is not compared (a skip), the nodes of no pool are
    still a stray finding, and that finding says they may be that pool's -- on the first list
    and when a node joins the group later."""
    from fleetwarden.core.pools import Unresolved

    unnamed = NodePoolSpec(
        name="custom",
        cluster=CLUSTER,
        source="main.tf",
        unresolved=(Unresolved("name", "var.name"),),
    )
    h = harness_factory(
        [node("n-1"), node("b-1", "batch"), node("x-1", "custom-a")], specs=[*SPECS, unnamed]
    )
    await h.start()
    note = "cluster 'c1' has a pool whose name is not known ('custom' in main.tf: var.name)"
    (stray,) = h.rec.findings("finding.appeared")
    assert (stray.finding.pool, stray.finding.field, stray.finding.nodes) == (
        "custom-a",
        "pool",
        ("x-1",),
    )
    assert stray.finding.message == f"{note}: these nodes may be that pool's"
    assert [s.pool for s in h.watcher.skips] == ["custom"]
    h.fake.upsert(node("x-2", "custom-b"))
    await h.settle()
    (later,) = [e for e in h.rec.findings("finding.appeared") if e.finding.pool == "custom-b"]
    assert later.finding.message.startswith(note)


async def test_desired_clusters_no_context_names_are_said_once_with_their_unnamed_pools(fleet):
    """c1 is watched; c2 (a pool) and c3 (only a pool whose name is not known) are named by
    no context. With the contexts alone nothing comes later: right after the clusters are
    added, c2 gets ``cluster.not_compared`` (``scan``: a high "no nodes were given" finding)
    and each pool whose name is not known a ``pool.not_compared`` (``scan`` lists those in
    ``skipped[]`` whatever the clusters) -- said once, not again when the watch ends."""
    from fleetwarden.core.pools import Unresolved

    unnamed = NodePoolSpec(
        "custom", "c3", source="c3.tf", unresolved=(Unresolved("name", "var.name"),)
    )
    specs = [*SPECS, NodePoolSpec("web", "c2", source="c2.yaml"), unnamed]
    f = fleet([node("n-1")], specs)
    await f.start(endpoint())
    (missing,) = f.rec.lifecycle("cluster.not_compared")
    assert missing.to_json() == {
        "type": "cluster.not_compared", "cluster": "c2", "at": "2025-03-01T12:00:00Z",
        "reason": "no cluster watched is named 'c2': its 1 pools were not compared",
        "pools": ["web"], "source": "c2.yaml",
    }  # fmt: skip
    (pool,) = f.rec.lifecycle("pool.not_compared")
    assert (pool.cluster, pool.details["pool"], pool.details["path"]) == ("c3", "custom", "c3.tf")
    assert "its name is not known (var.name)" in pool.details["reason"]
    assert list(f.fleet.unfound()) == ["c2"]
    assert f.fleet.missing() == [] and f.fleet.not_compared() == []  # said once
