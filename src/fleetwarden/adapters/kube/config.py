"""kubeconfig on disk -> endpoints (reads the files a kubeconfig refers to, resolves an exec
plugin's relative command as kubectl does); the in-cluster endpoint of a pod's ServiceAccount."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
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
from fleetwarden.formats.kubeconfig import parse_kubeconfigs

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "UNATTENDED",
    "PreparedClients",
    "check_unattended",
    "http_client_factory",
    "in_cluster_endpoint",
    "kubeconfig_paths",
    "load_kubeconfig",
    "service_client_factory",
]


def _read(base: Path, ref: str, what: str, kubeconfig: Path) -> bytes:
    path = _resolved(base, ref)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise FormatError(str(kubeconfig), f"cannot read {what} {path}: {exc.strerror}") from None


def _resolved(base: Path, ref: str) -> Path:
    """A file a kubeconfig names, relative to the kubeconfig's directory (clientcmd's
    ResolveLocalPaths); absolute, so a rotating token file is found from any directory."""
    path = Path(ref).expanduser()
    return path if path.is_absolute() else (base / path).absolute()


def kubeconfig_paths(env: Mapping[str, str] | None = None) -> list[Path]:
    """The files kubectl reads when no ``--kubeconfig`` is given: every file ``$KUBECONFIG``
    lists (in order, each once, empty entries skipped), else ``~/.kube/config``. As in
    clientcmd's loader, a listed file that does not exist is passed over -- unless none
    exists: then they are all returned, and reading them says which are missing."""
    env = os.environ if env is None else env
    listed = [Path(p) for p in dict.fromkeys(env.get("KUBECONFIG", "").split(os.pathsep)) if p]
    if not listed:
        return [Path.home() / ".kube" / "config"]
    return [p for p in listed if p.exists()] or listed


def load_kubeconfig(
    path: Path | Sequence[Path], *, contexts: Sequence[str] = ()
) -> list[ClusterEndpoint]:
    """The endpoints of one kubeconfig, or of several merged as kubectl merges
    ``$KUBECONFIG`` (the first file to name a cluster, user or context wins). Files it refers
    to are read here (relative to the file that names them); so is a ``tokenFile``, which the
    client then re-reads as it rotates."""
    paths = [path] if isinstance(path, Path) else list(path)
    texts = []
    for one in paths:
        try:
            texts.append((str(one), one.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            raise FormatError(str(one), f"cannot read kubeconfig: {exc}") from None
    out = []
    for ref in parse_kubeconfigs(texts, contexts=contexts):
        ep, files = ref.endpoint, ref.files
        cluster_file, user_file = Path(ref.cluster_file), Path(ref.user_file)
        creds = ep.credentials
        if files.ca:
            ep = dataclasses.replace(
                ep,
                ca_pem=_read(cluster_file.parent, files.ca, "certificate-authority", cluster_file),
            )
        if files.token:
            creds = _with_token_file(creds, user_file, files.token, ep.name)
        if files.client_cert:
            creds = dataclasses.replace(
                creds,
                client_cert_pem=_read(
                    user_file.parent, files.client_cert, "client-certificate", user_file
                ),
            )
        if files.client_key:
            creds = dataclasses.replace(
                creds,
                client_key_pem=_read(user_file.parent, files.client_key, "client-key", user_file),
            )
        if creds.exec is not None:
            creds = dataclasses.replace(creds, exec=_anchored(creds.exec, user_file))
        if ep.proxy_url and ep.proxy_url.startswith("socks5:") and not _socks_available():
            raise FormatError(
                str(cluster_file),
                f"context {ep.name!r}: a socks5 proxy-url needs the socksio package "
                "(pip install 'httpx[socks]'); use an http(s) proxy or install it",
            )
        out.append(dataclasses.replace(ep, credentials=creds))
    return out


def _with_token_file(creds: Credentials, kubeconfig: Path, ref: str, context: str) -> Credentials:
    """``tokenFile``: read now and re-read as it rotates (client-go's cached file token
    source: a readable file wins over ``token``, which is the fallback; an empty file with no
    ``token`` is an error, not an anonymous connection)."""
    path = _resolved(kubeconfig.parent, ref)
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        if creds.token:  # client-go keeps the token when the file cannot be read
            return dataclasses.replace(creds, token_file=str(path))
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise FormatError(str(kubeconfig), f"cannot read tokenFile {path}: {reason}") from None
    if not token and not creds.token:
        raise FormatError(
            str(kubeconfig),
            f"context {context!r}: tokenFile {path} is empty (client-go: read empty token)",
        )
    return dataclasses.replace(creds, token=token or creds.token, token_file=str(path))


def _socks_available() -> bool:
    return importlib.util.find_spec("socksio") is not None


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
