"""``GET /api/fleet/apps``, ``/api/fleet/versions?app=NAME``, ``/api/fleet/diff?app=NAME``:
the followed applications' reads (``app/following.py``) as JSON. Unknown applications answer
404, a missing ``app`` 400: never a 5xx."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetwarden.adapters.asgi import json_response
from fleetwarden.app.following import FollowedApps

__all__ = ["routes"]


def routes(followed: FollowedApps) -> list[Route]:
    def per_app(read: Callable[[str], dict[str, Any]]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            app = request.query_params.get("app", "")
            if (refusal := followed.unknown(app)) is not None:
                return JSONResponse(refusal[1], refusal[0])
            return json_response(read(app))

        return endpoint

    async def apps(request: Request) -> Response:
        return JSONResponse(followed.apps())

    return [
        Route("/api/fleet/apps", apps, methods=["GET"]),
        Route("/api/fleet/versions", per_app(followed.versions), methods=["GET"]),
        Route("/api/fleet/diff", per_app(followed.diff), methods=["GET"]),
    ]
