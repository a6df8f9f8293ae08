"""kubeconfig settings the client must honour, over real sockets where it matters.

Pins that ``tls-server-name`` is the name the server's certificate is checked against (and the
SNI sent), directly and through a proxy tunnel; that ``proxy-url`` carries every request, and
without it the environment's proxy as client-go picks it (``HTTPS_PROXY``, ``NO_PROXY``); that
impersonation, ``disable-compression`` and basic auth with a username alone go out as client-go
sends them; that a ``tokenFile`` is re-read as it rotates; and that ``$KUBECONFIG`` lists are
merged with relative paths resolved against the file that names them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import json
import os
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fleetwarden.adapters.kube.client import KubeClient, impersonation_headers, ssl_context
from fleetwarden.adapters.kube.config import kubeconfig_paths, load_kubeconfig
from fleetwarden.core.clusters import ClusterEndpoint, Credentials, ExecConfig, Impersonation
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.kube import ApiError, Transient, Unauthorized
from tests.support.exec_plugins import V1BETA1, Reply, runs, write_plugin

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


def connect_proxy(
    connects: list[str], *, only: str = "apiserver.internal"
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]:
    """An HTTP CONNECT proxy that resolves ``only`` (to 127.0.0.1) and records each request
    line in ``connects``."""

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await _read_head(reader)
        connects.append(head[0])
        target = head[0].split()[1]
        assert target.startswith(f"{only}:")
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

    return proxy


async def test_proxy_url_carries_every_request_and_tls_server_name_holds_in_the_tunnel(tmp_path):
    """An http proxy-url: a CONNECT tunnel to the API server (whose name the proxy resolves,
    not the client), with the certificate checked against tls-server-name inside it."""
    connects: list[str] = []
    async with (
        api_server(tmp_path, "kubernetes.default") as (port, ca, sni),
        serving(connect_proxy(connects)) as proxy_port,
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


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy"])
async def test_without_proxy_url_the_environments_https_proxy_carries_the_requests(
    tmp_path, no_proxy_env, variable
):
    """kubectl (client-go: http.ProxyFromEnvironment) goes through HTTPS_PROXY, or
    https_proxy, when the kubeconfig names no proxy-url: so does fleetwarden -- a CONNECT
    tunnel through a real local proxy to a server only the proxy can resolve."""
    connects: list[str] = []
    async with (
        api_server(tmp_path, "apiserver.internal") as (port, ca, sni),
        serving(connect_proxy(connects)) as proxy_port,
    ):
        no_proxy_env.setenv(variable, f"127.0.0.1:{proxy_port}")  # no scheme: http, as in Go
        no_proxy_env.setenv("NO_PROXY", "10.0.0.0/8,.corp.example")  # not this server
        endpoint = ClusterEndpoint("t", f"https://apiserver.internal:{port}", ca_pem=ca)
        async with KubeClient(endpoint) as kube:
            assert await kube.version() == "v1.30.2"
    assert connects == [f"CONNECT apiserver.internal:{port} HTTP/1.1"]
    assert sni == ["apiserver.internal"]


async def test_a_kubeconfig_proxy_url_wins_over_the_environments_proxy(tmp_path, no_proxy_env):
    """client-go uses rest.Config.Proxy (proxy-url) instead of the environment: the
    environment's proxy is never asked, even for a server NO_PROXY would not exclude."""
    named: list[str] = []
    from_env: list[str] = []
    async with (
        api_server(tmp_path, "apiserver.internal") as (port, ca, _sni),
        serving(connect_proxy(named)) as named_port,
        serving(connect_proxy(from_env)) as env_port,
    ):
        no_proxy_env.setenv("HTTPS_PROXY", f"http://127.0.0.1:{env_port}")
        endpoint = ClusterEndpoint(
            "t",
            f"https://apiserver.internal:{port}",
            ca_pem=ca,
            proxy_url=f"http://127.0.0.1:{named_port}",
        )
        async with KubeClient(endpoint) as kube:
            assert await kube.version() == "v1.30.2"
    assert len(named) == 1 and from_env == []


async def test_an_exec_plugin_keeps_the_process_environment_and_sees_no_environment_proxy_url(
    tmp_path, no_proxy_env
):
    """The environment's proxy changes only where the client connects: the plugin still runs
    with the process environment (its HTTPS_PROXY included), and KUBERNETES_EXEC_INFO names
    only a kubeconfig proxy-url (client-go's ConfigToExecCluster), here none."""
    connects: list[str] = []
    plugin = write_plugin(tmp_path, "plug", [Reply(token="t0k")], record_env=("HTTPS_PROXY",))
    async with (
        api_server(tmp_path, "apiserver.internal") as (port, ca, _sni),
        serving(connect_proxy(connects)) as proxy_port,
    ):
        no_proxy_env.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy_port}")
        endpoint = ClusterEndpoint(
            "t",
            f"https://apiserver.internal:{port}",
            ca_pem=ca,
            credentials=Credentials(
                exec=ExecConfig(str(plugin), V1BETA1, provide_cluster_info=True)
            ),
        )
        async with KubeClient(endpoint) as kube:
            assert await kube.version() == "v1.30.2"
    (run,) = runs(plugin)
    assert run["env"]["HTTPS_PROXY"] == f"http://127.0.0.1:{proxy_port}"
    assert "proxy-url" not in run["info"]["spec"]["cluster"]
    assert len(connects) == 1


async def test_a_proxy_variable_that_names_no_proxy_is_an_error_naming_it(no_proxy_env):
    no_proxy_env.setenv("HTTPS_PROXY", "ftp://proxy.corp:21")
    with pytest.raises(ApiError, match=r"HTTPS_PROXY='ftp://proxy.corp:21'.*socks5 or socks5h"):
        KubeClient(ClusterEndpoint("t", "https://apiserver.internal:6443"))


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


# --- loading files: tokenFile rotation, $KUBECONFIG --------------------------------------------


def _kubeconfig(path: Path, user: dict[str, Any], *, name: str = "prod") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": name, "cluster": {"server": "https://prod:6443"}}],
                "users": [{"name": name, "user": user}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            }
        )
    )
    return path


async def test_a_token_file_is_reread_as_it_rotates(tmp_path, monkeypatch):
    """tokenFile (relative to the kubeconfig) is a rotating token, as client-go's cached file
    token source reads it: after the file changes, a 401 makes the client read it again."""
    kc = _kubeconfig(tmp_path / "conf" / "kubeconfig", {"tokenFile": "secrets/token"})
    (tmp_path / "conf" / "secrets").mkdir()
    token = tmp_path / "conf" / "secrets" / "token"
    token.write_text("old-token\n")
    monkeypatch.chdir(tmp_path)  # relative to the kubeconfig, not to the working directory
    (ep,) = load_kubeconfig(kc)
    assert ep.credentials.token == "old-token"
    assert ep.credentials.token_file == str(token)
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Authorization"])
        ok = request.headers["Authorization"] == "Bearer new-token"
        return httpx.Response(200 if ok else 401, json=VERSION if ok else {"message": "no"})

    async with KubeClient(ep, transport=httpx.MockTransport(handle)) as kube:
        with pytest.raises(Unauthorized):
            await kube.version()
        token.write_text("new-token\n")
        assert await kube.version() == "v1.30.2"
    assert seen[-1] == "Bearer new-token"


def test_an_empty_token_file_is_an_error_not_an_anonymous_connection(tmp_path):
    kc = _kubeconfig(tmp_path / "kubeconfig", {"tokenFile": "token"})
    (tmp_path / "token").write_text("\n")
    with pytest.raises(FormatError) as err:
        load_kubeconfig(kc)
    assert "tokenFile" in err.value.reason and "empty" in err.value.reason


def test_kubeconfig_env_lists_files_in_order_once():
    env = {"KUBECONFIG": ":a.yaml::b.yaml:a.yaml"}
    assert kubeconfig_paths(env) == [Path("a.yaml"), Path("b.yaml")]
    assert kubeconfig_paths({}) == [Path.home() / ".kube" / "config"]


def test_a_missing_file_listed_in_kubeconfig_is_passed_over_as_kubectl_does(tmp_path: Path):
    real = tmp_path / "real.yaml"
    real.write_text("apiVersion: v1\nkind: Config\n")
    gone = tmp_path / "gone.yaml"
    env = {"KUBECONFIG": os.pathsep.join([str(gone), str(real)])}
    assert kubeconfig_paths(env) == [real]
    # none exists: each is kept, so reading them names the missing file
    env = {"KUBECONFIG": str(gone)}
    assert kubeconfig_paths(env) == [gone]
    with pytest.raises(FormatError, match=r"gone\.yaml"):
        load_kubeconfig(kubeconfig_paths(env))


def test_merged_files_resolve_paths_against_the_file_naming_them(tmp_path):
    first = _kubeconfig(tmp_path / "one" / "config", {"token": "first"}, name="a")
    second = tmp_path / "two" / "config"
    second.parent.mkdir()
    (second.parent / "ca.crt").write_bytes(b"CA-OF-TWO")
    (second.parent / "token").write_text("token-of-two")
    second.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {"name": "a", "cluster": {"server": "https://shadowed:6443"}},
                    {"name": "b", "cluster": {"server": "https://b:6443",
                                              "certificate-authority": "ca.crt"}},
                ],
                "users": [{"name": "b", "user": {"tokenFile": "token"}}],
                "contexts": [{"name": "b", "context": {"cluster": "b", "user": "b"}}],
            }
        )
    )  # fmt: skip
    a, b = load_kubeconfig([first, second])
    assert (a.name, a.server, a.credentials.token) == ("a", "https://prod:6443", "first")
    assert (b.ca_pem, b.credentials.token) == (b"CA-OF-TWO", "token-of-two")


def test_deprecations_live_reads_every_file_kubeconfig_env_lists(tmp_path, monkeypatch):
    """Without --kubeconfig, the clusters are kubectl's: every file of $KUBECONFIG, merged
    (before, only the first file was read and the other files' clusters silently left out)."""
    from fleetwarden.adapters.live_apis import read_live_clusters

    first = _kubeconfig(tmp_path / "a" / "config", {"token": "a"}, name="prod-a")
    second = _kubeconfig(tmp_path / "b" / "config", {"token": "b"}, name="prod-b")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    live = read_live_clusters(None, (), (), None)
    assert sorted(live.endpoints) == ["prod-a", "prod-b"]
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing'}")  # passed over
    assert sorted(read_live_clusters(None, (), (), None).endpoints) == ["prod-a"]
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))  # nothing to read: said
    with pytest.raises(FormatError) as err:
        read_live_clusters(None, (), (), None)
    assert "missing" in str(err.value) and "cannot read kubeconfig" in err.value.reason


def test_upgrade_reads_the_context_from_any_file_kubeconfig_env_lists(tmp_path, monkeypatch):
    from fleetwarden.adapters.upgrade_inputs import read_upgrade_inputs

    first = _kubeconfig(tmp_path / "a" / "config", {"token": "a"}, name="prod-a")
    second = _kubeconfig(tmp_path / "b" / "config", {"token": "b"}, name="prod-b")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    inputs = read_upgrade_inputs("prod-b/general", "1.31")
    assert inputs.kubeconfig == (first, second)
    (ep,) = load_kubeconfig(inputs.kubeconfig, contexts=[inputs.context])
    assert (ep.name, ep.credentials.token) == ("prod-b", "b")


def test_a_socks5_proxy_without_socksio_is_refused_at_load_not_at_the_first_request(tmp_path):
    import importlib.util

    if importlib.util.find_spec("socksio") is not None:
        pytest.skip("socksio is installed: socks5 proxies work")
    kc = tmp_path / "kubeconfig"
    kc.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": "https://h", "proxy-url": "socks5://p:1080"},
                    }
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "prod", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    with pytest.raises(FormatError) as err:
        load_kubeconfig(kc)
    assert "socks5" in err.value.reason and "socksio" in err.value.reason


@pytest.mark.parametrize("where", ["watch", "request"])
async def test_a_request_refused_by_the_http_client_never_quotes_the_token(where):
    """h11 refuses a header value with a newline and quotes it: for the Authorization header
    that is the token (from an Argo CD Secret or a plugin). The error says why, not what."""
    secret = "s3cr3t-token-value"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.CancelledError, asyncio.IncompleteReadError):
            await _read_head(reader)
            await _answer(writer, VERSION)

    async with serving(handle) as port:
        endpoint = ClusterEndpoint(
            "t", f"http://127.0.0.1:{port}", credentials=Credentials(token=f"{secret}\n")
        )
        async with KubeClient(endpoint) as kube:
            with pytest.raises(Transient) as err:
                if where == "watch":
                    _ = [e async for e in kube.watch("/api/v1/nodes", resource_version="1")]
                else:
                    await kube.version()
    assert secret not in str(err.value) and "could not be sent" in str(err.value)


def test_a_kubeconfig_ca_is_the_only_ca_trusted_as_in_client_go(tmp_path):
    """client-go's RootCAs hold the kubeconfig's CA alone: a certificate a system CA signed
    for the same name must not pass. With and without tls-server-name."""
    ca, _, _ = make_certs(tmp_path, "kubernetes.default")
    for name in (None, "kubernetes.default"):
        ctx = ssl_context(ClusterEndpoint("t", "https://h", ca_pem=ca, tls_server_name=name))
        assert len(ctx.get_ca_certs()) == 1
        assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_an_encrypted_client_key_is_an_error_not_a_passphrase_prompt(tmp_path):
    _, cert_file, _ = make_certs(tmp_path, "client")
    key = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    )
    creds = Credentials(client_cert_pem=cert_file.read_bytes(), client_key_pem=key)
    with pytest.raises(ApiError) as err:
        KubeClient(ClusterEndpoint("t", "https://h", credentials=creds))
    assert "encrypted" in str(err.value)
