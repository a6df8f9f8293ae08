"""``fleetwarden watch`` against real kube-apiservers, a desired cluster that no kubeconfig
context (or Argo CD cluster Secret) names: its pools are never compared, which ``scan`` on the
same tree says as a high "no nodes were given for desired cluster" finding (exit 1). Before,
the watch compared the clusters it had and said nothing of that one, exiting 0: a silent pass.

Now it gets a ``cluster.not_compared`` event (``reason``, ``pools``, ``source``) -- with the
contexts alone as soon as the contexts are added (no cluster can come later), with
``--argocd-secrets`` once the Secrets are listed -- the table's title says ``not compared yet:
CLUSTER`` with a ``not compared (FILE): why`` line under it, and the watch exits 1, as ``scan``
does."""

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
from tests.cli.test_pool_defined_twice import EKSCTL, GROUP
from tests.e2e.test_watch_argocd_nothing_compared_live import NS, REMOTE, _register
from tests.e2e.test_watch_live import _clean

pytestmark = pytest.mark.live

NOWHERE = "prod-nowhere"


def _desired(tmp_path: Path, *clusters: str) -> Path:
    """``web`` in each cluster given, ``general`` and ``batch`` in ``prod-nowhere``."""
    desired = tmp_path / "desired"
    desired.mkdir()
    for cluster in clusters:
        text = EKSCTL.replace("name: duck", f"name: {cluster}") % (GROUP % "web")
        (desired / f"{cluster}.yaml").write_text(text)
    text = EKSCTL.replace("name: duck", f"name: {NOWHERE}")
    (desired / "nowhere.yaml").write_text(text % (GROUP % "general" + GROUP % "batch"))
    return desired


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fleetwarden", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "400"},
    )


async def _no_nodes(cluster: str, kubeconfig: Path) -> None:
    (ep,) = load_kubeconfig(kubeconfig, contexts=[cluster])
    async with KubeClient(ep) as api:
        await _clean(api)


def _not_found(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "cluster.not_compared" and e["cluster"] == NOWHERE]


def test_a_desired_cluster_no_context_names_is_said_and_the_watch_exits_1_as_scan(k8s, tmp_path):
    cluster, kubeconfig = k8s["clusters"][0]["name"], k8s["kubeconfig"]
    desired = _desired(tmp_path, cluster)
    asyncio.run(_no_nodes(cluster, Path(kubeconfig)))

    # scan on the same tree, the one cluster's nodes given: a high finding for the other, exit 1
    dump = tmp_path / f"{cluster}.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    scan = _run("scan", "-d", str(desired), "-n", str(dump), "-o", "json")
    assert scan.returncode == 1, scan.stderr
    (coverage,) = [f for f in json.loads(scan.stdout)["findings"] if f["field"] == "cluster"]
    assert coverage["cluster"] == NOWHERE and coverage["severity"] == "high"
    assert coverage["expected"] == ["batch", "general"]

    watch = ("watch", "-k", kubeconfig, "--context", cluster, "-d", str(desired), "--duration", "4")
    r = _run(*watch, "-o", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    (said,) = _not_found(events)  # once: not again when the watch ends
    assert said["pools"] == ["batch", "general"]
    assert said["source"] == str(desired / "nowhere.yaml")
    assert (
        said["reason"] == f"no cluster watched is named {NOWHERE!r}: its 2 pools were not compared"
    )
    # with the contexts alone no cluster comes later: said once they are added, not at the end
    added = next(i for i, e in enumerate(events) if e["type"] == "cluster.added")
    assert events.index(said) == added + 1

    table = _run(*watch)
    assert table.returncode == 1, table.stdout + table.stderr
    assert f"(not compared yet: {NOWHERE}, no cluster watched has that name)" in table.stdout
    line = f"not compared ({desired / 'nowhere.yaml'}): no cluster watched is named {NOWHERE!r}"
    assert line in table.stdout

    # every desired cluster watched: the watch ends as a watch does
    one = str(desired / f"{cluster}.yaml")
    ok = _run(
        "watch", "-k", kubeconfig, "--context", cluster, "-d", one, "--duration", "3", "-o", "json"
    )
    assert ok.returncode == 0, ok.stderr
    assert not _not_found([json.loads(x) for x in ok.stdout.splitlines()])


def test_a_desired_cluster_no_argo_cd_secret_names_is_said_once_the_secrets_are_listed(
    k8s, tmp_path
):
    """With ``--argocd-secrets`` the clusters are those the Secrets name: the desired one none
    names is said once they are listed (after the clusters they add), once, and the watch
    exits 1."""
    kubeconfig = k8s["kubeconfig"]
    mgmt, target = (c["name"] for c in k8s["clusters"][:2])
    asyncio.run(_register(Path(kubeconfig), mgmt, target))
    desired = _desired(tmp_path, REMOTE)
    args = ["watch", "-k", kubeconfig, "--context", mgmt, "--argocd-secrets", NS]
    r = _run(*args, "-d", str(desired), "--duration", "5", "-o", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    added = [e for e in events if e["type"] == "cluster.added" and e["cluster"] == REMOTE]
    assert added and added[0]["pools"] == 1
    (said,) = _not_found(events)  # not again when the watch ends
    assert events.index(said) > events.index(added[0]) and said["pools"] == ["batch", "general"]
    assert events.index(said) < len(events) - 1  # said while watching, not when it ends
