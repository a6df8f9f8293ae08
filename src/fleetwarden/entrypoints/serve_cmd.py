"""``fleetwarden serve``: event gateway + durable queue + workers + watchers in one process.

Start-up order: desired state, the queue (SQLite file or NATS JetStream), the finding tracker
(shared by watchers and workers, so a drift is reported once whoever sees it first), the live
watchers (kubeconfig contexts and Argo CD cluster Secrets), the inspection workers, then the
HTTP server. SIGINT/SIGTERM stop the HTTP server first, then the rest.

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
import gc
import os
import socket
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import httpx
import typer
import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetwarden import logs
from fleetwarden.adapters import files, processes
from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.flux import FluxClient
from fleetwarden.adapters.httpserver import server_config
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
from fleetwarden.app.healing import AlreadyApproved, NotLeading
from fleetwarden.app.service_config import (
    ServiceConfig,
    default_store,
    exposure_problem,
    secret_values,
    without_credentials,
)
from fleetwarden.app.serving import Serving, ServingSettings, inspection_counter
from fleetwarden.app.sharding import MEMBERSHIP_LABEL, Membership
from fleetwarden.app.stamping import timeline_seconds
from fleetwarden.app.watching import Event
from fleetwarden.cli.common import fail
from fleetwarden.core.access import DoorConfig
from fleetwarden.core.findings import Severity
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.notifying import SinkPolicy
from fleetwarden.core.policy import Mode, Policy, Status, UnknownDecision
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.signatures import check_bearer
from fleetwarden.core.tracking import FindingEvent
from fleetwarden.entrypoints import (
    dashboard,
    gateway_process,
    history_api,
    incidents_api,
    supervisor,
)
from fleetwarden.entrypoints.gateway import GatewayConfig, create_app
from fleetwarden.entrypoints.service_config import load_service_config
from fleetwarden.entrypoints.workloads_api import WorkloadFleet
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.events import Reply, parsers
from fleetwarden.ports.audit import AuditStoreError
from fleetwarden.ports.kube import KubeApi
from fleetwarden.ports.notify import Sink
from fleetwarden.ports.queue import EventQueue
from fleetwarden.presenting.rendering import visible

__all__ = ["Service", "build_service", "healing_policy", "register", "serve"]

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
    )


def healing_policy(config: ServiceConfig) -> tuple[Policy, str]:
    """``app.serving.healing_policy`` of this configuration."""
    return serving.healing_policy(serving_settings(config))


class Service(Serving):
    """The pipeline (``app/serving.py``) over its adapters, with its HTTP side (the gateway,
    the read API, the dashboard). Tests build it without the HTTP server."""

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
    ) -> None:
        self.config, self.argocd = config, argocd
        # a gateway (role gateway, or role all's gateway process) never heals: never a leader
        self.heals = heals and config.role != "gateway"
        self.lease_clients = list(lease_clients)  # closed when serve stops
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
            on_count=inspection_counter(
                m.duplicates.inc, m.coalesced.inc, lambda r, n: m.inspections.labels(r).inc(n)
            ),
            on_findings=self._set_findings_gauge,
            elector=elector,
            membership=membership,
            identity=identity,
        )
        m.leader.set_function(lambda: 1.0 if self.heals and self.leading else 0.0)
        self.workloads = WorkloadFleet(config, self.fleet, argocd)
        admin = config.auth.get("admin")
        self.gateway_config = GatewayConfig(
            auth=config.auth,
            body_limit=config.body_limit,
            replay_window=config.replay_window,
            known_pools=self.known_pools(),
            batch_events=config.batch_events,
            door=DoorConfig(
                allowed_hosts=config.allowed_hosts,
                read=config.read,
                admin_tokens=admin.bearer_tokens if admin is not None else (),
                metrics_public=config.metrics_public,
            ),
        )
        self.app = create_app(
            self.gateway_config,
            queue,
            parsers(),
            metrics=m,
            findings=self.findings,
            on_reply=self.on_reply,
            extra_routes=[
                *history_api.routes(lambda: self.healer.audit),
                Route("/api/decisions/{id:str}/approve", self._api_approve, methods=["POST"]),
                *self.workloads.routes(),
                *dashboard.routes(self.fleet, self.snapshot, self.findings, self.owners),
                *incidents_api.routes(self.findings),
            ],
            health=lambda: {"leader": self.heals and self.leading},
        )
        self._background: set[asyncio.Task[None]] = set()

    def emit(self, event: Event) -> None:
        super().emit(event)
        if isinstance(event, FindingEvent) and (measured := timeline_seconds(event)) is not None:
            what, seconds = measured
            hist = self.metrics.time_to_detect if what == "detect" else self.metrics.time_to_restore
            hist.labels(event.finding.cluster, event.finding.layer.value).observe(seconds)

    def _set_findings_gauge(self, counts: Mapping[Severity, int]) -> None:
        for severity in Severity:
            self.metrics.findings.labels(severity.value).set(counts.get(severity, 0))

    def _admin_ok(self, request: Request) -> bool:
        auth = self.config.auth.get("admin")
        if auth is None or not auth.bearer_tokens:
            return False
        return check_bearer(request.headers.get("authorization"), auth.bearer_tokens).ok

    async def _api_approve(self, request: Request) -> Response:
        if not self._admin_ok(request):
            return JSONResponse(
                {"error": "approving needs auth.admin credentials"}, status_code=401
            )
        try:
            decision = await self.healer.approve(request.path_params["id"])
        except AlreadyApproved as exc:  # another replica (or this one) ran it
            return JSONResponse(
                {
                    "error": str(exc),
                    "holder": exc.holder,
                    "at": exc.at.isoformat().replace("+00:00", "Z"),
                    "status": exc.status,
                },
                status_code=409,
            )
        except NotLeading as exc:  # the leader approves; a balancer may try another replica
            return JSONResponse({"error": str(exc), "leader": False}, status_code=503)
        except UnknownDecision as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except AuditStoreError as exc:  # cannot tell whether another replica cancelled it
            return JSONResponse(
                {"error": f"cannot check the audit store, nothing was done: {exc}"},
                status_code=503,
            )
        if decision.status is Status.CANCELLED:  # expired, or another mode or configuration
            return JSONResponse(
                {
                    "error": f"decision {decision.id} was cancelled, nothing was done: "
                    f"{decision.reasons[-1]}",
                    "decision": decision.to_json(),
                },
                status_code=409,
            )
        return JSONResponse(decision.to_json())

    def on_reply(self, source: str, reply: Reply) -> None:
        if reply.kind == "sns-subscribe" and reply.url:
            task = asyncio.get_running_loop().create_task(self._confirm_sns(reply.url))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _confirm_sns(self, url: str) -> None:
        host = urlsplit(url).hostname  # the URL carries a token: log the host only
        try:
            async with httpx.AsyncClient(timeout=10.0, trust_env=True) as client:
                resp = await client.get(url)
            log.info("sns subscription confirmation", host=host, status=resp.status_code)
        except httpx.HTTPError as exc:
            log.warning("sns subscription confirmation failed", host=host, error=type(exc).__name__)

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
        if kind == "slack":
            sink = SlackSink(name, url)
        elif kind == "alertmanager":
            sink = AlertmanagerSink(name, url, bearer_token=spec.get("token"))
        else:
            sink = WebhookSink(name, url, secret=spec.get("secret"))
        pairs.append((policy, sink))
    return pairs


def build_event_feeds(specs: Sequence[dict[str, Any]]) -> list[WebhookSink]:
    """The webhook sinks that also follow change events (``events: true``)."""
    return [
        WebhookSink(spec["name"], spec["url"], secret=spec.get("secret"))
        for spec in specs
        if spec.get("events")
    ]


def build_service(config: ServiceConfig) -> Service:
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
        argocd = ArgoCDClient(
            config.argocd_url, token=config.argocd_token, verify=not config.argocd_insecure
        )
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
    )


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


async def serve(
    service: Service,
    *,
    ready: asyncio.Event | None = None,
    sockets: list[socket.socket] | None = None,
) -> None:
    cfg = service.config
    if service.healer.audit is None:
        await open_store(service)
    service.recorder.audit = service.healer.audit  # the workers' store of record
    await service.healer.restore()  # the guards' history, before any finding is decided
    service.initial_scan()
    # the desired state and node snapshots live for the whole run: keep them out of the cyclic
    # GC's generations, and collect young objects less often (fewer pauses on the hot path)
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 50)
    refused = service.metrics.rejected
    server = uvicorn.Server(
        server_config(
            service.app,
            host=cfg.host,
            port=cfg.port,
            header_bytes=cfg.header_bytes,
            # refused by the HTTP parser, before any route: counted under source "http"
            on_refused=lambda reason: refused.labels("http", reason).inc(),
        )
    )
    workers = asyncio.create_task(service.run_workers(), name="workers")
    freezer = asyncio.create_task(_freeze_forever(), name="gc-freeze")
    try:
        serving = asyncio.create_task(server.serve(sockets=sockets), name="http")
        if ready is not None:
            while not server.started and not serving.done():
                await asyncio.sleep(0.01)
            ready.set()
        done, _ = await asyncio.wait({serving, workers}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # a crash of either side is not silent
    finally:
        server.should_exit = True
        freezer.cancel()
        workers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await workers
        await service.queue.close()
        for feed in service.feeds:
            await feed.aclose()
        if service.healer.audit is not None:
            await service.healer.audit.close()
        if service.argocd is not None:
            await service.argocd.aclose()
        for client in service.lease_clients:
            await client.aclose()


async def _freeze_forever(interval: float = 60.0) -> None:
    """Keep what the watchers cache (node and workload indexes: millions of small objects in
    a big fleet) out of the cyclic GC: a full collection would walk it all and stall the event
    loop for a second (benchmarks/fleet_api.py: p99 1.3 s instead of 96 ms). Young cycles are
    collected first; the survivors are frozen. The cache has no cycles, so what it drops is
    still freed by reference counting."""
    while True:
        await asyncio.sleep(interval)
        gc.collect(1)
        gc.freeze()


def _serve_child(service: Service, child: processes.ChildSetup) -> Coroutine[Any, Any, None]:
    """One process of a supervised serve (``adapters/processes.py``)."""
    if child.role == "gateway":
        return gateway_process.run(
            service.config,
            service.gateway_config,
            service.queue,
            listen_fd=child.listen_fd,
            worker_socket=child.worker_socket,
            metrics=service.metrics,
            on_reply=service.on_reply,
        )
    return serve(service, sockets=[socket.socket(fileno=os.dup(child.listen_fd))])


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where installed (uvicorn[standard] brings it): several times faster socket I/O."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_command(
        config: Annotated[
            Path | None,
            typer.Option(
                "--config",
                "-c",
                metavar="FILE",
                help="Service YAML: listen, queue, desired, nodes, clusters, auth.<source>, limits "
                "(see the README).",
            ),
        ] = None,
        log_format: Annotated[
            str | None,
            typer.Option(
                "--log-format",
                metavar="json|console",
                help="Log lines on stderr: JSON lines, or for a person "
                "(default: json when stderr is not a terminal, else console).",
            ),
        ] = None,
        log_level: Annotated[
            str,
            typer.Option(
                "--log-level",
                metavar="debug|info|warning|error",
                help="The least severe log lines shown.",
            ),
        ] = "info",
    ) -> None:
        """Run the event gateway (POST /events/<source>), the durable queue, the inspection
        workers and the live watchers, with /api/events, /api/findings, /healthz and
        /metrics."""
        child = processes.child_setup()  # role: all's gateway or worker process, or None
        fmt = log_format or ("console" if sys.stderr.isatty() else "json")
        if fmt not in ("json", "console"):
            fail(f"--log-format: {fmt!r} is not json or console")
        if log_level.lower() not in ("debug", "info", "warning", "error", "critical"):
            fail(f"--log-level: {log_level!r} is not debug, info, warning, error or critical")
        logs.configure(fmt, log_level)
        try:
            cfg = load_service_config(config)
            logs.add_secrets(secret_values(cfg))  # before anything can log a value of it
            problem = exposure_problem(cfg)  # before anything is read or opened
            if problem is not None:
                fail(f"{config}: {problem}")
            if supervisor.wanted(cfg):  # gateway and worker in two processes
                raise typer.Exit(supervisor.run(cfg))
            service = build_service(cfg)
        except FormatError as exc:
            fail(str(exc))
        speaks = child is None or child.role == "worker"  # one line per service, not per child
        if speaks and not any(a.configured for n, a in cfg.auth.items() if n != "admin"):
            log.warning("no auth.<source> is configured: every event delivery is refused (401)")
        # values from the config file: printed literally (rendering.visible), like all data
        if speaks:
            log.info(
                "serving",
                url=visible(f"http://{cfg.host}:{cfg.port}"),
                queue=visible(without_credentials(cfg.queue)),
                desired_pools=len(service.specs),
            )
        try:
            with (
                contextlib.suppress(KeyboardInterrupt),
                asyncio.Runner(loop_factory=_loop_factory()) as runner,
            ):
                runner.run(serve(service) if child is None else _serve_child(service, child))
        except FormatError as exc:  # the audit store, or the in-cluster credentials
            fail(str(exc))
