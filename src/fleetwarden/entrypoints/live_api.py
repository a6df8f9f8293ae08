"""The dashboard's live side over the running pipeline (``app.serving.Serving``):

- ``GET /api/stream``: server-sent events (``text/event-stream``) from ``Serving.live``:
  ``finding`` (appeared / changed / cleared), ``event`` (lifecycle), ``audit`` (decisions,
  actions, outcomes, notes as stored). Each message has an ``id``; a client that reconnects
  with ``Last-Event-ID`` (EventSource does) gets what it missed from the ring, or one
  ``reload`` message when the ring no longer has it. A comment line every ``heartbeat``
  seconds keeps proxies from closing an idle stream. A client too slow to keep up is dropped
  with a ``dropped`` message (the pipeline never waits for it). A supervised serve's gateway
  process passes the stream on as it comes (``entrypoints/gateway_process.py``).
- ``GET /api/fleet/grid``: the heatmap (``presenting.dashboard.fleet_grid``).
- ``GET /api/pools/{cluster}/{pool}``: one pool's detail (``presenting.dashboard.pool_detail``).
- ``POST /api/decisions/{id}/approve`` and ``/deny``: carry out or refuse a request waiting for
  approval (``app.approving``, ``app.denying``); both need an ``auth.admin`` token as
  ``Authorization: Bearer`` (a header another site's page cannot make a browser send): 401
  without, 404 for an id that waits for nothing, 409 for one cancelled before, 503 on a
  follower or when the store cannot answer.
- ``GET /api/timeline?minutes=N``: findings opened/cleared over the last N minutes (5-10080) and
  MTTD/MTTR per pool, from the recent finding events the service keeps.

Auth is the door's, as for every ``/api/`` route (read token or session cookie).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from fleetwarden.adapters.asgi import json_response, problem
from fleetwarden.app import denying
from fleetwarden.app.approving import approval
from fleetwarden.app.serving import Serving
from fleetwarden.core.access import admin_ok
from fleetwarden.core.integers import ascii_int
from fleetwarden.presenting.dashboard import drift_timeline, fleet_grid, pool_detail
from fleetwarden.presenting.event_stream import frames

__all__ = ["routes"]

_STREAM_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # nginx: pass each message on as it comes
    "X-Content-Type-Options": "nosniff",
}


def _last_id(request: Request) -> int | None:
    raw = request.headers.get("last-event-id") or request.query_params.get("lastEventId")
    return ascii_int(raw) if raw is not None else None


def routes(
    pipeline: Serving,
    *,
    heartbeat: float = 15.0,
    admin_tokens: Sequence[str] = (),
) -> list[Route]:
    live = pipeline.live

    async def stream(request: Request) -> Response:
        body = frames(live, live.follow(_last_id(request)), heartbeat)
        return StreamingResponse(body, media_type="text/event-stream", headers=_STREAM_HEADERS)

    async def grid(request: Request) -> Response:
        clusters = [*pipeline.fleet.running, *pipeline.snapshot, *pipeline.owners()]
        held = pipeline.pools_not_compared().items()
        unseen = {c: [s.pool for s in skips if s.pool] for c, skips in held}
        doc = fleet_grid(clusters, pipeline.known_pools(), pipeline.findings(), unseen)
        return json_response(doc)

    async def pool(request: Request) -> Response:
        cluster, name = request.path_params["cluster"], request.path_params["pool"]
        doc = pool_detail(
            cluster,
            name,
            pipeline.specs,
            pipeline.nodes_of(cluster),
            pipeline.findings(),
            list(pipeline.events),
            pipeline.pools_not_compared().get(cluster, []),
        )
        if doc["desired"] is None and not (doc["nodes"] or doc["layers"] or doc["skipped"]):
            return problem(404, f"no pool {name!r} in cluster {cluster!r}")
        return json_response(doc)

    async def timeline(request: Request) -> Response:
        minutes = ascii_int(request.query_params.get("minutes", "60"))
        if minutes is None or not 5 <= minutes <= 10080:
            return problem(400, "minutes must be an integer from 5 to 10080")
        window = timedelta(minutes=minutes)
        doc = drift_timeline(list(pipeline.events), now=pipeline.clock.now(), window=window)
        return json_response(doc)

    def by_admin(
        answer: Callable[[str, bool], Awaitable[tuple[int, dict[str, Any]]]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            admin = admin_ok(request.headers, admin_tokens)
            code, body = await answer(request.path_params["id"], admin)
            return JSONResponse(body, code)

        return endpoint

    by = "an admin (dashboard)"
    approve = by_admin(lambda decision, admin: approval(pipeline.healer, decision, admin=admin))
    deny = by_admin(
        lambda decision, admin: denying.denial(pipeline.healer, decision, admin=admin, by=by)
    )
    return [
        Route("/api/decisions/{id:str}/approve", approve, methods=["POST"]),
        Route("/api/decisions/{id:str}/deny", deny, methods=["POST"]),
        Route("/api/stream", stream, methods=["GET"]),
        Route("/api/fleet/grid", grid, methods=["GET"]),
        Route("/api/pools/{cluster:str}/{pool:str}", pool, methods=["GET"]),
        Route("/api/timeline", timeline, methods=["GET"]),
    ]
