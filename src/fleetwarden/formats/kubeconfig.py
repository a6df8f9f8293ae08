"""kubeconfig files -> ``ClusterEndpoint`` per context.

File references inside a kubeconfig (``certificate-authority``, ``client-certificate``,
``client-key``, ``tokenFile``) are returned as paths for the caller to read; this module does no
I/O. ``exec`` and ``auth-provider`` plugins are not run: such a context is an error that says so.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from fleetwarden.core.clusters import ClusterEndpoint, Credentials, DiscoverySource
from fleetwarden.formats.errors import FormatError

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
    if "exec" in user or "auth-provider" in user:
        plugin = "exec" if "exec" in user else "auth-provider"
        raise FormatError(
            path,
            f"context {name!r} uses an {plugin} credential plugin, which "
            "fleetwarden does not run; use a token or client certificate "
            "(e.g. a ServiceAccount token)",
            field=f"users.{ctx.get('user')}",
        )
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
