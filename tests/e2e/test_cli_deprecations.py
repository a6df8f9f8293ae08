"""`fleetwarden deprecations` over real manifests: findings, JSON contract, exit codes 0/1/2.

Pins what kube-no-trouble's and Pluto's own fixtures must produce, scans every real manifest
of the corpus, and runs the installed console script in a subprocess like pipelines do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleetwarden.core.deprecations import DeprecationTable
from fleetwarden.entrypoints.deprecations_cmd import DEFAULT_COMPONENTS, scan_manifests
from fleetwarden.formats import manifests
from tests.conftest import realdata_files

EXE = shutil.which("fleetwarden", path=str(Path(sys.executable).parent)) or "fleetwarden"
K8S = DeprecationTable(manifests.bundled_table()).only(DEFAULT_COMPONENTS)
ALL = DeprecationTable(manifests.bundled_table())
CONTRACT_KEYS = {
    "file",
    "kind",
    "apiVersion",
    "name",
    "deprecatedIn",
    "removedIn",
    "replacement",
    "removed",
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [EXE, "deprecations", *args], capture_output=True, text=True, timeout=120, env=env
    )


def rows(path: Path, target: tuple[int, int]) -> list[tuple[str, str, str | None, str]]:
    scan = scan_manifests([path], target, K8S)
    return [
        (f.object.kind, f.object.api_version, f.object.name, f.finding.status.value)
        for f in scan.findings
    ]


# --- what real fixtures must produce at 1.25 ------------------------------------------------

PINNED_1_25 = {
    "kubent-fixture-autoscaler-v2beta2.yaml": [
        ("HorizontalPodAutoscaler", "autoscaling/v2beta2", "php-apache", "deprecated")
    ],
    "kubent-fixture-cronjob-v1beta1.yaml": [("CronJob", "batch/v1beta1", "hello", "removed")],
    "kubent-fixture-customresourcedefinition-v1beta1.yaml": [
        (
            "CustomResourceDefinition",
            "apiextensions.k8s.io/v1beta1",
            "certificates.test.k8s.io",
            "removed",
        )
    ],
    "kubent-fixture-deployment-v1beta1.json": [
        ("Deployment", "extensions/v1beta1", "nginx-deployment-old", "removed")
    ],
    "kubent-fixture-deployment-v1beta1.yaml": [
        ("Deployment", "apps/v1beta1", "nginx-deployment-old", "removed")
    ],
    # served as apps/v1; the old version is only in last-applied-configuration, not read
    "kubent-fixture-fake-deployment-v1beta1-with-annotation.yaml": [],
    "kubent-fixture-flowschema-v1beta3.yaml": [
        (
            "FlowSchema",
            "flowcontrol.apiserver.k8s.io/v1beta3",
            "service-accounts-test",
            "deprecated",
        )
    ],
    "kubent-fixture-ingress-v1beta1.yaml": [
        ("Ingress", "extensions/v1beta1", "test-ingress", "removed")
    ],
    "kubent-fixture-poddisruptionbudget-v1beta1.yaml": [
        ("PodDisruptionBudget", "policy/v1beta1", "xy-pdb", "removed")
    ],
    "kubent-fixture-podsecuritypolicy-v1beta1.yaml": [
        ("PodSecurityPolicy", "policy/v1beta1", "example", "removed")
    ],
    "pluto-e2e-deployment-extensions-v1beta1.yaml": [
        ("Deployment", "extensions/v1beta1", "utilities", "removed")
    ],
    # a List: the extensions/v1beta1 item is found, its apps/v1 twin is not
    "pluto-e2e-list-deprecated-and-non-deprecated.yaml": [
        ("Deployment", "extensions/v1beta1", "utilities", "removed")
    ],
    # Pluto's tables themselves are not Kubernetes objects
    "pluto-versions.yaml": [],
    "pluto-additional-versions-new.yaml": [],
}


@pytest.mark.realdata
@pytest.mark.parametrize("name", sorted(PINNED_1_25))
def test_real_fixture_findings_at_1_25(realdata, name):
    assert rows(realdata / "deprecations" / name, (1, 25)) == PINNED_1_25[name]


@pytest.mark.realdata
def test_every_deprecations_fixture_is_pinned(realdata):
    assert {p.name for p in realdata_files("deprecations")} == set(PINNED_1_25)


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("name", "target", "expected"),
    [
        ("kubent-fixture-autoscaler-v2beta2.yaml", (1, 26), "removed"),
        ("kubent-fixture-autoscaler-v2beta2.yaml", (1, 22), None),
        ("kubent-fixture-ingress-v1beta1.yaml", (1, 21), "deprecated"),
        ("kubent-fixture-ingress-v1beta1.yaml", (1, 13), None),
        ("kubent-fixture-podsecuritypolicy-v1beta1.yaml", (1, 24), "deprecated"),
        ("kubent-fixture-flowschema-v1beta3.yaml", (1, 32), "removed"),
        ("pluto-e2e-list-deprecated-and-non-deprecated.yaml", (1, 15), "deprecated"),
        ("pluto-e2e-list-deprecated-and-non-deprecated.yaml", (1, 8), None),
    ],
)
def test_real_fixture_status_moves_with_the_target(realdata, name, target, expected):
    got = [status for *_, status in rows(realdata / "deprecations" / name, target)]
    assert got == ([expected] if expected else [])


@pytest.mark.realdata
@pytest.mark.parametrize(
    "path",
    realdata_files("deprecations") + realdata_files("manifests"),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_every_real_manifest_scans_without_error(realdata, path):
    scan = scan_manifests([path], (1, 99), ALL)
    assert scan.files == 1
    tables = {"pluto-versions.yaml", "pluto-additional-versions-new.yaml"}  # not objects
    if path.name in tables:
        assert scan.objects == 0
    else:
        assert scan.objects >= 1


@pytest.mark.realdata
def test_modern_real_manifests_have_no_finding(realdata):
    """Google's microservices-demo, podinfo and Argo CD test data use only current APIs."""
    scan = scan_manifests([realdata / "manifests"], (1, 33), K8S)
    assert scan.files == len(realdata_files("manifests"))
    assert scan.objects > 50 and scan.findings == []


# --- the command ---------------------------------------------------------------------------


@pytest.mark.realdata
def test_json_contract_and_exit_1_when_an_api_is_removed(realdata):
    r = run(
        "--manifests",
        str(realdata / "deprecations"),
        "--manifests",
        str(realdata / "manifests"),
        "--target-version",
        "1.25",
        "--format",
        "json",
    )
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert out["target"] == "1.25"
    assert len(out["findings"]) == 11
    for f in out["findings"]:
        assert set(f) >= CONTRACT_KEYS
        assert isinstance(f["removed"], bool)
        assert f["removed"] is (f["status"] == "removed")
        assert f["file"].startswith(str(realdata))
    psp = next(f for f in out["findings"] if f["kind"] == "PodSecurityPolicy")
    assert {k: psp[k] for k in CONTRACT_KEYS} == {
        "file": str(realdata / "deprecations" / "kubent-fixture-podsecuritypolicy-v1beta1.yaml"),
        "kind": "PodSecurityPolicy",
        "apiVersion": "policy/v1beta1",
        "name": "example",
        "deprecatedIn": "1.21",
        "removedIn": "1.25",
        "replacement": None,
        "removed": True,
    }
    deployment = next(f for f in out["findings"] if f["file"].endswith("v1beta1.json"))
    assert deployment["namespace"] == "default"
    assert out["summary"] == {"files": 36, "objects": 79, "removed": 9, "deprecated": 2}


@pytest.mark.realdata
def test_only_deprecated_exits_0_unless_fail_on_deprecated(realdata):
    hpa = str(realdata / "deprecations" / "kubent-fixture-autoscaler-v2beta2.yaml")
    r = run("-m", hpa, "-t", "v1.25", "-o", "json")
    assert r.returncode == 0, r.stderr
    [finding] = json.loads(r.stdout)["findings"]
    assert (finding["removed"], finding["deprecatedIn"], finding["removedIn"]) == (
        False,
        "1.23",
        "1.26",
    )
    strict = run("-m", hpa, "-t", "1.25", "--fail-on", "deprecated", "-o", "json")
    assert strict.returncode == 1, strict.stderr
    assert json.loads(strict.stdout) == json.loads(r.stdout)


@pytest.mark.realdata
def test_clean_manifests_exit_0_with_empty_findings(realdata):
    r = run("-m", str(realdata / "manifests"), "-t", "1.30", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["findings"] == []


@pytest.mark.realdata
def test_table_output_names_file_status_and_summary(realdata):
    r = run("-m", str(realdata / "deprecations"), "-t", "1.25")
    assert r.returncode == 1, r.stderr
    assert "PodSecurityPolicy" in r.stdout and "removed" in r.stdout
    assert "9 removed, 2 deprecated" in r.stdout


@pytest.mark.parametrize("target", ["1", "abc", "1.25x", "", "1.25.0-eks"])
def test_bad_target_version_exits_2_with_a_message(tmp_path, target):
    (tmp_path / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    r = run("-m", str(tmp_path), "-t", target, "-o", "json")
    assert r.returncode == 2
    assert "--target-version" in r.stderr and "MAJOR.MINOR" in r.stderr
    assert r.stdout == ""


def test_malformed_yaml_exits_2_naming_file_and_line(tmp_path):
    (tmp_path / "ok.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    (tmp_path / "sub").mkdir()
    bad = tmp_path / "sub" / "broken.yml"
    bad.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [oops\n")
    r = run("-m", str(tmp_path), "-t", "1.25", "-o", "json")
    assert r.returncode == 2
    assert f"{bad}:" in r.stderr.replace("\n", "") and "YAML syntax error" in r.stderr
    assert r.stdout == ""


def test_missing_path_and_unknown_component_exit_2(tmp_path):
    r = run("-m", str(tmp_path / "nope"), "-t", "1.25")
    assert r.returncode == 2 and "no such file or directory" in r.stderr
    r = run("-m", str(tmp_path), "-t", "1.25", "--component", "linkerd")
    assert r.returncode == 2 and "linkerd" in r.stderr and "cert-manager" in r.stderr
    r = run("-t", "1.25")
    assert r.returncode == 2 and "--manifests" in r.stderr


def test_other_components_are_opt_in(tmp_path):
    """cert-manager versions are not Kubernetes versions: only --component checks them."""
    (tmp_path / "cert.yaml").write_text(
        "apiVersion: cert-manager.io/v1alpha2\nkind: Certificate\nmetadata: {name: tls}\n"
        "---\n"
        "apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: {name: web}\n"
    )
    default = json.loads(run("-m", str(tmp_path), "-t", "1.6", "-o", "json").stdout)
    assert [f["kind"] for f in default["findings"]] == []  # 1.6 < Ingress' deprecation in 1.14
    r = run("-m", str(tmp_path), "-t", "1.6", "-o", "json", "--component", "cert-manager")
    assert r.returncode == 1, r.stderr
    [finding] = json.loads(r.stdout)["findings"]
    assert (finding["kind"], finding["removed"], finding["replacement"]) == (
        "Certificate",
        True,
        "cert-manager.io/v1",
    )
    both = run(
        "-m",
        str(tmp_path),
        "-t",
        "1.22",
        "-o",
        "json",
        "--component",
        "k8s",
        "--component",
        "cert-manager",
    )
    assert sorted(f["kind"] for f in json.loads(both.stdout)["findings"]) == [
        "Certificate",
        "Ingress",
    ]


def test_helm_template_output_file(tmp_path):
    (tmp_path / "rendered.yaml").write_text(
        "---\n# Source: app/templates/pdb.yaml\n"
        "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\n"
        "metadata: {name: app, namespace: web}\n"
        "---\n# Source: app/templates/NOTES.txt\n"
        "---\n# Source: app/templates/svc.yaml\napiVersion: v1\nkind: Service\n"
        "metadata: {name: app}\n"
    )
    r = run("-m", str(tmp_path / "rendered.yaml"), "-t", "1.24", "-o", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [(f["name"], f["namespace"], f["removed"]) for f in out["findings"]] == [
        ("app", "web", False)
    ]
    assert out["summary"]["objects"] == 2
