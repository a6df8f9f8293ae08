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
import gc
import os
import socket
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import httpx
import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetwarden.adapters.httpserver import server_config
from fleetwarden.adapters.metrics import ServiceMetrics
from fleetwarden.app import supervising
from fleetwarden.app.service_config import ServiceConfig
from fleetwarden.entrypoints.gateway import GatewayConfig, create_app
from fleetwarden.formats.events import Reply, parsers
from fleetwarden.ports.queue import EventQueue, QueueUnavailable

__all__ = ["GATEWAY_FAMILIES", "SUMMED_FAMILIES", "create_gateway_app", "merge_metrics", "run"]

# what the gateway process counts; the worker's copies of these stay at zero or repeat ours
GATEWAY_FAMILIES = frozenset(
    {
        "fleetwarden_events_received",
        "fleetwarden_events_accepted",
        "fleetwarden_events_rejected",
        "fleetwarden_handshakes",
        "fleetwarden_queue_depth",
    }
)
SUMMED_FAMILIES = frozenset({"fleetwarden_events_duplicate"})  # both processes add to these
_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"content-length",
    }
)
_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


def create_gateway_app(
    config: GatewayConfig,
    queue: EventQueue,
    *,
    worker: httpx.AsyncClient,
    metrics: ServiceMetrics,
    on_reply: Callable[[str, Reply], None] | None = None,
) -> Any:
    """The gateway's ASGI app; ``worker``: a client whose transport reaches the worker."""

    async def healthz(request: Request) -> Response:
        try:
            resp = await worker.get("/healthz", headers={"host": "localhost"}, timeout=2.0)
            answer = resp.json() if resp.status_code == 200 else None
            error = "" if answer is not None else f"answered {resp.status_code}"
        except (httpx.HTTPError, ValueError) as exc:
            answer, error = None, f"no answer ({type(exc).__name__})"
        code, body = supervising.combined_health(
            {"status": "ok", "pid": os.getpid()}, answer, worker_error=error
        )
        return JSONResponse(body, status_code=code)

    async def prom(request: Request) -> Response:
        with contextlib.suppress(QueueUnavailable):  # the gauge keeps its last value
            metrics.queue_depth.set(await queue.depth())
        worker_text = None
        try:
            resp = await worker.get("/metrics", headers=_forwarded(request), timeout=5.0)
            if resp.status_code == 200:
                worker_text = resp.text
        except httpx.HTTPError:
            worker_text = None
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
        try:
            resp = await worker.request(
                request.method, target, headers=_forwarded(request), content=body, timeout=30.0
            )
        except httpx.LocalProtocolError as exc:  # a request h11 will not write: the client's
            return JSONResponse({"error": f"cannot pass the request on: {exc}"}, status_code=400)
        except httpx.HTTPError:
            return JSONResponse(
                {"error": "the worker process is not answering (restarting?); retry shortly"},
                status_code=503,
                headers={"retry-after": "1"},
            )
        out = Response(resp.content, status_code=resp.status_code)
        out.raw_headers = [(k, v) for k, v in resp.headers.raw if k.lower() not in _HOP] + [
            (b"content-length", str(len(resp.content)).encode())
        ]
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


def _forwarded(request: Request) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in request.headers.raw if k.lower() not in _HOP]


def merge_metrics(gateway: Iterable[Metric], worker_text: str | None) -> bytes:
    """One exposition for both processes (which families come from where: module docstring).
    Without the worker's text, the gateway's families and ``process_up{process="worker"} 0``."""
    ours = {m.name: m for m in gateway}
    theirs = {m.name: m for m in text_string_to_metric_families(worker_text or "")}
    merged: list[Metric] = []
    for name in dict.fromkeys([*ours, *theirs]):
        base = name.removesuffix("_created")
        if base != name and base in ours:
            continue  # the text form's "_created" family: ours carries its own
        mine, other = ours.get(name), theirs.get(name)
        if name in GATEWAY_FAMILIES or other is None:
            chosen = mine
        elif name in SUMMED_FAMILIES and mine is not None:
            chosen = _summed(mine, other)
        else:
            chosen = other
        if chosen is not None:
            merged.append(chosen)
    up = GaugeMetricFamily(
        "fleetwarden_process_up", "1 when the process answers, by process", labels=["process"]
    )
    up.add_metric(["gateway"], 1)
    up.add_metric(["worker"], 1 if worker_text is not None else 0)
    merged.append(up)

    class _Fixed(Collector):
        def collect(self) -> Iterator[Metric]:
            return iter(merged)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed())
    return generate_latest(registry)


def _summed(a: Metric, b: Metric) -> Metric:
    out = Metric(a.name, a.documentation, a.type, a.unit)
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for sample in [*a.samples, *b.samples]:
        key = (sample.name, tuple(sorted(sample.labels.items())))
        if key in values and sample.name.endswith("_created"):
            values[key] = min(values[key], sample.value)  # the earlier start
        else:
            values[key] = values.get(key, 0.0) + sample.value
    for (name, labels), value in values.items():
        out.add_sample(name, dict(labels), value)
    return out


async def run(
    config: ServiceConfig,
    gateway_config: GatewayConfig,
    queue: EventQueue,
    *,
    listen_fd: int,
    worker_socket: str,
    metrics: ServiceMetrics,
    on_reply: Callable[[str, Reply], None] | None = None,
) -> None:
    """Serve on the inherited listening socket until SIGTERM/SIGINT; then close the queue."""
    worker = httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=worker_socket), base_url="http://worker"
    )
    app = create_gateway_app(
        gateway_config, queue, worker=worker, metrics=metrics, on_reply=on_reply
    )
    refused = metrics.rejected
    server = uvicorn.Server(
        server_config(
            app,
            host=config.host,
            port=config.port,
            header_bytes=config.header_bytes,
            on_refused=lambda reason: refused.labels("http", reason).inc(),
        )
    )
    # the gateway's objects live for the whole run: out of the cyclic GC (see serve_cmd.serve)
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 50)
    sock = socket.socket(fileno=os.dup(listen_fd))
    try:
        await server.serve(sockets=[sock])
    finally:
        await queue.close()
        await worker.aclose()
        sock.close()
