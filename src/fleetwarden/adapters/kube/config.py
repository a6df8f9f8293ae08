"""kubeconfig on disk -> endpoints (reads the files a kubeconfig refers to)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.core.clusters import ClusterEndpoint
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.kubeconfig import parse_kubeconfig

__all__ = ["http_client_factory", "load_kubeconfig"]


def _read(base: Path, ref: str, what: str, kubeconfig: Path) -> bytes:
    path = Path(ref).expanduser()
    if not path.is_absolute():
        path = base / path
    try:
        return path.read_bytes()
    except OSError as exc:
        raise FormatError(str(kubeconfig), f"cannot read {what} {path}: {exc.strerror}") from None


def load_kubeconfig(path: Path, *, contexts: Sequence[str] = ()) -> list[ClusterEndpoint]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(str(path), f"cannot read kubeconfig: {exc}") from None
    out = []
    for ref in parse_kubeconfig(str(path), text, contexts=contexts):
        ep, files, base = ref.endpoint, ref.files, path.parent
        creds = ep.credentials
        if files.ca and not ep.ca_pem:
            ep = dataclasses.replace(
                ep, ca_pem=_read(base, files.ca, "certificate-authority", path)
            )
        if files.token and not creds.token:
            token = _read(base, files.token, "tokenFile", path).decode().strip()
            creds = dataclasses.replace(creds, token=token)
        if files.client_cert and not creds.client_cert_pem:
            creds = dataclasses.replace(
                creds, client_cert_pem=_read(base, files.client_cert, "client-certificate", path)
            )
        if files.client_key and not creds.client_key_pem:
            creds = dataclasses.replace(
                creds, client_key_pem=_read(base, files.client_key, "client-key", path)
            )
        out.append(dataclasses.replace(ep, credentials=creds))
    return out


def http_client_factory(endpoint: ClusterEndpoint) -> KubeClient:
    return KubeClient(endpoint)
