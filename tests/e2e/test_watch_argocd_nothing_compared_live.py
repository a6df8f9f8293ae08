"""``fleetwarden watch --argocd-secrets`` against real kube-apiservers: when no cluster it
watched had a pool to compare -- here the one desired cluster, found through its Argo CD cluster
Secret, defines its only pool twice (an eksctl file and a Terraform node group) -- the watch
compared nothing and exits 2 naming why, as ``scan`` does on the same tree. Before, it exited 0.
The same watch with one pool it can compare exits 0."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.ports.kube import Conflict, NotFound
from tests.cli.test_pool_defined_twice import EKSCTL, GROUP, SECOND
from tests.e2e.test_argocd_orphans_live import cluster_secret
from tests.e2e.test_watch_live import _clean

pytestmark = pytest.mark.live

# the namespace these watches read Argo CD cluster Secrets from: their own (another test file
# deletes its namespace when it ends, and a namespace being deleted takes no new Secret)
NS = "fw-watch-argocd"

REMOTE = "remote-twice"


def _desired(tmp_path: Path, groups: tuple[str, ...]) -> Path:
    desired = tmp_path / "-".join(groups)
    desired.mkdir()
    eksctl = EKSCTL.replace("name: duck", f"name: {REMOTE}")
    (desired / "eksctl.yaml").write_text(eksctl % "".join(GROUP % g for g in groups))
    name, text = SECOND["terraform"]
    (desired / name).write_text(text.replace('"duck"', f'"{REMOTE}"'))
    return desired


async def _register(kubeconfig: Path, mgmt: str, target: str) -> None:
    """The Secret that makes ``target``'s API server the Argo CD cluster ``remote-twice``."""
    by_name = {e.name: e for e in load_kubeconfig(kubeconfig)}
    ep = by_name[target]
    body = cluster_secret(REMOTE, ep.server, ep.credentials.token or "", ep.ca_pem)
    body["metadata"]["namespace"] = NS
    async with KubeClient(by_name[mgmt]) as api, KubeClient(ep) as remote:
        await _clean(remote)
        with contextlib.suppress(Conflict):
            await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
        with contextlib.suppress(NotFound):
            await api.request("DELETE", f"/api/v1/namespaces/{NS}/secrets/cluster-{REMOTE}")
        await api.request("POST", f"/api/v1/namespaces/{NS}/secrets", body=body)


def _watch(kubeconfig: str, mgmt: str, desired: Path) -> subprocess.CompletedProcess:
    args = ["watch", "-k", kubeconfig, "--context", mgmt, "--argocd-secrets", NS, "-o", "json"]
    return subprocess.run(
        [sys.executable, "-m", "fleetwarden", *args, "-d", str(desired), "--duration", "6"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "400"},
    )


def test_a_watch_of_argo_cd_clusters_that_compared_no_pool_exits_2_naming_why(k8s, tmp_path):
    kubeconfig = k8s["kubeconfig"]
    mgmt, target = (c["name"] for c in k8s["clusters"][:2])
    asyncio.run(_register(Path(kubeconfig), mgmt, target))
    twice = _desired(tmp_path, ("general",))
    r = _watch(kubeconfig, mgmt, twice)
    assert r.returncode == 2, r.stdout + r.stderr
    error = r.stderr.strip()
    assert error.startswith("fleetwarden: error: no pool was compared during the watch"), error
    assert f"{REMOTE}: pool 'general' of cluster '{REMOTE}' is defined 2 times" in error
    assert f"{mgmt}: no desired pool names this cluster" in error
    events = [json.loads(line) for line in r.stdout.splitlines()]
    added = [e for e in events if e["type"] == "cluster.added" and e["cluster"] == REMOTE]
    assert added and added[0]["source"] == "argocd-secret" and added[0]["pools"] == 0
    said = [e for e in events if e["type"] == "pool.not_compared"]
    assert {(e["cluster"], e["pool"]) for e in said} == {(REMOTE, "general")} and len(said) == 2

    # scan on the same tree says the same: nothing to compare
    dump = tmp_path / f"{REMOTE}.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    scan = subprocess.run(
        [sys.executable, "-m", "fleetwarden", "scan", "-d", str(twice), "-n", str(dump)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert scan.returncode == 2 and "defined 2 times" in scan.stderr

    # one pool it can compare: the watch compared, and ends as a watch does
    ok = _watch(kubeconfig, mgmt, _desired(tmp_path, ("general", "web")))
    assert ok.returncode == 0, ok.stderr
