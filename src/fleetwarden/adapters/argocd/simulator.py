"""A small Argo CD API server in memory, for the demo and the adapter tests.

Same paths and JSON shapes as argocd-server (the adapter tests validate every answer against
Argo CD's own OpenAPI document), over applications seeded from real Application manifests
(``ArgoCDSimulator.from_yaml``). It keeps what matters to fleetwarden's client and nothing more:

* bearer-token auth (``POST /api/v1/session`` with a known username/password issues one;
  ``expire_tokens`` makes every issued token answer 401 as an expired session would);
* sync and rollback queue an ``operation``; the "controller" picks it up on the next request
  (``status.operationState`` Running) and finishes it ``operation_duration`` seconds later by
  the injected clock (0: at once; None: only when ``finish_operation`` is called), writing the
  sync result, history and sync status; a second sync/rollback meanwhile answers Argo CD's
  FailedPrecondition "another operation is already in progress" (HTTP 400, or
  ``conflict_status``);
* ``DELETE .../operation`` terminates (Terminating, then Failed "Operation terminated");
* ``GET .../{name}?refresh=normal|hard`` sets the ``argocd.argoproj.io/refresh`` annotation and
  answers once the controller has handled it (``sim_controller``): with ``live`` (a reader of
  the cluster) and ``set_manifests``, it compares desired and live objects and writes the sync
  status (OutOfSync when a managed object differs); without, only ``reconciledAt`` moves;
* managed resources, resource tree and rendered manifests derived from ``status.resources``
  (or, for ``/manifests``, the real manifests given with ``set_manifests``);
* faults: ``fail_next`` (answer an error status), ``hang_next`` (answer late or never), each
  either before the request is applied or after it (the request took effect, its answer did
  not arrive), for the next n requests and/or ``until`` a time of the injected clock (an
  outage); ``requests`` lists every (method, path) received.

It is not Argo CD: no Git, no RBAC beyond "is the token valid", no cluster cache (the live
objects are read only on a refresh) and only the simple comparison of ``sim_controller``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import re
import secrets
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from fleetwarden.adapters.argocd import sim_controller
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["ArgoCDSimulator", "Fault", "load_applications"]

# gRPC status codes in grpc-gateway error bodies
INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, FAILED_PRECONDITION = 3, 5, 7, 9
INTERNAL, UNAVAILABLE, UNAUTHENTICATED = 13, 14, 16
_GRPC_FOR_HTTP = {400: INVALID_ARGUMENT, 404: NOT_FOUND, 409: 10, 500: INTERNAL, 502: 14}
_GRPC_FOR_HTTP |= {503: UNAVAILABLE, 504: 4}

_RUNNING, _TERMINATING = "Running", "Terminating"
_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class Fault:
    """An injected failure for the next ``remaining`` matching requests.

    ``status``: answer this HTTP status (a grpc-gateway error body); ``hang``: wait ``seconds``
    (None: until ``release`` or the client gives up) before answering. ``after_apply``: the
    request takes effect first. ``method``/``path`` (a substring) narrow what it matches;
    ``until`` (a time of the simulator's clock) ends it then, whatever remains.
    """

    remaining: int = 1
    status: int = 500
    hang: bool = False
    seconds: float | None = None
    after_apply: bool = False
    method: str | None = None
    path: str | None = None
    until: datetime | None = None

    def matches(self, method: str, path: str, now: datetime | None = None) -> bool:
        return (
            self.remaining > 0
            and (self.until is None or now is None or now < self.until)
            and (self.method is None or self.method == method)
            and (self.path is None or self.path in path)
        )


def load_applications(*paths: str | Path) -> list[dict[str, Any]]:
    """Application manifests (YAML, one or many documents per file) as JSON-ready dicts."""
    apps: list[dict[str, Any]] = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for doc in yaml.safe_load_all(fh):
                if isinstance(doc, dict) and doc.get("kind") == "Application":
                    apps.append(json.loads(json.dumps(doc, default=_yaml_scalar)))
    return apps


class ArgoCDSimulator:
    """An ASGI app (``await sim(scope, receive, send)``) with test controls on the side."""

    def __init__(
        self,
        applications: Iterable[Mapping[str, Any]] = (),
        *,
        users: Mapping[str, str] | None = None,
        tokens: Iterable[str] = (),
        clusters: Iterable[Mapping[str, Any]] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        operation_duration: float | None = 0.0,
        conflict_status: int = 400,
        server_version: str = "1.30",
        live: sim_controller.LiveReader | None = None,
    ) -> None:
        self.users = dict(users if users is not None else {"admin": "password"})
        self.clock = clock
        self.operation_duration = operation_duration
        self.conflict_status = conflict_status
        self.server_version = server_version
        self.live = live  # how the controller reads the cluster on a refresh (None: it does not)
        self.requests: list[tuple[str, str]] = []
        self.refreshes: list[tuple[str, str]] = []
        self.faults: list[Fault] = []
        self._tokens: dict[str, str] = dict.fromkeys(tokens, "admin")
        self._apps: dict[str, dict[str, Any]] = {}
        self._rendered: dict[str, list[dict[str, Any]]] = {}
        self._picked_at: dict[str, datetime] = {}
        self._released = asyncio.Event()
        for app in applications:
            self.add_application(app)
        self._clusters = [dict(c) for c in clusters] if clusters is not None else None
        self.app = Starlette(
            routes=[
                Route("/api/v1/session", self._login, methods=["POST"]),
                Route("/api/v1/applications", self._list, methods=["GET"]),
                Route("/api/v1/applications/{name}", self._get, methods=["GET"]),
                Route("/api/v1/applications/{name}/sync", self._sync, methods=["POST"]),
                Route("/api/v1/applications/{name}/rollback", self._rollback, methods=["POST"]),
                Route("/api/v1/applications/{name}/operation", self._terminate, methods=["DELETE"]),
                Route(
                    "/api/v1/applications/{name}/managed-resources",
                    self._managed_resources,
                    methods=["GET"],
                ),
                Route(
                    "/api/v1/applications/{name}/resource-tree",
                    self._resource_tree,
                    methods=["GET"],
                ),
                Route("/api/v1/applications/{name}/manifests", self._manifests, methods=["GET"]),
                Route("/api/v1/clusters", self._list_clusters, methods=["GET"]),
            ],
            exception_handlers={HTTPException: self._http_exception},
        )

    @classmethod
    def from_yaml(cls, *paths: str | Path, **options: Any) -> ArgoCDSimulator:
        return cls(load_applications(*paths), **options)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    # --- test controls --------------------------------------------------------------------

    def add_application(self, app: Mapping[str, Any]) -> None:
        """Seed an Application; TypeMeta is dropped (argocd-server's answers carry none)."""
        obj = copy.deepcopy(dict(app))
        obj.pop("apiVersion", None)
        obj.pop("kind", None)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", "argocd")
        meta.setdefault("uid", str(uuid.uuid5(uuid.NAMESPACE_URL, f"app/{meta['name']}")))
        meta.setdefault("resourceVersion", "1")
        obj.setdefault("spec", {}).setdefault("project", "default")
        obj.setdefault("status", {})
        self._apps[meta["name"]] = obj

    def set_manifests(self, name: str, objects: Iterable[Mapping[str, Any]]) -> None:
        """What repo-server renders for the application from Git (real manifests, in tests);
        without it, ``/manifests`` derives skeletons from ``status.resources``."""
        if name not in self._apps:
            raise KeyError(name)
        self._rendered[name] = [copy.deepcopy(dict(o)) for o in objects]

    def application(self, name: str) -> dict[str, Any]:
        """A copy of the application as the server holds it now."""
        self._advance()
        return copy.deepcopy(self._apps[name])

    def issue_token(self, username: str = "admin") -> str:
        token = secrets.token_urlsafe(24)
        self._tokens[token] = username
        return token

    def expire_tokens(self) -> None:
        self._tokens.clear()

    def fail_next(self, n: int = 1, *, status: int = 500, **match: Any) -> Fault:
        fault = Fault(remaining=n, status=status, **match)
        self.faults.append(fault)
        return fault

    def hang_next(self, n: int = 1, *, seconds: float | None = None, **match: Any) -> Fault:
        fault = Fault(remaining=n, hang=True, seconds=seconds, **match)
        self.faults.append(fault)
        return fault

    def release(self) -> None:
        """Let every hanging request answer."""
        self._released.set()

    def count(self, method: str, suffix: str) -> int:
        """How many requests ``method ...suffix`` the server received."""
        return sum(1 for m, p in self.requests if m == method and p.endswith(suffix))

    def finish_operation(self, name: str, *, phase: str = "Succeeded") -> None:
        """Complete the running operation now (for ``operation_duration=None``)."""
        self._advance()
        app = self._apps[name]
        state = app["status"].get("operationState") or {}
        if state.get("phase") in (_RUNNING, _TERMINATING):
            self._complete(app, phase, self.clock.now())

    # --- handlers -------------------------------------------------------------------------

    async def _login(self, request: Request) -> Response:
        async def handle() -> Response:
            body = await _body(request)
            username, password = body.get("username"), body.get("password")
            if not username or self.users.get(str(username)) != password:
                return _error(401, UNAUTHENTICATED, "Invalid username or password")
            token = self.issue_token(str(username))
            return JSONResponse({"token": token})

        return await self._serve(request, handle, auth=False)

    async def _list(self, request: Request) -> Response:
        async def handle() -> Response:
            projects = request.query_params.getlist("projects") + request.query_params.getlist(
                "project"
            )
            selector = _selector(request.query_params.get("selector"))
            items = [
                copy.deepcopy(a)
                for a in self._apps.values()
                if (not projects or a["spec"].get("project") in projects)
                and all(a["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())
            ]
            return JSONResponse({"items": items, "metadata": {"resourceVersion": "1"}})

        return await self._serve(request, handle)

    async def _get(self, request: Request) -> Response:
        async def handle() -> Response:
            app = self._app(request)
            projects = request.query_params.getlist("project") + request.query_params.getlist(
                "projects"
            )
            if projects and app["spec"].get("project") not in projects:
                return _error(403, PERMISSION_DENIED, "permission denied")
            if refresh := request.query_params.get("refresh"):
                await self._refresh(app, "hard" if refresh == "hard" else "normal")
            return JSONResponse(copy.deepcopy(app))

        return await self._serve(request, handle)

    async def _sync(self, request: Request) -> Response:
        async def handle() -> Response:
            app = self._app(request)
            body = await _body(request)
            if conflict := self._busy(app):
                return conflict
            revision = body.get("revision") or ""
            automated = (app["spec"].get("syncPolicy") or {}).get("automated")
            target = (app["spec"].get("source") or {}).get("targetRevision") or "HEAD"
            if automated is not None and not body.get("dryRun") and revision not in ("", target):
                return _error(
                    400,
                    FAILED_PRECONDITION,
                    f"Cannot sync to {revision}: auto-sync currently set to {target}",
                )
            sync: dict[str, Any] = {"revision": revision or target}
            for key in ("prune", "dryRun"):
                if body.get(key):
                    sync[key] = True
            if body.get("resources"):
                sync["resources"] = [
                    {k: r[k] for k in ("group", "kind", "name", "namespace") if r.get(k)}
                    for r in body["resources"]
                    if isinstance(r, dict)
                ]
            options = (body.get("syncOptions") or {}).get("items")
            if options:
                sync["syncOptions"] = list(options)
            if isinstance(body.get("strategy"), dict):
                sync["syncStrategy"] = body["strategy"]
            self._queue(app, sync, request)
            return JSONResponse(copy.deepcopy(app))

        return await self._serve(request, handle)

    async def _rollback(self, request: Request) -> Response:
        async def handle() -> Response:
            app = self._app(request)
            body = await _body(request)
            history_id = body.get("id")
            if isinstance(history_id, bool) or not isinstance(history_id, int):
                return _error(400, INVALID_ARGUMENT, "id: expected an integer")
            if conflict := self._busy(app):
                return conflict
            if (app["spec"].get("syncPolicy") or {}).get("automated") is not None:
                return _error(
                    400,
                    FAILED_PRECONDITION,
                    "rollback cannot be initiated when auto-sync is enabled",
                )
            entry = next(
                (h for h in app["status"].get("history") or () if h.get("id") == history_id), None
            )
            if entry is None:
                name = app["metadata"]["name"]
                return _error(
                    404,
                    NOT_FOUND,
                    f"application {name} does not have deployment with id {history_id}",
                )
            sync: dict[str, Any] = {"revision": entry.get("revision", "")}
            if entry.get("source"):
                sync["source"] = copy.deepcopy(entry["source"])
            for key in ("prune", "dryRun"):
                if body.get(key):
                    sync[key] = True
            sync["syncStrategy"] = {"apply": {}}
            self._queue(app, sync, request)
            return JSONResponse(copy.deepcopy(app))

        return await self._serve(request, handle)

    async def _terminate(self, request: Request) -> Response:
        async def handle() -> Response:
            app = self._app(request)
            state = app["status"].get("operationState")
            if app.get("operation") is None or not state:
                return _error(
                    400,
                    INVALID_ARGUMENT,
                    "Unable to terminate operation. No operation is in progress",
                )
            state["phase"] = _TERMINATING
            return JSONResponse({})

        return await self._serve(request, handle)

    async def _managed_resources(self, request: Request) -> Response:
        async def handle() -> Response:
            app = self._app(request)
            items = []
            for res in _resources(app):
                target = _manifest(app, res)
                live = {**target, "status": {"observedGeneration": 1}}
                entry: dict[str, Any] = {
                    "kind": res.get("kind", ""),
                    "name": res.get("name", ""),
                    "namespace": res.get("namespace", ""),
                    "targetState": json.dumps(target),
                    "liveState": json.dumps(live),
                    "normalizedLiveState": json.dumps(target),
                    "predictedLiveState": json.dumps(target),
                    "modified": res.get("status") == "OutOfSync",
                    "hook": False,
                    "resourceVersion": "1",
                }
                if res.get("group"):
                    entry["group"] = res["group"]
                items.append(entry)
            return JSONResponse({"items": items})

        return await self._serve(request, handle)

    async def _resource_tree(self, request: Request) -> Response:
        async def handle() -> Response:
            app = self._app(request)
            name = app["metadata"]["name"]
            images = (app["status"].get("summary") or {}).get("images") or []
            created = app["metadata"].get("creationTimestamp") or _ts(self.clock.now())
            nodes: list[dict[str, Any]] = []
            for res in _resources(app):
                node = _node(name, res, created)
                nodes.append(node)
                if res.get("kind") == "Deployment":
                    rs = _node(
                        name,
                        {**res, "kind": "ReplicaSet", "name": f"{res['name']}-5d8f7b9c4"},
                        created,
                    )
                    rs["parentRefs"] = [_ref(node)]
                    pod = _node(
                        name,
                        {
                            **res,
                            "group": "",
                            "kind": "Pod",
                            "name": f"{res['name']}-5d8f7b9c4-x2x9p",
                        },
                        created,
                    )
                    pod["parentRefs"] = [_ref(rs)]
                    pod["images"] = list(images)
                    pod["info"] = [{"name": "Status Reason", "value": "Running"}]
                    nodes += [rs, pod]
            return JSONResponse({"nodes": nodes})

        return await self._serve(request, handle)

    async def _manifests(self, request: Request) -> Response:
        async def handle() -> Response:
            app = self._app(request)
            source = app["spec"].get("source") or {}
            revision = request.query_params.get("revision") or source.get("targetRevision") or ""
            dest = app["spec"].get("destination") or {}
            return JSONResponse(
                {
                    "manifests": [json.dumps(m) for m in self._rendered[name]]
                    if (name := app["metadata"]["name"]) in self._rendered
                    else [json.dumps(_manifest(app, r)) for r in _resources(app)],
                    "namespace": dest.get("namespace", ""),
                    "server": self._server_of(dest),
                    "revision": _resolve(source.get("repoURL", ""), revision),
                    "sourceType": app["status"].get("sourceType") or "Directory",
                }
            )

        return await self._serve(request, handle)

    async def _list_clusters(self, request: Request) -> Response:
        async def handle() -> Response:
            return JSONResponse({"items": self._cluster_items(), "metadata": {}})

        return await self._serve(request, handle)

    # --- plumbing -------------------------------------------------------------------------

    async def _serve(
        self, request: Request, handle: Callable[[], Awaitable[Response]], *, auth: bool = True
    ) -> Response:
        method, path = request.method, request.url.path
        self.requests.append((method, path))
        fault = self._take_fault(method, path)
        if fault is not None and not fault.after_apply and (answer := await self._inject(fault)):
            return answer
        if auth and (denied := self._authenticate(request)):
            return denied
        self._advance()
        response = await handle()
        if fault is not None and fault.after_apply and (answer := await self._inject(fault)):
            return answer
        return response

    async def _refresh(self, app: dict[str, Any], mode: str) -> None:
        """argocd-server sets the refresh annotation and answers once the controller has
        removed it (``sim_controller``: with ``live`` and rendered manifests, a comparison)."""
        name = app["metadata"]["name"]
        self.refreshes.append((name, mode))
        app["metadata"].setdefault("annotations", {})[sim_controller.REFRESH_ANNOTATION] = mode
        desired = self._rendered.get(name)
        if self.live is not None and desired is not None:
            await sim_controller.reconcile(app, desired, self.live, _ts(self.clock.now()))
        else:  # nothing to compare with: reconciled, the sync status as it was
            sim_controller.finish_refresh(app, _ts(self.clock.now()))

    def _take_fault(self, method: str, path: str) -> Fault | None:
        now = self.clock.now()
        for fault in self.faults:
            if fault.matches(method, path, now):
                fault.remaining -= 1
                return fault
        return None

    async def _inject(self, fault: Fault) -> Response | None:
        if fault.hang:
            # answered late (``seconds``) or after ``release``: then as usual
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._released.wait(), fault.seconds)
            return None
        return _error(fault.status, _GRPC_FOR_HTTP.get(fault.status, INTERNAL), "injected fault")

    def _authenticate(self, request: Request) -> Response | None:
        header = request.headers.get("authorization", "")
        token = header[7:] if header.lower().startswith("bearer ") else ""
        token = token or request.cookies.get("argocd.token", "")
        if not token:
            return _error(401, UNAUTHENTICATED, "no session information")
        if token not in self._tokens:
            return _error(401, UNAUTHENTICATED, "invalid session: token has invalid claims")
        return None

    def _app(self, request: Request) -> dict[str, Any]:
        name = request.path_params["name"]
        if name not in self._apps:
            raise HTTPException(404, f'applications.argoproj.io "{name}" not found')
        return self._apps[name]

    async def _http_exception(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _error(exc.status_code, _GRPC_FOR_HTTP.get(exc.status_code, 2), str(exc.detail))

    def _busy(self, app: dict[str, Any]) -> Response | None:
        state = app["status"].get("operationState") or {}
        if app.get("operation") is not None or state.get("phase") in (_RUNNING, _TERMINATING):
            code = FAILED_PRECONDITION if self.conflict_status != 409 else 10
            return _error(self.conflict_status, code, "another operation is already in progress")
        return None

    def _queue(self, app: dict[str, Any], sync: dict[str, Any], request: Request) -> None:
        header = request.headers.get("authorization", "")
        user = self._tokens.get(header[7:], "admin")
        app["operation"] = {"sync": sync, "initiatedBy": {"username": user}}
        self._picked_at.pop(app["metadata"]["name"], None)
        meta = app["metadata"]
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)

    def _advance(self) -> None:
        """The controller's part: pick up queued operations, finish them when their time is up."""
        now = self.clock.now()
        for name, app in self._apps.items():
            operation = app.get("operation")
            state = app["status"].get("operationState") or {}
            if operation is None:
                continue
            if name not in self._picked_at:
                self._picked_at[name] = now
                app["status"]["operationState"] = {
                    "operation": copy.deepcopy(operation),
                    "phase": _RUNNING,
                    "message": "one or more tasks are running",
                    "startedAt": _ts(now),
                }
                state = app["status"]["operationState"]
            if state.get("phase") == _TERMINATING:
                self._complete(app, "Failed", now, message="Operation terminated")
            elif self.operation_duration is not None and now >= self._picked_at[name] + timedelta(
                seconds=self.operation_duration
            ):
                self._complete(app, "Succeeded", now)

    def _complete(
        self, app: dict[str, Any], phase: str, now: datetime, *, message: str | None = None
    ) -> None:
        status = app["status"]
        state = status["operationState"]
        sync = (state.get("operation") or {}).get("sync") or {}
        source = app["spec"].get("source") or {}
        revision = _resolve(source.get("repoURL", ""), sync.get("revision") or "")
        dry_run = bool(sync.get("dryRun"))
        wanted = {(r.get("kind"), r.get("name")) for r in sync.get("resources") or ()}
        results = [
            {
                "group": r.get("group", ""),
                "version": r.get("version", ""),
                "kind": r.get("kind", ""),
                "namespace": r.get("namespace", ""),
                "name": r.get("name", ""),
                "status": "Synced",
                "message": f"{str(r.get('kind', '')).lower()}/{r.get('name', '')} configured"
                + (" (dry run)" if dry_run else ""),
                "hookPhase": "Running",
                "syncPhase": "Sync",
            }
            for r in _resources(app)
            if not wanted or (r.get("kind"), r.get("name")) in wanted
        ]
        succeeded = phase == "Succeeded"
        state.update(
            phase=phase,
            message=message or ("successfully synced (all tasks run)" if succeeded else phase),
            finishedAt=_ts(now),
        )
        state["syncResult"] = {"resources": results, "revision": revision}
        if source:
            state["syncResult"]["source"] = copy.deepcopy(sync.get("source") or source)
        if succeeded and not dry_run:
            history = status.setdefault("history", [])
            next_id = max((int(h.get("id", 0)) for h in history), default=-1) + 1
            history.append(
                {
                    "id": next_id,
                    "revision": revision,
                    "deployStartedAt": state.get("startedAt", _ts(now)),
                    "deployedAt": _ts(now),
                    "source": copy.deepcopy(sync.get("source") or source),
                    "initiatedBy": copy.deepcopy(
                        (state.get("operation") or {}).get("initiatedBy") or {}
                    ),
                }
            )
            limit = app["spec"].get("revisionHistoryLimit", 10)
            del history[: max(0, len(history) - int(limit))]
            status["sync"] = {
                "status": "Synced",
                "revision": revision,
                "comparedTo": {
                    "source": copy.deepcopy(source),
                    "destination": copy.deepcopy(app["spec"].get("destination") or {}),
                },
            }
            for r in status.get("resources") or ():
                r["status"] = "Synced"
        app.pop("operation", None)
        self._picked_at.pop(app["metadata"]["name"], None)

    def _cluster_items(self) -> list[dict[str, Any]]:
        now = _ts(self.clock.now())
        if self._clusters is not None:
            return copy.deepcopy(self._clusters)
        seen: dict[str, str] = {"in-cluster": "https://kubernetes.default.svc"}
        for app in self._apps.values():
            dest = app["spec"].get("destination") or {}
            name = dest.get("name") or dest.get("server", "")
            if name and name not in seen:
                seen[name] = dest.get("server") or f"https://{name}.clusters.example.com"
        items = []
        for name, server in seen.items():
            count = sum(
                1
                for a in self._apps.values()
                if (a["spec"].get("destination") or {}).get("name") == name
                or (a["spec"].get("destination") or {}).get("server") == server
            )
            connection = {"status": "Successful", "message": "", "attemptedAt": now}
            items.append(
                {
                    "name": name,
                    "server": server,
                    "config": {"tlsClientConfig": {"insecure": False}},
                    "connectionState": connection,
                    "serverVersion": self.server_version,
                    "info": {
                        "serverVersion": self.server_version,
                        "connectionState": connection,
                        "applicationsCount": count,
                        "cacheInfo": {"apisCount": 60, "resourcesCount": 400},
                    },
                }
            )
        return items

    def _server_of(self, dest: Mapping[str, Any]) -> str:
        if dest.get("server"):
            return str(dest["server"])
        for cluster in self._cluster_items():
            if cluster.get("name") == dest.get("name"):
                return str(cluster.get("server", ""))
        return ""


def _error(status: int, code: int, message: str) -> JSONResponse:
    """grpc-gateway's error body (``runtimeError``)."""
    return JSONResponse(
        {"code": code, "error": message, "message": message, "details": []}, status_code=status
    )


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise HTTPException(400, "invalid JSON body") from None
    if not isinstance(body, dict):
        raise HTTPException(400, "the body must be a JSON object")
    name = request.path_params.get("name")
    if name and body.get("name") not in (None, "", name):
        raise HTTPException(400, "the body's name does not match the path")
    return body


def _selector(text: str | None) -> dict[str, str]:
    pairs = (part.split("=", 1) for part in (text or "").split(",") if "=" in part)
    return {k.strip(): v.strip() for k, v in pairs}


def _resources(app: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for r in app["status"].get("resources") or () if isinstance(r, dict)]


def _manifest(app: Mapping[str, Any], res: Mapping[str, Any]) -> dict[str, Any]:
    group, version = res.get("group") or "", res.get("version") or "v1"
    metadata: dict[str, Any] = {
        "name": res.get("name", ""),
        "labels": {"app.kubernetes.io/instance": app["metadata"]["name"]},
    }
    if res.get("namespace"):
        metadata["namespace"] = res["namespace"]
    return {
        "apiVersion": f"{group}/{version}" if group else version,
        "kind": res.get("kind", ""),
        "metadata": metadata,
    }


def _node(app_name: str, res: Mapping[str, Any], created: str) -> dict[str, Any]:
    ident = "/".join(str(res.get(k) or "") for k in ("group", "kind", "namespace", "name"))
    node: dict[str, Any] = {
        "group": res.get("group") or "",
        "version": res.get("version") or "v1",
        "kind": res.get("kind", ""),
        "namespace": res.get("namespace") or "",
        "name": res.get("name", ""),
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{app_name}/{ident}")),
        "resourceVersion": "1",
        "createdAt": created,
    }
    health = res.get("health")
    if isinstance(health, dict) and health.get("status"):
        node["health"] = {"status": health["status"]}
    return node


def _ref(node: Mapping[str, Any]) -> dict[str, Any]:
    return {k: node[k] for k in ("group", "kind", "namespace", "name", "uid") if k in node}


def _resolve(repo: str, revision: str) -> str:
    """A commit SHA for a branch/tag/chart version: stable, so the same ref resolves alike."""
    if _SHA.match(revision):
        return revision
    return hashlib.sha1(f"{repo}@{revision or 'HEAD'}".encode(), usedforsecurity=False).hexdigest()


def _ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _yaml_scalar(value: object) -> str:
    if isinstance(value, datetime):
        return _ts(value if value.tzinfo else value.replace(tzinfo=UTC))
    return str(value)
