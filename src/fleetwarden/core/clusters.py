"""Clusters as fleetwarden connects to them, with credentials that never print themselves.

An endpoint's credentials are static (a token, a client certificate, basic auth) or an
``ExecConfig``: a client-go credential plugin (``aws eks get-token``,
``gke-gcloud-auth-plugin``, ``kubelogin``...) that adapters run to obtain a
``PluginCredential``. Nothing here runs anything.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

__all__ = [
    "EXEC_API_VERSIONS",
    "ClusterEndpoint",
    "Credentials",
    "DiscoverySource",
    "ExecConfig",
    "Impersonation",
    "InteractiveMode",
    "PluginCredential",
]

# the ExecCredential versions client-go still speaks (v1alpha1 was removed in Kubernetes 1.24)
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


class DiscoverySource(StrEnum):
    KUBECONFIG = "kubeconfig"
    ARGOCD_SECRET = "argocd-secret"
    IN_CLUSTER = "in-cluster"


class InteractiveMode(StrEnum):
    """A plugin's relation to standard input (kubeconfig ``users[].user.exec.interactiveMode``)."""

    NEVER = "Never"
    IF_AVAILABLE = "IfAvailable"
    ALWAYS = "Always"


@dataclass(frozen=True, slots=True)
class ExecConfig:
    """A client-go exec credential plugin, as a kubeconfig or an Argo CD cluster Secret names it.

    ``command`` is run with ``args``; ``env`` is added to the process environment (values may
    be secret: never shown). ``cluster_config`` is the JSON of the cluster's
    ``extensions["client.authentication.k8s.io/exec"]``, passed to the plugin when
    ``provide_cluster_info``. ``fallback`` is another command (and args) to run when
    ``command`` is not on PATH (Argo CD's ``awsAuthConfig``: ``argocd-k8s-auth``, else
    ``aws eks get-token``). ``origin`` says where the plugin was configured, for messages.
    """

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    install_hint: str | None = None
    provide_cluster_info: bool = False
    interactive_mode: InteractiveMode = InteractiveMode.IF_AVAILABLE
    cluster_config: str | None = None
    fallback: tuple[str, tuple[str, ...]] | None = None
    origin: str = ""

    @property
    def fingerprint(self) -> str:
        """Changes when anything that decides what the plugin returns changes."""
        h = hashlib.sha256()
        for part in (
            self.command,
            self.api_version,
            *self.args,
            *(f"{k}={v}" for k, v in self.env),
            str(self.provide_cluster_info),
            self.interactive_mode.value,
            self.cluster_config or "",
            repr(self.fallback),
        ):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Impersonation:
    """Whom the client acts as (kubeconfig ``as``, ``as-uid``, ``as-groups``,
    ``as-user-extra``): sent as ``Impersonate-*`` headers on every request, as client-go does."""

    user: str
    uid: str | None = None
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for part in (self.user, self.uid or "", *self.groups, repr(self.extra)):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class PluginCredential:
    """What an exec plugin returned (``ExecCredential.status``). ``repr`` shows no secret.

    ``expires_at`` (aware, UTC) is None when the plugin gave no ``expirationTimestamp``: then
    the credential is used until the API server refuses it (401)."""

    token: str | None = field(default=None, repr=False)
    client_cert_pem: bytes | None = field(default=None, repr=False)
    client_key_pem: bytes | None = field(default=None, repr=False)
    expires_at: datetime | None = None

    def __repr__(self) -> str:
        kinds = [k for k, v in (("token", self.token), ("client-cert", self.client_cert_pem)) if v]
        until = f", expires {self.expires_at.isoformat()}" if self.expires_at else ""
        return f"PluginCredential({', '.join(kinds)}{until})"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class Credentials:
    """Secrets to reach an API server. ``repr`` and ``str`` never show them."""

    token: str | None = field(default=None, repr=False)
    client_cert_pem: bytes | None = field(default=None, repr=False)
    client_key_pem: bytes | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    # where ``token`` was read from: re-read as it rotates (projected ServiceAccount tokens
    # expire within hours; client-go reloads them the same way)
    token_file: str | None = None
    # a credential plugin, used when no static credential is set (as client-go does)
    exec: ExecConfig | None = None
    # whom to act as, whatever authenticates
    impersonate: Impersonation | None = None

    @property
    def uses_exec(self) -> bool:
        """True when the plugin, not a static credential, authenticates (client-go's rule:
        a token, basic auth (a username) or a client certificate wins over ``exec``)."""
        static = self.token or self.username or (self.client_cert_pem and self.client_key_pem)
        return self.exec is not None and not static

    def __repr__(self) -> str:
        kinds = [
            k
            for k, v in (
                ("token", self.token),
                ("client-cert", self.client_cert_pem),
                ("basic", self.username),
                ("exec", self.exec),
                ("impersonating", self.impersonate),
            )
            if v
        ]
        return f"Credentials({', '.join(kinds) or 'anonymous'})"

    __str__ = __repr__

    @property
    def fingerprint(self) -> str:
        """A short digest that changes when any secret changes (safe to log)."""
        h = hashlib.sha256()
        for part in (
            self.token,
            self.client_cert_pem,
            self.client_key_pem,
            self.username,
            self.password,
            self.token_file,
        ):
            h.update(part.encode() if isinstance(part, str) else (part or b""))
            h.update(b"\0")
        h.update(self.exec.fingerprint.encode() if self.exec else b"")
        h.update(self.impersonate.fingerprint.encode() if self.impersonate else b"")
        return h.hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class ClusterEndpoint:
    name: str
    server: str
    credentials: Credentials = field(default_factory=Credentials)
    ca_pem: bytes | None = field(default=None, repr=False)
    insecure: bool = False
    # the name the server's certificate is checked against (and sent as SNI) instead of the
    # server URL's host (kubeconfig ``tls-server-name``)
    tls_server_name: str | None = None
    namespaces: tuple[str, ...] = ()
    source: DiscoverySource = DiscoverySource.KUBECONFIG
    labels: tuple[tuple[str, str], ...] = ()
    # every request goes through this proxy (http, https or socks5; kubeconfig ``proxy-url``);
    # it may carry a password: never shown
    proxy_url: str | None = field(default=None, repr=False)
    # ask for uncompressed responses (kubeconfig ``disable-compression``)
    disable_compression: bool = False

    @property
    def fingerprint(self) -> str:
        """Changes whenever the connection would change (server, CA, TLS name, proxy,
        compression or credentials)."""
        h = hashlib.sha256(self.server.encode())
        h.update(self.ca_pem or b"")
        h.update(str(self.insecure).encode())
        h.update((self.tls_server_name or "").encode())
        h.update((self.proxy_url or "").encode())
        h.update(str(self.disable_compression).encode())
        h.update(self.credentials.fingerprint.encode())
        return h.hexdigest()[:12]
