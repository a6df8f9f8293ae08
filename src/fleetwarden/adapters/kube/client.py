"""One ``KubeClient`` per cluster: an httpx.AsyncClient with the cluster's TLS and credentials.

Credentials are static (a token, a rotating token file, basic auth, a client certificate) or
come from an exec credential plugin (``exec_credentials.ExecCredentialSource``): then every
request asks the source for the current credential (cached; the plugin runs only when it
expires), and a 401 re-runs the plugin once and retries. A client certificate from the plugin
needs its own TLS context: a new httpx client takes the new connections while open watch
streams finish on the old one, which is closed once its last stream ends.

Requests go through the endpoint's ``proxy_url`` (kubeconfig ``proxy-url``), else through the
proxy the environment names for the server as client-go picks it (``adapters.proxies``).
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Generator, Mapping
from typing import Any

import httpx

from fleetwarden.adapters import proxies
from fleetwarden.adapters.kube.exec_credentials import ExecCredentialSource
from fleetwarden.core.clusters import ClusterEndpoint, Impersonation, PluginCredential
from fleetwarden.ports.kube import (
    ApiError,
    Conflict,
    CredentialError,
    Forbidden,
    Gone,
    KubeError,
    ListResult,
    NotFound,
    Transient,
    Unauthorized,
    WatchEvent,
)

__all__ = [
    "JSON_MERGE",
    "STRATEGIC_MERGE",
    "KubeClient",
    "TokenFileAuth",
    "impersonation_headers",
    "ssl_context",
]

JSON_MERGE = "application/merge-patch+json"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class _ServerNameContext(ssl.SSLContext):
    """A TLS context that sends ``server_name`` as SNI and checks the server's certificate
    against it, whatever host the URL (or a proxy tunnel) names: Go's ``tls.Config.ServerName``,
    which client-go sets from kubeconfig ``tls-server-name``."""

    server_name: str

    def wrap_socket(  # type: ignore[override]
        self,
        sock: Any,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        return super().wrap_socket(
            sock, server_side, do_handshake_on_connect, suppress_ragged_eofs,
            self.server_name, session,
        )  # fmt: skip

    def wrap_bio(  # type: ignore[override]
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        return super().wrap_bio(incoming, outgoing, server_side, self.server_name, session)


def _context(server_name: str | None, ca_pem: bytes | None = None) -> ssl.SSLContext:
    """Verification and hostname check on (``ssl.create_default_context``), trusting ``ca_pem``
    alone when given (client-go's RootCAs: the kubeconfig's CA, not the system's), else the
    system's CAs; a ``_ServerNameContext`` when a server name replaces the URL's host."""
    cadata = ca_pem.decode("ascii", "replace") if ca_pem else None
    if server_name is None:
        return ssl.create_default_context(cadata=cadata)
    ctx = _ServerNameContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.server_name = server_name
    if cadata is not None:
        ctx.load_verify_locations(cadata=cadata)
    else:
        ctx.load_default_certs()
    return ctx


def ssl_context(
    endpoint: ClusterEndpoint, *, client_cert: tuple[bytes, bytes] | None = None
) -> ssl.SSLContext:
    """TLS per the endpoint: its CA (no verification if insecure), the name its certificate is
    checked against (``tls_server_name``, else the URL's host) and its client certificate, or
    ``client_cert`` (PEM certificate and key, from an exec plugin) instead."""
    if endpoint.insecure:  # no CA to load: nothing is verified
        ctx = _context(endpoint.tls_server_name)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = _context(endpoint.tls_server_name, endpoint.ca_pem)
    creds = endpoint.credentials
    if client_cert is None and creds.client_cert_pem and creds.client_key_pem:
        client_cert = (creds.client_cert_pem, creds.client_key_pem)
    if client_cert is not None:
        # the ssl module loads client certificates only from files: a private, short-lived dir
        with tempfile.TemporaryDirectory(prefix="fw-tls-") as tmp:
            cert, key = os.path.join(tmp, "c.pem"), os.path.join(tmp, "k.pem")
            for path, data in ((cert, client_cert[0]), (key, client_cert[1])):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            ctx.load_cert_chain(cert, key, password=_no_passphrase)
    return ctx


def _no_passphrase() -> str:
    """An encrypted client key: OpenSSL would otherwise prompt on the terminal (and a service
    would wait); client-go cannot read one either (Go's tls.X509KeyPair)."""
    raise ValueError("the client key is encrypted (a passphrase-protected PEM): decrypt it")


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
        interactive: bool = False,
        not_interactive_because: str = "standard input is not a terminal",
        exec_timeout: float | None = None,
    ) -> None:
        """``interactive``: an exec plugin may be handed the terminal (``IfAvailable`` /
        ``Always`` plugins); ``not_interactive_because`` is said when an ``Always`` one cannot
        run. ``exec_timeout`` bounds one plugin run (default 60 s, 300 s interactive)."""
        self.endpoint = endpoint
        self.cluster = endpoint.name
        creds = endpoint.credentials
        headers = [("Accept", "application/json"), ("User-Agent", "fleetwarden/0.1")]
        if endpoint.disable_compression:  # kubeconfig disable-compression: ask for none
            headers.append(("Accept-Encoding", "identity"))
        if creds.impersonate is not None:
            headers.extend(impersonation_headers(creds.impersonate))
        self._headers = httpx.Headers(headers)
        self._auth: httpx.Auth | None = None
        self._exec: ExecCredentialSource | None = None
        if creds.uses_exec:
            self._exec = ExecCredentialSource(
                endpoint,
                interactive=interactive,
                not_interactive_because=not_interactive_because,
                timeout=exec_timeout,
            )
        elif creds.token_file:
            self._auth = TokenFileAuth(creds.token_file, creds.token)
        elif creds.token:
            self._headers["Authorization"] = f"Bearer {creds.token}"
        elif creds.username:  # client-go sends basic auth for a username, even without password
            self._auth = httpx.BasicAuth(creds.username, creds.password or "")
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 5.0))
        self._transport = transport
        # kubeconfig proxy-url, else the environment's proxy as client-go picks it (a given
        # transport, in tests, is never bypassed for an environment proxy)
        try:
            self._proxy = endpoint.proxy_url or (
                None if transport is not None else proxies.environment_proxy(endpoint.server)
            )
        except proxies.ProxyError as exc:
            raise ApiError(self.cluster, f"cannot reach {endpoint.server}: {exc}") from None
        # the client certificate the current httpx client presents (exec plugins only), and
        # how many requests or streams use each client; a replaced one closes when unused
        self._cert: tuple[bytes, bytes] | None = None
        self._users: dict[httpx.AsyncClient, int] = {}
        self._retired: list[httpx.AsyncClient] = []
        try:
            self._http = self._new_http(None)
        except (ssl.SSLError, ValueError, OSError) as exc:
            raise ApiError(self.cluster, f"bad TLS configuration: {exc}") from None
        except ImportError:  # httpx needs socksio for a socks5 proxy-url
            raise ApiError(
                self.cluster, "a socks5 proxy needs the socksio package (httpx[socks])"
            ) from None

    def _new_http(self, client_cert: tuple[bytes, bytes] | None) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.endpoint.server,
            headers=self._headers,
            auth=self._auth,
            verify=ssl_context(self.endpoint, client_cert=client_cert),
            timeout=self._timeout,
            transport=self._transport,
            proxy=self._proxy,
            # no environment settings beyond the proxy client-go takes (httpx would also read
            # ALL_PROXY, prefer lower-case names and proxy loopback servers: client-go does not)
            trust_env=False,
            # every watch holds a connection for its whole life (nodes, six workload kinds,
            # per namespace when so configured): no pool cap, or watches would queue
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
        )

    @property
    def exec_source(self) -> ExecCredentialSource | None:
        """The exec plugin behind this client's credentials, if any (tests, metrics)."""
        return self._exec

    async def authenticate(self) -> None:
        """Obtain the credential now (runs an exec plugin if one is due): a command can then
        fail at once, with the plugin's own error, before it reads anything."""
        async with self._session():
            pass

    @contextlib.asynccontextmanager
    async def _session(
        self,
    ) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str], PluginCredential | None]]:
        """The httpx client for one request or stream, the auth headers to add to it, and the
        exec credential they carry (None for static credentials)."""
        credential: PluginCredential | None = None
        headers: dict[str, str] = {}
        if self._exec is not None:
            credential = await self._exec.get()
            if credential.token:
                headers["Authorization"] = f"Bearer {credential.token}"
            await self._present(credential)
        http = self._http
        self._users[http] = self._users.get(http, 0) + 1
        try:
            yield http, headers, credential
        finally:
            left = self._users.pop(http) - 1
            if left:
                self._users[http] = left
            elif http in self._retired:
                self._retired.remove(http)
                await http.aclose()

    async def _present(self, credential: PluginCredential) -> None:
        """Switch to a client with the plugin's certificate when it changed (new TLS context
        for new connections; streams on the old client go on until they end)."""
        pair = None
        if credential.client_cert_pem and credential.client_key_pem:
            pair = (credential.client_cert_pem, credential.client_key_pem)
        if pair == self._cert:
            return
        try:
            fresh = self._new_http(pair)
        except (ssl.SSLError, ValueError, OSError) as exc:
            assert self._exec is not None
            self._exec.expire(credential)  # the next request asks the plugin again
            raise CredentialError(
                self.cluster,
                f"{self._exec.plugin.origin or self.cluster}: exec credential plugin "
                f"{self._exec.plugin.command!r} returned a client certificate and key that do "
                f"not load: {type(exc).__name__}",
            ) from None
        old, self._http, self._cert = self._http, fresh, pair
        if self._users.get(old):
            self._retired.append(old)
        else:
            await old.aclose()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: httpx.Timeout,
    ) -> httpx.Response:
        """One request; with an exec plugin, a 401 re-runs the plugin and retries once."""
        for retry in (False, True):
            async with self._session() as (http, auth, used):
                resp = await http.request(
                    method,
                    path,
                    params=params,
                    content=content,
                    headers={**auth, **(headers or {})},
                    timeout=timeout,
                )
            if not await self._retry_after(resp.status_code, used, retry):
                return resp
        raise AssertionError("unreachable")

    async def _retry_after(self, status: int, used: PluginCredential | None, retried: bool) -> bool:
        """After a 401 with a plugin's credential: refresh it; retry when it changed."""
        if status != 401 or used is None or retried or self._exec is None:
            return False
        fresh = await self._exec.refresh(used)
        return (fresh.token, fresh.client_cert_pem) != (used.token, used.client_cert_pem)

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for http in (*self._retired, self._http):
            await http.aclose()
        self._retired.clear()

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
            resp = await self._send(
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
                self.cluster, f"{method} {path}: {_transport_reason(exc, 'connection failed')}"
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
        self,
        path: str,
        *,
        label_selector: str | None = None,
        limit: int = 500,
        field_selector: str | None = None,
    ) -> ListResult:
        """All items (following ``continue`` pages) and the list's resourceVersion. A field
        selector (``status.phase=Pending``) is applied by the API server: what it filters out
        never crosses the network."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": limit}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
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
        field_selector: str | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Events after ``resource_version``, bookmarks included, until the server ends the
        stream. Raises ``Gone`` when the version is too old (HTTP 410 or an ERROR event). With a
        field selector, an object that stops matching arrives as DELETED."""
        params: dict[str, Any] = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
        }
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        timeout = httpx.Timeout(connect=5.0, read=timeout_seconds + 30, write=10.0, pool=5.0)
        try:
            for retry in (False, True):
                async with (
                    self._session() as (http, auth, used),
                    http.stream("GET", path, params=params, headers=auth, timeout=timeout) as resp,
                ):
                    if await self._retry_after(resp.status_code, used, retry):
                        continue  # a fresh credential from the plugin: open the watch again
                    if resp.status_code >= 400:
                        await resp.aread()
                        self._raise_for(resp, "WATCH", path)
                    async for line in resp.aiter_lines():
                        if not line.strip():
                            continue
                        yield self._event(path, line, used)
                    return
        except httpx.TimeoutException:
            raise Transient(self.cluster, f"WATCH {path}: read timed out") from None
        except httpx.TransportError as exc:
            raise Transient(
                self.cluster, f"WATCH {path}: {_transport_reason(exc, 'connection lost')}"
            ) from None

    def _event(self, path: str, line: str, used: PluginCredential | None) -> WatchEvent:
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
            if code == 401 and used is not None and self._exec is not None:
                # the server ended the watch over the credential: the retry gets a fresh one
                self._exec.expire(used)
            raise Transient(self.cluster, f"WATCH {path}: {msg}", status=code)
        return WatchEvent(str(kind), obj)

    async def patch(self, path: str, body: Any, *, content_type: str = STRATEGIC_MERGE) -> Any:
        return await self.request("PATCH", path, body=body, content_type=content_type)

    async def create(self, path: str, body: Any, *, timeout: float | None = None) -> Any:
        """POST ``body`` to the collection ``path``; an existing name is ``Conflict``."""
        return await self.request("POST", path, body=body, timeout=timeout)

    async def replace(self, path: str, body: Any, *, timeout: float | None = None) -> Any:
        """PUT ``body`` at ``path``; a stale ``metadata.resourceVersion`` is ``Conflict``."""
        return await self.request("PUT", path, body=body, timeout=timeout)

    async def delete(
        self, path: str, *, resource_version: str | None = None, timeout: float | None = None
    ) -> Any:
        """DELETE ``path``; with ``resource_version`` only that version of the object (a
        precondition: ``Conflict`` when it changed)."""
        body = None
        if resource_version is not None:
            body = {
                "apiVersion": "v1",
                "kind": "DeleteOptions",
                "preconditions": {"resourceVersion": resource_version},
            }
        return await self.request("DELETE", path, body=body, timeout=timeout)

    # --- health --------------------------------------------------------------------------

    async def readyz(self, *, timeout: float = 5.0) -> tuple[bool, str]:
        """(ready, detail). A 500 with a reason is "not ready"; no answer raises Transient."""
        try:
            resp = await self._send("GET", "/readyz", timeout=httpx.Timeout(timeout))
        except httpx.TimeoutException:
            raise Transient(self.cluster, "/readyz: timed out") from None
        except httpx.TransportError as exc:
            raise Transient(self.cluster, f"/readyz: {type(exc).__name__}") from None
        if resp.status_code in (401, 403):
            self._raise_for(resp, "GET", "/readyz")
        return resp.status_code == 200, resp.text.strip()[:200]

    async def metrics_text(self, *, timeout: float = 15.0) -> str:
        """The API server's ``/metrics`` (Prometheus text); needs ``get`` on that URL."""
        try:
            resp = await self._send("GET", "/metrics", timeout=httpx.Timeout(timeout))
        except httpx.TimeoutException:
            raise Transient(self.cluster, "/metrics: timed out") from None
        except httpx.TransportError as exc:
            raise Transient(self.cluster, f"/metrics: {type(exc).__name__}") from None
        if resp.status_code != 200:
            self._raise_for(resp, "GET", "/metrics")
        return resp.text

    async def version(self, *, timeout: float = 5.0) -> str:
        data = await self.request("GET", "/version", timeout=timeout)
        return str(data.get("gitVersion", "")) if isinstance(data, Mapping) else ""


def _transport_reason(exc: httpx.TransportError, default: str) -> str:
    """Why a request did not get through. A request the client refused to send is said
    without the client's text: h11 quotes the offending header value, which may be the
    ``Authorization`` header (a token with a stray newline)."""
    if isinstance(exc, httpx.LocalProtocolError):
        return (
            "LocalProtocolError: the request could not be sent (a header value, such as the "
            "credential, holds a character HTTP does not allow)"
        )
    return f"{type(exc).__name__}: {exc or default}"


def impersonation_headers(who: Impersonation) -> list[tuple[str, str]]:
    """The ``Impersonate-*`` headers client-go sends for a kubeconfig user's ``as`` fields
    (transport/round_trippers.go: one ``Impersonate-Group`` per group, one
    ``Impersonate-Extra-<key>`` per value, the key %-escaped as headerKeyEscape does)."""
    out = [("Impersonate-User", who.user)]
    if who.uid:
        out.append(("Impersonate-Uid", who.uid))
    out.extend(("Impersonate-Group", group) for group in who.groups)
    for key, values in who.extra:
        out.extend((f"Impersonate-Extra-{_header_key_escape(key)}", v) for v in values)
    return out


# the bytes of an HTTP token (RFC 7230 tchar) that stay as they are in a header name; '%'
# is escaped too, so the API server's url.PathUnescape reads the key back
_TOKEN_BYTES = frozenset(
    b"!#$&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)


def _header_key_escape(key: str) -> str:
    return "".join(chr(b) if b in _TOKEN_BYTES else f"%{b:02X}" for b in key.encode("utf-8"))


def _status_message(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200] or resp.reason_phrase
    if isinstance(body, Mapping) and body.get("message"):
        return str(body["message"])[:300]
    return resp.reason_phrase
