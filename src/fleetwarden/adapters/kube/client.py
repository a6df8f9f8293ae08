"""One ``KubeClient`` per cluster: an httpx.AsyncClient with the cluster's TLS and credentials."""

from __future__ import annotations

import json
import os
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Generator, Mapping
from typing import Any

import httpx

from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.ports.kube import (
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    KubeError,
    ListResult,
    NotFound,
    Transient,
    Unauthorized,
    WatchEvent,
)

__all__ = ["JSON_MERGE", "STRATEGIC_MERGE", "KubeClient", "TokenFileAuth", "ssl_context"]

JSON_MERGE = "application/merge-patch+json"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


def ssl_context(endpoint: ClusterEndpoint) -> ssl.SSLContext | bool:
    """TLS per the endpoint: its CA, its client certificate, or no verification if insecure."""
    if endpoint.insecure:
        return False
    ctx = ssl.create_default_context()
    if endpoint.ca_pem:
        ctx = ssl.create_default_context(cadata=endpoint.ca_pem.decode("ascii", "replace"))
    creds = endpoint.credentials
    if creds.client_cert_pem and creds.client_key_pem:
        # the ssl module loads client certificates only from files: a private, short-lived dir
        with tempfile.TemporaryDirectory(prefix="fw-tls-") as tmp:
            cert, key = os.path.join(tmp, "c.pem"), os.path.join(tmp, "k.pem")
            for path, data in ((cert, creds.client_cert_pem), (key, creds.client_key_pem)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            ctx.load_cert_chain(cert, key)
    return ctx


class TokenFileAuth(httpx.Auth):
    """A bearer token read from a file that rotates: re-read at most every ``period``
    seconds, and at once after a 401 (the old token may just have expired)."""

    def __init__(self, path: str, token: str | None = None, *, period: float = 60.0) -> None:
        self.path, self.period = path, period
        self._token, self._read_at = token or "", time.monotonic() if token else 0.0

    def _current(self, *, force: bool = False) -> str:
        now = time.monotonic()
        if force or not self._token or now - self._read_at >= self.period:
            try:
                with open(self.path, encoding="utf-8") as fh:
                    fresh = fh.read().strip()
            except OSError:
                fresh = ""  # keep the last token; the API server will say if it is stale
            if fresh:
                self._token = fresh
            self._read_at = now
        return self._token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        sent = self._current()
        request.headers["Authorization"] = f"Bearer {sent}"
        response = yield request
        if response.status_code == 401 and self._current(force=True) != sent:
            request.headers["Authorization"] = f"Bearer {self._token}"
            yield request


class KubeClient:
    """Async access to one API server. Use as an async context manager."""

    def __init__(
        self,
        endpoint: ClusterEndpoint,
        *,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.cluster = endpoint.name
        headers = {"Accept": "application/json", "User-Agent": "fleetwarden/0.1"}
        creds = endpoint.credentials
        auth: httpx.Auth | None = None
        if creds.token_file:
            auth = TokenFileAuth(creds.token_file, creds.token)
        elif creds.token:
            headers["Authorization"] = f"Bearer {creds.token}"
        elif creds.username and creds.password:
            auth = httpx.BasicAuth(creds.username, creds.password)
        try:
            verify = ssl_context(endpoint)
        except (ssl.SSLError, ValueError, OSError) as exc:
            raise ApiError(self.cluster, f"bad TLS configuration: {exc}") from None
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 5.0))
        self._http = httpx.AsyncClient(
            base_url=endpoint.server,
            headers=headers,
            auth=auth,
            verify=verify,
            timeout=self._timeout,
            transport=transport,
            trust_env=False,
            # every watch holds a connection for its whole life (nodes, six workload kinds,
            # per namespace when so configured): no pool cap, or watches would queue
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
        )

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- plain requests ------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if content is not None else None
        try:
            resp = await self._http.request(
                method,
                path,
                params=params,
                content=content,
                headers=headers,
                timeout=httpx.Timeout(timeout) if timeout else self._timeout,
            )
        except httpx.TimeoutException:
            raise Transient(self.cluster, f"{method} {path}: timed out") from None
        except httpx.TransportError as exc:
            raise Transient(
                self.cluster, f"{method} {path}: {type(exc).__name__}: {exc or 'connection failed'}"
            ) from None
        self._raise_for(resp, method, path)
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            return resp.text

    def _raise_for(self, resp: httpx.Response, method: str, path: str) -> None:
        code = resp.status_code
        if code < 400:
            return
        reason = _status_message(resp)
        where = f"{method} {path}: HTTP {code}: {reason}"
        cls: type[KubeError]
        if code == 401:
            cls = Unauthorized
        elif code == 403:
            cls = Forbidden
        elif code == 404:
            cls = NotFound
        elif code == 409:
            cls = Conflict
        elif code == 410:
            cls = Gone
        elif code == 429 or code >= 500:
            cls = Transient
        else:
            cls = ApiError
        raise cls(self.cluster, where, status=code)

    async def get(self, path: str, **params: Any) -> Any:
        return await self.request("GET", path, params=params or None)

    async def list(
        self, path: str, *, label_selector: str | None = None, limit: int = 500
    ) -> ListResult:
        """All items (following ``continue`` pages) and the list's resourceVersion."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": limit}
        if label_selector:
            params["labelSelector"] = label_selector
        while True:
            page = await self.request("GET", path, params=params)
            items.extend(page.get("items") or ())
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return ListResult(items, str(meta.get("resourceVersion", "")))
            params["continue"] = token

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[WatchEvent]:
        """Events after ``resource_version``, bookmarks included, until the server ends the
        stream. Raises ``Gone`` when the version is too old (HTTP 410 or an ERROR event)."""
        params: dict[str, Any] = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
        }
        if label_selector:
            params["labelSelector"] = label_selector
        timeout = httpx.Timeout(connect=5.0, read=timeout_seconds + 30, write=10.0, pool=5.0)
        try:
            async with self._http.stream("GET", path, params=params, timeout=timeout) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    self._raise_for(resp, "WATCH", path)
                async for line in resp.aiter_lines():
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError:
                        raise Transient(self.cluster, f"WATCH {path}: bad event line") from None
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        code = obj.get("code")
                        msg = obj.get("message", "watch error")
                        if code == 410:
                            raise Gone(self.cluster, f"WATCH {path}: {msg}", status=410)
                        raise Transient(self.cluster, f"WATCH {path}: {msg}", status=code)
                    yield WatchEvent(str(kind), obj)
        except httpx.TimeoutException:
            raise Transient(self.cluster, f"WATCH {path}: read timed out") from None
        except httpx.TransportError as exc:
            raise Transient(
                self.cluster, f"WATCH {path}: {type(exc).__name__}: {exc or 'connection lost'}"
            ) from None

    async def patch(self, path: str, body: Any, *, content_type: str = STRATEGIC_MERGE) -> Any:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    # --- health --------------------------------------------------------------------------

    async def readyz(self, *, timeout: float = 5.0) -> tuple[bool, str]:
        """(ready, detail). A 500 with a reason is "not ready"; no answer raises Transient."""
        try:
            resp = await self._http.get("/readyz", timeout=httpx.Timeout(timeout))
        except httpx.TimeoutException:
            raise Transient(self.cluster, "/readyz: timed out") from None
        except httpx.TransportError as exc:
            raise Transient(self.cluster, f"/readyz: {type(exc).__name__}") from None
        if resp.status_code in (401, 403):
            self._raise_for(resp, "GET", "/readyz")
        return resp.status_code == 200, resp.text.strip()[:200]

    async def version(self, *, timeout: float = 5.0) -> str:
        data = await self.request("GET", "/version", timeout=timeout)
        return str(data.get("gitVersion", "")) if isinstance(data, Mapping) else ""


def _status_message(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200] or resp.reason_phrase
    if isinstance(body, Mapping) and body.get("message"):
        return str(body["message"])[:300]
    return resp.reason_phrase
