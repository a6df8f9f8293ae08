"""Argo CD's objects live, and the applications a removed cluster leaves orphaned.

``ArgoWatcher`` lists and watches Applications, ApplicationSets and AppProjects on the API
server of the Argo CD cluster (``app.reflecting.reflect``: bookmarks, 410 -> relist, back-off),
parses them with ``formats.argocd_apps`` into an ``ArgoInventory`` and calls ``on_change``
after every change. An object that does not parse is left out and reported once through
``on_invalid`` (with the ``FormatError``), never guessed at; a refused resource (RBAC, the CRD
not installed) through ``on_refused``.

``OrphanMonitor`` sits between a ``FleetWatcher`` and whoever consumes its events: it passes
every event on, remembers each cluster's server from ``cluster.added``, and gives
``cluster.removed`` its ``orphanedApps``, ``appSets`` and ``projects`` (``core.orphans``), then
emits a ``LIFECYCLE`` finding per orphaned application; ``inventory_changed`` (the watcher's
``on_change``) clears them as applications are deleted or re-targeted; they clear too when the
cluster comes back (``cluster.added``, or for a cluster declared gone by its probes, a
``cluster.health`` event to Healthy or Degraded). It waits a bounded time
for the inventory's first list before computing (``inventorySynced: false`` when it had to
give up). It does not delete or re-target anything: that is the user's call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from fleetwarden.app.reflecting import Reflection, reflect
from fleetwarden.core.applications import Application, ApplicationSet, AppProject, ClusterRef
from fleetwarden.core.lifecycle import ClusterHealth, LifecycleEvent, LifecycleType
from fleetwarden.core.orphans import OrphanBook
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.formats.argocd_apps import (
    GROUP,
    app_project_from_object,
    application_from_object,
    application_set_from_object,
)
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.kube import KubeApi
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = [
    "ArgoInventory",
    "ArgoWatcher",
    "OrphanMonitor",
    "argo_path",
    "chain_change",
    "orphan_tracking",
]

T = TypeVar("T")
Emit = Callable[[FindingEvent | LifecycleEvent], Awaitable[None] | None]


_ANSWERING = {ClusterHealth.HEALTHY.value, ClusterHealth.DEGRADED.value}


def argo_path(plural: str, namespace: str | None) -> str:
    """The collection of one Argo CD kind, in one namespace or (None) in all."""
    if namespace:
        return f"/apis/{GROUP}/v1alpha1/namespaces/{namespace}/{plural}"
    return f"/apis/{GROUP}/v1alpha1/{plural}"


@dataclass
class _Kind(Generic[T]):
    plural: str
    parse: Callable[[Mapping[str, Any]], T]
    items: dict[tuple[str, str], T] = field(default_factory=dict)
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    refused: str | None = None  # the last refusal, until the kind lists again


def _key(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return None
    return (str(meta.get("namespace") or ""), meta["name"])


class ArgoInventory:
    """The parsed objects, by (namespace, name); read-only for everyone but the watcher."""

    def __init__(self) -> None:
        self.apps: _Kind[Application] = _Kind("applications", application_from_object)
        self.app_sets: _Kind[ApplicationSet] = _Kind("applicationsets", application_set_from_object)
        self.projects: _Kind[AppProject] = _Kind("appprojects", app_project_from_object)

    @property
    def kinds(self) -> tuple[_Kind[Any], ...]:
        return (self.apps, self.app_sets, self.projects)

    @property
    def synced(self) -> bool:
        return all(k.synced.is_set() for k in self.kinds)

    async def wait_synced(self, timeout: float) -> bool:
        """Wait for every kind's first list; at once False while one is refused (RBAC, no
        CRD: no list is coming soon, and a removal must not stall on it)."""
        try:
            async with asyncio.timeout(timeout):
                for kind in self.kinds:
                    if not kind.synced.is_set() and kind.refused is not None:
                        return False
                    await kind.synced.wait()
        except TimeoutError:
            return False
        return True


class ArgoWatcher:
    """The three Argo CD kinds of one Argo CD cluster (``namespace`` None: all namespaces, for
    apps-in-any-namespace)."""

    def __init__(
        self,
        client: KubeApi,
        *,
        namespace: str | None = "argocd",
        inventory: ArgoInventory | None = None,
        on_change: Callable[[], Awaitable[None]] | None = None,
        on_invalid: Callable[[FormatError], Awaitable[None]] | None = None,
        on_refused: Callable[[str, str], Awaitable[None]] | None = None,
        watch_timeout: int = 300,
    ) -> None:
        self.client, self.namespace = client, namespace
        self.inventory = inventory or ArgoInventory()
        self.on_change, self.on_invalid, self.on_refused = on_change, on_invalid, on_refused
        self.watch_timeout = watch_timeout
        self.reflections = {
            k.plural: Reflection(argo_path(k.plural, namespace)) for k in self.inventory.kinds
        }
        self._invalid: set[str] = set()  # messages already reported

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for kind in self.inventory.kinds:
                tg.create_task(self._reflect(kind), name=f"argocd:{kind.plural}")

    async def _reflect(self, kind: _Kind[Any]) -> None:
        path = argo_path(kind.plural, self.namespace)

        async def relist() -> str:
            listed = await self.client.list(path)
            kind.refused = None
            kind.items.clear()
            for obj in listed.items:
                await self._store(kind, obj)
            kind.synced.set()
            await self._changed()
            return listed.resource_version

        async def apply(event: str, obj: Mapping[str, Any]) -> None:
            key = _key(obj)
            if key is None:
                return
            if event == "DELETED":
                kind.items.pop(key, None)
            else:
                await self._store(kind, obj)
            await self._changed()

        async def refused(reason: str) -> None:
            kind.refused = reason
            if self.on_refused is not None:
                await self.on_refused(kind.plural, reason)

        await reflect(
            self.client,
            path,
            relist=relist,
            apply=apply,
            state=self.reflections[kind.plural],
            watch_timeout=self.watch_timeout,
            on_refused=refused,
        )

    async def _store(self, kind: _Kind[Any], obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        if key is None:
            return
        try:
            kind.items[key] = kind.parse(obj)
        except FormatError as exc:
            kind.items.pop(key, None)  # its last good reading is no longer what the server has
            if self.on_invalid is not None and str(exc) not in self._invalid:
                self._invalid.add(str(exc))
                await self.on_invalid(exc)

    async def _changed(self) -> None:
        if self.on_change is not None:
            await self.on_change()


async def _emit(emit: Emit, event: FindingEvent | LifecycleEvent) -> None:
    result = emit(event)
    if result is not None:
        await result


class OrphanMonitor:
    """Wraps a FleetWatcher's ``emit`` (see the module docstring)."""

    def __init__(
        self,
        inventory: ArgoInventory,
        emit: Emit,
        *,
        book: OrphanBook | None = None,
        clock: Clock = SYSTEM_CLOCK,
        sync_timeout: float = 10.0,
    ) -> None:
        self.inventory, self._emit, self.clock = inventory, emit, clock
        self.book = book or OrphanBook()
        self.sync_timeout = sync_timeout
        self.known: dict[str, ClusterRef] = {}
        self._declared_gone: set[str] = set()

    def remember(self, cluster: ClusterRef) -> None:
        """A cluster with its Secret's labels (``cluster.added`` carries only its server)."""
        self.known[cluster.name] = cluster

    async def observe(self, event: FindingEvent | LifecycleEvent) -> None:
        if not isinstance(event, LifecycleEvent):
            await _emit(self._emit, event)
            return
        if event.type is LifecycleType.ADDED:
            server = event.details.get("server")
            old = self.known.get(event.cluster)
            if isinstance(server, str) and (old is None or old.server != server.rstrip("/")):
                self.known[event.cluster] = ClusterRef(event.cluster, server)
            await _emit(self._emit, event)
            for finding_event in self.book.restored(event.cluster, now=event.at):
                await _emit(self._emit, finding_event)
            return
        if event.type is LifecycleType.HEALTH and event.cluster in self._declared_gone:
            await _emit(self._emit, event)
            if event.details.get("to") in _ANSWERING:  # declared gone by probes, and back
                self._declared_gone.discard(event.cluster)
                for finding_event in self.book.restored(event.cluster, now=event.at):
                    await _emit(self._emit, finding_event)
            return
        if event.type is not LifecycleType.REMOVED or event.cluster in self.book.removed:
            await _emit(self._emit, event)
            return
        if event.details.get("declaredGone"):
            self._declared_gone.add(event.cluster)
        cluster = self.known.get(event.cluster)
        if cluster is None:  # never announced: its name is all there is to match
            cluster = ClusterRef(event.cluster, str(event.details.get("server") or ""))
        synced = await self.inventory.wait_synced(self.sync_timeout)
        orphans, opened = self.book.remove(
            cluster,
            self.inventory.apps.items.values(),
            self.inventory.app_sets.items.values(),
            self.inventory.projects.items.values(),
            now=event.at,
        )
        details = {**event.details, **orphans.to_json()}
        if not synced:
            details["inventorySynced"] = False
        await _emit(self._emit, LifecycleEvent(event.type, event.cluster, event.at, details))
        for finding_event in opened:
            await _emit(self._emit, finding_event)

    async def inventory_changed(self) -> None:
        """The watcher's ``on_change``: orphan findings open and clear with the apps."""
        if not self.book.removed:
            return
        for event in self.book.update(self.inventory.apps.items.values(), now=self.clock.now()):
            await _emit(self._emit, event)


def orphan_tracking(
    client: KubeApi,
    emit: Emit,
    *,
    namespace: str | None = "argocd",
    clock: Clock = SYSTEM_CLOCK,
    sync_timeout: float = 10.0,
    book: OrphanBook | None = None,
) -> tuple[OrphanMonitor, ArgoWatcher]:
    """The two pieces wired together: give ``monitor.observe`` to the ``FleetWatcher`` as its
    emit, run ``watcher.run()`` beside it. A refused Argo CD kind (no CRD, RBAC) becomes one
    ``cluster.watch_refused`` event for the Argo CD cluster, as a refused node watch does.
    ``book``: e.g. one on the fleet's own tracker, so orphan findings are listed with the rest."""
    inventory = ArgoInventory()
    monitor = OrphanMonitor(inventory, emit, book=book, clock=clock, sync_timeout=sync_timeout)

    async def refused(plural: str, reason: str) -> None:
        details = {"resource": f"{GROUP}/{plural}", "reason": reason}
        await _emit(
            emit, LifecycleEvent(LifecycleType.WATCH_REFUSED, client.cluster, clock.now(), details)
        )

    watcher = ArgoWatcher(
        client,
        namespace=namespace,
        inventory=inventory,
        on_change=monitor.inventory_changed,
        on_refused=refused,
    )
    return monitor, watcher


def chain_change(
    first: Callable[[], Awaitable[None]] | None,
    inventory: ArgoInventory,
    then: Callable[[ArgoInventory], Awaitable[None]],
) -> Callable[[], Awaitable[None]]:
    """``first`` (the watcher's own reaction to a change), then ``then`` with the inventory."""

    async def changed() -> None:
        if first is not None:
            await first()
        await then(inventory)

    return changed
