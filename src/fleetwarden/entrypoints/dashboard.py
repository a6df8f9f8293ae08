"""The web dashboard of ``serve``: ``/ui/`` (static page and its modules) and ``/api/clusters``;
with the pipeline at hand, its live side too (``entrypoints/live_api.py``: the event stream,
the heatmap, pool detail, the drift timeline).

The page (``data/ui``: HTML, plain JavaScript modules, one stylesheet; no framework, no CDN)
reads the JSON API once, then follows ``/api/stream`` (server-sent events; no polling). It
puts every value on the page as text, and the answers carry a Content-Security-Policy that
allows only this origin's own script and style (``adapters/ui_files.py``), so a hostile label
value or cluster name cannot run anything in an operator's browser.

``GET /api/clusters``: one entry per cluster known to the service, with its current finding
count (``presenting.dashboard.cluster_list``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from fleetwarden.adapters.asgi import json_response
from fleetwarden.adapters.ui_files import SECURITY_HEADERS, asset_response
from fleetwarden.app.serving import Serving
from fleetwarden.app.watching import FleetWatcher
from fleetwarden.core.findings import Finding
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.entrypoints import live_api
from fleetwarden.presenting.dashboard import cluster_list

__all__ = ["routes"]


def routes(
    fleet: FleetWatcher,
    snapshot: Mapping[str, Sequence[ObservedNode]],
    findings: Callable[[], Sequence[Finding]],
    owners: Callable[[], Mapping[str, str | None]] = dict,
    *,
    pipeline: Serving | None = None,
    admin_tokens: Sequence[str] = (),
) -> list[Route]:
    """The dashboard's page and reads; with ``pipeline`` its live side too (the event stream,
    heatmap, pool, timeline, deny: ``admin_tokens`` may deny)."""

    async def index(request: Request) -> Response:
        return RedirectResponse("/ui/", status_code=307)

    async def asset(request: Request) -> Response:
        return asset_response(request.path_params.get("name") or "index.html")

    async def favicon(request: Request) -> Response:
        return Response(status_code=204, headers=SECURITY_HEADERS)  # browsers ask; none here

    async def api_clusters(request: Request) -> Response:
        return json_response(cluster_list(fleet, snapshot, findings(), owners()))

    live = live_api.routes(pipeline, admin_tokens=admin_tokens) if pipeline is not None else []
    return [
        *live,
        Route("/", index, methods=["GET"]),
        Route("/ui/", asset, methods=["GET"]),
        Route("/ui/{name:str}", asset, methods=["GET"]),
        Route("/favicon.ico", favicon, methods=["GET"]),
        Route("/api/clusters", api_clusters, methods=["GET"]),
    ]
