"""kubeconfig files -> ``ClusterEndpoint`` per context.

File references inside a kubeconfig (``certificate-authority``, ``client-certificate``,
``client-key``, ``tokenFile``) are returned as paths for the caller to read; this module does no
I/O. A user's ``exec`` credential plugin becomes an ``ExecConfig`` (validated as client-go's
clientcmd does: command and apiVersion required, ``interactiveMode`` required for ``v1``,
defaulting to ``IfAvailable`` for ``v1beta1``); a relative command path is left for the caller
to resolve against the kubeconfig's directory. ``auth-provider`` (removed from kubectl in 1.26)
is an error that says how to migrate.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from fleetwarden.core.clusters import (
    ClusterEndpoint,
    Credentials,
    DiscoverySource,
    ExecConfig,
    InteractiveMode,
)
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.exec_credentials import EXEC_EXTENSION, check_api_version

__all__ = ["ContextRef", "FileRefs", "parse_kubeconfig"]


@dataclass(frozen=True, slots=True)
class FileRefs:
    """Files a context points at, to be read by the caller and passed back in."""

    ca: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    token: str | None = None


@dataclass(frozen=True, slots=True)
class ContextRef:
    endpoint: ClusterEndpoint
    files: FileRefs = field(default_factory=FileRefs)


def parse_kubeconfig(path: str, text: str, *, contexts: Sequence[str] = ()) -> list[ContextRef]:
    """Every context (or those named in ``contexts``), in file order."""
    try:
        body = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FormatError(path, f"YAML error: {exc}") from None
    if not isinstance(body, Mapping):
        raise FormatError(path, "not a kubeconfig (expected a mapping)")
    clusters = _named(path, body, "clusters", "cluster")
    users = _named(path, body, "users", "user")
    ctxs = _named(path, body, "contexts", "context")
    wanted = list(contexts) or list(ctxs)
    out = []
    for name in wanted:
        ctx = ctxs.get(name)
        if ctx is None:
            known = ", ".join(ctxs) or "none"
            raise FormatError(path, f"no context {name!r} (contexts: {known})", field="contexts")
        cluster = clusters.get(str(ctx.get("cluster")))
        if cluster is None:
            raise FormatError(
                path,
                f"context {name!r} names unknown cluster {ctx.get('cluster')!r}",
                field=f"contexts.{name}.cluster",
            )
        user = users.get(str(ctx.get("user")), {})
        out.append(_context(path, name, cluster, user, ctx))
    return out


def _named(
    path: str, body: Mapping[str, Any], key: str, inner: str
) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for i, entry in enumerate(body.get(key) or ()):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise FormatError(path, "expected {name, " + inner + "}", field=f"{key}[{i}]")
        value = entry.get(inner) or {}
        if not isinstance(value, Mapping):
            raise FormatError(path, "expected a mapping", field=f"{key}[{i}].{inner}")
        out[entry["name"]] = value
    return out


def _b64(path: str, value: Any, field_: str) -> bytes | None:
    if value is None:
        return None
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise FormatError(path, "not valid base64", field=field_) from None


def _context(
    path: str,
    name: str,
    cluster: Mapping[str, Any],
    user: Mapping[str, Any],
    ctx: Mapping[str, Any],
) -> ContextRef:
    # fields are named after the entry to fix: the cluster's name, not the context's
    where = f"clusters.{ctx.get('cluster')}"
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise FormatError(path, "missing or not an http(s) URL", field=f"{where}.server")
    # a quoted "false" must not turn verification off: only a real boolean counts
    insecure = cluster.get("insecure-skip-tls-verify")
    if insecure is not None and not isinstance(insecure, bool):
        raise FormatError(path, "expected true or false", field=f"{where}.insecure-skip-tls-verify")
    server_name = cluster.get("tls-server-name")
    if server_name is not None and not isinstance(server_name, str):
        raise FormatError(path, "expected a string", field=f"{where}.tls-server-name")
    user_field = f"users.{ctx.get('user')}"
    if user.get("auth-provider") is not None:
        raise FormatError(
            path,
            _auth_provider_hint(name, user["auth-provider"]),
            field=f"{user_field}.auth-provider",
        )
    plugin = None
    if user.get("exec") is not None:
        plugin = _exec(path, name, user["exec"], cluster, f"{user_field}.exec", where)
    creds = Credentials(
        token=user.get("token") if isinstance(user.get("token"), str) else None,
        client_cert_pem=_b64(
            path,
            user.get("client-certificate-data"),
            f"users.{ctx.get('user')}.client-certificate-data",
        ),
        client_key_pem=_b64(
            path, user.get("client-key-data"), f"users.{ctx.get('user')}.client-key-data"
        ),
        username=user.get("username") if isinstance(user.get("username"), str) else None,
        password=user.get("password") if isinstance(user.get("password"), str) else None,
        exec=plugin,
    )
    endpoint = ClusterEndpoint(
        name=name,
        server=server.rstrip("/"),
        credentials=creds,
        ca_pem=_b64(
            path,
            cluster.get("certificate-authority-data"),
            f"{where}.certificate-authority-data",
        ),
        insecure=bool(insecure),
        tls_server_name=server_name or None,
        namespaces=(str(ctx["namespace"]),) if ctx.get("namespace") else (),
        source=DiscoverySource.KUBECONFIG,
    )
    files = FileRefs(
        ca=cluster.get("certificate-authority"),
        client_cert=user.get("client-certificate"),
        client_key=user.get("client-key"),
        token=user.get("tokenFile"),
    )
    return ContextRef(endpoint, files)


_MIGRATION = {
    "gcp": "install gke-gcloud-auth-plugin and run `gcloud container clusters get-credentials` "
    "again (it writes an exec plugin)",
    "azure": "run `kubelogin convert-kubeconfig -l azurecli` (Azure/kubelogin), which turns the "
    "context into an exec plugin",
    "oidc": "use an exec plugin such as `kubectl oidc-login` (int128/kubelogin)",
}


def _auth_provider_hint(context: str, provider: Any) -> str:
    kind = provider.get("name") if isinstance(provider, Mapping) else None
    what = _MIGRATION.get(str(kind), "convert it to an exec credential plugin")
    shown = f" {kind!r}" if isinstance(kind, str) else ""
    return (
        f"context {context!r} uses the auth-provider{shown} plugin, which kubectl removed in "
        f"1.26 and fleetwarden does not run: {what}"
    )


def _exec(
    path: str,
    context: str,
    spec: Any,
    cluster: Mapping[str, Any],
    field_: str,
    cluster_field: str,
) -> ExecConfig:
    """``users[].user.exec`` -> ExecConfig, refused field by field as clientcmd validates."""
    if not isinstance(spec, Mapping):
        raise FormatError(path, "expected a mapping", field=field_)
    command = spec.get("command")
    if not isinstance(command, str) or not command.strip():
        raise FormatError(path, "the plugin's command is missing", field=f"{field_}.command")
    api_version = check_api_version(spec.get("apiVersion"), path, f"{field_}.apiVersion")
    args = spec.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise FormatError(path, "expected a list of strings", field=f"{field_}.args")
    entries = spec.get("env") or []
    if not isinstance(entries, list):
        raise FormatError(path, "expected a list of {name, value}", field=f"{field_}.env")
    env: list[tuple[str, str]] = []
    for i, item in enumerate(entries):
        pair = (item.get("name"), item.get("value")) if isinstance(item, Mapping) else (None, None)
        if not isinstance(pair[0], str) or not pair[0] or not isinstance(pair[1], str):
            raise FormatError(path, "expected {name, value} strings", field=f"{field_}.env[{i}]")
        env.append((pair[0], pair[1]))
    hint = spec.get("installHint")
    if hint is not None and not isinstance(hint, str):
        raise FormatError(path, "expected a string", field=f"{field_}.installHint")
    provide = spec.get("provideClusterInfo", False)
    if not isinstance(provide, bool):
        raise FormatError(path, "expected true or false", field=f"{field_}.provideClusterInfo")
    mode = spec.get("interactiveMode")
    if mode is None or mode == "":
        if api_version.endswith("/v1"):
            raise FormatError(
                path,
                "required for client.authentication.k8s.io/v1 (Never, IfAvailable or Always)",
                field=f"{field_}.interactiveMode",
            )
        mode = InteractiveMode.IF_AVAILABLE.value  # clientcmd's default for v1beta1
    if mode not in {m.value for m in InteractiveMode}:
        raise FormatError(
            path, "expected Never, IfAvailable or Always", field=f"{field_}.interactiveMode"
        )
    return ExecConfig(
        command=command,
        api_version=api_version,
        args=tuple(args),
        env=tuple(env),
        install_hint=_clean_hint(hint) if hint else None,
        provide_cluster_info=provide,
        interactive_mode=InteractiveMode(mode),
        cluster_config=_exec_extension(path, cluster, cluster_field),
        origin=f"context {context!r}",
    )


def _exec_extension(path: str, cluster: Mapping[str, Any], where: str) -> str | None:
    """The cluster's ``extensions[client.authentication.k8s.io/exec].extension``, as JSON."""
    extensions = cluster.get("extensions") or []
    if not isinstance(extensions, list):
        raise FormatError(path, "expected a list of {name, extension}", field=f"{where}.extensions")
    for item in extensions:
        if isinstance(item, Mapping) and item.get("name") == EXEC_EXTENSION:
            try:
                return json.dumps(item.get("extension"), sort_keys=True)
            except (TypeError, ValueError):
                raise FormatError(
                    path, "not representable as JSON", field=f"{where}.extensions.{EXEC_EXTENSION}"
                ) from None
    return None


def _clean_hint(text: str) -> str:
    """An install hint without control characters (client-go strips ANSI escapes too)."""
    return "".join(c if c.isprintable() or c in "\n\t" else " " for c in text).strip()
