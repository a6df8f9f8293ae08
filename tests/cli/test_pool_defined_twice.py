"""A pool name defined twice for one cluster, through the command line.

An eksctl file and a Terraform file (or two eksctl files) both define pool ``general`` of
cluster ``duck``: neither definition is compared (``fleet.assign_pools``), and each is a shown
skip. Its nodes carry the pool's name, so they are not "outside the desired state" either:
before, they got a medium SPEC ``pool`` finding saying so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetwarden.cli.main import app

EKSCTL = """\
apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata: {name: duck, region: eu-west-1, version: "1.30"}
managedNodeGroups:
%s"""
GROUP = "  - name: %s\n    instanceType: m5.large\n    minSize: 1\n    maxSize: 3\n"

# the second definition of ``general``: another eksctl file, or a Terraform node group
SECOND = {
    "eksctl": ("more.yaml", EKSCTL % GROUP.replace("m5.large", "m5.xlarge") % "general"),
    "terraform": (
        "general.tf",
        """\
resource "aws_eks_node_group" "general" {
  cluster_name    = "duck"
  node_group_name = "general"
  instance_types  = ["m5.xlarge"]
  scaling_config {
    desired_size = 2
    max_size     = 4
    min_size     = 2
  }
}
""",
    ),
}


def _node(name: str, pool: str) -> dict[str, object]:
    """A node as eksctl and EKS label it: clean against the ``web`` group above."""
    labels = {
        "eks.amazonaws.com/nodegroup": pool,
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
        "alpha.eksctl.io/cluster-name": "duck",
        "alpha.eksctl.io/nodegroup-name": pool,
        "node.kubernetes.io/instance-type": "m5.large",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "nodeInfo": {
                "kubeletVersion": "v1.30.4-eks-a737599",
                "osImage": "Amazon Linux 2023.6.20250218",
            }
        },
    }


def _tree(tmp_path: Path, second: str, *, groups: tuple[str, ...] = ("general", "web")) -> Path:
    desired = tmp_path / "desired"
    desired.mkdir()
    (desired / "eksctl.yaml").write_text(EKSCTL % "".join(GROUP % g for g in groups))
    name, text = SECOND[second]
    (desired / name).write_text(text)
    items = [_node("g1", "general"), _node("g2", "general"), _node("w1", "web")]
    (tmp_path / "duck.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    return tmp_path


def _run(*args: str):
    return CliRunner().invoke(app, list(args), terminal_width=400, env={"NO_COLOR": "1"})


def _scan(tree: Path, *more: str):
    return _run("scan", "-d", str(tree / "desired"), "-n", str(tree / "duck.json"), *more)


@pytest.mark.parametrize("second", sorted(SECOND))
def test_the_nodes_of_a_pool_defined_twice_get_no_finding_and_the_pool_is_skipped(tmp_path, second):
    """No "not in the desired state" finding on g1/g2; ``skipped[]`` names the pool in both
    files; the run exits as a run with a pool not compared does (the other pool is clean:
    0, as for a pool whose name is not known) and the table says why, without --verbose."""
    tree = _tree(tmp_path, second)
    r = _scan(tree, "-o", "json", "--fail-on", "info")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["findings"] == []
    files = {str(tree / "desired" / n) for n in ("eksctl.yaml", SECOND[second][0])}
    assert {s["path"] for s in out["skipped"] if s.get("pool") == "general"} == files
    assert all("defined 2 times" in s["reason"] for s in out["skipped"] if s.get("pool"))
    assert (out["summary"]["pools"], out["summary"]["nodes"]) == (1, 3)
    table = _scan(tree)
    said = [ln for ln in table.output.splitlines() if ln.startswith("not compared")]
    assert len(said) == 2 and all("'general'" in ln for ln in said), table.output
    assert "SPEC" not in table.output


@pytest.mark.parametrize("second", sorted(SECOND))
def test_the_fields_line_counts_no_field_of_a_definition_not_compared(tmp_path, second):
    """``summary.fields`` (and the table's "fields: N compared" line) counts the fields of the
    pools compared -- here ``web`` alone, as ``explain --pool web`` accounts for them -- not
    those of the two definitions of ``general``, none of which was compared."""
    tree = _tree(tmp_path, second)
    fields = json.loads(_scan(tree, "-o", "json").output)["summary"]["fields"]
    web = _run("explain", "-d", str(tree / "desired"), "--pool", "web", "-o", "json")
    assert fields == json.loads(web.output)["summary"]["fields"]
    assert fields["compared"] > 0
    table = _scan(tree).output
    assert f"fields: {fields['compared']} compared ({fields['defaults']} provisioner" in table


@pytest.mark.parametrize("second", sorted(SECOND))
def test_a_scan_whose_only_pool_is_defined_twice_exits_2_unless_allowed(tmp_path, second):
    """Nothing is compared: exit 2 with one line naming the pool and both files, as for a tree
    whose pool names are all unknown; ``--allow-empty`` reports it (skipped, 0 fields)."""
    tree = _tree(tmp_path, second, groups=("general",))
    r = _scan(tree)
    assert r.exit_code == 2
    (line,) = [ln for ln in r.output.splitlines() if ln.strip()]
    assert line.startswith("fleetwarden: error: no pool in ") and "can be compared" in line
    assert "pool 'general' of cluster 'duck' is defined 2 times" in line
    assert str(tree / "desired" / SECOND[second][0]) in line
    allowed = _scan(tree, "--allow-empty", "-o", "json")
    assert allowed.exit_code == 0, allowed.output
    out = json.loads(allowed.output)
    # w1's pool ``web`` is defined nowhere now: that one is a stray; g1 and g2 are not
    assert [(f["pool"], f["field"], f["nodes"]) for f in out["findings"]] == [
        ("web", "pool", ["w1"])
    ]
    assert {s.get("pool") for s in out["skipped"]} == {"general"}
    assert out["summary"]["fields"]["compared"] == out["summary"]["pools"] == 0


@pytest.mark.parametrize("second", sorted(SECOND))
def test_explain_says_a_pool_defined_twice_is_not_compared_and_leaves_its_fields_out(
    tmp_path, second
):
    """``explain`` lists both definitions with every field (the account is still the file's),
    each ``notCompared`` with the reason the scan gives, and its totals count the fields of
    ``web`` alone -- the same totals as the scan's fields line."""
    tree = _tree(tmp_path, second)
    r = _run("explain", "-d", str(tree / "desired"), "-o", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    why = {p["source"]: p.get("notCompared") for p in out["pools"] if p["pool"] == "general"}
    assert len(why) == 2 and all("is defined 2 times" in w for w in why.values()), why
    assert all(p["fields"] for p in out["pools"])
    assert "notCompared" not in next(p for p in out["pools"] if p["pool"] == "web")
    assert (out["summary"]["pools"], out["summary"]["notCompared"]) == (3, 2)
    scanned = json.loads(_scan(tree, "-o", "json").output)["summary"]["fields"]
    assert out["summary"]["fields"] == scanned
    table = _run("explain", "-d", str(tree / "desired")).output
    assert "3 pools (2 not compared, not counted): " in table
    said = [ln for ln in table.splitlines() if ln.startswith("not compared: pool 'general'")]
    assert len(said) == 1, table


def test_explain_of_one_definition_still_says_the_other_exists(tmp_path):
    """``--pool`` narrows what is listed, not what is known: a definition chosen alone is still
    one of two, so still not compared and not counted."""
    tree = _tree(tmp_path, "eksctl")
    args = ("explain", "-d", str(tree / "desired"), "--pool", "general", "-o", "json")
    out = json.loads(_run(*args).output)
    assert out["summary"]["notCompared"] == 2 and out["summary"]["fields"]["compared"] == 0


def test_worker_processes_hold_back_the_nodes_of_a_pool_defined_twice_too(tmp_path):
    """With a worker process per cluster (``--jobs 2``, two clusters) each worker is given
    the held definitions: the same report as one process, no finding on g1/g2 anywhere."""
    tree = _tree(tmp_path, "eksctl")
    (tree / "goose.json").write_text((tree / "duck.json").read_text())
    desired, dumps = str(tree / "desired"), (tree / "duck.json", tree / "goose.json")
    args = ["scan", "-d", f"duck={desired}", "-d", f"goose={desired}", "-o", "json"]
    args += [a for p in dumps for a in ("-n", f"{p.stem}={p}")]
    one, two = (json.loads(_run(*args, "--jobs", j).output) for j in ("1", "2"))
    assert one == two
    assert one["summary"]["clusters"] == 2
    assert not [f for f in two["findings"] if {"g1", "g2"} & set(f["nodes"])]
    assert {(s["pool"], s["reason"].split(" is defined")[0]) for s in two["skipped"]} == {
        ("general", "pool 'general' of cluster 'duck'"),
        ("general", "pool 'general' of cluster 'goose'"),
    }
