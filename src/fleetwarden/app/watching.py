"""Watching live clusters: nodes, workloads, health and membership, many clusters at once.

Per cluster: list + watch Nodes (resourceVersion resume, bookmarks, relist on 410 Gone,
jittered back-off on errors) into a bounded cache; every change re-diffs only the affected pool
and emits the findings that appear, change or clear. With followed applications
(``desired_apps``), a ``WorkloadWatcher`` per cluster does the same for their workloads. A
prober turns ``/readyz`` and ``/version`` into health and upgrade events. ``FleetWatcher``
adds, reconnects and removes clusters as kubeconfig contexts and Argo CD cluster Secrets say.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetwarden.app.argo_watching import (
    ArgoInventory,
    ArgoWatcher,
    OrphanMonitor,
    chain_change,
    orphan_tracking,
)
from fleetwarden.app.audit_joining import join_audit
from fleetwarden.app.capacity_watching import CapacityWatcher
from fleetwarden.app.churning import ChurnWatch, snapshot_of
from fleetwarden.app.cluster_secrets import ClusterSecrets
from fleetwarden.app.rediffing import diff_and_track
from fleetwarden.app.reflecting import Reflection, reflect
from fleetwarden.app.stamping import ManagedFields, stamp_events, writable_fields
from fleetwarden.app.workload_watching import ObjectHook, WorkloadWatcher, WorkloadWatchSettings
from fleetwarden.core.churn import ChurnDecision
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.core.desired_apps import DesiredApps
from fleetwarden.core.diffing import PoolIndex
from fleetwarden.core.fights import (
    FightDecision,
    FightState,
    blocking,
    expire,
    fight_finding,
    node_writes,
    observe,
)
from fleetwarden.core.findings import Finding
from fleetwarden.core.fleet import assign_pools, not_found, unobserved
from fleetwarden.core.lifecycle import (
    HealthTracker,
    LifecycleEvent,
    LifecycleType,
    ProbeResult,
)
from fleetwarden.core.nodes import POOL_LABELS, ObservedNode, pool_of
from fleetwarden.core.orphans import ORPHANS_SCOPE, OrphanBook
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.skips import Skip
from fleetwarden.core.subjects import AppRef
from fleetwarden.core.tracking import FindingEvent, FindingTracker
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.nodes import node_from_object
from fleetwarden.ports.audit_logs import AuditLogSource
from fleetwarden.ports.kube import ClientFactory, KubeApi, KubeError
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["ClusterWatcher", "Event", "FleetWatcher", "WatchSettings"]

Event = FindingEvent | LifecycleEvent
Emit = Callable[[Event], Awaitable[None] | None]
NODES = "/api/v1/nodes"
FIGHTS = "fights:"  # the tracker scope of a cluster's FIGHT findings: (cluster, FIGHTS)


@dataclass(frozen=True)
class WatchSettings:
    probe_interval: float = 10.0
    probe_timeout: float = 5.0
    failure_threshold: int = 3
    # failed probes in a row that declare the cluster gone: a cluster.removed with declaredGone
    # (its orphaned Argo CD applications named); it is still probed, and back when it answers
    gone_after: int | None = 5
    max_nodes: int = 50_000  # per cluster; beyond this the cache refuses nodes and says so
    watch_timeout: int = 300
    options: DiffOptions = field(default_factory=DiffOptions)
    # watch Pending pods (a field-selected list + watch per cluster) and link the unschedulable
    # ones to the scale-downs before them: CAPACITY findings (app.capacity_watching)
    capacity: bool = False
    # per cluster: its API server's audit log, joined with managedFields actors (app.audit_joining)
    audit_logs: Mapping[str, AuditLogSource] = field(default_factory=dict)


async def _emit(emit: Emit, event: Event) -> None:
    result = emit(event)
    if result is not None:
        await result


class ClusterWatcher:
    """One cluster: node cache, targeted re-diffs, health probes."""

    def __init__(
        self,
        endpoint: ClusterEndpoint,
        client: KubeApi,
        specs: Sequence[NodePoolSpec],
        tracker: FindingTracker,
        emit: Emit,
        *,
        settings: WatchSettings = WatchSettings(),
        clock: Clock = SYSTEM_CLOCK,
        on_upgrade: Callable[[str, str], Awaitable[None]] | None = None,
        workloads: WorkloadWatcher | None = None,
    ) -> None:
        self.endpoint, self.client, self.cluster = endpoint, client, endpoint.name
        self.workloads = workloads
        # as a scan assigns them: a name defined twice here is compared in no definition (not
        # the last one read), and its nodes are no strays (PoolIndex.held_for)
        assigned = assign_pools(specs, [self.cluster])
        self.index: PoolIndex = assigned.index(self.cluster)
        self.skips: list[Skip] = assigned.skips  # the pools not compared: pool.not_compared
        self.tracker, self.emit, self.settings, self.clock = tracker, emit, settings, clock
        self.on_upgrade = on_upgrade
        self.nodes: dict[str, ObservedNode] = {}
        # each cached node's managedFields: the "before" of its next update names the writer
        self.managed: dict[str, ManagedFields] = {}
        self.groups: dict[str | None, set[str]] = {}
        self.health = HealthTracker(
            self.cluster,
            failure_threshold=settings.failure_threshold,
            gone_after=settings.gone_after,
        )
        self.reflection = Reflection(NODES)
        self.synced = asyncio.Event()
        self._pool_labels = settings.options.pool_labels or POOL_LABELS
        self.fights = FightState()  # writers alternating on one node field (core.fights)
        self.churn = ChurnWatch(self.cluster, options=settings.options)
        self.capacity: CapacityWatcher | None = None
        if settings.capacity:
            self.capacity = CapacityWatcher(
                self.cluster,
                client,
                emit,
                clock=clock,
                watch_timeout=settings.watch_timeout,
                on_refused=self._refused_pods,
            )
        self._full = False
        self._full_reported = False
        self.refused = 0

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.watch_nodes(), name=f"nodes:{self.cluster}")
            tg.create_task(self.probe_forever(), name=f"probe:{self.cluster}")
            if self.workloads is not None:
                tg.create_task(self.workloads.run(), name=f"workloads:{self.cluster}")
            if self.capacity is not None:
                tg.create_task(self.capacity.run(), name=f"capacity:{self.cluster}")

    # --- nodes ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> str | None:
        return self.reflection.resource_version

    @resource_version.setter
    def resource_version(self, value: str | None) -> None:
        self.reflection.resource_version = value

    @property
    def relists(self) -> int:
        return self.reflection.relists

    async def watch_nodes(self) -> None:
        await reflect(
            self.client,
            NODES,
            relist=self.relist,
            apply=self.apply,
            state=self.reflection,
            watch_timeout=self.settings.watch_timeout,
            on_refused=self._refused,
        )

    async def _refused(self, reason: str, resource: str = "nodes") -> None:
        await _emit(
            self.emit,
            LifecycleEvent(
                LifecycleType.WATCH_REFUSED,
                self.cluster,
                self.clock.now(),
                {"resource": resource, "reason": reason},
            ),
        )

    async def _refused_pods(self, reason: str) -> None:
        await self._refused(reason, "pods")

    async def relist(self) -> str:
        """Replace the cache with a fresh list and re-diff every pool; emit only differences.
        Returns the list's resourceVersion (the reflector resumes from it)."""
        result = await self.client.list(NODES)
        before = {g: len(names) for g, names in self.groups.items()}
        self.nodes.clear()
        self.groups.clear()
        self.managed.clear()
        for obj in result.items:
            self._store(obj)
        scopes = (
            {self._scope(g) for g in self.groups}
            | {
                key
                for _, key in self.tracker.scopes_of(self.cluster)
                if not isinstance(key, AppRef) and key not in (FIGHTS, ORPHANS_SCOPE)
            }
            | set(self.index.specs)
        )
        for scope in scopes:
            await self._rediff(scope)
        await self._report_full()
        if self.synced.is_set():
            for group in set(before) | set(self.groups):
                await self._scaled(group, before.get(group, 0))
        self.synced.set()
        return result.resource_version

    def _scope(self, group: str | None) -> str | None:
        spec = self.index.spec_for(group)
        return spec.name if spec else self.index.held_for(group) or group

    def _store(self, obj: Mapping[str, Any]) -> ObservedNode | None:
        try:
            node = node_from_object(obj, path=f"{self.cluster}:node")
        except FormatError:
            return None  # a node we cannot read is not ours to judge
        if node.name not in self.nodes and len(self.nodes) >= self.settings.max_nodes:
            self._full = True
            self.refused += 1
            return None
        if node.is_control_plane and not self.settings.options.include_control_plane:
            return None
        self.nodes[node.name] = node
        meta = obj.get("metadata")
        self.managed[node.name] = writable_fields(meta)
        self.groups.setdefault(pool_of(node, pool_labels=self._pool_labels), set()).add(node.name)
        return node

    def _forget(self, name: str) -> tuple[bool, str | None]:
        """Drop a node from the cache: (was it cached, its group)."""
        old = self.nodes.pop(name, None)
        self.managed.pop(name, None)
        if old is None:
            return False, None
        group = pool_of(old, pool_labels=self._pool_labels)
        members = self.groups.get(group)
        if members is not None:
            members.discard(name)
            if not members:
                del self.groups[group]
        return True, group

    async def apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        """One watch event: update the cache, re-diff the pool(s) it touched."""
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str):
            return
        before = self.managed.get(name)
        old_node = self.nodes.get(name)
        had, old_group = self._forget(name)
        refused = self.refused
        has, new_group = False, None
        if kind != "DELETED":
            node = self._store(obj)
            if node is not None:
                has, new_group = True, pool_of(node, pool_labels=self._pool_labels)
        if self.refused != refused:
            await self._report_full()
        if old_node is not None and has:
            # before the re-diff: the healer must see the fight when the finding reaches it
            await self._observe_writes(old_node, before, obj, self._scope(new_group))
        # churn before the re-diff too: what it explains is not reported
        if old_node is not None and not has and kind == "DELETED":
            scope = self._scope(old_group)
            await self._report_churn(
                self.churn.removed(
                    snapshot_of(old_node), scope, self._spec(scope), self.clock.now()
                )
            )
        elif old_node is None and has and (added := self.nodes.get(name)) is not None:
            scope = self._scope(new_group)
            await self._report_churn(
                self.churn.added(
                    snapshot_of(added, obj), scope, self._spec(scope), self.clock.now()
                )
            )
        affected = ([old_group] if had else []) + ([new_group] if has else [])
        for scope in dict.fromkeys(self._scope(g) for g in affected):
            await self._rediff(scope, changed=(name, before if had else None))
        if (had, old_group) != (has, new_group):
            if had:
                count = len(self.groups.get(old_group, ()))
                await self._scaled(old_group, count + 1)
            if has:
                count = len(self.groups.get(new_group, ()))
                await self._scaled(new_group, count - 1)

    async def _observe_writes(
        self,
        old: ObservedNode,
        before: ManagedFields | None,
        obj: Mapping[str, Any],
        scope: str | None,
    ) -> None:
        """Feed the labels and taints this update wrote to the fight state; report fights."""
        new = self.nodes.get(old.name)
        meta = obj.get("metadata")
        if new is None or not isinstance(meta, Mapping):
            return
        if new.labels == old.labels and new.taints == old.taints:
            return  # a status heartbeat, most updates: nothing written that could be fought over
        previous = {
            "metadata": {
                "name": old.name,
                "labels": dict(old.labels),
                "managedFields": list(before or ()),
            },
            "spec": {
                "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in old.taints]
            },
        }
        after = {**obj, "metadata": {**meta, "managedFields": writable_fields(meta)}}
        now = self.clock.now()
        try:
            writes = node_writes(self.cluster, scope, previous, after, now=now)
        except ValueError:
            return  # malformed managedFields: no writer to name, no fight to see
        if not writes:
            return
        for write in writes:
            self.fights, _ = observe(self.fights, write, now)
        await self._report_fights()

    def _spec(self, scope: str | None) -> NodePoolSpec | None:
        return self.index.specs.get(scope) if scope is not None else None

    async def _report_churn(self, decisions: Sequence[ChurnDecision]) -> None:
        for d in decisions:
            details = {k: v for k, v in d.to_json().items() if k != "cluster"}
            await _emit(
                self.emit,
                LifecycleEvent(LifecycleType.CHURN, self.cluster, self.clock.now(), details),
            )

    async def _report_fights(self) -> None:
        findings = [fight_finding(f) for f in self.fights.fights.values()]
        for event in self.tracker.update((self.cluster, FIGHTS), findings, now=self.clock.now()):
            await _emit(self.emit, event)

    async def expire_fights(self) -> None:
        """Clear the fights whose field was calm for the window (the probe loop asks)."""
        if not self.fights.writes:
            return
        self.fights, cleared = expire(self.fights, self.clock.now())
        if cleared:
            await self._report_fights()

    def fight_blocking(self, finding: Finding) -> FightDecision | None:
        """The fight that forbids healing ``finding`` now (``core.fights.blocking``)."""
        return blocking(self.fights, finding, self.clock.now())

    async def _report_full(self) -> None:
        """Say once that the bounded cache refused nodes: drift there is no longer seen."""
        if self._full and not self._full_reported:
            self._full_reported = True
            await _emit(
                self.emit,
                LifecycleEvent(
                    LifecycleType.CACHE_FULL,
                    self.cluster,
                    self.clock.now(),
                    {
                        "maxNodes": self.settings.max_nodes,
                        "refused": self.refused,
                        "reason": "node cache full: further nodes of this cluster are not watched",
                    },
                ),
            )

    async def _scaled(self, group: str | None, before: int) -> None:
        after = len(self.groups.get(group, ()))
        if after != before and group is not None:
            event = LifecycleEvent(
                LifecycleType.SCALED,
                self.cluster,
                self.clock.now(),
                {"pool": group, "from": before, "to": after},
            )
            await _emit(self.emit, event)
            if self.capacity is not None:  # pods left pending after it are linked to it
                await self.capacity.observe(event)

    def nodes_of(self, scope: str | None) -> list[ObservedNode]:
        if scope is None or (scope not in self.index.specs and scope not in self.index.held):
            return [self.nodes[n] for n in self.groups.get(scope, ())]
        names = [n for g, ns in self.groups.items() if self._scope(g) == scope for n in ns]
        return [self.nodes[n] for n in names]  # every group the pool claims (name, prefix)

    async def rediff(self, scope: str | None) -> int:
        """Diff one scope (a desired pool's name, or a group of nodes no pool claims) from the
        cache now and emit what changed (how many finding events): what the inspector asks
        for when an event names a pool of a cluster watched live."""
        return await self._rediff(scope)

    async def _rediff(
        self, scope: str | None, *, changed: tuple[str, ManagedFields | None] | None = None
    ) -> int:
        """``changed``: the node of the watch event that asked, with its managedFields before
        it (None: not known): new findings on it name its writer."""
        spec = self.index.specs.get(scope) if scope is not None else None
        groups = {scope: (spec, self.nodes_of(scope))}
        if scope is not None and scope in self.index.held:  # defined twice: none compared,
            groups = {scope: (None, [])}  # its nodes no strays; pool.not_compared says so
        now = self.clock.now()
        events = diff_and_track(
            self.tracker,
            self.cluster,
            groups,
            options=self.settings.options,
            now=now,
            keep=lambda f: not self.churn.explains(f, now),
            unnamed=self.index.unnamed,
        )
        events = stamp_events(
            self.tracker, (self.cluster, scope), events, managed=self.managed.get, changed=changed
        )
        if (log := self.settings.audit_logs.get(self.cluster)) is not None:
            events = await join_audit(self.tracker, (self.cluster, scope), events, log)
        for event in events:
            await _emit(self.emit, event)
        return len(events)

    # --- health --------------------------------------------------------------------------

    async def probe_once(self) -> None:
        timeout = self.settings.probe_timeout
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that lands as the
            # call completes, and the watcher could then never be stopped
            async with asyncio.timeout(timeout + 1):
                ready, detail = await self.client.readyz(timeout=timeout)
            async with asyncio.timeout(timeout + 1):
                version = await self.client.version(timeout=timeout)
            result = ProbeResult(ready=ready, version=version or None, detail=detail)
        except (KubeError, TimeoutError) as exc:
            result = ProbeResult(ready=None, error=str(exc) or "timed out")
        for event in self.health.observe(result, now=self.clock.now()):
            await _emit(self.emit, event)
            if event.type is LifecycleType.UPGRADED and self.on_upgrade is not None:
                await self.on_upgrade(self.cluster, str(event.details["to"]))
        await self.expire_fights()
        await self._report_churn(self.churn.flush(self.clock.now()))

    async def probe_forever(self) -> None:
        while True:
            await self.probe_once()
            await asyncio.sleep(self.settings.probe_interval)


@dataclass
class _Running:
    endpoint: ClusterEndpoint
    watcher: ClusterWatcher
    task: asyncio.Task[None]


class FleetWatcher:
    """Many clusters in one process; clusters come and go with their discovery source."""

    def __init__(
        self,
        specs: Sequence[NodePoolSpec],
        client_factory: ClientFactory,
        emit: Emit,
        *,
        settings: WatchSettings = WatchSettings(),
        clock: Clock = SYSTEM_CLOCK,
        on_upgrade: Callable[[str, str], Awaitable[None]] | None = None,
        tracker: FindingTracker | None = None,
        desired_apps: DesiredApps | None = None,
        workload_settings: WorkloadWatchSettings | None = None,
    ) -> None:
        """``desired_apps`` (may be empty, and replaced later with ``set_desired``) turns on
        workload watching in every cluster; None: nodes only."""
        self.desired_apps = desired_apps
        self.workload_settings = workload_settings or WorkloadWatchSettings()
        self.specs_by_cluster: dict[str, list[NodePoolSpec]] = {}
        for spec in specs:
            if spec.cluster:
                self.specs_by_cluster.setdefault(spec.cluster, []).append(spec)
        self.client_factory, self.emit = client_factory, emit
        self.settings, self.clock = settings, clock
        self.on_upgrade = on_upgrade
        self.comparing: set[str] = set()  # clusters added here with a pool to compare
        # every cluster ever added (watched here or not); serve adds those of its node dumps
        self.found: set[str] = set()
        self._missing_said: set[str] = set()  # desired clusters said never found
        self._unfound: tuple[int, dict[str, list[NodePoolSpec]]] = (-1, {})
        self.tracker = tracker or FindingTracker()
        self.running: dict[str, _Running] = {}
        # sharding: only the clusters ``owns`` accepts are watched here; every endpoint seen
        # is kept in ``known`` so that one assigned later can start (``reassign``)
        self.owns: Callable[[str], bool] = lambda cluster: True
        self.known: dict[str, ClusterEndpoint] = {}
        self.secrets = ClusterSecrets(self)  # with ``argocd``: its cluster Secrets
        self._tg: asyncio.TaskGroup | None = None
        self.orphans: OrphanMonitor | None = None  # with an Argo CD cluster, once running
        self.on_object: ObjectHook | None = None  # every live workload change (Argo CD refresh)
        self.on_argo_change: Callable[[ArgoInventory], Awaitable[None]] | None = None
        self.argo: ArgoWatcher | None = None

    async def run(
        self, endpoints: Sequence[ClusterEndpoint] = (), argocd: tuple[KubeApi, str] | None = None
    ) -> None:
        """``argocd``: the Argo CD cluster's client and namespace: its cluster Secrets are
        followed, and its Applications, ApplicationSets and AppProjects watched there, so a
        removed cluster names the applications it orphans (``app.argo_watching``; their
        LIFECYCLE findings live in this fleet's tracker)."""
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            if argocd is not None:
                monitor, argo = orphan_tracking(
                    argocd[0],
                    self.emit,
                    namespace=argocd[1],
                    clock=self.clock,
                    book=OrphanBook(self.tracker),
                )
                self.emit = monitor.observe  # every event passes the monitor: removals grow
                self.orphans, self.argo = monitor, argo
                if self.on_argo_change is not None:  # after the orphans' own update
                    then = self.on_argo_change
                    argo.on_change = chain_change(argo.on_change, argo.inventory, then)
                tg.create_task(argo.run(), name="argocd-apps")
            for endpoint in endpoints:
                await self.add(endpoint)
            # no cluster comes later: a desired one not added is said now (with Argo CD: once
            # its cluster Secrets are listed, ClusterSecrets)
            if argocd is None:
                for event in self.missing():
                    await _emit(self.emit, event)
            if argocd is not None:
                tg.create_task(self.secrets.watch(*argocd), name="argocd-secrets")
            # runs until cancelled: clusters may come and go at any time, even all of them
            tg.create_task(asyncio.Event().wait(), name="fleet-keepalive")

    def watcher(self, cluster: str) -> ClusterWatcher | None:
        running = self.running.get(cluster)
        return running.watcher if running else None

    def findings(self) -> list[Finding]:
        """Every current finding: the fleet tracker's and each cluster's capacity findings
        (kept by the capacity watcher's own tracker)."""
        out = self.tracker.current()
        for running in self.running.values():
            if running.watcher.capacity is not None:
                out.extend(running.watcher.capacity.findings())
        return out

    def not_compared(self) -> list[LifecycleEvent]:
        """For a watch that ends: one ``cluster.not_compared`` per cluster watched here whose
        nodes were never listed (it did not answer, or not yet) -- its pools were never
        compared, and "0 findings" must not read as "no drift" for it."""
        out = []
        for name, running in self.running.items():
            watcher = running.watcher
            if watcher.synced.is_set():
                continue
            health = watcher.health
            reason = "its nodes were never listed: its pools were not compared"
            details: dict[str, Any] = {"health": health.state.value, "reason": reason}
            if health.last_error:
                details["lastError"] = health.last_error
            out.append(LifecycleEvent(LifecycleType.NOT_COMPARED, name, self.clock.now(), details))
        return out

    def missing(self) -> list[LifecycleEvent]:
        """One ``cluster.not_compared`` per desired cluster no endpoint has named (no context,
        no Argo CD cluster Secret), each said once: its pools were not compared (``scan``'s
        "no nodes were given" finding; ``core.fleet.not_found``); and its pools whose name is
        not known, which ``scan`` lists in ``skipped[]`` whatever the clusters, a
        ``pool.not_compared`` each (a cluster added says them when it is added)."""
        now, out, unfound = self.clock.now(), [], self.unfound()
        for cluster in sorted(set(self.specs_by_cluster) - self.found - self._missing_said):
            self._missing_said.add(cluster)
            if pools := unfound.get(cluster):
                details = not_found(cluster, pools, self.found)
                out.append(LifecycleEvent(LifecycleType.NOT_COMPARED, cluster, now, details))
            for skip in assign_pools(self.specs_by_cluster[cluster], ()).skips:
                kind = LifecycleType.POOL_NOT_COMPARED  # a name not known: compared nowhere
                out.append(LifecycleEvent(kind, cluster, now, skip.to_json()))
        return out

    def unfound(self) -> dict[str, list[NodePoolSpec]]:
        """The desired clusters none found names (``core.fleet.unobserved``), with their pools;
        kept until ``found`` grows (it only grows), as ``/healthz`` asks for it on every probe."""
        if self._unfound[0] != len(self.found):
            specs = [s for mine in self.specs_by_cluster.values() for s in mine]
            self._unfound = (len(self.found), unobserved(specs, self.found))
        return self._unfound[1]

    def pools_not_compared(self) -> dict[str, list[Skip]]:
        """Per cluster watched here, its desired pools not compared and why (defined twice, a
        name not known) as ``scan``'s ``skipped[]`` entries: its ``pool.not_compared`` events."""
        return {c: r.watcher.skips for c, r in self.running.items() if r.watcher.skips}

    def fight_blocking(self, finding: Finding) -> FightDecision | None:
        """The healer's question: does a fight in the finding's cluster forbid healing it?"""
        watcher = self.watcher(finding.cluster)
        return watcher.fight_blocking(finding) if watcher is not None else None

    async def add(self, endpoint: ClusterEndpoint) -> None:
        self.known[endpoint.name] = endpoint
        self.found.add(endpoint.name)
        if not self.owns(endpoint.name):
            return  # another replica's (sharding)
        if endpoint.name in self.running:
            await self.update(endpoint)
            return
        running = self.running[endpoint.name] = self._start(endpoint)
        watcher, now = running.watcher, self.clock.now()
        if watcher.index.specs:  # a watch that compares no pool anywhere is no pass
            self.comparing.add(endpoint.name)
        await _emit(
            self.emit,
            LifecycleEvent(
                LifecycleType.ADDED,
                endpoint.name,
                now,
                {
                    "server": endpoint.server,
                    "source": endpoint.source.value,
                    "pools": len(watcher.index.specs),  # those compared
                },
            ),
        )
        for skip in watcher.skips:  # desired pools not compared here: never silent
            await _emit(
                self.emit,
                LifecycleEvent(LifecycleType.POOL_NOT_COMPARED, endpoint.name, now, skip.to_json()),
            )

    async def set_desired(self, desired: DesiredApps) -> None:
        """A new desired state of the followed applications: every cluster re-diffs them."""
        self.desired_apps = desired
        for running in list(self.running.values()):
            if running.watcher.workloads is not None:
                await running.watcher.workloads.set_desired(desired)

    def _start(self, endpoint: ClusterEndpoint) -> _Running:
        assert self._tg is not None, "FleetWatcher.run() is not running"
        client = self.client_factory(endpoint)
        workloads = None
        if self.desired_apps is not None:
            workloads = WorkloadWatcher(
                endpoint.name,
                client,
                self.desired_apps,
                self.tracker,
                self.emit,
                settings=self.workload_settings,
                clock=self.clock,
                on_object=self.on_object,
            )
        watcher = ClusterWatcher(
            endpoint,
            client,
            self.specs_by_cluster.get(endpoint.name, []),
            self.tracker,
            self.emit,
            settings=self.settings,
            clock=self.clock,
            on_upgrade=self.on_upgrade,
            workloads=workloads,
        )
        task = self._tg.create_task(self._run_watcher(watcher), name=f"cluster:{endpoint.name}")
        return _Running(endpoint, watcher, task)

    async def _run_watcher(self, watcher: ClusterWatcher) -> None:
        try:
            await watcher.run()
        finally:
            await watcher.client.aclose()

    async def update(self, endpoint: ClusterEndpoint) -> None:
        """New credentials or server: reconnect, keep the findings (no duplicates follow)."""
        running = self.running.get(endpoint.name)
        if running is None:
            await self.add(endpoint)
            return
        if running.endpoint.fingerprint == endpoint.fingerprint:
            return
        # start the new watcher before stopping the old one: were the old task the group's last,
        # cancelling it first would let the TaskGroup finish and refuse the new task
        self.running[endpoint.name] = self._start(endpoint)
        await _cancel_and_wait(running.task)
        await _emit(
            self.emit,
            LifecycleEvent(
                LifecycleType.ADDED,
                endpoint.name,
                self.clock.now(),
                {"server": endpoint.server, "source": endpoint.source.value, "reconnected": True},
            ),
        )

    async def _stop(self, cluster: str) -> None:
        running = self.running.pop(cluster, None)
        if running is None:
            return
        await _cancel_and_wait(running.task)

    async def reassign(self, added: Iterable[str], removed: Iterable[str]) -> None:
        """Sharding moved clusters: stop watching ``removed`` (no cleared findings, no
        ``cluster.removed``: the cluster lives on, watched by another replica) and start
        ``added`` with a fresh list, so changes made while nobody watched are found."""
        for cluster in removed:
            await self._stop(cluster)
        for cluster in added:
            endpoint = self.known.get(cluster)
            if endpoint is not None and cluster not in self.running:
                await self.add(endpoint)

    async def remove(self, cluster: str, *, reason: str) -> None:
        self.known.pop(cluster, None)
        if cluster not in self.running:
            return
        await self._stop(cluster)
        for event in self.tracker.drop_cluster(cluster, now=self.clock.now(), reason=reason):
            await _emit(self.emit, event)
        await _emit(
            self.emit,
            LifecycleEvent(LifecycleType.REMOVED, cluster, self.clock.now(), {"reason": reason}),
        )


async def _cancel_and_wait(task: asyncio.Task[None]) -> None:
    """Cancel a watcher task and wait for it to end. Only *its* CancelledError is absorbed:
    were the caller itself cancelled meanwhile, that must propagate (or shutdown would hang)."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
