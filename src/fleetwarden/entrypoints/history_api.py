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

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fleetwarden.adapters.asgi import json_response
from fleetwarden.app import listing
from fleetwarden.ports.audit import AuditStore

__all__ = ["routes"]


def routes(store: Callable[[], AuditStore | None]) -> list[Route]:
    """The two routes; ``store`` gives the open audit store (None until it is open)."""

    def answer(
        read: Callable[..., Awaitable[listing.Page]], filters: tuple[str, ...]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            params = request.query_params.multi_items()
            got = await listing.page_answer(store(), read, filters, request.url.path, params)
            return json_response(got.body, got.status, got.headers)

        return endpoint

    return [
        Route("/api/events", answer(listing.list_events, listing.EVENT_FILTERS), methods=["GET"]),
        Route(
            "/api/decisions",
            answer(listing.list_decisions, listing.DECISION_FILTERS),
            methods=["GET"],
        ),
    ]
