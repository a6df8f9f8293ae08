"""Running ``serve``: an ASGI app under uvicorn (``adapters/httpserver.py``) beside the
service's workers, with the garbage collector set for a long-lived cache; the event loop
(uvloop where installed); ``run_service``: the service, or one process of a supervised serve,
until SIGINT/SIGTERM, announced in the log; ``serve_gateway``: a supervised serve's gateway
process."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import socket
from collections.abc import Callable
from typing import Any

import uvicorn

from fleetwarden import logs
from fleetwarden.adapters.httpserver import server_config
from fleetwarden.adapters.metrics import ServiceMetrics
from fleetwarden.adapters.processes import ChildSetup
from fleetwarden.adapters.worker_link import WorkerLink
from fleetwarden.app.service_config import ServiceConfig, without_credentials
from fleetwarden.presenting.rendering import visible
from fleetwarden.wiring.service import Service, open_store

__all__ = ["http_server", "loop_factory", "run_service", "serve", "serve_gateway"]

log = logs.get_logger("fleetwarden.serve")

# the gateway process's app over the service and the link to its worker
# (``entrypoints/gateway_process.create_gateway_app``)
GatewayApp = Callable[[Service, WorkerLink], Any]


def run_service(svc: Service, child: ChildSetup | None, *, gateway: GatewayApp) -> None:
    """Announce the service in the log and run it until SIGINT/SIGTERM: the whole service
    (``child`` None), or one process of a supervised serve (``adapters/processes.py``): the
    gateway (``gateway``'s app, by ``serve_gateway``), or the worker on its inherited socket.
    Raises ``FormatError`` when the audit store or the in-cluster credentials are not
    usable."""
    cfg = svc.config
    speaks = child is None or child.role == "worker"  # one line per service, not per child
    if speaks and not any(a.configured for n, a in cfg.auth.items() if n != "admin"):
        log.warning("no auth.<source> is configured: every event delivery is refused (401)")
    # values from the config file: printed literally (rendering.visible), like all data
    if speaks:
        log.info(
            "serving",
            url=visible(f"http://{cfg.host}:{cfg.port}"),
            queue=visible(without_credentials(cfg.queue)),
            desired_pools=len(svc.specs),
        )
    if child is None:
        main = serve(svc)
    elif child.role == "gateway":
        main = serve_gateway(svc, gateway, listen_fd=child.listen_fd, worker=child.worker_socket)
    else:
        main = serve(svc, sockets=[socket.socket(fileno=os.dup(child.listen_fd))])
    with (
        contextlib.suppress(KeyboardInterrupt),
        asyncio.Runner(loop_factory=loop_factory()) as runner,
    ):
        runner.run(main)


async def serve_gateway(svc: Service, gateway: GatewayApp, *, listen_fd: int, worker: str) -> None:
    """The gateway process of a supervised serve: ``gateway``'s app on the inherited
    listening socket until SIGTERM/SIGINT; then the queue and the link to the worker (over
    its private Unix socket ``worker``) closed."""
    link = WorkerLink(worker)
    server = http_server(gateway(svc, link), svc.config, svc.metrics)
    sock = socket.socket(fileno=os.dup(listen_fd))
    try:
        await server.serve(sockets=[sock])
    finally:
        await svc.queue.close()
        await link.aclose()
        sock.close()


def http_server(app: Any, config: ServiceConfig, metrics: ServiceMetrics) -> uvicorn.Server:
    """uvicorn for ``app`` on the configured address, with what is alive now kept out of the
    cyclic GC: the desired state, node snapshots and the gateway's objects live for the whole
    run (fewer and shorter pauses on the hot path)."""
    refused = metrics.rejected
    server = uvicorn.Server(
        server_config(
            app,
            host=config.host,
            port=config.port,
            header_bytes=config.header_bytes,
            # refused by the HTTP parser, before any route: counted under source "http"
            on_refused=lambda reason: refused.labels("http", reason).inc(),
        )
    )
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 50)
    return server


async def serve(
    service: Service,
    *,
    ready: asyncio.Event | None = None,
    sockets: list[socket.socket] | None = None,
) -> None:
    """Open the audit store, restore the guards, scan once, then run ``service.app`` and the
    workers until either stops or this is cancelled; then close everything."""
    if service.healer.audit is None:
        await open_store(service)
    service.recorder.audit = service.healer.audit  # the workers' store of record
    await service.healer.restore()  # the guards' history, before any finding is decided
    service.initial_scan()
    server = http_server(service.app, service.config, service.metrics)
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
        await service.close()


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


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where installed (uvicorn[standard] brings it): several times faster socket I/O."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
