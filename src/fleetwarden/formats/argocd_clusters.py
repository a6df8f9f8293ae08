"""Argo CD cluster Secrets -> ``ClusterEndpoint``.

A cluster Secret carries the label ``argocd.argoproj.io/secret-type: cluster`` and, base64 in
``data`` (or plain in ``stringData``): ``name``, ``server``, ``config`` (JSON: ``bearerToken``,
``username``/``password``, ``tlsClientConfig`` with ``insecure``, ``caData``, ``certData``,
``keyData``, ``serverName``, ``proxyUrl``, ``disableCompression``) and ``namespaces`` (comma
separated). ``proxyUrl`` and ``disableCompression`` are honoured as Argo CD's
``Cluster.RawRestConfig`` sets them on client-go's rest config (``Proxy``,
``DisableCompression``).

Credential plugins in ``config`` become an ``ExecConfig``, as Argo CD's
``Cluster.RawRestConfig`` (pkg/apis/application/v1alpha1/types.go) builds them:

* ``awsAuthConfig`` (``clusterName``, ``roleARN``, ``profile``): ``argocd-k8s-auth aws
  --cluster-name N [--role-arn R] [--profile P]``, ``client.authentication.k8s.io/v1beta1``,
  never interactive. Where Argo CD's own image ships ``argocd-k8s-auth``, fleetwarden usually
  runs elsewhere: when that command is not on PATH, ``aws eks get-token --cluster-name N
  [--role-arn R] [--profile P]`` (the AWS CLI, which prints the same v1beta1 ExecCredential)
  runs instead.
* ``execProviderConfig`` (``command``, ``args``, ``env`` -- a map --, ``apiVersion``,
  ``installHint``): run as given, never interactive; ``env`` is applied in name order (Go's map
  order is random).

``tlsClientConfig.insecure: true`` beside ``caData`` is refused, as client-go's ``TLSConfigFor``
refuses it for Argo CD ("specifying a root certificates file with the insecure flag is not
allowed"): insecure never silently wins over the CA.

As in Argo CD, a plugin replaces ``bearerToken`` and basic auth (they are then ignored),
``awsAuthConfig`` wins over ``execProviderConfig``, and a client certificate in
``tlsClientConfig`` still wins over both (client-go's rule).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from fleetwarden.core.clusters import (
    ClusterEndpoint,
    Credentials,
    DiscoverySource,
    ExecConfig,
    InteractiveMode,
)
from fleetwarden.core.describing import describe_type
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.exec_credentials import check_api_version
from fleetwarden.formats.kubeconfig import check_proxy_url

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
    plugin = _plugin(secret, config)
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
    ca = b64("caData")
    if insecure and ca:
        # Argo CD hands both to client-go (Cluster.RawRestConfig), whose TLSConfigFor refuses
        # the pair (transport/transport.go): Argo CD cannot connect, nor does fleetwarden
        raise FormatError(
            secret,
            "insecure: true with caData: client-go refuses the pair (specifying a root "
            "certificates file with the insecure flag is not allowed), so Argo CD cannot "
            "connect either; remove caData to skip verification, or insecure to verify",
            field="data.config.tlsClientConfig.insecure",
        )
    token = _text(secret, config.get("bearerToken"), "data.config.bearerToken")
    username = _text(secret, config.get("username"), "data.config.username")
    password = _text(secret, config.get("password"), "data.config.password")
    proxy = check_proxy_url(secret, config.get("proxyUrl"), "data.config.proxyUrl")
    no_compression = config.get("disableCompression", False)
    if not isinstance(no_compression, bool):
        raise FormatError(secret, "expected true or false", field="data.config.disableCompression")
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    namespaces = tuple(n.strip() for n in fields.get("namespaces", "").split(",") if n.strip())
    return ClusterEndpoint(
        name=name,
        server=server.rstrip("/"),
        credentials=Credentials(
            token=token if plugin is None else None,
            client_cert_pem=b64("certData"),
            client_key_pem=b64("keyData"),
            username=username if plugin is None else None,
            password=password if plugin is None else None,
            exec=plugin,
        ),
        ca_pem=ca,
        insecure=bool(insecure),
        tls_server_name=_text(
            secret, tls.get("serverName"), "data.config.tlsClientConfig.serverName"
        ),
        namespaces=namespaces,
        source=DiscoverySource.ARGOCD_SECRET,
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        proxy_url=proxy,
        disable_compression=no_compression,
    )


_V1BETA1 = "client.authentication.k8s.io/v1beta1"


def _plugin(secret: str, config: Mapping[str, Any]) -> ExecConfig | None:
    """``awsAuthConfig`` or ``execProviderConfig`` -> ExecConfig (see the module docstring)."""
    aws = config.get("awsAuthConfig")
    if aws:
        where = "data.config.awsAuthConfig"
        if not isinstance(aws, Mapping):
            raise FormatError(secret, "expected an object", field=where)
        cluster = _text(secret, aws.get("clusterName"), f"{where}.clusterName")
        if cluster is None:
            raise FormatError(
                secret, "the EKS cluster name is missing", field=f"{where}.clusterName"
            )
        options = ["--cluster-name", cluster]
        role = _text(secret, aws.get("roleARN"), f"{where}.roleARN")
        if role:
            options += ["--role-arn", role]
        profile = _text(secret, aws.get("profile"), f"{where}.profile")
        if profile:
            options += ["--profile", profile]
        return ExecConfig(
            command="argocd-k8s-auth",
            api_version=_V1BETA1,
            args=("aws", *options),
            interactive_mode=InteractiveMode.NEVER,
            fallback=("aws", ("eks", "get-token", *options)),
            install_hint="install argocd-k8s-auth (from the Argo CD image) or the AWS CLI",
            origin=f"{secret} (awsAuthConfig)",
        )
    spec = config.get("execProviderConfig")
    if not spec:
        return None
    where = "data.config.execProviderConfig"
    if not isinstance(spec, Mapping):
        raise FormatError(secret, "expected an object", field=where)
    command = _text(secret, spec.get("command"), f"{where}.command")
    if command is None:
        raise FormatError(secret, "the plugin's command is missing", field=f"{where}.command")
    api_version = check_api_version(spec.get("apiVersion"), secret, f"{where}.apiVersion")
    args = spec.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise FormatError(secret, "expected a list of strings", field=f"{where}.args")
    env = spec.get("env") or {}
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in env.items()
    ):
        raise FormatError(secret, "expected a map of names to strings", field=f"{where}.env")
    return ExecConfig(
        command=command,
        api_version=api_version,
        args=tuple(args),
        env=tuple(sorted(env.items())),
        install_hint=_text(secret, spec.get("installHint"), f"{where}.installHint"),
        interactive_mode=InteractiveMode.NEVER,
        origin=f"{secret} (execProviderConfig)",
    )
