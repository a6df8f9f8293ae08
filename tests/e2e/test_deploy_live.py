"""deploy/kubernetes on a real kube-apiserver: every object is accepted; the ServiceAccount's
RBAC lets `serve`'s watchers do all they do (nodes, the six workload kinds cluster-wide, Argo
CD cluster Secrets) with nothing refused, and nothing more (no writes but node patches); the
ConfigMap is a valid service config; a rotated projected token is picked up without a
restart. The door: the read side's token comes from the Secret fleetwarden-read (shipped
empty, which serve refuses), the NetworkPolicy admits only Argo CD, the ingress controller and
Prometheus to the pod's port, and the shipped config served for real closes /api, /ui and
/metrics and answers only the Service's names."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import http_client_factory, in_cluster_endpoint
from fleetwarden.app.watching import FleetWatcher, WatchSettings
from fleetwarden.app.workload_watching import WorkloadWatchSettings
from fleetwarden.core import workloads as wl
from fleetwarden.core.desired_apps import AppDesired, DesiredApps
from fleetwarden.entrypoints.door import ReadAuth
from fleetwarden.entrypoints.service_config import exposure_problem, service_config_from
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.kube import Conflict, Forbidden, NotFound, Unauthorized
from tests.e2e.test_watch_live import Recorder
from tests.e2e.test_workloads_live import endpoint  # noqa: F401  (the fixture)
from tests.support.serve_proc import free_port, serve

pytestmark = pytest.mark.live

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
NS = "fleetwarden"
SA = "fleetwarden"

PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "PersistentVolumeClaim": "/api/v1/namespaces/{ns}/persistentvolumeclaims",
    "Service": "/api/v1/namespaces/{ns}/services",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "Secret": "/api/v1/namespaces/{ns}/secrets",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
}


def kustomized() -> list[dict[str, Any]]:
    kust = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    files = sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kust["resources"]) == files  # nothing left out of the kustomization
    out = []
    for name in kust["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / name).read_text()):
            if doc and doc["kind"] != "Namespace":
                doc["metadata"].setdefault("namespace", kust["namespace"])
            if doc:
                out.append(doc)
    return out


async def _ensure_ns(api: KubeClient, name: str) -> None:
    with contextlib.suppress(Conflict):
        await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": name}})


async def _apply(api: KubeClient, obj: dict[str, Any]) -> None:
    ns = obj["metadata"].get("namespace", "")
    path = PATHS[obj["kind"]].format(ns=ns)
    with contextlib.suppress(NotFound):
        await api.request("DELETE", f"{path}/{obj['metadata']['name']}")
    for _ in range(50):  # a namespace or object being deleted answers 409 for a moment
        try:
            await api.request("POST", path, body=obj)
            return
        except Conflict:
            await asyncio.sleep(0.1)
    raise AssertionError(f"could not create {obj['kind']}/{obj['metadata']['name']}")


async def _token(api: KubeClient) -> str:
    granted = await api.request(
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    return str(granted["status"]["token"])


def test_the_config_map_is_a_valid_service_config():
    (cm,) = [o for o in kustomized() if o["kind"] == "ConfigMap"]
    raw = yaml.safe_load(cm["data"]["config.yaml"])
    env = {
        k: "x"
        for k in (
            "ARGOCD_TOKEN",
            "FW_AWS_TOKEN",
            "FW_ARGOCD_WEBHOOK_TOKEN",
            "FW_ADMIN_TOKEN",
            "FW_READ_TOKEN",
        )
    }
    cfg = service_config_from(raw, source="config.yaml", env=env)
    assert cfg.in_cluster == "mgmt" and cfg.argocd_namespace == "argocd"
    assert cfg.policy_mode == "dry-run"  # healing acts only once someone says so
    # it listens on every address of the pod: only because the read side has a token
    assert cfg.host == "0.0.0.0" and cfg.read.tokens == ("x",)
    assert exposure_problem(cfg) is None
    assert exposure_problem(dataclasses.replace(cfg, read=ReadAuth())) is not None
    assert "fleetwarden.fleetwarden.svc" in cfg.allowed_hosts and "*" not in cfg.allowed_hosts
    (dep,) = [o for o in kustomized() if o["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts
    assert cfg.store.endswith("/var/lib/fleetwarden/audit.db")
    assert any(m.startswith("/var/lib/fleetwarden") for m in mounts)


def test_the_read_token_comes_from_a_secret_shipped_empty_which_serve_refuses():
    objs = kustomized()
    (secret,) = [o for o in objs if o["kind"] == "Secret"]
    assert secret["metadata"]["name"] == "fleetwarden-read"
    assert secret["stringData"] == {"token": ""}  # no token everyone knows
    (dep,) = [o for o in objs if o["kind"] == "Deployment"]
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    (var,) = [e for e in container["env"] if e["name"] == "FW_READ_TOKEN"]
    assert var["valueFrom"]["secretKeyRef"] == {"name": "fleetwarden-read", "key": "token"}
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
    raw = yaml.safe_load(cm["data"]["config.yaml"])
    assert raw["auth"]["read"] == {"bearerToken": "env:FW_READ_TOKEN"}
    env = {k: "x" for k in ("ARGOCD_TOKEN", "FW_AWS_TOKEN", "FW_ARGOCD_WEBHOOK_TOKEN")}
    with pytest.raises(FormatError, match="FW_READ_TOKEN"):
        service_config_from(
            raw, source="config.yaml", env={**env, "FW_ADMIN_TOKEN": "x", "FW_READ_TOKEN": ""}
        )


def test_the_network_policy_admits_only_argocd_the_ingress_and_prometheus_to_the_port():
    objs = kustomized()
    (policy,) = [o for o in objs if o["kind"] == "NetworkPolicy"]
    (dep,) = [o for o in objs if o["kind"] == "Deployment"]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    namespaces = {
        f["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for f in rule["from"]
    }
    assert namespaces == {"argocd", "ingress-nginx", "monitoring"}
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert [p["port"] for p in rule["ports"]] == [container["ports"][0]["name"]]


def test_the_shipped_config_served_closes_the_read_side_and_answers_only_its_names(tmp_path):
    """The ConfigMap's listen/allowedHosts/auth, run for real (the cluster parts left out)."""
    (cm,) = [o for o in kustomized() if o["kind"] == "ConfigMap"]
    raw = yaml.safe_load(cm["data"]["config.yaml"])
    port = free_port()
    door = {
        "listen": f"0.0.0.0:{port}",
        "allowedHosts": raw["allowedHosts"],
        "auth": {k: raw["auth"][k] for k in ("read", "aws", "admin")},
    }
    env = {**os.environ, "FW_READ_TOKEN": "r" * 32, "FW_AWS_TOKEN": "a", "FW_ADMIN_TOKEN": "d"}
    with serve(tmp_path, door, env=env) as svc:
        base = f"http://127.0.0.1:{port}"
        named = {"host": f"fleetwarden.fleetwarden.svc:{port}"}
        read = {**named, "authorization": "Bearer " + "r" * 32}
        for path in ("/api/findings", "/ui/", "/metrics"):
            assert httpx.get(base + path, headers=named).status_code == 401, path
            assert httpx.get(base + path, headers=read).status_code == 200, path
        pod_ip = {**read, "host": f"10.1.2.3:{port}"}
        assert httpx.get(base + "/api/findings", headers=pod_ip).status_code == 400
        assert httpx.get(base + "/healthz", headers={"host": f"10.1.2.3:{port}"}).status_code == 200
        assert svc.proc.poll() is None


async def test_manifests_are_accepted_and_rbac_covers_what_serve_does(
    endpoint,  # noqa: F811
    realdata,
    tmp_path,
):
    objs = kustomized()
    async with KubeClient(endpoint) as api:
        for ns in (NS, "argocd"):
            await _ensure_ns(api, ns)
        for obj in objs:
            if obj["kind"] != "Namespace":
                await _apply(api, obj)
        # the API server kept the door's objects as written
        policy = await api.get(f"{PATHS['NetworkPolicy'].format(ns=NS)}/fleetwarden")
        assert policy["spec"]["ingress"][0]["ports"] == [{"port": "http", "protocol": "TCP"}]
        read = await api.get(f"{PATHS['Secret'].format(ns=NS)}/fleetwarden-read")
        assert read["data"] == {"token": ""}
        token = await _token(api)
        # an Argo CD cluster Secret for a second cluster: this same API server, reached with
        # the ServiceAccount's token (as a real one would carry its own credentials)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "cluster-via-argocd",
                "namespace": "argocd",
                "labels": {"argocd.argoproj.io/secret-type": "cluster"},
            },
            "stringData": {
                "name": "via-argocd",
                "server": endpoint.server,
                "config": json.dumps(
                    {
                        "bearerToken": token,
                        "tlsClientConfig": {"caData": base64.b64encode(endpoint.ca_pem).decode()},
                    }
                ),
            },
        }
        with contextlib.suppress(NotFound):
            await api.request("DELETE", "/api/v1/namespaces/argocd/secrets/cluster-via-argocd")
        await api.request("POST", "/api/v1/namespaces/argocd/secrets", body=secret)

    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_bytes(endpoint.ca_pem)
    local = in_cluster_endpoint(
        "mgmt", env={"FW_SA_DIR": str(sa), "FW_API_SERVER": endpoint.server}
    )
    (podinfo,) = [
        d
        for d in yaml.safe_load_all(
            (realdata / "manifests" / "podinfo-kustomize-deployment.yaml").read_text()
        )
        if d
    ]
    desired = DesiredApps(
        [AppDesired("podinfo", {None: [wl.ObjectIndex.wrap(podinfo, source="git")]})]
    )
    rec = Recorder()
    fleet = FleetWatcher(
        [],
        http_client_factory,
        rec.emit,
        settings=WatchSettings(probe_interval=1),
        desired_apps=desired,
        workload_settings=WorkloadWatchSettings(),  # cluster-wide, Secrets included
    )
    argocd_client = http_client_factory(local)
    runner = asyncio.create_task(fleet.run([local], (argocd_client, "argocd")))
    try:
        for name in ("mgmt", "via-argocd"):
            await rec.wait(
                lambda name=name: (
                    (c := fleet.watcher(name))
                    and c.synced.is_set()
                    and c.workloads is not None
                    and c.workloads.synced.is_set()
                ),
                timeout=30,
            )
        await rec.wait(lambda: len(rec.lifecycle("cluster.health")) >= 2)
        assert rec.lifecycle("cluster.watch_refused") == []
        assert all(e.details["to"] == "Healthy" for e in rec.lifecycle("cluster.health"))
        mgmt = fleet.watcher("mgmt")
        assert mgmt is not None and mgmt.workloads is not None
        assert "Secret" in {k.kind for k in mgmt.workloads.index.objects}  # listed, hashed
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        await argocd_client.aclose()

    # ... and nothing more: no writes but node patches
    async with KubeClient(local) as as_sa:
        for method, path, body in (
            ("POST", "/api/v1/namespaces/default/secrets", {"metadata": {"name": "x"}}),
            ("DELETE", "/api/v1/nodes/any", None),
            ("PATCH", "/apis/apps/v1/namespaces/default/deployments/x", {}),
            ("GET", "/api/v1/namespaces/argocd/secrets/cluster-via-argocd", None),
        ):
            with pytest.raises(Forbidden):
                await as_sa.request(method, path, body=body)


async def test_a_rotated_token_is_picked_up_without_a_restart(endpoint, tmp_path):  # noqa: F811
    kinds = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
    objs = [o for o in kustomized() if o["kind"] in kinds]
    async with KubeClient(endpoint) as api:
        await _ensure_ns(api, NS)
        for obj in objs:
            await _apply(api, obj)
        sa = tmp_path / "sa"
        sa.mkdir()
        # the token the pod started with has expired by now (the API server refuses it)
        (sa / "token").write_text("expired.token.value")
        (sa / "ca.crt").write_bytes(endpoint.ca_pem)
        local = in_cluster_endpoint(
            "mgmt", env={"FW_SA_DIR": str(sa), "FW_API_SERVER": endpoint.server}
        )
        async with KubeClient(local) as as_sa:
            with pytest.raises(Unauthorized):
                await as_sa.list("/api/v1/nodes")
            # the kubelet writes a fresh token into the projected volume: the next request
            # gets a 401 with the old one, re-reads the file and succeeds
            (sa / "token").write_text(await _token(api))
            assert (await as_sa.list("/api/v1/nodes")).resource_version
            # and the fresh token is kept for the requests that follow
            assert (await as_sa.get("/version"))["gitVersion"]
