"""Nodes of no desired pool, in a cluster that has a pool whose name is not known, through the
command line.

``duck`` has ``web`` (eksctl) and a Terraform node group whose ``node_group_name = var.name``
has no default: that pool is not compared (its name is not known), and the nodes of group
``custom-a`` are of no pool the desired state names -- a medium SPEC ``pool`` finding, as
before. But they may well be that pool's: the finding now says so, naming the file and the
expression, where before it read as plain nodes outside the desired state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_pool_defined_twice import EKSCTL, GROUP, _node, _run

UNNAMED_TF = """\
variable "name" {
  type = string
}

resource "aws_eks_node_group" "custom" {
  cluster_name    = "duck"
  node_group_name = var.name
  instance_types  = ["m5.xlarge"]
  scaling_config {
    desired_size = 2
    max_size     = 4
    min_size     = 2
  }
}
"""
NOTE = "cluster 'duck' has a pool whose name is not known ('custom' in {tf}: var.name)"


def _tree(tmp_path: Path) -> Path:
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "eksctl.yaml").write_text(EKSCTL % (GROUP % "web"))
    (desired / "custom.tf").write_text(UNNAMED_TF)
    items = [_node("w1", "web"), _node("x1", "custom-a"), _node("x2", "custom-a")]
    for cluster in ("duck", "goose"):
        (tmp_path / f"{cluster}.json").write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        )
    return tmp_path


def test_the_strays_finding_says_the_nodes_may_be_the_pool_whose_name_is_not_known(tmp_path):
    tree = _tree(tmp_path)
    tf = tree / "desired" / "custom.tf"
    args = ("scan", "-d", str(tree / "desired"), "-n", str(tree / "duck.json"))
    out = json.loads(_run(*args, "-o", "json").output)
    (stray,) = out["findings"]
    assert (stray["pool"], stray["layer"], stray["field"]) == ("custom-a", "SPEC", "pool")
    assert (stray["severity"], stray["nodes"]) == ("medium", ["x1", "x2"])
    assert stray["message"].startswith(NOTE.format(tf=tf)), stray["message"]
    assert stray["message"].endswith("these nodes may be that pool's")
    assert [s["pool"] for s in out["skipped"]] == ["custom"]  # not compared, as before
    table = _run(*args).output
    assert f"note: duck/custom-a pool: {NOTE.format(tf=tf)}" in table


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_worker_processes_say_it_too_and_only_of_the_cluster_with_that_pool(tmp_path, jobs):
    """A worker process per cluster (``--jobs 2``, two dumps) is given the cluster's pools of
    unknown name: the same findings as one process. ``goose`` has no such pool (only
    ``web``): its strays are plain strays."""
    tree = _tree(tmp_path)
    desired = tree / "desired"
    args = ["scan", "-d", str(desired), "-d", f"goose={desired / 'eksctl.yaml'}", "-o", "json"]
    args += ["-n", str(tree / "duck.json"), "-n", str(tree / "goose.json"), "--jobs", jobs]
    out = json.loads(_run(*args).output)
    strays = {f["cluster"]: f for f in out["findings"] if f["field"] == "pool"}
    assert strays["duck"]["message"].startswith(NOTE.format(tf=desired / "custom.tf"))
    assert strays["goose"]["nodes"] == ["x1", "x2"] and not strays["goose"].get("message")
