"""deploy/kubernetes on a real kube-apiserver: every object is accepted; the ServiceAccount's
RBAC lets `serve`'s watchers do all they do (nodes, the six workload kinds cluster-wide, Argo
CD cluster Secrets) with nothing refused, and nothing more — the base writes nothing at all
(not even a node patch: it runs dry-run); overlays/enforce adds exactly the node patch and
policy.mode enforce; the ConfigMaps are valid service configs; a rotated projected token is
picked up without a restart. The door: the read side's token comes from the Secret
fleetwarden-read (shipped empty, which serve refuses), the NetworkPolicy admits only Argo CD, the
ingress controller and Prometheus to the pod's port, and the shipped config served for real
closes /api, /ui and /metrics and answers only the Service's names."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import dataclasses
import json
import os
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
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
from fleetwarden.core.access import ReadAuth
from fleetwarden.core.desired_apps import AppDesired, DesiredApps
from fleetwarden.formats.errors import FormatError
from fleetwarden.ports.kube import Conflict, Forbidden, NotFound, Unauthorized
from fleetwarden.wiring.service_config import exposure_problem, service_config_from
from tests.e2e.test_watch_live import Recorder
from tests.e2e.test_workloads_live import endpoint  # noqa: F401  (the fixture)
from tests.support.serve_proc import free_port, serve

pytestmark = pytest.mark.live

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
ENFORCE = DEPLOY / "overlays" / "enforce"
NS = "fleetwarden"
SA = "fleetwarden"
SECRET_ENV = (
    "ARGOCD_TOKEN",
    "FW_AWS_TOKEN",
    "FW_ARGOCD_WEBHOOK_TOKEN",
    "FW_ADMIN_TOKEN",
    "FW_READ_TOKEN",
)

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
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}


def kustomized(root: Path = DEPLOY) -> list[dict[str, Any]]:
    """What ``kubectl apply -k root`` applies, for the kustomize features deploy/ uses (and
    nothing else: anything more fails here, so the renderer is never silently wrong;
    ``test_the_renderer_agrees_with_kustomize`` checks it against the real one): resources
    (files and directories), a NamespaceTransformer with unsetOnly, strategic-merge patches
    that replace a ConfigMap's keys."""
    kust = yaml.safe_load((root / "kustomization.yaml").read_text())
    assert set(kust) <= {"apiVersion", "kind", "resources", "transformers", "patches"}, kust
    files = sorted(p.name for p in root.glob("*.yaml") if p.name != "kustomization.yaml")
    listed = [r for r in kust["resources"] if r.endswith(".yaml")]
    patches = [p["path"] for p in kust.get("patches", ())]
    assert sorted(listed + patches) == files  # nothing left out of the kustomization
    out: list[dict[str, Any]] = []
    for name in kust["resources"]:
        if (root / name).is_dir():
            out += kustomized((root / name).resolve())
        else:
            out += [d for d in yaml.safe_load_all((root / name).read_text()) if d]
    for transformer in kust.get("transformers", ()):
        spec = yaml.safe_load(transformer)
        assert spec["kind"] == "NamespaceTransformer" and spec["unsetOnly"] is True, spec
        for doc in out:
            if doc["kind"] not in CLUSTER_SCOPED:
                doc["metadata"].setdefault("namespace", spec["metadata"]["namespace"])
    for path in patches:
        (patch,) = [d for d in yaml.safe_load_all((root / path).read_text()) if d]
        assert patch["kind"] == "ConfigMap", patch  # the one kind of patch this renderer knows
        (target,) = [
            d
            for d in out
            if d["kind"] == "ConfigMap" and d["metadata"]["name"] == patch["metadata"]["name"]
        ]
        target["data"].update(patch["data"])
    return out


def service_config(objs: list[dict[str, Any]]) -> dict[str, Any]:
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
    return yaml.safe_load(cm["data"]["config.yaml"])


def rules_of(objs: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Every (API group, resource, verb) the ServiceAccount's roles grant."""
    return sorted(
        (group, resource, verb)
        for o in objs
        if o["kind"] in ("Role", "ClusterRole")
        for rule in o["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    )


def object_ids(objs: list[dict[str, Any]]) -> list[tuple[str, str | None, str]]:
    return sorted((o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs)


def test_the_config_maps_are_valid_service_configs_and_differ_only_in_the_mode():
    base, enforce = service_config(kustomized()), service_config(kustomized(ENFORCE))
    env = dict.fromkeys(SECRET_ENV, "x")
    cfg = service_config_from(base, source="config.yaml", env=env)
    assert cfg.in_cluster == "mgmt" and cfg.argocd_namespace == "argocd"
    assert cfg.policy_mode == "dry-run"  # healing acts only once someone says so
    # it listens on every address of the pod: only because the read side has a token
    assert cfg.host == "0.0.0.0" and cfg.read.tokens == ("x",)
    assert exposure_problem(cfg) is None
    assert exposure_problem(dataclasses.replace(cfg, read=ReadAuth())) is not None
    assert "fleetwarden.fleetwarden.svc" in cfg.allowed_hosts and "*" not in cfg.allowed_hosts
    healing = service_config_from(enforce, source="overlays/enforce/config.yaml", env=env)
    assert healing.policy_mode == "enforce"
    same = copy.deepcopy(enforce)
    same["policy"]["mode"] = "dry-run"
    assert same == base, "overlays/enforce/config.yaml must be the base config but its mode"
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


def test_the_base_only_reads_and_the_enforce_overlay_adds_only_the_node_patch():
    base, enforce = rules_of(kustomized()), rules_of(kustomized(ENFORCE))
    assert {verb for _, _, verb in base} <= {"get", "list", "watch"}
    assert sorted(set(enforce) - set(base)) == [("", "nodes", "patch")]
    assert set(base) <= set(enforce)
    # the rest of the overlay is the base, object for object
    assert set(object_ids(kustomized(ENFORCE))) - set(object_ids(kustomized())) == {
        ("ClusterRole", None, "fleetwarden-heal"),
        ("ClusterRoleBinding", None, "fleetwarden-heal"),
    }


@pytest.mark.skipif(not shutil.which("kubectl"), reason="no kubectl (its kustomize) here")
@pytest.mark.parametrize("root", [DEPLOY, ENFORCE], ids=["base", "enforce"])
def test_the_renderer_agrees_with_kustomize(root):
    """The test's renderer against kubectl's kustomize, where there is one: same objects,
    namespaces, config and RBAC rules."""
    done = subprocess.run(
        ["kubectl", "kustomize", str(root)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    real = [d for d in yaml.safe_load_all(done.stdout) if d]
    ours = kustomized(root)
    assert object_ids(ours) == object_ids(real)
    assert service_config(ours) == service_config(real)
    assert rules_of(ours) == rules_of(real)


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


NODE = "fw-deploy-rbac-node"
HEAL = [o for o in kustomized(ENFORCE) if o["metadata"]["name"] == "fleetwarden-heal"]


async def _prune_heal(api: KubeClient) -> None:
    """``kubectl apply --prune`` of the base after the overlay: the heal RBAC goes away."""
    for obj in HEAL:
        with contextlib.suppress(NotFound):
            await api.request("DELETE", f"{PATHS[obj['kind']]}/{obj['metadata']['name']}")


async def _node(api: KubeClient) -> str:
    with contextlib.suppress(NotFound):
        await api.request("DELETE", f"/api/v1/nodes/{NODE}")
    for _ in range(50):
        try:
            await api.request("POST", "/api/v1/nodes", body={"metadata": {"name": NODE}})
            return f"/api/v1/nodes/{NODE}"
        except Conflict:
            await asyncio.sleep(0.1)
    raise AssertionError(f"could not create node {NODE}")


async def _eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 15) -> None:
    """RBAC changes reach the authorizer through its informers: wait for one to take effect."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        await asyncio.sleep(0.1)


async def _can_patch(client: KubeClient, path: str) -> bool:
    body = {"metadata": {"labels": {"fleetwarden.io/rbac-test": str(time.monotonic_ns())}}}
    try:
        await client.patch(path, body)
    except Forbidden:
        return False
    return True


async def _token(api: KubeClient) -> str:
    granted = await api.request(
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    return str(granted["status"]["token"])


async def test_manifests_are_accepted_and_rbac_covers_what_serve_does(
    endpoint,  # noqa: F811
    realdata,
    tmp_path,
):
    objs = kustomized()
    async with KubeClient(endpoint) as api:
        for ns in (NS, "argocd"):
            await _ensure_ns(api, ns)
        await _prune_heal(api)
        for obj in objs:
            if obj["kind"] != "Namespace":
                await _apply(api, obj)
        # the API server kept the door's objects as written
        policy = await api.get(f"{PATHS['NetworkPolicy'].format(ns=NS)}/fleetwarden")
        assert policy["spec"]["ingress"][0]["ports"] == [{"port": "http", "protocol": "TCP"}]
        read = await api.get(f"{PATHS['Secret'].format(ns=NS)}/fleetwarden-read")
        assert read["data"] == {"token": ""}
        token = await _token(api)
        node = await _node(api)
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
        settings=WatchSettings(probe_interval=1, capacity=True),  # as serve runs it
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
                    and c.capacity is not None
                    # Pending pods listed, or refused (then the assertion below names it)
                    and (c.capacity.reflection.relists >= 1 or c.capacity.reflection.refused)
                ),
                timeout=30,
            )
        await rec.wait(lambda: len(rec.lifecycle("cluster.health")) >= 2)
        # RBAC covers everything; only Argo CD's kinds may be missing (no CRDs in this cluster)
        refused = rec.lifecycle("cluster.watch_refused")
        assert [
            e.details
            for e in refused
            if not (
                e.details["resource"].startswith("argoproj.io/") and "404" in e.details["reason"]
            )
        ] == []
        assert all(e.details["to"] == "Healthy" for e in rec.lifecycle("cluster.health"))
        mgmt = fleet.watcher("mgmt")
        assert mgmt is not None and mgmt.workloads is not None
        assert "Secret" in {k.kind for k in mgmt.workloads.index.objects}  # listed, hashed
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        await argocd_client.aclose()

    # ... and nothing more: no writes at all, not even a node patch (the base runs dry-run)
    async with KubeClient(local) as as_sa:
        await _eventually(lambda: _not(_can_patch(as_sa, node)), "the base cannot patch nodes")
        for method, path, body in (
            ("POST", "/api/v1/namespaces/default/secrets", {"metadata": {"name": "x"}}),
            ("DELETE", "/api/v1/nodes/any", None),
            ("PATCH", "/apis/apps/v1/namespaces/default/deployments/x", {}),
            ("GET", "/api/v1/namespaces/argocd/secrets/cluster-via-argocd", None),
        ):
            with pytest.raises(Forbidden):
                await as_sa.request(method, path, body=body)


async def _not(check: Awaitable[bool]) -> bool:
    return not await check


async def test_the_enforce_overlay_can_patch_nodes_and_nothing_more(endpoint, tmp_path):  # noqa: F811
    async with KubeClient(endpoint) as api:
        for ns in (NS, "argocd"):
            await _ensure_ns(api, ns)
        # the ServiceAccount and its RBAC (the rest is the base's, applied by the test above;
        # a PVC deleted here would wait for a controller-manager to finalise it)
        rbac = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
        for obj in kustomized(ENFORCE):
            if obj["kind"] in rbac:
                await _apply(api, obj)
        node = await _node(api)
        sa = tmp_path / "sa"
        sa.mkdir()
        (sa / "token").write_text(await _token(api))
        (sa / "ca.crt").write_bytes(endpoint.ca_pem)
        local = in_cluster_endpoint(
            "mgmt", env={"FW_SA_DIR": str(sa), "FW_API_SERVER": endpoint.server}
        )
        try:
            async with KubeClient(local) as as_sa:
                await _eventually(lambda: _can_patch(as_sa, node), "the overlay can patch nodes")
                labels = (await api.get(node))["metadata"]["labels"]
                assert "fleetwarden.io/rbac-test" in labels  # the patch took effect
                assert (await as_sa.list("/api/v1/nodes")).items  # and it still reads
                for method, path, body in (
                    ("DELETE", node, None),
                    ("POST", "/api/v1/nodes", {"metadata": {"name": "x"}}),
                    ("POST", "/api/v1/namespaces/default/secrets", {"metadata": {"name": "x"}}),
                    ("PATCH", "/apis/apps/v1/namespaces/default/deployments/x", {}),
                ):
                    with pytest.raises(Forbidden):
                        await as_sa.request(method, path, body=body)
        finally:
            await _prune_heal(api)
            with contextlib.suppress(NotFound):
                await api.request("DELETE", node)


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
