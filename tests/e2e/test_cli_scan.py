"""The `fleetwarden` command as pipelines call it: exit codes, JSON contract, messages.

Runs the installed console script in a subprocess, the way users and CI do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXE = shutil.which("fleetwarden", path=str(Path(sys.executable).parent)) or "fleetwarden"

EKSCTL = """\
apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata: {name: duckboat, version: "1.21"}
managedNodeGroups:
  - name: custom-1
    instanceType: m6gd.2xlarge
    minSize: 1
    maxSize: 3
    volumeSize: 128
    amiFamily: AmazonLinux2
    taints: [{key: type, value: hound, effect: NoSchedule}]
"""
# what eksctl itself puts on every node of the group (the real dump is of an EKS managed group
# made by another tool, so the test adds them as eksctl would have)
EKSCTL_LABELS = {
    "alpha.eksctl.io/cluster-name": "duckboat",
    "alpha.eksctl.io/nodegroup-name": "custom-1",
}


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [EXE, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


@pytest.fixture()
def tree(tmp_path: Path, realdata: Path) -> Path:
    (tmp_path / "desired").mkdir()
    (tmp_path / "desired" / "eksctl.yaml").write_text(EKSCTL)
    (tmp_path / "desired" / "README.yaml").write_text("just: notes\n")
    nodes = json.loads((realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json").read_text())
    for item in nodes["items"]:
        item["metadata"]["labels"].update(EKSCTL_LABELS)
    (tmp_path / "duckboat.json").write_text(json.dumps(nodes))
    return tmp_path


def test_clean_real_cluster_exits_0_with_contract_json(tree):
    r = run(
        "scan",
        "--desired",
        str(tree / "desired"),
        "--nodes",
        str(tree / "duckboat.json"),
        "--format",
        "json",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["findings"] == []
    fields = out["summary"].pop("fields")
    assert out["summary"] == {
        "clusters": 1,
        "pools": 1,
        "nodes": 2,
        "findings": 0,
        "bySeverity": {"critical": 0, "high": 0, "medium": 0, "low": 0, "info": 0},
    }
    # every attribute accounted for; the unstated ones compared as eksctl's defaults
    assert fields["unaccounted"] == 0 and fields["defaults"] >= 2
    assert {
        "path": str(tree / "desired" / "README.yaml"),
        "reason": "no node-pool definition (just: no kind)",
    } != out["skipped"][0]
    assert out["skipped"][0]["path"].endswith("README.yaml")
    assert "no node-pool definition" in out["skipped"][0]["reason"]


def test_seed_000_incident_is_critical_and_exits_1(tree):
    nodes = json.loads((tree / "duckboat.json").read_text())
    nodes["items"][1]["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "t4g.medium"
    (tree / "duckboat.json").write_text(json.dumps(nodes))
    r = run("scan", "-d", str(tree / "desired"), "-n", str(tree / "duckboat.json"), "-o", "json")
    assert r.returncode == 1
    (f,) = json.loads(r.stdout)["findings"]
    assert {
        k: f[k]
        for k in ("cluster", "pool", "layer", "field", "expected", "actual", "severity", "nodes")
    } == {
        "cluster": "duckboat",
        "pool": "custom-1",
        "layer": "SPEC",
        "field": "instanceType",
        "expected": "m6gd.2xlarge",
        "actual": "t4g.medium",
        "severity": "critical",
        "nodes": ["duckboat-02"],
    }
    assert f["source"].endswith("eksctl.yaml")
    # --fail-on critical+ still fails; a table for people names the drift
    assert (
        run(
            "scan",
            "-d",
            str(tree / "desired"),
            "-n",
            str(tree / "duckboat.json"),
            "--fail-on",
            "critical",
        ).returncode
        == 1
    )
    table = run("scan", "-d", str(tree / "desired"), "-n", str(tree / "duckboat.json"))
    assert "instanceType" in table.stdout and "t4g.medium" in table.stdout


def test_cluster_override_and_unknown_cluster_is_skipped_with_reason(tree, realdata):
    karpenter = realdata / "karpenter" / "karpenter-v1-spot.yaml"
    nodes = f"duckboat={tree / 'duckboat.json'}"
    # no pool names its cluster: nothing would be compared, which is not a pass
    r = run("scan", "-d", str(karpenter), "-n", nodes, "-o", "json")
    assert r.returncode == 2 and "CLUSTER=PATH" in r.stderr and r.stdout == ""
    r = run("scan", "-d", str(karpenter), "-n", nodes, "-o", "json", "--allow-empty")
    out = json.loads(r.stdout)
    assert any("cluster unknown" in s["reason"] for s in out["skipped"])
    r = run(
        "scan",
        "-d",
        f"duckboat={karpenter}",
        "-n",
        f"duckboat={tree / 'duckboat.json'}",
        "-o",
        "json",
    )
    out = json.loads(r.stdout)
    assert out["summary"]["pools"] == 1
    # the real nodes are in nodegroup custom-1, which the Karpenter file does not define
    assert {(f["pool"], f["field"]) for f in out["findings"]} >= {
        ("custom-1", "pool"),
        ("spot", "nodeCount"),
    }


BAD = [
    ("truncated.yaml", EKSCTL[: EKSCTL.index("effect")], "YAML syntax error"),
    ("cut-mid-file.yaml", EKSCTL[:120], "managedNodeGroups[0]"),
    ("wrongtype.yaml", EKSCTL.replace("minSize: 1", "minSize: [1]"), "minSize"),
    ("binary.yaml", "\x00\x01\x02\x03", "binary data"),
    ("broken.tf", 'resource "aws_eks_node_group" "x" {\n  node_group_name = \n', "HCL"),
]


@pytest.mark.parametrize(("name", "text", "needle"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_file_named_directly_exits_2_naming_it(tree, name, text, needle):
    bad = tree / name
    bad.write_text(text)
    r = run("scan", "-d", str(bad), "-n", str(tree / "duckboat.json"))
    assert r.returncode == 2
    assert str(bad) in r.stderr and needle in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(("name", "text", "needle"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_file_in_a_directory_is_listed_and_the_rest_still_compared(tree, name, text, needle):
    """One bad file does not hide the rest (issue #10, part 4): the good eksctl file is still
    compared, the bad one is listed with its reason — in JSON and always in the table."""
    bad = tree / "desired" / name
    bad.write_text(text)
    r = run("scan", "-d", str(tree / "desired"), "-n", str(tree / "duckboat.json"), "-o", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["summary"]["pools"] == 1
    (problem,) = [s for s in out["skipped"] if s.get("problem")]
    assert problem["path"] == str(bad) and needle in problem["reason"]
    table = run("scan", "-d", str(tree / "desired"), "-n", str(tree / "duckboat.json"))
    assert f"could not read {bad}" in table.stdout


def test_a_50_mb_file_is_refused_with_exit_2(tree):
    big = tree / "huge.yaml"
    with big.open("w") as fh:
        fh.write("a: " + "x" * (50 * 2**20) + "\n")
    r = run("scan", "-d", str(big), "-n", str(tree / "duckboat.json"))
    assert r.returncode == 2
    assert "huge.yaml" in r.stderr and "too large" in r.stderr
    # in a directory it is listed as a file that could not be read
    big.rename(tree / "desired" / "huge.yaml")
    r = run("scan", "-d", str(tree / "desired"), "-n", str(tree / "duckboat.json"), "-o", "json")
    assert r.returncode == 0
    assert any("too large" in s["reason"] for s in json.loads(r.stdout)["skipped"])


def test_missing_paths_and_bad_arguments_exit_2(tree):
    r = run("scan", "-d", str(tree / "nope"), "-n", str(tree / "duckboat.json"))
    assert r.returncode == 2 and "no such file" in r.stderr
    r = run(
        "scan",
        "-d",
        str(tree / "desired"),
        "-n",
        str(tree / "duckboat.json"),
        "--fail-on",
        "severe",
    )
    assert r.returncode == 2
    r = run("scan", "-d", str(tree / "desired"))
    assert r.returncode == 2 and "--nodes" in r.stderr


def test_config_overrides_severity_and_ignores(tree):
    nodes = json.loads((tree / "duckboat.json").read_text())
    nodes["items"][1]["spec"]["taints"] = []
    (tree / "duckboat.json").write_text(json.dumps(nodes))
    cfg = tree / "cfg.yaml"
    cfg.write_text('scan:\n  severities: {"L2/taints.*": low}\n')
    r = run(
        "scan",
        "-d",
        str(tree / "desired"),
        "-n",
        str(tree / "duckboat.json"),
        "-c",
        str(cfg),
        "-o",
        "json",
    )
    assert r.returncode == 0
    (f,) = json.loads(r.stdout)["findings"]
    assert (f["field"], f["severity"]) == ("taints.type:NoSchedule", "low")
    cfg.write_text("scan:\n  ignore: [{pool: custom-*, layer: L2}]\n")
    r = run(
        "scan",
        "-d",
        str(tree / "desired"),
        "-n",
        str(tree / "duckboat.json"),
        "-c",
        str(cfg),
        "-o",
        "json",
    )
    assert json.loads(r.stdout)["findings"] == []
    cfg.write_text("scan:\n  tolerance: lots\n")
    r = run("scan", "-d", str(tree / "desired"), "-n", str(tree / "duckboat.json"), "-c", str(cfg))
    assert r.returncode == 2 and "cfg.yaml" in r.stderr and "scan.tolerance" in r.stderr


def test_demo_once_finds_planted_drift_in_every_layer_and_exits_1():
    r = run("demo", "--once", "--format", "json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    s = out["summary"]
    assert s["clusters"] >= 3 and s["pools"] >= 12 and s["nodes"] >= 100
    layers = {f["layer"] for f in out["findings"]}
    assert layers == {"L1", "L2", "L3", "L4", "SPEC", "COUNT"}
    incident = [
        f for f in out["findings"] if f["field"] == "instanceType" and f["severity"] == "critical"
    ]
    assert incident[0]["expected"] == "m5.large" and incident[0]["actual"] == "t3.medium"
    assert incident[0]["nodes"] == ["ip-10-0-1-23.eu-west-1.compute.internal"]
    # the cordoned node's transient taint is not drift
    assert not any("unschedulable" in f["field"] for f in out["findings"])


def test_demo_live_mode_prints_changes_and_finding_events():
    r = run("demo", "--steps", "4", "--interval", "0", "--format", "json")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert sum(1 for x in lines if x["type"] == "change") == 4
    assert {x["type"] for x in lines} <= {
        "change",
        "finding.appeared",
        "finding.cleared",
        "finding.changed",
    }


def test_help_explains_the_commands():
    r = run("scan", "--help")
    assert r.returncode == 0
    for needle in ("--desired", "--nodes", "--fail-on", "--format", "CLUSTER="):
        assert needle in r.stdout


def _shown(u: dict) -> str:
    """``pool field``, with the attribute it was read from when that is another name."""
    attr = u["attribute"]
    return f"{u['pool']} {u['field']}" + ("" if attr in (None, u["field"]) else f" ({attr})")


def test_unresolved_values_are_in_the_table_output_not_only_in_json(tmp_path, realdata):
    """A GKE module fed by variables: the table says which desired values were not checked
    (the first few, then how many more) and --verbose lists every one with its file."""
    src = realdata / "terraform" / "tf-gke-simple-regional-private-main.tf"
    shutil.copy(src, tmp_path / "main.tf")
    (tmp_path / "nodes.json").write_text('{"apiVersion": "v1", "kind": "List", "items": []}')
    args = ("scan", "-d", f"c1={tmp_path / 'main.tf'}", "-n", f"c1={tmp_path / 'nodes.json'}")
    unresolved = json.loads(run(*args, "--format", "json").stdout)["unresolved"]
    assert len(unresolved) == 3  # the cluster is given (c1=): its variable is not among them
    short = run(*args).stdout
    assert "3 desired values unresolved (not checked): " in short
    assert f"{_shown(unresolved[0])} = {unresolved[0]['expression']}" in short
    assert "more (--verbose" not in short  # all three shown
    (tmp_path / "second.tf").write_text(src.read_text().replace('"pool-01"', '"pool-02"'))
    both = run("scan", "-d", f"c1={tmp_path}", "-n", f"c1={tmp_path / 'nodes.json'}").stdout
    assert "6 desired values unresolved (not checked): " in both
    assert "+3 more (--verbose or --format json lists them)" in both
    full = run(*args, "--verbose").stdout
    for u in unresolved:
        assert f"{_shown(u)} = {u['expression']} ({u['source']})" in full
    fields = json.loads(run(*args, "--format", "json").stdout)["summary"]["fields"]
    assert fields["unresolved"] == len(unresolved)  # the two counts count the same entries


def _auto_node(name: str, pool: str, *, capacity: str = "on-demand", taints=()) -> dict:
    labels = {
        "karpenter.sh/nodepool": pool,
        "karpenter.sh/capacity-type": capacity,
        "eks.amazonaws.com/compute-type": "auto",
        "eks.amazonaws.com/instance-category": "m",
        "eks.amazonaws.com/instance-generation": "6",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "m6i.large",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": list(taints)},
        "status": {"nodeInfo": {"kubeletVersion": "v1.33.4-eks-1234567"}},
    }


def test_an_eks_auto_mode_cluster_is_diffed_against_its_built_in_node_pools(tmp_path, realdata):
    """eksctl's Auto Mode example names no node group, only ``autoModeConfig.nodePools``: its
    nodes are checked against the built-in NodePools' documented requirements and taint — a
    spot node in general-purpose and a system node without ``CriticalAddonsOnly`` are drift,
    the matching nodes are not."""
    critical = {"key": "CriticalAddonsOnly", "effect": "NoSchedule"}
    dump = tmp_path / "auto.json"
    dump.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    _auto_node("i-good", "general-purpose"),
                    _auto_node("i-spot", "general-purpose", capacity="spot"),
                    _auto_node("i-sys", "system", taints=[critical]),
                    _auto_node("i-sys-bare", "system"),
                ],
            }
        )
    )
    desired = realdata / "eksctl" / "eksctl-42-auto-mode.yaml"
    r = run("scan", "-d", str(desired), "-n", f"auto-mode-cluster={dump}", "-o", "json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["summary"]["pools"] == 2
    got = {(f["pool"], f["field"], tuple(f["nodes"])) for f in out["findings"]}
    assert got == {
        ("general-purpose", "requirements.karpenter.sh/capacity-type", ("i-spot",)),
        ("system", "taints.CriticalAddonsOnly:NoSchedule", ("i-sys-bare",)),
    }


def test_nothing_to_compare_says_what_each_file_defines_instead(tmp_path, tree):
    """Exit 2 when no pool is found, and the message says why per file (up to three), not
    only how many files were read."""
    tmp_path = tmp_path / "only-these"
    tmp_path.mkdir()
    (tmp_path / "cp.yaml").write_text(
        "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {name: c1, region: x}\n"
    )
    (tmp_path / "auto.tf").write_text(
        'resource "aws_eks_cluster" "c" {\n  name = "c1"\n'
        '  compute_config {\n    enabled = var.auto\n    node_pools = ["system"]\n  }\n}\n'
    )
    r = run("scan", "-d", str(tmp_path), "-n", f"c1={tree / 'duckboat.json'}")
    assert r.returncode == 2 and r.stdout == ""
    assert "read 2 files" in r.stderr
    assert "cp.yaml: no node-pool definition (eksctl ClusterConfig)" in r.stderr
    assert "compute_config.enabled = var.auto: whether Auto Mode is on is unknown" in r.stderr
