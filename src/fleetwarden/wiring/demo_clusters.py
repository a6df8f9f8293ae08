"""The demo's fleet on real kube-apiservers, when a checkout can start them without building
anything: ``scripts/k8s-test-env`` (etcd + kube-apiserver per cluster on 127.0.0.1, what the
live tests use) with its binaries already cached (``k8s-test-env cached``; ``make test``
builds them once). Each simulated cluster gets an API server of its own (its kubeconfig
context renamed to the cluster's name), its Node objects are created there, and each change
the simulated cloud makes is patched onto the touched nodes — labels and taints with a field
manager, status as a kubelet would — so ``serve`` watches real clusters and names the actor
from managedFields before the provider's event arrives. Elsewhere (an installed package, no
cached binaries) the demo runs on the embedded node dumps.
"""

from __future__ import annotations

import copy
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.simulated import SimulatedFleet

__all__ = ["DemoClusters", "available"]

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "k8s-test-env"
STATUS_MANAGER = "kubelet"  # node status is the kubelet's to write
CHANGE_MANAGER = "kubectl-edit"  # what the simulated people and consoles edit with


def available() -> bool:
    """Whether this is a checkout whose test API servers can start without a build."""
    if not os.access(SCRIPT, os.X_OK):
        return False
    done = subprocess.run([str(SCRIPT), "cached"], capture_output=True, timeout=30)
    return done.returncode == 0


class DemoClusters:
    """One API server per cluster of the fleet, started by ``up`` and stopped by ``down``
    (by PID, through the script; the state directory is temporary)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self._state = tempfile.mkdtemp(prefix="fleetwarden-demo-k8s-")
        self._env = {**os.environ, "FW_K8S_STATE": self._state}
        self.kubeconfig = Path(self._state) / "demo-kubeconfig"
        self._pushed: dict[str, dict[str, Any]] = {}  # cluster/node -> the object last written

    def up(self, timeout: float = 300.0) -> Path:
        """Start the API servers; the kubeconfig whose contexts are the clusters' names.
        RuntimeError with the script's last line when they do not start."""
        done = subprocess.run(
            [str(SCRIPT), "up", str(len(self.names))],
            capture_output=True, text=True, env=self._env, timeout=timeout,
        )  # fmt: skip
        if done.returncode != 0:
            self.down()
            last = (done.stderr.strip().splitlines() or ["?"])[-1]
            raise RuntimeError(f"test API servers did not start: {last}")
        source = Path(done.stdout.strip().splitlines()[-1])
        doc = yaml.safe_load(source.read_text())
        renamed = {f"fw-test-{i}": name for i, name in enumerate(self.names, start=1)}
        for ctx in doc.get("contexts") or []:
            ctx["name"] = renamed.get(ctx["name"], ctx["name"])
        doc["current-context"] = self.names[0]
        self.kubeconfig.write_text(yaml.safe_dump(doc))
        self.kubeconfig.chmod(0o600)
        return self.kubeconfig

    def down(self) -> None:
        subprocess.run([str(SCRIPT), "down"], capture_output=True, env=self._env, timeout=120)

    async def load(self, fleet: SimulatedFleet) -> None:
        """Every node of the fleet created in its cluster's API server."""
        for cluster in self.names:
            async with self._client(cluster) as api:
                for node in fleet.nodes[cluster]:
                    name = node["metadata"]["name"]
                    await api.request("POST", "/api/v1/nodes", body=_object(node))
                    await self._status(api, name, node)
                    self._pushed[f"{cluster}/{name}"] = _copy(node)

    async def push(self, fleet: SimulatedFleet, cluster: str) -> list[str]:
        """The nodes of ``cluster`` the simulated cloud changed since they were last written,
        patched (labels and taints by ``CHANGE_MANAGER``, status by the kubelet); their names.
        A node the healer restored meanwhile is left alone unless the cloud changes it again."""
        changed = []
        async with self._client(cluster) as api:
            for node in fleet.nodes[cluster]:
                name = node["metadata"]["name"]
                before = self._pushed.get(f"{cluster}/{name}")
                if before == node:
                    continue
                if before is None or _object(before) != _object(node):
                    await api.request(
                        "PATCH", f"/api/v1/nodes/{name}", body=_meta_patch(before, node),
                        params={"fieldManager": CHANGE_MANAGER},
                        content_type="application/merge-patch+json",
                    )  # fmt: skip
                if before is None or before.get("status") != node.get("status"):
                    await self._status(api, name, node)
                self._pushed[f"{cluster}/{name}"] = _copy(node)
                changed.append(name)
        return changed

    async def _status(self, api: KubeClient, name: str, node: Mapping[str, Any]) -> None:
        await api.request(
            "PATCH", f"/api/v1/nodes/{name}/status", body={"status": node.get("status") or {}},
            params={"fieldManager": STATUS_MANAGER}, content_type="application/merge-patch+json",
        )  # fmt: skip

    def _client(self, cluster: str) -> KubeClient:
        (endpoint,) = load_kubeconfig(self.kubeconfig, contexts=[cluster])
        return KubeClient(endpoint)


def _object(node: Mapping[str, Any]) -> dict[str, Any]:
    """What a Node is created with: name, labels, annotations, taints (status apart)."""
    meta = node.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {k: meta[k] for k in ("name", "labels", "annotations") if k in meta},
        "spec": {k: v for k, v in (node.get("spec") or {}).items() if k in ("taints",)},
    }


def _meta_patch(before: Mapping[str, Any] | None, node: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch from ``before`` to ``node``: labels set or removed (null), taints whole."""
    old = ((before or {}).get("metadata") or {}).get("labels") or {}
    new = (node.get("metadata") or {}).get("labels") or {}
    labels: dict[str, str | None] = {k: v for k, v in new.items() if old.get(k) != v}
    labels.update({k: None for k in old if k not in new})
    return {
        "metadata": {"labels": labels},
        "spec": {"taints": (node.get("spec") or {}).get("taints") or None},
    }


def _copy(node: Mapping[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(dict(node))
