"""``ArgoCDClient``: the ``ports.argocd.ArgoCD`` port over Argo CD's REST API (httpx).

Paths, bodies and answers are the ones in Argo CD's own OpenAPI document
(``realdata/argocd/argocd-api-swagger.json``; the adapter tests validate every call against it).

Retry policy
  Idempotent calls (every GET, ``POST /api/v1/session``, and ``DELETE .../operation``: asking a
  terminating operation to terminate again is harmless) are retried on 429, 500, 502, 503, 504,
  timeouts and connection failures, with full-jitter exponential back-off
  (``uniform(0, min(cap, base * 2**n))``, or ``Retry-After`` when the server sends one), then
  raise ``ArgoUnavailable``.

  Sync and rollback are not idempotent: a second request after a lost answer may start a second
  operation. When an attempt may have reached the server (read/write timeout, a dropped
  connection, a 5xx), the client reads the application and looks for the operation it asked for
  (``was_applied``): the pending ``operation`` or a ``status.operationState`` started since the
  first ambiguous attempt (less ``clock_skew``), with the same revision, prune, dryRun,
  resources and sync options, not initiated by auto-sync. Found: that is the answer
  (``SyncResult.verified``). Not found: the request is sent again. The application unreadable:
  ``ArgoOutcomeUnknown``. A failure before sending (connect error) is retried directly. A
  conflict on a retry is checked the same way, since it may be our own first request landing
  late. Limit: a first request still queued inside argocd-server after the check may apply
  after the retry; Argo CD's API offers no idempotency key to rule that out.

Authentication
  ``token``: an API token sent as ``Authorization: Bearer``. ``username``/``password``: a
  session token from ``POST /api/v1/session``, fetched on first use and fetched again once when
  a call answers 401 (expired session). Argo CD's session cookie is dropped: one credential path.

Proxy
  The environment's, as the ``argocd`` CLI takes it (``adapters.proxies``: ``HTTPS_PROXY``,
  ``NO_PROXY`` ...).

Audit
  Every call is recorded as a ``CallRecord`` in ``calls`` (the last ``max_calls``) and passed to
  ``on_call``; records and error messages never hold the token or the password.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import quote, urlencode

import httpx

from fleetwarden.adapters import proxies, trust
from fleetwarden.core.integers import ascii_int
from fleetwarden.ports.argocd import (
    Application,
    ApplicationTree,
    ArgoCD,
    ArgoConflict,
    ArgoError,
    ArgoForbidden,
    ArgoNotFound,
    ArgoOutcomeUnknown,
    ArgoUnauthorized,
    ArgoUnavailable,
    CallRecord,
    Cluster,
    ManifestResponse,
    OperationState,
    Refresh,
    ResourceDiff,
    SyncResource,
    SyncResult,
    SyncStrategy,
    parse_time,
)
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["ARGOCD_TOKEN_ENV", "ArgoCDClient", "Requested", "client_from_env", "was_applied"]

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_CONFLICT_TEXT = "another operation is already in progress"
_NO_OPERATION_TEXT = "no operation is in progress"
_SESSION = "/api/v1/session"


@dataclass(frozen=True, slots=True)
class Requested:
    """The operation a sync/rollback asked for, to recognise it in the application later."""

    kind: Literal["sync", "rollback"]
    revision: str | None = None
    prune: bool = False
    dry_run: bool = False
    resources: frozenset[tuple[str, str, str, str]] | None = None
    sync_options: frozenset[str] | None = None
    history_id: int | None = None


def was_applied(
    app: Mapping[str, Any], requested: Requested, *, since: datetime, skew: float = 5.0
) -> bool:
    """Whether ``app`` shows the requested operation, pending or started at/after ``since``.

    Pure: no I/O, no clock. A pending ``operation`` that matches counts whoever queued it (the
    effect asked for is under way, a second one would only duplicate it); a past
    ``operationState`` counts only if it started since ``since - skew`` (Argo CD's timestamps
    have second precision and its clock is not ours).
    """
    pending = app.get("operation")
    if isinstance(pending, Mapping) and _matches(pending, {}, requested, app):
        return True
    status = _mapping(app.get("status"))
    state = _mapping(status.get("operationState"))
    started = parse_time(state.get("startedAt"))
    if started is None or started < since - timedelta(seconds=skew):
        return False
    return _matches(
        _mapping(state.get("operation")), _mapping(state.get("syncResult")), requested, app
    )


def _matches(
    operation: Mapping[str, Any],
    result: Mapping[str, Any],
    requested: Requested,
    app: Mapping[str, Any],
) -> bool:
    if _mapping(operation.get("initiatedBy")).get("automated"):
        return False
    sync = _mapping(operation.get("sync"))
    if not sync:
        return False
    if bool(sync.get("dryRun")) != requested.dry_run or bool(sync.get("prune")) != requested.prune:
        return False
    revisions = {sync.get("revision"), result.get("revision")} - {None, ""}
    if requested.kind == "rollback":
        history = _mapping(app.get("status")).get("history") or ()
        target = next(
            (
                h.get("revision")
                for h in history
                if isinstance(h, Mapping) and _as_int(h.get("id")) == requested.history_id
            ),
            None,
        )
        return bool(target) and target in revisions
    if requested.revision and requested.revision not in revisions:
        return False
    if requested.resources is not None:
        keys = frozenset(
            (
                str(r.get("group") or ""),
                str(r.get("kind") or ""),
                str(r.get("namespace") or ""),
                str(r.get("name") or ""),
            )
            for r in sync.get("resources") or ()
            if isinstance(r, Mapping)
        )
        if keys != requested.resources:
            return False
    return not (
        requested.sync_options
        and frozenset(sync.get("syncOptions") or ()) != requested.sync_options
    )


@dataclass(slots=True)
class _Attempt:
    """One HTTP exchange: a response, or why there was none and whether it may have arrived."""

    response: httpx.Response | None = None
    failure: str = ""
    maybe_sent: bool = False


@dataclass(slots=True)
class _Trace:
    method: str
    path: str
    started: float
    outcomes: list[str] = field(default_factory=list)
    status: int | None = None


class ArgoCDClient:
    """Async access to one Argo CD API server. Use as an async context manager."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        verify: bool | ssl.SSLContext = True,
        timeout: float = 10.0,
        retries: int = 3,
        transport: httpx.AsyncBaseTransport | None = None,
        app_namespace: str | None = None,
        backoff: float = 0.5,
        backoff_cap: float = 10.0,
        clock_skew: float = 5.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        clock: Clock = SYSTEM_CLOCK,
        on_call: Callable[[CallRecord], None] | None = None,
        max_calls: int = 1000,
    ) -> None:
        if not token and not (username and password):
            raise ValueError("ArgoCDClient needs an API token, or a username and a password")
        if retries < 0 or timeout <= 0:
            raise ValueError("retries must be >= 0 and timeout > 0")
        self.base_url = base_url.rstrip("/")
        self.username = None if token else username
        self.app_namespace = app_namespace
        self.calls: deque[CallRecord] = deque(maxlen=max_calls)
        self._token = token or ""
        self._password = password or ""
        self._session = not token
        self._timeout = timeout
        self._attempts = retries + 1
        self._backoff, self._backoff_cap, self._skew = backoff, backoff_cap, clock_skew
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._clock = clock
        self._on_call = on_call
        self._login_lock = asyncio.Lock()
        try:
            # the argocd CLI's transport takes the environment's proxy (Go's
            # http.ProxyFromEnvironment: pkg/apiclient/apiclient.go); httpx's own reading of
            # the environment (ALL_PROXY, ~/.netrc ...) is not the CLI's, so it stays off. A
            # given transport (tests) is never bypassed for an environment proxy.
            proxy = None if transport is not None else proxies.environment_proxy(self.base_url)
            if verify is True:  # the CAs the argocd CLI (Go) trusts here, not only certifi's
                verify = trust.client_trust().context
                if isinstance(proxy, str) and httpx.URL(proxy).scheme == "https":
                    proxy = httpx.Proxy(proxy, ssl_context=verify)
            self._http = httpx.AsyncClient(
                base_url=self.base_url,
                headers={"Accept": "application/json", "User-Agent": "fleetwarden/0.1"},
                verify=verify,
                timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
                transport=transport,
                proxy=proxy,
                trust_env=False,
            )
        except ImportError:  # httpx needs socksio for a socks5 proxy
            raise ArgoError(
                f"Argo CD at {self.base_url!r}: a socks5 proxy needs the socksio package "
                "(httpx[socks])"
            ) from None
        except (ValueError, TypeError, httpx.InvalidURL) as exc:
            raise ArgoError(f"Argo CD at {self.base_url!r}: bad client settings: {exc}") from None

    def __repr__(self) -> str:
        auth = f"session:{self.username}" if self._session else "token"
        return f"ArgoCDClient({self.base_url!r}, auth={auth})"

    async def __aenter__(self) -> ArgoCDClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- the port -------------------------------------------------------------------------

    async def get_application(
        self, name: str, *, refresh: Refresh | None = None, project: str | None = None
    ) -> Application:
        if refresh not in (None, "normal", "hard"):
            raise ValueError(f"refresh must be 'normal' or 'hard', not {refresh!r}")
        params = self._params(refresh=refresh, project=project)
        data = await self._call("GET", _app_path(name), params=params)
        return cast(Application, _object(data, "GET", _app_path(name)))

    async def list_applications(
        self, *, project: str | None = None, selector: str | None = None
    ) -> list[Application]:
        path = "/api/v1/applications"
        data = await self._call(
            "GET", path, params=self._params(projects=project, selector=selector)
        )
        return cast(list[Application], _items(data, "GET", path))

    async def sync(
        self,
        name: str,
        *,
        revision: str | None = None,
        prune: bool = False,
        dry_run: bool = False,
        resources: Sequence[SyncResource] | None = None,
        sync_options: Sequence[str] = (),
        strategy: SyncStrategy | None = None,
        force: bool = False,
    ) -> SyncResult:
        body: dict[str, Any] = {"name": name, "prune": prune, "dryRun": dry_run}
        if self.app_namespace:
            body["appNamespace"] = self.app_namespace
        if revision:
            body["revision"] = revision
        if resources is not None:
            body["resources"] = [
                {"group": r.group, "kind": r.kind, "name": r.name, "namespace": r.namespace}
                for r in resources
            ]
        if sync_options:
            body["syncOptions"] = {"items": list(sync_options)}
        if strategy == "apply":
            body["strategy"] = {"apply": {"force": force}}
        elif strategy == "hook":
            # Argo CD's Go type inlines SyncStrategyApply into SyncStrategyHook (json:",inline"),
            # so "force" sits directly under "hook" on the wire, not under "syncStrategyApply"
            # as the protobuf-derived swagger shows; only send it when it is set
            body["strategy"] = {"hook": {"force": True} if force else {}}
        elif strategy is not None:
            raise ValueError(f"strategy must be 'apply' or 'hook', not {strategy!r}")
        elif force:
            raise ValueError("force needs a strategy ('apply' or 'hook')")
        requested = Requested(
            "sync",
            revision=revision or None,
            prune=prune,
            dry_run=dry_run,
            resources=None if resources is None else frozenset(r.key() for r in resources),
            sync_options=frozenset(sync_options) or None,
        )
        return await self._operate(name, f"{_app_path(name)}/sync", body, requested)

    async def rollback(
        self, name: str, history_id: int, *, prune: bool = False, dry_run: bool = False
    ) -> SyncResult:
        if isinstance(history_id, bool) or not isinstance(history_id, int):
            raise ValueError(f"history_id must be an int (status.history[].id), not {history_id!r}")
        # int64 in the swagger; argocd-server decodes bodies with encoding/json: a JSON number
        body: dict[str, Any] = {"name": name, "id": history_id, "prune": prune, "dryRun": dry_run}
        if self.app_namespace:
            body["appNamespace"] = self.app_namespace
        requested = Requested("rollback", prune=prune, dry_run=dry_run, history_id=history_id)
        return await self._operate(name, f"{_app_path(name)}/rollback", body, requested)

    async def terminate_operation(self, name: str) -> bool:
        path = f"{_app_path(name)}/operation"
        try:
            await self._call("DELETE", path, params=self._params())
        except ArgoError as exc:
            # argocd-server: InvalidArgument "Unable to terminate operation. No operation is in
            # progress" (HTTP 400), also what a retry sees once a first attempt got through
            if exc.status == 400 and _NO_OPERATION_TEXT in str(exc).lower():
                return False
            raise
        return True

    async def managed_resources(self, name: str) -> list[ResourceDiff]:
        path = f"{_app_path(name)}/managed-resources"
        data = await self._call("GET", path, params=self._params())
        return cast(list[ResourceDiff], _items(data, "GET", path))

    async def resource_tree(self, name: str) -> ApplicationTree:
        path = f"{_app_path(name)}/resource-tree"
        data = await self._call("GET", path, params=self._params())
        return cast(ApplicationTree, _object(data, "GET", path))

    async def list_clusters(self) -> list[Cluster]:
        path = "/api/v1/clusters"
        return cast(list[Cluster], _items(await self._call("GET", path), "GET", path))

    async def manifests(self, name: str, revision: str | None = None) -> ManifestResponse:
        path = f"{_app_path(name)}/manifests"
        data = await self._call("GET", path, params=self._params(revision=revision))
        return cast(ManifestResponse, _object(data, "GET", path))

    async def login(self) -> None:
        """Fetch a session token (username/password clients; done on first use anyway)."""
        if not self._session:
            return
        body = {"username": self.username, "password": self._password}
        data = await self._call("POST", _SESSION, body=body, auth=False)
        token = data.get("token") if isinstance(data, Mapping) else None
        if not isinstance(token, str) or not token:
            raise ArgoError(f"POST {_SESSION}: the answer holds no token")
        self._token = token
        self._http.cookies.clear()  # argocd.token cookie: we send the bearer header only

    # --- sync / rollback ------------------------------------------------------------------

    async def _operate(
        self, name: str, path: str, body: dict[str, Any], requested: Requested
    ) -> SyncResult:
        trace = self._trace("POST", path)
        ambiguous_since: datetime | None = None
        relogged = False
        attempt = 0
        while True:
            attempt += 1
            started_at = self._clock.now()
            try:
                result = await self._attempt(trace, "POST", path, None, body, auth=True)
            except ArgoError as exc:
                self._record(trace, attempt, error=exc)
                raise
            resp = result.response
            if resp is not None and resp.status_code == 401 and self._session and not relogged:
                relogged = True
                await self._relogin(trace, attempt)
                attempt -= 1  # the retry after a re-login is not a failure
                continue
            if resp is not None and resp.status_code < 400:
                try:
                    app = _object(_json(resp, "POST", path), "POST", path)
                except ArgoError as exc:
                    self._record(trace, attempt, error=exc)
                    raise
                self._record(trace, attempt)
                state = self._state_if(app, requested, ambiguous_since or started_at)
                return SyncResult(name, cast(Application, app), state, attempts=attempt)
            error = None if resp is None else self._error_for(resp, "POST", path)
            if isinstance(error, ArgoConflict) and ambiguous_since is not None:
                verified = await self._verify(name, requested, ambiguous_since, trace, attempt)
                if verified is not None:
                    return verified
            if error is not None and not isinstance(error, ArgoUnavailable):
                self._record(trace, attempt, error=error)
                raise error
            # a 429 was turned away before anything happened; a 5xx or a lost answer may not be
            if result.maybe_sent or (resp is not None and resp.status_code != 429):
                ambiguous_since = ambiguous_since or started_at
                await self._pause(attempt, resp)
                verified = await self._verify(name, requested, ambiguous_since, trace, attempt)
                if verified is not None:
                    return verified
            elif attempt < self._attempts:
                await self._pause(attempt, resp)
            if attempt >= self._attempts:
                what = result.failure if resp is None else f"HTTP {resp.status_code}"
                gave_up = ArgoUnavailable(
                    self._redact(
                        f"POST {path}: {what} after {attempt} attempts; the application shows "
                        "no such operation, so it was not applied: try again later"
                    ),
                    status=None if resp is None else resp.status_code,
                )
                self._record(trace, attempt, error=gave_up)
                raise gave_up

    async def _verify(
        self, name: str, requested: Requested, since: datetime, trace: _Trace, attempt: int
    ) -> SyncResult | None:
        """The result if the app shows the requested operation; None if it does not."""
        try:
            app = await self._call(
                "GET", _app_path(name), params=self._params(), note=f"verify {requested.kind}"
            )
        except ArgoError as exc:
            unknown = ArgoOutcomeUnknown(
                self._redact(
                    f"POST {trace.path}: no answer, and reading the application to see whether "
                    f"the {requested.kind} was applied failed ({exc}); read it before retrying"
                ),
                status=exc.status,
            )
            self._record(trace, attempt, error=unknown)
            raise unknown from None
        if not isinstance(app, Mapping) or not was_applied(
            app, requested, since=since, skew=self._skew
        ):
            trace.outcomes.append("not applied")
            return None
        trace.outcomes.append("applied")
        self._record(trace, attempt, note=f"{requested.kind} applied; its answer was lost")
        state = self._state_if(app, requested, since)
        return SyncResult(
            name, cast(Application, dict(app)), state, attempts=attempt, verified=True
        )

    def _state_if(
        self, app: Mapping[str, Any], requested: Requested, since: datetime
    ) -> OperationState | None:
        """The app's operation state if it is the requested operation (not a previous one)."""
        bare = {k: v for k, v in app.items() if k != "operation"}
        if not was_applied(bare, requested, since=since, skew=self._skew):
            return None
        return OperationState.from_application(app)

    # --- plain calls ----------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        auth: bool = True,
        note: str | None = None,
    ) -> Any:
        """An idempotent call with retries; the parsed JSON answer."""
        trace = self._trace(method, path, params)
        relogged = False
        attempt = 0
        while True:
            attempt += 1
            try:
                result = await self._attempt(trace, method, path, params, body, auth=auth)
            except ArgoError as exc:
                self._record(trace, attempt, error=exc, note=note)
                raise
            resp = result.response
            if resp is not None:
                code = resp.status_code
                if code == 401 and auth and self._session and not relogged:
                    relogged = True
                    await self._relogin(trace, attempt)
                    attempt -= 1
                    continue
                if code < 400:
                    try:
                        data = _json(resp, method, path)
                    except ArgoError as exc:
                        self._record(trace, attempt, error=exc, note=note)
                        raise
                    self._record(trace, attempt, note=note)
                    return data
                if code not in RETRY_STATUSES or attempt >= self._attempts:
                    error = self._error_for(resp, method, path, attempts=attempt)
                    self._record(trace, attempt, error=error, note=note)
                    raise error
            elif attempt >= self._attempts:
                error = ArgoUnavailable(
                    f"{method} {trace.path}: {result.failure} after {attempt} attempts; "
                    "check that Argo CD is reachable"
                )
                self._record(trace, attempt, error=error, note=note)
                raise error
            await self._pause(attempt, resp)

    async def _attempt(
        self,
        trace: _Trace,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: Any,
        *,
        auth: bool,
    ) -> _Attempt:
        headers = {}
        if auth:
            if self._session and not self._token:
                await self._relogin(trace, 0)
            headers["Authorization"] = f"Bearer {self._token}"
        content = None
        if body is not None:
            content = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            async with asyncio.timeout(self._timeout):  # a total deadline, whatever the transport
                resp = await self._http.request(
                    method, path, params=params, content=content, headers=headers
                )
                await resp.aread()
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            trace.outcomes.append(_failure_name(exc))
            return _Attempt(failure=_failure_name(exc), maybe_sent=False)
        except (TimeoutError, httpx.TimeoutException):
            trace.outcomes.append("timeout")
            return _Attempt(failure="timeout", maybe_sent=True)
        except (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL) as exc:
            raise ArgoError(
                self._redact(f"{method} {trace.path}: cannot send ({exc}); check the Argo CD URL")
            ) from None
        except httpx.TransportError as exc:  # dropped connection, protocol error from the peer
            trace.outcomes.append(_failure_name(exc))
            return _Attempt(failure=_failure_name(exc), maybe_sent=True)
        except httpx.HTTPError as exc:
            raise ArgoError(self._redact(f"{method} {trace.path}: {exc}")) from None
        trace.status = resp.status_code
        trace.outcomes.append(f"HTTP {resp.status_code}")
        return _Attempt(response=resp)

    async def _relogin(self, trace: _Trace, attempt: int) -> None:
        stale = self._token
        async with self._login_lock:
            if self._token and self._token != stale:
                return  # another task logged in meanwhile
            try:
                await self.login()
            except ArgoError as exc:
                failed = type(exc)(
                    self._redact(f"{trace.method} {trace.path}: login failed: {exc}"),
                    status=exc.status,
                    grpc_code=exc.grpc_code,
                )
                if attempt:
                    self._record(trace, attempt, error=failed)
                raise failed from None

    async def _pause(self, attempt: int, resp: httpx.Response | None) -> None:
        delay = self._rng.uniform(0.0, min(self._backoff_cap, self._backoff * 2 ** (attempt - 1)))
        if resp is not None:
            after = ascii_int(resp.headers.get("Retry-After", "").strip())
            if after is not None:
                delay = min(self._backoff_cap, float(after))
        await self._sleep(delay)

    # --- errors and records ---------------------------------------------------------------

    def _error_for(
        self, resp: httpx.Response, method: str, path: str, *, attempts: int = 1
    ) -> ArgoError:
        code = resp.status_code
        message, grpc_code = _error_body(resp)
        lowered = message.lower()
        where = f"{method} {path}: HTTP {code}: {message}"
        cls: type[ArgoError]
        hint = ""
        if code == 409 or (code in (400, 412) and _CONFLICT_TEXT in lowered):
            cls = ArgoConflict
            hint = "; wait for it to finish or terminate it (DELETE .../operation)"
        elif code == 401:
            cls = ArgoUnauthorized
            hint = "; check the Argo CD API token or username/password"
        elif code == 403:
            cls = ArgoForbidden
            hint = "; check the account's Argo CD RBAC (it also hides unknown applications)"
        elif code == 404:
            cls = ArgoNotFound
        elif code in RETRY_STATUSES:
            cls = ArgoUnavailable
            hint = f" (after {attempts} attempts)"
        else:
            cls = ArgoError
        return cls(self._redact(where + hint), status=code, grpc_code=grpc_code)

    def _redact(self, text: str) -> str:
        for secret in (self._token, self._password):
            if secret and len(secret) >= 4:
                text = text.replace(secret, "***")
        return text

    def _params(self, **values: str | None) -> dict[str, str]:
        params = {k: v for k, v in values.items() if v}
        if self.app_namespace:
            params["appNamespace"] = self.app_namespace
        return params

    def _trace(self, method: str, path: str, params: Mapping[str, str] | None = None) -> _Trace:
        shown = f"{path}?{urlencode(sorted(params.items()))}" if params else path
        return _Trace(method, shown, time.perf_counter())

    def _record(
        self,
        trace: _Trace,
        attempts: int,
        *,
        error: BaseException | None = None,
        note: str | None = None,
    ) -> None:
        record = CallRecord(
            method=trace.method,
            path=trace.path,
            status=trace.status,
            attempts=attempts,
            duration=time.perf_counter() - trace.started,
            error=None if error is None else self._redact(f"{type(error).__name__}: {error}"),
            outcomes=tuple(trace.outcomes),
            note=note,
        )
        self.calls.append(record)
        if self._on_call is not None:
            self._on_call(record)


ARGOCD_TOKEN_ENV = "ARGOCD_AUTH_TOKEN"  # the argocd CLI's own variable


def client_from_env(server: str, *, option: str, insecure: bool = False) -> ArgoCDClient:
    """A client of ``server`` with the token in ARGOCD_AUTH_TOKEN (never a flag: command lines
    end up in shell history and ``ps``); a bare ``host:port`` (the argocd CLI's ARGOCD_SERVER)
    is https. ValueError names ``option`` (the command-line option that asked for Argo CD)."""
    token = os.environ.get(ARGOCD_TOKEN_ENV, "").strip()
    if not token:
        raise ValueError(f"{option} needs an Argo CD API token in the variable {ARGOCD_TOKEN_ENV}")
    if "://" not in server:
        server = f"https://{server}"
    try:
        return ArgoCDClient(server, token=token, verify=not insecure, retries=2)
    except (ArgoError, ValueError) as exc:
        raise ValueError(f"--argocd-server {server}: {exc}") from None


def _app_path(name: str) -> str:
    if not name:
        raise ValueError("an application name is required")
    return f"/api/v1/applications/{quote(name, safe='')}"


def _failure_name(exc: Exception) -> str:
    return {
        "ConnectError": "connection failed",
        "ConnectTimeout": "connect timeout",
        "PoolTimeout": "connection pool timeout",
    }.get(type(exc).__name__, type(exc).__name__)


def _json(resp: httpx.Response, method: str, path: str) -> Any:
    if not resp.content:
        return {}
    try:
        return resp.json()
    except ValueError:
        raise ArgoError(
            f"{method} {path}: HTTP {resp.status_code} but the answer is not JSON "
            "(is the URL Argo CD's API, not its UI or a proxy page?)",
            status=resp.status_code,
        ) from None


def _object(data: Any, method: str, path: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ArgoError(f"{method} {path}: expected a JSON object, got {type(data).__name__}")
    return data


def _items(data: Any, method: str, path: str) -> list[dict[str, Any]]:
    items = _object(data, method, path).get("items")
    # Go's encoding/json writes an empty list as null
    return [i for i in items or () if isinstance(i, dict)]


def _error_body(resp: httpx.Response) -> tuple[str, int | None]:
    """(message, gRPC code) from a grpc-gateway ``runtimeError`` body, or the raw text."""
    try:
        body = resp.json()
    except ValueError:
        return (resp.text.strip()[:200] or resp.reason_phrase), None
    if not isinstance(body, Mapping):
        return resp.reason_phrase, None
    message = body.get("message") or body.get("error") or resp.reason_phrase
    code = body.get("code")
    return str(message)[:300], code if isinstance(code, int) else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):  # grpc-gateway style int64-as-string
        return ascii_int(value, signed=True, max_digits=19)
    return None


if TYPE_CHECKING:  # mypy proves the client satisfies the port

    def _conforms(client: ArgoCDClient) -> ArgoCD:
        return client
