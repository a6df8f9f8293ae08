"""Workloads on a real kube-apiserver (started by scripts/k8s-test-env).

1. Noise: real manifests are applied the way Argo CD applies them (server-side apply), read
   back as ``kubectl get -o json`` would, and compare clean: every default the API server
   adds, status, managedFields and resourceVersion raise nothing. Then exactly the planted
   drift comes out after ``kubectl set image`` / ``kubectl scale`` / a ConfigMap edit, while
   an HPA-owned scale stays silent.
2. The PreSync hook: the RBAC of deploy/argocd is created for real, the Job is accepted by the
   API server (dry run), the Job's gate container -- its own args, with the ServiceAccount's
   token where the pod would mount it -- reads nodes and workloads live (it cannot read
   Secrets), and the gate passes, then blocks once the pool's nodes lose their label.

There is no controller-manager or scheduler: objects are stored, never run, which is all a
diff needs.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwarden.adapters.kube.client import JSON_MERGE, KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.core import workloads as wl
from fleetwarden.formats.workloads import parse_workload_dump
from fleetwarden.ports.kube import Conflict, Forbidden, NotFound
from tests.core.test_workloads import load_docs
from tests.e2e.test_cli_fleet import EKSCTL, EXE

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
NS = "shop-live"
APP = "shop"
APPLY = "application/apply-patch+yaml"
PATHS = {
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets",
    "DaemonSet": "/apis/apps/v1/namespaces/{ns}/daemonsets",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Secret": "/api/v1/namespaces/{ns}/secrets",
    "HorizontalPodAutoscaler": "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
}
VERSIONS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "ConfigMap": "v1",
    "Secret": "v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
}


@pytest.fixture()
def endpoint(k8s):
    return load_kubeconfig(Path(k8s["kubeconfig"]))[1]  # the second cluster: nodes stay ours


def desired_objects(realdata: Path) -> list[dict[str, Any]]:
    """Real manifests of every supported kind, as they sit in Git."""
    base = realdata / "manifests"
    docs: list[dict[str, Any]] = []
    for name in (
        "microservices-demo-loadgenerator-initcontainer.yaml",
        "microservices-demo-cartservice-with-redis.yaml",
        "microservices-demo-otel-collector.yaml",
        "podinfo-deploy-database-statefulset.yaml",
        "podinfo-kustomize-deployment.yaml",
        "podinfo-kustomize-hpa.yaml",
    ):
        docs += [d for d in load_docs(base / name) if d.get("kind") in wl.KINDS]
    podinfo = next(
        d for d in docs if d["metadata"]["name"] == "podinfo" and d["kind"] == "Deployment"
    )
    podinfo["spec"]["replicas"] = 2  # stated in Git, but owned by the HPA
    (backend,) = load_docs(base / "podinfo-deploy-backend-deployment.yaml")
    daemon = copy.deepcopy(backend)  # a DaemonSet: its own defaults (updateStrategy ...)
    daemon["kind"] = "DaemonSet"
    daemon["metadata"]["name"] = "node-agent"
    daemon["spec"].pop("replicas", None)
    for field in ("strategy", "progressDeadlineSeconds"):  # Deployment-only fields
        daemon["spec"].pop(field, None)
    docs.append(daemon)
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "cart-credentials"},
            "stringData": {"password": "live-test-not-a-real-secret"},
        }
    )
    return docs


async def _ensure_namespace(api: KubeClient, name: str) -> None:
    with contextlib.suppress(Conflict):
        await api.request(
            "POST",
            "/api/v1/namespaces",
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )


async def apply_like_argocd(api: KubeClient, obj: dict[str, Any], *, namespace: str = NS) -> None:
    """Server-side apply by "argocd-controller", with Argo CD's tracking annotation."""
    body = copy.deepcopy(obj)
    meta = body["metadata"]
    meta["namespace"] = namespace
    meta.setdefault("annotations", {})[wl.TRACKING_ANNOTATION] = (
        f"{APP}:{wl.GROUPS[body['kind']]}/{body['kind']}:{namespace}/{meta['name']}"
    )
    path = PATHS[body["kind"]].format(ns=namespace) + f"/{meta['name']}"
    await api.request(
        "PATCH",
        path,
        params={"fieldManager": "argocd-controller", "force": "true"},
        body=body,
        content_type=APPLY,
    )


async def set_image(
    api: KubeClient,
    namespace: str,
    deployment: str,
    image: str,
    *,
    manager: str = "kubectl-set",
    container: str = "main",
) -> None:
    """`kubectl set image deployment/NAME CONTAINER=IMAGE`, by the field manager ``manager``."""
    containers = [{"name": container, "image": image}]
    await api.request(
        "PATCH",
        PATHS["Deployment"].format(ns=namespace) + f"/{deployment}",
        params={"fieldManager": manager},
        body={"spec": {"template": {"spec": {"containers": containers}}}},
        content_type="application/strategic-merge-patch+json",
    )


async def read_back(api: KubeClient, tmp: Path, name: str) -> list[wl.ManifestObject]:
    """`kubectl get deploy,sts,ds,cm,secret,hpa -n NS -o json`, through the real reader."""
    items: list[dict[str, Any]] = []
    for kind, path in PATHS.items():
        listed = await api.list(path.format(ns=NS))
        for item in listed.items:
            items.append({"apiVersion": VERSIONS[kind], "kind": kind, **item})
    dump = tmp / f"{name}.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4))
    return parse_workload_dump(str(dump), dump.read_bytes())


def index(objs: list[Any]) -> wl.ObjectIndex:
    return wl.ObjectIndex(objs)


def git_index(docs: list[dict[str, Any]]) -> wl.ObjectIndex:
    idx = wl.ObjectIndex()
    for d in docs:
        idx.add(d, source="git")
    return idx


async def test_applied_manifests_read_back_clean_then_exactly_the_planted_drift(
    endpoint, realdata, tmp_path
):
    docs = desired_objects(realdata)
    async with KubeClient(endpoint) as api:
        await _ensure_namespace(api, NS)
        for obj in docs:
            await apply_like_argocd(api, obj)
        live = await read_back(api, tmp_path, "applied")
        assert len(live) == len(docs)
        raw = (tmp_path / "applied.json").read_text()
        assert '"managedFields"' in raw and '"status"' in raw  # the noise is really there
        assert "live-test-not-a-real-secret" not in repr([o.body for o in live])

        result = wl.diff_app(endpoint.name, APP, git_index(docs), index(live))
        assert result.findings == [], [f.to_json() for f in result.findings]
        assert result.compared == len(docs)

        deploys = PATHS["Deployment"].format(ns=NS)
        # kubectl set image deployment/loadgenerator main=...:v0.10.7
        await api.patch(
            f"{deploys}/loadgenerator",
            {
                "spec": {
                    "template": {
                        "spec": {"containers": [{"name": "main", "image": "loadgenerator:v0.10.7"}]}
                    }
                }
            },
        )
        # kubectl scale statefulset/database-primary --replicas=3 (the scale subresource)
        await api.patch(
            PATHS["StatefulSet"].format(ns=NS) + "/database-primary/scale",
            {"spec": {"replicas": 3}},
            content_type=JSON_MERGE,
        )
        # kubectl edit configmap collector-gateway-config-template
        key = "collector-gateway-config-template.yaml"
        await api.patch(
            PATHS["ConfigMap"].format(ns=NS) + "/collector-gateway-config-template",
            {"data": {key: "receivers: {}\n"}},
            content_type=JSON_MERGE,
        )
        # kubectl scale deployment/podinfo --replicas=4: the HPA owns it, nothing to say
        await api.patch(
            f"{deploys}/podinfo/scale", {"spec": {"replicas": 4}}, content_type=JSON_MERGE
        )

        live = await read_back(api, tmp_path, "edited")
        result = wl.diff_app(endpoint.name, APP, git_index(docs), index(live))
        found = sorted((f.pool, f.field, f.expected, f.actual) for f in result.findings)
        assert found == [
            (
                "ConfigMap/shop-live/collector-gateway-config-template",
                "config.collector-gateway-config-template",
                found[0][2],
                found[0][3],
            ),
            (
                "Deployment/shop-live/loadgenerator",
                "image.main",
                "loadgenerator",
                "loadgenerator:v0.10.7",
            ),
            ("StatefulSet/shop-live/database-primary", "replicas", 1, 3),
        ]
        assert found[0][2] != found[0][3]


# --------------------------------------------------------------------------- the hook

HOOK_NS = "gate-live"
DEPLOY = ROOT / "deploy" / "argocd"


def hook_manifests(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


async def _create(api: KubeClient, path: str, body: dict[str, Any], **params: str) -> Any:
    try:
        return await api.request("POST", path, params=params or None, body=body)
    except Conflict:
        return None


async def install_rbac(api: KubeClient) -> None:
    for obj in hook_manifests("presync-gate-rbac.yaml"):
        obj = copy.deepcopy(obj)
        kind = obj["kind"]
        if kind == "ClusterRoleBinding":
            obj["subjects"][0]["namespace"] = HOOK_NS
            obj["metadata"]["name"] = f"fleetwarden-gate-nodes-{HOOK_NS}"
        path = {
            "ServiceAccount": f"/api/v1/namespaces/{HOOK_NS}/serviceaccounts",
            "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{HOOK_NS}/roles",
            "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{HOOK_NS}/rolebindings",
        }[kind]
        await _create(api, path, obj)


async def create_nodes(api: KubeClient, realdata: Path) -> list[str]:
    nodes = json.loads((realdata / "nodes" / "honeycomb-eks-nodelist-arm64.json").read_text())
    names = []
    for item in nodes["items"]:
        name = "gate-" + item["metadata"]["name"]
        labels = {
            **item["metadata"]["labels"],
            "workload-type": "batch",
            "kubernetes.io/hostname": name,
            # eksctl labels every node of its groups (the dump is of a group made otherwise)
            "alpha.eksctl.io/cluster-name": "duckboat",
            "alpha.eksctl.io/nodegroup-name": "custom-1",
        }
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": item["spec"],
        }
        with contextlib.suppress(NotFound):
            await api.request("DELETE", f"/api/v1/nodes/{name}")
        await api.request("POST", "/api/v1/nodes", body=body)
        status = {k: item["status"][k] for k in ("allocatable", "capacity", "nodeInfo")}
        status["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
        await api.patch(f"/api/v1/nodes/{name}/status", {"status": status}, content_type=JSON_MERGE)
        # TaintNodesByCondition admission tainted the new node not-ready; the node lifecycle
        # controller (absent here) lifts that once the node reports Ready
        created = await api.get(f"/api/v1/nodes/{name}")
        assert {t["key"] for t in created["spec"]["taints"]} >= {"node.kubernetes.io/not-ready"}
        await api.patch(
            f"/api/v1/nodes/{name}",
            {"spec": {"taints": item["spec"]["taints"]}},
            content_type=JSON_MERGE,
        )
        names.append(name)
    return names


def run_job_gate(
    job: dict[str, Any], values: dict[str, str], endpoint: Any, token: str, tmp: Path
) -> subprocess.CompletedProcess[str]:
    """The Job's gate container as Argo CD would run it: its own args ($(VAR) expanded from
    ``values``), its ServiceAccount token mounted where the pod would see it."""
    pod = job["spec"]["template"]["spec"]
    gate = next(c for c in pod["containers"] if c["name"] == "gate")
    mount = next(m for m in gate["volumeMounts"] if m["name"] == "work")["mountPath"]
    args = [
        re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], a).replace(mount, str(tmp / "work"))
        for a in gate["args"]
    ]
    sa = tmp / "sa"
    sa.mkdir(exist_ok=True)
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_bytes(endpoint.ca_pem)
    env = {
        **os.environ,
        "FW_SA_DIR": str(sa),
        "FW_API_SERVER": endpoint.server,
        "COLUMNS": "200",
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [EXE, *args, "--format", "json"], env=env, capture_output=True, text=True, timeout=120
    )


async def test_presync_hook_job_reads_the_cluster_with_its_token_and_gates(
    endpoint, realdata, tmp_path
):
    (job,) = hook_manifests("presync-gate-job.yaml")
    async with KubeClient(endpoint) as api:
        await _ensure_namespace(api, HOOK_NS)
        await install_rbac(api)
        # the Job as written passes the API server's validation
        accepted = await api.request(
            "POST", f"/apis/batch/v1/namespaces/{HOOK_NS}/jobs", params={"dryRun": "All"}, body=job
        )
        assert accepted["metadata"]["annotations"]["argocd.argoproj.io/hook"] == "PreSync"
        names = await create_nodes(api, realdata)
        try:
            (doc,) = load_docs(realdata / "manifests" / "podinfo-kustomize-deployment.yaml")
            doc["spec"]["template"]["spec"]["nodeSelector"] = {"workload-type": "batch"}
            doc["spec"]["template"]["spec"]["tolerations"] = [
                {"key": "type", "operator": "Exists", "effect": "NoSchedule"}
            ]
            doc["metadata"]["namespace"] = HOOK_NS
            await _create(api, PATHS["Deployment"].format(ns=HOOK_NS), doc)
            request = {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600},
            }
            granted = await api.request(
                "POST",
                f"/api/v1/namespaces/{HOOK_NS}/serviceaccounts/fleetwarden-gate/token",
                body=request,
            )
            token = granted["status"]["token"]

            # the gate's token reads nodes and workloads, and nothing secret
            sa_endpoint = dataclasses.replace(
                endpoint, credentials=dataclasses.replace(endpoint.credentials, token=token)
            )
            async with KubeClient(sa_endpoint) as as_gate:
                with pytest.raises(Forbidden):
                    await as_gate.get(f"/api/v1/namespaces/{HOOK_NS}/secrets")
                with pytest.raises(Forbidden):
                    await as_gate.request("DELETE", f"/api/v1/nodes/{names[0]}")

            # what git-sync leaves in /gate/git/current
            git = tmp_path / "work" / "git" / "current"
            (git / "pools").mkdir(parents=True)
            (git / "pools" / "eksctl.yaml").write_text(EKSCTL)
            (git / "podinfo").mkdir()
            (git / "podinfo" / "deployment.yaml").write_text(yaml.safe_dump(doc))
            values = {
                "APP": "podinfo",
                "CLUSTER": "duckboat",
                "APP_PATH": "podinfo",
                "POOLS_PATH": "pools",
                "APP_NAMESPACE": HOOK_NS,
                "FAIL_ON": "high",
            }
            passed = run_job_gate(job, values, endpoint, token, tmp_path)
            assert passed.returncode == 0, passed.stdout + passed.stderr
            decision = json.loads(passed.stdout)
            assert decision["decision"] == "pass"

            for name in names:  # the pool's nodes lose their label
                await api.patch(
                    f"/api/v1/nodes/{name}",
                    {"metadata": {"labels": {"workload-type": None}}},
                    content_type=JSON_MERGE,
                )
            blocked = run_job_gate(job, values, endpoint, token, tmp_path)
            assert blocked.returncode == 1, blocked.stdout + blocked.stderr
            fields = {f["field"] for f in json.loads(blocked.stdout)["findings"]}
            assert {"schedule.nodeSelector", "labels.workload-type"} <= fields
            assert "blocked sync of podinfo" in blocked.stderr  # Argo CD shows the log's tail
        finally:
            for name in names:
                with contextlib.suppress(NotFound):
                    await api.request("DELETE", f"/api/v1/nodes/{name}")
