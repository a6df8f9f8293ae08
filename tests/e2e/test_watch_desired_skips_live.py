"""``fleetwarden watch`` against a real kube-apiserver says what of the desired state it compares
in no cluster, as ``scan`` does on the same tree: files it could not read (a YAML and a
Terraform syntax error, binary data), a file that defines no pool, a pool whose cluster is not
known. JSON: one event per ``scan`` ``skipped[]`` entry (``file.skipped``; ``pool.not_compared``
with ``cluster`` null), before any cluster is added; the table: ``scan``'s lines under it.
Before, watch dropped them without a word, and the one pool it compared read as all there was.
An unreadable file in a directory stops neither command (one named directly stops both)."""

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
from tests.e2e.test_watch_live import _clean

pytestmark = pytest.mark.live

NO_CLUSTER = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: spot}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
"""


def _desired(tmp_path: Path, cluster: str) -> Path:
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "eksctl.yaml").write_text(
        EKSCTL.replace("name: duck", f"name: {cluster}") % (GROUP % "web")
    )
    (desired / "broken.yaml").write_text("a: [\n")
    (desired / "bad.tf").write_text('resource "aws_eks_node_group" "x" {\n  cluster_name = \n')
    (desired / "blob.yaml").write_bytes(b"\xff\xfe\x00binary")
    (desired / "readme.yaml").write_text("hello: world\n")
    (desired / "spot.yaml").write_text(NO_CLUSTER)
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


def test_watch_says_the_files_not_read_and_the_pools_of_no_cluster_as_scan_does(k8s, tmp_path):
    cluster, kubeconfig = k8s["clusters"][0]["name"], k8s["kubeconfig"]
    desired = _desired(tmp_path, cluster)
    asyncio.run(_no_nodes(cluster, Path(kubeconfig)))
    dump = tmp_path / f"{cluster}.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    scan = _run("scan", "-d", str(desired), "-n", str(dump), "-o", "json")
    assert scan.returncode == 1, scan.stderr  # web: no node, below its minimum
    skipped = json.loads(scan.stdout)["skipped"]
    assert len(skipped) == 5 and sum(bool(s.get("problem")) for s in skipped) == 3

    watch = ("watch", "-k", kubeconfig, "--context", cluster, "-d", str(desired), "--duration", "4")
    r = _run(*watch, "-o", "json")
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    said = [e for e in events if "cluster" in e and e["cluster"] is None]
    assert [e["type"] for e in said] == ["file.skipped"] * 4 + ["pool.not_compared"]
    drop = ("type", "cluster", "at")
    assert [{k: v for k, v in e.items() if k not in drop} for e in said] == skipped
    added = next(i for i, e in enumerate(events) if e["type"] == "cluster.added")
    assert added == len(said)  # said first: no cluster compares them
    assert events[added]["pools"] == 1

    table = _run(*watch)
    assert table.returncode == 0, table.stderr
    out = table.stdout.splitlines()
    for s in skipped:
        if s.get("problem"):
            assert f"could not read {s['path']}: {s['reason']}" in out, table.stdout
    assert f"not compared ({desired / 'spot.yaml'}): pool 'spot': cluster unknown" in table.stdout
    assert "1 skipped (files or pools); --format json lists them" in out
    assert (
        "(3 desired files not read)" in table.stdout
        and "(pools not compared: spot)" in table.stdout
    )
