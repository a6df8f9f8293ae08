"""``fleetwarden fleet versions | diff`` and ``fleetwarden gate`` as pipelines and Argo CD call
them: exit codes, the JSON contract, messages; and the Argo CD hook manifests in deploy/.

The commands are tested through ``register()`` on a fresh Typer app (CliRunner), and through
the installed console script in a subprocess once ``cli.py`` wires them (until then those
tests skip and say so).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from fleetwarden.cli import fleet as fleet_cli
from fleetwarden.cli import gate as gate_cli
from tests.core.test_workloads import liveify, load_docs

ROOT = Path(__file__).resolve().parents[2]
EXE = shutil.which("fleetwarden", path=str(Path(sys.executable).parent)) or "fleetwarden"

FINDING_KEYS = {
    "id",
    "cluster",
    "pool",
    "layer",
    "field",
    "expected",
    "actual",
    "severity",
    "nodes",
    "source",
}
ROW_KEYS = {
    "cluster",
    "kind",
    "namespace",
    "workload",
    "container",
    "image",
    "desiredImage",
    "drift",
}

EKSCTL = """\
apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata: {name: duckboat, version: "1.21"}
managedNodeGroups:
  - name: custom-1
    instanceType: m6gd.2xlarge
    minSize: 1
    maxSize: 2
    volumeSize: 128
    amiFamily: AmazonLinux2
    labels: {workload-type: batch}
    taints: [{key: type, value: hound, effect: NoSchedule}]
"""


def kubectl_list(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": objs, "metadata": {"resourceVersion": ""}}


def _container(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in obj["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def _find(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == name)


@pytest.fixture()
def fleet(tmp_path: Path, realdata: Path) -> Path:
    """The boutique app in Git; three clusters: eu clean, us one image behind, ap with a
    sidecar added by hand and adservice missing."""
    desired = tmp_path / "git" / "shop"
    desired.mkdir(parents=True)
    shutil.copy(realdata / "manifests" / "microservices-demo-release-all.yaml", desired)
    shutil.copy(realdata / "manifests" / "microservices-demo-kustomization.yaml", desired)
    docs = [d for d in load_docs(desired / "microservices-demo-release-all.yaml")]
    live = [liveify(d, namespace="boutique") for d in docs if d["kind"] == "Deployment"]
    dumps = tmp_path / "workloads"
    dumps.mkdir()
    (dumps / "eu.json").write_text(json.dumps(kubectl_list(live), indent=4))
    us = copy.deepcopy(live)
    c = _container(_find(us, "frontend"), "server")
    c["image"] = c["image"].replace("v0.10.6", "v0.10.5")
    (dumps / "us.json").write_text(json.dumps(kubectl_list(us)))
    ap = [o for o in copy.deepcopy(live) if o["metadata"]["name"] != "adservice"]
    _find(ap, "frontend")["spec"]["template"]["spec"]["containers"].append(
        {"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.24.0"}
    )
    (dumps / "ap.yaml").write_text(yaml.safe_dump(kubectl_list(ap)))
    return tmp_path


@pytest.fixture()
def gate_tree(tmp_path: Path, realdata: Path) -> Path:
    """podinfo pinned to the EKS pool custom-1 (tolerating its taint); real EKS nodes."""
    (tmp_path / "git" / "pools").mkdir(parents=True)
    (tmp_path / "git" / "pools" / "eksctl.yaml").write_text(EKSCTL)
    (tmp_path / "git" / "podinfo").mkdir()
    (doc,) = load_docs(realdata / "manifests" / "podinfo-kustomize-deployment.yaml")
    doc["spec"]["template"]["spec"]["nodeSelector"] = {"workload-type": "batch"}
    doc["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "type", "operator": "Equal", "value": "hound", "effect": "NoSchedule"}
    ]
    (tmp_path / "git" / "podinfo" / "deployment.yaml").write_text(yaml.safe_dump(doc))
    shutil.copy(realdata / "manifests" / "podinfo-kustomize-hpa.yaml", tmp_path / "git" / "podinfo")
    nodes = json.loads((realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json").read_text())
    for item in nodes["items"]:
        item["metadata"]["labels"]["workload-type"] = "batch"
        # eksctl labels every node of its groups (the real dump is of a group made otherwise)
        item["metadata"]["labels"]["alpha.eksctl.io/cluster-name"] = "duckboat"
        item["metadata"]["labels"]["alpha.eksctl.io/nodegroup-name"] = "custom-1"
    (tmp_path / "duckboat.json").write_text(json.dumps(nodes))
    return tmp_path


def lose_label(tree: Path) -> None:
    nodes = json.loads((tree / "duckboat.json").read_text())
    for item in nodes["items"]:
        del item["metadata"]["labels"]["workload-type"]
    (tree / "duckboat.json").write_text(json.dumps(nodes))


# --------------------------------------------------------------------------- runners


def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    fleet_cli.register(app)
    gate_cli.register(app)

    @app.callback()
    def _root() -> None:  # a group, like the real command line
        """fleetwarden (test harness)"""

    return app


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(_app(), list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def versions(tree: Path, *extra: str) -> Any:
    return invoke(
        "fleet",
        "versions",
        "--app",
        "shop",
        "--desired",
        str(tree / "git" / "shop"),
        "--workloads",
        str(tree / "workloads"),
        *extra,
    )


def fleet_diff(tree: Path, *extra: str) -> Any:
    return invoke(
        "fleet",
        "diff",
        "--app",
        "shop",
        "-d",
        str(tree / "git" / "shop"),
        "-w",
        str(tree / "workloads"),
        *extra,
    )


def gate(tree: Path, *extra: str) -> Any:
    return invoke(
        "gate",
        "--app",
        "podinfo",
        "--desired",
        str(tree / "git"),
        "--nodes",
        str(tree / "duckboat.json"),
        *extra,
    )


# --------------------------------------------------------------------------- fleet versions


def test_versions_json_contract_and_divergent_clusters(fleet):
    r = versions(fleet, "--format", "json")
    assert r.exit_code == 1, r.output  # image drift is high
    doc = json.loads(r.stdout)
    assert doc["app"] == "shop"
    assert all(set(row) >= ROW_KEYS for row in doc["rows"])
    by = {(r["cluster"], r["workload"], r["container"]): r for r in doc["rows"]}
    us = by[("us", "frontend", "server")]
    assert us["drift"] is True and us["divergesFromPeers"] is True
    assert us["image"].endswith(":v0.10.5") and us["desiredImage"].endswith(":v0.10.6")
    assert by[("eu", "frontend", "server")]["drift"] is False
    assert by[("ap", "frontend", "istio-proxy")]["desiredImage"] is None
    assert by[("ap", "adservice", "server")]["image"] is None
    assert doc["summary"]["clustersDivergingFromGit"] == ["ap", "us"]
    assert doc["summary"]["clusters"] == 3
    assert by[("eu", "loadgenerator", "frontend-check")]["init"] is True


def test_versions_table_names_the_divergent_clusters(fleet):
    r = versions(fleet)
    assert r.exit_code == 1
    assert "clusters diverging from Git: ap, us" in r.stdout.replace("\n", " ")


def test_versions_drift_only_keeps_the_summary(fleet):
    doc = json.loads(versions(fleet, "-o", "json", "--drift-only").stdout)
    assert {(r["cluster"], r["workload"], r["container"]) for r in doc["rows"]} == {
        ("us", "frontend", "server"),
        ("ap", "frontend", "istio-proxy"),
        ("ap", "adservice", "server"),
    }
    assert doc["summary"]["rows"] > len(doc["rows"])


def test_versions_matrix_for_a_small_app(gate_tree, tmp_path):
    """Few containers: one row per cluster, one column per container, Git's images on top."""
    (doc,) = load_docs(gate_tree / "git" / "podinfo" / "deployment.yaml")
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    for cluster, tag in (("eu", "6.14.1"), ("us", "6.14.1"), ("ap", "6.13.0")):
        live = liveify(doc, app="podinfo")
        live["spec"]["template"]["spec"]["containers"][0]["image"] = (
            f"ghcr.io/stefanprodan/podinfo:{tag}"
        )
        (dumps / f"{cluster}.json").write_text(json.dumps(kubectl_list([live])))
    r = invoke(
        "fleet",
        "versions",
        "--app",
        "podinfo",
        "-d",
        str(gate_tree / "git" / "podinfo"),
        "-w",
        str(dumps),
    )
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    git_row = next(line for line in lines if "Git" in line)
    assert "ghcr.io/stefanprodan/podinfo:6.14.1" in git_row
    ap_row = next(line for line in lines if line.strip("│ ").startswith("ap"))
    assert ":6.13.0" in ap_row and "ghcr.io" not in ap_row  # same repository: the tag only
    assert "from Git: ap;" in r.stdout.replace("\n", " ")


def test_versions_of_a_clean_fleet_exit_0(fleet):
    shutil.copy(fleet / "workloads" / "eu.json", fleet / "workloads" / "us.json")
    (fleet / "workloads" / "ap.yaml").unlink()
    r = versions(fleet, "-o", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["summary"]["drift"] == 0


# --------------------------------------------------------------------------- fleet diff


def test_diff_json_has_scans_finding_shape(fleet):
    r = fleet_diff(fleet, "--format", "json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    found = {(f["cluster"], f["field"]) for f in doc["findings"]}
    assert found == {
        ("us", "image.server"),
        ("ap", "sidecar.istio-proxy"),
        ("ap", "workload"),
    }
    for f in doc["findings"]:
        assert set(f) >= FINDING_KEYS and f["layer"] == "WORKLOAD"
    assert doc["summary"]["clusters"] == 3
    assert doc["summary"]["bySeverity"]["high"] == 3
    assert any(s["reason"].startswith("a Kustomization") for s in doc["skipped"])


def test_diff_fail_on_and_severity_config(fleet, tmp_path):
    assert fleet_diff(fleet, "--fail-on", "critical").exit_code == 0
    config = tmp_path / "fw.yaml"
    config.write_text(
        "fleet:\n"
        "  severities: {'WORKLOAD/image.*': critical}\n"
        "  ignore: [{cluster: ap}]\n"
        "  ignoreDifferences:\n"
        "    - group: apps\n"
        "      kind: Deployment\n"
        "      jqPathExpressions:\n"
        "        - '.spec.template.spec.containers[] | select(.name == \"istio-proxy\")'\n"
    )
    r = fleet_diff(fleet, "--config", str(config), "-o", "json", "--fail-on", "critical")
    assert r.exit_code == 1
    (f,) = json.loads(r.stdout)["findings"]
    assert (f["cluster"], f["field"], f["severity"]) == ("us", "image.server", "critical")


def test_diff_table_lists_the_findings(fleet):
    r = fleet_diff(fleet)
    assert "3 findings (3 high) for shop in 3 clusters" in r.stdout
    assert "Deployment/boutique/frontend" in r.stdout


# --------------------------------------------------------------------------- gate


def test_gate_passes_a_clean_pool(gate_tree):
    r = gate(gate_tree)
    assert r.exit_code == 0, r.output
    assert "gate: PASS" in r.stdout


def test_gate_blocks_when_the_pool_lost_its_label(gate_tree):
    lose_label(gate_tree)
    r = gate(gate_tree, "--format", "json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["decision"] == "block"
    assert any("matches no node" in reason for reason in doc["reasons"])
    assert {f["field"] for f in doc["findings"]} == {
        "schedule.nodeSelector",
        "labels.workload-type",
    }
    assert doc["targets"] == [
        {
            "cluster": "duckboat",
            "workload": "Deployment/default/podinfo",
            "pools": ["custom-1"],
            "schedulableOn": [],
        }
    ]
    assert "blocked sync of podinfo" in r.stderr


def test_gate_table_says_why(gate_tree):
    lose_label(gate_tree)
    r = gate(gate_tree)
    assert r.exit_code == 1
    assert "gate: BLOCK" in r.stdout and "workload-type=batch matches no node" in r.stdout


def wrong_toleration_and_wrong_instance_type(tree: Path) -> None:
    """podinfo tolerates type=houndd (the pool's taint is type=hound), and every node of its
    pool runs t3.medium where Git says m6gd.2xlarge: two reasons to block, both at once."""
    path = tree / "git" / "podinfo" / "deployment.yaml"
    path.write_text(path.read_text().replace("value: hound", "value: houndd"))
    nodes = json.loads((tree / "duckboat.json").read_text())
    for item in nodes["items"]:
        for key in ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type"):
            item["metadata"]["labels"][key] = "t3.medium"
    (tree / "duckboat.json").write_text(json.dumps(nodes))


def test_gate_gives_the_pools_drift_with_a_wrong_toleration_at_once(gate_tree):
    """A new user fixed the toleration, re-ran, and only then saw the pool's critical drift:
    the pool the nodeSelector pins the workload to is checked even when a taint turns it away."""
    wrong_toleration_and_wrong_instance_type(gate_tree)
    r = gate(gate_tree, "--format", "json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert {f["field"] for f in doc["findings"]} == {"schedule.tolerations", "instanceType"}
    assert len(doc["reasons"]) == 2
    assert any("drifts: SPEC instanceType" in reason for reason in doc["reasons"])
    assert doc["targets"][0]["pools"] == ["custom-1"]


def test_gate_table_gives_each_reason_once(gate_tree):
    wrong_toleration_and_wrong_instance_type(gate_tree)
    r = gate(gate_tree)
    assert r.exit_code == 1
    out = r.stdout.replace("\n", " ")
    assert "gate: BLOCK sync of podinfo (2 reasons):" in out
    assert out.count("carry taints it does not tolerate") == 1, r.stdout
    assert out.count("expected m6gd.2xlarge, actual t3.medium on 2 nodes") == 1, r.stdout
    assert "'m6gd.2xlarge'" not in out  # values, not Python reprs
    assert r.stderr == ""  # the table said it: no third copy on stderr


def test_gate_uses_the_live_hpa_minimum_for_capacity(gate_tree):
    # Git's own replicas would fit; the live HPA's minimum of 200 pods does not
    dump = kubectl_list(
        [
            liveify(
                {
                    "apiVersion": "autoscaling/v2",
                    "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": "podinfo"},
                    "spec": {
                        "scaleTargetRef": {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": "podinfo",
                        },
                        "minReplicas": 200,
                        "maxReplicas": 300,
                    },
                },
                app="podinfo",
            )
        ]
    )
    (gate_tree / "live.json").write_text(json.dumps(dump))
    (gate_tree / "git" / "podinfo" / "podinfo-kustomize-hpa.yaml").unlink()
    r = gate(gate_tree, "--workloads", f"duckboat={gate_tree / 'live.json'}", "-o", "json")
    assert r.exit_code == 1, r.output
    found = {f["field"]: (f["expected"], f["actual"]) for f in json.loads(r.stdout)["findings"]}
    assert found == {
        "schedule.capacity.pods": ("200", "116"),  # 2 nodes x 58 pods
        "schedule.capacity.cpu": ("20", "15820m"),  # 200 x 100m vs 2 x 7910m
    }


# --------------------------------------------------------------------------- exit 2


def test_unreadable_inputs_exit_2_naming_the_file(fleet, tmp_path):
    r = invoke(
        "fleet",
        "diff",
        "--app",
        "shop",
        "-d",
        str(tmp_path / "nope"),
        "-w",
        str(fleet / "workloads"),
    )
    assert r.exit_code == 2 and "nope" in r.stderr and "no such file" in r.stderr
    (fleet / "workloads" / "eu.json").write_text('{"kind": "List", "items": [')
    # named directly, a dump that does not parse is an error naming it
    r = invoke(
        "fleet",
        "diff",
        "--app",
        "shop",
        "-d",
        str(fleet / "git" / "shop"),
        "-w",
        str(fleet / "workloads" / "eu.json"),
    )
    assert r.exit_code == 2 and "eu.json" in r.stderr and "invalid JSON" in r.stderr


def test_a_dump_in_a_directory_that_does_not_parse_is_skipped_and_its_cluster_left_out(fleet):
    """eu's dump is cut short: us and ap are still compared (us' image drift: exit 1); eu is
    not compared at all (half its objects would show the rest as missing) and says why."""
    eu = fleet / "workloads" / "eu.json"
    eu.write_text(eu.read_text()[:5000])
    r = fleet_diff(fleet, "-o", "json")
    assert r.exit_code == 1, r.output
    out = json.loads(r.stdout)
    assert {f["cluster"] for f in out["findings"]} == {"us", "ap"}
    assert out["summary"]["clusters"] == 2
    [skip] = [s for s in out["skipped"] if s["path"] == str(eu)]
    assert "invalid JSON" in skip["reason"] and "cluster eu not compared" in skip["reason"]
    assert out["skipped"][0] == skip  # unreadable files first
    table = fleet_diff(fleet)
    assert table.exit_code == 1
    assert "skipped 1 files (not read or not parsed):" in table.stdout
    assert f"{eu}: " in table.stdout and "kustomization" not in table.stdout  # -v for those
    versions_json = json.loads(versions(fleet, "-o", "json").stdout)
    assert versions_json["summary"]["clusters"] == 2
    assert skip in versions_json["skipped"]
    assert "skipped 1 files" in versions(fleet).stdout


def test_desired_files_that_do_not_parse_are_skipped_and_the_rest_compared(fleet):
    shop = fleet / "git" / "shop"
    (shop / "broken.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: [\n")
    (shop / "templates").mkdir()
    (shop / "templates" / "deploy.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"
        "spec:\n  {{- with .Values.x }}\n"
    )
    (shop / "image.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    r = fleet_diff(fleet, "-o", "json")
    assert r.exit_code == 1, r.output
    out = json.loads(r.stdout)
    assert len(out["findings"]) == 3  # as without the broken files
    reasons = {s["path"]: s["reason"] for s in out["skipped"]}
    assert "YAML syntax error" in reasons[str(shop / "broken.yaml")]
    assert "unrendered Helm template" in reasons[str(shop / "templates" / "deploy.yaml")]
    assert "binary data" in reasons[str(shop / "image.yaml")]
    table = fleet_diff(fleet)
    assert "skipped 3 files (not read or not parsed):" in table.stdout
    # named directly, the broken file stops the run
    r = invoke(
        "fleet", "diff", "--app", "shop", "-d", str(shop / "broken.yaml"),
        "-d", str(shop), "-w", str(fleet / "workloads"),
    )  # fmt: skip
    assert r.exit_code == 2 and "broken.yaml:4: YAML syntax error" in r.stderr


def test_when_every_dump_is_skipped_there_is_nothing_to_compare_exit_2(fleet):
    for dump in (fleet / "workloads").iterdir():
        dump.write_text("{")
    r = fleet_diff(fleet)
    assert r.exit_code == 2
    assert "no cluster to compare: 3 files were skipped" in r.stderr


def test_the_gate_stays_strict_about_files_it_cannot_parse(gate_tree):
    bad = gate_tree / "git" / "podinfo" / "broken.yaml"
    bad.write_text("kind: [\n")
    r = gate(gate_tree)
    assert r.exit_code == 2 and "broken.yaml" in r.stderr and "YAML syntax error" in r.stderr


def test_the_gate_stays_strict_about_an_unrendered_helm_template(gate_tree):
    """A chart template in the tree is a file the gate cannot read: the sync is not let
    through past it (it was skipped, and the gate passed)."""
    chart = gate_tree / "git" / "podinfo" / "chart" / "templates"
    chart.mkdir(parents=True)
    (chart / "deployment.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"
        "spec:\n  template:\n    spec:\n      nodeSelector: {{ toYaml .Values.sel }}\n"
    )
    r = gate(gate_tree)
    assert r.exit_code == 2, r.output
    assert "deployment.yaml" in r.stderr and "unrendered Helm template" in r.stderr


def _kustomized(tree: Path) -> None:
    """podinfo's directory as a kustomize base with an image override on top."""
    (tree / "git" / "podinfo" / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["deployment.yaml", "podinfo-kustomize-hpa.yaml"],
                "images": [{"name": "ghcr.io/stefanprodan/podinfo", "newTag": "6.9.9"}],
            }
        )
    )


def test_the_gate_refuses_files_a_kustomization_rewrites(gate_tree):
    _kustomized(gate_tree)
    r = gate(gate_tree)
    assert r.exit_code == 2, r.output
    assert "rewritten by" in r.stderr and "kustomization.yaml (images)" in r.stderr
    assert "kustomize build" in r.stderr


def test_fleet_never_passes_a_stale_cluster_against_a_rewritten_base(gate_tree):
    """The cluster runs the base's image while the kustomization asks for 6.9.9: reading the
    base as written said "0 findings" (exit 0). Now nothing of the app is comparable: exit 2
    naming the kustomization and what to give instead."""
    _kustomized(gate_tree)
    (doc,) = load_docs(gate_tree / "git" / "podinfo" / "deployment.yaml")
    live = liveify(doc, namespace="default")
    live["metadata"].setdefault("labels", {})["app.kubernetes.io/instance"] = "podinfo"
    (gate_tree / "prod.json").write_text(json.dumps(kubectl_list([live])))
    for command in ("versions", "diff"):
        r = invoke(
            "fleet", command, "--app", "podinfo",
            "-d", str(gate_tree / "git" / "podinfo"), "-w", str(gate_tree / "prod.json"),
        )  # fmt: skip
        assert r.exit_code == 2, r.output
        assert "rewritten by" in r.stderr and "(images)" in r.stderr


def test_a_rewritten_file_beside_rendered_ones_is_listed_as_not_read(gate_tree):
    _kustomized(gate_tree)
    rendered = gate_tree / "git" / "rendered.yaml"
    (doc,) = load_docs(gate_tree / "git" / "podinfo" / "deployment.yaml")
    rendered.write_text(yaml.safe_dump(doc))
    live = liveify(doc, namespace="default")
    (gate_tree / "prod.json").write_text(json.dumps(kubectl_list([live])))
    r = invoke(
        "fleet", "diff", "--app", "podinfo", "-o", "json",
        "-d", str(gate_tree / "git"), "-w", str(gate_tree / "prod.json"),
    )  # fmt: skip
    skipped = {s["path"]: s for s in json.loads(r.stdout)["skipped"]}
    bad = skipped[str(gate_tree / "git" / "podinfo" / "deployment.yaml")]
    assert bad.get("problem") is True and "rewritten by" in bad["reason"]


def test_fleet_never_passes_a_base_an_argocd_application_renders_with_overrides(gate_tree):
    """An Application in the tree overrides podinfo's image (kustomize.images): the files of
    its path are not the desired state as written, so no silent pass against them."""
    app = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "podinfo", "namespace": "argocd"},
        "spec": {
            "project": "default",
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "default"},
            "source": {
                "repoURL": "https://example.com/repo.git",
                "path": "podinfo",
                "kustomize": {"images": ["ghcr.io/stefanprodan/podinfo:6.9.9"]},
            },
        },
    }
    (gate_tree / "git" / "app.yaml").write_text(yaml.safe_dump(app))
    (doc,) = load_docs(gate_tree / "git" / "podinfo" / "deployment.yaml")
    live = liveify(doc, namespace="default")
    (gate_tree / "prod.json").write_text(json.dumps(kubectl_list([live])))
    r = invoke(
        "fleet", "diff", "--app", "podinfo",
        "-d", str(gate_tree / "git"), "-w", str(gate_tree / "prod.json"),
    )  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "Argo CD Application argocd/podinfo" in r.stderr and "kustomize.images" in r.stderr
    assert gate(gate_tree).exit_code == 2


def _override_app(path: str) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "podinfo", "namespace": "argocd"},
        "spec": {
            "project": "default",
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "default"},
            "source": {
                "repoURL": "https://example.com/repo.git",
                "path": path,
                "kustomize": {"images": ["ghcr.io/stefanprodan/podinfo:6.9.9"]},
            },
        },
    }


def test_the_gate_resolves_an_application_path_from_the_checkouts_root(gate_tree):
    """In a Git checkout, the Application's podinfo is the podinfo at the root: team-b's copy
    is compared (and passes); matched by suffix it was refused. The root's own podinfo is not."""
    git = gate_tree / "git"
    (git / ".git").mkdir()
    (git / "argocd").mkdir()
    (git / "argocd" / "app.yaml").write_text(yaml.safe_dump(_override_app("podinfo")))
    (git / "team-b").mkdir()
    (git / "podinfo").rename(git / "team-b" / "podinfo")
    r = gate(gate_tree)
    assert r.exit_code == 0, r.output
    (git / "team-b" / "podinfo").rename(git / "podinfo")
    r = gate(gate_tree)
    assert r.exit_code == 2 and "Argo CD Application argocd/podinfo" in r.stderr


def test_the_gate_never_passes_a_directory_an_applicationset_renders_with_overrides(gate_tree):
    """A git directories generator (every top directory but pools) whose template overrides
    the image: podinfo is one of its Applications' paths; ignored, the gate passed."""
    git = gate_tree / "git"
    (git / ".git").mkdir()
    app_set = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "ApplicationSet",
        "metadata": {"name": "addons", "namespace": "argocd"},
        "spec": {
            "goTemplate": True,
            "generators": [
                {
                    "git": {
                        "repoURL": "https://example.com/repo.git",
                        "revision": "HEAD",
                        "directories": [{"path": "*"}, {"path": "pools", "exclude": True}],
                    }
                }
            ],
            "template": {
                "metadata": {"name": "{{.path.basename}}"},
                "spec": _override_app("{{.path.path}}")["spec"],
            },
        },
    }
    (git / "appset.yaml").write_text(yaml.safe_dump(app_set))
    r = gate(gate_tree)
    assert r.exit_code == 2, r.output
    assert "Argo CD ApplicationSet argocd/addons" in r.stderr and "as podinfo" in r.stderr


def test_unknown_app_exits_2_listing_the_apps_found(fleet):
    tagged = fleet / "git" / "other"
    tagged.mkdir()
    (tagged / "x.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
        "  labels: {app.kubernetes.io/instance: billing}\n"
    )
    r = invoke(
        "fleet", "versions", "--app", "shop", "-d", str(tagged), "-w", str(fleet / "workloads")
    )
    assert r.exit_code == 2
    assert "no workload" in r.stderr and "billing" in r.stderr


def test_bad_config_exits_2_naming_the_field(fleet, tmp_path):
    config = tmp_path / "fw.yaml"
    config.write_text(
        "fleet:\n  ignoreDifferences:\n    - kind: Deployment\n      jqPathExpressions: ['..x']\n"
    )
    r = fleet_diff(fleet, "--config", str(config))
    assert r.exit_code == 2
    assert "fw.yaml" in r.stderr and "fleet.ignoreDifferences[0]" in r.stderr


# --------------------------------------------------------------------------- deploy/argocd

DEPLOY = ROOT / "deploy" / "argocd"


def manifests(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def test_hook_job_is_a_presync_hook_that_runs_the_gate():
    (job,) = manifests("presync-gate-job.yaml")
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    notes = job["metadata"]["annotations"]
    assert notes["argocd.argoproj.io/hook"] == "PreSync"
    assert set(notes["argocd.argoproj.io/hook-delete-policy"].split(",")) <= {
        "HookSucceeded",
        "HookFailed",
        "BeforeHookCreation",
    }
    spec = job["spec"]
    assert spec["backoffLimit"] == 0
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["serviceAccountName"] == "fleetwarden-gate"
    (gate_c,) = pod["containers"]
    assert gate_c["args"][0] == "gate"
    assert any(a.startswith("--app=") for a in gate_c["args"])
    assert any(a.startswith("--in-cluster=") for a in gate_c["args"])
    names = [c["name"] for c in pod["initContainers"] + pod["containers"]]
    assert len(names) == len(set(names))
    volumes = {v["name"] for v in pod["volumes"]}
    for c in pod["initContainers"] + pod["containers"]:
        assert {m["name"] for m in c.get("volumeMounts", [])} <= volumes
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert "limits" in c["resources"]
    # only the gate sees the ServiceAccount token; git-sync does not
    with_token = [
        c["name"]
        for c in pod["initContainers"] + pod["containers"]
        if any(m["name"] == "token" for m in c.get("volumeMounts", []))
    ]
    assert with_token == ["gate"]
    assert pod["automountServiceAccountToken"] is False


def test_gate_rbac_is_read_only_and_consistent_with_the_job():
    objs = {(o["kind"], o["metadata"]["name"]): o for o in manifests("presync-gate-rbac.yaml")}
    (job,) = manifests("presync-gate-job.yaml")
    sa = job["spec"]["template"]["spec"]["serviceAccountName"]
    assert ("ServiceAccount", sa) in objs
    for obj in objs.values():
        notes = obj["metadata"]["annotations"]
        assert notes["argocd.argoproj.io/hook"] == "PreSync"
        assert int(notes["argocd.argoproj.io/sync-wave"]) < 0  # before the Job (wave 0)
    rules = [
        (group, resource, verb)
        for kind in ("ClusterRole", "Role")
        for (k, _), o in objs.items()
        if k == kind
        for rule in o["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    ]
    assert ("", "nodes", "list") in rules and ("", "nodes", "get") in rules
    assert ("apps", "deployments", "list") in rules
    assert ("autoscaling", "horizontalpodautoscalers", "list") in rules
    assert {verb for *_, verb in rules} <= {"get", "list"}
    assert not any(resource == "secrets" for _, resource, _ in rules)
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        (binding,) = [o for (k, _), o in objs.items() if k == kind]
        assert (role_kind, binding["roleRef"]["name"]) in objs
        assert binding["roleRef"]["kind"] == role_kind
        assert binding["subjects"][0] == {
            **binding["subjects"][0],
            "kind": "ServiceAccount",
            "name": sa,
        }
    crb = next(o for (k, _), o in objs.items() if k == "ClusterRoleBinding")
    assert crb["subjects"][0]["namespace"]  # required for a ServiceAccount in a cluster binding


# --------------------------------------------------------------------------- installed CLI


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120, env=env)


def test_installed_fleet_diff_and_versions(fleet):
    r = run(
        "fleet",
        "diff",
        "--app",
        "shop",
        "-d",
        str(fleet / "git" / "shop"),
        "-w",
        str(fleet / "workloads"),
        "-o",
        "json",
    )
    assert r.returncode == 1, r.stderr
    assert len(json.loads(r.stdout)["findings"]) == 3
    r = run(
        "fleet",
        "versions",
        "--app",
        "shop",
        "-d",
        str(fleet / "git" / "shop"),
        "-w",
        str(fleet / "workloads"),
        "-o",
        "json",
    )
    assert r.returncode == 1 and json.loads(r.stdout)["summary"]["clustersDivergingFromGit"] == [
        "ap",
        "us",
    ]


def test_installed_gate_passes_then_blocks(gate_tree):
    args = [
        "gate",
        "--app",
        "podinfo",
        "-d",
        str(gate_tree / "git"),
        "-n",
        str(gate_tree / "duckboat.json"),
    ]
    r = run(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    lose_label(gate_tree)
    r = run(*args)
    assert r.returncode == 1
    # the hook's log ends with the reasons (Argo CD shows its last lines), each said once
    assert "gate: BLOCK sync of podinfo" in r.stdout and r.stderr == ""
    assert "drifts: L1 labels.workload-type" in r.stdout.splitlines()[-1]


def test_installed_gate_bad_input_exits_2(gate_tree):
    r = run(
        "gate",
        "--app",
        "podinfo",
        "-d",
        str(gate_tree / "git"),
        "-n",
        str(gate_tree / "missing.json"),
    )
    assert r.returncode == 2 and "missing.json" in r.stderr
