"""``fleetwarden serve``'s service: the pipeline (``app/serving.py``) over its adapters.

Start-up order: desired state, the queue (SQLite file or NATS JetStream), the finding tracker
(shared by watchers and workers, so a drift is reported once whoever sees it first), the live
watchers (kubeconfig contexts and Argo CD cluster Secrets), the inspection workers; the entry
layer (``entrypoints/serve_cmd.py``) puts the HTTP side in front (``Service.app``).

With ``leaderElection`` the worker elects a leader on a Lease (only the leader heals; /healthz
says ``leader``; metric ``fleetwarden_leader``); with ``sharding`` it holds a membership Lease
and watches only the clusters assigned to it (``/api/clusters`` names each one's owner). Both
Leases are reached through a kubeconfig context (``clusters.kubeconfig``) or in-cluster.
The healer always decides in the audit store's guarded transaction (``shared``): replicas on
one PostgreSQL enforce one blast radius, and an approval runs once (409 on the others).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from fleetwarden import logs
from fleetwarden.adapters import files, processes, proxies, trust
from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.audit_logs import AuditLogTail
from fleetwarden.adapters.flux import FluxClient
from fleetwarden.adapters.journal import EventJournal
from fleetwarden.adapters.kube.config import (
    check_unattended,
    in_cluster_endpoint,
    load_kubeconfig,
    service_client_factory,
)
from fleetwarden.adapters.kube.lease import KubeLeaseGroup, KubeLeaseStore
from fleetwarden.adapters.kube.restore import KubeNodeRestorer
from fleetwarden.adapters.metrics import ServiceMetrics
from fleetwarden.adapters.notify.alertmanager import AlertmanagerSink
from fleetwarden.adapters.notify.slack import SlackSink
from fleetwarden.adapters.notify.webhook import WebhookSink
from fleetwarden.adapters.queue.nats import NatsQueue
from fleetwarden.adapters.queue.sqlite import SqliteQueue
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app import serving
from fleetwarden.app.electing import Elector, default_identity
from fleetwarden.app.following import FollowedApps
from fleetwarden.app.service_config import ServiceConfig, default_store
from fleetwarden.app.serving import Serving, ServingSettings, inspection_counter
from fleetwarden.app.sharding import MEMBERSHIP_LABEL, Membership
from fleetwarden.app.stamping import timeline_seconds
from fleetwarden.app.watching import Event
from fleetwarden.core.desired_apps import DesiredApps
from fleetwarden.core.findings import Severity
from fleetwarden.core.fleet import cluster_unknown
from fleetwarden.core.lifecycle import SkipEvent
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.notifying import SinkPolicy
from fleetwarden.core.policy import Mode, Policy
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.skips import Skip
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.events import Reply
from fleetwarden.ports.argocd import ArgoError
from fleetwarden.ports.audit import AuditStoreError
from fleetwarden.ports.kube import KubeApi
from fleetwarden.ports.notify import Sink
from fleetwarden.ports.queue import EventQueue
from fleetwarden.wiring.workloads import load_apps

__all__ = [
    "Service",
    "build_event_feeds",
    "build_service",
    "build_sinks",
    "confirm_sns",
    "healing_policy",
    "open_store",
    "serving_settings",
]

log = logs.get_logger("fleetwarden.serve")


def serving_settings(config: ServiceConfig) -> ServingSettings:
    """The pipeline's settings from the service configuration."""
    return ServingSettings(
        options=config.scan.diff,
        debounce=config.debounce,
        probe_interval=config.probe_interval,
        workloads=config.workloads,
        follow_apps=bool(config.apps),
        desired_refresh=config.desired_refresh,
        mode=Mode(config.policy_mode),
        request_expiry=config.request_expiry,
        max_per_cluster=config.max_per_cluster,
        max_fleet=config.max_fleet,
        ownership=config.ownership,
        argocd_url=config.argocd_url,
        warn=config.warn,
        argocd_refresh=config.argocd_refresh,
    )


def healing_policy(config: ServiceConfig) -> tuple[Policy, str]:
    """``app.serving.healing_policy`` of this configuration."""
    return serving.healing_policy(serving_settings(config))


class Service(Serving):
    """The pipeline (``app/serving.py``) over its adapters. ``app`` is the HTTP side the
    entry layer puts in front (the gateway, the read API, the dashboard); tests build the
    service without it."""

    app: Any = None  # the ASGI app, set by the entry layer

    def __init__(
        self,
        config: ServiceConfig,
        specs: list[NodePoolSpec],
        queue: EventQueue,
        *,
        snapshot: dict[str, list[ObservedNode]] | None = None,
        journal: EventJournal | None = None,
        argocd: ArgoCDClient | None = None,
        elector: Elector | None = None,
        membership: Membership | None = None,
        identity: str | None = None,
        lease_clients: Sequence[KubeApi] = (),
        heals: bool = True,
        audit_logs: Mapping[str, AuditLogTail] | None = None,
        skipped: Sequence[Skip] = (),
    ) -> None:
        self.config, self.argocd = config, argocd
        # a gateway (role gateway, or role all's gateway process) never heals: never a leader
        self.heals = heals and config.role != "gateway"
        self.lease_clients = list(lease_clients)  # closed when serve stops
        self.audit_logs = dict(audit_logs or {})  # closed when serve stops
        self.metrics = m = ServiceMetrics()
        super().__init__(
            serving_settings(config),
            specs,
            queue,
            client_factory=service_client_factory,  # exec plugins never get a terminal here
            snapshot=snapshot,
            journal=journal,
            argocd=argocd,
            flux=FluxClient,
            restorer=KubeNodeRestorer,
            sinks=build_sinks(config.notify),
            feeds=build_event_feeds(config.notify),
            on_latency=m.event_to_finding.observe,
            on_delivery_delay=lambda p, s: m.event_delivery_delay.labels(p).observe(s),
            on_count=inspection_counter(
                m.duplicates.inc, m.coalesced.inc, lambda r, n: m.inspections.labels(r).inc(n)
            ),
            on_findings=self._set_findings_gauge,
            elector=elector,
            membership=membership,
            identity=identity,
            audit_logs=self.audit_logs,
            skipped=skipped,
        )
        m.leader.set_function(lambda: 1.0 if self.heals and self.leading else 0.0)
        loader = None
        if config.apps:  # each refresh reads every followed app's sources again

            async def loader(previous: DesiredApps | None) -> tuple[DesiredApps, dict[str, str]]:
                return await load_apps(config, argocd, previous=previous)

        self.workloads = FollowedApps(config, self.fleet, loader)
        self._background: set[asyncio.Task[None]] = set()

    def emit(self, event: Event | SkipEvent) -> None:
        super().emit(event)
        if isinstance(event, FindingEvent) and (measured := timeline_seconds(event)) is not None:
            what, seconds = measured
            hist = self.metrics.time_to_detect if what == "detect" else self.metrics.time_to_restore
            hist.labels(event.finding.cluster, event.finding.layer.value).observe(seconds)

    def _set_findings_gauge(self, counts: Mapping[Severity, int]) -> None:
        for severity in Severity:
            self.metrics.findings.labels(severity.value).set(counts.get(severity, 0))

    def on_reply(self, source: str, reply: Reply) -> None:
        if reply.kind == "sns-subscribe" and reply.url:
            task = asyncio.get_running_loop().create_task(confirm_sns(reply.url))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def run_workers(self) -> None:
        """The clusters to watch (kubeconfig contexts, in-cluster, Argo CD cluster Secrets),
        then the pipeline, until cancelled."""
        if self.config.role == "gateway" or os.environ.get("FW_BENCH_NO_WORKERS") == "1":
            # a gateway replica (role: gateway) only ingests; worker replicas process
            await asyncio.Event().wait()
        endpoints = []
        argocd = None
        local = None
        if self.config.in_cluster:
            local = in_cluster_endpoint(self.config.in_cluster, where="clusters.inCluster")
        if self.config.kubeconfig:
            path = Path(self.config.kubeconfig).expanduser()
            endpoints = load_kubeconfig(path, contexts=self.config.contexts)
            check_unattended(endpoints, where="clusters.kubeconfig")
            if self.config.argocd_namespace and (self.config.argocd_context or local is None):
                ctx = [self.config.argocd_context] if self.config.argocd_context else []
                mgmt = load_kubeconfig(path, contexts=ctx)[0]
                check_unattended([mgmt], where="clusters.argocdSecrets")
                argocd = (service_client_factory(mgmt), self.config.argocd_namespace)
        if local is not None:
            endpoints.append(local)
            if self.config.argocd_namespace and argocd is None:
                # in a pod next to Argo CD: its cluster Secrets are read with our own token
                argocd = (service_client_factory(local), self.config.argocd_namespace)
        await self.run(
            endpoints, argocd, load_apps=self.workloads.load if self.config.apps else None
        )

    async def close(self) -> None:
        """Close what the service opened: the queue, event feeds, the audit store, the Argo
        CD and Lease clients."""
        await self.queue.close()
        for feed in self.feeds:
            await feed.aclose()
        if self.healer.audit is not None:
            await self.healer.audit.close()
        if self.argocd is not None:
            await self.argocd.aclose()
        for client in self.lease_clients:
            await client.aclose()
        for tail in self.audit_logs.values():
            tail.close()


async def confirm_sns(url: str, *, timeout: float = 10.0) -> None:
    """GET an SNS ``SubscribeURL`` (checked by ``formats.events.aws``) through the
    environment's proxy as every other client takes it (``adapters.proxies``), trusting the
    CAs the sinks trust (``adapters.trust``: the system's, or ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR``; an https proxy is checked against them too); the outcome is logged with
    the host only (the URL carries the subscription's token)."""
    host = urlsplit(url).hostname
    try:
        proxy: str | httpx.Proxy | None = proxies.environment_proxy(url)
        verify = trust.client_trust()
        if isinstance(proxy, str) and httpx.URL(proxy).scheme == "https":
            proxy = httpx.Proxy(proxy, ssl_context=verify.context)
        async with httpx.AsyncClient(
            timeout=timeout, proxy=proxy, verify=verify.context, trust_env=False
        ) as client:
            resp = await client.get(url)
        log.info("sns subscription confirmation", host=host, status=resp.status_code)
    except (proxies.ProxyError, trust.TrustError) as exc:  # quote no proxy password, no URL
        log.warning("sns subscription confirmation failed", host=host, error=str(exc))
    except ImportError:  # httpx needs socksio for a socks5 proxy
        problem = "the environment's proxy is a socks5 one, which needs socksio (httpx[socks])"
        log.warning("sns subscription confirmation failed", host=host, error=problem)
    except httpx.HTTPError as exc:
        error = type(exc).__name__
        if (reason := trust.verification_failure(exc)) is not None:
            error += f": the TLS certificate is not trusted ({reason}); trusted: {verify.trusted}"
        log.warning("sns subscription confirmation failed", host=host, error=error)


@contextlib.contextmanager
def _notify_field(name: str) -> Iterator[None]:
    """A sink that cannot be made -- a URL that is not http(s), a proxy variable naming no
    usable proxy (``adapters.proxies``), a CA location giving no certificate
    (``adapters.trust``) -- is the configuration error it is, naming ``notify.<name>`` (and
    ``.caFile`` for its CA file): ``serve`` exits 2 with it (a supervisor gives up) instead of a
    traceback. The sinks' messages quote no URL path, token or proxy password."""
    try:
        yield
    except ValueError as exc:
        setting = exc.setting if isinstance(exc, trust.TrustError) else None
        field = f"notify.{name}.caFile" if setting == "caFile" else f"notify.{name}"
        raise FormatError("serve config", str(exc), field=field) from None


def build_sinks(specs: Sequence[dict[str, Any]]) -> list[tuple[SinkPolicy, Sink]]:
    """Sinks from the ``notify:`` config: generic webhook, Slack, Alertmanager v2."""
    pairs: list[tuple[SinkPolicy, Sink]] = []
    for spec in specs:
        name, kind, url = spec["name"], spec["kind"], spec["url"]
        renotify = spec.get("renotifyMinutes")
        policy = SinkPolicy(
            name=name,
            min_severity=Severity(spec.get("minSeverity", "info")),
            renotify_every=timedelta(minutes=renotify)
            if renotify
            else timedelta(hours=4)
            if kind != "alertmanager"
            else timedelta(minutes=1),
        )
        sink: Sink
        ca_file = spec.get("caFile")
        with _notify_field(name):
            if kind == "slack":
                sink = SlackSink(name, url, ca_file=ca_file)
            elif kind == "alertmanager":
                sink = AlertmanagerSink(name, url, bearer_token=spec.get("token"), ca_file=ca_file)
            else:
                sink = WebhookSink(name, url, secret=spec.get("secret"), ca_file=ca_file)
        pairs.append((policy, sink))
    return pairs


def build_event_feeds(specs: Sequence[dict[str, Any]]) -> list[WebhookSink]:
    """The webhook sinks that also follow change events (``events: true``)."""
    feeds = []
    for spec in specs:
        if spec.get("events"):
            with _notify_field(spec["name"]):
                feeds.append(
                    WebhookSink(
                        spec["name"],
                        spec["url"],
                        secret=spec.get("secret"),
                        ca_file=spec.get("caFile"),
                    )
                )
    return feeds


def build_service(config: ServiceConfig) -> Service:
    """The service of this configuration, its adapters made (nothing opened yet but files)."""
    shared = processes.queue_options()  # {} unless a child of a supervised serve
    gateway_only = shared.get("share") == "producer"  # no sinks, no node state to load
    loaded = files.load_desired(
        [files.parse_path_arg(a) for a in config.desired],
        limit=config.scan.desired_file_limit,
        assume=config.scan.assume,
    )
    snapshot = (
        files.load_nodes(
            [files.parse_path_arg(a) for a in config.nodes], limit=config.scan.nodes_file_limit
        )
        if config.nodes and not gateway_only
        else {}
    )
    queue: EventQueue
    if config.queue.startswith("nats://"):
        queue = NatsQueue(config.queue, max_depth=config.queue_depth)
    else:
        queue = SqliteQueue(config.queue_path, max_depth=config.queue_depth, **shared)
    journal = EventJournal(config.journal) if config.journal and not gateway_only else None
    argocd = None
    if config.argocd_url:
        try:
            argocd = ArgoCDClient(
                config.argocd_url, token=config.argocd_token, verify=not config.argocd_insecure
            )
        except ArgoError as exc:  # e.g. a proxy variable naming no usable proxy
            raise FormatError("serve config", str(exc), field="argocd.url") from None
    identity = default_identity()
    elector, membership, clients = None, None, []
    if not gateway_only and config.leader_election is not None:
        election = config.leader_election
        api = _lease_client(config, election.context, election.in_cluster, "leaderElection")
        clients.append(api)
        store = KubeLeaseStore(api, namespace=election.namespace, name=election.name)
        elector = Elector(store, identity=identity, timing=election.timing)
    if not gateway_only and config.sharding is not None:
        shard = config.sharding
        api = _lease_client(config, shard.context, shard.in_cluster, "sharding")
        clients.append(api)
        group = KubeLeaseGroup(
            api, namespace=shard.namespace, label=MEMBERSHIP_LABEL, value=shard.group
        )
        # the clusters are added as the watchers learn them (kubeconfig, Argo CD Secrets)
        membership = Membership(group, identity=identity, clusters=(), timing=shard.timing)
    return Service(
        config,
        loaded.pools,
        queue,
        snapshot=snapshot,
        journal=journal,
        argocd=argocd,
        elector=elector,
        membership=membership,
        identity=identity,
        lease_clients=clients,
        heals=not gateway_only,
        audit_logs={} if gateway_only else _audit_logs(config),
        # compared in no cluster whatever the clusters: said as the service starts
        skipped=[*loaded.skipped, *cluster_unknown(loaded.pools)],
    )


def _audit_logs(config: ServiceConfig) -> dict[str, AuditLogTail]:
    """``auditLogs:`` (cluster -> the API server's audit log): each followed, its unreadable
    lines logged as warnings. FormatError for a path that cannot be a file."""
    tails = {}
    for cluster, path in config.scan.audit_logs.items():
        file = Path(path).expanduser()
        if file.is_dir() or not file.parent.is_dir():
            raise FormatError(
                "serve config", f"{file}: not a file in an existing directory",
                field=f"auditLogs.{cluster}",
            )  # fmt: skip
        tails[cluster] = AuditLogTail(
            file, cluster, on_bad=lambda line: log.warning("audit log", problem=line)
        )
    return tails


def _lease_client(
    config: ServiceConfig, context: str | None, in_cluster: bool, section: str
) -> KubeApi:
    """A client for the API server that holds a section's Leases."""
    if in_cluster:
        endpoint = in_cluster_endpoint("leases", where=f"{section}.inCluster")
    else:
        if not config.kubeconfig:
            raise FormatError(
                "serve config",
                f"{section}.context needs clusters.kubeconfig (the file that has the context)",
                field=f"{section}.context",
            )
        assert context is not None
        path = Path(config.kubeconfig).expanduser()
        endpoint = load_kubeconfig(path, contexts=[context])[0]
        check_unattended([endpoint], where=f"{section}.context")
    return service_client_factory(endpoint)


async def open_store(service: Service) -> None:
    """The audit store (SQLite by default, PostgreSQL for production), migrated on open."""
    if service.config.store == default_store():
        # the default lives in a state directory of its own: make it on first use
        state = Path(service.config.store.removeprefix("sqlite:///")).parent
        with contextlib.suppress(OSError):  # if it cannot be made, opening says why
            state.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        service.healer.audit = await open_audit_store(service.config.store)
    except AuditStoreError as exc:
        raise FormatError(service.config.store.split("@")[-1], f"audit store: {exc}") from None
    # replicas on one store decide under its lock: one blast radius, an approval runs once
    # (in SQLite as well: one process or several on one file)
    service.healer.shared = service.healer.audit
