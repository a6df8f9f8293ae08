"""``GET /api/incidents``: the open findings grouped by root cause (``core.incidents``), ranked
by blast radius and age; each finding's cause is what the watcher stamped on it (``actor``,
``startedAt``: ``app.stamping.cause_of``). Read-only, over the findings the service holds now."""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetwarden.core.findings import Finding
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock
from fleetwarden.presenting.incidents import incidents_json

__all__ = ["routes"]


def routes(
    findings: Callable[[], list[Finding]],
    clock: Clock = SYSTEM_CLOCK,
) -> list[Route]:
    async def incidents(request: Request) -> Response:
        return JSONResponse(incidents_json(findings(), clock.now()))

    return [Route("/api/incidents", incidents, methods=["GET"])]
