"""kubeconfig settings the client must honour, over real sockets where it matters.

Pins that ``tls-server-name`` is the name the server's certificate is checked against (and the
SNI sent), directly and through a proxy tunnel; that ``proxy-url`` carries every request; that
impersonation, ``disable-compression`` and basic auth with a username alone go out as client-go
sends them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import json
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fleetwarden.adapters.kube.client import KubeClient, impersonation_headers
from fleetwarden.core.clusters import ClusterEndpoint, Credentials, Impersonation
from fleetwarden.ports.kube import Transient

VERSION = {"major": "1", "minor": "30", "gitVersion": "v1.30.2"}


# --- a CA and a serving certificate for a name that is not the URL's host ------------------


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_certs(tmp: Path, dns_name: str) -> tuple[bytes, Path, Path]:
    """(CA PEM, serving cert file, key file): the certificate names only ``dns_name``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("fw-test-ca"))
        .issuer_name(_name("fw-test-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "serving.crt", tmp / "serving.key"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca.public_bytes(serialization.Encoding.PEM), cert_file, key_file


async def _read_head(reader: asyncio.StreamReader) -> list[str]:
    head = await reader.readuntil(b"\r\n\r\n")
    return head.decode("latin-1").split("\r\n")[:-2]


async def _answer(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
        + data
    )
    await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def serving(
    handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any],
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[int]:
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ssl_context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@contextlib.asynccontextmanager
async def api_server(tmp: Path, dns_name: str) -> AsyncIterator[tuple[int, bytes, list[str]]]:
    """A TLS server whose certificate names only ``dns_name``; yields (port, CA, SNI seen)."""
    ca, cert, key = make_certs(tmp, dns_name)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    sni: list[str] = []
    ctx.sni_callback = lambda _obj, name, _ctx: sni.append(name) and None  # type: ignore[func-returns-value]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            await _read_head(reader)
            await _answer(writer, VERSION)

    async with serving(handle, ctx) as port:
        yield port, ca, sni


async def test_tls_server_name_is_the_name_checked_and_sent_as_sni(tmp_path):
    """The certificate names kubernetes.default, the URL 127.0.0.1: with tls-server-name the
    connection is verified against that name (not turned off: a wrong name still fails)."""
    async with api_server(tmp_path, "kubernetes.default") as (port, ca, sni):
        server = f"https://127.0.0.1:{port}"
        named = ClusterEndpoint("t", server, ca_pem=ca, tls_server_name="kubernetes.default")
        async with KubeClient(named) as kube:
            assert await kube.version() == "v1.30.2"
        assert sni == ["kubernetes.default"]
        for other in (None, "kubernetes.other"):
            wrong = ClusterEndpoint("t", server, ca_pem=ca, tls_server_name=other)
            async with KubeClient(wrong) as kube:
                with pytest.raises(Transient):
                    await kube.version()


async def test_proxy_url_carries_every_request_and_tls_server_name_holds_in_the_tunnel(tmp_path):
    """An http proxy-url: a CONNECT tunnel to the API server (whose name the proxy resolves,
    not the client), with the certificate checked against tls-server-name inside it."""
    connects: list[str] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await _read_head(reader)
        connects.append(head[0])
        target = head[0].split()[1]
        assert target.startswith("apiserver.internal:")
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target.split(":")[1])
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        # a tunnel still open when the test ends is cancelled with the server: not an error
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async with (
        api_server(tmp_path, "kubernetes.default") as (port, ca, sni),
        serving(proxy) as proxy_port,
    ):
        endpoint = ClusterEndpoint(
            "t",
            f"https://apiserver.internal:{port}",  # resolvable only by the proxy
            ca_pem=ca,
            tls_server_name="kubernetes.default",
            proxy_url=f"http://127.0.0.1:{proxy_port}",
        )
        async with KubeClient(endpoint) as kube:
            assert await kube.version() == "v1.30.2"
    assert connects == [f"CONNECT apiserver.internal:{port} HTTP/1.1"]
    assert sni == ["kubernetes.default"]


async def test_an_http_server_is_asked_through_the_proxy_with_its_credentials():
    seen: list[list[str]] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await _read_head(reader))
        await _answer(writer, VERSION)

    async with serving(proxy) as port:
        endpoint = ClusterEndpoint(
            "t", "http://apiserver.internal:8080", proxy_url=f"http://u:p4ss@127.0.0.1:{port}"
        )
        async with KubeClient(endpoint) as kube:
            assert await kube.version() == "v1.30.2"
    (head,) = seen
    assert head[0] == "GET http://apiserver.internal:8080/version HTTP/1.1"
    assert f"Proxy-Authorization: Basic {base64.b64encode(b'u:p4ss').decode()}" in head


# --- headers: impersonation, compression, basic auth --------------------------------------


def _recording(seen: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=VERSION)

    return httpx.MockTransport(handle)


async def test_impersonation_goes_out_as_client_go_sends_it():
    who = Impersonation(
        "alice@example.com",
        "7d1f",
        ("sre", "system:authenticated"),
        (("scopes.example.com/team", ("payments", "ledger")), ("a%b c", ("x",))),
    )
    seen: list[httpx.Request] = []
    endpoint = ClusterEndpoint(
        "t", "https://h", credentials=Credentials(token="t", impersonate=who)
    )
    async with KubeClient(endpoint, transport=_recording(seen)) as kube:
        await kube.version()
        await kube.get("/api/v1/nodes")
    for request in seen:
        h = request.headers
        assert h["Impersonate-User"] == "alice@example.com" and h["Impersonate-Uid"] == "7d1f"
        assert h.get_list("Impersonate-Group") == ["sre", "system:authenticated"]
        # the key %-escaped as client-go's headerKeyEscape does ('/' and ' ' and '%')
        assert h.get_list("Impersonate-Extra-scopes.example.com%2Fteam") == ["payments", "ledger"]
        assert h.get_list("Impersonate-Extra-a%25b%20c") == ["x"]
        assert h["Authorization"] == "Bearer t"


def test_impersonation_headers_without_uid_groups_or_extra_are_the_user_alone():
    assert impersonation_headers(Impersonation("bob")) == [("Impersonate-User", "bob")]


async def test_disable_compression_asks_for_an_uncompressed_body():
    seen: list[httpx.Request] = []
    for flag in (True, False):
        endpoint = ClusterEndpoint("t", "https://h", disable_compression=flag)
        async with KubeClient(endpoint, transport=_recording(seen)) as kube:
            await kube.version()
    assert seen[0].headers["Accept-Encoding"] == "identity"
    assert "gzip" in seen[1].headers["Accept-Encoding"]


async def test_a_username_without_password_is_still_basic_auth():
    seen: list[httpx.Request] = []
    endpoint = ClusterEndpoint("t", "https://h", credentials=Credentials(username="admin"))
    async with KubeClient(endpoint, transport=_recording(seen)) as kube:
        await kube.version()
    assert seen[0].headers["Authorization"] == f"Basic {base64.b64encode(b'admin:').decode()}"
