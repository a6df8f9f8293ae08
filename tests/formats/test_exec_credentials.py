"""What an exec credential plugin prints (``ExecCredential``) and what it is given
(``KUBERNETES_EXEC_INFO``), per the client.authentication.k8s.io v1 / v1beta1 API.

The outputs below are shaped like the real plugins' (``aws eks get-token``: v1beta1 with an
expiration; gke-gcloud-auth-plugin: v1beta1 token; kubelogin: v1). Every refusal is a
``FormatError`` naming the field, never quoting the token.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.clusters import ClusterEndpoint, ExecConfig, PluginCredential
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.exec_credentials import (
    exec_info,
    parse_exec_credential,
    parse_rfc3339,
)

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
TOKEN = (
    "k8s-aws-v1.aHR0cHM6Ly9zdHMuZXUtd2VzdC0xLmFtYXpvbmF3cy5jb20vP0FjdGlvbj1HZXRDYWxsZXJJZGVudGl0eQ"
)
CERT = "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIkey\n-----END EC PRIVATE KEY-----\n"


def output(api_version: str = V1BETA1, **status: object) -> str:
    doc = {"kind": "ExecCredential", "apiVersion": api_version, "spec": {}, "status": status}
    return json.dumps(doc)


def test_aws_eks_get_token_output_gives_the_token_and_its_expiry():
    text = output(token=TOKEN, expirationTimestamp="2026-11-30T22:15:04Z")
    cred = parse_exec_credential(text, api_version=V1BETA1)
    assert cred.token == TOKEN and cred.client_cert_pem is None
    assert cred.expires_at == datetime(2026, 11, 30, 22, 15, 4, tzinfo=UTC)
    assert TOKEN not in repr(cred) and TOKEN not in str(cred)


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
def test_both_api_versions_read_a_token_without_expiry(api_version):
    cred = parse_exec_credential(output(api_version, token="t0k"), api_version=api_version)
    assert (cred.token, cred.expires_at) == ("t0k", None)


def test_a_client_certificate_and_key_are_read_as_pem_bytes():
    text = output(V1, clientCertificateData=CERT, clientKeyData=KEY)
    cred = parse_exec_credential(text.encode(), api_version=V1)
    assert (cred.client_cert_pem, cred.client_key_pem, cred.token) == (
        CERT.encode(),
        KEY.encode(),
        None,
    )
    assert "MHcCAQEEIkey" not in repr(cred)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-30T22:15:04Z", datetime(2026, 11, 30, 22, 15, 4, tzinfo=UTC)),
        ("2026-11-30t22:15:04z", datetime(2026, 11, 30, 22, 15, 4, tzinfo=UTC)),
        ("2026-11-30T23:15:04+01:00", datetime(2026, 11, 30, 22, 15, 4, tzinfo=UTC)),
        ("2026-11-30T22:15:04.123456789Z", datetime(2026, 11, 30, 22, 15, 4, 123456, tzinfo=UTC)),
        ("2026-11-30T22:15:04.5-00:30", datetime(2026, 11, 30, 22, 45, 4, 500000, tzinfo=UTC)),
    ],
)
def test_rfc3339_timestamps_as_go_parses_them(value, expected):
    assert parse_rfc3339(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-30 22:15:04Z",  # a space is not RFC 3339's "T"
        "2026-11-30T22:15:04",  # no offset: a local time is ambiguous
        "2026-11-30T22:15Z",  # seconds are required
        "2026-02-30T00:00:00Z",
        "2026-11-30T25:00:00Z",
        "1764540904",
        "tomorrow",
    ],
)
def test_not_rfc3339(value):
    assert parse_rfc3339(value) is None
    with pytest.raises(FormatError) as err:
        parse_exec_credential(output(token=TOKEN, expirationTimestamp=value), api_version=V1BETA1)
    assert err.value.field == "status.expirationTimestamp"
    assert "RFC 3339" in err.value.reason


@pytest.mark.parametrize(
    ("text", "field", "needle"),
    [
        ("", None, "printed nothing"),
        ("   \n", None, "printed nothing"),
        (f'{{"token": "{TOKEN}"', None, "not a JSON ExecCredential"),
        (f"Bearer {TOKEN}", None, "not a JSON ExecCredential"),
        ("[1, 2]", None, "expected a JSON object, got a list"),
        (output(V1, token=TOKEN), "apiVersion", f"configured for {V1BETA1} but returned '{V1}'"),
        (
            json.dumps({"kind": "ExecCredential", "status": {"token": TOKEN}}),
            "apiVersion",
            "returned nothing",
        ),
        (
            output("client.authentication.k8s.io/v1alpha1", token=TOKEN),
            "apiVersion",
            "v1alpha1",
        ),
        (
            json.dumps({"apiVersion": V1BETA1, "kind": "Secret", "status": {"token": TOKEN}}),
            "kind",
            "expected ExecCredential, got 'Secret'",
        ),
        (
            json.dumps({"apiVersion": V1BETA1, "kind": "ExecCredential", "spec": {}}),
            "status",
            "no credential",
        ),
        (
            json.dumps({"apiVersion": V1BETA1, "kind": "ExecCredential", "status": TOKEN}),
            "status",
            "expected an object, got a string",
        ),
        (output(), "status", "neither a token nor a client certificate"),
        (output(token=""), "status", "neither a token nor a client certificate"),
        (output(token=12345), "status.token", "expected a string, got a number"),
        (output(clientCertificateData=CERT), "status.clientKeyData", "both"),
        (output(clientKeyData=KEY), "status.clientCertificateData", "both"),
        (
            output(clientCertificateData="MIIB", clientKeyData=KEY),
            "status.clientCertificateData",
            "PEM",
        ),
        (
            output(token=TOKEN, expirationTimestamp=1764540904),
            "status.expirationTimestamp",
            "expected an RFC 3339 timestamp, got a number",
        ),
    ],
)
def test_malformed_plugin_output_is_refused_precisely(text, field, needle):
    with pytest.raises(FormatError) as err:
        parse_exec_credential(text, api_version=V1BETA1, where="stdout")
    assert err.value.field == field
    assert needle in err.value.reason, err.value.reason
    assert err.value.path == "stdout"
    assert TOKEN not in str(err.value)


def test_bytes_that_are_not_utf8_are_refused():
    with pytest.raises(FormatError, match="not UTF-8"):
        parse_exec_credential(b"\xff\xfe{}", api_version=V1)


ENDPOINT = ClusterEndpoint(
    "prod",
    "https://prod.example.com:6443",
    ca_pem=b"-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n",
    tls_server_name="kubernetes.default",
)


def test_exec_info_without_cluster_info_says_only_whether_it_is_interactive():
    plugin = ExecConfig("aws", V1BETA1)
    doc = json.loads(exec_info(plugin, ENDPOINT, interactive=False))
    assert doc == {"apiVersion": V1BETA1, "kind": "ExecCredential", "spec": {"interactive": False}}


def test_exec_info_with_cluster_info_carries_server_ca_and_the_exec_extension():
    plugin = ExecConfig(
        "kubelogin",
        V1,
        provide_cluster_info=True,
        cluster_config=json.dumps({"audience": "6dae42f8"}),
    )
    insecure = ClusterEndpoint("dev", "https://dev:6443", insecure=True)
    doc = json.loads(exec_info(plugin, ENDPOINT, interactive=True))
    assert doc["apiVersion"] == V1 and doc["spec"]["interactive"] is True
    assert doc["spec"]["cluster"] == {
        "server": "https://prod.example.com:6443",
        "tls-server-name": "kubernetes.default",
        "certificate-authority-data": base64.b64encode(ENDPOINT.ca_pem).decode(),
        "config": {"audience": "6dae42f8"},
    }
    dev = json.loads(exec_info(plugin, insecure, interactive=False))["spec"]["cluster"]
    assert dev["insecure-skip-tls-verify"] is True and "certificate-authority-data" not in dev


def test_exec_info_passes_the_proxy_and_compression_settings_as_client_go_does():
    """rest.ConfigToExecCluster (client-go rest/exec.go) gives the plugin proxy-url and
    disable-compression with the rest of the cluster."""
    plugin = ExecConfig("kubelogin", V1, provide_cluster_info=True)
    proxied = ClusterEndpoint(
        "dev", "https://dev:6443", proxy_url="http://proxy.corp:3128", disable_compression=True
    )
    cluster = json.loads(exec_info(plugin, proxied, interactive=False))["spec"]["cluster"]
    assert cluster["proxy-url"] == "http://proxy.corp:3128"
    assert cluster["disable-compression"] is True
    plain = json.loads(exec_info(plugin, ENDPOINT, interactive=False))["spec"]["cluster"]
    assert "proxy-url" not in plain and "disable-compression" not in plain


# --- hypothesis: anything a plugin may print ----------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
_stamp = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
).map(lambda d: d.isoformat().replace("+00:00", "Z"))
_status = st.fixed_dictionaries(
    {},
    optional={
        "token": st.text(max_size=20) | _json,
        "clientCertificateData": st.just(CERT) | _json,
        "clientKeyData": st.just(KEY) | _json,
        "expirationTimestamp": _stamp | st.text(max_size=25) | _json,
    },
)
_doc = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.sampled_from([V1, V1BETA1]) | _json,
        "kind": st.just("ExecCredential") | _json,
        "spec": _json,
        "status": _status | _json,
    },
)
_stdout = _doc.map(json.dumps) | st.text(max_size=40) | st.binary(max_size=40)


@settings(max_examples=500, deadline=None)
@given(stdout=_stdout, api_version=st.sampled_from([V1, V1BETA1]))
def test_any_plugin_output_gives_a_credential_or_a_format_error(stdout, api_version):
    """The parser's only failure is FormatError, and what it accepts is usable."""
    try:
        cred = parse_exec_credential(stdout, api_version=api_version)
    except FormatError as exc:
        assert exc.path == "exec plugin output"
        return
    assert isinstance(cred, PluginCredential)
    assert cred.token or (cred.client_cert_pem and cred.client_key_pem)
    assert cred.expires_at is None or cred.expires_at.tzinfo is not None


@settings(max_examples=200, deadline=None)
@given(
    moment=st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9998, 1, 1)),
    offset=st.integers(-23 * 60, 23 * 60),
)
def test_rfc3339_round_trip(moment, offset):
    zone = timezone(timedelta(minutes=offset))
    aware = moment.replace(tzinfo=zone)
    assert parse_rfc3339(aware.isoformat()) == aware.astimezone(UTC)
