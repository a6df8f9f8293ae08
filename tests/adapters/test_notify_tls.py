"""The notification sinks and the SNS confirmation trust what a Go program on this host trusts
(``adapters.trust``: the system's CA file and directories, or ``SSL_CERT_FILE`` /
``SSL_CERT_DIR`` instead) and a sink's ``caFile``, over real sockets: https receivers on
127.0.0.1 whose certificates a throw-away CA signed (the host's store does not hold it).

Pins that ``SSL_CERT_FILE`` naming that CA, or the sink's ``caFile``, makes delivery succeed;
that without either it fails with OpenSSL's reason, naming the sink and what was trusted and no
token; that the certificate's name is checked; that an https proxy is checked against the same
CAs; that a CA file or variable giving no certificate stops a sink to an https receiver being
made (serve: a config error naming ``notify.<name>.caFile`` or ``notify.<name>``), and a CA
variable not one to an http receiver; and that serve's config takes ``caFile``.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters import trust
from fleetwarden.adapters.notify import RetryPolicy
from fleetwarden.adapters.notify.alertmanager import AlertmanagerSink
from fleetwarden.adapters.notify.slack import SlackSink
from fleetwarden.adapters.notify.webhook import WebhookSink
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.notify import NotifyError
from fleetwarden.wiring.service import build_event_feeds, build_sinks, confirm_sns
from fleetwarden.wiring.service_config import service_config_from
from tests.adapters.test_environment_proxies import Proxy, Receiver, serving
from tests.adapters.test_kube_kubeconfig import make_certs
from tests.adapters.test_notify_sinks import Sleeps, appeared, finding, plan_batch

HOOK_TOKEN = "T0SECRET/B0SECRET/xoxSecretWebhookToken"
BEARER = "am-bearer-token-secret"
SECRETS = (HOOK_TOKEN, "xoxSecretWebhookToken", BEARER)


@pytest.fixture
def tls_env(no_proxy_env: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No proxy and no CA variable: the system's locations only (which never hold the test
    CA)."""
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        no_proxy_env.delenv(name, raising=False)
    return no_proxy_env


@contextlib.asynccontextmanager
async def https_receiver(
    tmp: Path, name: str = "localhost"
) -> AsyncIterator[tuple[int, Receiver, Path]]:
    """An https receiver on 127.0.0.1 whose certificate names ``name``, signed by a fresh CA;
    yields (port, receiver, the CA's PEM file)."""
    tmp.mkdir(parents=True, exist_ok=True)
    ca, cert, key = make_certs(tmp, name)
    ca_file = tmp / "ca.pem"
    ca_file.write_bytes(ca)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    receiver = Receiver()
    async with serving(receiver, tls=server) as port:
        yield port, receiver, ca_file


def _slack(url: str, **kw: Any) -> Any:
    return SlackSink("slack", url, retry=RetryPolicy(attempts=1), **kw)


def _webhook(url: str, **kw: Any) -> Any:
    headers = {"Authorization": f"Bearer {BEARER}"}
    return WebhookSink("hooks", url, headers=headers, retry=RetryPolicy(attempts=1), **kw)


def _alertmanager(url: str, **kw: Any) -> Any:
    return AlertmanagerSink(
        "am", url.split("/hook/")[0], bearer_token=BEARER, retry=RetryPolicy(attempts=1), **kw
    )


SINKS = pytest.mark.parametrize(
    "make", [_slack, _webhook, _alertmanager], ids=lambda f: f.__name__[1:]
)


# --- delivery to a receiver signed by a company CA --------------------------------------------


@SINKS
async def test_ssl_cert_file_naming_the_receivers_ca_makes_delivery_succeed(
    tmp_path, tls_env, make
):
    """SSL_CERT_FILE replaces the system's CA file, as for a Go program (or curl) on the
    host: the receiver signed by the CA it names is trusted."""
    async with https_receiver(tmp_path) as (port, receiver, ca_file):
        tls_env.setenv("SSL_CERT_FILE", str(ca_file))
        sink = make(f"https://localhost:{port}/hook/{HOOK_TOKEN}")
        await sink.send(plan_batch(appeared(finding())))
        await sink.aclose()
    assert len(receiver.arrivals) == 1


@SINKS
async def test_a_sinks_ca_file_makes_delivery_succeed(tmp_path, tls_env, make):
    async with https_receiver(tmp_path) as (port, receiver, ca_file):
        sink = make(f"https://localhost:{port}/hook/{HOOK_TOKEN}", ca_file=str(ca_file))
        await sink.send(plan_batch(appeared(finding())))
        await sink.aclose()
    assert len(receiver.arrivals) == 1


@SINKS
async def test_without_the_receivers_ca_delivery_fails_saying_why_naming_the_sink(
    tmp_path, tls_env, make, caplog
):
    """Neither SSL_CERT_FILE nor caFile: the certificate is refused; the error names the sink,
    the receiver without its token, OpenSSL's reason, what was trusted and what to do."""
    caplog.set_level(logging.DEBUG)
    async with https_receiver(tmp_path) as (port, receiver, _):
        sink = make(f"https://localhost:{port}/hook/{HOOK_TOKEN}", sleep=Sleeps())
        with pytest.raises(NotifyError) as info:
            await sink.send(plan_batch(appeared(finding())))
        await sink.aclose()
    message = str(info.value)
    assert message.startswith(f"notify {sink.name}: POST https://localhost:{port}")
    assert "ConnectError: the receiver's TLS certificate is not trusted (" in message
    assert "unable to get local issuer certificate" in message
    assert f"trusted: {trust.system_roots().describe()}" in message
    assert "caFile, SSL_CERT_FILE" in message
    for secret in SECRETS:
        assert secret not in message + repr(sink) + caplog.text, secret
    assert receiver.arrivals == []


async def test_the_certificates_name_is_checked_against_the_receivers_host(tmp_path, tls_env):
    """A certificate the trusted CA signed for another name is refused, as Go refuses it."""
    async with https_receiver(tmp_path, name="other.example") as (port, receiver, ca_file):
        sink = _webhook(f"https://localhost:{port}/hook/{HOOK_TOKEN}", ca_file=str(ca_file))
        with pytest.raises(NotifyError, match=r"not trusted \(Hostname mismatch"):
            await sink.send(plan_batch(appeared(finding())))
        await sink.aclose()
    assert receiver.arrivals == []


@pytest.mark.parametrize("trusted", [True, False])
async def test_an_https_proxy_is_checked_against_the_same_cas(tmp_path, tls_env, trusted):
    """HTTPS_PROXY=https://...: the proxy's certificate is checked against the sinks' CAs (Go's
    transport checks it against its roots; httpx alone would use certifi's), here the CA named
    by SSL_CERT_FILE; an http receiver's POST is forwarded through it."""
    ca, cert, key = make_certs(tmp_path, "localhost")
    (tmp_path / "ca.pem").write_bytes(ca)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    receiver, proxy = Receiver(), Proxy()
    async with serving(receiver) as port, serving(proxy, tls=server) as proxy_port:
        tls_env.setenv("HTTPS_PROXY", f"https://localhost:{proxy_port}")
        tls_env.setenv("HTTP_PROXY", f"https://localhost:{proxy_port}")
        if trusted:
            tls_env.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        sink = _webhook(f"http://hooks.internal:{port}/hook/{HOOK_TOKEN}", sleep=Sleeps())
        if trusted:
            await sink.send(plan_batch(appeared(finding())))
        else:
            with pytest.raises(NotifyError, match="unable to get local issuer certificate"):
                await sink.send(plan_batch(appeared(finding())))
        await sink.aclose()
    assert len(receiver.arrivals) == (1 if trusted else 0)


# --- the SNS subscription confirmation --------------------------------------------------------


@pytest.mark.parametrize("trusted", [True, False])
async def test_the_sns_confirmation_trusts_what_the_sinks_trust(tmp_path, tls_env, caplog, trusted):
    """The outcome is logged with the host only, and httpx's own request line (shown under
    --log-level debug) quotes the URL without its query, where the token is."""
    caplog.set_level(logging.INFO, logger="fleetwarden.serve")
    caplog.set_level(logging.DEBUG, logger="httpx")
    token = "2336412f37fb687f5d51e6e2425f004aed6e6a5c"
    async with https_receiver(tmp_path) as (port, receiver, ca_file):
        if trusted:
            tls_env.setenv("SSL_CERT_FILE", str(ca_file))
        await confirm_sns(f"https://localhost:{port}/?Action=ConfirmSubscription&Token={token}")
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "fleetwarden.serve")
    if trusted:
        assert len(receiver.arrivals) == 1
        assert "sns subscription confirmation" in logged and "failed" not in logged
    else:
        assert receiver.arrivals == []
        assert "sns subscription confirmation failed" in logged
        assert "TLS certificate is not trusted (unable to get local issuer" in logged
    assert token not in logged
    requests = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert not trusted or any(f"https://localhost:{port}/?…" in m for m in requests)
    assert token not in caplog.text


# --- serve's notify config: caFile ------------------------------------------------------------


def test_serves_config_takes_a_ca_file_per_sink():
    raw = {
        "notify": [
            {"name": "corp", "kind": "webhook", "url": "https://h.corp.example/x", "caFile": "/ca"},
            {"name": "oncall", "kind": "slack", "url": "https://hooks.slack.com/services/x"},
        ]
    }
    config = service_config_from(raw, source="svc.yaml")
    assert [sink.get("caFile") for sink in config.notify] == ["/ca", None]
    raw["notify"][0]["caFile"] = ""
    with pytest.raises(FormatError, match=r"svc.yaml: notify.0.caFile: '' should be non-empty"):
        service_config_from(raw, source="svc.yaml")


async def test_serves_sinks_take_their_ca_file_from_the_config(tmp_path, tls_env):
    async with https_receiver(tmp_path) as (port, receiver, ca_file):
        spec = {
            "name": "corp",
            "kind": "webhook",
            "url": f"https://localhost:{port}/hook/{HOOK_TOKEN}",
            "caFile": str(ca_file),
            "events": True,
        }
        ((_, sink),) = build_sinks([spec])
        (feed,) = build_event_feeds([spec])
        await sink.send(plan_batch(appeared(finding())))
        await feed.send_events([("k1", {"type": "x"})])
        await sink.aclose()
        await feed.aclose()
    assert len(receiver.arrivals) == 2


def test_a_ca_file_giving_no_certificate_is_a_config_error_naming_the_sink_and_field(
    tmp_path, tls_env
):
    """Never a silent fallback to the system's CAs alone: the sink is not made, and serve's
    error names notify.<name>.caFile and the file (every way a file fails: test_tls_trust)."""
    path = tmp_path / "corp-ca.pem"
    path.write_text("not a PEM file\n")
    url = f"https://hooks.corp.example/hook/{HOOK_TOKEN}"
    spec = {"name": "corp", "kind": "slack", "url": url, "caFile": str(path)}
    with pytest.raises(FormatError) as info:
        build_sinks([spec])
    assert info.value.field == "notify.corp.caFile"
    assert str(info.value).startswith(
        "serve config: notify.corp.caFile: sink 'corp' (https://hooks.corp.example/…): "
        f"{str(path)!r} holds no PEM certificate"
    )
    assert HOOK_TOKEN not in str(info.value) and "xoxSecret" not in str(info.value)


def test_a_bad_ssl_cert_file_is_a_config_error_naming_the_sink_and_the_variable(tmp_path, tls_env):
    tls_env.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    spec = {
        "name": "oncall",
        "kind": "slack",
        "url": f"https://hooks.slack.com/services/{HOOK_TOKEN}",
    }
    with pytest.raises(FormatError) as info:
        build_sinks([spec])
    assert info.value.field == "notify.oncall"
    assert str(info.value).endswith(
        f"SSL_CERT_FILE={str(tmp_path / 'missing.pem')!r} cannot be read: No such file or directory"
    )
    assert HOOK_TOKEN not in str(info.value)


def test_a_bad_ssl_cert_file_stops_a_sink_to_an_https_receiver_being_made(tmp_path, tls_env):
    tls_env.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    with pytest.raises(trust.TrustError) as info:
        SlackSink("slack", f"https://hooks.slack.com/services/{HOOK_TOKEN}")
    assert str(info.value) == (
        "sink 'slack' (https://hooks.slack.com/…): "
        f"SSL_CERT_FILE={str(tmp_path / 'missing.pem')!r} cannot be read: No such file or directory"
    )


def test_an_http_receiver_reads_no_ca(tmp_path, tls_env):
    """No TLS, no CA: a bad SSL_CERT_FILE does not stop a sink to an http receiver (Go reads
    its roots only for a TLS connection)."""
    tls_env.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    WebhookSink("hooks", "http://127.0.0.1:9/hook")


# --- the Argo CD client -----------------------------------------------------------------------


@pytest.mark.parametrize("trusted", [True, False])
async def test_the_argocd_client_trusts_what_the_argocd_cli_trusts(tmp_path, tls_env, trusted):
    """An Argo CD server signed by a company CA the host (here SSL_CERT_FILE) trusts is
    reached, as the argocd CLI (Go) reaches it; certifi's bundle alone would refuse it."""
    from fleetwarden.adapters.argocd.client import ArgoCDClient, ArgoError

    async with https_receiver(tmp_path) as (port, receiver, ca_file):
        if trusted:
            tls_env.setenv("SSL_CERT_FILE", str(ca_file))
        client = ArgoCDClient(f"https://localhost:{port}", token=BEARER, retries=0)
        try:
            with contextlib.suppress(ArgoError):  # the receiver's "ok" is no Application
                await client.get_application("guestbook")
        finally:
            await client.aclose()
    assert len(receiver.arrivals) == (1 if trusted else 0)
