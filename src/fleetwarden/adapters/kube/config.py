"""kubeconfig on disk -> endpoints (reads the files a kubeconfig refers to, resolves an exec
plugin's relative command as kubectl does); the in-cluster endpoint of a pod's ServiceAccount."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.core.clusters import (
    ClusterEndpoint,
    Credentials,
    DiscoverySource,
    ExecConfig,
    InteractiveMode,
)
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.kubeconfig import parse_kubeconfig

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "UNATTENDED",
    "PreparedClients",
    "check_unattended",
    "http_client_factory",
    "in_cluster_endpoint",
    "load_kubeconfig",
    "service_client_factory",
]


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
        if creds.exec is not None:
            creds = dataclasses.replace(creds, exec=_anchored(creds.exec, path))
        out.append(dataclasses.replace(ep, credentials=creds))
    return out


def _anchored(plugin: ExecConfig, kubeconfig: Path) -> ExecConfig:
    """client-go resolves a command that contains a path separator against the kubeconfig's
    directory; a bare name is looked up on PATH when the plugin runs."""
    command = plugin.command
    if os.sep in command and not os.path.isabs(command):
        command = str(kubeconfig.expanduser().absolute().parent / command)
    origin = f"{plugin.origin} of {kubeconfig}" if plugin.origin else str(kubeconfig)
    return dataclasses.replace(plugin, command=command, origin=origin)


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
    """A client for a command run by a person: an exec plugin may use the terminal when
    standard input is one (as kubectl decides)."""
    return KubeClient(endpoint, interactive=_stdin_is_a_terminal())


class PreparedClients:
    """Clients whose exec plugins have already run, so a command fails at once with the
    plugin's own error (``CredentialError``) instead of retrying in the background. Each is
    handed out once by calling this object with its endpoint (a ``ClientFactory``); later
    calls make new clients with ``factory``."""

    def __init__(self, factory: Callable[[ClusterEndpoint], KubeClient] | None = None) -> None:
        self.factory = factory or http_client_factory
        self._ready: dict[tuple[str, str], list[KubeClient]] = {}

    async def prepare(self, endpoints: Sequence[ClusterEndpoint]) -> None:
        """Run every endpoint's exec plugin (all at once); the first failure is raised after
        every client made here is closed."""
        made = [self.factory(ep) for ep in endpoints]
        try:
            async with asyncio.TaskGroup() as tg:
                for client in made:
                    tg.create_task(client.authenticate(), name=f"credentials:{client.cluster}")
        except BaseExceptionGroup as group:
            for client in made:
                await client.aclose()
            raise _first(group) from None
        for ep, client in zip(endpoints, made, strict=True):
            self._ready.setdefault(_key(ep), []).append(client)

    def __call__(self, endpoint: ClusterEndpoint) -> KubeClient:
        ready = self._ready.get(_key(endpoint))
        return ready.pop(0) if ready else self.factory(endpoint)

    async def aclose(self) -> None:
        """Close the clients that were never handed out."""
        while self._ready:
            for client in self._ready.popitem()[1]:
                await client.aclose()


def _key(endpoint: ClusterEndpoint) -> tuple[str, str]:
    return endpoint.name, endpoint.fingerprint


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first leaf of an exception group (a TaskGroup wraps what its tasks raise)."""
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


UNATTENDED = "fleetwarden serve never runs credential plugins interactively"


def service_client_factory(endpoint: ClusterEndpoint) -> KubeClient:
    """A client for ``serve``: exec plugins never get a terminal, whatever stdin is."""
    return KubeClient(endpoint, interactive=False, not_interactive_because=UNATTENDED)


def check_unattended(endpoints: Sequence[ClusterEndpoint], *, where: str) -> None:
    """Refuse, before starting, a context whose plugin needs a terminal (``interactiveMode:
    Always``): a service has none, and the plugin would fail on every refresh."""
    for ep in endpoints:
        plugin = ep.credentials.exec
        if (
            ep.credentials.uses_exec
            and plugin
            and plugin.interactive_mode is InteractiveMode.ALWAYS
        ):
            raise FormatError(
                where,
                f"{plugin.origin or ep.name}: exec credential plugin {plugin.command!r} needs a "
                f"terminal (interactiveMode: Always) and {UNATTENDED}: set interactiveMode: "
                "Never or IfAvailable, or give the context a token",
            )


def _stdin_is_a_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):  # closed or detached stdin
        return False
