"""Real etcd + kube-apiserver clusters for tests, via scripts/k8s-test-env.

Typical session fixture (in conftest.py)::

    from tests.support import k8s_env

    @pytest.fixture(scope="session")
    def k8s_clusters(tmp_path_factory):
        state_dir = tmp_path_factory.mktemp("k8s")
        kubeconfig = k8s_env.start_clusters(2, state_dir)
        try:
            yield k8s_env.load_state(state_dir)   # kubeconfig, servers, tokens, audit logs
        finally:
            k8s_env.stop_clusters(state_dir)

The first run builds etcd and kube-apiserver into ~/.cache/fleetwarden/k8s
(measured: 4.5 minutes on 2 cores from cold Go caches); later runs start a
cluster in about 4 seconds.
``binaries_cached()`` tells whether that build is still ahead.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.support.scripts import run_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "k8s-test-env"

# Generous: includes a cold build of kube-apiserver on a 2-core machine.
DEFAULT_TIMEOUT = 45 * 60


class K8sEnvError(RuntimeError):
    """scripts/k8s-test-env failed; the message holds its exit code and stderr."""


def _run(
    args: list[str],
    state_dir: str | os.PathLike | None,
    timeout: float,
    extra_env: dict[str, str] | None = None,
) -> str:
    return run_script(
        "k8s-test-env",
        args,
        state_var="FW_K8S_STATE",
        state_dir=state_dir,
        timeout=timeout,
        error=K8sEnvError,
        extra_env=extra_env,
    )


def start_clusters(
    n: int,
    state_dir: str | os.PathLike,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    apiserver_args: Sequence[str] = (),
) -> Path:
    """Start n clusters (contexts fw-test-1..n); return the kubeconfig path.

    Returns once every apiserver answers /readyz.  state_dir must not hold
    running clusters (pass a fresh directory, e.g. from tmp_path_factory).
    ``apiserver_args``: more kube-apiserver flags for these clusters only (such as
    ``--runtime-config=...``).
    """
    extra = {"FW_K8S_APISERVER_EXTRA_ARGS": shlex.join(apiserver_args)} if apiserver_args else None
    try:
        out = _run(["up", str(n)], state_dir, timeout, extra)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        # The script was killed mid-start (it cleans up after its own failures);
        # its daemons would otherwise outlive the session.
        with contextlib.suppress(Exception):
            stop_clusters(state_dir)
        raise
    lines = [line for line in out.splitlines() if line.strip()]
    if not lines:
        raise K8sEnvError("k8s-test-env up printed no kubeconfig path")
    return Path(lines[-1].strip())


def stop_clusters(state_dir: str | os.PathLike, timeout: float = 120) -> None:
    """Stop every etcd/kube-apiserver of state_dir (by PID) and remove state_dir."""
    _run(["down"], state_dir, timeout)


def restart_apiserver(state_dir: str | os.PathLike, index: int, timeout: float = 600) -> None:
    """Kill cluster `index`'s (1-based) kube-apiserver and start it again, same flags and port."""
    _run(["restart-apiserver", str(index)], state_dir, timeout)


def kill_apiserver(state_dir: str | os.PathLike, index: int, timeout: float = 120) -> None:
    """Stop cluster `index`'s kube-apiserver (etcd keeps running); see start_apiserver()."""
    _run(["kill-apiserver", str(index)], state_dir, timeout)


def crash_apiserver(state_dir: str | os.PathLike, index: int, timeout: float = 120) -> None:
    """SIGKILL cluster `index`'s kube-apiserver at once (no graceful shutdown); see
    start_apiserver()."""
    _run(["crash-apiserver", str(index)], state_dir, timeout)


def start_apiserver(state_dir: str | os.PathLike, index: int, timeout: float = 600) -> None:
    """Start a killed kube-apiserver again (same flags and port) and wait for /readyz."""
    _run(["start-apiserver", str(index)], state_dir, timeout)


def build_binaries(timeout: float = DEFAULT_TIMEOUT) -> tuple[Path, Path]:
    """Build (or find cached) kube-apiserver and etcd; return their paths."""
    api, etcd = _run(["build"], None, timeout).split()[-2:]
    return Path(api), Path(etcd)


def load_state(state_dir: str | os.PathLike) -> dict:
    """The script's state.json: "kubeconfig", "k8s_version", and per cluster in
    "clusters": "name", "server", "token" (fw-admin, system:masters), "viewer_token"
    (fw-viewer, no RBAC grants), "client_ca_cert" / "client_ca_key" (PEM files of the CA the
    apiserver trusts for client certificates: CN is the user, O the groups), "audit_log",
    ports and directories."""
    return json.loads((Path(state_dir) / "state.json").read_text())


def audit_events(
    state_dir: str | os.PathLike, index: int, stage: str = "ResponseComplete"
) -> list[dict]:
    """Audit events of cluster `index` (Metadata level: requests by fw-admin/fw-viewer,
    and on nodes by anyone).  The default stage counts each finished request once."""
    path = Path(load_state(state_dir)["clusters"][index - 1]["audit_log"])
    if not path.exists():
        return []
    events = []
    with path.open() as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            event = json.loads(line)
            if stage is None or event.get("stage") == stage:
                events.append(event)
    return events


def binaries_cached() -> bool:
    """True when `up` needs no build (binaries for the default versions are cached
    or given by FW_K8S_APISERVER_BIN / FW_ETCD_BIN)."""
    cache = Path(os.environ.get("FW_K8S_CACHE") or Path.home() / ".cache/fleetwarden/k8s")
    k8s = os.environ.get("FW_K8S_VERSION") or _script_default("DEFAULT_K8S_VERSION")
    etcd = os.environ.get("FW_ETCD_VERSION") or _script_default("DEFAULT_ETCD_VERSION")
    api_bin = Path(os.environ.get("FW_K8S_APISERVER_BIN") or cache / k8s / "kube-apiserver")
    etcd_bin = Path(os.environ.get("FW_ETCD_BIN") or cache / f"etcd-{etcd}" / "etcd")
    return os.access(api_bin, os.X_OK) and os.access(etcd_bin, os.X_OK)


def _script_default(name: str) -> str:
    # Single source of truth for the pinned versions: the script itself.
    for line in SCRIPT.read_text().splitlines():
        if line.startswith(f"{name} = "):
            return line.split("=", 1)[1].strip().strip("\"'")
    raise K8sEnvError(f"{name} not found in {SCRIPT}")
