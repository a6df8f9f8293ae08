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
import tempfile
from pathlib import Path

import pytest

from fleetwarden.app.deprecating import DEFAULT_COMPONENTS
from fleetwarden.core.deprecations import DeprecationTable
from fleetwarden.formats import manifests
from fleetwarden.wiring.deprecations import scan_manifests
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
    # flowcontrol v1beta3 was served from 1.26 and deprecated in 1.29 (k8s.io/api's tags;
    # Pluto's row says 1.24): nothing to say at 1.25
    "kubent-fixture-flowschema-v1beta3.yaml": [],
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


PINNED_FINDINGS_1_25 = [row for rows in PINNED_1_25.values() for row in rows]


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
        ("kubent-fixture-flowschema-v1beta3.yaml", (1, 29), "deprecated"),
        ("pluto-e2e-list-deprecated-and-non-deprecated.yaml", (1, 15), "deprecated"),
        # extensions/v1beta1 Deployment: deprecated in 1.8 by k8s.io/api's tags (Pluto: 1.9)
        ("pluto-e2e-list-deprecated-and-non-deprecated.yaml", (1, 8), "deprecated"),
        ("pluto-e2e-list-deprecated-and-non-deprecated.yaml", (1, 7), None),
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
    assert len(out["findings"]) == 10
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
    assert out["summary"] == {
        "files": 36,
        "objects": 79,
        "removed": 9,
        "deprecated": 1,
        "skipped": 0,
    }
    assert out["skipped"] == []  # every real file parses: nothing left out
    # an added key: where the table row that matched comes from (#14 item 8)
    for f in out["findings"]:
        api = K8S.lookup(f["apiVersion"], f["kind"])
        assert api is not None and f["origin"]["text"] == api.origin
    assert psp["origin"] == {
        "source": "kubernetes",
        "ref": "k8s.io/api@v0.28.3",
        "file": "policy/v1beta1/zz_generated.prerelease-lifecycle.go",
        "replacementRef": None,
        "text": "k8s.io/api@v0.28.3 policy/v1beta1/zz_generated.prerelease-lifecycle.go",
    }
    assert {f["origin"]["source"] for f in out["findings"]} == {"kubernetes", "pluto"}


@pytest.mark.realdata
def test_wide_table_shows_each_rows_origin_and_the_plain_table_does_not(realdata):
    args = ("-m", str(realdata / "deprecations"), "-t", "1.25")
    wide, plain = run(*args, "--wide"), run(*args)
    assert wide.returncode == plain.returncode == 1, wide.stderr
    assert "origin" in wide.stdout and "k8s.io/api@v0.28.3" in wide.stdout
    assert "pluto@dd5ec8cccce5" in wide.stdout
    assert "origin" not in plain.stdout and "k8s.io/api@" not in plain.stdout


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
    assert "9 removed, 1 deprecated" in r.stdout


@pytest.mark.parametrize("target", ["1", "abc", "1.25x", "", "1.25.0-eks"])
def test_bad_target_version_exits_2_with_a_message(tmp_path, target):
    (tmp_path / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    r = run("-m", str(tmp_path), "-t", target, "-o", "json")
    assert r.returncode == 2
    assert "--target-version" in r.stderr and "MAJOR.MINOR" in r.stderr
    assert r.stdout == ""


PDB_V1BETA1 = "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata: {name: web}\n"
UNREADABLE = {
    # name -> (content, what the reason must say)
    "broken.yml": (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [oops\n", "YAML syntax"),
    "helm/templates/deploy.yaml": (
        b"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"
        b"spec:\n  {{- with .Values.x }}\n",
        "an unrendered Helm template",
    ),
    "binary.yaml": (b"\x7fELF\x02\x01\x00\x00" + bytes(range(256)), "binary data"),
    "latin1.yaml": (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\xe9}\n", "not UTF-8"),
    "list.yaml": (b"- apiVersion: v1\n  kind: ConfigMap\n", "not a mapping"),
}


def unreadable_tree(root: Path) -> Path:
    """One removed API, five files that do not parse, a dangling link and a FIFO."""
    (root / "ok").mkdir(parents=True)
    (root / "ok" / "pdb.yaml").write_text(PDB_V1BETA1)
    for name, (content, _) in UNREADABLE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    (root / "dangling.yaml").symlink_to(root / "gone.yaml")
    os.mkfifo(root / "fifo.yaml")  # reading it would block forever
    return root


def test_files_in_a_directory_that_do_not_parse_are_skipped_and_the_rest_reported(tmp_path):
    root = unreadable_tree(tmp_path / "tree")
    r = run("-m", str(root), "-t", "1.25", "-o", "json")
    assert r.returncode == 1, r.stderr  # the removed PDB still fails the run
    out = json.loads(r.stdout)
    assert [(f["file"], f["kind"], f["removed"]) for f in out["findings"]] == [
        (str(root / "ok" / "pdb.yaml"), "PodDisruptionBudget", True)
    ]
    skipped = {s["path"]: s["reason"] for s in out["skipped"]}
    for name, (_, why) in UNREADABLE.items():
        assert why in skipped.pop(str(root / name)), name
    assert skipped == {
        str(root / "dangling.yaml"): "cannot read: No such file or directory",
        str(root / "fifo.yaml"): "not a regular file",
    }
    assert out["summary"] | {"skipped": 7} == {
        "files": 1,
        "objects": 1,
        "removed": 1,
        "deprecated": 0,
        "skipped": len(out["skipped"]),
    }
    table = run("-m", str(root), "-t", "1.25")
    assert table.returncode == 1
    assert "1 objects in 1 files" in table.stdout and "skipped 7 files:" in table.stdout
    assert f"{root / 'broken.yml'}: line 5: YAML syntax error" in table.stdout
    assert table.stderr == ""


def test_a_directory_of_files_that_do_not_parse_reports_them_and_exits_0(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    (root / "a.yaml").write_text("kind: [\n")
    r = run("-m", str(root), "-t", "1.25", "-o", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["findings"] == [] and [s["path"] for s in out["skipped"]] == [str(root / "a.yaml")]


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_file_named_directly_that_does_not_parse_exits_2(tmp_path, name):
    """As Pluto's `detect FILE` refuses a file it cannot parse (exit 1 there, 2 here)."""
    root = unreadable_tree(tmp_path / "tree")
    r = run("-m", str(root / name), "-m", str(root / "ok"), "-t", "1.25", "-o", "json")
    assert r.returncode == 2
    assert r.stdout == ""
    assert str(root / name) in r.stderr and UNREADABLE[name][1].split(":")[0] in r.stderr


def test_the_malformed_file_named_directly_names_file_and_line(tmp_path):
    bad = tmp_path / "broken.yml"
    bad.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [oops\n")
    r = run("-m", str(bad), "-t", "1.25", "-o", "json")
    assert r.returncode == 2 and r.stdout == ""
    assert f"{bad}:5: YAML syntax error" in r.stderr


@pytest.mark.parametrize("kind", ["dangling link", "fifo"])
def test_an_unreadable_path_named_directly_exits_2(tmp_path, kind):
    path = tmp_path / "x.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(tmp_path / "gone.yaml")
    r = run("-m", str(path), "-t", "1.25")
    assert r.returncode == 2 and str(path) in r.stderr


SETPRIV = shutil.which("setpriv")


@pytest.fixture()
def as_user(tmp_path: Path) -> tuple[Path, list[str]]:
    """A directory and a command prefix under which file modes are enforced: root reads
    every file whatever its mode, so as root the command runs as nobody (setpriv)."""
    if os.geteuid() != 0:
        return tmp_path, []
    if SETPRIV is None:
        pytest.skip("running as root without setpriv: file modes cannot be tested")
    base = Path(tempfile.mkdtemp(prefix="fw-perm-", dir="/tmp"))
    base.chmod(0o755)  # tmp_path's parents are root's own (0700)
    return base, [SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_permission_denied_named_directly_exits_2_inside_a_directory_is_skipped(as_user):
    base, prefix = as_user
    root = base / "tree"
    (root / "locked").mkdir(parents=True)
    (root / "ok.yaml").write_text(PDB_V1BETA1)
    (root / "secret.yaml").write_text(PDB_V1BETA1)
    (root / "locked" / "inside.yaml").write_text(PDB_V1BETA1)
    root.chmod(0o755)
    (root / "secret.yaml").chmod(0)
    (root / "locked").chmod(0)

    def run_as(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
        return subprocess.run(
            [*prefix, EXE, "deprecations", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    try:
        r = run_as("-m", str(root), "-t", "1.25", "-o", "json")
        assert r.returncode == 1, r.stderr
        out = json.loads(r.stdout)
        assert [f["file"] for f in out["findings"]] == [str(root / "ok.yaml")]
        skipped = {s["path"]: s["reason"] for s in out["skipped"]}
        assert skipped == {
            str(root / "locked"): "cannot list: Permission denied",
            str(root / "secret.yaml"): "cannot read: Permission denied",
        }
        # named directly: exit 2 naming it (click's path check words it "not readable")
        for name in ("secret.yaml", "locked"):
            r = run_as("-m", str(root / name), "-t", "1.25")
            assert r.returncode == 2 and r.stdout == ""
            assert f"{root / name}" in r.stderr
            assert "not readable" in r.stderr or "Permission denied" in r.stderr
    finally:
        (root / "secret.yaml").chmod(0o644)
        (root / "locked").chmod(0o755)
        if prefix:
            shutil.rmtree(base)


@pytest.mark.realdata
def test_real_fixtures_beside_a_broken_copy_are_all_still_reported(realdata, tmp_path):
    """The corpus as a user's repository would hold it, with one real fixture truncated
    mid-document and one turned into a Helm template: the other 12 files' findings remain."""
    tree = tmp_path / "deprecations"
    shutil.copytree(realdata / "deprecations", tree)
    cronjob = tree / "kubent-fixture-cronjob-v1beta1.yaml"
    text = cronjob.read_text()
    cronjob.write_text(text[: text.index("spec:")] + "spec: [\n")
    ingress = tree / "kubent-fixture-ingress-v1beta1.yaml"
    templated = "name: {{ .Values.n }}\n  x: {{ a }}"
    ingress.write_text(ingress.read_text().replace("name: test-ingress", templated))
    r = run("-m", str(tree), "-t", "1.25", "-o", "json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert sorted(s["path"] for s in out["skipped"]) == [str(cronjob), str(ingress)]
    kinds = sorted(f["kind"] for f in out["findings"])
    assert "CronJob" not in kinds and "Ingress" not in kinds
    assert len(kinds) == len(PINNED_FINDINGS_1_25) - 2


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
