"""The serve pipeline as a use case: queued change events -> inspections -> findings ->
decisions -> actions -> audit records, with the live watchers feeding the same findings.

``Serving`` wires, from ports and settings only (no adapter, no HTTP):

- one ``FindingTracker`` shared by the watchers and the inspection workers (a drift is reported
  once, whoever sees it first), with ``Attribution`` naming the change event that caused a
  new finding;
- the ``FleetWatcher`` (nodes and followed applications' workloads, live);
- the ``Inspector`` (queue -> ``Recorder``: event log and audit store -> re-diff of the pool
  an event names). It asks the cluster's live watcher to re-diff (``ClusterWatcher.rediff``)
  and falls back to the latest node dump otherwise: both go through the one "nodes -> diff ->
  track" step, ``app/rediffing.diff_and_track`` (which ``initial_scan`` uses too);
- the ``Healer`` (policy, remediation, audit), the ``Notifier`` and the ``EventRelay``;
- with leader election (an ``Elector``), the healer acts only while leading, fences each
  remediation with the term's token, and a replica that takes over is given every current
  finding to decide (the old leader's decisions are in the shared store: nothing runs twice);
- with sharding (a ``Membership``), the watchers watch only the clusters assigned here and
  follow the assignment as members come and go, and the healer decides the findings of the
  clusters assigned here (``app/authority.ShardAuthority``: each shard heals its clusters,
  fenced per cluster; with leader election too, approvals and expiry sweeps stay with the
  leader); a cluster that becomes healed here (after the takeover grace) has its current
  findings handed to the healer, as a new leader is handed every finding;
- with ``argocd_refresh`` and an Argo CD API client, the ``ArgoRefresher``
  (``app/argo_refreshing``): every live workload change and every new change event refreshes
  the Argo CD applications that own the object it touches (apps followed from the Argo CD
  cluster's inventory, their destinations mapped to the fleet's clusters);
- ``emit``: where every finding and lifecycle event goes (the healer, the recent-event ring,
  the findings-by-severity gauge through ``on_findings``, and ``live``: the ``Broadcaster``
  the dashboard's event stream follows, which also gets every audit record the healer
  appends).

The composition root (``wiring/service.py``) builds the adapters (queue, Kubernetes clients,
Argo CD, Flux, notification sinks) and reads the endpoints to watch; the entry layer
(``entrypoints/serve_cmd.py``) puts the HTTP side in front. What this module does not do:
open sockets, read files or the environment, or know Prometheus (metrics arrive as the
``on_latency``/``on_count``/``on_findings`` callbacks).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from fleetwarden.app import upgrade_scan
from fleetwarden.app.argo_refreshing import ArgoRefresher, Refreshable, RefreshSettings
from fleetwarden.app.argo_watching import ArgoInventory
from fleetwarden.app.authority import ShardAuthority, authority_for
from fleetwarden.app.borrowing import OneCallFlux, OneCallRestorer
from fleetwarden.app.broadcasting import Broadcaster
from fleetwarden.app.deprecating import DEFAULT_COMPONENTS, table_for
from fleetwarden.app.electing import Elector
from fleetwarden.app.healing import Healer
from fleetwarden.app.inspecting import Inspector, NodeDiffer
from fleetwarden.app.notifying import BatchResult, Notifier
from fleetwarden.app.recording import Checkpoint, EventLog, Recorder, no_checkpoint
from fleetwarden.app.rediffing import cluster_groups, diff_and_track
from fleetwarden.app.relaying import EventFeed, EventRelay
from fleetwarden.app.remediating import Remediator
from fleetwarden.app.sharding import Membership
from fleetwarden.app.stamping import notified_draft, refine_open, stamp_notified
from fleetwarden.app.upgrade_drift import UpgradeInProgress
from fleetwarden.app.upgrade_scan import ManifestSource
from fleetwarden.app.watching import Event, FleetWatcher, WatchSettings
from fleetwarden.app.workload_watching import WorkloadWatchSettings
from fleetwarden.core.applications import Application, normalise_server
from fleetwarden.core.attribution import Attribution
from fleetwarden.core.audit.records import AuditDraft
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.core.desired_apps import DesiredApps
from fleetwarden.core.events import ChangeEvent
from fleetwarden.core.findings import Finding, Severity
from fleetwarden.core.fleet import assign_pools, not_found, severity_order
from fleetwarden.core.lifecycle import SkipEvent
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.notifying import SinkPolicy
from fleetwarden.core.ownership import OwnershipMap, parse_rules
from fleetwarden.core.policy import Guards, Mode, Policy, WarnRule, fingerprint
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.rules import DiffOptions
from fleetwarden.core.skips import Skip
from fleetwarden.core.tracking import FindingEvent, FindingEventType, FindingTracker
from fleetwarden.ports.audit_logs import AuditLogSource
from fleetwarden.ports.kube import ClientFactory, KubeApi
from fleetwarden.ports.notify import Sink
from fleetwarden.ports.queue import EventQueue
from fleetwarden.ports.remediation import ArgoSync, FluxReconciler, NodeRestorer
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["Serving", "ServingSettings", "healing_policy", "inspection_counter"]

P = TypeVar("P")  # a remediation port (``NodeRestorer``, ``FluxReconciler``)

LoadApps = Callable[[], Awaitable[DesiredApps]]


@dataclass(frozen=True)
class ServingSettings:
    """What the pipeline needs from the service configuration."""

    options: DiffOptions = field(default_factory=DiffOptions)
    debounce: float = 2.0
    probe_interval: float = 10.0
    workloads: WorkloadWatchSettings | None = None  # None: workloads are not watched
    follow_apps: bool = False  # followed applications are configured (``workloads.apps``)
    desired_refresh: float = 180.0
    mode: Mode = Mode.DRY_RUN
    request_expiry: float = 3600.0
    max_per_cluster: int | None = None  # the blast radius (None: a fraction of the pools)
    max_fleet: int | None = None
    ownership: Sequence[Mapping[str, Any]] = ()
    argocd_url: str | None = None
    warn: tuple[WarnRule, ...] = ()  # policy.warn (``core.policy.warning``)
    argocd_refresh: RefreshSettings | None = None  # None: no targeted Argo CD refreshes


def healing_policy(settings: ServingSettings) -> tuple[Policy, str]:
    """The healer's policy, and the fingerprint of what chooses a request's action and target
    (rules, ownership, the Argo CD it calls): a request made under another is cancelled, not
    approved (``core.policy.fingerprint``)."""
    policy = Policy(
        guards=Guards(
            pending_ttl=timedelta(seconds=settings.request_expiry),
            max_per_cluster=settings.max_per_cluster,
            max_fleet=settings.max_fleet,
        ),
        warn=settings.warn,
    )
    return policy, fingerprint(
        policy, ownership=list(settings.ownership), argocd=settings.argocd_url
    )


def inspection_counter(
    duplicates: Callable[[int], None],
    coalesced: Callable[[int], None],
    inspections: Callable[[str, int], None],
) -> Callable[[str, int], None]:
    """The inspector's ``on_count`` over three counters (the metrics of the entry point)."""

    def count(name: str, n: int) -> None:
        if name == "duplicate":
            duplicates(n)
        elif name == "coalesced":
            coalesced(n)
        else:
            inspections(name, n)

    return count


class Serving:
    """Everything the service runs but its HTTP side, assembled (see the module docstring)."""

    def __init__(
        self,
        settings: ServingSettings,
        specs: Sequence[NodePoolSpec],
        queue: EventQueue,
        *,
        client_factory: ClientFactory,
        snapshot: Mapping[str, list[ObservedNode]] | None = None,
        journal: EventLog | None = None,
        argocd: ArgoSync | None = None,
        flux: Callable[[KubeApi], FluxReconciler] | None = None,
        restorer: Callable[[KubeApi], NodeRestorer] | None = None,
        sinks: Sequence[tuple[SinkPolicy, Sink]] = (),
        feeds: Sequence[EventFeed] = (),
        on_latency: Callable[[float], None] | None = None,
        on_count: Callable[[str, int], None] | None = None,
        on_delivery_delay: Callable[[str, float], None] | None = None,
        on_findings: Callable[[Mapping[Severity, int]], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        checkpoint: Checkpoint = no_checkpoint,
        elector: Elector | None = None,
        membership: Membership | None = None,
        identity: str | None = None,
        audit_logs: Mapping[str, AuditLogSource] | None = None,
        skipped: Sequence[Skip] = (),
    ) -> None:
        """``skipped``: the desired state compared in no cluster (``scan``'s ``skipped[]``
        entries of the files not read or defining no pool, and of the pools whose cluster is
        not known): said on the event stream as the service starts (``SkipEvent``) and kept
        for ``/healthz`` (``desired_state``)."""
        self.settings, self.specs, self.queue = settings, list(specs), queue
        self.desired_skips = list(skipped)
        self.pipeline_runs = False  # here (a role: gateway replica runs none: it compares nothing)
        self.snapshot: dict[str, list[ObservedNode]] = dict(snapshot or {})
        self.clock, self.checkpoint, self.on_findings = clock, checkpoint, on_findings
        self.events: deque[dict[str, Any]] = deque(maxlen=5000)  # the newest, for the API
        self.live = Broadcaster()  # for those who follow the service as it happens
        self.attribution = Attribution()
        self.tracker = FindingTracker(
            attribute=lambda f, now: self.attribution.cause_for(f.cluster, f.pool, now=now)
        )
        self.fleet = FleetWatcher(
            self.specs,
            client_factory,
            self.emit,
            tracker=self.tracker,
            settings=WatchSettings(
                probe_interval=settings.probe_interval,
                options=settings.options,
                capacity=True,
                audit_logs=dict(audit_logs or {}),  # managedFields actors joined with them
            ),
            clock=clock,
            # workloads are watched only for followed apps (the six kinds cost a list each)
            desired_apps=DesiredApps() if settings.workloads and settings.follow_apps else None,
            workload_settings=settings.workloads,
        )
        self.fleet.found.update(self.snapshot)  # compared from their node dumps: not missing
        self.upgrades: UpgradeInProgress | None = None  # with the audit store, once running
        if isinstance(argocd, ManifestSource):  # the Argo CD API: upgrades scan its apps
            upgrade_scan.for_fleet(self.fleet, argocd, table=table_for(DEFAULT_COMPONENTS))
        self._dumps = NodeDiffer(  # the pools of clusters without a live watcher
            self.specs,
            lambda cluster: self.snapshot.get(cluster),
            self.tracker,
            self.emit,
            options=settings.options,
            clock=clock,
        )
        self.feeds = list(feeds)
        self.relay: EventRelay | None = None  # once the store is open (run)
        self.recorder = Recorder(  # the audit store is set when it opens (the entry point)
            log=journal,
            deliver_to=[f.name for f in self.feeds],
            on_stored=lambda: self.relay.wake() if self.relay is not None else None,
            checkpoint=self._checkpoint,
        )
        self.inspector = Inspector(
            queue,
            self.specs,
            self,  # the PoolDiffer: the live watcher, else the node dump
            self.attribution,
            debounce=settings.debounce,
            on_latency=on_latency,
            on_count=on_count,
            on_delivery_delay=on_delivery_delay,
            record=self._record,
            clock=clock,
            checkpoint=self._checkpoint,
        )
        self.remediator = Remediator(
            argocd=argocd,
            flux=(lambda c: self._port(c, flux, OneCallFlux)) if flux is not None else None,
            nodes=(lambda c: self._port(c, restorer, OneCallRestorer)) if restorer else None,
            clock=clock,
        )
        self.notifier = Notifier(sinks, clock=clock, on_outcome=self._notified) if sinks else None
        self.refresher: ArgoRefresher | None = None  # live changes -> Argo CD refreshes
        refresh = settings.argocd_refresh
        if refresh is not None and refresh.enabled and isinstance(argocd, Refreshable):
            # sharded: each cluster is watched by one replica, which refreshes for it; else
            # every replica sees every change and only the leader (if elected) refreshes
            self.refresher = ArgoRefresher(
                argocd,
                settings=refresh,
                active=lambda: self.membership is not None or self.healer.acting,
            )
            self.fleet.on_object = self.refresher.on_object
            self.fleet.on_argo_change = self._follow_argo_apps
        policy, config_hash = healing_policy(settings)
        self.healer = Healer(
            ownership=OwnershipMap(parse_rules(list(settings.ownership))),
            remediator=self.remediator,
            policy=policy,
            mode=settings.mode,
            notify=self._decided,
            clock=clock,
            config=config_hash,
            identity=identity,
            authority=authority_for(elector=elector, membership=membership),
            fights=self.fleet.fight_blocking,
            on_appended=self._appended,
        )
        self.elector, self.membership = elector, membership
        if elector is not None and membership is None:  # sharded: each shard hands its own
            elector.on_started_leading = self._took_over
        # sharding: what the membership assigned, for the watchers to follow in order
        self._assignments: asyncio.Queue[tuple[frozenset[str], frozenset[str]]] = asyncio.Queue()
        if membership is not None:
            membership.on_assign = lambda added, removed: self._assignments.put_nowait(
                (added, removed)
            )
            self.fleet.owns = self._owns
        self.healer.set_pool_counts(self.compared_pools())

    def _decided(self, event: FindingEvent, decision: dict[str, Any] | None) -> None:
        """The healer's word on a finding: a warned one shows ``mode: warn`` in
        ``/api/findings`` too (kept while it lasts); then on to the notifier, if any."""
        f = event.finding
        if f.extra.get("mode") == "warn" and event.type is not FindingEventType.CLEARED:
            self.tracker.annotate(
                (f.cluster, f.pool), f.id, {"mode": "warn", "warn": f.extra["warn"]}
            )
        if self.notifier is not None:
            self.notifier.handle(event, decision)

    async def _notified(self, result: BatchResult) -> None:
        """A delivered batch stamps its firing findings' ``notifiedAt``, once, on record."""
        if not result.ok:
            return
        firing = [n.finding for n in result.batch.notifications if n.status.value == "firing"]
        at = result.at + timedelta(seconds=result.duration)
        stamped = stamp_notified(self.tracker, firing, at)
        if stamped and self.healer.audit is not None:
            await self.healer.audit.append_many([notified_draft(f, result.sink) for f in stamped])

    def _checkpoint(self, step: str) -> None:
        self.checkpoint(step)  # looked up at each step: a test may set it after start-up

    def _port(
        self,
        cluster: str,
        make: Callable[[KubeApi], P],
        one_call: Callable[[Callable[[], KubeApi], Callable[[KubeApi], P]], P],
    ) -> P:
        """A remediation port on ``cluster``: over its live watcher's client, or, on a cluster
        another shard watches (an approval carried out here), over a client opened from its
        endpoint for each call (``app/borrowing``)."""
        watcher = self.fleet.watcher(cluster)
        if watcher is not None:
            return make(watcher.client)
        endpoint = self.fleet.known.get(cluster)
        if endpoint is None:
            raise KeyError(f"no live connection to cluster {cluster!r}, and no endpoint for it")
        return one_call(lambda: self.fleet.client_factory(endpoint), make)

    def pools_not_compared(self) -> dict[str, list[Skip]]:
        """Per desired cluster, its pools compared by no pass (defined twice there, a name not
        known) and why: scan's ``skipped[]`` entries, as the watchers' ``pool.not_compared``;
        and every pool of a desired cluster the service has no access to (no context, no Argo
        CD cluster Secret, no node dump names it: ``FleetWatcher.missing``), with that reason."""
        held = {
            cluster: skips
            for cluster, mine in self.fleet.specs_by_cluster.items()
            if (skips := assign_pools(mine, [cluster]).skips)
        }
        for cluster, pools in self.fleet.unfound().items():
            reason = not_found(cluster, pools, self.fleet.found)["reason"]
            skips = [Skip(p.source or "<desired>", reason, pool=p.name) for p in pools]
            held.setdefault(cluster, []).extend(skips)
        return held

    def desired_state(self) -> dict[str, Any]:
        """What ``/healthz`` says of the desired state the service compares in no cluster:
        ``skipped`` (the files not read or defining no pool, the pools whose cluster is not
        known: scan's entries) and ``clustersNotCompared`` (each desired cluster it has no
        access to, as its ``cluster.not_compared`` event says it); nothing where the pipeline
        does not run (a ``role: gateway`` replica compares nothing, and says nothing of it)."""
        if not self.pipeline_runs:
            return {}
        missing = [
            {"cluster": cluster, **not_found(cluster, pools, self.fleet.found)}
            for cluster, pools in self.fleet.unfound().items()
        ]
        skipped = [s.to_json() for s in self.desired_skips]
        return {"desired": {"skipped": skipped, "clustersNotCompared": missing}}

    def compared_pools(self) -> dict[str, int]:
        """Per desired cluster, how many of its pools are compared: the blast radius's base (a
        share of them may be healed at once). A pool compared in no definition (defined twice,
        a name not known) is healed in none, so it does not widen the share."""
        clusters = self.known_pools().keys()
        assigned = assign_pools(self.specs, clusters)
        return {c: len(assigned.pools.get(c, ())) for c in clusters}

    def known_pools(self) -> dict[str, set[str]]:
        """Desired pool names by cluster."""
        known: dict[str, set[str]] = {}
        for spec in self.specs:
            if spec.cluster:
                known.setdefault(spec.cluster, set()).add(spec.name)
        return known

    # --- leadership and sharding ------------------------------------------------------------

    @property
    def leading(self) -> bool:
        """Whether this replica acts (always, without leader election)."""
        return self.healer.acting

    def _took_over(self, token: int) -> None:
        """Leading now: every current finding goes to the healer to be decided (what the
        previous leader already did is in the shared store, and counts there)."""
        self._hand_over(None)

    def _hand_over(self, clusters: frozenset[str] | None) -> None:
        """The current findings of ``clusters`` (None: all) go to the healer to be decided."""
        now = self.clock.now()
        for finding in self.tracker.current():
            if clusters is None or finding.cluster in clusters:
                self.healer.handle(FindingEvent(FindingEventType.APPEARED, finding, now))

    def _owns(self, cluster: str) -> bool:
        assert self.membership is not None
        if cluster not in self.membership.clusters:  # discovered later (Argo CD Secrets)
            self.membership.set_clusters([*self.membership.clusters, cluster])
        return cluster in self.membership.owned

    def owners(self) -> dict[str, str | None]:
        """Each cluster's watcher replica in this replica's view; {} without sharding."""
        return self.membership.owners() if self.membership is not None else {}

    async def _follow_assignments(self) -> None:
        while True:
            added, removed = await self._assignments.get()
            await self.fleet.reassign(added, removed)

    # --- what the HTTP side reads ----------------------------------------------------------

    def findings(self) -> list[Finding]:
        found = self.fleet.findings()
        if self.upgrades is not None:  # a running upgrade's drift is not a finding
            found = self.upgrades.findings(found)
        return sorted(found, key=severity_order)

    def nodes_of(self, cluster: str) -> list[ObservedNode] | None:
        """Live cache first; else the latest known state from node dumps."""
        watcher = self.fleet.watcher(cluster)
        if watcher is not None and watcher.synced.is_set():
            return list(watcher.nodes.values())
        return self.snapshot.get(cluster)

    # --- the inspector's PoolDiffer --------------------------------------------------------

    def knows(self, cluster: str) -> bool:
        return self.nodes_of(cluster) is not None

    async def rediff(self, cluster: str, scope: str) -> int:
        """The inspector asks the cluster's live watcher to re-diff the pool; without a synced
        watcher, the pool is diffed from the node dump. Either way: ``diff_and_track``."""
        watcher = self.fleet.watcher(cluster)
        if watcher is not None and watcher.synced.is_set():
            emitted = await watcher.rediff(scope)
        else:
            emitted = await self._dumps.rediff(cluster, scope)
        await self._tell_capacity(watcher, cluster, scope)
        return emitted + self._refine_actors(cluster, scope)

    async def _tell_capacity(self, watcher: Any, cluster: str, scope: str) -> None:
        """A provider's scale-down (an Auto Scaling, MIG or VMSS event) reaches the cluster's
        capacity watcher: the pods it leaves pending are linked to it and to its principal
        (the watch's own ``pool.scaled`` knows the sizes, not who scaled). Telling it the
        same event again changes nothing (``core.capacity.observe_scale``)."""
        capacity = getattr(watcher, "capacity", None)
        if capacity is None:
            return
        event = self.attribution.latest(cluster, scope, now=self.clock.now())
        if event is not None:
            await capacity.observe(event)

    def _refine_actors(self, cluster: str, scope: str) -> int:
        """The event that asked for this re-diff may name the actor of findings already open
        (the watch saw the change minutes before the provider delivered it): refine them."""
        now = self.clock.now()
        event = self.attribution.latest(cluster, scope, now=now)
        if event is None:
            return 0
        events = refine_open(self.tracker, (cluster, scope), event, now=now)
        for ev in events:
            self.emit(ev)
        return len(events)

    # --- events ----------------------------------------------------------------------------

    async def _record(self, events: Sequence[ChangeEvent]) -> list[bool]:
        """The inspector's recording step; a new event may then refresh Argo CD apps."""
        new = await self.recorder.record(events)
        if self.refresher is not None:
            for event, fresh in zip(events, new, strict=True):
                if fresh:
                    self.refresher.event(event)
        return new

    async def _follow_argo_apps(self, inventory: ArgoInventory) -> None:
        if self.refresher is not None:
            await self.refresher.follow_inventory(inventory.apps.items.values(), self._cluster_of)

    def _cluster_of(self, app: Application) -> str | None:
        """The fleet cluster an application's destination names (by name, else server)."""
        dest = app.destination
        if dest.name and dest.name in self.fleet.known:
            return dest.name
        for name, endpoint in self.fleet.known.items():
            if dest.server and normalise_server(endpoint.server) == dest.server:
                return name
        return None

    def emit(self, event: Event | SkipEvent) -> None:
        data = event.to_json()
        self.events.append(data)
        self.live.publish("finding" if isinstance(event, FindingEvent) else "event", data)
        self.healer.handle(event)
        if isinstance(event, FindingEvent) and self.on_findings is not None:
            self.on_findings(self.tracker.counts())  # the tracker keeps the counts: no recount

    def _appended(self, drafts: Sequence[AuditDraft]) -> None:
        for draft in drafts:  # decisions, actions, outcomes, approvals: as the audit has them
            self.live.publish(
                "audit",
                {
                    "kind": draft.kind.value,
                    "summary": draft.summary,
                    "cluster": draft.cluster,
                    "pool": draft.pool,
                    "actor": draft.actor,
                    "id": draft.id,
                },
            )

    def initial_scan(self) -> None:
        """Findings of the latest known state (node dumps) before any event arrives."""
        assigned = assign_pools(self.specs, self.snapshot.keys())
        now, options = self.clock.now(), self.settings.options
        for cluster, nodes in self.snapshot.items():
            mine, held = assigned.pools.get(cluster, []), assigned.held.get(cluster, ())
            groups = cluster_groups(mine, nodes, options=options, held=held)
            unnamed = assigned.unnamed.get(cluster, ())
            for ev in diff_and_track(
                self.tracker, cluster, groups, options=options, now=now, unnamed=unnamed
            ):
                self.emit(ev)

    # --- running -----------------------------------------------------------------------------

    async def run(
        self,
        endpoints: Sequence[ClusterEndpoint] = (),
        argocd: tuple[KubeApi, str] | None = None,
        *,
        load_apps: LoadApps | None = None,
    ) -> None:
        """Watchers, inspection workers, healer, notifier and event relay, until cancelled.
        ``load_apps`` reads the followed applications' desired state (again every
        ``desired_refresh`` seconds)."""
        try:
            await self._run(endpoints, argocd, load_apps=load_apps)
        finally:
            self.live.close()  # the event streams end: the HTTP server can stop

    async def _run(
        self,
        endpoints: Sequence[ClusterEndpoint],
        argocd: tuple[KubeApi, str] | None,
        *,
        load_apps: LoadApps | None,
    ) -> None:
        if load_apps is not None:
            # the followed apps' desired state before the first diff: no "missing" storm
            self.fleet.desired_apps = await load_apps()
        async with asyncio.TaskGroup() as tg:
            if self.healer.audit is not None and self.upgrades is None:
                # upgrade runs are in the audit store: their pools' drift is in progress
                self.upgrades = UpgradeInProgress(
                    self.fleet.emit, store=self.healer.audit, specs=self.specs,
                    clock=self.clock, current=self.fleet.findings,
                )  # fmt: skip
                self.fleet.emit = self.upgrades.observe
                tg.create_task(self.upgrades.refresh_forever(), name="upgrade-runs")
            now, self.pipeline_runs = self.clock.now(), True
            for skip in self.desired_skips:  # compared in no cluster: said first, as watch does
                self.emit(SkipEvent(skip, now))
            tg.create_task(self.fleet.run(endpoints, argocd), name="fleet")
            if self.elector is not None:
                tg.create_task(self.elector.run(), name="elector")
            if self.membership is not None:
                tg.create_task(self.membership.run(), name="membership")
                tg.create_task(self._follow_assignments(), name="shard-assignments")
                if isinstance(self.healer.authority, ShardAuthority):
                    heals = self.healer.authority.run(self._hand_over)
                    tg.create_task(heals, name="shard-heals")
            if load_apps is not None:
                tg.create_task(self._refresh_apps(load_apps), name="desired-refresh")
            tg.create_task(self.inspector.run(), name="inspector")
            if self.refresher is not None:
                self.refresher.audit = self.healer.audit  # opened by the entry point by now
                tg.create_task(self.refresher.run(), name="argocd-refresh")
                if argocd is None:  # no watch of the Argo CD cluster: its API lists the apps
                    every = self.settings.desired_refresh
                    follow = self.refresher.follow_api(self._cluster_of, every=every)
                    tg.create_task(follow, name="argocd-refresh-apps")
            tg.create_task(self.healer.run(), name="healer")
            if self.notifier is not None:
                tg.create_task(self.notifier.run(), name="notifier")
            if self.feeds and self.healer.audit is not None:
                self.relay = EventRelay(self.healer.audit, self.feeds, checkpoint=self._checkpoint)
                tg.create_task(self.relay.run(), name="event-relay")

    async def _refresh_apps(self, load_apps: LoadApps) -> None:
        while True:
            await asyncio.sleep(self.settings.desired_refresh)
            await self.fleet.set_desired(await load_apps())
