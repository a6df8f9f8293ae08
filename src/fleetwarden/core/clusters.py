"""Clusters as fleetwarden connects to them, with credentials that never print themselves."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["ClusterEndpoint", "Credentials", "DiscoverySource"]


class DiscoverySource(StrEnum):
    KUBECONFIG = "kubeconfig"
    ARGOCD_SECRET = "argocd-secret"
    IN_CLUSTER = "in-cluster"


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

    def __repr__(self) -> str:
        kinds = [
            k
            for k, v in (
                ("token", self.token),
                ("client-cert", self.client_cert_pem),
                ("basic", self.password),
            )
            if v
        ]
        return f"Credentials({', '.join(kinds) or 'anonymous'})"

    __str__ = __repr__

    @property
    def fingerprint(self) -> str:
        """A short digest that changes when any secret changes (safe to log)."""
        h = hashlib.sha256()
        for part in (self.token, self.client_cert_pem, self.client_key_pem, self.password):
            h.update(part.encode() if isinstance(part, str) else (part or b""))
            h.update(b"\0")
        return h.hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class ClusterEndpoint:
    name: str
    server: str
    credentials: Credentials = field(default_factory=Credentials)
    ca_pem: bytes | None = field(default=None, repr=False)
    insecure: bool = False
    tls_server_name: str | None = None
    namespaces: tuple[str, ...] = ()
    source: DiscoverySource = DiscoverySource.KUBECONFIG
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def fingerprint(self) -> str:
        """Changes whenever the connection would change (server, CA or credentials)."""
        h = hashlib.sha256(self.server.encode())
        h.update(self.ca_pem or b"")
        h.update(str(self.insecure).encode())
        h.update((self.tls_server_name or "").encode())
        h.update(self.credentials.fingerprint.encode())
        return h.hexdigest()[:12]
