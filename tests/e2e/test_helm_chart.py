"""deploy/helm/fleetwarden with the real helm (scripts/helm-ensure) and a real kube-apiserver:
the chart lints (also --strict) for every value set; what it renders keeps deploy/kubernetes'
security choices (non-root, read-only root filesystem, no capabilities, RuntimeDefault seccomp,
a short-lived token only where the API is called, node patch only when policy.mode heals); the
config it renders is accepted by fleetwarden's own config loader with exactly the variables the
Deployments set; every object is accepted by the API server (server-side dry run); and the
ServiceAccounts can do what each role needs and nothing more (SubjectAccessReviews against the
RBAC created for real). The image's facts (Dockerfile: user, port, entrypoint) match the chart.

Without helm and no way to build it, the tests skip with one line; under CI (``.ci/run`` sets
FW_REQUIRE_REALDATA=1; FW_REQUIRE_HELM=1 says the same for this file) that is a failure."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleetwarden.adapters.kube.client import KubeClient
from fleetwarden.adapters.kube.config import load_kubeconfig
from fleetwarden.ports.kube import Conflict, Forbidden, NotFound
from fleetwarden.wiring.service_config import exposure_problem, service_config_from

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "fleetwarden"
DOCKERFILE = ROOT / "Dockerfile"
EXE = shutil.which("fleetwarden", path=str(Path(sys.executable).parent)) or "fleetwarden"
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
REQUIRED = os.environ.get("FW_REQUIRE_HELM") == "1" or os.environ.get("FW_REQUIRE_REALDATA") == "1"

SPLIT = {
    "role": "split",
    "queue": {"url": "nats://fw:pw@nats.nats.svc:4222"},
    "store": {"url": "postgresql://fw:pw@pg.db.svc:5432/fleetwarden"},
    "gateway": {"replicas": 3},
    "worker": {"replicas": 1},
}
EXTERNAL = {
    "queue": {"existingSecret": "fw-nats", "existingSecretKey": "nats-url"},
    "store": {"existingSecret": "fw-pg", "existingSecretKey": "dsn"},
    "auth": {
        "existingSecret": "fw-auth",
        "sources": {"aws": "bearerToken", "flux": "hmacSecret", "gcp": "bearerToken"},
    },
    "argocd": {"tokenSecret": "argocd-token"},
}
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "split": SPLIT,
    "enforce": {"policy": {"mode": "enforce"}},
    "approval": {"policy": {"mode": "approval"}, "rbac": {"fluxReconcile": True}},
    "external": EXTERNAL,
    "split-external": {**EXTERNAL, "role": "split"},
    "gate": {"gate": {"enabled": True}},
    "gate-only": {"serve": {"enabled": False}, "gate": {"enabled": True}},
    "namespaced": {"workloads": {"namespaces": ["shop", "billing"], "secrets": False}},
    "leases": {"rbac": {"leases": True}},
    "ha": {
        **SPLIT,
        "policy": {"mode": "enforce"},
        "worker": {"replicas": 3},
        "leaderElection": {"enabled": True, "leaseSeconds": 10},
        "sharding": {"enabled": True},
    },
    "monitor": {"serviceMonitor": {"enabled": True}},
}


@pytest.fixture(scope="session")
def helm() -> str:
    """helm from scripts/helm-ensure (FW_HELM, PATH, or a pinned build from the Go module
    proxy): skipped with one line when it cannot be had, a failure under CI."""
    reason = None
    try:
        proc = subprocess.run(
            [str(ROOT / "scripts" / "helm-ensure")],
            capture_output=True,
            text=True,
            timeout=1800,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = f"scripts/helm-ensure did not run: {exc}"
    else:
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            reason = f"scripts/helm-ensure exited {proc.returncode}: {last}"
    if reason is not None:
        if REQUIRED:
            pytest.fail(f"helm is required here (CI): {reason}")
        pytest.skip(f"no helm: {reason}")
    return proc.stdout.strip().splitlines()[-1]


def helm_run(helm: str, *args: str, values: dict[str, Any] | None, tmp: Path):
    cmd = [helm, *args]
    if values is not None:
        path = tmp / f"values-{time.monotonic_ns()}.yaml"
        path.write_text(yaml.safe_dump(values))
        cmd += ["-f", str(path)]
    # a private HOME: no user repositories or plugins, and nothing written to the real one
    env = {**os.environ, "HOME": str(tmp), "XDG_CACHE_HOME": str(tmp / "cache")}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def render(
    helm: str,
    values: dict[str, Any],
    tmp: Path,
    *,
    release: str = "fw",
    namespace: str = "fleetwarden",
) -> list[dict[str, Any]]:
    done = helm_run(
        helm, "template", release, str(CHART), "--namespace", namespace, values=values, tmp=tmp
    )
    assert done.returncode == 0, done.stderr
    objs = [d for d in yaml.safe_load_all(done.stdout) if d]
    for obj in objs:  # where helm install puts what names no namespace
        if obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"].setdefault("namespace", namespace)
    return objs


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def pod_specs(objs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{o['kind']}/{o['metadata']['name']}", o["spec"]["template"]["spec"])
        for o in objs
        if o["kind"] in ("Deployment", "Job")
    ]


def granted(objs: list[dict[str, Any]], sa: str) -> set[tuple[str | None, str, str, str]]:
    """(namespace or None for cluster-wide, API group, resource, verb) the ServiceAccount ``sa``
    gets from the rendered bindings."""
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objs}
    out = set()
    for b in objs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s["kind"] == "ServiceAccount" and s["name"] == sa for s in b["subjects"]):
            continue
        ns = b["metadata"].get("namespace")
        ref = b["roleRef"]
        role = roles[(ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"])]
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add((ns, group, resource, verb))
    return out


# --- lint and render ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_the_chart_lints_strictly_with_every_value_set(helm, tmp_path, name):
    for strict in ((), ("--strict",)):
        done = helm_run(helm, "lint", *strict, str(CHART), values=VALUE_SETS[name], tmp=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_pod_runs_unprivileged_with_a_read_only_root(helm, tmp_path, name):
    objs = render(helm, VALUE_SETS[name], tmp_path)
    pods = pod_specs(objs)
    assert pods
    for where, pod in pods:
        sc = pod["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0, where
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert pod["automountServiceAccountToken"] is False, where
        for c in pod.get("initContainers", []) + pod["containers"]:
            csc = c["securityContext"]
            assert csc["readOnlyRootFilesystem"] is True, (where, c["name"])
            assert csc["allowPrivilegeEscalation"] is False, (where, c["name"])
            assert csc["capabilities"] == {"drop": ["ALL"]}, (where, c["name"])
            assert c["resources"]["requests"] and c["resources"]["limits"]["memory"], where
        mounts = {m["name"]: m for c in pod["containers"] for m in c.get("volumeMounts", [])}
        assert "tmp" in mounts or where.startswith("Job/"), where  # a writable /tmp
        for c in pod["containers"]:
            if c["args"][0] == "serve":
                for probe in ("readinessProbe", "livenessProbe"):
                    assert c[probe]["httpGet"] == {"path": "/healthz", "port": "http"}, where


def test_no_pod_shares_the_host_or_mounts_its_paths(helm, tmp_path):
    """What Pod Security 'restricted' refuses beyond the security contexts (the API server
    enforces the whole profile on each pod below, in dry run)."""
    for name in ("defaults", "split", "gate"):
        for where, pod in pod_specs(render(helm, VALUE_SETS[name], tmp_path)):
            assert not {"hostNetwork", "hostPID", "hostIPC"} & set(pod), where
            for vol in pod["volumes"]:
                assert "hostPath" not in vol, where


@pytest.mark.parametrize(
    "name", ["defaults", "enforce", "approval", "leases", "gate", "namespaced", "ha"]
)
def test_the_watchers_never_patch_nodes_unless_the_policy_heals(helm, tmp_path, name):
    values = VALUE_SETS[name]
    objs = render(helm, values, tmp_path)
    rules = granted(objs, "fw-fleetwarden")
    heals = values.get("policy", {}).get("mode") in ("enforce", "approval")
    writes = {(g, r, v) for _, g, r, v in rules if v not in ("get", "list", "watch")}
    expected = {("", "nodes", "patch")} if heals else set()
    if heals and values.get("rbac", {}).get("fluxReconcile"):
        expected |= {
            ("kustomize.toolkit.fluxcd.io", "kustomizations", "patch"),
            ("helm.toolkit.fluxcd.io", "helmreleases", "patch"),
            ("source.toolkit.fluxcd.io", "gitrepositories", "patch"),
        }
    if values.get("rbac", {}).get("leases") or "leaderElection" in values:
        expected |= {("coordination.k8s.io", "leases", v) for v in ("create", "update", "delete")}
    assert writes == expected
    # Leases, when granted, only in the release's own namespace
    assert {ns for ns, g, *_ in rules if g == "coordination.k8s.io"} <= {"fleetwarden"}
    # what serve reads: nodes, the six workload kinds, Argo CD's cluster Secrets
    assert (None, "", "nodes", "watch") in rules
    assert ("argocd", "", "secrets", "watch") in rules
    assert not any(r == "secrets" and v == "get" for _, _, r, v in rules)  # values never fetched
    if name == "namespaced":
        assert not any(ns is None and r == "deployments" for ns, _, r, _ in rules)
        assert ("shop", "apps", "deployments", "watch") in rules
        assert not any(r == "secrets" and ns != "argocd" for ns, _, r, _ in rules)
    else:
        assert (None, "apps", "deployments", "watch") in rules
        assert (None, "", "secrets", "list") in rules  # listed to hash (workloads.secrets)


def test_the_enforce_mode_differs_from_dry_run_by_the_node_patch_and_the_mode(helm, tmp_path):
    def rbac_and_config(values):
        objs = render(helm, values, tmp_path)
        (cm,) = of_kind(objs, "ConfigMap")
        return granted(objs, "fw-fleetwarden"), yaml.safe_load(cm["data"]["all.yaml"])

    dry_rules, dry_cfg = rbac_and_config({})
    enf_rules, enf_cfg = rbac_and_config(VALUE_SETS["enforce"])
    assert enf_rules - dry_rules == {(None, "", "nodes", "patch")}
    assert dry_rules <= enf_rules
    assert (dry_cfg["policy"]["mode"], enf_cfg["policy"]["mode"]) == ("dry-run", "enforce")
    dry_cfg["policy"]["mode"] = "enforce"
    assert dry_cfg == enf_cfg


def test_the_gateways_have_no_kubernetes_access_and_no_token(helm, tmp_path):
    objs = render(helm, SPLIT, tmp_path)
    deps = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d
        for d in of_kind(objs, "Deployment")
    }
    assert set(deps) == {"gateway", "worker"}
    gw = deps["gateway"]["spec"]["template"]["spec"]
    assert gw["serviceAccountName"] == "fw-fleetwarden-gateway"
    assert granted(objs, "fw-fleetwarden-gateway") == set()
    assert "token" not in {v["name"] for v in gw["volumes"]}
    worker = deps["worker"]["spec"]["template"]["spec"]
    assert worker["serviceAccountName"] == "fw-fleetwarden"
    assert "token" in {v["name"] for v in worker["volumes"]}
    assert deps["gateway"]["spec"]["replicas"] == 3 and deps["worker"]["spec"]["replicas"] == 1
    # the Service sends traffic to the gateways only; the PDB covers the replicated one
    (svc,) = of_kind(objs, "Service")
    assert svc["spec"]["selector"]["app.kubernetes.io/component"] == "gateway"
    (pdb,) = of_kind(objs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "gateway"
    # no SQLite, no volume: the queue and the store are external
    assert of_kind(objs, "PersistentVolumeClaim") == []


def test_one_replica_on_the_sqlite_volume_by_default(helm, tmp_path):
    objs = render(helm, {}, tmp_path)
    (dep,) = of_kind(objs, "Deployment")
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    (pvc,) = of_kind(objs, "PersistentVolumeClaim")
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for v in dep["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert claims == [pvc["metadata"]["name"]]
    assert of_kind(objs, "PodDisruptionBudget") == []  # one replica: a PDB would block drains
    assert of_kind(objs, "ServiceMonitor") == [] and of_kind(objs, "Job") == []


def _secret_env(dep: dict[str, Any]) -> dict[str, tuple[str, str]]:
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return {
        e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
        for e in c.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }


@pytest.mark.parametrize(
    "name", ["defaults", "split", "enforce", "external", "split-external", "monitor", "ha"]
)
def test_the_rendered_config_is_accepted_by_the_service_config_loader(helm, tmp_path, name):
    """Each Deployment's config (its role's key of the ConfigMap) loads with
    ``service_config_from`` given exactly the Deployment's secret variables, refers to no
    variable the Deployment does not set, and would be allowed to listen on the pod's
    addresses (auth.read is set)."""
    objs = render(helm, VALUE_SETS[name], tmp_path)
    (cm,) = of_kind(objs, "ConfigMap")
    for dep in of_kind(objs, "Deployment"):
        role = dep["metadata"]["labels"]["app.kubernetes.io/component"]
        (item,) = next(
            v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "config"
        )["configMap"]["items"]
        assert item == {"key": f"{role}.yaml", "path": "config.yaml"}
        text = cm["data"][item["key"]]
        raw = yaml.safe_load(text)
        env = _secret_env(dep)
        referenced = set(re.findall(r"env:([A-Za-z_][A-Za-z0-9_]*)", text))
        assert referenced == set(env), (role, referenced ^ set(env))
        values = {n: f"value-of-{n}" for n in env}
        if "FW_QUEUE_URL" in env:
            values["FW_QUEUE_URL"] = "nats://u:p@nats:4222"
        if "FW_STORE_URL" in env:
            values["FW_STORE_URL"] = "postgresql://u:p@pg:5432/fw"
        cfg = service_config_from(raw, source=f"{name}/{item['key']}", env=values)
        assert cfg.role == role
        assert cfg.host == "0.0.0.0" and exposure_problem(cfg) is None
        assert cfg.read.tokens == ("value-of-FW_READ_TOKEN",)
        assert "fw-fleetwarden.fleetwarden.svc" in cfg.allowed_hosts
        assert ("*" in cfg.allowed_hosts) == (name == "monitor")
        if role in ("gateway", "worker"):
            assert cfg.queue.startswith("nats://") and cfg.store.startswith("postgresql://")
        else:
            assert cfg.store.startswith("sqlite:////var/lib/fleetwarden/") or "FW_STORE_URL" in env
        if name == "ha" and role == "worker":
            assert cfg.leader_election is not None and cfg.leader_election.in_cluster
            assert cfg.leader_election.namespace == "fleetwarden"
            assert cfg.leader_election.name == "fw-fleetwarden-leader"
            assert cfg.leader_election.timing.lease_duration == 10
            assert cfg.sharding is not None and cfg.sharding.group == "fw-fleetwarden"
        else:  # the gateways never elect nor watch
            assert cfg.leader_election is None and cfg.sharding is None
        if name.endswith("external"):
            assert env["FW_QUEUE_URL"] == ("fw-nats", "nats-url")
            assert env["FW_STORE_URL"] == ("fw-pg", "dsn")
            assert env["ARGOCD_TOKEN"] == ("argocd-token", "token")
            assert cfg.auth["flux"].hmac_secrets == ("value-of-FW_FLUX_TOKEN",)
            assert {s for s, _ in env.values()} == {"fw-nats", "fw-pg", "fw-auth", "argocd-token"}
            assert of_kind(objs, "Secret") == []  # nothing generated: the user's Secrets


def test_generated_tokens_are_random_kept_and_cover_every_reference(helm, tmp_path):
    objs = render(helm, {}, tmp_path)
    (secret,) = [
        s for s in of_kind(objs, "Secret") if s["metadata"]["name"] == "fw-fleetwarden-auth"
    ]
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    (dep,) = of_kind(objs, "Deployment")
    refs = {key for name, key in _secret_env(dep).values() if name == "fw-fleetwarden-auth"}
    assert refs == set(secret["data"]) == {"read", "admin", "aws", "argocd"}
    tokens = [base64.b64decode(v).decode() for v in secret["data"].values()]
    assert all(len(t) == 48 and t.isalnum() for t in tokens)
    assert len(set(tokens)) == len(tokens)
    (again,) = [s for s in of_kind(render(helm, {}, tmp_path), "Secret")]
    assert again["data"]["read"] != secret["data"]["read"]  # no fixed default anywhere


def test_inline_urls_go_to_a_secret_never_to_the_config_map(helm, tmp_path):
    objs = render(helm, SPLIT, tmp_path)
    (urls,) = [s for s in of_kind(objs, "Secret") if s["metadata"]["name"] == "fw-fleetwarden-urls"]
    assert urls["stringData"] == {"queue": SPLIT["queue"]["url"], "store": SPLIT["store"]["url"]}
    (cm,) = of_kind(objs, "ConfigMap")
    assert "pw@" not in yaml.safe_dump(cm)


def test_the_service_monitor_scrapes_metrics_with_the_read_token(helm, tmp_path):
    objs = render(helm, VALUE_SETS["monitor"], tmp_path)
    (sm,) = of_kind(objs, "ServiceMonitor")
    (svc,) = of_kind(objs, "Service")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (ep,) = sm["spec"]["endpoints"]
    assert ep["port"] == "http" and ep["path"] == "/metrics"
    assert ep["authorization"]["credentials"] == {"name": "fw-fleetwarden-auth", "key": "read"}


def test_the_network_policy_admits_only_the_listed_namespaces_to_the_port(helm, tmp_path):
    for name in ("defaults", "split"):
        objs = render(helm, VALUE_SETS[name], tmp_path)
        (np,) = of_kind(objs, "NetworkPolicy")
        assert np["spec"]["policyTypes"] == ["Ingress"]
        (rule,) = np["spec"]["ingress"]
        names = {
            f["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
            for f in rule["from"]
        }
        assert names == {"argocd", "ingress-nginx", "monitoring"}
        assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
        for dep in of_kind(objs, "Deployment"):
            labels = dep["spec"]["template"]["metadata"]["labels"]
            assert np["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def test_the_gate_job_is_the_argocd_presync_hook_with_read_only_rbac(helm, tmp_path):
    objs = render(helm, VALUE_SETS["gate"], tmp_path)
    (job,) = of_kind(objs, "Job")
    assert job["metadata"]["annotations"]["argocd.argoproj.io/hook"] == "PreSync"
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "fw-fleetwarden-gate"
    (gate,) = pod["containers"]
    assert gate["args"][0] == "gate" and "--in-cluster=$(CLUSTER)" in gate["args"]
    # the same Job as deploy/argocd's, value for value where the chart has no reason to differ
    shipped = yaml.safe_load((ROOT / "deploy/argocd/presync-gate-job.yaml").read_text())
    assert gate["args"] == shipped["spec"]["template"]["spec"]["containers"][0]["args"][:7]
    rules = granted(objs, "fw-fleetwarden-gate")
    assert {v for *_, v in rules} == {"get", "list"}
    assert {(ns, r) for ns, _, r, _ in rules} == {
        (None, "nodes"),
        ("fleetwarden", "deployments"),
        ("fleetwarden", "statefulsets"),
        ("fleetwarden", "daemonsets"),
        ("fleetwarden", "horizontalpodautoscalers"),
        ("fleetwarden", "configmaps"),
    }
    for o in objs:
        if o["metadata"]["name"].startswith("fw-fleetwarden-gate") and o["kind"] != "Job":
            assert o["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "-1"


def test_the_gate_alone_renders_only_the_gate_and_its_rbac(helm, tmp_path):
    """serve.enabled false: the chart as a second source of an application (its namespace)."""
    objs = render(helm, VALUE_SETS["gate-only"], tmp_path, namespace="shop")
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objs) == [
        ("ClusterRole", "fw-fleetwarden-gate-nodes"),
        ("ClusterRoleBinding", "fw-fleetwarden-gate-nodes-shop"),
        ("Job", "fw-fleetwarden-presync-gate"),
        ("Role", "fw-fleetwarden-gate"),
        ("RoleBinding", "fw-fleetwarden-gate"),
        ("ServiceAccount", "fw-fleetwarden-gate"),
    ]
    assert {(ns, r) for ns, _, r, _ in granted(objs, "fw-fleetwarden-gate")} >= {
        (None, "nodes"),
        ("shop", "deployments"),
    }


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"role": "split"}, "role split needs a NATS JetStream queue"),
        (
            {"role": "split", "queue": {"url": "nats://n:4222"}},
            "role split needs a shared audit store",
        ),
        (
            {**SPLIT, "policy": {"mode": "enforce"}, "worker": {"replicas": 2}},
            "every worker would heal",
        ),
        ({"queue": {"url": "redis://r:6379"}}, "queue.url must be a nats:// URL"),
        ({"policy": {"mode": "yolo"}}, "policy.mode must be dry-run, enforce or approval"),
        (
            {"auth": {"sources": {"github": "bearerToken"}}},
            "auth.sources.github: not an event source",
        ),
    ],
)
def test_combinations_that_would_not_run_are_refused_with_the_reason(
    helm, tmp_path, values, message
):
    done = helm_run(helm, "template", "fw", str(CHART), values=values, tmp=tmp_path)
    assert done.returncode != 0
    assert message in done.stderr


def test_leader_election_and_shards_get_lease_rbac_pod_names_and_many_healing_workers(
    helm, tmp_path
):
    """With leaderElection and sharding: 3 healing workers are allowed (one leads), the Leases
    of the release namespace are granted with exactly the verbs the elector and the membership
    use, and every serve pod knows its name (the downward API). Without them: no Lease RBAC."""
    objs = render(helm, VALUE_SETS["ha"], tmp_path)
    (worker,) = [
        d for d in of_kind(objs, "Deployment") if d["metadata"]["name"].endswith("-worker")
    ]
    assert worker["spec"]["replicas"] == 3
    for dep in of_kind(objs, "Deployment"):
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        (pod_name,) = [e for e in container["env"] if e["name"] == "POD_NAME"]
        assert pod_name["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    (role,) = [r for r in of_kind(objs, "Role") if r["metadata"]["name"].endswith("-leases")]
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "list", "create", "update", "delete"],
        }
    ]
    for alone in ({"leaderElection": {"enabled": True}}, {"sharding": {"enabled": True}}):
        assert [r for r in of_kind(render(helm, alone, tmp_path), "Role") if "leases" in str(r)]
    plain = render(helm, VALUE_SETS["defaults"], tmp_path)
    assert not [r for r in of_kind(plain, "Role") if r["metadata"]["name"].endswith("-leases")]


# --- the image -------------------------------------------------------------------------


def dockerfile_facts() -> dict[str, Any]:
    final = DOCKERFILE.read_text().split("\nFROM ")[-1]  # the runtime stage
    user = re.search(r"^USER (\d+):(\d+)$", final, re.M)
    expose = re.search(r"^EXPOSE (\d+)$", final, re.M)
    entry = re.search(r"^ENTRYPOINT (\[.*\])$", final, re.M)
    assert user and expose and entry, final
    return {
        "uid": int(user[1]),
        "gid": int(user[2]),
        "port": int(expose[1]),
        "entrypoint": yaml.safe_load(entry[1]),
    }


def test_the_image_facts_match_the_chart(helm, tmp_path):
    """The Dockerfile's user, port and entrypoint are what the chart assumes: it runs as that
    user, probes and serves that port, and passes only arguments (the entrypoint is kept) to
    commands the installed CLI has."""
    facts = dockerfile_facts()
    assert facts["entrypoint"] == ["fleetwarden"]
    for name in ("defaults", "split", "gate"):
        for where, pod in pod_specs(render(helm, VALUE_SETS[name], tmp_path)):
            sc = pod["securityContext"]
            assert (sc["runAsUser"], sc["runAsGroup"]) == (facts["uid"], facts["gid"]), where
            for c in pod["containers"]:
                assert "command" not in c, where  # the image's ENTRYPOINT runs
                if c["args"][0] == "serve":
                    assert c["ports"] == [
                        {"name": "http", "containerPort": facts["port"], "protocol": "TCP"}
                    ]
    (cm,) = of_kind(render(helm, {}, tmp_path), "ConfigMap")
    assert yaml.safe_load(cm["data"]["all.yaml"])["listen"].endswith(f":{facts['port']}")
    for command in ("serve", "gate"):
        done = subprocess.run([EXE, command, "--help"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert (
        "--config"
        in subprocess.run(
            [EXE, "serve", "--help"], capture_output=True, text=True, timeout=60
        ).stdout
    )


# --- a real API server -------------------------------------------------------------------

PATHS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Secret": "/api/v1/namespaces/{ns}/secrets",
    "PersistentVolumeClaim": "/api/v1/namespaces/{ns}/persistentvolumeclaims",
    "Service": "/api/v1/namespaces/{ns}/services",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
}
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


@pytest.fixture
def api_endpoint(k8s):
    return load_kubeconfig(Path(k8s["kubeconfig"]))[1]


def _path(obj: dict[str, Any], default_ns: str) -> str:
    return PATHS[obj["kind"]].format(ns=obj["metadata"].get("namespace", default_ns))


async def _namespace(api: KubeClient, name: str) -> None:
    body = {
        "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}
    }
    with contextlib.suppress(Conflict):
        await api.request("POST", "/api/v1/namespaces", body=body)


async def _create(api: KubeClient, obj: dict[str, Any], ns: str) -> None:
    path = _path(obj, ns)
    with contextlib.suppress(NotFound):
        await api.request("DELETE", f"{path}/{obj['metadata']['name']}")
    for _ in range(50):  # an object being deleted answers 409 for a moment
        try:
            await api.request("POST", path, body=obj)
            return
        except Conflict:
            await asyncio.sleep(0.1)
    raise AssertionError(f"could not create {obj['kind']}/{obj['metadata']['name']}")


@pytest.mark.live
@pytest.mark.parametrize("name", sorted(set(VALUE_SETS) - {"monitor"}))
async def test_every_rendered_object_is_accepted_by_the_api_server(
    helm, tmp_path, api_endpoint, name
):
    """Server-side dry run of each object (POST ?dryRun=All) into a namespace enforcing the
    'restricted' Pod Security profile: schema, defaults, admission and Pod Security all pass.
    (The ServiceMonitor is checked by `helm template` only: its CRD is not installed here.)"""
    ns = f"fw-dry-{name}"
    objs = render(helm, VALUE_SETS[name], tmp_path, namespace=ns)
    async with KubeClient(api_endpoint) as api:
        await _namespace(api, ns)
        await _namespace(api, "argocd")
        for wns in VALUE_SETS[name].get("workloads", {}).get("namespaces", []):
            await _namespace(api, wns)
        # ServiceAccounts for real: a Pod naming a missing one is refused before Pod Security
        accounts = of_kind(objs, "ServiceAccount")
        for obj in accounts:
            await api.request("POST", _path(obj, ns), params={"dryRun": "All"}, body=obj)
            await _create(api, obj, ns)
        for obj in objs:
            if obj in accounts:
                continue
            got = await api.request("POST", _path(obj, ns), params={"dryRun": "All"}, body=obj)
            assert got["kind"] == obj["kind"] and got["metadata"]["name"] == obj["metadata"]["name"]
            assert "uid" in got["metadata"]  # defaulted by the server
        # Pod Security is enforced on Pods, not on their templates: each template as a Pod
        for where, pod in pod_specs(objs):
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": pod}
            got = await api.request(
                "POST", f"/api/v1/namespaces/{ns}/pods", params={"dryRun": "All"}, body=body
            )
            assert got["spec"]["securityContext"]["runAsNonRoot"] is True, where
        # ... and it is enforced here: the same Pod made to run as root is refused
        bad = copy.deepcopy(pod_specs(objs)[0][1])
        bad["securityContext"]["runAsNonRoot"] = False
        bad["securityContext"]["runAsUser"] = 0
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": bad}
        with pytest.raises(Forbidden, match="restricted"):
            await api.request(
                "POST", f"/api/v1/namespaces/{ns}/pods", params={"dryRun": "All"}, body=body
            )


@pytest.mark.live
async def test_generated_tokens_survive_an_upgrade_and_an_uninstall(
    helm, tmp_path, k8s, api_endpoint
):
    """``helm install`` for real, then ``upgrade`` and ``uninstall``: the auth Secret the chart
    generated keeps its tokens across the upgrade (lookup) and outlives the uninstall
    (helm.sh/resource-policy: keep), so the senders' tokens never change under them."""
    ns = "fw-tokens"
    kube = ["--kubeconfig", k8s["kubeconfig"], "--kube-context", api_endpoint.name]
    secret_path = f"/api/v1/namespaces/{ns}/secrets/fw-fleetwarden-auth"
    async with KubeClient(api_endpoint) as api:
        await _namespace(api, ns)
        await _namespace(api, "argocd")  # the Role for Argo CD's cluster Secrets lands there
        with contextlib.suppress(NotFound):
            await api.request("DELETE", secret_path)
        helm_run(helm, "uninstall", "fw", "-n", ns, *kube, values=None, tmp=tmp_path)
        for step in ("install", "upgrade"):
            done = helm_run(helm, step, "fw", str(CHART), "-n", ns, *kube, values={}, tmp=tmp_path)
            assert done.returncode == 0, done.stderr
            data = (await api.get(secret_path))["data"]
            if step == "install":
                first = data
                assert set(first) == {"read", "admin", "aws", "argocd"}
        assert data == first  # upgrade: the same tokens
        done = helm_run(helm, "uninstall", "fw", "-n", ns, *kube, values=None, tmp=tmp_path)
        assert done.returncode == 0, done.stderr
        assert (await api.get(secret_path))["data"] == first  # kept
        with pytest.raises(NotFound):  # while the rest of the release is gone
            await api.get(f"/api/v1/namespaces/{ns}/configmaps/fw-fleetwarden-config")
        await api.request("DELETE", secret_path)


async def _review(api: KubeClient, sa_ns: str, sa: str, **attrs: str) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{sa_ns}:{sa}",
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{sa_ns}",
                "system:authenticated",
            ],
            "resourceAttributes": attrs,
        },
    }
    got = await api.request(
        "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review
    )
    return bool(got["status"].get("allowed"))


async def _apply_rbac(api: KubeClient, objs: list[dict[str, Any]], ns: str) -> None:
    for obj in objs:
        if obj["kind"] in RBAC_KINDS:
            await _create(api, obj, ns)


async def _all_allowed(api, ns, sa, checks, timeout=20.0):
    """RBAC reaches the authorizer through its informers: wait until every check passes."""
    deadline = time.monotonic() + timeout
    while True:
        missing = [c for c in checks if not await _review(api, ns, sa, **c)]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{sa} is refused what it needs: {missing}")
        await asyncio.sleep(0.2)


def _v(
    verb: str, resource: str, group: str = "", namespace: str = "", name: str = ""
) -> dict[str, str]:
    attrs = {"verb": verb, "resource": resource, "group": group}
    if namespace:
        attrs["namespace"] = namespace
    if name:
        attrs["name"] = name
    return attrs


READS = [
    *(_v(v, "nodes") for v in ("get", "list", "watch")),
    *(
        _v(v, r, "apps")
        for r in ("deployments", "statefulsets", "daemonsets")
        for v in ("list", "watch")
    ),
    *(_v(v, "horizontalpodautoscalers", "autoscaling") for v in ("list", "watch")),
    *(_v(v, "configmaps") for v in ("list", "watch")),
    *(_v(v, "secrets", namespace="argocd") for v in ("list", "watch")),
]
NEVER = [
    _v("delete", "nodes"),
    _v("create", "nodes"),
    _v("get", "secrets", namespace="default", name="anything"),
    _v("create", "secrets", namespace="default"),
    _v("patch", "deployments", "apps", namespace="default"),
    _v("delete", "pods", namespace="default"),
    _v("create", "pods/exec", namespace="default"),
    _v("escalate", "clusterroles", "rbac.authorization.k8s.io"),
]


@pytest.mark.live
async def test_the_rbac_lets_each_service_account_do_what_it_needs_and_nothing_more(
    helm, tmp_path, api_endpoint
):
    """RBAC created for real from three releases (dry-run + leases, enforce, split + gate), then
    SubjectAccessReviews as each ServiceAccount: every verb its role needs is allowed, and the
    ones it must not have are denied -- node patch in dry-run above all."""
    releases = {
        "fw-rbac-dry": {**VALUE_SETS["leases"]},
        "fw-rbac-enf": VALUE_SETS["enforce"],
        "fw-rbac-split": {**SPLIT, "gate": {"enabled": True}, "workloads": {"secrets": False}},
    }
    rendered = {
        ns: render(helm, values, tmp_path, release="fw", namespace=ns)
        for ns, values in releases.items()
    }
    async with KubeClient(api_endpoint) as api:
        await _namespace(api, "argocd")
        for ns, objs in rendered.items():
            await _namespace(api, ns)
            # the release name is the same in each namespace: ClusterRoles must differ
            for obj in objs:
                if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                    obj["metadata"]["name"] += f"-{ns}"
                    if obj["kind"] == "ClusterRoleBinding":
                        obj["roleRef"]["name"] += f"-{ns}"
                if (
                    obj["kind"] in ("Role", "RoleBinding")
                    and obj["metadata"].get("namespace") == "argocd"
                ):
                    obj["metadata"]["name"] += f"-{ns}"
                    if obj["kind"] == "RoleBinding":
                        obj["roleRef"]["name"] += f"-{ns}"
            await _apply_rbac(api, objs, ns)

        # dry-run: reads everything it watches, Leases only at home, writes nothing else
        ns = "fw-rbac-dry"
        leases = [
            _v(v, "leases", "coordination.k8s.io", namespace=ns)
            for v in ("get", "list", "create", "update", "delete")
        ]
        await _all_allowed(api, ns, "fw-fleetwarden", [*READS, _v("list", "secrets"), *leases])
        for denied in (
            _v("patch", "nodes"),
            _v("update", "nodes"),
            _v("create", "leases", "coordination.k8s.io", namespace="kube-system"),
            _v("delete", "leases", "coordination.k8s.io", namespace="default"),
            _v("patch", "kustomizations", "kustomize.toolkit.fluxcd.io", namespace="flux-system"),
            *NEVER,
        ):
            assert not await _review(api, ns, "fw-fleetwarden", **denied), denied

        # enforce: the node patch, and still nothing else
        ns = "fw-rbac-enf"
        await _all_allowed(api, ns, "fw-fleetwarden", [*READS, _v("patch", "nodes")])
        for denied in (
            _v("update", "nodes"),
            _v("create", "leases", "coordination.k8s.io", namespace=ns),
            _v("patch", "helmreleases", "helm.toolkit.fluxcd.io", namespace="flux-system"),
            *NEVER,
        ):
            assert not await _review(api, ns, "fw-fleetwarden", **denied), denied

        # split: the worker reads (no Secrets outside Argo CD's cluster Secrets), the gateway
        # nothing at all; the gate reads nodes and its own namespace's workloads
        ns = "fw-rbac-split"
        await _all_allowed(api, ns, "fw-fleetwarden", READS)
        assert not await _review(api, ns, "fw-fleetwarden", **_v("list", "secrets"))
        assert not await _review(api, ns, "fw-fleetwarden", **_v("patch", "nodes"))
        for check in (
            _v("list", "nodes"),
            _v("get", "nodes", name="n1"),
            _v("list", "secrets", namespace="argocd"),
        ):
            assert not await _review(api, ns, "fw-fleetwarden-gateway", **check), check
        gate_needs = [
            _v("get", "nodes"),
            _v("list", "nodes"),
            *(
                _v(v, r, "apps", namespace=ns)
                for r in ("deployments", "statefulsets", "daemonsets")
                for v in ("get", "list")
            ),
            _v("list", "horizontalpodautoscalers", "autoscaling", namespace=ns),
            _v("get", "configmaps", namespace=ns, name="fleetwarden-gate-desired"),
        ]
        await _all_allowed(api, ns, "fw-fleetwarden-gate", gate_needs)
        for denied in (
            _v("list", "deployments", "apps", namespace="default"),
            _v("get", "configmaps", namespace=ns, name="other"),
            _v("list", "secrets", namespace=ns),
            _v("watch", "nodes"),
            _v("patch", "nodes"),
            *NEVER,
        ):
            assert not await _review(api, ns, "fw-fleetwarden-gate", **denied), denied


REQUIRE_IMAGE = os.environ.get("FW_REQUIRE_IMAGE_BUILD") == "1"
UNREACHABLE = re.compile(r"pinging container registry|no such host|dial tcp|network is unreachable")


def _skip_or_fail(reason: str) -> None:
    if REQUIRE_IMAGE:
        pytest.fail(f"the image must be built here (FW_REQUIRE_IMAGE_BUILD=1): {reason}")
    pytest.skip(reason)


LOCAL_BASE = "localhost/fleetwarden-base:bookworm"


def _host_ca_bundle() -> str | None:
    """The CA bundle this machine's pip trusts (an egress proxy's CA may be in it), mounted
    into the build's RUN steps so that pip in the image reaches the same package index."""
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"),
                      "/etc/ssl/certs/ca-certificates.crt"):  # fmt: skip
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def _local_base(builder: str, store: list[str]) -> None:
    """A base image with Python 3.11 and pip made from Debian's own archive
    (scripts/debian-base-ensure: debootstrap, cached), for when no registry can be reached."""
    made = subprocess.run([str(ROOT / "scripts" / "debian-base-ensure")], capture_output=True,
                          text=True, timeout=1200, stdin=subprocess.DEVNULL)  # fmt: skip
    if made.returncode != 0:
        last = (made.stderr.strip().splitlines() or ["?"])[-1]
        _skip_or_fail(f"no registry, and no Debian base either: {last}")
    tarball = made.stdout.strip().splitlines()[-1]
    ctr = subprocess.run([builder, *store, "from", "scratch"], capture_output=True, text=True,
                         check=True).stdout.strip()  # fmt: skip
    for step in (
        ["add", ctr, tarball, "/"],
        # an image's Python is its own: pip may install into it (PEP 668's marker is for hosts)
        ["config", "--env", "PIP_BREAK_SYSTEM_PACKAGES=1", ctr],
        ["config", "--env", "PIP_CERT=/etc/ssl/certs/ca-certificates.crt", ctr],
        ["commit", "-q", ctr, LOCAL_BASE],
    ):
        subprocess.run([builder, *store, *step], capture_output=True, text=True, check=True)


def test_the_dockerfile_builds_into_the_image_the_chart_expects(tmp_path):
    """Builds the Dockerfile with buildah (FW_IMAGE_BUILDER, which scripts/test sets from
    scripts/image-builder-ensure, or buildah on PATH; chroot isolation, vfs storage in a
    temporary root: no daemon), checks the image's config -- user, exposed port, entrypoint --
    against the chart's assumptions, and runs ``fleetwarden --version`` and ``id -u`` in it.
    The base is the Dockerfile's own (python:3.11-slim); when no registry is reachable it is
    one made from Debian's archive (``--build-arg BASE=``, scripts/debian-base-ensure).
    Skipped with the builder's own error line when nothing can be built;
    FW_REQUIRE_IMAGE_BUILD=1 (CI) makes that a failure."""
    builder = os.environ.get("FW_IMAGE_BUILDER") or shutil.which("buildah")
    if not builder or Path(builder).name != "buildah":
        _skip_or_fail("no buildah: scripts/image-builder-ensure installs Debian's")
    store = ["--root", str(tmp_path / "root"), "--runroot", str(tmp_path / "run"),
             "--storage-driver", "vfs"]  # fmt: skip
    ca = _host_ca_bundle()
    mounts = ["-v", f"{ca}:/etc/ssl/certs/ca-certificates.crt:ro"] if ca else []
    tag = "localhost/fleetwarden:chart-test"

    def build(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                builder,
                *store,
                "bud",
                "--isolation=chroot",
                *mounts,
                *extra,
                "-t",
                tag,
                "-f",
                str(DOCKERFILE),
                str(ROOT),
            ],
            capture_output=True,
            text=True,
            timeout=1800,
            stdin=subprocess.DEVNULL,
        )

    try:
        done = build()
        if done.returncode != 0 and UNREACHABLE.search(done.stderr):
            _local_base(builder, store)
            done = build("--build-arg", f"BASE={LOCAL_BASE}")
        if done.returncode != 0:
            raise AssertionError(f"the Dockerfile does not build:\n{done.stderr[-4000:]}")
        inspect = [builder, *store, "inspect", "--type", "image", tag]
        got = yaml.safe_load(subprocess.run(inspect, capture_output=True, text=True).stdout)
        config = (got[0] if isinstance(got, list) else got)["OCIv1"]["config"]
        facts = dockerfile_facts()
        assert config["User"] == f"{facts['uid']}:{facts['gid']}"
        assert f"{facts['port']}/tcp" in config["ExposedPorts"]
        assert config["Entrypoint"] == facts["entrypoint"] == ["fleetwarden"]
        ctr = subprocess.run([builder, *store, "from", "-q", tag], capture_output=True,
                             text=True, check=True).stdout.strip()  # fmt: skip

        def run(*argv: str) -> str:
            r = subprocess.run([builder, *store, "run", "--isolation=chroot", ctr, "--", *argv],
                               capture_output=True, text=True, timeout=120)  # fmt: skip
            assert r.returncode == 0, r.stderr
            return r.stdout.strip()

        assert run("fleetwarden", "--version").startswith("fleetwarden ")
        assert run("id", "-u") == str(facts["uid"])
        # the build stage compiled the native node reader (Debian's gcc, reached like the base)
        native = "from fleetwarden.formats import nodestream; print(nodestream._native is not None)"
        assert run("python3", "-c", native) == "True"
    finally:
        subprocess.run([builder, *store, "rmi", "--all", "--force"], capture_output=True)
