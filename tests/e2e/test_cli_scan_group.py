"""``scan --group-by cause`` over a real EKS node dump (two clusters desired from one eksctl
file): one desired value that neither cluster got is one incident across both; a label drift
of one node is another; the JSON keeps the findings array exactly as without the option."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXE = shutil.which("fleetwarden", path=str(Path(sys.executable).parent)) or "fleetwarden"

# the real group runs m6gd.2xlarge: this desired file asks for m6g.xlarge
EKSCTL = """\
apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata: {name: duckboat, version: "1.21"}
managedNodeGroups:
  - name: custom-1
    instanceType: m6g.xlarge
    minSize: 1
    maxSize: 3
    volumeSize: 128
    amiFamily: AmazonLinux2
    taints: [{key: type, value: hound, effect: NoSchedule}]
    labels: {team: platform}
"""


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [EXE, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


@pytest.fixture()
def tree(tmp_path: Path, realdata: Path) -> Path:
    (tmp_path / "desired").mkdir()
    (tmp_path / "desired" / "eksctl.yaml").write_text(EKSCTL)
    nodes = json.loads((realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json").read_text())
    for cluster in ("eu", "us"):
        for i, item in enumerate(nodes["items"]):
            labels = item["metadata"]["labels"]
            labels["alpha.eksctl.io/nodegroup-name"] = "custom-1"  # as eksctl labels them
            labels["alpha.eksctl.io/cluster-name"] = "duckboat"
            # one node of eu was relabelled by hand
            labels["team"] = "oncall" if (cluster, i) == ("eu", 0) else "platform"
        (tmp_path / f"{cluster}.json").write_text(json.dumps(nodes))
    return tmp_path


ARGS = ["scan", "-d", "eu=desired", "-d", "us=desired", "-n", "eu.json", "-n", "us.json"]


def test_one_unapplied_desired_value_across_clusters_is_one_incident_ranked_first(tree):
    plain = run(*ARGS, "-o", "json", cwd=tree)
    grouped = run(*ARGS, "-o", "json", "--group-by", "cause", cwd=tree)
    assert grouped.returncode == plain.returncode == 1, grouped.stderr
    before, after = json.loads(plain.stdout), json.loads(grouped.stdout)
    assert after["findings"] == before["findings"]  # unchanged, only `incidents` added
    assert set(after) - set(before) == {"incidents"}
    by_field = {f["field"]: f for f in after["findings"] if f["cluster"] == "eu"}
    assert "instanceType" in by_field and "labels.team" in by_field
    first, *rest = after["incidents"]
    itype = [f["id"] for f in after["findings"] if f["field"] == "instanceType"]
    assert sorted(first["findings"]) == sorted(itype) and first["clusters"] == ["eu", "us"]
    assert "m6g.xlarge" in first["rootCause"] and "desired/eksctl.yaml" in first["rootCause"]
    assert first["nodes"] == 2 * len(by_field["instanceType"]["nodes"])
    label = [i for i in rest if by_field["labels.team"]["id"] in i["findings"]]
    assert len(label) == 1 and label[0]["clusters"] == ["eu"] and label[0]["nodes"] == 1
    grouped_ids = sorted(x for i in after["incidents"] for x in i["findings"])
    assert grouped_ids == sorted(f["id"] for f in after["findings"])  # each finding once


def test_the_table_lists_incidents_by_blast_radius_and_bad_values_exit_2(tree):
    table = run(*ARGS, "--group-by", "cause", cwd=tree)
    assert table.returncode == 1 and "incidents, by blast radius" in table.stdout
    assert "from desired/eksctl.yaml not applied" in table.stdout
    bad = run(*ARGS, "--group-by", "actor", cwd=tree)
    assert bad.returncode == 2 and "actor" in bad.stderr and "Traceback" not in bad.stderr
