"""The gateway process of a supervised ``serve`` (``adapters/processes.py``).

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

import contextlib
import os
import socket as sockets
from collections.abc import Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from fleetwarden.adapters.metrics import ServiceMetrics, merge_metrics
from fleetwarden.adapters.worker_link import Unsendable, WorkerLink, WorkerUnreachable, end_to_end
from fleetwarden.app import supervising
from fleetwarden.app.service_config import GatewayConfig, gateway_config
from fleetwarden.entrypoints.gateway import create_app
from fleetwarden.formats.events import Reply, parsers
from fleetwarden.ports.queue import EventQueue, QueueUnavailable
from fleetwarden.wiring import running
from fleetwarden.wiring.service import Service

__all__ = ["create_gateway_app", "run"]

_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
STREAMED = frozenset({"/api/stream"})  # passed on as they come (server-sent events)


def create_gateway_app(
    config: GatewayConfig,
    queue: EventQueue,
    *,
    worker: WorkerLink,
    metrics: ServiceMetrics,
    on_reply: Callable[[str, Reply], None] | None = None,
) -> Any:
    """The gateway's ASGI app; ``worker``: the link to the worker process."""

    async def healthz(request: Request) -> Response:
        answer, error = await worker.health()
        code, body = supervising.combined_health(
            {"status": "ok", "pid": os.getpid()}, answer, worker_error=error
        )
        return JSONResponse(body, status_code=code)

    async def prom(request: Request) -> Response:
        with contextlib.suppress(QueueUnavailable):  # the gauge keeps its last value
            metrics.queue_depth.set(await queue.depth())
        worker_text = await worker.metrics(end_to_end(request.headers.raw))
        body = merge_metrics(metrics.registry.collect(), worker_text)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def to_worker(request: Request) -> Response:
        target = request.url.path
        if request.url.query:
            target += "?" + request.url.query
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > config.body_limit:
                return JSONResponse(
                    {"error": f"body over the limit of {config.body_limit} bytes"},
                    status_code=413,
                )
        headers = end_to_end(request.headers.raw)
        try:
            if request.method == "GET" and request.url.path in STREAMED:
                stream = await worker.open_stream(target, headers)
                out = StreamingResponse(
                    stream.chunks,
                    status_code=stream.status,
                    background=BackgroundTask(stream.close),
                )
                out.raw_headers = stream.headers
                return out
            answer = await worker.forward(request.method, target, headers, body)
        except Unsendable as exc:
            return JSONResponse({"error": f"cannot pass the request on: {exc}"}, status_code=400)
        except WorkerUnreachable:
            return JSONResponse(
                {"error": "the worker process is not answering (restarting?); retry shortly"},
                status_code=503,
                headers={"retry-after": "1"},
            )
        out = Response(answer.content, status_code=answer.status)
        out.raw_headers = answer.headers
        return out

    return create_app(
        config,
        queue,
        parsers(),
        metrics=metrics,
        on_reply=on_reply,
        extra_routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", prom, methods=["GET"]),
            Route("/{path:path}", to_worker, methods=_METHODS),
        ],
    )


async def run(svc: Service, *, listen_fd: int, socket: str) -> None:
    """Serve on the inherited listening socket until SIGTERM/SIGINT; then close the queue.
    ``socket``: the worker's private Unix socket."""
    worker = WorkerLink(socket)
    gateway = gateway_config(svc.config, svc.known_pools())
    app = create_gateway_app(
        gateway, svc.queue, worker=worker, metrics=svc.metrics, on_reply=svc.on_reply
    )
    server = running.http_server(app, svc.config, svc.metrics)
    sock = sockets.socket(fileno=os.dup(listen_fd))
    try:
        await server.serve(sockets=[sock])
    finally:
        await svc.queue.close()
        await worker.aclose()
        sock.close()
