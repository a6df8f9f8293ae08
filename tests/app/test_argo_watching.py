"""ArgoWatcher and OrphanMonitor with an in-memory API server: the paths a real one cannot take
(an object the CRD schema accepts is always readable), and the probe-failure removal."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from fleetwarden.app.argo_watching import (
    ArgoInventory,
    ArgoWatcher,
    OrphanMonitor,
    argo_path,
    orphan_tracking,
)
from fleetwarden.core.lifecycle import HealthTracker, LifecycleEvent, LifecycleType, ProbeResult
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.formats.argocd_apps import application_from_object
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.kube import Gone, ListResult, NotFound, WatchEvent
from fleetwarden.ports.sources import FixedClock

NOW = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
NS = "argocd"


def app(app_name: str, **destination: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": app_name, "namespace": NS, "resourceVersion": "1"},
        "spec": {"project": "default", "destination": destination},
    }


class FakeArgoApi:
    """``KubeApi`` for the three Argo CD collections of one namespace."""

    cluster = "mgmt"

    def __init__(self, apps: list[dict[str, Any]]) -> None:
        self.items = {argo_path(p, NS): [] for p in ("applicationsets", "appprojects")}
        self.items[argo_path("applications", NS)] = apps
        self.queues: dict[str, asyncio.Queue[WatchEvent | Exception]] = {
            p: asyncio.Queue() for p in self.items
        }

    async def list(self, path: str, *, label_selector: str | None = None, limit: int = 500):
        return ListResult(list(self.items[path]), "1")

    async def watch(
        self, path: str, *, resource_version: str, label_selector=None, timeout_seconds=300
    ) -> AsyncIterator[WatchEvent]:
        while True:
            item = await self.queues[path].get()
            if isinstance(item, Exception):
                raise item
            yield item

    async def get(self, path: str, **params: Any) -> Any:
        raise NotImplementedError

    async def patch(self, path: str, body: Any, *, content_type: str = "") -> Any:
        raise NotImplementedError

    async def readyz(self, *, timeout: float = 5.0) -> tuple[bool, str]:
        return True, "ok"

    async def version(self, *, timeout: float = 5.0) -> str:
        return "v1.36.0"

    async def aclose(self) -> None:
        return None


async def until(cond, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.01)


async def test_an_unreadable_application_is_left_out_and_reported_once():
    bad = app("bad", server=443)  # a CRD without a schema would let this through
    api = FakeArgoApi([app("good", name="eu"), bad])
    invalid: list[FormatError] = []

    async def on_invalid(exc: FormatError) -> None:
        invalid.append(exc)

    watcher = ArgoWatcher(api, namespace=NS, on_invalid=on_invalid)
    task = asyncio.create_task(watcher.run())
    try:
        await until(lambda: watcher.inventory.synced)
        assert set(watcher.inventory.apps.items) == {(NS, "good")}
        path = argo_path("applications", NS)
        api.queues[path].put_nowait(WatchEvent("MODIFIED", bad))  # the same refusal again
        fixed = app("bad", server="https://eu.example")
        api.queues[path].put_nowait(WatchEvent("MODIFIED", fixed))
        await until(lambda: (NS, "bad") in watcher.inventory.apps.items)
        assert [e.field for e in invalid] == ["spec.destination.server"]
        # a good app turned bad no longer counts with its old reading
        api.queues[path].put_nowait(WatchEvent("MODIFIED", app("good", server=[])))
        await until(lambda: (NS, "good") not in watcher.inventory.apps.items)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_cluster_declared_gone_by_its_probes_gets_its_orphans_once_and_back_clears():
    inventory = ArgoInventory()
    for kind in inventory.kinds:
        kind.synced.set()
    for obj in (app("a", server="https://eu.example/"), app("b", name="us")):
        parsed = application_from_object(obj)
        inventory.apps.items[parsed.key] = parsed
    out: list[FindingEvent | LifecycleEvent] = []
    monitor = OrphanMonitor(inventory, out.append, clock=FixedClock(NOW))
    added = LifecycleEvent(LifecycleType.ADDED, "eu", NOW, {"server": "https://eu.example"})
    await monitor.observe(added)

    health = HealthTracker("eu", gone_after=5)
    for _ in range(6):
        for event in health.observe(ProbeResult(ready=None, error="refused"), now=NOW):
            await monitor.observe(event)
    removed = [e for e in out if isinstance(e, LifecycleEvent) and e.type is LifecycleType.REMOVED]
    assert len(removed) == 1
    body = removed[0].to_json()
    assert body["declaredGone"] is True
    assert body["orphanedAppDetails"] == [{"name": "a", "namespace": NS, "project": "default"}]
    opened = [e for e in out if isinstance(e, FindingEvent)]
    assert [e.type for e in opened] == [FindingEventType.APPEARED]

    # a second removal of a cluster already removed passes through untouched
    again = LifecycleEvent(LifecycleType.REMOVED, "eu", NOW, {"reason": "secret deleted"})
    await monitor.observe(again)
    assert out[-1] is again

    out.clear()
    for event in health.observe(ProbeResult(ready=True), now=NOW):  # it answers again
        await monitor.observe(event)
    assert [type(e).__name__ for e in out] == ["LifecycleEvent", "FindingEvent"]
    assert out[0].type is LifecycleType.HEALTH  # type: ignore[union-attr]
    assert out[1].type is FindingEventType.CLEARED  # type: ignore[union-attr]
    assert monitor.book.tracker.current() == []


async def test_a_removed_cluster_re_added_clears_its_orphans():
    inventory = ArgoInventory()
    for kind in inventory.kinds:
        kind.synced.set()
    parsed = application_from_object(app("a", name="eu"))
    inventory.apps.items[parsed.key] = parsed
    out: list[FindingEvent | LifecycleEvent] = []
    monitor = OrphanMonitor(inventory, out.append, clock=FixedClock(NOW))
    added = LifecycleEvent(LifecycleType.ADDED, "eu", NOW, {"server": "https://eu.example"})
    await monitor.observe(added)
    await monitor.observe(LifecycleEvent(LifecycleType.REMOVED, "eu", NOW, {"reason": "deleted"}))
    assert len(monitor.book.tracker.current()) == 1
    # a health event of a cluster removed by its Secret does not bring it back
    back = LifecycleEvent(LifecycleType.HEALTH, "eu", NOW, {"to": "Healthy"})
    await monitor.observe(back)
    assert len(monitor.book.tracker.current()) == 1
    await monitor.observe(added)  # the Secret is re-created
    assert monitor.book.tracker.current() == []
    assert isinstance(out[-1], FindingEvent) and out[-1].type is FindingEventType.CLEARED


async def test_a_removal_before_the_first_list_says_the_inventory_was_not_synced():
    out: list[Any] = []
    monitor = OrphanMonitor(ArgoInventory(), out.append, clock=FixedClock(NOW), sync_timeout=0.05)
    await monitor.observe(LifecycleEvent(LifecycleType.REMOVED, "eu", NOW, {"reason": "x"}))
    assert out[0].details["inventorySynced"] is False
    assert out[0].details["orphanedApps"] == []


async def test_an_app_deleted_during_a_watch_gap_is_seen_by_the_relist_after_410():
    """The watch resumes with 410 Gone (the version was compacted): the relist replaces the
    cache, so the deleted app's orphan finding clears though no DELETED event ever came."""
    api = FakeArgoApi([app("a", server="https://eu.example"), app("b", name="eu")])
    out: list[FindingEvent | LifecycleEvent] = []
    watcher = ArgoWatcher(api, namespace=NS)
    monitor = OrphanMonitor(watcher.inventory, out.append, clock=FixedClock(NOW))
    watcher.on_change = monitor.inventory_changed
    task = asyncio.create_task(watcher.run())
    try:
        await until(lambda: watcher.inventory.synced)
        await monitor.observe(
            LifecycleEvent(LifecycleType.ADDED, "eu", NOW, {"server": "https://eu.example"})
        )
        await monitor.observe(LifecycleEvent(LifecycleType.REMOVED, "eu", NOW, {}))
        assert len(monitor.book.tracker.current()) == 2
        path = argo_path("applications", NS)
        api.items[path] = [app("b", name="eu")]  # "a" deleted while nobody watched
        api.queues[path].put_nowait(Gone("mgmt", "too old", status=410))
        await until(lambda: len(monitor.book.tracker.current()) == 1)
        cleared = [
            e for e in out if isinstance(e, FindingEvent) and e.type.value.endswith("cleared")
        ]
        assert [e.finding.extra["application"]["name"] for e in cleared] == ["a"]
        assert watcher.reflections["applications"].relists == 2
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_orphan_tracking_wires_the_monitor_to_the_watcher_and_reports_refusals():
    class NoCrds(FakeArgoApi):
        async def list(self, path: str, *, label_selector: str | None = None, limit: int = 500):
            if path.endswith("/appprojects"):
                raise NotFound("mgmt", f"GET {path}: HTTP 404: the server could not find it")
            return await super().list(path)

    out: list[FindingEvent | LifecycleEvent] = []
    api = NoCrds([app("a", name="eu")])
    monitor, watcher = orphan_tracking(api, out.append, namespace=NS, clock=FixedClock(NOW))
    task = asyncio.create_task(watcher.run())
    try:
        await until(lambda: any(isinstance(e, LifecycleEvent) for e in out))
        (refusal,) = out
        assert refusal.to_json()["type"] == "cluster.watch_refused"
        assert refusal.to_json()["resource"] == "argoproj.io/appprojects"
        await until(lambda: (NS, "a") in watcher.inventory.apps.items)
        await monitor.observe(LifecycleEvent(LifecycleType.REMOVED, "eu", NOW, {}))
        removed = out[-2]
        assert isinstance(removed, LifecycleEvent) and removed.details["inventorySynced"] is False
        assert removed.details["orphanedAppDetails"] == [
            {"name": "a", "namespace": NS, "project": "default"}
        ]
        assert isinstance(out[-1], FindingEvent)
        path = argo_path("applications", NS)
        api.queues[path].put_nowait(WatchEvent("DELETED", app("a", name="eu")))
        await until(lambda: monitor.book.tracker.current() == [])
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
