"""Watching one cluster's workloads: a warm observed index and live workload drift.

Per cluster, one reflector (list, then watch with resume, bookmarks and relist on 410) per
kind -- Deployments, StatefulSets, DaemonSets, ConfigMaps, Secrets, HorizontalPodAutoscalers --
cluster-wide or in the configured namespaces, into one ``ObjectIndex``. Objects are redacted
as they arrive (``core.workloads.redact``: Secret values become digests at once, status and
volatile metadata go), so the cache never holds Secret content and a status-only update is
recognised as "no change" and costs no diff.

A change that does change an object re-diffs, in that cluster, only the followed applications
it can concern (``DesiredApps.concerned``; any HPA change: every application, since an HPA may
take over any workload's replicas) and emits the findings that appear, change or clear through
the shared ``FindingTracker`` under the scope ``(cluster, "app:NAME")``. Each finding says who
wrote the object last (``changedBy``: the field manager of its latest ``managedFields`` entry,
e.g. ``kubectl-set``). A new desired state (``set_desired``, e.g. after an Argo CD refresh)
re-diffs every application once.

Refusals (RBAC without ``list secrets``, an API the cluster does not serve) are reported once
per kind as ``cluster.watch_refused``; the other kinds go on.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwarden.app.reflecting import Reflection, reflect
from fleetwarden.core import workloads as wl
from fleetwarden.core.desired_apps import DesiredApps, Writer, last_writer
from fleetwarden.core.findings import Finding
from fleetwarden.core.lifecycle import LifecycleEvent, LifecycleType
from fleetwarden.core.subjects import WorkloadRef
from fleetwarden.core.tracking import FindingEvent, FindingTracker, app_scope
from fleetwarden.ports.kube import RESOURCES, KubeApi, Resource
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["ObjectHook", "WorkloadWatchSettings", "WorkloadWatcher"]

Event = FindingEvent | LifecycleEvent
Emit = Callable[[Event], Awaitable[None] | None]
# (cluster, raw object, ADDED | MODIFIED | DELETED): a watched object changed (not its status)
ObjectHook = Callable[[str, Mapping[str, Any], str], Awaitable[None]]


@dataclass(frozen=True)
class WorkloadWatchSettings:
    """``workloads:`` of the service config (and of ``watch --config``)."""

    namespaces: tuple[str, ...] = ()  # empty: every namespace (cluster-wide list and watch)
    secrets: bool = True  # False: Secrets are not watched (no RBAC for them)
    max_objects: int = 200_000  # per cluster; beyond, objects are refused and that is said
    watch_timeout: int = 300
    options: wl.WorkloadOptions = field(default_factory=wl.WorkloadOptions)
    app_label: str | None = None

    def resources(self) -> tuple[Resource, ...]:
        return tuple(r for r in RESOURCES if self.secrets or r.kind != "Secret")


async def _emit(emit: Emit, event: Event) -> None:
    result = emit(event)
    if result is not None:
        await result


class WorkloadWatcher:
    """One cluster's workloads: a warm ``ObjectIndex`` and the followed apps' drift."""

    def __init__(
        self,
        cluster: str,
        client: KubeApi,
        desired: DesiredApps,
        tracker: FindingTracker,
        emit: Emit,
        *,
        settings: WorkloadWatchSettings = WorkloadWatchSettings(),
        clock: Clock = SYSTEM_CLOCK,
        on_object: ObjectHook | None = None,
    ) -> None:
        self.cluster, self.client, self.desired = cluster, client, desired
        self.on_object = on_object
        self.tracker, self.emit, self.settings, self.clock = tracker, emit, settings, clock
        self.index = wl.ObjectIndex(app_label=settings.app_label)
        self.writers: dict[str, Writer] = {}  # object ref -> its last writer
        self.reflections: dict[str, Reflection] = {}
        self.synced = asyncio.Event()
        self.refused = 0  # objects the full cache turned away
        self.refused_paths: set[str] = set()
        self.unseen: set[str] = set()  # kinds refused to us: never reported missing
        self.diffs = 0
        self._settled: set[str] = set()
        self._full_reported = False

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for resource in self.settings.resources():
                for namespace in self.settings.namespaces or (None,):
                    path = resource.path(namespace)
                    self.reflections[path] = Reflection(path)
                    tg.create_task(self._reflect(resource, path), name=f"{path}:{self.cluster}")

    def _reflect(self, resource: Resource, path: str) -> Coroutine[Any, Any, None]:
        async def relist() -> str:
            return await self.relist(resource, path)

        async def apply(kind: str, obj: Mapping[str, Any]) -> None:
            await self.apply(resource, kind, obj)

        async def refused(reason: str) -> None:
            self.refused_paths.add(path)
            if resource.kind not in self.unseen:
                self.unseen.add(resource.kind)
                if self.synced.is_set():
                    await self.rediff(self.desired.apps)
            await _emit(
                self.emit,
                LifecycleEvent(
                    LifecycleType.WATCH_REFUSED,
                    self.cluster,
                    self.clock.now(),
                    {"resource": resource.plural, "path": path, "reason": reason},
                ),
            )
            await self._settle(path)  # the other kinds are diffed without this one

        return reflect(
            self.client,
            path,
            relist=relist,
            apply=apply,
            state=self.reflections[path],
            watch_timeout=self.settings.watch_timeout,
            on_refused=refused,
        )

    # --- the cache -----------------------------------------------------------------------

    async def relist(self, resource: Resource, path: str) -> str:
        """Replace this kind's objects (of this path) with a fresh list; re-diff the apps that
        changed, or every app on the first full sync."""
        listed = await self.client.list(path)
        touched: set[str] = set()
        if path in self.refused_paths:  # it answers again
            self.refused_paths.discard(path)
            if not any(p.endswith(f"/{resource.plural}") for p in self.refused_paths):
                self.unseen.discard(resource.kind)
                touched = set(self.desired.apps)
        namespace = path.split("/namespaces/")[1].split("/")[0] if "/namespaces/" in path else None
        stale = {
            k
            for k in self.index.objects
            if k.kind == resource.kind and (namespace is None or k.namespace == namespace)
        }
        for item in listed.items:
            key = await self._store(resource, item, touched)
            if key is not None:
                stale.discard(key)
        for key in stale:
            touched |= self._drop(key)
        if self.synced.is_set():
            await self.rediff(touched)
        else:
            await self._settle(path)
        return listed.resource_version

    async def _settle(self, path: str) -> None:
        """A path listed (or refused): once every path has, the first full diff runs."""
        self._settled.add(path)
        if not self.synced.is_set() and self._settled >= set(self.reflections):
            self.synced.set()
            await self.rediff(self.desired.apps)

    async def apply(self, resource: Resource, kind: str, obj: Mapping[str, Any]) -> None:
        touched: set[str] = set()
        typed = _typed(resource, obj)
        key = wl.key_of(typed)
        old = self.index.objects.get(key) if key is not None else None
        if kind == "DELETED":
            if key is not None:
                touched = self._drop(key)
        else:
            await self._store(resource, obj, touched)
        if self.synced.is_set() and touched:
            await self.rediff(touched)
        changed = kind == "DELETED" or key is None or self.index.objects.get(key) is not old
        if self.on_object is not None and changed:  # a status-only update changes nothing
            await self.on_object(self.cluster, typed, kind)

    async def _store(
        self, resource: Resource, raw: Mapping[str, Any], touched: set[str]
    ) -> wl.ObjectKey | None:
        obj = wl.ObjectIndex.wrap(
            _typed(resource, raw), source=f"{self.cluster}:live", app_label=self.settings.app_label
        )
        if obj is None:
            return None
        old = self.index.objects.get(obj.key)
        if old is not None and _same(old.body, obj.body):
            return obj.key  # a status-only update: nothing a diff reads changed
        if old is None and len(self.index) >= self.settings.max_objects:
            self.refused += 1
            await self._report_full()
            return None
        writer = last_writer(raw)
        if writer is not None:
            self.writers[obj.key.ref] = writer
        self.index.put(obj)
        touched |= self._concerned(obj.key, old.app if old else None, obj.app)
        return obj.key

    def _drop(self, key: wl.ObjectKey) -> set[str]:
        old = self.index.objects.get(key)
        if old is None:
            return set()
        self.index.discard(key)
        self.writers.pop(key.ref, None)
        return self._concerned(key, old.app)

    def _concerned(self, key: wl.ObjectKey, *apps: str | None) -> set[str]:
        if key.kind == wl.AUTOSCALER_KIND:
            return set(self.desired.apps)  # an HPA may own the replicas of any workload
        return self.desired.concerned(key, *apps)

    async def _report_full(self) -> None:
        if self._full_reported:
            return
        self._full_reported = True
        event = LifecycleEvent(
            LifecycleType.CACHE_FULL,
            self.cluster,
            self.clock.now(),
            {
                "maxObjects": self.settings.max_objects,
                "reason": "workload cache full: further objects of this cluster are not watched",
            },
        )
        await _emit(self.emit, event)

    # --- diffs ---------------------------------------------------------------------------

    async def set_desired(self, desired: DesiredApps) -> None:
        """A new desired state: re-diff every app (and clear the findings of apps no longer
        followed)."""
        gone = set(self.desired.apps) - set(desired.apps)
        self.desired = desired
        if not self.synced.is_set():
            return
        for app in sorted(gone):
            for event in self.tracker.update(
                (self.cluster, app_scope(app)), [], now=self.clock.now()
            ):
                await _emit(self.emit, event)
        await self.rediff(desired.apps)

    def findings_of(self, app: str) -> list[Finding]:
        """The drift of ``app`` in this cluster now, each finding with its object's writer."""
        self.index.set_aliases(app, self.desired.apps[app].aliases.get(self.cluster, ()))
        result = wl.diff_app(
            self.cluster,
            app,
            self.desired.index(app, self.cluster),
            self.index,
            options=self.settings.options,
        )
        self.diffs += 1
        out = []
        for f in result.findings:
            subject = f.subject
            if isinstance(subject, WorkloadRef) and subject.kind in self.unseen:
                continue  # a kind we may not read: neither missing nor drifting
            writer = self.writers.get(f.pool or "")
            if writer is not None:
                f = dataclasses.replace(f, extra={**f.extra, "changedBy": writer.to_json()})
            out.append(f)
        return out

    async def rediff(self, apps: Sequence[str] | set[str] | Mapping[str, Any]) -> None:
        for app in sorted(apps):
            if app not in self.desired.apps:
                continue
            findings = self.findings_of(app)
            scope = (self.cluster, app_scope(app))
            for event in self.tracker.update(scope, findings, now=self.clock.now()):
                await _emit(self.emit, event)


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal but for the managedFields entries of a status write (redaction keeps the
    entries a ``managedFieldsManagers`` rule may need; those of ``/status`` never matter)."""
    if a == b:
        return True
    return {**a, "metadata": _spec_meta(a)} == {**b, "metadata": _spec_meta(b)}


def _spec_meta(body: Mapping[str, Any]) -> dict[str, Any]:
    meta = dict(body.get("metadata") or {})
    managed = meta.get("managedFields")
    if isinstance(managed, list):
        meta["managedFields"] = [
            e for e in managed if not (isinstance(e, Mapping) and e.get("subresource") == "status")
        ]
    return meta


def _typed(resource: Resource, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """List items carry no kind or apiVersion; watch events do. Give them both."""
    if obj.get("kind") == resource.kind and obj.get("apiVersion"):
        return obj
    return {**obj, "kind": resource.kind, "apiVersion": resource.api_version}
