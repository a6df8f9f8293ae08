"""The event gateway: an ASGI app that authenticates, limits, parses, flags and durably queues
change events, plus the read API (``/api/events``, ``/api/findings``), ``/healthz`` and
``/metrics``.

``POST /events/<source>``: the body is read within ``body_limit`` (413 over it), then
``app/ingesting.py`` takes the delivery (authentication, parsing, the durable queue) and says
what to answer. A surprise in a payload, a header or a query string is a 4xx, never a 5xx.
Every request gets a request id (``X-Request-Id`` when sane, else a fresh one), bound to its
log lines and echoed in the answer. Before any route, every request passes the front door
(``core/access.py``: the Host check and the read side's credentials). Every 4xx answered --
by the door, the ingest path or a route -- is counted in
``fleetwarden_events_rejected_total{source, reason}``; ``source`` is the event source, or
the route family (``api``, ``ui``, ``metrics``, ``events``, ``other``) for the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetwarden import logs
from fleetwarden.adapters.asgi import (
    ASGIApp,
    TooLarge,
    json_response,
    problem,
    receive_body,
    send_json,
    watching_status,
    with_request_id,
)
from fleetwarden.adapters.metrics import ServiceMetrics
from fleetwarden.app.ingesting import Parser
from fleetwarden.app.service_config import GatewayConfig
from fleetwarden.core import access
from fleetwarden.core.findings import Finding
from fleetwarden.entrypoints import door
from fleetwarden.formats.events import Reply, is_count, options_reply
from fleetwarden.ports.queue import EventQueue
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock
from fleetwarden.wiring.ingest import build_ingest

__all__ = ["create_app"]

log = logs.get_logger("fleetwarden.gateway")


# the reason label of a 4xx a route answered (the ingest path and the door name their own)
_REASONS = {400: "malformed", 401: "unauthorized", 403: "forbidden", 404: "not_found"}
_REASONS |= {405: "method", 413: "too_large", 429: "queue_full"}


def create_app(
    config: GatewayConfig,
    queue: EventQueue,
    parsers: Mapping[str, Parser],
    *,
    metrics: ServiceMetrics | None = None,
    findings: Callable[[], Sequence[Finding]] = list,
    on_reply: Callable[[str, Reply], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    extra_routes: Sequence[Route] = (),
    health: Callable[[], Mapping[str, Any]] | None = None,
) -> ASGIApp:
    metrics = metrics or ServiceMetrics()
    ingest, counters = build_ingest(config, queue, parsers, metrics, on_reply=on_reply, clock=clock)
    reject, recent = counters.reject, ingest.recent

    async def options(request: Request) -> Response:
        # CloudEvents webhook abuse protection (validation handshake): nothing is stored
        if not request.headers.get("webhook-request-origin"):
            return Response(status_code=204, headers={"Allow": "POST, OPTIONS"})
        metrics.handshakes.labels(request.path_params["source"]).inc()
        reply = options_reply(request.headers)
        return Response(status_code=200, headers=dict(reply.headers))

    async def api_events(request: Request) -> Response:
        raw = request.query_params.get("limit", "100")
        if not is_count(raw) or not 1 <= int(raw) <= config.recent_events:
            return problem(400, f"limit must be an integer from 1 to {config.recent_events}")
        newest = list(recent)[-int(raw) :][::-1]
        return json_response([e.to_json() for e in newest])

    async def api_findings(request: Request) -> Response:
        return json_response([f.to_json() for f in findings()])

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", **(health() if health is not None else {})})

    async def prom(request: Request) -> Response:
        await metrics.read_queue_depth(queue)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    routes = [
        *door.routes(config.door, clock=clock),
        *extra_routes,  # before the gateway's own: serve lists /api/events from its store
        Route("/events/{source:str}", options, methods=["OPTIONS"]),
        Route("/api/events", api_events, methods=["GET"]),
        Route("/api/findings", api_findings, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", prom, methods=["GET"]),
    ]
    app = Starlette(routes=routes)

    known = set(parsers)

    async def route(scope: Any, receive: Any, send: Any, headers: dict[str, str]) -> None:
        path = scope.get("path", "")
        source = path[len("/events/") :].strip("/") if path.startswith("/events/") else None
        label = source if source in known else access.family(path)
        refusal = access.check(path, headers, config.door, now=clock.time())
        if refusal is not None:
            if label in known and scope["method"] == "POST":
                counters.received[label].inc()  # a delivery, refused at the door
            reject(label, refusal.reason)
            log.debug("request refused", route=label, status=refusal.status, reason=refusal.reason)
            response = door.refusal_response(refusal, path, scope["method"])
            await response(scope, receive, send)
            return
        if source is not None and source not in known:
            reject(label, "unknown_source")
            known_list = ", ".join(sorted(known))
            await send_json(send, 404, {"error": f"unknown event source (known: {known_list})"})
            return
        if source is not None and scope["method"] == "POST":
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            counters.received[source].inc()
            try:
                body = await receive_body(headers, receive, config.body_limit)
            except TooLarge:
                reject(source, "too_large")
                limit = config.body_limit
                await send_json(send, 413, {"error": f"body over the limit of {limit} bytes"})
                return
            answer = await ingest.deliver(source, headers, query, body)
            await send_json(send, answer.status, answer.body, answer.headers)
            return

        def seen(status: int) -> None:
            if 400 <= status < 500:
                reject(label, _REASONS.get(status, "refused"))

        await app(scope, receive, watching_status(send, seen))

    # every line of a request carries its id; the answer echoes it
    return with_request_id(route, app)
