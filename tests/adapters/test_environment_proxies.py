"""The notification sinks, the SNS confirmation, the demo's deliveries and the gateway's link to
its worker against the environment's proxy, over real sockets: a local forwarding and CONNECT
proxy that records what it is asked, and local receivers (plain and TLS) that record what
arrives.

Pins that the sinks take the proxy the Kubernetes and Argo CD clients take (``adapters.proxies``,
Go's rules): ``HTTP_PROXY`` forwards an http receiver's POST, ``HTTPS_PROXY`` tunnels to an https
one (which the proxy sees only as ``CONNECT host:port``), a loopback receiver and one ``NO_PROXY``
excludes are reached directly; that no webhook token, Authorization header or proxy password
gets into an error, a repr or a log line; that a proxy variable naming no usable proxy stops
the sink being made, naming the sink and the variable; that the SNS confirmation takes the same
proxy, and ``approve`` and the demo's posts to a loopback service none; and that the worker
link, a Unix socket, never goes near a proxy.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import logging
import socket
import ssl
import traceback
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetwarden.adapters import simulated_cloud
from fleetwarden.adapters.approvals import ApprovalError, post_approval
from fleetwarden.adapters.notify import RetryPolicy
from fleetwarden.adapters.notify.alertmanager import AlertmanagerSink
from fleetwarden.adapters.notify.slack import SlackSink
from fleetwarden.adapters.notify.webhook import SIGNATURE_HEADER, WebhookSink
from fleetwarden.adapters.proxies import ProxyError
from fleetwarden.adapters.worker_link import WorkerLink
from fleetwarden.ports.notify import NotifyError
from fleetwarden.wiring.service import confirm_sns
from tests.adapters.test_kube_kubeconfig import make_certs
from tests.adapters.test_notify_sinks import T0, Sleeps, appeared, finding, plan_batch

HOOK_TOKEN = "T0SECRET/B0SECRET/xoxSecretWebhookToken"
HMAC_SECRET = "whsec-test-secret"
BEARER = "am-bearer-token-secret"
PROXY_PASSWORD = "pr0xyS3cret"
NAME = "hooks.internal"  # resolvable only by the proxy
SECRETS = (HOOK_TOKEN, "T0SECRET", "xoxSecretWebhookToken", HMAC_SECRET, BEARER, PROXY_PASSWORD)


# --- the servers ------------------------------------------------------------------------------


@dataclass
class Arrival:
    head: list[str]  # request line and header lines
    body: bytes

    def header(self, name: str) -> str | None:
        for line in self.head[1:]:
            key, _, value = line.partition(":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None


async def _read_request(reader: asyncio.StreamReader) -> Arrival:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")[:-2]
    arrival = Arrival(head, b"")
    length = int(arrival.header("content-length") or 0)
    arrival.body = await reader.readexactly(length) if length else b""
    return arrival


async def _reply(writer: asyncio.StreamWriter, status: str, body: bytes = b"ok") -> None:
    kind = "application/json" if body.startswith(b"{") else "text/plain"
    writer.write(
        f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def serving(
    handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any],
    *,
    host: str = "127.0.0.1",
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[int]:
    server = await asyncio.start_server(handle, host, 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@dataclass
class Receiver:
    """A webhook receiver: records each POST, answers 200 and ``body``."""

    body: bytes = b"ok"
    arrivals: list[Arrival] = field(default_factory=list)

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            self.arrivals.append(await _read_request(reader))
            await _reply(writer, "200 OK", self.body)


@dataclass
class Proxy:
    """An HTTP proxy: an absolute-form request is forwarded, a CONNECT tunnelled, to the
    address ``resolve`` gives the name (127.0.0.1 for ``hooks.internal``, else the name
    itself); ``refuse`` (a status line) answers every request with it instead, echoing the
    request line as a broken proxy might. Records the head (request line and headers) of every
    request it is asked; what passes through a tunnel is the TLS stream, not recorded."""

    resolve: Mapping[str, str] = field(default_factory=lambda: {NAME: "127.0.0.1"})
    refuse: str | None = None
    heads: list[list[str]] = field(default_factory=list)

    @property
    def seen(self) -> str:
        return "\n".join("\n".join(head) for head in self.heads)

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await _read_request(reader)
        self.heads.append(request.head)
        if self.refuse:
            await _reply(writer, self.refuse, f"cannot forward {request.head[0]}".encode())
            return
        method, target, _ = request.head[0].split(" ")
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(self.resolve.get(host, host), port)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await _pipe_both(reader, writer, up_reader, up_writer)
            return
        # absolute form: http://host:port/path -> origin form to the server
        rest = target.split("://", 1)[1]
        authority, _, path = rest.partition("/")
        host, _, port = authority.rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(self.resolve.get(host, host), port)
        keep = [h for h in request.head[1:] if not h.lower().startswith(("proxy-", "connection"))]
        up_writer.write(
            "\r\n".join([f"{method} /{path} HTTP/1.1", *keep, "Connection: close", "", ""]).encode()
            + request.body
        )
        await up_writer.drain()
        await _pipe_both(reader, writer, up_reader, up_writer)


async def _pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        dst.close()

    # a tunnel still open when the test ends is cancelled with the server: not an error
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


@contextlib.asynccontextmanager
async def tls_receiver(
    tmp: Path, name: str = NAME
) -> AsyncIterator[tuple[int, Receiver, ssl.SSLContext]]:
    """An https receiver whose certificate names ``name``; yields (port, receiver, a client
    context that trusts its CA)."""
    ca, cert, key = make_certs(tmp, name)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    receiver = Receiver()
    async with serving(receiver, tls=server_ctx) as port:
        yield port, receiver, ssl.create_default_context(cadata=ca.decode())


def _own_address() -> str | None:
    """An IPv4 address of this host that is not a loopback one (a receiver there is reached
    like a remote one), or None."""
    candidates = []
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent: only the route is looked up
        candidates.append(s.getsockname()[0])
    with contextlib.suppress(OSError):
        candidates += [
            a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
        ]
    for address in candidates:
        if not address.startswith("127."):
            with contextlib.suppress(OSError), socket.socket() as probe:
                probe.bind((address, 0))
                return str(address)
    return None


def _rendered(errors: list[BaseException], *objects: object, log: str = "") -> str:
    return "\n".join(
        [
            *(str(e) for e in errors),
            *(repr(e) for e in errors),
            *("".join(traceback.format_exception(e)) for e in errors),
            *(repr(o) for o in objects),
            log,
        ]
    )


# --- through the proxy ------------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy"])
async def test_a_webhook_to_an_http_receiver_is_forwarded_by_the_http_proxy(no_proxy_env, variable):
    """HTTP_PROXY (or http_proxy) carries an http receiver's POST, with the proxy's
    credentials in Proxy-Authorization and the receiver's signature header intact; the
    receiver's name is resolved by the proxy only. Without the environment's proxy the sink
    would connect directly, and fail."""
    receiver, proxy = Receiver(), Proxy()
    async with serving(receiver) as port, serving(proxy) as proxy_port:
        no_proxy_env.setenv(variable, f"http://fw:{PROXY_PASSWORD}@127.0.0.1:{proxy_port}")
        url = f"http://{NAME}:{port}/hook/{HOOK_TOKEN}"
        sink = WebhookSink("hooks", url, secret=HMAC_SECRET, retry=RetryPolicy(attempts=1))
        await sink.send(plan_batch(appeared(finding())))
        await sink.aclose()
    (head,) = proxy.heads
    assert head[0] == f"POST {url} HTTP/1.1"
    credentials = base64.b64encode(f"fw:{PROXY_PASSWORD}".encode()).decode()
    assert f"Proxy-Authorization: Basic {credentials}" in head
    (arrival,) = receiver.arrivals
    assert arrival.head[0] == f"POST /hook/{HOOK_TOKEN} HTTP/1.1"
    assert arrival.header(SIGNATURE_HEADER) and b'"notifications"' in arrival.body


def _slack(url: str, ctx: ssl.SSLContext) -> Any:
    return SlackSink("slack", url, verify=ctx, retry=RetryPolicy(attempts=1))


def _webhook(url: str, ctx: ssl.SSLContext) -> Any:
    headers = {"Authorization": f"Bearer {BEARER}"}
    return WebhookSink("hooks", url, headers=headers, verify=ctx, retry=RetryPolicy(attempts=1))


def _alertmanager(url: str, ctx: ssl.SSLContext) -> Any:
    base = url.split("/services/")[0]
    return AlertmanagerSink(
        "am", base, bearer_token=BEARER, verify=ctx, retry=RetryPolicy(attempts=1)
    )


@pytest.mark.parametrize("make", [_slack, _webhook, _alertmanager], ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy"])
async def test_an_https_receiver_is_reached_through_a_connect_tunnel_the_proxy_cannot_read(
    tmp_path, no_proxy_env, make, variable
):
    """HTTPS_PROXY (a value without a scheme: an http proxy, as in Go) tunnels to an https
    receiver whose certificate is checked against its own name inside the tunnel; the proxy
    sees ``CONNECT host:port`` and nothing of the token in the path or the Authorization."""
    proxy = Proxy()
    async with tls_receiver(tmp_path) as (port, receiver, ctx), serving(proxy) as proxy_port:
        no_proxy_env.setenv(variable, f"127.0.0.1:{proxy_port}")
        no_proxy_env.setenv("NO_PROXY", "10.0.0.0/8,.corp.example")  # not this receiver
        sink = make(f"https://{NAME}:{port}/services/{HOOK_TOKEN}", ctx)
        await sink.send(plan_batch(appeared(finding())))
        await sink.aclose()
    assert [head[0] for head in proxy.heads] == [f"CONNECT {NAME}:{port} HTTP/1.1"]
    for secret in SECRETS:
        assert secret not in proxy.seen, secret
    (arrival,) = receiver.arrivals  # the secrets reached the receiver, and only it
    assert arrival.header("host") == f"{NAME}:{port}"
    assert HOOK_TOKEN in arrival.head[0] or arrival.header("authorization") == f"Bearer {BEARER}"


@pytest.mark.parametrize(
    ("variable", "url"),
    [("HTTPS_PROXY", f"http://{NAME}:9/hook"), ("HTTP_PROXY", f"https://{NAME}:9/hook")],
)
async def test_one_schemes_proxy_variable_is_never_taken_for_the_other_scheme(
    no_proxy_env, variable, url
):
    """Go never falls back to the other scheme's variable: with only HTTPS_PROXY set an http
    receiver is reached directly, and with only HTTP_PROXY an https one (here its name is one
    only the proxy resolves, so the direct attempt fails), and the proxy is not asked."""
    proxy = Proxy()
    async with serving(proxy) as proxy_port:
        no_proxy_env.setenv(variable, f"http://127.0.0.1:{proxy_port}")
        sink = WebhookSink("hooks", url, retry=RetryPolicy(attempts=1), sleep=Sleeps())
        with pytest.raises(NotifyError) as info:
            await sink.send(plan_batch(appeared(finding())))
        await sink.aclose()
    assert proxy.heads == [] and "through the proxy" not in str(info.value)
    assert "ConnectError" in str(info.value)


# --- around the proxy -------------------------------------------------------------------------


async def test_a_loopback_receiver_is_reached_directly_whatever_the_proxy_variables(no_proxy_env):
    """Go never proxies localhost or a loopback address (httpproxy's useProxy), and NO_PROXY
    need not say so: httpx's own environment reading would send this through the proxy."""
    receiver, proxy = Receiver(), Proxy()
    async with serving(receiver) as port, serving(proxy) as proxy_port:
        for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            no_proxy_env.setenv(variable, f"http://127.0.0.1:{proxy_port}")
        for host in ("127.0.0.1", "localhost"):
            sink = WebhookSink("hooks", f"http://{host}:{port}/hook", retry=RetryPolicy(attempts=1))
            await sink.send(plan_batch(appeared(finding())))
            await sink.aclose()
    assert proxy.heads == [] and len(receiver.arrivals) == 2


@pytest.mark.parametrize(
    ("no_proxy", "proxied"),
    [
        (None, True),
        ("{net}", False),  # a CIDR (apimachinery's rule; httpx has none)
        ("{ip}", False),
        ("{ip}:{port}", False),
        ("{ip}:1", True),  # another port
        ("*", False),
        ("corp.example, {ip} ", False),
        ("10.0.0.0/8", True),
    ],
)
async def test_no_proxy_sends_a_receiver_it_names_around_the_proxy(no_proxy_env, no_proxy, proxied):
    """A receiver at a non-loopback address of this host: through HTTP_PROXY unless NO_PROXY
    names it (its address, with or without its port, a CIDR holding it, or ``*``)."""
    ip = _own_address()
    if ip is None:
        pytest.skip("this host has no non-loopback IPv4 address")
    receiver, proxy = Receiver(), Proxy(resolve={})
    async with serving(receiver, host=ip) as port, serving(proxy) as proxy_port:
        no_proxy_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
        if no_proxy is not None:
            net = ip.rsplit(".", 1)[0] + ".0/24"
            no_proxy_env.setenv("NO_PROXY", no_proxy.format(ip=ip, port=port, net=net))
        url = f"http://{ip}:{port}/hook/{HOOK_TOKEN}"
        sink = WebhookSink("hooks", url, retry=RetryPolicy(attempts=1))
        await sink.send(plan_batch(appeared(finding())))
        await sink.aclose()
    assert len(receiver.arrivals) == 1
    assert [head[0] for head in proxy.heads] == ([f"POST {url} HTTP/1.1"] if proxied else [])


# --- secrets ----------------------------------------------------------------------------------


async def test_a_failure_through_the_proxy_names_it_and_leaks_no_secret(
    tmp_path, no_proxy_env, caplog
):
    """A proxy that refuses (407 to a CONNECT; 502 to a forwarded POST, its body quoting the
    secret URL): the error names the sink, the receiver as ``scheme://host/…`` and the proxy
    as ``scheme://host:port``; no token, Authorization, signing secret or proxy password in
    the errors, their tracebacks, the sinks' reprs or the log lines."""
    caplog.set_level(logging.DEBUG)
    tunnel, forward = (
        Proxy(refuse="407 Proxy Authentication Required"),
        Proxy(refuse="502 Bad Gateway"),
    )
    async with serving(tunnel) as tunnel_port, serving(forward) as forward_port:
        no_proxy_env.setenv("HTTPS_PROXY", f"http://fw:{PROXY_PASSWORD}@127.0.0.1:{tunnel_port}")
        no_proxy_env.setenv("HTTP_PROXY", f"http://fw:{PROXY_PASSWORD}@127.0.0.1:{forward_port}")
        retry = RetryPolicy(attempts=2)
        sinks = [
            SlackSink(
                "slack", f"https://{NAME}/services/{HOOK_TOKEN}", retry=retry, sleep=Sleeps()
            ),
            WebhookSink(
                "hooks",
                f"http://{NAME}/h/{HOOK_TOKEN}",
                secret=HMAC_SECRET,
                headers={"Authorization": f"Bearer {BEARER}"},
                retry=retry,
                sleep=Sleeps(),
            ),
            AlertmanagerSink(
                "am", f"https://{NAME}", bearer_token=BEARER, retry=retry, sleep=Sleeps()
            ),
        ]
        errors: list[BaseException] = []
        for sink in sinks:
            with pytest.raises(NotifyError) as info:
                await sink.send(plan_batch(appeared(finding())))
            errors.append(info.value)
            await sink.aclose()
    rendered = _rendered(errors, *sinks, *(s._poster for s in sinks), log=caplog.text)
    for secret in SECRETS:
        assert secret not in rendered, secret
    slack, hook, am = (str(e) for e in errors)
    assert (
        f"POST https://{NAME}/… through the proxy http://127.0.0.1:{tunnel_port}: ProxyError"
        in slack
    )
    assert (
        f"POST http://{NAME}/… through the proxy http://127.0.0.1:{forward_port}: HTTP 502" in hook
    )
    assert "<redacted>" in hook  # the proxy's body quoted the URL
    assert f"through the proxy http://127.0.0.1:{tunnel_port}: ProxyError" in am
    for e in errors:
        assert e.__cause__ is None and e.__context__ is None
    assert len(tunnel.heads) == 4 and len(forward.heads) == 2  # each attempt asked the proxy


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        (
            f"http://fw:{PROXY_PASSWORD}@proxy.corp:31x8",
            "HTTPS_PROXY='http://***@proxy.corp:31x8': the port is not a number",
        ),
        ("ftp://proxy.corp:21", "HTTPS_PROXY='ftp://proxy.corp:21': a proxy's scheme must be"),
        ("http://:3128", "HTTPS_PROXY='http://:3128': the proxy URL names no host"),
    ],
)
def test_a_proxy_variable_naming_no_usable_proxy_stops_the_sink_being_made(
    no_proxy_env, value, complaint
):
    """The sink is not made (Go would send its requests nowhere useful, or directly): the error
    names the sink, its receiver without the token, and the variable without its password."""
    no_proxy_env.setenv("HTTPS_PROXY", value)
    with pytest.raises(ProxyError) as info:
        WebhookSink(
            "hooks", f"https://{NAME}/h/{HOOK_TOKEN}", headers={"Authorization": f"Bearer {BEARER}"}
        )
    assert str(info.value).startswith(f"sink 'hooks' (https://{NAME}/…): {complaint}")
    for secret in SECRETS:
        assert secret not in str(info.value), secret


@pytest.mark.skipif(importlib.util.find_spec("socksio") is not None, reason="socksio installed")
def test_a_socks5_proxy_without_socksio_stops_the_sink_being_made(no_proxy_env):
    no_proxy_env.setenv("HTTPS_PROXY", f"socks5://fw:{PROXY_PASSWORD}@proxy.corp:1080")
    with pytest.raises(ProxyError, match=r"socks5 one, which needs the socksio package") as info:
        SlackSink("slack", f"https://{NAME}/services/{HOOK_TOKEN}")
    assert PROXY_PASSWORD not in str(info.value) and HOOK_TOKEN not in str(info.value)


def test_a_given_transport_is_never_bypassed_for_the_environments_proxy(no_proxy_env):
    """Tests (and fault injection) hand the sink a transport: no proxy is put in front of it,
    and a bad proxy variable is not even read."""
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy.corp:31x8")
    sink = SlackSink(
        "slack", f"https://{NAME}/x", transport=httpx.MockTransport(lambda r: httpx.Response(200))
    )
    assert sink._poster.proxy is None


# --- the SNS subscription confirmation --------------------------------------------------------


async def test_the_sns_confirmation_goes_through_the_proxy_go_would_pick(no_proxy_env, caplog):
    """``serve`` GETs an SNS SubscribeURL through the proxy the sinks take: HTTPS_PROXY over
    https_proxy (Go's order; httpx's own environment reading, Python's, prefers the lower-case
    one); the proxy here refuses the CONNECT, and the failure is logged with the host only, not
    the subscription token or the proxy password."""
    caplog.set_level(logging.DEBUG)
    proxy, lower = Proxy(refuse="403 Forbidden"), Proxy(refuse="403 Forbidden")
    token = "2336412f37fb687f5d51e6e2425f004aed6e6a5c"
    url = f"https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&Token={token}"
    async with serving(proxy) as proxy_port, serving(lower) as lower_port:
        no_proxy_env.setenv("HTTPS_PROXY", f"http://fw:{PROXY_PASSWORD}@127.0.0.1:{proxy_port}")
        no_proxy_env.setenv("https_proxy", f"http://127.0.0.1:{lower_port}")
        no_proxy_env.setenv("NO_PROXY", "169.254.169.254,.internal")
        await confirm_sns(url, timeout=5.0)
    assert [head[0] for head in proxy.heads] == ["CONNECT sns.eu-west-1.amazonaws.com:443 HTTP/1.1"]
    assert lower.heads == []
    assert "sns subscription confirmation failed" in caplog.text
    assert token not in caplog.text and PROXY_PASSWORD not in caplog.text


# --- the demo's deliveries to its own gateway -------------------------------------------------


async def test_the_demos_deliveries_to_its_own_loopback_gateway_never_take_a_proxy(no_proxy_env):
    """``fleetwarden demo`` posts its simulated cloud's events to its own gateway on 127.0.0.1:
    with HTTP_PROXY set and no NO_PROXY (a laptop behind a corporate proxy), they go straight
    there, as Go would send them; httpx's own reading would hand them to the proxy."""
    receiver, proxy = Receiver(), Proxy(resolve={})
    async with serving(receiver) as port, serving(proxy) as proxy_port:
        for variable in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
            no_proxy_env.setenv(variable, f"http://127.0.0.1:{proxy_port}")
        source, body = simulated_cloud.delivery("prod-eu-1", "general", "alice", T0)
        async with simulated_cloud.client(f"http://127.0.0.1:{port}") as client:
            assert await simulated_cloud.post(client, source, body, "demo-token") == 200
    assert proxy.heads == []
    assert [a.head[0] for a in receiver.arrivals] == ["POST /events/aws HTTP/1.1"]


# --- fleetwarden approve --------------------------------------------------------------------


async def test_approve_asks_a_loopback_service_directly_with_its_admin_token(no_proxy_env):
    """``fleetwarden approve --server http://127.0.0.1:8080`` (serve's default address): the
    admin token goes to the service, never to an HTTP_PROXY that NO_PROXY does not exclude."""
    receiver, proxy = Receiver(body=b'{"id": "d1", "status": "approved"}'), Proxy(resolve={})
    async with serving(receiver) as port, serving(proxy) as proxy_port:
        for variable in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
            no_proxy_env.setenv(variable, f"http://127.0.0.1:{proxy_port}")
        server = f"http://127.0.0.1:{port}"
        answer = await asyncio.to_thread(post_approval, server, "d1", BEARER)
    assert answer == (200, {"id": "d1", "status": "approved"})
    assert proxy.heads == []
    (arrival,) = receiver.arrivals
    assert arrival.header("authorization") == f"Bearer {BEARER}"


def test_approve_refuses_a_bad_proxy_variable_naming_it(no_proxy_env):
    no_proxy_env.setenv("HTTP_PROXY", f"http://fw:{PROXY_PASSWORD}@proxy.corp:31x8")
    with pytest.raises(ApprovalError) as info:
        post_approval(f"http://{NAME}:8080", "d1", BEARER)
    assert str(info.value) == (
        f"http://{NAME}:8080: HTTP_PROXY='http://***@proxy.corp:31x8': the port is not a number"
    )


# --- the worker link --------------------------------------------------------------------------


async def test_the_worker_link_is_a_unix_socket_no_proxy_variable_reaches(tmp_path, no_proxy_env):
    """The gateway talks to its worker over the worker's private Unix socket (URL host
    ``worker``, which no NO_PROXY names): every proxy variable set, the link still answers
    and the proxy is never asked."""
    proxy = Proxy()
    path = str(tmp_path / "worker.sock")

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        body = b'{"ok": true}'
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(worker, path)
    try:
        async with serving(proxy) as proxy_port:
            for variable in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
                no_proxy_env.setenv(variable, f"http://127.0.0.1:{proxy_port}")
            link = WorkerLink(path)
            try:
                assert await link.health() == ({"ok": True}, "")
                answer = await link.forward("GET", "/api/findings", [], b"")
            finally:
                await link.aclose()
    finally:
        server.close()
        await server.wait_closed()
    assert answer.status == 200 and proxy.heads == []
