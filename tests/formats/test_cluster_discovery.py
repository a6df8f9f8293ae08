"""Cluster discovery: kubeconfig contexts and Argo CD cluster Secrets -> ``ClusterEndpoint``.

Pins what is read, the errors that name the field to fix, and that credentials never show in
``repr``/``str``. The corpus (../shared/realdata/argocd) holds Argo CD's own ApplicationSet
cluster-generator examples, its repository Secrets and its API schema, but no cluster Secret:
the cluster Secrets below follow the documented layout (``declarative-setup.md``), and the
schema pins that every ``ClusterConfig`` key is either read or refused.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.clusters import (
    EXEC_API_VERSIONS,
    ClusterEndpoint,
    Credentials,
    DiscoverySource,
    Impersonation,
    InteractiveMode,
)
from fleetwarden.formats.argocd_clusters import (
    SECRET_TYPE_LABEL,
    endpoint_from_secret,
    is_cluster_secret,
)
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.kubeconfig import FileRefs, parse_kubeconfig, parse_kubeconfigs

TOKEN = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImZ3LXRlc3QifQ.c2VjcmV0LXBheWxvYWQ.c2lnbmF0dXJl"
CA = b"-----BEGIN CERTIFICATE-----\nMIIBfakeCA\n-----END CERTIFICATE-----\n"
CERT = b"-----BEGIN CERTIFICATE-----\nMIIBclientcert\n-----END CERTIFICATE-----\n"
KEY = b"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIprivatekeybytes\n-----END EC PRIVATE KEY-----\n"
PASSWORD = "hunter2-basic-auth-password"


def b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def assert_no_secrets(endpoint: ClusterEndpoint, *secrets: str | bytes) -> None:
    shown = [repr(endpoint), str(endpoint), repr(endpoint.credentials), str(endpoint.credentials)]
    shown.append(endpoint.fingerprint)
    for secret in secrets:
        needles = [secret] if isinstance(secret, str) else [secret.decode(), repr(secret)]
        needles.append(b64(secret))
        for text in shown:
            for needle in needles:
                assert needle not in text, f"{needle[:12]}... shown in {text[:60]}"


# --- kubeconfig ---------------------------------------------------------------------------

KUBECONFIG = f"""\
apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod-cluster
  cluster:
    server: https://prod.example.com:6443/
    certificate-authority-data: {b64(CA)}
    tls-server-name: kubernetes.default
- name: staging-cluster
  cluster:
    server: https://staging.example.com
    certificate-authority: /etc/fleetwarden/staging-ca.crt
users:
- name: prod-admin
  user:
    token: {TOKEN}
- name: staging-user
  user:
    client-certificate: /etc/fleetwarden/staging.crt
    client-key: /etc/fleetwarden/staging.key
    tokenFile: /var/run/secrets/token
- name: cert-user
  user:
    client-certificate-data: {b64(CERT)}
    client-key-data: {b64(KEY)}
- name: basic-user
  user:
    username: admin
    password: {PASSWORD}
contexts:
- name: prod
  context: {{cluster: prod-cluster, user: prod-admin, namespace: payments}}
- name: staging
  context: {{cluster: staging-cluster, user: staging-user}}
- name: prod-certs
  context: {{cluster: prod-cluster, user: cert-user}}
- name: prod-basic
  context: {{cluster: prod-cluster, user: basic-user}}
"""


def kubeconfig(**changes: Any) -> str:
    """KUBECONFIG with entries replaced: ``users={"prod-admin": {...}}`` etc."""
    body = yaml.safe_load(KUBECONFIG)
    for key, entries in changes.items():
        inner = key[:-1]
        for name, value in entries.items():
            for entry in body[key]:
                if entry["name"] == name:
                    entry[inner] = value
    return yaml.safe_dump(body)


def test_every_context_in_file_order_with_its_facts():
    refs = parse_kubeconfig("kc.yaml", KUBECONFIG)
    assert [r.endpoint.name for r in refs] == ["prod", "staging", "prod-certs", "prod-basic"]
    prod = refs[0].endpoint
    assert prod.server == "https://prod.example.com:6443"  # trailing slash dropped
    assert prod.ca_pem == CA
    assert prod.tls_server_name == "kubernetes.default"
    assert prod.namespaces == ("payments",)
    assert prod.credentials.token == TOKEN
    assert prod.source is DiscoverySource.KUBECONFIG
    assert prod.insecure is False
    certs = refs[2].endpoint.credentials
    assert (certs.client_cert_pem, certs.client_key_pem, certs.token) == (CERT, KEY, None)
    basic = refs[3].endpoint.credentials
    assert (basic.username, basic.password) == ("admin", PASSWORD)


def test_contexts_selects_and_orders():
    refs = parse_kubeconfig("kc.yaml", KUBECONFIG, contexts=["prod-basic", "staging"])
    assert [r.endpoint.name for r in refs] == ["prod-basic", "staging"]


def test_unknown_context_error_names_the_known_ones():
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", KUBECONFIG, contexts=["prod", "qa"])
    assert err.value.field == "contexts"
    assert "'qa'" in str(err.value)
    assert "prod, staging, prod-certs, prod-basic" in str(err.value)
    assert str(err.value).startswith("kc.yaml: ")


def test_context_naming_an_unknown_cluster_is_an_error():
    text = KUBECONFIG.replace("{cluster: staging-cluster,", "{cluster: gone,")
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", text, contexts=["staging"])
    assert err.value.field == "contexts.staging.cluster" and "'gone'" in err.value.reason


def test_file_references_are_returned_not_read():
    staging = parse_kubeconfig("kc.yaml", KUBECONFIG, contexts=["staging"])[0]
    assert staging.files == FileRefs(
        ca="/etc/fleetwarden/staging-ca.crt",
        client_cert="/etc/fleetwarden/staging.crt",
        client_key="/etc/fleetwarden/staging.key",
        token="/var/run/secrets/token",
    )
    assert staging.endpoint.ca_pem is None
    assert staging.endpoint.credentials == Credentials()
    assert parse_kubeconfig("kc.yaml", KUBECONFIG, contexts=["prod"])[0].files == FileRefs()


EKS_EXEC = {
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "command": "aws",
    "args": ["--region", "eu-west-1", "eks", "get-token", "--cluster-name", "prod"],
    "env": [{"name": "AWS_PROFILE", "value": "prod-readonly"}],
}


def test_exec_plugin_is_read_as_aws_eks_update_kubeconfig_writes_it():
    """`aws eks update-kubeconfig` output: v1beta1, no interactiveMode (IfAvailable, as
    clientcmd defaults it), env as a list of {name, value}."""
    text = kubeconfig(users={"prod-admin": {"exec": EKS_EXEC}})
    ep = parse_kubeconfig("kc.yaml", text, contexts=["prod"])[0].endpoint
    plugin = ep.credentials.exec
    assert plugin is not None and ep.credentials.uses_exec and ep.credentials.token is None
    assert (plugin.command, plugin.args, plugin.env) == (
        "aws",
        tuple(EKS_EXEC["args"]),
        (("AWS_PROFILE", "prod-readonly"),),
    )
    assert plugin.api_version == "client.authentication.k8s.io/v1beta1"
    assert plugin.interactive_mode is InteractiveMode.IF_AVAILABLE
    assert not plugin.provide_cluster_info and plugin.cluster_config is None
    assert plugin.origin == "context 'prod'"
    assert repr(ep.credentials) == "Credentials(exec)"
    assert "prod-readonly" not in repr(ep)  # env values may be secrets


def test_exec_plugin_v1_with_cluster_info_and_its_extension():
    """kubelogin / gke-gcloud-auth-plugin style: v1 needs interactiveMode; provideClusterInfo
    passes the cluster's extensions["client.authentication.k8s.io/exec"] to the plugin."""
    body = yaml.safe_load(
        kubeconfig(
            users={
                "prod-admin": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": "kubelogin",
                        "args": ["get-token", "--login", "azurecli"],
                        "interactiveMode": "Never",
                        "provideClusterInfo": True,
                        "installHint": "\x1b[1mbrew install Azure/kubelogin/kubelogin\x1b[0m",
                    }
                }
            }
        )
    )
    body["clusters"][0]["cluster"]["extensions"] = [
        {"name": "other", "extension": {"x": 1}},
        {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "6dae42f8"}},
    ]
    ep = parse_kubeconfig("kc.yaml", yaml.safe_dump(body), contexts=["prod"])[0].endpoint
    plugin = ep.credentials.exec
    assert plugin.interactive_mode is InteractiveMode.NEVER and plugin.provide_cluster_info
    assert json.loads(plugin.cluster_config) == {"audience": "6dae42f8"}
    assert "\x1b" not in plugin.install_hint and "brew install" in plugin.install_hint


def test_a_static_token_wins_over_exec_as_in_client_go():
    text = kubeconfig(users={"prod-admin": {"token": TOKEN, "exec": EKS_EXEC}})
    creds = parse_kubeconfig("kc.yaml", text, contexts=["prod"])[0].endpoint.credentials
    assert creds.exec is not None and not creds.uses_exec and creds.token == TOKEN


@pytest.mark.parametrize(
    ("change", "field", "needle"),
    [
        ({"command": ""}, "exec.command", "command is missing"),
        ({"command": None}, "exec.command", "command is missing"),
        ({"apiVersion": None}, "exec.apiVersion", "expected one of"),
        ({"apiVersion": "client.authentication.k8s.io/v2"}, "exec.apiVersion", "expected one of"),
        (
            {"apiVersion": "client.authentication.k8s.io/v1alpha1"},
            "exec.apiVersion",
            "removed in Kubernetes 1.24",
        ),
        (
            {"apiVersion": "client.authentication.k8s.io/v1"},
            "exec.interactiveMode",
            "required for client.authentication.k8s.io/v1",
        ),
        ({"interactiveMode": "Sometimes"}, "exec.interactiveMode", "Never, IfAvailable or Always"),
        ({"args": "get-token"}, "exec.args", "list of strings"),
        ({"args": ["a", 1]}, "exec.args", "list of strings"),
        ({"env": {"AWS_PROFILE": "x"}}, "exec.env", "list of {name, value}"),
        ({"env": [{"name": "", "value": "x"}]}, "exec.env[0]", "{name, value}"),
        ({"env": [{"name": "A", "value": 1}]}, "exec.env[0]", "{name, value}"),
        ({"provideClusterInfo": "yes"}, "exec.provideClusterInfo", "true or false"),
        ({"installHint": ["x"]}, "exec.installHint", "a string"),
    ],
)
def test_bad_exec_plugins_name_the_field(change, field, needle):
    text = kubeconfig(users={"prod-admin": {"exec": {**EKS_EXEC, **change}}})
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", text, contexts=["prod"])
    assert err.value.field == f"users.prod-admin.{field}"
    assert needle in err.value.reason


@pytest.mark.parametrize(
    ("provider", "hint"),
    [
        ("gcp", "gke-gcloud-auth-plugin"),
        ("azure", "kubelogin convert-kubeconfig"),
        ("oidc", "oidc-login"),
        ("openstack", "exec credential plugin"),
    ],
)
def test_auth_provider_is_refused_with_the_migration(provider, hint):
    text = kubeconfig(users={"prod-admin": {"auth-provider": {"name": provider, "config": {}}}})
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", text, contexts=["prod"])
    assert err.value.field == "users.prod-admin.auth-provider"
    assert "removed in 1.26" in err.value.reason and hint in err.value.reason
    # the other contexts do not use it and still parse
    assert parse_kubeconfig("kc.yaml", text, contexts=["staging"])[0].endpoint.name == "staging"


@pytest.mark.parametrize(
    ("changes", "context", "field"),
    [
        (
            {
                "clusters": {
                    "prod-cluster": {"server": "https://x", "certificate-authority-data": "%%"}
                }
            },
            "prod",
            "clusters.prod-cluster.certificate-authority-data",
        ),
        (
            {"users": {"cert-user": {"client-certificate-data": "not base64!"}}},
            "prod-certs",
            "users.cert-user.client-certificate-data",
        ),
        (
            {"users": {"cert-user": {"client-key-data": "äöü"}}},
            "prod-certs",
            "users.cert-user.client-key-data",
        ),
    ],
)
def test_base64_errors_name_the_field(changes, context, field):
    """The field path must point at the entry to fix: the cluster's name, not the context's."""
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", kubeconfig(**changes), contexts=[context])
    assert err.value.field == field
    assert err.value.reason == "not valid base64"
    assert field in str(err.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("clusters: [unclosed", "YAML error"),
        ("- just a list", "expected a mapping"),
        ("clusters: [42]", "clusters[0]"),
        ("clusters: [{name: a, cluster: [1]}]", "clusters[0].cluster"),
    ],
)
def test_malformed_kubeconfig_errors_name_the_place(text, needle):
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", text)
    assert needle in str(err.value)


def test_server_must_be_an_http_url():
    text = kubeconfig(clusters={"staging-cluster": {"server": "staging.example.com:443"}})
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", text, contexts=["staging"])
    assert err.value.field == "clusters.staging-cluster.server"


@pytest.mark.parametrize(
    ("cluster", "field"),
    [
        ({"server": "https://x", "insecure-skip-tls-verify": "false"}, "insecure-skip-tls-verify"),
        ({"server": "https://x", "tls-server-name": 6443}, "tls-server-name"),
    ],
)
def test_mistyped_tls_settings_are_refused_not_guessed(cluster, field):
    """A quoted "false" must not turn TLS verification off; a number is no server name."""
    text = kubeconfig(clusters={"prod-cluster": cluster})
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", text, contexts=["prod"])
    assert err.value.field == f"clusters.prod-cluster.{field}"


def test_kubeconfig_credentials_never_print_themselves():
    for ref in parse_kubeconfig("kc.yaml", KUBECONFIG):
        assert_no_secrets(ref.endpoint, TOKEN, CERT, KEY, PASSWORD)
    prod = parse_kubeconfig("kc.yaml", KUBECONFIG, contexts=["prod"])[0].endpoint
    assert repr(prod.credentials) == "Credentials(token)"


_yaml_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=12), st.just("https://h")
)
_yaml_values = st.recursive(
    _yaml_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
_cluster_keys = st.sampled_from(
    [
        "server",
        "certificate-authority-data",
        "certificate-authority",
        "insecure-skip-tls-verify",
        "tls-server-name",
    ]
)
_user_keys = st.sampled_from(
    ["token", "tokenFile", "client-certificate-data", "client-key-data", "username", "password"]
)
_exec_like = st.fixed_dictionaries(
    {},
    optional={
        "command": st.sampled_from(["aws", "./bin/plugin", ""]) | _yaml_scalars,
        "apiVersion": st.sampled_from(
            ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]
        )
        | _yaml_scalars,
        "args": st.lists(st.text(max_size=6), max_size=3) | _yaml_values,
        "env": st.lists(
            st.fixed_dictionaries({"name": st.text(max_size=4), "value": st.text(max_size=4)}),
            max_size=2,
        )
        | _yaml_values,
        "interactiveMode": st.sampled_from(["Never", "IfAvailable", "Always"]) | _yaml_scalars,
        "provideClusterInfo": _yaml_scalars,
        "installHint": _yaml_scalars,
    },
)


@settings(max_examples=150, deadline=None)
@given(
    cluster=st.dictionaries(_cluster_keys, _yaml_scalars | st.just(b64(CA))),
    user=st.dictionaries(_user_keys, _yaml_values | st.just(b64(KEY))),
    plugin=st.none() | _exec_like | _yaml_values,
    namespace=_yaml_values,
)
def test_any_kubeconfig_entry_gives_a_usable_endpoint_or_a_format_error(
    cluster, user, plugin, namespace
):
    if plugin is not None:
        user = {**user, "exec": plugin}
    body = {
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [
            {"name": "x", "context": {"cluster": "c", "user": "u", "namespace": namespace}}
        ],
    }
    try:
        (ref,) = parse_kubeconfig("kc.yaml", yaml.safe_dump(body))
    except FormatError:
        return
    ep = ref.endpoint
    assert re.fullmatch(r"[0-9a-f]{12}", ep.fingerprint)
    assert isinstance(ep.insecure, bool)
    assert ep.tls_server_name is None or isinstance(ep.tls_server_name, str)
    assert all(isinstance(n, str) for n in ep.namespaces)
    if ep.credentials.exec is not None:
        read = ep.credentials.exec
        assert read.command and all(isinstance(a, str) for a in read.args)
        assert read.api_version in EXEC_API_VERSIONS
        assert isinstance(read.interactive_mode, InteractiveMode)
        assert isinstance(read.provide_cluster_info, bool)


# --- kubeconfig: what kubectl refuses, and nothing ignored ------------------------------------


def test_a_context_naming_a_user_that_does_not_exist_is_an_error_not_anonymous():
    """kubectl would connect without credentials; clientcmd's validation says "user X was not
    found for context Y". The message names the file, the context and the missing user."""
    text = KUBECONFIG.replace(
        "{cluster: prod-cluster, user: prod-admin,", "{cluster: prod-cluster, user: prod-admn,"
    )
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", text, contexts=["prod"])
    assert err.value.path == "kc.yaml" and err.value.field == "contexts.prod.user"
    assert "user 'prod-admn' was not found for context 'prod'" in err.value.reason
    assert "prod-admin" in err.value.reason  # the users it has
    # the other contexts are still usable
    assert parse_kubeconfig("kc.yaml", text, contexts=["staging"])[0].endpoint.name == "staging"


def test_a_context_without_a_user_connects_without_credentials_as_kubectl_does():
    """A `kubectl proxy` context names no user: that is a choice, not a typo."""
    body = yaml.safe_load(KUBECONFIG)
    del body["contexts"][0]["context"]["user"]
    ep = parse_kubeconfig("kc.yaml", yaml.safe_dump(body), contexts=["prod"])[0].endpoint
    assert repr(ep.credentials) == "Credentials(anonymous)"


@pytest.mark.parametrize("cluster", [None, ""])
def test_a_context_without_a_cluster_is_an_error(cluster):
    body = yaml.safe_load(KUBECONFIG)
    body["contexts"][0]["context"]["cluster"] = cluster
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", yaml.safe_dump(body), contexts=["prod"])
    assert err.value.field == "contexts.prod.cluster" and "names no cluster" in err.value.reason


@pytest.mark.parametrize(("key", "index"), [("clusters", 0), ("users", 0), ("contexts", 0)])
def test_a_name_listed_twice_is_an_error_as_in_clientcmd(key, index):
    """clientcmd fails to convert a file with a duplicate name (api/v1/conversion.go): which
    entry would win is not a guess fleetwarden makes."""
    body = yaml.safe_load(KUBECONFIG)
    body[key].append(dict(body[key][index]))
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", yaml.safe_dump(body), contexts=["staging"])
    name = body[key][index]["name"]
    assert f"{name!r} is listed twice" in err.value.reason
    assert err.value.field == f"{key}[{len(body[key]) - 1}]"


def test_several_files_merge_as_kubeconfig_env_first_file_wins():
    """$KUBECONFIG=a:b — the first file that names an entry wins, entry and all; an entry only
    the second file has is used; an error names the file holding the entry."""
    first = yaml.safe_dump(
        {
            "clusters": [{"name": "shared", "cluster": {"server": "https://first:6443"}}],
            "users": [{"name": "me", "user": {"token": "first-token"}}],
            "contexts": [{"name": "a", "context": {"cluster": "shared", "user": "me"}}],
        }
    )
    second = yaml.safe_dump(
        {
            "clusters": [
                {"name": "shared", "cluster": {"server": "https://second:6443"}},
                {"name": "only-b", "cluster": {"server": "https://b:6443", "bogus": 1}},
            ],
            "users": [{"name": "me", "user": {"username": "second", "password": "p"}}],
            "contexts": [
                {"name": "a", "context": {"cluster": "only-b", "user": "me"}},
                {"name": "b", "context": {"cluster": "shared", "user": "me"}},
                {"name": "c", "context": {"cluster": "only-b", "user": "me"}},
            ],
        }
    )
    a, b = parse_kubeconfigs([("one.yaml", first), ("two.yaml", second)], contexts=["a", "b"])
    assert (a.endpoint.server, a.endpoint.credentials.token) == (
        "https://first:6443",
        "first-token",
    )
    assert (b.endpoint.server, b.endpoint.credentials.username) == ("https://first:6443", None)
    assert (b.cluster_file, b.user_file) == ("one.yaml", "one.yaml")
    with pytest.raises(FormatError) as err:
        parse_kubeconfigs([("one.yaml", first), ("two.yaml", second)], contexts=["c"])
    assert err.value.path == "two.yaml" and err.value.field == "clusters.only-b.bogus"


HONOURED = {
    "clusters": {
        "prod-cluster": {
            "server": "https://prod.example.com:6443",
            "certificate-authority-data": b64(CA),
            "tls-server-name": "kubernetes.default",
            "proxy-url": "http://proxy.corp.example:3128",
            "disable-compression": True,
        }
    },
    "users": {
        "prod-admin": {
            "token": TOKEN,
            "as": "alice@example.com",
            "as-uid": "7d1f",
            "as-groups": ["sre", "system:authenticated"],
            "as-user-extra": {"scopes.example.com/team": ["payments", "ledger"]},
        }
    },
}


def test_proxy_compression_and_impersonation_are_carried_to_the_client():
    ep = parse_kubeconfig("kc.yaml", kubeconfig(**HONOURED), contexts=["prod"])[0].endpoint
    assert ep.proxy_url == "http://proxy.corp.example:3128"
    assert ep.disable_compression is True and ep.tls_server_name == "kubernetes.default"
    assert ep.credentials.impersonate == Impersonation(
        "alice@example.com",
        "7d1f",
        ("sre", "system:authenticated"),
        (("scopes.example.com/team", ("payments", "ledger")),),
    )
    plain = parse_kubeconfig("kc.yaml", KUBECONFIG, contexts=["prod"])[0].endpoint
    assert plain.fingerprint != ep.fingerprint


def test_a_proxy_password_is_never_shown():
    secret = "pr0xy-s3cret-pass"
    changes = {
        "clusters": {
            "prod-cluster": {"server": "https://x", "proxy-url": f"http://u:{secret}@proxy:3128"}
        }
    }
    ep = parse_kubeconfig("kc.yaml", kubeconfig(**changes), contexts=["prod"])[0].endpoint
    assert secret not in repr(ep) and secret not in str(ep)
    bad = {
        "clusters": {
            "prod-cluster": {"server": "https://x", "proxy-url": f"ftp://u:{secret}@proxy"}
        }
    }
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", kubeconfig(**bad), contexts=["prod"])
    assert secret not in str(err.value) and "'ftp'" in err.value.reason


@pytest.mark.parametrize(
    ("cluster", "user", "field", "needle"),
    [
        ({"certificate-authority": "/ca.crt"}, {}, "clusters.prod-cluster.certificate-authority",
         "both certificate-authority and certificate-authority-data"),
        ({"insecure-skip-tls-verify": True}, {}, "clusters.prod-cluster.insecure-skip-tls-verify",
         "with a certificate authority"),
        ({"proxy-url": "ftp://proxy:21"}, {}, "clusters.prod-cluster.proxy-url",
         "unsupported scheme"),
        ({"proxy-url": "http://"}, {}, "clusters.prod-cluster.proxy-url", "names no host"),
        ({"proxy-url": 3128}, {}, "clusters.prod-cluster.proxy-url", "expected a string"),
        ({"disable-compression": "true"}, {}, "clusters.prod-cluster.disable-compression",
         "true or false"),
        ({"certificate-authority-dta": b64(CA)}, {},
         "clusters.prod-cluster.certificate-authority-dta",
         "did you mean 'certificate-authority-data'"),
        ({}, {"client-certificate-data": b64(CERT)}, "users.prod-admin.client-certificate-data",
         "without its key"),
        ({}, {"client-key": "/k.pem"}, "users.prod-admin.client-key", "without its certificate"),
        ({}, {"client-certificate": "/c.pem", "client-certificate-data": b64(CERT),
              "client-key-data": b64(KEY)},
         "users.prod-admin.client-certificate",
         "both client-certificate and client-certificate-data"),
        ({}, {"client-certificate-data": b64(CERT), "client-key": "/k",
              "client-key-data": b64(KEY)},
         "users.prod-admin.client-key", "both client-key and client-key-data"),
        ({}, {"username": "admin", "password": "pw"}, "users.prod-admin.token",
         "more than one authentication method"),
        ({}, {"token": None, "tokenFile": "/t", "username": "admin"}, "users.prod-admin.tokenFile",
         "more than one authentication method"),
        ({}, {"token": None, "password": "pw"}, "users.prod-admin.password", "without a username"),
        ({}, {"as-groups": ["sre"]}, "users.prod-admin.as", "without as"),
        ({}, {"as-uid": "7d1f"}, "users.prod-admin.as", "without as"),
        ({}, {"as": "alice", "as-groups": "sre"}, "users.prod-admin.as-groups", "list of strings"),
        ({}, {"as": "alice", "as-groups": [7]}, "users.prod-admin.as-groups[0]",
         "expected a string"),
        ({}, {"as": "al\nice"}, "users.prod-admin.as", "printable ASCII"),
        ({}, {"as": "alice", "as-user-extra": {"k": "v"}}, "users.prod-admin.as-user-extra.k",
         "list of strings"),
        ({}, {"as": "alice", "as-user-extra": ["k"]}, "users.prod-admin.as-user-extra",
         "mapping of lists"),
        ({}, {"token": 12345}, "users.prod-admin.token", "expected a string"),
        ({}, {"token": "eyJhbGci\n"}, "users.prod-admin.token", "control or non-ASCII"),
        ({}, {"token": None, "username": ["admin"]}, "users.prod-admin.username",
         "expected a string"),
        ({}, {"impersonate": "alice"}, "users.prod-admin.impersonate",
         "not a kubeconfig user field"),
        ({}, {"exec": {**EKS_EXEC, "pluginPolicy": "Allow"}}, "users.prod-admin.exec.pluginPolicy",
         "not a kubeconfig exec field"),
    ],
)  # fmt: skip
def test_what_kubectl_refuses_or_fleetwarden_would_ignore_is_an_error_naming_the_field(
    cluster, user, field, needle
):
    body = yaml.safe_load(KUBECONFIG)
    body["clusters"][0]["cluster"].update(cluster)
    body["users"][0]["user"].update(user)
    body["users"][0]["user"] = {k: v for k, v in body["users"][0]["user"].items() if v is not None}
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", yaml.safe_dump(body), contexts=["prod"])
    assert err.value.path == "kc.yaml"
    assert err.value.field == field, err.value
    assert needle in err.value.reason


@pytest.mark.parametrize(
    ("context", "field", "needle"),
    [
        ({"namespace": "Payments_EU"}, "contexts.prod.namespace", "not a DNS label"),
        ({"namespace": 7}, "contexts.prod.namespace", "expected a string"),
        ({"user": ["prod-admin"]}, "contexts.prod.user", "expected a string"),
        ({"users": "prod-admin"}, "contexts.prod.users", "did you mean 'user'"),
    ],
)
def test_bad_context_fields_are_refused(context, field, needle):
    body = yaml.safe_load(KUBECONFIG)
    body["contexts"][0]["context"].update(context)
    with pytest.raises(FormatError) as err:
        parse_kubeconfig("kc.yaml", yaml.safe_dump(body), contexts=["prod"])
    assert err.value.field == field and needle in err.value.reason


def test_a_username_alone_is_basic_auth_as_in_client_go():
    creds = parse_kubeconfig(
        "kc.yaml", kubeconfig(users={"basic-user": {"username": "admin"}}), contexts=["prod-basic"]
    )[0].endpoint.credentials
    assert (creds.username, creds.password, repr(creds)) == ("admin", None, "Credentials(basic)")


_USER_VALUES = {
    "token": st.just(TOKEN),
    "tokenFile": st.just("token.txt"),
    "username": st.just("admin"),
    "password": st.just(PASSWORD),
    "client-certificate-data": st.just(b64(CERT)),
    "client-key-data": st.just(b64(KEY)),
    "client-certificate": st.just("c.pem"),
    "client-key": st.just("k.pem"),
    "as": st.just("alice"),
    "as-uid": st.just("7d1f"),
    "as-groups": st.lists(st.sampled_from(["sre", "dev"]), max_size=2),
    "as-user-extra": st.dictionaries(
        st.sampled_from(["team", "a/b"]), st.lists(st.just("x"), max_size=2), max_size=2
    ),
}
_CLUSTER_VALUES = {
    "certificate-authority-data": st.just(b64(CA)),
    "certificate-authority": st.just("ca.crt"),
    "insecure-skip-tls-verify": st.booleans(),
    "tls-server-name": st.just("kubernetes.default"),
    "proxy-url": st.sampled_from(["http://proxy:3128", "socks5://127.0.0.1:1080", "gopher://x"]),
    "disable-compression": st.booleans(),
}


@settings(max_examples=300, deadline=None)
@given(
    user=st.fixed_dictionaries({}, optional=_USER_VALUES),
    cluster=st.fixed_dictionaries({}, optional=_CLUSTER_VALUES),
    stray=st.none()
    | st.sampled_from(["Server", "certificate-authority-dta", "as-group", "tokenfile"]),
)
def test_every_kubeconfig_field_given_is_honoured_or_refused_never_dropped(user, cluster, stray):
    """The property behind item 2: whatever combination of fields a context uses, either the
    endpoint carries each of them, or parsing fails naming one of them."""
    if stray is not None:
        (cluster if stray == "Server" or "authority" in stray else user)[stray] = "x"
    body = {
        "clusters": [{"name": "c", "cluster": {"server": "https://h:6443", **cluster}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    }
    try:
        (ref,) = parse_kubeconfig("kc.yaml", yaml.safe_dump(body))
    except FormatError as exc:
        assert exc.field and exc.field.split(".")[0] in ("clusters", "users"), exc
        return
    assert stray is None
    ep, creds, files = ref.endpoint, ref.endpoint.credentials, ref.files
    assert creds.token == user.get("token")
    assert files.token == user.get("tokenFile")
    assert creds.username == user.get("username") and creds.password == user.get("password")
    assert (creds.client_cert_pem is not None) == ("client-certificate-data" in user)
    assert (creds.client_key_pem is not None) == ("client-key-data" in user)
    assert (files.client_cert, files.client_key) == (
        user.get("client-certificate"),
        user.get("client-key"),
    )
    if "as" in user:
        assert creds.impersonate is not None and creds.impersonate.user == user["as"]
        assert creds.impersonate.groups == tuple(user.get("as-groups", ()))
        assert dict(creds.impersonate.extra) == {
            k: tuple(v) for k, v in user.get("as-user-extra", {}).items()
        }
        assert creds.impersonate.uid == user.get("as-uid")
    else:
        assert creds.impersonate is None
        assert (
            not user.get("as-uid") and not user.get("as-groups") and not user.get("as-user-extra")
        )
    assert ep.ca_pem == (CA if "certificate-authority-data" in cluster else None)
    assert files.ca == cluster.get("certificate-authority")
    assert ep.insecure == cluster.get("insecure-skip-tls-verify", False)
    assert ep.tls_server_name == cluster.get("tls-server-name")
    assert ep.proxy_url == cluster.get("proxy-url")
    assert ep.disable_compression == cluster.get("disable-compression", False)


# --- Argo CD cluster Secrets --------------------------------------------------------------


def cluster_secret(
    *,
    name: str = "prod-eu",
    server: str = "https://prod-eu.example.com/",
    config: dict[str, Any] | None = None,
    namespaces: str | None = "payments, ledger",
    labels: dict[str, str] | None = None,
    plain: bool = False,
) -> dict[str, Any]:
    """A cluster Secret laid out as Argo CD's declarative-setup documents it."""
    if config is None:
        config = {"bearerToken": TOKEN, "tlsClientConfig": {"insecure": False, "caData": b64(CA)}}
    fields = {"name": name, "server": server, "config": json.dumps(config)}
    if namespaces is not None:
        fields["namespaces"] = namespaces
    secret: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"cluster-{name}",
            "namespace": "argocd",
            "labels": {SECRET_TYPE_LABEL: "cluster", **(labels or {"env": "prod"})},
        },
        "type": "Opaque",
    }
    if plain:
        secret["stringData"] = fields
    else:
        secret["data"] = {k: b64(v) for k, v in fields.items()}
    return secret


@pytest.mark.parametrize("plain", [False, True], ids=["data", "stringData"])
def test_cluster_secret_facts(plain):
    obj = cluster_secret(plain=plain)
    assert is_cluster_secret(obj)
    ep = endpoint_from_secret(obj)
    assert ep.name == "prod-eu"
    assert ep.server == "https://prod-eu.example.com"
    assert ep.namespaces == ("payments", "ledger")
    assert ep.credentials.token == TOKEN
    assert ep.ca_pem == CA and ep.insecure is False
    assert ep.source is DiscoverySource.ARGOCD_SECRET
    assert dict(ep.labels) == {SECRET_TYPE_LABEL: "cluster", "env": "prod"}


def test_string_data_wins_over_data_as_the_api_server_would_merge_it():
    obj = cluster_secret()
    obj["stringData"] = {"server": "https://override.example.com"}
    assert endpoint_from_secret(obj).server == "https://override.example.com"


def test_cluster_secret_tls_client_certificate_and_basic_auth():
    config = {
        "username": "admin",
        "password": PASSWORD,
        "tlsClientConfig": {
            "insecure": True,
            "certData": b64(CERT),
            "keyData": b64(KEY),
            "serverName": "api.internal",
        },
    }
    ep = endpoint_from_secret(cluster_secret(config=config, namespaces=None))
    creds = ep.credentials
    assert (creds.client_cert_pem, creds.client_key_pem, creds.token) == (CERT, KEY, None)
    assert (creds.username, creds.password) == ("admin", PASSWORD)
    assert (ep.insecure, ep.tls_server_name, ep.ca_pem, ep.namespaces) == (
        True,
        "api.internal",
        None,
        (),
    )
    assert_no_secrets(ep, CERT, KEY, PASSWORD)


@pytest.mark.parametrize("plugin", [{}, {"awsAuthConfig": {"clusterName": "prod"}}])
def test_insecure_with_ca_data_is_refused_as_client_go_refuses_it_for_argocd(plugin):
    """Argo CD hands both to client-go, whose TLSConfigFor refuses the pair: the Secret is
    an error naming it and both fields, never a connection where insecure silently wins."""
    tls = {"insecure": True, "caData": b64(CA)}
    obj = cluster_secret(config={"bearerToken": TOKEN, "tlsClientConfig": tls, **plugin})
    with pytest.raises(FormatError) as err:
        endpoint_from_secret(obj)
    assert str(err.value).startswith("secret argocd/cluster-prod-eu: ")
    assert err.value.field == "data.config.tlsClientConfig.insecure"
    assert "caData" in err.value.reason and "insecure flag is not allowed" in err.value.reason
    assert TOKEN not in str(err.value)
    for alone in ({"insecure": True}, {"insecure": False, "caData": b64(CA)}):
        config = {"bearerToken": TOKEN, "tlsClientConfig": alone}
        assert endpoint_from_secret(cluster_secret(config=config)).insecure is alone["insecure"]


def test_name_defaults_to_the_server():
    ep = endpoint_from_secret(cluster_secret(name="  ", server="https://prod-eu.example.com"))
    assert ep.name == ep.server == "https://prod-eu.example.com"


@pytest.mark.parametrize("plain", [False, True], ids=["data", "stringData"])
def test_bearer_token_is_kept_but_never_shown(plain):
    ep = endpoint_from_secret(cluster_secret(plain=plain))
    assert ep.credentials.token == TOKEN
    assert TOKEN not in repr(ep) and TOKEN not in str(ep)
    assert_no_secrets(ep, TOKEN, CA)


@pytest.mark.parametrize(
    ("aws", "args"),
    [
        ({"clusterName": "prod-eu"}, ("--cluster-name", "prod-eu")),
        (
            {"clusterName": "prod-eu", "roleARN": "arn:aws:iam::1:role/argocd", "profile": "p"},
            (
                *("--cluster-name", "prod-eu"),
                *("--role-arn", "arn:aws:iam::1:role/argocd"),
                *("--profile", "p"),
            ),
        ),
    ],
)
def test_aws_auth_config_runs_argocd_k8s_auth_or_else_the_aws_cli(aws, args):
    """As Argo CD's RawRestConfig: `argocd-k8s-auth aws ...`, v1beta1, never interactive; the
    bearer token is then not used. `aws eks get-token ...` when argocd-k8s-auth is absent."""
    obj = cluster_secret(config={"awsAuthConfig": aws, "bearerToken": TOKEN})
    ep = endpoint_from_secret(obj)
    plugin = ep.credentials.exec
    assert (plugin.command, plugin.args) == ("argocd-k8s-auth", ("aws", *args))
    assert plugin.fallback == ("aws", ("eks", "get-token", *args))
    assert plugin.api_version == "client.authentication.k8s.io/v1beta1"
    assert plugin.interactive_mode is InteractiveMode.NEVER
    assert ep.credentials.token is None and ep.credentials.uses_exec
    assert plugin.origin == "secret argocd/cluster-prod-eu (awsAuthConfig)"


def test_exec_provider_config_is_run_as_given_with_its_env_map():
    config = {
        "execProviderConfig": {
            "command": "argocd-k8s-auth",
            "args": ["gcp"],
            "env": {"B": "2", "A": "1"},
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "installHint": "argocd-k8s-auth ships in the Argo CD image",
        },
        "tlsClientConfig": {"caData": b64(CA)},
    }
    ep = endpoint_from_secret(cluster_secret(config=config))
    plugin = ep.credentials.exec
    assert (plugin.command, plugin.args, plugin.env) == (
        "argocd-k8s-auth",
        ("gcp",),
        (("A", "1"), ("B", "2")),
    )
    assert plugin.install_hint == "argocd-k8s-auth ships in the Argo CD image"
    assert plugin.interactive_mode is InteractiveMode.NEVER and plugin.fallback is None
    assert ep.ca_pem == CA


@pytest.mark.parametrize(
    ("plugin", "value", "field"),
    [
        ("awsAuthConfig", {"roleARN": "arn:aws:iam::1:role/x"}, "awsAuthConfig.clusterName"),
        ("awsAuthConfig", "prod-eu", "awsAuthConfig"),
        ("awsAuthConfig", {"clusterName": 7}, "awsAuthConfig.clusterName"),
        (
            "execProviderConfig",
            {"apiVersion": "client.authentication.k8s.io/v1"},
            "execProviderConfig.command",
        ),
        ("execProviderConfig", {"command": "x"}, "execProviderConfig.apiVersion"),
        (
            "execProviderConfig",
            {"command": "x", "apiVersion": "client.authentication.k8s.io/v1", "env": [["A", "1"]]},
            "execProviderConfig.env",
        ),
        (
            "execProviderConfig",
            {"command": "x", "apiVersion": "client.authentication.k8s.io/v1", "args": "a b"},
            "execProviderConfig.args",
        ),
    ],
)
def test_bad_cloud_credential_plugins_name_the_field(plugin, value, field):
    obj = cluster_secret(config={plugin: value, "tlsClientConfig": {"caData": b64(CA)}})
    with pytest.raises(FormatError) as err:
        endpoint_from_secret(obj)
    assert err.value.field == f"data.config.{field}"
    assert err.value.path == "secret argocd/cluster-prod-eu"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda s: s["data"].update(server=b64("prod-eu.example.com")), "data.server"),
        (lambda s: s["data"].pop("server"), "data.server"),
        (lambda s: s["data"].update(name="***"), "data.name"),
        (lambda s: s["data"].update(name=b64(b"\xff\xfe")), "data.name"),
        (lambda s: s["data"].update(config=b64("{bearerToken: x")), "data.config"),
        (lambda s: s["data"].update(config=b64("[1, 2]")), "data.config"),
        (lambda s: s.update(data=["server"]), "data"),
        (
            lambda s: s["data"].update(config=b64('{"tlsClientConfig": "yes"}')),
            "data.config.tlsClientConfig",
        ),
        (
            lambda s: s["data"].update(config=b64('{"tlsClientConfig": {"caData": "%%"}}')),
            "data.config.tlsClientConfig.caData",
        ),
        (
            lambda s: s["data"].update(config=b64('{"bearerToken": 12345}')),
            "data.config.bearerToken",
        ),
        (
            lambda s: s["data"].update(config=b64('{"tlsClientConfig": {"insecure": "false"}}')),
            "data.config.tlsClientConfig.insecure",
        ),
        (
            lambda s: s["data"].update(config=b64('{"tlsClientConfig": {"serverName": 1}}')),
            "data.config.tlsClientConfig.serverName",
        ),
    ],
)
def test_bad_cluster_secrets_name_the_secret_and_field(mutate, field):
    obj = cluster_secret()
    mutate(obj)
    with pytest.raises(FormatError) as err:
        endpoint_from_secret(obj)
    assert err.value.field == field
    assert str(err.value).startswith("secret argocd/cluster-prod-eu: ")
    assert TOKEN not in str(err.value)


@pytest.mark.parametrize(
    ("config", "field", "needle"),
    [
        ({"proxyUrl": "ftp://proxy"}, "data.config.proxyUrl", "unsupported scheme"),
        ({"proxyUrl": 3128}, "data.config.proxyUrl", "expected a string"),
        ({"disableCompression": "yes"}, "data.config.disableCompression", "true or false"),
    ],
)
def test_argocd_proxy_and_compression_settings_are_honoured_or_refused(config, field, needle):
    """Argo CD's RawRestConfig sets them on the rest config: never silently dropped."""
    with pytest.raises(FormatError) as err:
        endpoint_from_secret(cluster_secret(config={"bearerToken": TOKEN, **config}))
    assert err.value.field == field and needle in err.value.reason
    ep = endpoint_from_secret(
        cluster_secret(config={"bearerToken": TOKEN, "proxyUrl": "socks5://127.0.0.1:1080"})
    )
    assert ep.proxy_url == "socks5://127.0.0.1:1080" and not ep.disable_compression


def test_fingerprint_follows_the_connection_not_the_labels():
    base = endpoint_from_secret(cluster_secret())
    relabelled = endpoint_from_secret(cluster_secret(labels={"env": "staging", "tier": "1"}))
    renamespaced = endpoint_from_secret(cluster_secret(namespaces="payments"))
    rotated = endpoint_from_secret(
        cluster_secret(config={"bearerToken": TOKEN + "x", "tlsClientConfig": {"caData": b64(CA)}})
    )
    moved = endpoint_from_secret(cluster_secret(server="https://prod-eu-2.example.com"))
    assert relabelled.labels != base.labels
    assert relabelled.fingerprint == renamespaced.fingerprint == base.fingerprint
    assert len({base.fingerprint, rotated.fingerprint, moved.fingerprint}) == 3
    new_ca = dataclasses.replace(base, ca_pem=CA + b"\n")
    assert new_ca.fingerprint != base.fingerprint


def test_kubeconfig_token_rotation_changes_the_fingerprint():
    before = parse_kubeconfig("kc.yaml", KUBECONFIG, contexts=["prod"])[0].endpoint
    after = parse_kubeconfig("kc.yaml", KUBECONFIG.replace(TOKEN, TOKEN[::-1]), contexts=["prod"])[
        0
    ].endpoint
    assert after.fingerprint != before.fingerprint
    same = parse_kubeconfig(
        "kc.yaml", KUBECONFIG.replace("namespace: payments", "namespace: ops"), contexts=["prod"]
    )[0].endpoint
    assert same.fingerprint == before.fingerprint


@pytest.mark.realdata
def test_real_repository_secrets_are_not_cluster_secrets(realdata):
    """Argo CD's repository Secrets carry the same label key (with ``repository``) and even a
    bearerToken: none of them may be taken for a cluster."""
    path = realdata / "argocd" / "argocd-repository-secrets.yaml"
    secrets = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert len(secrets) == 7
    assert {s["metadata"]["labels"][SECRET_TYPE_LABEL] for s in secrets} == {"repository"}
    assert any("bearerToken" in s["stringData"] for s in secrets)
    assert [s["metadata"]["name"] for s in secrets if is_cluster_secret(s)] == []


@pytest.mark.realdata
@pytest.mark.parametrize(
    "name",
    [
        "argocd-appset-cluster-generator-with-cluster-secrets.yaml",
        "argocd-appset-matrix-cluster-and-git.yaml",
    ],
)
def test_real_cluster_generators_select_what_is_cluster_secret_accepts(realdata, name):
    """Argo CD's own cluster generators select cluster Secrets by this label: a Secret they
    select is one we read."""
    doc = yaml.safe_load((realdata / "argocd" / name).read_text())

    def selectors(node: Any) -> list[dict[str, str]]:
        if isinstance(node, dict):
            found = [node["clusters"]["selector"]["matchLabels"]] if "clusters" in node else []
            return found + [s for v in node.values() for s in selectors(v)]
        if isinstance(node, list):
            return [s for v in node for s in selectors(v)]
        return []

    (labels,) = selectors(doc["spec"]["generators"])
    assert labels == {SECRET_TYPE_LABEL: "cluster"}
    assert is_cluster_secret({"metadata": {"labels": labels}})


# Every ClusterConfig / TLSClientConfig key of Argo CD's API schema: read (with the
# ClusterEndpoint attribute it lands in), refused, or knowingly not used.
CONFIG_KEYS = {
    "bearerToken": ("read", "token"),
    "username": ("read", "username"),
    "password": ("read", "password"),
    "tlsClientConfig": ("read", None),
    "awsAuthConfig": ("read", None),  # -> credentials.exec
    "execProviderConfig": ("read", None),
    "proxyUrl": ("read", None),  # -> proxy_url
    "disableCompression": ("read", None),  # -> disable_compression
}
TLS_KEYS = {
    "caData": "ca_pem",
    "certData": "client_cert_pem",
    "keyData": "client_key_pem",
    "serverName": "tls_server_name",
    "insecure": "insecure",
}


@pytest.mark.realdata
def test_every_key_of_the_real_argocd_cluster_schema_is_accounted_for(realdata):
    swagger = json.loads((realdata / "argocd" / "argocd-api-swagger.json").read_text())
    defs = swagger["definitions"]
    assert set(defs["v1alpha1ClusterConfig"]["properties"]) == set(CONFIG_KEYS)
    assert set(defs["v1alpha1TLSClientConfig"]["properties"]) == set(TLS_KEYS)
    tls_values = {
        "caData": b64(CA),
        "certData": b64(CERT),
        "keyData": b64(KEY),
        "serverName": "api.internal",
        "insecure": False,  # true beside caData is refused (client-go): read on its own below
    }
    insecure = {"bearerToken": TOKEN, "tlsClientConfig": {"insecure": True}}
    assert endpoint_from_secret(cluster_secret(config=insecure)).insecure is True
    config = {"bearerToken": TOKEN, "username": "admin", "password": PASSWORD}
    config |= {"tlsClientConfig": tls_values, "proxyUrl": "http://proxy:3128"}
    config |= {"disableCompression": True}
    ep = endpoint_from_secret(cluster_secret(config=config))
    assert (ep.proxy_url, ep.disable_compression) == ("http://proxy:3128", True)
    for key, attr in TLS_KEYS.items():
        want = tls_values[key]
        got = getattr(ep.credentials if "client" in attr else ep, attr)
        assert got == (base64.b64decode(want) if key.endswith("Data") else want), key
    for key, (kind, attr) in CONFIG_KEYS.items():
        if kind == "read" and attr:
            assert getattr(ep.credentials, attr) == config[key], key


# --- hypothesis: any Secret-like mapping --------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)
_tls = st.fixed_dictionaries(
    {},
    optional={
        "insecure": _json,
        "caData": st.just(b64(CA)) | _json,
        "certData": st.just(b64(CERT)) | _json,
        "keyData": _json,
        "serverName": _json,
    },
)
_config = st.fixed_dictionaries(
    {},
    optional={
        "bearerToken": st.text(min_size=1, max_size=40) | _json,
        "username": _json,
        "password": _json,
        "tlsClientConfig": _tls | _json,
        "awsAuthConfig": _json,
        "execProviderConfig": _json,
        "proxyUrl": st.sampled_from(["http://p:3128", "gopher://p"]) | _json,
        "disableCompression": _json,
    },
)
_config_text = _config.map(json.dumps) | st.text(max_size=30)
_fields = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=12),
        "server": st.sampled_from(["https://a.example", "http://b:8080/", "", "ftp://c"])
        | st.text(max_size=12),
        "config": _config_text,
        "namespaces": st.text(max_size=20),
    },
)


@st.composite
def secret_like(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly well-formed Secrets with arbitrary values inside, sometimes broken outright."""
    fields = draw(_fields)
    obj: dict[str, Any] = {}
    where = draw(st.sampled_from(["data", "stringData", "both"]))
    if where in ("data", "both"):
        obj["data"] = {k: b64(v) for k, v in fields.items()}
    if where in ("stringData", "both"):
        obj["stringData"] = dict(fields)
    obj["metadata"] = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "name": _json,
                "namespace": _json,
                "labels": st.dictionaries(st.text(max_size=8), st.text(max_size=8)) | _json,
            },
        )
    )
    breakage = draw(st.sampled_from([None, None, None, "data", "stringData", "field", "meta"]))
    if breakage in ("data", "stringData"):
        obj[breakage] = draw(_json)
    elif breakage == "field" and obj.get("data"):
        key = draw(st.sampled_from(sorted(obj["data"])))
        obj["data"][key] = draw(st.text(max_size=8))
    elif breakage == "meta":
        obj["metadata"] = draw(_json)
    return obj


@settings(max_examples=300, deadline=None)
@given(obj=secret_like())
def test_any_secret_like_mapping_gives_a_usable_endpoint_or_a_format_error(obj):
    assert isinstance(is_cluster_secret(obj), bool)
    try:
        ep = endpoint_from_secret(obj)
    except FormatError as exc:
        assert str(exc).startswith("secret ")
        return
    assert ep.server.startswith(("https://", "http://")) and ep.name
    creds = ep.credentials
    for value in (creds.token, creds.username, creds.password, ep.tls_server_name):
        assert value is None or isinstance(value, str)
    assert isinstance(ep.insecure, bool) and isinstance(ep.disable_compression, bool)
    assert ep.proxy_url is None or ep.proxy_url.startswith(("http://", "https://", "socks5://"))
    assert re.fullmatch(r"[0-9a-f]{12}", ep.fingerprint)  # usable by FleetWatcher.update
    token = creds.token
    if token and len(token) >= 8:
        without = repr(dataclasses.replace(ep, credentials=Credentials()))
        if token not in without:
            assert token not in repr(ep) and token not in str(ep)
