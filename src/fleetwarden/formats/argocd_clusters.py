"""Argo CD cluster Secrets -> ``ClusterEndpoint``.

A cluster Secret carries the label ``argocd.argoproj.io/secret-type: cluster`` and, base64 in
``data`` (or plain in ``stringData``): ``name``, ``server``, ``config`` (JSON: ``bearerToken``,
``username``/``password``, ``tlsClientConfig`` with ``insecure``, ``caData``, ``certData``,
``keyData``, ``serverName``) and ``namespaces`` (comma separated). Cloud credential plugins in
``config`` (``awsAuthConfig``, ``execProviderConfig``) are not run: such a cluster is rejected
with a reason.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from fleetwarden.core.clusters import ClusterEndpoint, Credentials, DiscoverySource
from fleetwarden.core.describing import describe_type
from fleetwarden.formats.errors import FormatError

__all__ = ["SECRET_TYPE_LABEL", "endpoint_from_secret", "is_cluster_secret"]

SECRET_TYPE_LABEL = "argocd.argoproj.io/secret-type"


def is_cluster_secret(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return isinstance(labels, Mapping) and labels.get(SECRET_TYPE_LABEL) == "cluster"


def _fields(obj: Mapping[str, Any], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    data = obj.get("data") or {}
    if not isinstance(data, Mapping):
        raise FormatError(where, "expected a mapping", field="data")
    for key, value in data.items():
        try:
            out[str(key)] = base64.b64decode(str(value), validate=True).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise FormatError(where, "not valid base64 UTF-8", field=f"data.{key}") from None
    string_data = obj.get("stringData") or {}
    if isinstance(string_data, Mapping):
        out.update({str(k): str(v) for k, v in string_data.items()})
    return out


def _text(where: str, value: Any, field_: str) -> str | None:
    """An optional string setting; any other JSON type is refused, not coerced."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise FormatError(where, f"expected a string, got {describe_type(value)}", field=field_)
    return value


def endpoint_from_secret(obj: Mapping[str, Any]) -> ClusterEndpoint:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    secret = f"secret {meta.get('namespace', '?')}/{meta.get('name', '?')}"
    fields = _fields(obj, secret)
    server = fields.get("server", "").strip()
    if not server.startswith(("https://", "http://")):
        raise FormatError(secret, "missing or not an http(s) URL", field="data.server")
    name = fields.get("name", "").strip() or server.rstrip("/")
    try:
        config = json.loads(fields.get("config") or "{}")
    except json.JSONDecodeError as exc:
        raise FormatError(secret, f"not JSON: {exc.msg}", field="data.config") from None
    if not isinstance(config, Mapping):
        raise FormatError(secret, "expected a JSON object", field="data.config")
    for plugin in ("awsAuthConfig", "execProviderConfig"):
        if config.get(plugin):
            raise FormatError(
                secret,
                f"uses {plugin}, which fleetwarden does not run; give the cluster a bearerToken",
                field=f"data.config.{plugin}",
            )
    tls = config.get("tlsClientConfig") or {}
    if not isinstance(tls, Mapping):
        raise FormatError(secret, "expected an object", field="data.config.tlsClientConfig")

    def b64(key: str) -> bytes | None:
        value = tls.get(key)
        if not value:
            return None
        try:
            return base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            raise FormatError(
                secret, "not valid base64", field=f"data.config.tlsClientConfig.{key}"
            ) from None

    # JSON "false" (a string) must not turn verification off: only a real boolean counts
    insecure = tls.get("insecure")
    if insecure is not None and not isinstance(insecure, bool):
        raise FormatError(
            secret, "expected true or false", field="data.config.tlsClientConfig.insecure"
        )
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    namespaces = tuple(n.strip() for n in fields.get("namespaces", "").split(",") if n.strip())
    return ClusterEndpoint(
        name=name,
        server=server.rstrip("/"),
        credentials=Credentials(
            token=_text(secret, config.get("bearerToken"), "data.config.bearerToken"),
            client_cert_pem=b64("certData"),
            client_key_pem=b64("keyData"),
            username=_text(secret, config.get("username"), "data.config.username"),
            password=_text(secret, config.get("password"), "data.config.password"),
        ),
        ca_pem=b64("caData"),
        insecure=bool(insecure),
        tls_server_name=_text(
            secret, tls.get("serverName"), "data.config.tlsClientConfig.serverName"
        ),
        namespaces=namespaces,
        source=DiscoverySource.ARGOCD_SECRET,
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
    )
