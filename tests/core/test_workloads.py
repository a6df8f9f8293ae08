"""The workload diff over real manifests (../shared/realdata/manifests).

Desired objects are the real files; observed objects are either the real live objects of
gitops-engine's desired/live pairs, or the desired ones passed through ``liveify``, which does
to an object what the API server and controllers do (defaults, status, managedFields,
canonical quantities, Argo CD's tracking annotation). Each test pins one behaviour: a planted
drift comes out as exactly one finding, and server noise as none.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.core import workloads as wl
from fleetwarden.core.findings import Layer, Severity
from fleetwarden.core.ignoring import rule_from_mapping
from fleetwarden.core.rules import IgnoreRule, SeverityRule
from tests.conftest import realdata_files

# --------------------------------------------------------------------------- helpers

MANIFESTS = "manifests"
BOUTIQUE = "microservices-demo-release-all.yaml"


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def supported(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") in wl.KINDS]


def index(objs: list[dict[str, Any]], *, app_label: str | None = None) -> wl.ObjectIndex:
    idx = wl.ObjectIndex(app_label=app_label)
    for o in objs:
        idx.add(o, source="git/app.yaml")
    return idx


def _cpu(value: Any) -> Any:
    """The API server's canonical CPU spelling ("2000m" is served as "2", 0.5 as "500m")."""
    from fleetwarden.core.quantities import parse_quantity

    milli = round(parse_quantity(value) * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _default_container(c: dict[str, Any]) -> None:
    image = c.get("image", "")
    c.setdefault("imagePullPolicy", wl.default_pull_policy(image))
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    for part in ("requests", "limits"):
        values = c["resources"].get(part)
        if values and "cpu" in values:
            values["cpu"] = _cpu(values["cpu"])
    for p in c.get("ports", []):
        p.setdefault("protocol", "TCP")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if probe in c:
            pr = c[probe]
            for k, v in (
                ("timeoutSeconds", 1),
                ("periodSeconds", 10),
                ("successThreshold", 1),
                ("failureThreshold", 3),
            ):
                pr.setdefault(k, v)
            if "httpGet" in pr:
                pr["httpGet"].setdefault("scheme", "HTTP")
    for e in c.get("env", []):
        fr = e.get("valueFrom", {}).get("fieldRef")
        if fr is not None:
            fr.setdefault("apiVersion", "v1")


def liveify(
    obj: dict[str, Any],
    *,
    namespace: str = "default",
    app: str | None = "shop",
    tracking: str = "annotation",
) -> dict[str, Any]:
    """``obj`` as ``kubectl get -o json`` would show it after ``kubectl apply``."""
    live = copy.deepcopy(obj)
    kind = live["kind"]
    meta = live.setdefault("metadata", {})
    meta.setdefault("namespace", namespace)
    annotations = meta.setdefault("annotations", {})
    annotations[wl.LAST_APPLIED] = json.dumps(obj)  # holds a Secret's data in clear
    if app and tracking == "annotation":
        annotations[wl.TRACKING_ANNOTATION] = (
            f"{app}:{wl.GROUPS[kind]}/{kind}:{meta['namespace']}/{meta['name']}"
        )
    elif app:
        meta.setdefault("labels", {})[wl.INSTANCE_LABEL] = app
    meta.update(
        uid="0b6e5c7e-1111-2222-3333-444455556666",
        resourceVersion="48213",
        creationTimestamp="2026-11-30T10:00:00Z",
        managedFields=[
            {
                "manager": "argocd-controller",
                "operation": "Apply",
                "apiVersion": "v1",
                "time": "2026-11-30T10:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {}}},
            }
        ],
    )
    if kind in wl.WORKLOAD_KINDS:
        meta["generation"] = 3
        spec = live.setdefault("spec", {})
        spec.setdefault("revisionHistoryLimit", 10)
        if kind == "Deployment":
            annotations["deployment.kubernetes.io/revision"] = "2"
            spec.setdefault("replicas", 1)
            spec.setdefault("progressDeadlineSeconds", 600)
            strategy = spec.setdefault("strategy", {})
            strategy.setdefault("type", "RollingUpdate")
            if strategy["type"] == "RollingUpdate":
                ru = strategy.setdefault("rollingUpdate", {})
                ru.setdefault("maxSurge", "25%")
                ru.setdefault("maxUnavailable", "25%")
        elif kind == "StatefulSet":
            spec.setdefault("replicas", 1)
            spec.setdefault("podManagementPolicy", "OrderedReady")
            spec.setdefault(
                "updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
            )
            spec.setdefault(
                "persistentVolumeClaimRetentionPolicy",
                {"whenDeleted": "Retain", "whenScaled": "Retain"},
            )
        else:
            annotations["deprecated.daemonset.template.generation"] = "1"
            spec.setdefault(
                "updateStrategy",
                {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
            )
        template = spec.setdefault("template", {})
        template.setdefault("metadata", {})["creationTimestamp"] = None
        pod = template.setdefault("spec", {})
        pod.setdefault("dnsPolicy", "ClusterFirst")
        pod.setdefault("restartPolicy", "Always")
        pod.setdefault("schedulerName", "default-scheduler")
        pod.setdefault("securityContext", {})
        pod.setdefault("terminationGracePeriodSeconds", 30)
        if "serviceAccountName" in pod:
            pod["serviceAccount"] = pod["serviceAccountName"]
        for key in ("containers", "initContainers"):
            for c in pod.get(key, []):
                _default_container(c)
        for v in pod.get("volumes", []):
            for source in ("configMap", "secret"):
                if source in v:
                    v[source].setdefault("defaultMode", 420)
        live["status"] = {
            "observedGeneration": 3,
            "replicas": spec.get("replicas", 1),
            "readyReplicas": spec.get("replicas", 1),
            "conditions": [{"type": "Available", "status": "True"}],
        }
    elif kind == "Secret":
        data = dict(live.get("data", {}))
        for k, v in live.pop("stringData", {}).items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        live["data"] = data
        live.setdefault("type", "Opaque")
    elif kind == wl.AUTOSCALER_KIND:
        live["spec"]["behavior"] = {
            "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max"},
            "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max"},
        }
        live["status"] = {"currentReplicas": 2, "desiredReplicas": 2}
    return live


def diff(
    desired: list[dict[str, Any]],
    observed: list[dict[str, Any]],
    *,
    app: str = "shop",
    options: wl.WorkloadOptions | None = None,
    app_label: str | None = None,
) -> list[Any]:
    options = options or wl.WorkloadOptions()
    return wl.diff_app(
        "prod-eu-1",
        app,
        index(desired, app_label=app_label),
        index(observed, app_label=app_label),
        options=options,
    ).findings


def fields(findings: list[Any]) -> list[tuple[str, Any, Any]]:
    return sorted(((f.field, f.expected, f.actual) for f in findings), key=str)


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


@pytest.fixture()
def boutique(realdata: Path) -> list[dict[str, Any]]:
    return supported(load_docs(realdata / MANIFESTS / BOUTIQUE))


@pytest.fixture()
def boutique_live(boutique: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [liveify(d, namespace="boutique") for d in boutique]


# --------------------------------------------------------------------------- gitops-engine pairs

PAIRS = {
    # name: (app label, app, expected (field, expected, actual))
    "deployment": (
        None,
        "guestbook",
        [
            (
                "env.guestbook-ui.VAR2",
                None,
                'valueFrom {"fieldRef":{"fieldPath":"metadata.name"}}',
            )
        ],
    ),
    "smd-deploy2": (
        "applications.argoproj.io/app-name",
        "nginx",
        [
            ("resources.nginx.requests.cpu", None, "500m"),
            ("resources.nginx.requests.memory", None, "512Mi"),
        ],
    ),
    "ssd-deploy-manual-apply": (
        "applications.argoproj.io/app-name",
        "manual-apply-app",
        [("sidecar.idle", None, "spurin/idle:latest")],
    ),
    "sealedsecret": (None, "x", []),  # not a supported kind: nothing to compare
}


def _pair(realdata: Path, name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    base = realdata / MANIFESTS
    (desired,) = base.glob(f"drift-gitops-engine-{name}-desired.*")
    (live,) = base.glob(f"drift-gitops-engine-{name}-live.*")
    return load_docs(desired), load_docs(live)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_gitops_engine_pairs_give_exactly_the_real_drift(realdata, name):
    """Real live objects (server defaults, status, managedFields, last-applied) raise only
    the drift the pair was made to show: an added env var, added requests, a sidecar."""
    label, app, expected = PAIRS[name]
    desired, live = _pair(realdata, name)
    findings = diff(desired, live, app=app, app_label=label)
    assert fields(findings) == sorted(expected)
    assert all(f.layer is Layer.WORKLOAD for f in findings)


def test_pair_findings_carry_the_workload_and_kind(realdata):
    desired, live = _pair(realdata, "ssd-deploy-manual-apply")
    (f,) = diff(
        desired, live, app="manual-apply-app", app_label="applications.argoproj.io/app-name"
    )
    assert f.pool == "Deployment/default/manual-apply-test-deployment"
    assert f.severity is Severity.HIGH
    out = f.to_json()
    assert out["driftKind"] == "dependency"
    assert out["workload"] == "Deployment/default/manual-apply-test-deployment"
    assert out["app"] == "manual-apply-app"


def test_normalised_live_deployment_equals_desired_apart_from_its_drift(realdata):
    """The normaliser removes every server default of the real live object: what is left of
    the pod template differs from Git only where the pair planted drift (the sidecar and the
    port the sidecar's author removed)."""
    desired, live = _pair(realdata, "ssd-deploy-manual-apply")
    d, lv = wl.normalise(desired[0]), wl.normalise(live[0])
    assert {k: v for k, v in d["spec"].items() if k != "template"} == {
        k: v for k, v in lv["spec"].items() if k != "template"
    }
    d_main = d["spec"]["template"]["spec"]["containers"][0]
    l_main = next(
        c for c in lv["spec"]["template"]["spec"]["containers"] if c["name"] == "main-container"
    )
    assert {k: v for k, v in d_main.items() if k != "ports"} == {
        k: v for k, v in l_main.items() if k != "ports"
    }


# --------------------------------------------------------------------------- noise

NOISE_FILES = [
    p
    for p in realdata_files(MANIFESTS, ".yaml")
    if not p.name.startswith("drift-") and supported(load_docs(p))  # a Service alone: nothing
]


@pytest.mark.parametrize("path", NOISE_FILES, ids=lambda p: p.name)
def test_server_defaults_status_and_metadata_raise_nothing(realdata, path):
    """Every real manifest, as the API server serves it back, compares clean."""
    desired = supported(load_docs(path))
    assert desired, path
    live = [liveify(d, namespace="shop-ns") for d in desired]
    assert diff(desired, live) == []


def test_label_tracking_and_unlabelled_live_objects_raise_nothing(boutique):
    live = [liveify(d, tracking="label") for d in boutique]
    assert diff(boutique, live) == []
    # applied by hand, without any tracking: still paired by kind and name
    bare = [liveify(d, app=None) for d in boutique]
    assert diff(boutique, bare) == []


# --------------------------------------------------------------------------- seed-002 kinds


def _mutate(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return find(docs, kind, name)


def _container(obj: dict[str, Any], name: str, *, init: bool = False) -> dict[str, Any]:
    key = "initContainers" if init else "containers"
    return next(c for c in obj["spec"]["template"]["spec"][key] if c["name"] == name)


def test_image_tag_drift(boutique, boutique_live):
    c = _container(_mutate(boutique_live, "Deployment", "frontend"), "server")
    c["image"] = c["image"].replace("v0.10.6", "v0.10.5")
    (f,) = diff(boutique, boutique_live)
    assert (f.field, f.severity, f.extra["aspects"]) == ("image.server", Severity.HIGH, ["tag"])
    assert f.pool == "Deployment/boutique/frontend"
    assert f.actual.endswith("frontend:v0.10.5")


def test_image_digest_drift_of_an_init_container(boutique, boutique_live):
    c = _container(
        _mutate(boutique_live, "Deployment", "loadgenerator"), "frontend-check", init=True
    )
    c["image"] = c["image"].split("@")[0] + "@sha256:" + "0" * 64
    (f,) = diff(boutique, boutique_live)
    assert (f.field, f.extra["aspects"]) == ("image.frontend-check", ["digest"])


def test_image_repository_drift(boutique, boutique_live):
    c = _container(_mutate(boutique_live, "Deployment", "redis-cart"), "redis")
    c["image"] = "public.ecr.aws/docker/library/redis:alpine"
    (f,) = diff(boutique, boutique_live)
    assert (f.field, f.extra["aspects"]) == ("image.redis", ["repository"])


def test_same_image_spelled_differently_is_not_drift(boutique, boutique_live):
    _container(_mutate(boutique_live, "Deployment", "redis-cart"), "redis")["image"] = (
        "docker.io/library/redis:alpine"
    )
    assert diff(boutique, boutique_live) == []


def test_a_digest_pinned_by_admission_is_not_drift(boutique, boutique_live):
    c = _container(_mutate(boutique_live, "Deployment", "redis-cart"), "redis")
    c["image"] = "redis:alpine@sha256:" + "a" * 64
    assert diff(boutique, boutique_live) == []


def test_configmap_content_drift(realdata):
    desired = supported(load_docs(realdata / MANIFESTS / "microservices-demo-otel-collector.yaml"))
    live = [liveify(d) for d in desired]
    cm = find(live, "ConfigMap", "collector-gateway-config-template")
    key = "collector-gateway-config-template.yaml"
    cm["data"][key] = cm["data"][key].replace("googlecloud", "otlphttp")
    (f,) = diff(desired, live)
    assert f.field == "config.collector-gateway-config-template"
    assert f.expected.startswith("sha256:") and f.actual.startswith("sha256:")
    assert f.expected != f.actual
    assert f.extra["changedKeys"] == [key]
    assert "otlphttp" not in json.dumps(f.to_json())


SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "db-credentials"},
    "stringData": {"username": "shop", "password": "hunter2-correct-horse"},
}


def test_secret_stringdata_equals_its_base64_live_form():
    assert diff([SECRET], [liveify(SECRET)]) == []


def test_secret_drift_names_keys_but_never_values():
    live = liveify(SECRET)
    live["data"]["password"] = base64.b64encode(b"changed-by-hand-s3cret").decode()
    (f,) = diff([SECRET], [live])
    assert f.field == "secret.db-credentials"
    assert f.extra["changedKeys"] == ["password"]
    text = json.dumps(f.to_json())
    for secret in ("hunter2", "changed-by-hand", live["data"]["password"], "c2hvcA=="):
        assert secret not in text


def test_env_value_change_addition_and_envfrom(boutique, boutique_live):
    c = _container(_mutate(boutique_live, "Deployment", "cartservice"), "server")
    c["env"][0]["value"] = "redis-cart-2:6379"
    c["env"].append({"name": "LOG_LEVEL", "value": "debug"})
    c["envFrom"] = [{"configMapRef": {"name": "cart-overrides"}}]
    assert fields(diff(boutique, boutique_live)) == [
        ("env.server.LOG_LEVEL", None, "debug"),
        ("env.server.REDIS_ADDR", "redis-cart:6379", "redis-cart-2:6379"),
        ("envFrom.server", [], ["configMapRef:cart-overrides"]),
    ]


def test_an_env_value_that_looks_like_a_credential_is_not_printed(boutique, boutique_live):
    c = _container(_mutate(boutique_live, "Deployment", "cartservice"), "server")
    c["env"].append({"name": "DB_PASSWORD", "value": "plain-text-oops"})
    (f,) = diff(boutique, boutique_live)
    assert (f.field, f.actual) == ("env.server.DB_PASSWORD", "<redacted>")
    assert "plain-text-oops" not in json.dumps(f.to_json())


def test_resource_drift_and_a_lower_memory_limit_is_high(boutique, boutique_live):
    c = _container(_mutate(boutique_live, "Deployment", "cartservice"), "server")
    c["resources"]["requests"]["cpu"] = "250m"
    c["resources"]["limits"]["memory"] = "96Mi"
    found = {f.field: f for f in diff(boutique, boutique_live)}
    assert set(found) == {"resources.server.requests.cpu", "resources.server.limits.memory"}
    assert (
        found["resources.server.requests.cpu"].expected,
        found["resources.server.requests.cpu"].actual,
    ) == ("200m", "250m")
    assert found["resources.server.limits.memory"].severity is Severity.HIGH
    assert found["resources.server.requests.cpu"].severity is Severity.MEDIUM


def test_equal_quantities_in_other_spellings_are_not_drift(boutique, boutique_live):
    c = _container(_mutate(boutique_live, "Deployment", "cartservice"), "server")
    c["resources"]["requests"] = {"cpu": "0.2", "memory": "67108864"}  # 200m, 64Mi
    c["resources"]["limits"] = {"cpu": "300m", "memory": "0.125Gi"}
    assert diff(boutique, boutique_live) == []


def test_replica_drift(boutique, boutique_live):
    _mutate(boutique_live, "Deployment", "loadgenerator")["spec"]["replicas"] = 3
    assert fields(diff(boutique, boutique_live)) == [("replicas", 1, 3)]


def test_replicas_git_leaves_open_are_not_compared(boutique, boutique_live):
    # cartservice states no replicas in Git: whatever the cluster runs is not drift
    _mutate(boutique_live, "Deployment", "cartservice")["spec"]["replicas"] = 5
    assert diff(boutique, boutique_live) == []


@pytest.fixture()
def podinfo(realdata: Path) -> list[dict[str, Any]]:
    base = realdata / MANIFESTS
    docs = load_docs(base / "podinfo-kustomize-deployment.yaml") + load_docs(
        base / "podinfo-kustomize-hpa.yaml"
    )
    find(docs, "Deployment", "podinfo")["spec"]["replicas"] = 2
    return docs


def test_hpa_owned_replicas_raise_nothing(podinfo):
    live = [liveify(d) for d in podinfo]
    find(live, "Deployment", "podinfo")["spec"]["replicas"] = 4  # the HPA scaled up
    assert diff(podinfo, live) == []


def test_an_hpa_made_by_hand_in_the_cluster_owns_replicas_too(podinfo):
    desired = [d for d in podinfo if d["kind"] == "Deployment"]
    live = [liveify(d) for d in podinfo]
    find(live, "Deployment", "podinfo")["spec"]["replicas"] = 4
    assert fields(diff(desired, live)) == [
        ("hpa.podinfo", None, "HorizontalPodAutoscaler/default/podinfo")
    ]


def test_without_an_hpa_the_same_scale_is_drift(podinfo):
    desired = [d for d in podinfo if d["kind"] == "Deployment"]
    live = [liveify(d) for d in desired]
    find(live, "Deployment", "podinfo")["spec"]["replicas"] = 4
    assert fields(diff(desired, live)) == [("replicas", 2, 4)]


def test_hpa_bounds_drift(podinfo):
    live = [liveify(d) for d in podinfo]
    find(live, wl.AUTOSCALER_KIND, "podinfo")["spec"]["maxReplicas"] = 10
    assert fields(diff(podinfo, live)) == [("hpa.podinfo.maxReplicas", 4, 10)]


def test_sidecar_added_and_init_container_removed(boutique, boutique_live):
    lg = _mutate(boutique_live, "Deployment", "loadgenerator")
    lg["spec"]["template"]["spec"]["initContainers"] = []
    fe = _mutate(boutique_live, "Deployment", "frontend")
    fe["spec"]["template"]["spec"]["containers"].append(
        {"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.24.0"}
    )
    found = {f.field: f for f in diff(boutique, boutique_live)}
    assert set(found) == {"sidecar.istio-proxy", "initContainer.frontend-check"}
    assert found["sidecar.istio-proxy"].severity is Severity.HIGH
    assert found["sidecar.istio-proxy"].extra["driftKind"] == "dependency"
    assert found["initContainer.frontend-check"].actual is None


def test_native_sidecar_is_a_sidecar(boutique, boutique_live):
    fe = _mutate(boutique_live, "Deployment", "frontend")
    fe["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "log-shipper", "image": "fluent/fluent-bit:3.1", "restartPolicy": "Always"}
    ]
    assert fields(diff(boutique, boutique_live)) == [
        ("sidecar.log-shipper", None, "fluent/fluent-bit:3.1")
    ]


def test_mesh_injection_switched_off(boutique, boutique_live):
    fe = _mutate(boutique_live, "Deployment", "frontend")
    fe["spec"]["template"]["metadata"].setdefault("annotations", {})["sidecar.istio.io/inject"] = (
        "false"
    )
    (f,) = diff(boutique, boutique_live)
    assert (f.field, f.expected, f.actual, f.severity) == (
        "mesh.sidecar.istio.io/inject",
        None,
        "false",
        Severity.HIGH,
    )


def test_missing_and_extra_objects(boutique, boutique_live):
    live = [d for d in boutique_live if d["metadata"]["name"] != "adservice"]
    extra = liveify(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "debug-shell"},
            "spec": {"template": {"spec": {"containers": [{"name": "sh", "image": "busybox"}]}}},
        },
        namespace="boutique",
    )
    found = diff(boutique, [*live, extra])
    assert fields(found) == [
        ("workload", "Deployment/boutique/adservice", None),
        ("workload", None, "Deployment/boutique/debug-shell"),
    ]
    sev = {f.expected: f.severity for f in found}
    assert sev["Deployment/boutique/adservice"] is Severity.HIGH
    no_extra = wl.WorkloadOptions(report_extra=False)
    assert len(diff(boutique, [*live, extra], options=no_extra)) == 1


def test_desired_without_namespace_pairs_with_the_apps_object(boutique):
    # the same Deployment in two namespaces; only one belongs to the app
    live = [liveify(d, namespace="boutique") for d in boutique]
    other = liveify(find(boutique, "Deployment", "frontend"), namespace="staging", app="other")
    _container(other, "server")["image"] = "elsewhere:1"
    assert diff(boutique, [*live, other]) == []


def test_objects_of_another_app_in_git_are_left_out(boutique, boutique_live):
    tagged = copy.deepcopy(boutique)
    find(tagged, "Deployment", "frontend")["metadata"].setdefault("labels", {})[
        wl.INSTANCE_LABEL
    ] = "storefront"
    live = [d for d in boutique_live if d["metadata"]["name"] != "frontend"]
    assert diff(tagged, live) == []


def test_severity_overrides_and_ignore_rules_apply(boutique, boutique_live):
    _mutate(boutique_live, "Deployment", "loadgenerator")["spec"]["replicas"] = 3
    c = _container(_mutate(boutique_live, "Deployment", "frontend"), "server")
    c["image"] = c["image"].replace("v0.10.6", "v0.10.5")
    options = wl.WorkloadOptions(
        severities=(SeverityRule("WORKLOAD/image.*", Severity.CRITICAL),),
        ignores=(IgnoreRule(pool="Deployment/*/loadgenerator", field="replicas"),),
    )
    (f,) = diff(boutique, boutique_live, options=options)
    assert (f.field, f.severity) == ("image.server", Severity.CRITICAL)


def test_ignore_differences_from_argocd_format(boutique, boutique_live):
    _mutate(boutique_live, "Deployment", "loadgenerator")["spec"]["replicas"] = 3
    rule = rule_from_mapping(
        {"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]}
    )
    assert (
        diff(boutique, boutique_live, options=wl.WorkloadOptions(ignore_differences=(rule,))) == []
    )


# --------------------------------------------------------------------------- identity


@pytest.mark.parametrize(
    ("meta", "label", "expected"),
    [
        ({"annotations": {wl.TRACKING_ANNOTATION: "shop:apps/Deployment:a/b"}}, None, "shop"),
        (
            {"annotations": {wl.TRACKING_ANNOTATION: "team-a_shop:apps/Deployment:a/b"}},
            None,
            "shop",
        ),
        ({"labels": {wl.INSTANCE_LABEL: "shop"}}, None, "shop"),
        (
            {
                "labels": {"example.com/app": "mine", wl.INSTANCE_LABEL: "shop"},
                "annotations": {wl.TRACKING_ANNOTATION: "theirs:apps/Deployment:a/b"},
            },
            "example.com/app",
            "mine",
        ),
        (
            {
                "labels": {wl.INSTANCE_LABEL: "by-label"},
                "annotations": {wl.TRACKING_ANNOTATION: "by-annotation:/ConfigMap:a/b"},
            },
            None,
            "by-annotation",
        ),
        ({}, "example.com/app", None),
    ],
)
def test_application_identity(meta, label, expected):
    assert wl.app_of({"metadata": meta}, app_label=label) == expected


@pytest.mark.parametrize(
    ("text", "repository", "tag", "digest"),
    [
        ("nginx", "docker.io/library/nginx", "latest", None),
        ("nginx:1.25", "docker.io/library/nginx", "1.25", None),
        ("bitnami/redis:7", "docker.io/bitnami/redis", "7", None),
        ("docker.io/nginx:1.25", "docker.io/library/nginx", "1.25", None),
        ("localhost:5000/app:dev", "localhost:5000/app", "dev", None),
        ("ghcr.io/stefanprodan/podinfo:6.14.1", "ghcr.io/stefanprodan/podinfo", "6.14.1", None),
        ("busybox@sha256:abc", "docker.io/library/busybox", None, "sha256:abc"),
        ("busybox:1.38.0@sha256:abc", "docker.io/library/busybox", "1.38.0", "sha256:abc"),
    ],
)
def test_image_references(text, repository, tag, digest):
    assert wl.ImageRef.parse(text) == wl.ImageRef(repository, tag, digest)


# --------------------------------------------------------------------------- versions


def test_fleet_versions_marks_divergence_from_git_and_from_peers(boutique):
    clusters = {}
    for name in ("eu", "us", "ap"):
        live = [liveify(d, namespace="boutique") for d in boutique]
        if name == "us":
            c = _container(find(live, "Deployment", "frontend"), "server")
            c["image"] = c["image"].replace("v0.10.6", "v0.10.5")
        if name == "ap":
            fe = find(live, "Deployment", "frontend")
            fe["spec"]["template"]["spec"]["containers"].append(
                {"name": "istio-proxy", "image": "istio/proxyv2:1.24.0"}
            )
            live = [d for d in live if d["metadata"]["name"] != "adservice"]
        clusters[name] = index(live)
    desired = index(boutique)
    rows = wl.fleet_versions("shop", dict.fromkeys(clusters, desired), clusters)
    by = {(r.cluster, r.workload, r.container): r for r in rows}
    us = by[("us", "frontend", "server")]
    assert us.drift and us.diverges_from_peers
    assert us.peer_image == by[("eu", "frontend", "server")].image
    assert not by[("eu", "frontend", "server")].drift
    proxy = by[("ap", "frontend", "istio-proxy")]
    assert proxy.drift and proxy.desired_image is None
    assert proxy.diverges_from_peers and proxy.peer_image is None  # its peers run no sidecar
    missing = by[("ap", "adservice", "server")]
    assert missing.image is None and missing.drift
    init = by[("eu", "loadgenerator", "frontend-check")]
    assert init.init and not init.drift
    assert set(rows[0].to_json()) >= {
        "cluster", "kind", "namespace", "workload", "container", "image", "desiredImage", "drift"
    }  # fmt: skip


def test_index_keeps_models_until_an_object_changes(boutique):
    idx = index([liveify(d) for d in boutique])
    key = wl.ObjectKey("Deployment", "default", "frontend")
    first = idx.model(key)
    assert idx.model(key) is first
    changed = liveify(find(boutique, "Deployment", "frontend"))
    _container(changed, "server")["image"] = "frontend:new"
    idx.add(changed)
    model = idx.model(key)
    assert isinstance(model, wl.Workload) and model.containers[0].image == "frontend:new"
    idx.discard(key)
    assert key not in idx.objects and idx.candidates("Deployment", "frontend") == []


# --------------------------------------------------------------------------- properties

NAMES = st.sampled_from(["app", "proxy", "init-db", "log", "metrics", "worker"])
ENV_NAMES = st.sampled_from(["A", "B", "MODE", "PORT", "URL", "LEVEL"])
QUANTITIES = {
    "cpu": st.sampled_from(["100m", "0.5", "1", "2000m", "250m", 2, "1.5"]),
    "memory": st.sampled_from(["64Mi", "128Mi", "1Gi", "1024Mi", "1G", "1000M", "536870912"]),
}


@st.composite
def containers(draw: Any) -> list[dict[str, Any]]:
    names = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    out = []
    for name in names:
        c: dict[str, Any] = {
            "name": name,
            "image": draw(st.sampled_from(["nginx", "nginx:1.25", "ghcr.io/x/y:2@sha256:ab"])),
        }
        env_names = draw(st.lists(ENV_NAMES, max_size=4, unique=True))
        if env_names:
            c["env"] = [
                {"name": n, "value": draw(st.text("abc:/1", max_size=5))} for n in env_names
            ]
        res = {}
        for part in ("requests", "limits"):
            chosen = draw(
                st.dictionaries(st.sampled_from(["cpu", "memory"]), st.just(0), max_size=2)
            )
            if chosen:
                res[part] = {r: draw(QUANTITIES[r]) for r in chosen}
        if res:
            c["resources"] = res
        if draw(st.booleans()):
            c["ports"] = [{"containerPort": draw(st.integers(1, 9000))}]
        out.append(c)
    return out


@st.composite
def deployments(draw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {"app": "x"}},
            "spec": {"containers": draw(containers())},
        }
    }
    if draw(st.booleans()):
        spec["replicas"] = draw(st.integers(0, 5))
    if draw(st.booleans()):
        spec["template"]["spec"]["nodeSelector"] = {"pool": draw(st.sampled_from(["a", "b"]))}
    return {
        "apiVersion": "apps/v1",
        "kind": draw(st.sampled_from(["Deployment", "StatefulSet", "DaemonSet"])),
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": spec,
    }


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(deployments())
def test_normalising_twice_is_normalising_once(obj):
    once = wl.normalise(obj)
    assert wl.normalise(once) == once
    live = wl.normalise(liveify(obj))
    assert wl.normalise(live) == live


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(deployments())
def test_an_object_diffed_with_itself_has_no_findings(obj):
    assert diff([obj], [copy.deepcopy(obj)]) == []


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(deployments())
def test_server_defaults_never_make_a_finding(obj):
    assert diff([obj], [liveify(obj)]) == []


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(deployments(), st.randoms(use_true_random=False))
def test_reordering_containers_and_env_by_name_is_no_drift(obj, rnd):
    shuffled = copy.deepcopy(obj)
    cs = shuffled["spec"]["template"]["spec"]["containers"]
    rnd.shuffle(cs)
    for c in cs:
        if "env" in c:
            rnd.shuffle(c["env"])
    assert diff([obj], [shuffled]) == []
    assert wl.normalise(obj) == wl.normalise(shuffled)


@settings(max_examples=200)
@given(
    st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]),
    st.one_of(
        st.integers(0, 2**40),
        st.sampled_from(["100m", "0.5", "1.5Gi", "1000M", "1e3", "7910Mi", "1930m", "12Ki"]),
    ),
)
def test_canonical_quantities_are_stable_and_keep_the_value(resource, value):
    from fleetwarden.core.quantities import parse_quantity

    once = wl.canonical_quantity(value, resource)
    assert wl.canonical_quantity(once, resource) == once
    tolerance = 0.0005 if resource == "cpu" else 1e-9
    assert abs(parse_quantity(once) - parse_quantity(value)) <= tolerance * max(
        1.0, parse_quantity(value)
    )


@settings(max_examples=100)
@given(
    st.dictionaries(
        st.text("abcxyz", min_size=1, max_size=5),
        st.text(min_size=4, max_size=20).map(lambda s: f"s3cr3t-{s}"),
        min_size=1,
        max_size=4,
    )
)
def test_redaction_never_keeps_a_secret_value(values):
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "s",
            "annotations": {wl.LAST_APPLIED: json.dumps({"stringData": values})},
        },
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
        "stringData": values,
    }
    text = json.dumps([wl.redact(secret), wl.normalise(secret)])
    for v in values.values():
        assert json.dumps(v)[1:-1] not in text
        assert base64.b64encode(v.encode()).decode() not in text
    assert wl.redact(wl.redact(secret)) == wl.redact(secret)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(deployments())
def test_normalised_live_object_equals_normalised_desired(obj):
    """Not only the modelled fields: the whole normalised object loses every server default
    (replicas aside: Git may leave them to the cluster)."""
    want, have = wl.normalise(obj), wl.normalise(liveify(obj))
    for side in (want, have):
        side["spec"].pop("replicas", None)
    assert have == want


@pytest.mark.parametrize("path", NOISE_FILES, ids=lambda p: p.name)
def test_normalised_real_manifests_survive_the_api_server(realdata, path):
    for obj in supported(load_docs(path)):
        want, have = wl.normalise(obj), wl.normalise(liveify(obj, namespace="x"))
        want.get("metadata", {}).pop("namespace", None)
        have.get("metadata", {}).pop("namespace", None)
        want.get("spec", {}).pop("replicas", None)
        have.get("spec", {}).pop("replicas", None)
        assert have == want, obj["metadata"]["name"]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(deployments())
def test_a_model_is_the_same_from_the_object_or_its_normal_form(obj):
    """Models normalise only what they read: they must agree with the full normal form."""
    for x in (obj, liveify(obj), wl.redact(liveify(obj))):
        assert wl.model_from(x) == wl.model_from(wl.normalise(x))


@pytest.mark.parametrize("path", NOISE_FILES, ids=lambda p: p.name)
def test_models_of_real_manifests_agree_with_their_normal_form(realdata, path):
    for obj in [*supported(load_docs(path)), SECRET]:
        live = wl.redact(liveify(obj))
        assert wl.model_from(obj) == wl.model_from(wl.normalise(obj))
        assert wl.model_from(live) == wl.model_from(wl.normalise(live))


# --------------------------------------------------------------------------- cold-path shortcuts


def test_indexed_models_equal_the_models_of_their_bodies(realdata, boutique, boutique_live):
    """The index builds models from its own key and shares repeated parts (env entries,
    quantities, containers) between objects: the same models as ``model_from``."""
    for objs in (boutique, boutique_live, [liveify(o) for o in boutique]):
        idx = index(objs)
        for key, obj in idx.objects.items():
            assert idx.model(key) == wl.model_from(obj.body, app=obj.app, source=obj.source)


def test_shared_model_parts_keep_values_of_other_types_apart():
    """A cached env entry or quantity never stands for an equal value of another type
    (``False == 0``, ``True == 1`` in Python, not in the API)."""

    def deployment(optional: Any, cpu: Any) -> dict[str, Any]:
        ref = {"name": "cfg", "key": "k", "optional": optional}
        container = {
            "name": "app",
            "image": "nginx:1.25",
            "env": [{"name": "A", "valueFrom": {"configMapKeyRef": ref}}],
            "resources": {"requests": {"cpu": cpu}},
        }
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"template": {"spec": {"containers": [container]}}},
        }

    seen = {}
    for optional, cpu in [(False, "1"), (0, 1), (False, True), ("false", 1.0), (False, "1")]:
        obj = deployment(optional, cpu)
        model = wl.ObjectIndex([wl.ObjectIndex.wrap(obj)]).model(
            wl.ObjectKey("Deployment", "shop", "web")
        )
        assert model == wl.model_from(wl.normalise(obj)) == wl.model_from(obj)
        seen[repr((optional, cpu))] = model.containers[0]
    env = {k: c.env[0].value_from for k, c in seen.items()}
    assert env["(False, '1')"] != env["(0, 1)"]  # optional: false is a default, 0 is not
    assert seen["(False, True)"].requests == (("cpu", "True"),)
    assert seen["(0, 1)"].requests == seen["(False, '1')"].requests == (("cpu", "1"),)


def test_redaction_copies_what_it_changes_only_and_leaves_the_object_alone(boutique):
    live = liveify(find(boutique, "Deployment", "frontend"), namespace="boutique")
    before = copy.deepcopy(live)
    out = wl.redact(live)
    assert live == before
    assert "status" not in out and wl.LAST_APPLIED not in out["metadata"]["annotations"]
    assert "uid" not in out["metadata"] and "resourceVersion" not in out["metadata"]
    assert out["metadata"]["managedFields"] == [
        {
            "manager": "argocd-controller",
            "operation": "Apply",
            "fieldsV1": {"f:metadata": {"f:labels": {}}},
        }
    ]
    assert out["spec"] is live["spec"]  # shared, not copied
    assert wl.redact(out) == out


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Deployment", "ConfigMap"]),
            st.one_of(st.none(), st.sampled_from(["a", "b"])),
            st.sampled_from(["x", "y", "z"]),
        ),
        max_size=12,
    )
)
def test_an_apps_desired_keys_sort_with_and_without_a_namespace(objs):
    """Desired manifests often omit the namespace: the keys of one app, some with and some
    without one, come back in one order (``fleet versions`` crashed sorting None with str)."""
    from fleetwarden.core.workloads.indexing import ObjectIndex

    index = ObjectIndex()
    for kind, ns, name in objs:
        meta = {"name": name, **({"namespace": ns} if ns else {})}
        api = "apps/v1" if kind == "Deployment" else "v1"
        index.add({"apiVersion": api, "kind": kind, "metadata": meta})
    keys = index.keys_for_app("shop")
    assert keys == sorted(set(keys), key=lambda k: k.order)
    assert {(k.kind, k.namespace, k.name) for k in keys} == {(k, n, m) for k, n, m in objs}
