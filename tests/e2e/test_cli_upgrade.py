"""``upgrade plan`` / ``upgrade run`` through typer's CliRunner on a small app that registers
only this command module, against nodes in a real kube-apiserver."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from fleetwarden.adapters.kube.client import JSON_MERGE, KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.core.audit import AuditKind
from fleetwarden.entrypoints import upgrade_cmd
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
