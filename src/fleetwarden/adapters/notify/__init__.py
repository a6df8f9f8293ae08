"""Notification sinks over HTTP: a generic JSON webhook (``webhook``), Slack incoming webhooks
(``slack``) and Alertmanager's v2 alerts API (``alertmanager``).

Each sink implements ``ports.notify.Sink``: it turns a ``core.notifying.Batch`` into its
receiver's payload and POSTs it through ``JsonPoster``, which owns what they share — timeouts,
bounded retries with jittered back-off on 5xx, 429 and transport errors (``Retry-After``
honoured up to the cap), and mapping every failure to ``NotifyError``. No httpx exception
leaves this package.

Proxy: the environment's, by the rules the Kubernetes and Argo CD clients follow
(``adapters.proxies``, Go's ``http.ProxyFromEnvironment``): ``HTTPS_PROXY`` for an https
receiver, ``HTTP_PROXY`` for an http one, never for a loopback one or one ``NO_PROXY`` excludes.
httpx's own reading of the environment (lower-case names first, ``ALL_PROXY``, loopback
proxied, no CIDRs in ``NO_PROXY``; ``SSL_CERT_FILE`` instead of the system's CAs) stays off.
A variable naming no usable proxy is a ``ProxyError`` (a ``ValueError``) when the sink is made,
naming the sink and the variable; a failure through a proxy names it (without its user info).
Through an http proxy an http receiver's URL is seen by the proxy (that is how forwarding
works); an https one's only as ``CONNECT host:port``.

TLS: the receiver's certificate is checked against the CAs a Go program on this host trusts
(``adapters.trust``: the system's CA bundle and directories, or ``SSL_CERT_FILE`` /
``SSL_CERT_DIR``; certifi's where the system has none) and those of the sink's ``ca_file``
(``caFile`` in serve's config). A location that gives no certificate is a ``TrustError`` (a
``ValueError``) when the sink is made, naming the sink and the file or variable; a certificate
that fails verification is a ``NotifyError`` giving OpenSSL's reason and what was trusted.

Secrets: a webhook URL is a credential (Slack's is nothing else). Errors, reprs and log lines
name the sink and show its endpoint as ``scheme://host/…``; httpx's own ``HTTP Request: POST
<url>`` log line is rewritten the same way for registered URLs; response bodies quoted in errors
are cut short and scrubbed of the URL and tokens.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

import httpx

from fleetwarden.adapters import proxies, trust
from fleetwarden.logs import get_logger
from fleetwarden.ports.notify import Backoff, NotifyError

__all__ = ["JsonPoster", "Response", "RetryPolicy", "redact_url"]

log = get_logger(__name__)

USER_AGENT = "fleetwarden/0.1"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """At most ``attempts`` tries; full-jitter exponential back-off between them. With the
    default 5 s timeout a send gives up within ~25 s, inside the notifier's 30 s."""

    attempts: int = 3
    base: float = 0.5  # seconds
    cap: float = 4.0  # seconds; also the most a Retry-After is waited for

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("RetryPolicy.attempts must be >= 1")


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    text: str


def redact_url(url: str | httpx.URL, *, keep_path: bool = False) -> str:
    """``scheme://host[:port]`` and ``/…`` for the rest (or the path, if it is not secret);
    never user info or query."""
    u = httpx.URL(url) if isinstance(url, str) else url
    host = f"[{u.host}]" if ":" in u.host else u.host  # an IPv6 address, as in a URL
    port = f":{u.port}" if u.port else ""
    rest = u.path if keep_path else ("/…" if u.path not in ("", "/") else "")
    return f"{u.scheme}://{host}{port}{rest}"


class _RedactUrls(logging.Filter):
    """Rewrites registered URLs in the ``httpx`` logger's records (it logs every request URL
    at INFO); any other URL it logs loses its user info and query (an SNS ``SubscribeURL``
    carries the subscription's token in its query)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: dict[str, str] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.args, tuple):
            return True
        args = list(record.args)
        for i, arg in enumerate(args):
            if isinstance(arg, str | httpx.URL):
                text = str(arg)
                for raw, safe in self.urls.items():
                    if raw in text:
                        args[i] = safe
                        break
                else:
                    if isinstance(arg, httpx.URL) and (arg.query or arg.userinfo):
                        args[i] = redact_url(arg, keep_path=True) + ("?…" if arg.query else "")
        record.args = tuple(args)
        return True


_HTTPX_LOG_FILTER = _RedactUrls()
logging.getLogger("httpx").addFilter(_HTTPX_LOG_FILTER)


def _scrub(text: str, secrets: Iterable[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "<redacted>")
    return text


class JsonPoster:
    """POSTs bodies to one URL. ``post`` returns the 2xx response or raises ``NotifyError``.
    ``verify``: the receiver's certificate check (True: ``adapters.trust``'s CAs and those of
    ``ca_file``; a context instead of both; never False unless asked). A given ``transport``
    (tests) is never bypassed for an environment proxy, and no CA is read for it."""

    def __init__(
        self,
        sink: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        secret_path: bool = True,
        secrets: Iterable[str] = (),
        timeout: float = 5.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: bool | ssl.SSLContext = True,
        ca_file: str | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            # the URL itself is not quoted: it may be the secret
            raise ValueError(f"sink {sink!r}: the URL must be http(s)://host/...")
        self.sink = sink
        self.endpoint = redact_url(parsed, keep_path=not secret_path)
        try:
            proxy = None if transport is not None else proxies.environment_proxy(url)
        except proxies.ProxyError as exc:
            raise proxies.ProxyError(f"sink {sink!r} ({self.endpoint}): {exc}") from None
        # named in errors as scheme://host:port: a proxy's user info is a credential
        self.proxy = None if proxy is None else redact_url(proxy)
        if ca_file is not None and verify is not True:
            raise ValueError(f"sink {sink!r}: give ca_file or verify, not both")
        # TLS to the receiver, or to an https proxy (Go checks it against the same roots)
        tls = parsed.scheme == "https" or _tls_proxy(proxy)
        # what the receiver's certificate is checked against, named when it fails
        self.trusted = "nothing (no TLS)"
        if verify is False:
            self.trusted = "nothing (verification off)"
        elif verify is not True:
            self.trusted = "a given TLS context"
        elif transport is not None:
            self.trusted = "the given transport's CAs"
        elif tls:
            try:
                made = trust.client_trust(ca_file=ca_file)
            except trust.TrustError as exc:
                raise trust.TrustError(
                    f"sink {sink!r} ({self.endpoint}): {exc}", setting=exc.setting
                ) from None
            verify, self.trusted = made.context, made.trusted
        self._url = url
        self._secrets = tuple(s for s in (url, str(parsed), parsed.path, *secrets) if s)
        if secret_path and parsed.path not in ("", "/"):
            _HTTPX_LOG_FILTER.urls[str(parsed)] = self.endpoint
            _HTTPX_LOG_FILTER.urls[url] = self.endpoint
        self._retry = retry or RetryPolicy()
        self._sleep, self._rng = sleep, rng or random.Random()
        try:
            self._http = httpx.AsyncClient(
                headers={"User-Agent": USER_AGENT, **(headers or {})},
                timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
                transport=transport,
                proxy=_proxy(proxy, verify),
                verify=verify,
                follow_redirects=False,
                trust_env=False,
            )
        except ImportError:  # httpx needs socksio for a socks5 proxy
            raise proxies.ProxyError(
                f"sink {sink!r} ({self.endpoint}): the environment's proxy {self.proxy} is a "
                "socks5 one, which needs the socksio package (httpx[socks])"
            ) from None

    def __repr__(self) -> str:
        via = f", proxy={self.proxy!r}" if self.proxy else ""
        return f"JsonPoster(sink={self.sink!r}, endpoint={self.endpoint!r}{via})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def post(
        self,
        body: bytes,
        *,
        headers: Mapping[str, str] | None = None,
        sign: Callable[[bytes], Mapping[str, str]] | None = None,
    ) -> Response:
        """``sign`` (optional) gives per-attempt headers, e.g. a fresh signature timestamp."""
        backoff = Backoff(base=self._retry.base, cap=self._retry.cap, rng=self._rng)
        detail, status, retryable, attempt = "not attempted", None, False, 0
        for attempt in range(1, self._retry.attempts + 1):
            h = {"Content-Type": "application/json", **(headers or {})}
            if sign is not None:
                h.update(sign(body))
            delay: float | None = None
            try:
                resp = await self._http.post(self._url, content=body, headers=h)
            except httpx.TimeoutException:
                detail, status, retryable = "timed out", None, True
            except httpx.TransportError as exc:
                # the exception text may quote the URL: only its type is kept, and OpenSSL's
                # reason for refusing the certificate (which quotes none)
                detail, status, retryable = f"{type(exc).__name__}", None, True
                if (reason := trust.verification_failure(exc)) is not None:
                    detail += (
                        f": the receiver's TLS certificate is not trusted ({reason}); trusted: "
                        f"{self.trusted} (add the receiver's CA: caFile, SSL_CERT_FILE)"
                    )
            else:
                if 200 <= resp.status_code < 300:
                    return Response(resp.status_code, resp.text)
                status = resp.status_code
                snippet = _scrub(resp.text.strip()[:200], self._secrets) or resp.reason_phrase
                detail = f"HTTP {status}: {snippet}"
                retryable = status == 429 or status >= 500
                delay = _retry_after(resp) if retryable else None
            if not retryable or attempt == self._retry.attempts:
                break
            wait = backoff.next() if delay is None else min(delay, self._retry.cap)
            log.info(
                "notification retry",
                sink=self.sink,
                attempt=attempt,
                wait=round(wait, 2),
                reason=detail,
            )
            await self._sleep(wait)
        # raised outside any ``except``: no httpx exception (which may hold the URL) chained
        via = f" through the proxy {self.proxy}" if self.proxy else ""
        raise NotifyError(
            self.sink,
            f"POST {self.endpoint}{via}: {detail} "
            f"(after {attempt} attempt{'s' if attempt > 1 else ''})",
            status=status,
            attempts=attempt,
            retryable=retryable,
        )


def _proxy(url: str | None, verify: bool | ssl.SSLContext) -> httpx.Proxy | str | None:
    """An https proxy is checked against the receiver's CAs, as Go's transport checks it
    (httpx would check it against certifi's alone)."""
    if url is not None and _tls_proxy(url) and isinstance(verify, ssl.SSLContext):
        return httpx.Proxy(url, ssl_context=verify)
    return url


def _tls_proxy(url: str | None) -> bool:
    return url is not None and httpx.URL(url).scheme == "https"


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: use the back-off instead
