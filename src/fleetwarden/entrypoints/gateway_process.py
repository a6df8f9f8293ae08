"""The routes of the gateway process of a supervised ``serve`` (``adapters/processes.py``;
served by ``wiring.running.serve_gateway``).

It answers ``POST /events/<source>`` itself -- the door, authentication, limits, parsing,
the append to the shared SQLite queue (its producer side: WAL, group commit, fsync before
the 202) -- and ``OPTIONS /events/<source>`` and the login form, which need no state. Every
other route (the read API, the dashboard, approvals) is the worker's: passed on as it came
over the worker's private Unix socket, and answered 503 with ``Retry-After`` while the worker
is restarting. ``/healthz`` and ``/metrics`` speak for both processes: ``/healthz`` is 200
only when both are ok (``supervising.combined_health``); ``/metrics`` is the gateway's
families (deliveries received, accepted, refused; handshakes; queue depth), the worker's
(inspections, latencies, findings, coalesced), the sum of both for duplicates (folded by the
queue + found by the stores), and ``fleetwarden_process_up{process}``.
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetwarden.adapters.asgi import ASGIApp
from fleetwarden.adapters.metrics import merge_metrics
from fleetwarden.adapters.worker_link import WorkerLink, end_to_end, relay
from fleetwarden.app import supervising
from fleetwarden.app.service_config import gateway_config
from fleetwarden.entrypoints.gateway import create_app
from fleetwarden.formats.events import parsers
from fleetwarden.wiring.service import Service

__all__ = ["create_gateway_app"]

_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
STREAMED = frozenset({"/api/stream"})  # passed on as they come (server-sent events)


def create_gateway_app(svc: Service, worker: WorkerLink) -> ASGIApp:
    """The gateway's ASGI app over ``svc``'s queue and metrics; ``worker``: the link to the
    worker process (``wiring.running.serve_gateway`` serves it)."""
    config = gateway_config(svc.config, svc.known_pools())
    queue, metrics = svc.queue, svc.metrics

    async def healthz(request: Request) -> Response:
        answer, error = await worker.health()
        code, body = supervising.combined_health(
            {"status": "ok", "pid": os.getpid()}, answer, worker_error=error
        )
        return JSONResponse(body, status_code=code)

    async def prom(request: Request) -> Response:
        await metrics.read_queue_depth(queue)
        worker_text = await worker.metrics(end_to_end(request.headers.raw))
        body = merge_metrics(metrics.registry.collect(), worker_text)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def to_worker(request: Request) -> Response:
        stream = request.method == "GET" and request.url.path in STREAMED
        return await relay(worker, request, body_limit=config.body_limit, stream=stream)

    return create_app(
        config,
        queue,
        parsers(),
        metrics=metrics,
        on_reply=svc.on_reply,
        extra_routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", prom, methods=["GET"]),
            Route("/{path:path}", to_worker, methods=_METHODS),
        ],
    )
