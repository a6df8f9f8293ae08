"""``GET /api/events`` and ``GET /api/decisions`` of ``serve``: read from the audit store.

Both answer a JSON list, newest first (``app/listing.py``: each event once, the same before
and after a restart). Query parameters, all optional:

``limit``        1..1000, default 100
``cursor``       where the page starts: the value the previous page's ``Link`` header gave
``source``       the event's ``source`` attribute (decisions: that of their cause), exactly
``cluster``      exact, or a glob with ``*``
``actor``        exact, or a glob with ``*`` (``actor=*:user/alice``)
``route``        events only: the gateway route it came through (``aws``, ``cloudevents``...)
``status``       decisions only: ``pending-approval``, ``execute``, ``dry-run``...

When more may follow, the answer has ``Link: </api/events?...&cursor=N>; rel="next"``
(RFC 8288) and ``X-Next-Cursor: N``; a client that reads only the body sees the newest
``limit`` items, as before paging existed. A parameter that is not valid is a 400 naming it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetwarden.app import listing
from fleetwarden.ports.audit import AuditStore, AuditStoreError

__all__ = ["routes"]


def routes(store: Callable[[], AuditStore | None]) -> list[Route]:
    """The two routes; ``store`` gives the open audit store (None until it is open)."""

    def answer(
        read: Callable[..., Awaitable[listing.Page]], filters: tuple[str, ...]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            audit = store()
            if audit is None:
                return JSONResponse({"error": "the audit store is not open yet"}, status_code=503)
            try:
                q = listing.page_query(request.query_params, filters)
            except listing.BadParameter as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            try:
                page = await read(audit, limit=q.limit, before=q.before, **q.filters)
            except AuditStoreError as exc:
                error = f"cannot read the audit store: {exc}"
                return JSONResponse({"error": error}, status_code=503)
            params = request.query_params.multi_items()
            headers = listing.next_page_headers(request.url.path, params, page.cursor)
            return Response(
                orjson.dumps(page.items), media_type="application/json", headers=headers
            )

        return endpoint

    return [
        Route("/api/events", answer(listing.list_events, listing.EVENT_FILTERS), methods=["GET"]),
        Route(
            "/api/decisions",
            answer(listing.list_decisions, listing.DECISION_FILTERS),
            methods=["GET"],
        ),
    ]
