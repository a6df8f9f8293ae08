"""client-go credential plugins: the ``ExecCredential`` a plugin prints, and the one it is given.

Follows Kubernetes' "client-go credential plugins" and the ``client.authentication.k8s.io``
``v1`` / ``v1beta1`` API (client-go ``plugin/pkg/client/auth/exec``):

* what a plugin prints on stdout (``parse_exec_credential``) must be one JSON object with
  ``apiVersion`` equal to the configured one and ``kind: ExecCredential``; ``status`` must hold
  a ``token`` and/or both ``clientCertificateData`` and ``clientKeyData`` (PEM);
  ``expirationTimestamp``, when given, is RFC 3339. Anything else is a ``FormatError`` naming
  the field; the text of stdout is never quoted in it (it may hold a token).
* what a plugin is given (``exec_info``), in ``KUBERNETES_EXEC_INFO``: an ``ExecCredential``
  with ``spec.interactive`` and, when ``provideClusterInfo``, ``spec.cluster`` (server, CA,
  TLS server name, insecure flag, and ``config`` from the cluster's
  ``extensions["client.authentication.k8s.io/exec"]``).

Parsing only: running the plugin is ``adapters/kube/exec_credentials.py``'s job.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from fleetwarden.core.clusters import (
    EXEC_API_VERSIONS,
    ClusterEndpoint,
    ExecConfig,
    PluginCredential,
)
from fleetwarden.formats.errors import FormatError

__all__ = [
    "EXEC_EXTENSION",
    "check_api_version",
    "exec_info",
    "parse_exec_credential",
    "parse_rfc3339",
]

EXEC_EXTENSION = "client.authentication.k8s.io/exec"  # the reserved cluster extension name

# RFC 3339 date-time (Go's time.RFC3339 as metav1.Time parses it): a "T" (or "t"), seconds,
# optional fraction, and "Z" or a numeric offset -- never a bare local time
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})",
    re.ASCII,
)


def check_api_version(api_version: object, where: str, field: str) -> str:
    """The configured ``apiVersion`` of a plugin, or a FormatError that says what to use."""
    if api_version in EXEC_API_VERSIONS:
        return str(api_version)
    if api_version == "client.authentication.k8s.io/v1alpha1":
        raise FormatError(
            where,
            "client.authentication.k8s.io/v1alpha1 was removed in Kubernetes 1.24; use v1 or "
            "v1beta1 (regenerate the kubeconfig with a current aws / gcloud / az CLI)",
            field=field,
        )
    raise FormatError(
        where,
        f"expected one of {', '.join(EXEC_API_VERSIONS)}, got {_shown(api_version)}",
        field=field,
    )


def parse_rfc3339(value: str) -> datetime | None:
    """An aware UTC datetime, or None when ``value`` is not an RFC 3339 date-time."""
    m = _RFC3339.fullmatch(value)
    if m is None:
        return None
    frac, zone = m.group(7) or "", m.group(8)
    # Python's fromisoformat takes at most microseconds: keep 6 digits of a longer fraction
    text = f"{value[:19].replace('t', 'T')}{frac[:7]}{'+00:00' if zone in 'Zz' else zone}"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:  # 2024-02-30, hour 25, offset +99:00 ...
        return None
    return parsed.astimezone(UTC)


def parse_exec_credential(
    stdout: str | bytes, *, api_version: str, where: str = "exec plugin output"
) -> PluginCredential:
    """What a plugin printed -> its credential. Raises only ``FormatError`` (naming the field),
    never with the output's text in the message."""
    if isinstance(stdout, bytes):
        try:
            stdout = stdout.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(where, "not UTF-8 text") from None
    if not stdout.strip():
        raise FormatError(where, "the plugin printed nothing on stdout")
    try:
        body = json.loads(stdout)
    except (ValueError, RecursionError) as exc:
        # the decoder's message names a position, never the text around it
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise FormatError(where, f"not a JSON ExecCredential: {msg}") from None
    if not isinstance(body, Mapping):
        raise FormatError(where, f"expected a JSON object, got {_kind(body)}")
    got = body.get("apiVersion")
    if got != api_version:
        raise FormatError(
            where,
            f"the plugin is configured for {api_version} but returned {_shown(got)}",
            field="apiVersion",
        )
    if body.get("kind") != "ExecCredential":
        raise FormatError(
            where, f"expected ExecCredential, got {_shown(body.get('kind'))}", field="kind"
        )
    status = body.get("status")
    if status is None:
        raise FormatError(where, "missing: the plugin returned no credential", field="status")
    if not isinstance(status, Mapping):
        raise FormatError(where, f"expected an object, got {_kind(status)}", field="status")
    token = _string(status, "token", where)
    cert = _string(status, "clientCertificateData", where)
    key = _string(status, "clientKeyData", where)
    if not token and not cert and not key:
        raise FormatError(where, "neither a token nor a client certificate and key", field="status")
    if bool(cert) != bool(key):
        missing = "clientKeyData" if cert else "clientCertificateData"
        raise FormatError(
            where,
            "a client certificate needs both its certificate and its key",
            field=f"status.{missing}",
        )
    for name, pem in (("clientCertificateData", cert), ("clientKeyData", key)):
        if pem and "-----BEGIN " not in pem:
            raise FormatError(where, "expected PEM data", field=f"status.{name}")
    expires = status.get("expirationTimestamp")
    expires_at = None
    if expires is not None:
        if not isinstance(expires, str):
            raise FormatError(
                where,
                f"expected an RFC 3339 timestamp, got {_kind(expires)}",
                field="status.expirationTimestamp",
            )
        expires_at = parse_rfc3339(expires)
        if expires_at is None:
            raise FormatError(
                where,
                f"not an RFC 3339 timestamp: {_shown(expires)}",
                field="status.expirationTimestamp",
            )
    return PluginCredential(
        token=token or None,
        client_cert_pem=cert.encode() if cert else None,
        client_key_pem=key.encode() if key else None,
        expires_at=expires_at,
    )


def exec_info(config: ExecConfig, endpoint: ClusterEndpoint, *, interactive: bool) -> str:
    """The ``KUBERNETES_EXEC_INFO`` value for one run of ``config``'s plugin."""
    spec: dict[str, Any] = {"interactive": interactive}
    if config.provide_cluster_info:
        cluster: dict[str, Any] = {"server": endpoint.server}
        if endpoint.tls_server_name:
            cluster["tls-server-name"] = endpoint.tls_server_name
        if endpoint.insecure:
            cluster["insecure-skip-tls-verify"] = True
        if endpoint.ca_pem:
            cluster["certificate-authority-data"] = base64.b64encode(endpoint.ca_pem).decode()
        # as client-go's rest.ConfigToExecCluster passes them on (rest/exec.go)
        if endpoint.proxy_url:
            cluster["proxy-url"] = endpoint.proxy_url
        if endpoint.disable_compression:
            cluster["disable-compression"] = True
        if config.cluster_config is not None:
            cluster["config"] = json.loads(config.cluster_config)
        spec["cluster"] = cluster
    doc = {"apiVersion": config.api_version, "kind": "ExecCredential", "spec": spec}
    return json.dumps(doc, separators=(",", ":"))


def _string(status: Mapping[str, Any], key: str, where: str) -> str:
    value = status.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FormatError(where, f"expected a string, got {_kind(value)}", field=f"status.{key}")
    return value


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def _shown(value: object) -> str:
    """A short quotation of a value that is not secret (a version, a kind, a timestamp)."""
    if isinstance(value, str):
        return repr(value[:60] + ("..." if len(value) > 60 else ""))
    return "nothing" if value is None else _kind(value)
