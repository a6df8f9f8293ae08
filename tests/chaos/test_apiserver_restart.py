"""The API server killed and restarted during a watch, twice, while node labels are written
without pause: once the watch resumes from where it stood, once its resourceVersion has gone
(as after a compaction while the server was down) and it must list again. After each outage
the watcher's nodes and findings match what the API server acknowledged last — nothing missed
after the relist — and no drift is reported twice (a real etcd + kube-apiserver from
scripts/k8s-test-env; writes the API server refused while down were never acknowledged)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import http_client_factory, load_kubeconfig
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.core.lifecycle import LifecycleEvent
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.kube import KubeError
from tests.e2e.test_watch_live import node_body, spec
from tests.support import k8s_env

pytestmark = pytest.mark.live

NODES = [f"chaos-{i}" for i in range(10)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One cluster of its own: its API server is killed here, no other test's is."""
    state_dir = tmp_path_factory.mktemp("k8s-chaos")
    k8s_env.start_clusters(1, state_dir)
    try:
        yield state_dir
    finally:
        k8s_env.stop_clusters(state_dir)


class Seen:
    """Every event the watcher emitted, with the monotonic time it came."""

    def __init__(self) -> None:
        self.events: list[tuple[float, FindingEvent | LifecycleEvent]] = []

    def emit(self, event: FindingEvent | LifecycleEvent) -> None:
        self.events.append((time.monotonic(), event))

    def health(self, to: str, after: float) -> float | None:
        return next(
            (
                t
                for t, e in self.events
                if t > after
                and isinstance(e, LifecycleEvent)
                and e.type.value == "cluster.health"
                and e.details["to"] == to
            ),
            None,
        )


class Writer:
    """Labels nodes without pause, round robin; keeps what the API server acknowledged. A
    write it got no answer to may still have been applied: the API server's own list is the
    truth the watcher is held to, the acknowledged writes a check on that list."""

    def __init__(self, api: KubeClient) -> None:
        self.api = api
        self.acked: dict[str, str] = {}
        self.count = 0
        self.refused = 0
        self.acked_at: list[tuple[float, str, str]] = []  # (time, node, value)
        self.stopping = False

    async def run(self) -> None:
        k = 0
        while not self.stopping:
            node, value = NODES[k % len(NODES)], f"w{k}"
            try:
                await self.api.patch(
                    f"/api/v1/nodes/{node}", {"metadata": {"labels": {"team": value}}}
                )
            except KubeError:  # down: not acknowledged; try the next write a little later
                self.refused += 1
                await asyncio.sleep(0.05)
            else:
                self.acked[node] = value
                self.count += 1
                self.acked_at.append((time.monotonic(), node, value))
            k += 1


async def _until(cond: Any, what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := cond()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        await asyncio.sleep(0.02)
    return result


async def test_apiserver_killed_and_restarted_during_a_watch_misses_nothing(cluster, figures):
    (ep,) = load_kubeconfig(Path(k8s_env.load_state(cluster)["kubeconfig"]))
    seen = Seen()
    fleet = FleetWatcher(
        [spec(ep.name)],
        http_client_factory,
        seen.emit,
        settings=WatchSettings(probe_interval=0.3, probe_timeout=1, failure_threshold=2),
    )
    async with KubeClient(ep) as api:
        for name in NODES:
            await api.request("POST", "/api/v1/nodes", body=node_body(name))
        runner = asyncio.create_task(fleet.run([ep]))
        writer = Writer(api)
        writing = asyncio.create_task(writer.run())
        recoveries: list[float] = []
        relists: list[int] = []
        try:
            watcher = await _until(
                lambda: (w := fleet.watcher(ep.name)) and w.synced.is_set() and w, "synced"
            )
            for forget_version in (False, True):
                await _until(lambda: writer.count >= 100 * (len(recoveries) + 1), "100 writes")
                killed = time.monotonic()
                await asyncio.to_thread(k8s_env.crash_apiserver, cluster, 1)
                await _until(lambda t=killed: seen.health("Unreachable", t), "seen unreachable")
                before = watcher.relists
                if forget_version:  # compacted away while the server was down: 410, relist
                    watcher.resource_version = "1"
                await asyncio.to_thread(k8s_env.start_apiserver, cluster, 1)
                up = time.monotonic()
                # recovered: a change written after the restart has come through the watch
                written = await _until(
                    lambda up=up: next(((t, n, v) for t, n, v in writer.acked_at if t > up), None),
                    "a write acknowledged after the restart",
                )
                await _until(
                    lambda w=written: _delivered(watcher, w), "that write seen by the watch"
                )
                recoveries.append(time.monotonic() - up)
                relists.append(watcher.relists - before)
            writer.stopping = True  # let the write in flight finish: it is then acknowledged
            await writing
            truth = {
                n["metadata"]["name"]: n["metadata"]["labels"]["team"]
                for n in (await api.list("/api/v1/nodes")).items
            }
            await _until(
                lambda: all(watcher.nodes[n].labels.get("team") == v for n, v in truth.items()),
                "the watcher's nodes as the API server has them",
                timeout=30,
            )
            current = {
                node: f.actual
                for f in fleet.tracker.current()
                if f.field == "labels.team"
                for node in f.nodes
            }
        finally:
            writing.cancel()
            runner.cancel()
            for task in (writing, runner):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            for name in NODES:
                with contextlib.suppress(KubeError):
                    await api.request("DELETE", f"/api/v1/nodes/{name}")

    lost = [n for n, v in truth.items() if watcher.nodes[n].labels.get("team") != v]
    lost += [n for n, v in truth.items() if current.get(n) != v]  # and the findings say so
    twice = _reported_twice([e for _, e in seen.events if isinstance(e, FindingEvent)])
    figures(
        faults="kube-apiserver killed (SIGKILL) and restarted twice during the watch (the "
        "second time with the watch's resourceVersion gone: 410, relist)",
        acknowledged=writer.count,
        lost=len(lost),
        twice=twice,
        recover_s=max(recoveries),
        notes=f"{writer.refused} writes refused while it was down; relists "
        f"after each restart {relists}; recovery (server ready → a new write seen through the "
        f"watch) {', '.join(f'{r:.2f}s' for r in recoveries)}",
    )
    assert not lost, f"the watcher missed the last value of {lost}"
    # the list agrees with what was acknowledged: the last acknowledged write of each node,
    # or one after it that was applied unanswered (the server died before its answer)
    assert all(_number(truth[n]) >= _number(v) for n, v in writer.acked.items())
    assert twice == 0
    assert relists[1] >= 1  # the second outage did go through a relist


def _number(value: str) -> int:
    return int(value[1:]) if value.startswith("w") else -1


def _delivered(watcher: Any, written: tuple[float, str, str]) -> bool:
    """The watcher has the written value, or a later one of that node (it moved on)."""
    _, node, value = written
    have = watcher.nodes[node].labels.get("team", "")
    return _number(have) >= _number(value)


def _reported_twice(events: list[FindingEvent]) -> int:
    """Appearances of a finding that was open already (a relist reporting a known drift)."""
    open_: set[str] = set()
    twice = 0
    for e in events:
        fid = e.finding.id
        if e.type is FindingEventType.APPEARED:
            twice += fid in open_
            open_.add(fid)
        elif e.type is FindingEventType.CLEARED:
            open_.discard(fid)
    return twice
