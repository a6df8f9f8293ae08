"""The environment's proxy, picked as Go's http.ProxyFromEnvironment (with apimachinery's CIDR
rule) picks it for kubectl and the argocd CLI: a table over the rules, and the Argo CD API
client going through a real local proxy."""

from __future__ import annotations

import asyncio

import pytest

from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.proxies import ProxyError, environment_proxy
from fleetwarden.ports.argocd import ArgoError
from tests.adapters.test_kube_kubeconfig import _answer, _read_head, serving

P = "http://proxy.corp:3128"

CASES = [
    # (server, environment, proxy or None)
    ("https://api.example:6443", {"HTTPS_PROXY": P}, P),
    ("https://api.example:6443", {"https_proxy": P}, P),
    ("https://api.example:6443", {"HTTPS_PROXY": "", "https_proxy": P}, P),
    ("https://api.example:6443", {"HTTPS_PROXY": P, "https_proxy": "http://other:1"}, P),
    ("https://api.example:6443", {"HTTP_PROXY": P}, None),  # never the http one for https
    ("http://api.example:8080", {"HTTP_PROXY": P, "HTTPS_PROXY": "http://other:1"}, P),
    ("http://api.example:8080", {"http_proxy": P}, P),
    ("https://api.example", {"HTTPS_PROXY": "proxy.corp:3128"}, P),  # no scheme: http
    ("https://api.example", {"HTTPS_PROXY": "socks5://s:1080"}, "socks5://s:1080"),
    ("https://api.example", {"HTTPS_PROXY": "socks5h://s:1080"}, "socks5h://s:1080"),  # Go: same
    ("https://api.example", {"HTTPS_PROXY": "https://u:p@s:443"}, "https://u:p@s:443"),
    # loopback and localhost: always direct
    ("https://localhost:6443", {"HTTPS_PROXY": P}, None),
    ("https://127.0.0.1:6443", {"HTTPS_PROXY": P}, None),
    ("https://127.8.9.10:6443", {"HTTPS_PROXY": P}, None),
    ("https://[::1]:6443", {"HTTPS_PROXY": P}, None),
    # NO_PROXY
    ("https://api.example", {"HTTPS_PROXY": P, "NO_PROXY": "*"}, None),
    ("https://api.example", {"HTTPS_PROXY": P, "NO_PROXY": "a.b, *"}, None),
    ("https://api.example", {"HTTPS_PROXY": P, "no_proxy": "api.example"}, None),
    ("https://api.example", {"HTTPS_PROXY": P, "NO_PROXY": "x", "no_proxy": "api.example"}, P),
    ("https://API.Example", {"HTTPS_PROXY": P, "NO_PROXY": " api.EXAMPLE "}, None),
    ("https://k8s.corp.example", {"HTTPS_PROXY": P, "NO_PROXY": "corp.example"}, None),
    ("https://corp.example", {"HTTPS_PROXY": P, "NO_PROXY": "corp.example"}, None),
    ("https://xcorp.example", {"HTTPS_PROXY": P, "NO_PROXY": "corp.example"}, P),
    ("https://k8s.corp.example", {"HTTPS_PROXY": P, "NO_PROXY": ".corp.example"}, None),
    ("https://corp.example", {"HTTPS_PROXY": P, "NO_PROXY": ".corp.example"}, P),
    ("https://corp.example", {"HTTPS_PROXY": P, "NO_PROXY": "*.corp.example"}, P),
    ("https://k8s.corp.example", {"HTTPS_PROXY": P, "NO_PROXY": "*.corp.example"}, None),
    ("https://10.1.2.3:6443", {"HTTPS_PROXY": P, "NO_PROXY": "10.0.0.0/8"}, None),
    ("https://11.1.2.3:6443", {"HTTPS_PROXY": P, "NO_PROXY": "10.0.0.0/8"}, P),
    ("https://10.1.2.3:6443", {"HTTPS_PROXY": P, "NO_PROXY": "010.0.0.0/8"}, None),  # sloppy
    ("https://[fd00::1]:6443", {"HTTPS_PROXY": P, "NO_PROXY": "fd00::/8"}, None),
    ("https://10.1.2.3:6443", {"HTTPS_PROXY": P, "NO_PROXY": "10.1.2.3"}, None),
    ("https://10.1.2.3:6443", {"HTTPS_PROXY": P, "NO_PROXY": "10.1.2.3:6443"}, None),
    ("https://10.1.2.3:6443", {"HTTPS_PROXY": P, "NO_PROXY": "10.1.2.3:443"}, P),
    ("https://api.example", {"HTTPS_PROXY": P, "NO_PROXY": "api.example:443"}, None),
    ("https://api.example:6443", {"HTTPS_PROXY": P, "NO_PROXY": "api.example:443"}, P),
    ("https://k8s.example", {"HTTPS_PROXY": P, "NO_PROXY": "10.0.0.0/8"}, P),  # CIDR: IPs only
    ("https://api.example", {"HTTPS_PROXY": P, "NO_PROXY": ":443,,"}, P),  # malformed: ignored
    # a server URL that is no URL: no proxy, the request fails on the URL itself
    ("http://\x1b[31mred/api", {"HTTP_PROXY": P}, None),
    # CGI's guard applies to HTTP_PROXY only
    ("https://api.example", {"HTTPS_PROXY": P, "REQUEST_METHOD": "GET"}, P),
]


@pytest.mark.parametrize(("server", "env", "expected"), CASES)
def test_the_proxy_is_the_one_go_takes_from_the_environment(server, env, expected):
    assert environment_proxy(server, env) == expected


@pytest.mark.parametrize(
    ("env", "complaint"),
    [
        ({"HTTPS_PROXY": "ftp://proxy.corp:21"}, "HTTPS_PROXY='ftp://proxy.corp:21'.*scheme"),
        ({"https_proxy": "http://proxy.corp:31x8"}, "https_proxy=.*port is not a number"),
        ({"HTTPS_PROXY": "proxy.corp:31x8"}, "HTTPS_PROXY='proxy.corp:31x8': the port is not"),
        ({"HTTPS_PROXY": "::bad"}, "HTTPS_PROXY='::bad': the port is not a number"),
        ({"HTTPS_PROXY": "http://:3128"}, "HTTPS_PROXY=.*names no host"),
    ],
)
def test_a_proxy_variable_naming_no_usable_proxy_is_an_error_naming_it(env, complaint):
    """Go would make requests fail through a proxy named ``http`` (a bad port), dial the local
    host (no host) or connect directly (``::bad``): here the variable is named, as given."""
    with pytest.raises(ProxyError, match=complaint):
        environment_proxy("https://api.example", env)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("http://fw:pr0xyS3cret@proxy.corp:31x8", "'http://***@proxy.corp:31x8'"),
        ("fw:pr0xyS3cret@proxy.corp:31x8", "'***@proxy.corp:31x8'"),
        ("gopher://pr0xyS3cret@proxy.corp:70", "'gopher://***@proxy.corp:70'"),
        ("http://fw:pr0x/yS3cret@:3128", "'http://***@:3128'"),  # a '/' in the password
        ("http://fw:pr0x@yS3cret@proxy.corp:31x8", "'http://***@proxy.corp:31x8'"),
    ],
)
def test_an_error_about_a_proxy_variable_never_quotes_its_credentials(value, shown):
    with pytest.raises(ProxyError) as info:
        environment_proxy("https://api.example", {"HTTPS_PROXY": value})
    assert f"HTTPS_PROXY={shown}" in str(info.value)
    assert "pr0x" not in str(info.value) and "yS3cret" not in str(info.value)


def test_http_proxy_in_a_cgi_process_is_refused_as_go_refuses_it():
    with pytest.raises(ProxyError, match="HTTP_PROXY is set in a CGI environment"):
        environment_proxy("http://api.example", {"HTTP_PROXY": P, "REQUEST_METHOD": "GET"})


async def test_the_argocd_api_client_goes_through_the_environments_proxy(no_proxy_env):
    """The argocd CLI's transport takes the environment's proxy (http.ProxyFromEnvironment):
    an http Argo CD server only a real local proxy can resolve is reached through it."""
    seen: list[list[str]] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await _read_head(reader))
        await _answer(writer, {"items": []})

    async with serving(proxy) as port:
        no_proxy_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        async with ArgoCDClient("http://argocd.internal", token="t", retries=0) as argo:
            assert await argo.list_applications() == []
    (head,) = seen
    assert head[0] == "GET http://argocd.internal/api/v1/applications HTTP/1.1"


def test_the_argocd_api_client_refuses_an_unusable_environment_proxy(no_proxy_env):
    no_proxy_env.setenv("HTTPS_PROXY", "gopher://proxy.corp:70")
    with pytest.raises(ArgoError, match="HTTPS_PROXY="):
        ArgoCDClient("https://argocd.internal", token="t")
