"""kubeconfig on disk -> endpoints (reads the files a kubeconfig refers to); the in-cluster
endpoint of a pod's ServiceAccount."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.core.clusters import ClusterEndpoint, Credentials, DiscoverySource
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.kubeconfig import parse_kubeconfig

__all__ = ["SERVICE_ACCOUNT_DIR", "http_client_factory", "in_cluster_endpoint", "load_kubeconfig"]


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


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def in_cluster_endpoint(
    name: str, *, env: Mapping[str, str] | None = None, where: str = "--in-cluster"
) -> ClusterEndpoint:
    """The API server of the pod this runs in, with its ServiceAccount's token and CA (what
    client-go's rest.InClusterConfig reads). ``FW_SA_DIR`` and ``FW_API_SERVER`` override the
    mount point and the server (tests, sidecars)."""
    env = os.environ if env is None else env
    sa = Path(env.get("FW_SA_DIR") or SERVICE_ACCOUNT_DIR)
    server = env.get("FW_API_SERVER")
    if not server:
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise FormatError(
                where,
                "not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set",
            )
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    try:
        token = (sa / "token").read_text(encoding="utf-8").strip()
        ca = (sa / "ca.crt").read_bytes()
    except OSError as exc:
        raise FormatError(
            str(sa), f"cannot read the ServiceAccount token or CA: {exc.strerror}"
        ) from None
    if not token:
        raise FormatError(str(sa / "token"), "the ServiceAccount token is empty")
    return ClusterEndpoint(
        name,
        server,
        credentials=Credentials(token=token, token_file=str(sa / "token")),
        ca_pem=ca,
        source=DiscoverySource.IN_CLUSTER,
    )


def http_client_factory(endpoint: ClusterEndpoint) -> KubeClient:
    return KubeClient(endpoint)
