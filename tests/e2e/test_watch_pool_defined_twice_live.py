"""``fleetwarden watch`` against a real kube-apiserver, with pool ``general`` defined twice for
the watched cluster (an eksctl file and a Terraform node group): as ``scan`` does, neither
definition is compared, its nodes get no "not in the desired state" finding, and the watch says
the pool was not compared -- ``pool.not_compared`` lines in JSON (scan's ``skipped[]`` entries),
the live table's title and one ``not compared (FILE)`` line per file. Before, the watcher
compared the definition read last, silently."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from tests.cli.test_pool_defined_twice import EKSCTL, GROUP, SECOND, _node
from tests.e2e.test_watch_live import _clean

pytestmark = pytest.mark.live


def _desired(tmp_path: Path, cluster: str) -> Path:
    desired = tmp_path / "desired"
    desired.mkdir()
    eksctl = EKSCTL.replace("name: duck", f"name: {cluster}")
    (desired / "eksctl.yaml").write_text(eksctl % "".join(GROUP % g for g in ("general", "web")))
    name, text = SECOND["terraform"]
    (desired / name).write_text(text.replace('"duck"', f'"{cluster}"'))
    return desired


async def _nodes(cluster: str, kubeconfig: Path) -> None:
    """g1, g2 of ``general`` (t3.medium: drift against either definition); w1 of ``web``
    clean, w2 of ``web`` resized -- the one finding a watch that compares must report."""
    (ep,) = load_kubeconfig(kubeconfig, contexts=[cluster])
    resized = _node("w2", "web")
    resized["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "t3.medium"  # type: ignore[index]
    general = [_node(n, "general") for n in ("g1", "g2")]
    for body in general:
        body["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "t3.medium"  # type: ignore[index]
    async with KubeClient(ep) as api:
        await _clean(api)
        for body in [*general, _node("w1", "web"), resized]:
            body["metadata"]["labels"]["alpha.eksctl.io/cluster-name"] = cluster  # type: ignore[index]
            await api.request("POST", "/api/v1/nodes", body=body)


def _watch(kubeconfig: str, cluster: str, desired: Path, *more: str) -> subprocess.CompletedProcess:
    args = ["watch", "-k", kubeconfig, "--context", cluster, "-d", str(desired)]
    return subprocess.run(
        [sys.executable, "-m", "fleetwarden", *args, "--duration", "6", *more],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "400"},
    )


def test_watch_compares_neither_definition_of_a_pool_defined_twice_and_says_so(k8s, tmp_path):
    cluster = k8s["clusters"][0]["name"]
    desired = _desired(tmp_path, cluster)
    asyncio.run(_nodes(cluster, Path(k8s["kubeconfig"])))
    r = _watch(k8s["kubeconfig"], cluster, desired, "-o", "json")
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    found = [e["finding"] for e in events if e["type"] == "finding.appeared"]
    assert [(f["pool"], f["field"], f["nodes"]) for f in found] == [
        ("web", "instanceType", ["w2"])
    ], found
    (added,) = [e for e in events if e["type"] == "cluster.added"]
    assert added["pools"] == 1  # web: the pools compared
    said = [e for e in events if e["type"] == "pool.not_compared"]
    files = {str(desired / "eksctl.yaml"), str(desired / "general.tf")}
    assert {e["path"] for e in said} == files and len(said) == 2
    for e in said:
        assert (e["cluster"], e["pool"]) == (cluster, "general")
        assert "defined 2 times" in e["reason"] and "none is compared" in e["reason"]
    table = _watch(k8s["kubeconfig"], cluster, desired)
    assert table.returncode == 0, table.stderr
    assert f"pools not compared: {cluster}/general" in table.stdout
    lines = [ln for ln in table.stdout.splitlines() if ln.startswith("not compared (")]
    assert {ln.split(")")[0].removeprefix("not compared (") for ln in lines} >= files
    assert "1 findings" in table.stdout  # web's; no finding, stray or not, on g1, g2
    assert not [ln for ln in table.stdout.splitlines() if " g1" in ln or "g2 " in ln]
