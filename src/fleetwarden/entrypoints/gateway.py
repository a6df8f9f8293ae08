"""The event gateway: an ASGI app that authenticates, limits, parses, flags and durably queues
change events, plus the read API (``/api/events``, ``/api/findings``), ``/healthz`` and
``/metrics``.

Answers: 202 once stored; 200 for handshakes; 401 without valid credentials (nothing stored);
413 over the body limit or over ``batch_events`` events in one request; 400 for a body that
does not parse (with the reason); 429 with Retry-After when the queue is over its limit; 503
when the queue cannot store. A surprise in a payload, a header or a query string is a 4xx,
never a 5xx. Before any route, every request passes the front door (``door``: the Host check
and the read side's credentials). Every 4xx answered -- by the door, the ingest path or a
route -- is counted in ``fleetwarden_events_rejected_total{source, reason}``; ``source`` is
the event source, or the route family (``api``, ``ui``, ``metrics``, ``events``, ``other``)
for the rest.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl

import orjson
import structlog
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetwarden import logs
from fleetwarden.core import eventrules, signatures
from fleetwarden.core.events import ChangeEvent
from fleetwarden.core.findings import Finding
from fleetwarden.entrypoints import door
from fleetwarden.entrypoints.metrics import ServiceMetrics
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.events import Parsed, Reply
from fleetwarden.ports.queue import EventQueue, QueueFull, QueueUnavailable
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["SOURCES", "GatewayConfig", "SourceAuth", "create_app"]

log = logs.get_logger("fleetwarden.gateway")

SOURCES = ("aws", "azure", "gcp", "cloudevents", "argocd", "flux")
Parser = Callable[[Any, Mapping[str, str], datetime], Parsed]


@dataclass(frozen=True)
class SourceAuth:
    hmac_secrets: tuple[str, ...] = ()
    bearer_tokens: tuple[str, ...] = ()

    @property
    def configured(self) -> bool:
        return bool(self.hmac_secrets or self.bearer_tokens)

    def __repr__(self) -> str:  # never print secrets
        return (
            f"SourceAuth(hmac={len(self.hmac_secrets)} secret(s), "
            f"bearer={len(self.bearer_tokens)} token(s))"
        )


@dataclass
class GatewayConfig:
    auth: Mapping[str, SourceAuth] = field(default_factory=dict)
    body_limit: int = 2**20
    replay_window: float = 300.0
    retry_after: int = 5
    recent_events: int = 1000
    known_pools: Mapping[str, set[str]] = field(default_factory=dict)  # cluster -> pools
    batch_events: int = 1000  # events in one request (a batch, or one body that names many)
    door: door.DoorConfig = field(default_factory=door.DoorConfig)


_KEYS_LOGGED = 20  # event keys named in one request's debug line


class _TooLarge(Exception):
    pass


# the reason label of a 4xx a route answered (the ingest path and the door name their own)
_REASONS = {400: "malformed", 401: "unauthorized", 403: "forbidden", 404: "not_found"}
_REASONS |= {405: "method", 413: "too_large", 429: "queue_full"}


async def _receive_body(headers: Mapping[str, str], receive: Any, limit: int) -> bytes:
    declared = headers.get("content-length")
    if declared is not None and _is_count(declared) and int(declared) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _send_json(
    send: Any, status: int, payload: Any, extra: Mapping[str, str] | None = None
) -> None:
    body = orjson.dumps(payload)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _problem(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


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
) -> Starlette:
    metrics = metrics or ServiceMetrics()
    recent: deque[ChangeEvent] = deque(maxlen=config.recent_events)

    received = {src: metrics.received.labels(src) for src in parsers}
    accepted = {src: metrics.accepted.labels(src) for src in parsers}
    rejected: dict[tuple[str, str], Any] = {}

    def reject(source: str, reason: str) -> None:
        child = rejected.get((source, reason))
        if child is None:
            child = rejected[(source, reason)] = metrics.rejected.labels(source, reason)
        child.inc()

    def authenticate(
        source: str, headers: Mapping[str, str], query: Mapping[str, str], body: bytes
    ) -> signatures.AuthResult:
        auth = config.auth.get(source)
        if auth is None or not auth.configured:
            return signatures.AuthResult(False, f"no credentials are configured for {source}")
        results = []
        sig = headers.get("x-fleetwarden-signature")
        if auth.hmac_secrets and sig:
            results.append(
                signatures.check_signature(
                    sig, body, auth.hmac_secrets, now=clock.time(), window=config.replay_window
                )
            )
        if auth.bearer_tokens:
            header = headers.get("authorization")
            if header and header.lower().startswith("basic ") and source == "aws":
                results.append(signatures.check_basic(header, auth.bearer_tokens))
            elif header:
                results.append(signatures.check_bearer(header, auth.bearer_tokens))
            elif source == "gcp" and query.get("token"):
                # Pub/Sub push cannot add headers: Google documents a token in the push URL
                results.append(
                    signatures.check_bearer(f"Bearer {query['token']}", auth.bearer_tokens)
                )
        for result in results:
            if result.ok:
                return result
        if results:
            return results[0]
        return signatures.AuthResult(
            False, "missing credentials (X-Fleetwarden-Signature or Authorization)"
        )

    async def ingest(
        source: str, headers: Mapping[str, str], query: Mapping[str, str], receive: Any
    ) -> tuple[int, Any, dict[str, str]]:
        """The hot path, on raw ASGI: (status, JSON body, extra headers)."""
        received[source].inc()
        try:
            body = await _receive_body(headers, receive, config.body_limit)
        except _TooLarge:
            reject(source, "too_large")
            return 413, {"error": f"body over the limit of {config.body_limit} bytes"}, {}
        auth = authenticate(source, headers, query, body)
        if not auth.ok:
            log.info("delivery refused", source=source, reason="unauthorized")
            reject(source, "unauthorized")
            return 401, {"error": auth.reason}, {"www-authenticate": "Bearer"}
        now = clock.now()
        try:
            decoded = _decode(body, headers)
            if isinstance(decoded, list) and len(decoded) > config.batch_events:
                # refused before the parser spends time on it (every batch form is an array)
                reject(source, "too_many_events")
                return 413, {"error": _too_many(len(decoded), config.batch_events)}, {}
            parsed = parsers[source](decoded, headers, now)
        except FormatError as exc:
            reject(source, "malformed")
            return 400, {"error": str(exc)}, {}
        except Exception as exc:  # a surprise in a payload is the sender's problem, not a 5xx
            log.warning("unexpected payload error", source=source, error=type(exc).__name__)
            reject(source, "malformed")
            return (
                400,
                {"error": f"{source} payload: cannot be processed ({type(exc).__name__})"},
                {},
            )
        if len(parsed.events) > config.batch_events:  # one body that names many events
            reject(source, "too_many_events")
            return 413, {"error": _too_many(len(parsed.events), config.batch_events)}, {}
        # the route names the credential that admitted the events: their keys live in its
        # namespace, so no other route's sender can make them look like duplicates
        events = [eventrules.flag_unknown(e.via(source), config.known_pools) for e in parsed.events]
        if events:
            try:
                folded = await queue.put_many(events)
            except QueueFull as exc:
                reject(source, "queue_full")
                return 429, {"error": str(exc)}, {"retry-after": str(config.retry_after)}
            except QueueUnavailable as exc:
                reject(source, "unavailable")
                # the cause (a file path, a broker address) is the operator's, not the sender's
                log.warning("queue unavailable", source=source, error=str(exc))
                return (
                    503,
                    {"error": "cannot store events now: the queue is unavailable; retry later"},
                    {"retry-after": str(config.retry_after)},
                )
            accepted[source].inc(len(events))
            if log.isEnabledFor(logging.DEBUG):  # the hot path: no work for a line not shown
                log.debug(
                    "events queued",
                    source=source,
                    count=len(events),
                    folded=folded,
                    event_keys=[e.key for e in events[:_KEYS_LOGGED]],
                )
            if folded:
                metrics.duplicates.inc(folded)
            recent.extend(events)
        if parsed.reply is not None:
            metrics.handshakes.labels(source).inc()
            if on_reply is not None:
                on_reply(source, parsed.reply)
            if parsed.reply.status is not None:
                return (
                    parsed.reply.status,
                    parsed.reply.body,
                    {k.lower(): v for k, v in parsed.reply.headers.items()},
                )
        return 202, {"accepted": len(events), "ids": [e.id for e in events]}, {}

    async def options(request: Request) -> Response:
        # CloudEvents webhook abuse protection (validation handshake): nothing is stored
        source = request.path_params["source"]
        origin = request.headers.get("webhook-request-origin")
        if not origin:
            return Response(status_code=204, headers={"Allow": "POST, OPTIONS"})
        metrics.handshakes.labels(source).inc()
        headers = {"WebHook-Allowed-Origin": origin, "Allow": "POST, OPTIONS"}
        rate = request.headers.get("webhook-request-rate")
        if rate:
            headers["WebHook-Allowed-Rate"] = "*"
        return Response(status_code=200, headers=headers)

    async def api_events(request: Request) -> Response:
        raw = request.query_params.get("limit", "100")
        if not _is_count(raw) or not 1 <= int(raw) <= config.recent_events:
            return _problem(400, f"limit must be an integer from 1 to {config.recent_events}")
        newest = list(recent)[-int(raw) :][::-1]
        return Response(orjson.dumps([e.to_json() for e in newest]), media_type="application/json")

    async def api_findings(request: Request) -> Response:
        return Response(
            orjson.dumps([f.to_json() for f in findings()]), media_type="application/json"
        )

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def prom(request: Request) -> Response:
        # the gauge keeps its last value when the queue cannot answer; /metrics still must
        with contextlib.suppress(QueueUnavailable):
            metrics.queue_depth.set(await queue.depth())
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

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        # every line of this request carries its id; the answer echoes it
        rid = logs.request_id(headers.get("x-request-id"))
        bound = structlog.contextvars.bind_contextvars(request_id=rid)
        try:
            await route(scope, receive, _echoing(send, rid), headers)
        finally:
            structlog.contextvars.reset_contextvars(**bound)

    async def route(scope: Any, receive: Any, send: Any, headers: dict[str, str]) -> None:
        path = scope.get("path", "")
        source = path[len("/events/") :].strip("/") if path.startswith("/events/") else None
        label = source if source in known else door.family(path)
        refusal = door.check(path, headers, config.door, now=clock.time())
        if refusal is not None:
            if label in known and scope["method"] == "POST":
                received[label].inc()  # a delivery, refused at the door
            reject(label, refusal.reason)
            log.info("request refused", route=label, status=refusal.status, reason=refusal.reason)
            response = door.refusal_response(refusal, path, scope["method"])
            await response(scope, receive, send)
            return
        if source is not None and source not in known:
            reject(label, "unknown_source")
            await _send_json(
                send,
                404,
                {"error": f"unknown event source (known: {', '.join(sorted(known))})"},
            )
            return
        if source is not None and scope["method"] == "POST":
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            status, payload, extra = await ingest(source, headers, query, receive)
            await _send_json(send, status, payload, extra)
            return

        async def counting(message: Any) -> None:
            if message["type"] == "http.response.start" and 400 <= message["status"] < 500:
                reject(label, _REASONS.get(message["status"], "refused"))
            await send(message)

        await app(scope, receive, counting)

    asgi.state = app.state  # type: ignore[attr-defined]
    asgi.recent = recent  # type: ignore[attr-defined]
    return asgi  # type: ignore[return-value]


def _echoing(send: Any, rid: str) -> Any:
    """``send`` with ``X-Request-Id`` added to the response head."""
    header = (b"x-request-id", rid.encode("latin-1"))

    async def echo(message: Any) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), header]}
        await send(message)

    return echo


def _too_many(n: int, limit: int) -> str:
    return f"{n} events in one request: over limits.batchEvents ({limit}); send smaller batches"


def _is_count(text: str) -> bool:
    """1 to 18 ASCII digits: ``str.isdigit`` alone also says yes to "²" and other scripts'
    digits, which ``int`` then refuses (a 500), and to 5,000 digits (too slow to convert)."""
    return text.isascii() and text.isdigit() and len(text) <= 18


def _decode(body: bytes, headers: Mapping[str, str]) -> Any:
    """JSON bodies; CloudEvents binary mode may carry any content type (kept as bytes)."""
    ctype = headers.get("content-type", "").split(";")[0].strip().lower()
    if "ce-specversion" in headers and not ctype.endswith("json"):
        return body
    if not body.strip():
        raise FormatError("request body", "empty body (expected JSON)")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise FormatError("request body", f"not valid JSON: {exc}") from None
