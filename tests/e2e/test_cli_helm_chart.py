"""`fleetwarden deprecations --helm-chart DIR` with the real helm (scripts/helm-ensure builds a
pinned release from the Go module proxy when helm is missing): the chart is rendered for the
target version and every object is reported under its template's path in DIR."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXE = shutil.which("fleetwarden", path=str(Path(sys.executable).parent)) or "fleetwarden"
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    "values.yaml": "replicas: 2\nhost: web.example.com\n",
    "templates/_helpers.tpl": '{{- define "web.name" -}}{{ .Release.Name }}-web{{- end }}\n',
    "templates/NOTES.txt": "Thanks for installing {{ .Chart.Name }}.\n",
    # the chart picks its PDB API by the cluster version, as real charts do
    "templates/pdb.yaml": """\
{{- if semverCompare "<1.25-0" .Capabilities.KubeVersion.GitVersion }}
apiVersion: policy/v1beta1
{{- else }}
apiVersion: policy/v1
{{- end }}
kind: PodDisruptionBudget
metadata:
  name: {{ include "web.name" . }}
spec:
  minAvailable: 1
""",
    "templates/ingress.yaml": """\
apiVersion: extensions/v1beta1
kind: Ingress
metadata:
  name: {{ include "web.name" . }}
spec:
  rules: [{host: {{ .Values.host }}}]
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "web.name" . }}
""",
    "crds/widgets.yaml": """\
apiVersion: apiextensions.k8s.io/v1beta1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
""",
    "charts/db/Chart.yaml": "apiVersion: v2\nname: db\nversion: 0.1.0\n",
    "charts/db/templates/psp.yaml": """\
apiVersion: policy/v1beta1
kind: PodSecurityPolicy
metadata:
  name: {{ .Release.Name }}-db
""",
}


@pytest.fixture(scope="session")
def helm_bin() -> str:
    """helm on PATH, or the pinned release scripts/helm-ensure builds (last line: its path)."""
    proc = subprocess.run(
        [str(SCRIPTS / "helm-ensure")],
        capture_output=True,
        text=True,
        timeout=1200,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        pytest.fail(f"scripts/helm-ensure failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def write_chart(root: Path, files: dict[str, str] = CHART) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def run(*args: str, helm_dir: str | None, home: Path | None = None):
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    if helm_dir is None:  # no helm anywhere: an empty PATH and a HOME without a cache
        env["PATH"] = "/nonexistent"
    else:
        env["PATH"] = helm_dir + os.pathsep + env.get("PATH", "")
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run(
        [EXE, "deprecations", *args], capture_output=True, text=True, timeout=300, env=env
    )


pytestmark = pytest.mark.live


def test_chart_is_rendered_for_the_target_and_reported_by_template_path(helm_bin, tmp_path):
    chart = write_chart(tmp_path / "charts" / "web-chart")  # the directory is not the name
    helm_dir = str(Path(helm_bin).parent)
    r = run("--helm-chart", str(chart), "-t", "1.24", "-o", "json", helm_dir=helm_dir)
    assert r.returncode == 1, r.stderr  # Ingress and the CRD are gone since 1.22
    out = json.loads(r.stdout)
    got = sorted((f["file"], f["kind"], f["apiVersion"], f["status"]) for f in out["findings"])
    assert got == [
        (f"{chart}/charts/db/templates/psp.yaml", "PodSecurityPolicy",
         "policy/v1beta1", "deprecated"),
        (f"{chart}/crds/widgets.yaml", "CustomResourceDefinition",
         "apiextensions.k8s.io/v1beta1", "removed"),
        (f"{chart}/templates/ingress.yaml", "Ingress", "extensions/v1beta1", "removed"),
        (f"{chart}/templates/pdb.yaml", "PodDisruptionBudget", "policy/v1beta1", "deprecated"),
    ]  # fmt: skip
    names = {f["kind"]: f["name"] for f in out["findings"]}
    assert names["PodDisruptionBudget"] == "release-name-web"  # helpers were rendered
    # 3 templates with objects + the CRD; NOTES.txt and _helpers.tpl are not manifests
    assert out["summary"] | {"removed": 0, "deprecated": 0} == {
        "files": 4,
        "objects": 5,
        "removed": 0,
        "deprecated": 0,
        "skipped": 0,
    }
    # at 1.25 the chart renders policy/v1: no PDB finding, the PSP is removed now
    r = run("--helm-chart", str(chart), "-t", "1.25", "-o", "json", helm_dir=helm_dir)
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert sorted((f["kind"], f["status"]) for f in out["findings"]) == [
        ("CustomResourceDefinition", "removed"),
        ("Ingress", "removed"),
        ("PodSecurityPolicy", "removed"),
    ]


def test_charts_and_manifests_together_in_the_table(helm_bin, tmp_path):
    chart = write_chart(tmp_path / "web")
    plain = tmp_path / "plain.yaml"
    plain.write_text("apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: nightly}\n")
    r = run(
        "--helm-chart",
        str(chart),
        "-m",
        str(plain),
        "-t",
        "1.25",
        helm_dir=str(Path(helm_bin).parent),
    )
    assert r.returncode == 1, r.stderr
    # (long paths fold inside their column: look for their ends)
    assert "web/templates/ingress.yaml" in r.stdout and "plain.yaml" in r.stdout
    assert "6 objects in 5 files at Kubernetes 1.25: 4 removed, 0 deprecated" in r.stdout


def test_a_chart_that_only_uses_current_apis_exits_0(helm_bin, tmp_path):
    files = {
        k: v
        for k, v in CHART.items()
        if k.startswith(("Chart", "values", "templates/pdb", "templates/_"))
    }
    chart = write_chart(tmp_path / "web", files)
    r = run("--helm-chart", str(chart), "-t", "1.30", helm_dir=str(Path(helm_bin).parent))
    assert r.returncode == 0, r.stderr
    assert "1 objects in 1 files" in r.stdout


def test_without_helm_one_clear_error_and_exit_2(tmp_path):
    chart = write_chart(tmp_path / "web")
    r = run("--helm-chart", str(chart), "-t", "1.25", helm_dir=None, home=tmp_path / "home")
    assert r.returncode == 2 and r.stdout == ""
    [line] = r.stderr.splitlines()
    assert line.startswith("fleetwarden: error: --helm-chart needs helm")
    assert "scripts/helm-ensure" in line


def test_a_chart_helm_cannot_render_exits_2_with_helms_reason(helm_bin, tmp_path):
    chart = write_chart(tmp_path / "web")
    (chart / "templates" / "broken.yaml").write_text("kind: {{ .Values.x | nosuchfunc }}\n")
    r = run("--helm-chart", str(chart), "-t", "1.25", helm_dir=str(Path(helm_bin).parent))
    assert r.returncode == 2 and r.stdout == ""
    assert f"{chart}: helm template failed" in r.stderr and "nosuchfunc" in r.stderr
    r = run(
        "--helm-chart", str(tmp_path / "nope"), "-t", "1.25", helm_dir=str(Path(helm_bin).parent)
    )
    assert r.returncode == 2 and "nope: no such file or directory" in r.stderr


def test_helm_ensure_prints_a_working_helm_on_its_last_line(helm_bin):
    version = subprocess.run(
        [helm_bin, "version", "--template", "{{.Version}}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert version.returncode == 0 and version.stdout.startswith("v3.")
