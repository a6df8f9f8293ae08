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
from urllib.parse import urlencode

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetwarden.app import listing
from fleetwarden.ports.audit import AuditStore, AuditStoreError

__all__ = ["routes"]

_TEXT_LIMIT = 1024  # characters of a filter value


class _BadParameter(ValueError):
    pass


Filters = dict[str, str | None]
Reader = Callable[[AuditStore, Filters, int, int | None], Awaitable[listing.Page]]


def routes(store: Callable[[], AuditStore | None]) -> list[Route]:
    """The two routes; ``store`` gives the open audit store (None until it is open)."""

    async def events(request: Request) -> Response:
        return await _answer(
            request,
            store(),
            lambda s, q, limit, before: listing.list_events(
                s,
                limit=limit,
                before=before,
                source=q["source"],
                route=q["route"],
                cluster=q["cluster"],
                actor=q["actor"],
            ),
            ("source", "route", "cluster", "actor"),
        )

    async def decisions(request: Request) -> Response:
        return await _answer(
            request,
            store(),
            lambda s, q, limit, before: listing.list_decisions(
                s,
                limit=limit,
                before=before,
                status=q["status"],
                source=q["source"],
                cluster=q["cluster"],
                actor=q["actor"],
            ),
            ("status", "source", "cluster", "actor"),
        )

    return [
        Route("/api/events", events, methods=["GET"]),
        Route("/api/decisions", decisions, methods=["GET"]),
    ]


async def _answer(
    request: Request,
    store: AuditStore | None,
    read: Reader,
    filters: tuple[str, ...],
) -> Response:
    if store is None:
        return JSONResponse({"error": "the audit store is not open yet"}, status_code=503)
    try:
        limit = _number(request, "limit", low=1, high=listing.MAX_LIMIT) or 100
        before = _number(request, "cursor", low=1, high=2**63 - 1)
        query = {name: _text(request, name) for name in filters}
    except _BadParameter as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    try:
        page = await read(store, query, limit, before)
    except AuditStoreError as exc:
        return JSONResponse({"error": f"cannot read the audit store: {exc}"}, status_code=503)
    headers: dict[str, str] = {}
    if page.cursor is not None:
        params = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor"]
        params.append(("cursor", str(page.cursor)))
        headers["Link"] = f'<{request.url.path}?{urlencode(params)}>; rel="next"'
        headers["X-Next-Cursor"] = str(page.cursor)
    return Response(orjson.dumps(page.items), media_type="application/json", headers=headers)


def _number(request: Request, name: str, *, low: int, high: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses
    if not (raw.isascii() and raw.isdigit()) or not low <= int(raw) <= high:
        raise _BadParameter(f"{name} must be an integer from {low} to {high}")
    return int(raw)


def _text(request: Request, name: str) -> str | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if not raw or len(raw) > _TEXT_LIMIT:
        raise _BadParameter(f"{name} must be 1 to {_TEXT_LIMIT} characters")
    return raw
