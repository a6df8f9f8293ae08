"""``GET /api/incidents``: the open findings grouped by root cause (``core.incidents``), ranked
by blast radius and age; each finding's cause is what the watcher stamped on it (``actor``,
``startedAt``: ``app.stamping.cause_of``). Read-only, over the findings the service holds now."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetwarden.core.findings import Finding
from fleetwarden.presenting.incidents import incidents_json

__all__ = ["routes"]


def routes(
    findings: Callable[[], list[Finding]],
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[Route]:
    async def incidents(request: Request) -> Response:
        return JSONResponse(incidents_json(findings(), now()))

    return [Route("/api/incidents", incidents, methods=["GET"])]
