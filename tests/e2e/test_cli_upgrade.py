"""``upgrade plan`` / ``upgrade run`` through typer's CliRunner on a small app that registers
only this command module, against nodes in a real kube-apiserver."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from fleetwarden.adapters.kube.client import JSON_MERGE, KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.cli import upgrade as upgrade_cmd
from fleetwarden.core.audit import AuditKind
from fleetwarden.ports.audit import AuditUnavailable
from fleetwarden.ports.kube import NotFound

POOL_LABEL = "eks.amazonaws.com/nodegroup"
DESIRED = """\
apiVersion: fleetwarden.io/v1alpha1
kind: NodePools
pools:
  {pool}:
    provider: aws
    minSize: 1
    maxSize: 3
    labels: {{role: web}}
    kubernetesVersion: "1.29"
"""
PDB = """\
apiVersion: policy/v1beta1
kind: PodDisruptionBudget
metadata: {name: api, namespace: shop}
spec: {minAvailable: 1}
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  replicas: 2
  template:
    spec:
      nodeSelector: {role: web}
      containers: [{name: api, image: api:1, resources: {requests: {cpu: "1"}}}]
"""


@pytest.fixture()
def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """fleetwarden (test app)"""

    upgrade_cmd.register(app)
    return app


def test_a_target_without_a_pool_is_exit_2_naming_it(cli: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["upgrade", "plan", "prod", "--to", "1.30"])
    assert result.exit_code == 2
    assert "'prod': expected CLUSTER/POOL" in result.output


def test_a_bad_flux_reference_is_exit_2(cli: typer.Typer, tmp_path: Path) -> None:
    args = ["upgrade", "plan", "prod/general", "--to", "1.30", "--flux", "GitRepo/x"]
    result = CliRunner().invoke(cli, [*args, "--kubeconfig", str(tmp_path / "none")])
    assert result.exit_code == 2
    assert "--flux 'GitRepo/x': expected KIND/NAMESPACE/NAME" in result.output


async def _nodes(kubeconfig: Path, pool: str, versions: dict[str, str]) -> None:
    endpoint = load_kubeconfig(kubeconfig)[0]
    async with KubeClient(endpoint) as api:
        for name, version in versions.items():
            labels = {POOL_LABEL: pool, "role": "web"}
            await api.create("/api/v1/nodes", {"metadata": {"name": name, "labels": labels}})
            status = {
                "nodeInfo": {"kubeletVersion": version},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            }
            await api.patch(
                f"/api/v1/nodes/{name}/status", {"status": status}, content_type=JSON_MERGE
            )
            # the admission plugin taints a new node not-ready; with no node lifecycle
            # controller here, the test lifts it as the controller would once Ready
            await api.patch(
                f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, content_type=JSON_MERGE
            )


async def _remove(kubeconfig: Path, names: list[str]) -> None:
    endpoint = load_kubeconfig(kubeconfig)[0]
    async with KubeClient(endpoint) as api:
        for name in names:
            with contextlib.suppress(NotFound):
                await api.request("DELETE", f"/api/v1/nodes/{name}")


@pytest.mark.live
def test_plan_blocks_on_a_removed_api_and_run_records_a_dry_run(
    cli: typer.Typer, k8s: dict[str, Any], tmp_path: Path
) -> None:
    kubeconfig = Path(k8s["kubeconfig"])
    pool = "web-cli"
    names = [f"{pool}-a", f"{pool}-b"]
    asyncio.run(_nodes(kubeconfig, pool, dict.fromkeys(names, "v1.29.4")))
    try:
        (tmp_path / "pools.yaml").write_text(DESIRED.format(pool=pool))
        app_dir = tmp_path / "shop"
        app_dir.mkdir()
        (app_dir / "deploy.yaml").write_text(DEPLOYMENT)
        common = [
            f"fw-test-1/{pool}", "--to", "1.30", "--kubeconfig", str(kubeconfig),
            "-d", f"fw-test-1={tmp_path / 'pools.yaml'}", "-m", f"shop={app_dir}",
            "--argocd-app", "web-node-config", "-o", "json",
        ]  # fmt: skip
        runner = CliRunner()
        ok = runner.invoke(cli, ["upgrade", "plan", *common])
        assert ok.exit_code == 0, ok.output
        plan = json.loads(ok.stdout)
        assert plan["from"] == ["v1.29.4"] and plan["oldNodes"] == names
        assert [s["step"] for s in plan["steps"]] == [
            "preflight", "infrastructure", "roll", "cluster", "verify",
        ]  # fmt: skip
        assert plan["steps"][3]["target"] == {"application": "web-node-config"}
        assert "Kubernetes version to 1.30 in" in plan["steps"][1]["manual"]
        assert plan["preflight"][1]["ok"] and plan["preflight"][1]["blocking"] == []

        (app_dir / "pdb.yaml").write_text(PDB)
        blocked = runner.invoke(cli, ["upgrade", "plan", *common])
        assert blocked.exit_code == 1, blocked.output
        [deps] = [
            c for c in json.loads(blocked.stdout)["preflight"] if c["check"] == "deprecations"
        ]
        assert "PodDisruptionBudget api uses policy/v1beta1" in deps["blocking"][0]

        table = runner.invoke(cli, ["upgrade", "plan", *common, "-o", "table"])
        assert table.exit_code == 1
        assert "BLOCKS" in table.stdout and "policy/v1beta1" in table.stdout
        assert "sync Argo CD application web-node-config" in table.stdout

        (app_dir / "pdb.yaml").unlink()
        store = f"sqlite:///{tmp_path / 'audit.db'}"
        dry = runner.invoke(cli, ["upgrade", "run", *common, "--store", store])
        assert dry.exit_code == 0, dry.output
        report = json.loads(dry.stdout)
        assert report["mode"] == "dry-run"
        assert [s["status"] for s in report["steps"]] == ["dry-run"] * 5

        async def audited() -> list[Any]:
            s = await open_audit_store(store)
            try:
                return await s.query(kind=AuditKind.ACTION, limit=10)
            finally:
                await s.close()

        assert len(asyncio.run(audited())) == 5
    finally:
        asyncio.run(_remove(kubeconfig, names))


@pytest.mark.live
def test_run_execute_finishes_a_pool_already_on_the_target_and_a_second_run_is_done(
    cli: typer.Typer, k8s: dict[str, Any], tmp_path: Path
) -> None:
    kubeconfig = Path(k8s["kubeconfig"])
    pool = "web-exec"
    names = [f"{pool}-a", f"{pool}-b"]
    asyncio.run(_nodes(kubeconfig, pool, dict.fromkeys(names, "v1.30.2")))
    try:
        (tmp_path / "pools.yaml").write_text(DESIRED.format(pool=pool))
        store = f"sqlite:///{tmp_path / 'audit.db'}"
        args = [
            "upgrade", "run", f"fw-test-1/{pool}", "--to", "1.30", "--kubeconfig",
            str(kubeconfig), "-d", f"fw-test-1={tmp_path / 'pools.yaml'}", "--store", store,
            "--execute", "--poll", "0.05", "-o", "json",
        ]  # fmt: skip
        first = CliRunner().invoke(cli, args)
        assert first.exit_code == 0, first.output
        report = json.loads(first.stdout)
        assert report["mode"] == "execute" and report["state"]["phase"] == "done"
        assert [s["status"] for s in report["steps"]] == ["started", "done"] * 5
        second = CliRunner().invoke(cli, args)
        assert second.exit_code == 0, second.output
        assert json.loads(second.stdout)["steps"] == []  # already done: nothing again
    finally:
        asyncio.run(_remove(kubeconfig, names))


# the command module in a process of its own (the CLI registers it only later)
_MAIN = (
    "import typer\n"
    "from fleetwarden.cli import upgrade as upgrade_cmd\n"
    "app = typer.Typer()\n"
    "app.callback()(lambda: None)\n"
    "upgrade_cmd.register(app)\n"
    "app()\n"
)


async def _roll_started(store: str) -> bool:
    try:
        s = await open_audit_store(store, create=False)
    except AuditUnavailable:
        return False  # not created yet
    try:
        found = await s.query(
            kind=AuditKind.ACTION, payload_contains='"status":"started"', limit=10
        )
        return any(r.payload["upgrade"]["record"]["step"] == "roll" for r in found)
    finally:
        await s.close()


@pytest.mark.live
def test_a_run_killed_mid_roll_resumes_at_the_roll_in_a_new_process(
    k8s: dict[str, Any], tmp_path: Path
) -> None:
    """kill -9 of `upgrade run --execute` while it waits for the roll; the provider finishes
    the roll; the same command again resumes at the roll and completes the upgrade."""
    kubeconfig = Path(k8s["kubeconfig"])
    pool = "web-kill"
    old = [f"{pool}-a", f"{pool}-b"]
    new = [f"{pool}-c", f"{pool}-d"]
    asyncio.run(_nodes(kubeconfig, pool, dict.fromkeys(old, "v1.29.4")))
    (tmp_path / "pools.yaml").write_text(DESIRED.format(pool=pool))
    store = f"sqlite:///{tmp_path / 'audit.db'}"
    command = [
        sys.executable, "-c", _MAIN, "upgrade", "run", f"fw-test-1/{pool}", "--to", "1.30",
        "--kubeconfig", str(kubeconfig), "-d", f"fw-test-1={tmp_path / 'pools.yaml'}",
        "--store", store, "--execute", "--poll", "0.05", "-o", "json",
    ]  # fmt: skip
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not asyncio.run(_roll_started(store)):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the roll never started"
            time.sleep(0.1)
        first.kill()  # SIGKILL: no clean-up, no last record
        first.wait(10)
        asyncio.run(_nodes(kubeconfig, pool, dict.fromkeys(new, "v1.30.2")))
        asyncio.run(_remove(kubeconfig, old))
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stderr
        report = json.loads(second.stdout)
        assert report["resumedAt"] == "roll"
        assert report["state"]["phase"] == "done"
        assert [(s["step"], s["status"]) for s in report["steps"]] == [
            ("roll", "done"), ("cluster", "started"), ("cluster", "done"),
            ("verify", "started"), ("verify", "done"),
        ]  # fmt: skip
        assert report["steps"][0]["data"]["oldLeft"] == []
    finally:
        if first.poll() is None:
            first.kill()
        asyncio.run(_remove(kubeconfig, old + new))


@pytest.mark.live
def test_run_execute_with_a_flux_object_that_is_not_there_fails_with_exit_1(
    cli: typer.Typer, k8s: dict[str, Any], tmp_path: Path
) -> None:
    kubeconfig = Path(k8s["kubeconfig"])
    pool = "web-flux"
    names = [f"{pool}-a"]
    asyncio.run(_nodes(kubeconfig, pool, dict.fromkeys(names, "v1.29.4")))
    try:
        (tmp_path / "pools.yaml").write_text(DESIRED.format(pool=pool))
        args = [
            "upgrade", "run", f"fw-test-1/{pool}", "--to", "1.30", "--kubeconfig",
            str(kubeconfig), "--context", "fw-test-1", "-d", f"fw-test-1={tmp_path / 'pools.yaml'}",
            "--store", f"sqlite:///{tmp_path / 'audit.db'}", "--execute", "-o", "json",
            "--flux", "Kustomization/flux-system/no-such-pools",
        ]  # fmt: skip
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, result.output
        report = json.loads(result.stdout)
        assert report["state"]["failed"]["step"] == "infrastructure"
        assert "NotFound" in report["state"]["failed"]["detail"]
        [finding] = report["findings"]
        assert (finding["field"], finding["severity"]) == ("upgrade.infrastructure", "high")
    finally:
        asyncio.run(_remove(kubeconfig, names))
