"""Capacity after scaling, live: one cluster's pending pods linked to the scale-downs before them.

Pods are watched with the field selector ``status.phase=Pending`` (list + watch through
``reflecting.reflect``): the API server sends only pending pods, so a cluster of thousands of
running pods costs what its few pending ones cost (``tests/e2e/test_capacity_live.py`` measures
the bytes). A pod that leaves Pending (it was scheduled and started, or failed) stops matching
and arrives as DELETED: its link, and the finding when it was the last, clear. Scale-downs come
in through ``observe`` (the watcher's ``pool.scaled`` lifecycle events, a provider's SCALE
change events); the decisions are ``core.capacity``'s. A scale-down that arrives after pods
already went pending (a provider's event is minutes late) re-links the pods on hand.

Findings go through a ``FindingTracker`` of their own (scope ``(cluster, None)`` there), not the
node watcher's: its relist re-diffs every scope it knows as a pool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from fleetwarden.app.reflecting import Reflection, reflect
from fleetwarden.core import capacity
from fleetwarden.core.capacity import CapacityState, PodObservation
from fleetwarden.core.events import ChangeEvent
from fleetwarden.core.lifecycle import LifecycleEvent, LifecycleType
from fleetwarden.core.tracking import FindingEvent, FindingTracker
from fleetwarden.ports.kube import KubeApi
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["PENDING", "CapacityWatcher"]

PENDING = "status.phase=Pending"


class CapacityWatcher:
    def __init__(
        self,
        cluster: str,
        client: KubeApi,
        emit: Callable[[FindingEvent], Awaitable[None] | None],
        *,
        tracker: FindingTracker | None = None,
        window: timedelta = capacity.DEFAULT_WINDOW,
        namespace: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        watch_timeout: int = 300,
        on_refused: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.cluster, self.client, self.emit, self.clock = cluster, client, emit, clock
        self.tracker = tracker or FindingTracker()
        self.state = CapacityState(window=window)
        self.path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        self.pods: dict[str, PodObservation] = {}  # the pending pods on hand, by ns/name
        self.reflection = Reflection(self.path)
        self.watch_timeout = watch_timeout
        self.on_refused = on_refused  # RBAC or a missing API: told once per refusal

    async def run(self) -> None:
        await reflect(
            self.client,
            self.path,
            relist=self.relist,
            apply=self.apply,
            state=self.reflection,
            field_selector=PENDING,
            watch_timeout=self.watch_timeout,
            on_refused=self.on_refused,
        )

    async def relist(self) -> str:
        listed = await self.client.list(self.path, field_selector=PENDING)
        fresh = {}
        for obj in listed.items:
            pod = capacity.pod_observation(self.cluster, obj)
            fresh[pod.ref] = pod
        for ref, gone in self.pods.items():
            if ref not in fresh:  # left Pending while the watch was down
                fresh_gone = PodObservation(gone.cluster, gone.namespace, gone.name, False)
                self.state = capacity.observe_pod(self.state, fresh_gone, now=self.clock.now())
        self.pods = fresh
        for pod in fresh.values():
            self.state = capacity.observe_pod(self.state, pod, now=self.clock.now())
        await self._rediff()
        return listed.resource_version

    async def apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        pod = capacity.pod_observation(self.cluster, obj, deleted=kind == "DELETED")
        if pod.deleted:
            self.pods.pop(pod.ref, None)
        else:
            self.pods[pod.ref] = pod
        self.state = capacity.observe_pod(self.state, pod, now=self.clock.now())
        await self._rediff()

    async def observe(self, event: LifecycleEvent | ChangeEvent) -> None:
        """A lifecycle or change event: a scale-down of a pool of this cluster is remembered
        and the pending pods on hand are linked to it where it explains them."""
        if isinstance(event, LifecycleEvent):
            if event.type is not LifecycleType.SCALED or event.cluster != self.cluster:
                return
            scale = capacity.scale_down_from_lifecycle(event.cluster, event.details, event.at)
        else:
            if event.cluster != self.cluster:
                return
            scale = capacity.scale_down_from_change(event)
        if scale is None:
            return
        now = self.clock.now()
        self.state = capacity.observe_scale(self.state, scale, now=now)
        for pod in self.pods.values():
            self.state = capacity.observe_pod(self.state, pod, now=now)
        await self._rediff()

    def findings(self) -> list[Any]:
        return self.tracker.findings_of((self.cluster, None))

    async def _rediff(self) -> None:
        found = capacity.capacity_findings(self.state, self.cluster)
        for event in self.tracker.update((self.cluster, None), found, now=self.clock.now()):
            result = self.emit(event)
            if result is not None:
                await result
