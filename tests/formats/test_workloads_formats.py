"""Desired manifests and observed dumps read from real files (../shared/realdata/manifests):
plain YAML trees, Kustomize and Helm output, Argo CD's /manifests response, kubectl dumps;
and the ``fleet:`` settings."""

from __future__ import annotations

import base64
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core import workloads as wl
from fleetwarden.formats.desired import SourceFile
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.workloads import (
    fleet_settings,
    gitops_rewrites,
    kustomize_rewrites,
    objects_from_documents,
    parse_argocd_manifests,
    parse_workload_dump,
    read_desired_workloads,
)
from tests.conftest import realdata_files
from tests.core.test_workloads import liveify, load_docs

# objects of supported kinds per real file (Deployments, StatefulSets, ConfigMaps, HPAs)
COUNTS = {
    "drift-gitops-engine-deployment-desired.json": 1,
    "drift-gitops-engine-deployment-live.json": 1,
    "drift-gitops-engine-sealedsecret-desired.json": 0,
    "drift-gitops-engine-sealedsecret-live.json": 0,
    "drift-gitops-engine-smd-deploy2-desired.yaml": 1,
    "drift-gitops-engine-smd-deploy2-live.yaml": 1,
    "drift-gitops-engine-ssd-deploy-manual-apply-desired.yaml": 1,
    "drift-gitops-engine-ssd-deploy-manual-apply-live.yaml": 1,
    "microservices-demo-cartservice-with-redis.yaml": 2,
    "microservices-demo-cloud-ops-kustomization-patches.yaml": 0,
    "microservices-demo-frontend.yaml": 1,
    "microservices-demo-kustomization.yaml": 0,
    "microservices-demo-loadgenerator-initcontainer.yaml": 1,
    "microservices-demo-otel-collector.yaml": 2,
    "microservices-demo-release-all.yaml": 12,
    "podinfo-deploy-backend-deployment.yaml": 1,
    "podinfo-deploy-cache-redis-deployment.yaml": 1,
    "podinfo-deploy-database-statefulset.yaml": 1,
    "podinfo-kustomize-deployment.yaml": 1,
    "podinfo-kustomize-hpa.yaml": 1,
    "podinfo-kustomize-kustomization.yaml": 0,
    "podinfo-kustomize-service.yaml": 0,
}


def source(path: Path) -> SourceFile:
    return SourceFile(str(path), path.read_bytes())


@pytest.mark.parametrize("path", realdata_files("manifests"), ids=lambda p: p.name)
def test_every_real_manifest_file_reads(realdata, path):
    got = read_desired_workloads([source(path)])
    assert len(got.objects) == COUNTS[path.name]
    if not got.objects:
        (skip,) = got.skipped
        assert skip.path == str(path)


def test_kustomizations_are_skipped_with_what_to_do(realdata):
    paths = [
        realdata / "manifests" / "microservices-demo-kustomization.yaml",
        realdata / "manifests" / "microservices-demo-cloud-ops-kustomization-patches.yaml",
    ]
    got = read_desired_workloads([source(p) for p in paths])
    assert [s.reason for s in got.skipped] == ["a Kustomization: give `kustomize build` output"] * 2


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("flux-example-kustomization-apps.yaml", "`flux build kustomization apps --path DIR`"),
        (
            "flux-mt-tenant-gitrepository-kustomization.yaml",
            "`flux build kustomization dev-team --path DIR`",
        ),
        ("flux-kustomization-sample.yaml", "`flux build kustomization NAME --path DIR`"),
    ],
)
def test_a_flux_kustomization_is_named_as_flux_with_flux_build(realdata, name, command):
    """A Flux Kustomization (kustomize.toolkit.fluxcd.io) is not kustomize's: the skip says it
    is a Flux object and asks for `flux build kustomization` output."""
    got = read_desired_workloads([source(realdata / "flux" / name)])
    (skip,) = got.skipped
    assert "Flux Kustomization" in skip.reason and command in skip.reason
    assert "kustomize build" not in skip.reason


def test_a_flux_kustomization_hint_names_the_object_and_its_path(realdata):
    got = read_desired_workloads(
        [source(realdata / "flux" / "flux-example-kustomization-apps.yaml")]
    )
    assert got.skipped[0].reason == (
        "a Flux Kustomization (kustomize.toolkit.fluxcd.io) apps, which tells Flux what to "
        "apply: give `flux build kustomization apps --path DIR` output (DIR: a local checkout "
        "of spec.path ./production)"
    )


@settings(max_examples=100, deadline=None)
@given(
    version=st.sampled_from(["v1", "v1beta2", "v1beta1"]),
    meta=st.none()
    | st.dictionaries(
        st.sampled_from(["name", "namespace"]), st.none() | st.text(max_size=8) | st.integers()
    ),
    spec=st.none()
    | st.dictionaries(
        st.sampled_from(["path", "prune", "interval"]),
        st.none() | st.text(max_size=8) | st.booleans(),
    ),
)
def test_any_flux_kustomization_file_is_skipped_as_flux(version, meta, spec):
    body: dict[str, Any] = {
        "apiVersion": f"kustomize.toolkit.fluxcd.io/{version}",
        "kind": "Kustomization",
    }
    if meta is not None:
        body["metadata"] = meta
    if spec is not None:
        body["spec"] = spec
    got = read_desired_workloads(
        [SourceFile("clusters/prod/apps.yaml", yaml.safe_dump(body).encode())]
    )
    (skip,) = got.skipped
    assert "flux build kustomization" in skip.reason and "kustomize build" not in skip.reason


def test_a_file_of_services_says_what_it_holds(realdata):
    got = read_desired_workloads(
        [source(realdata / "manifests" / "podinfo-kustomize-service.yaml")]
    )
    assert got.skipped[0].reason == "no workload, ConfigMap, Secret or HPA (Service)"


def test_helm_template_output_and_unrendered_templates(realdata, tmp_path):
    docs = load_docs(realdata / "manifests" / "podinfo-kustomize-deployment.yaml")
    rendered = "---\n# Source: podinfo/templates/deployment.yaml\n" + yaml.safe_dump(docs[0])
    rendered += (
        "---\n# Source: podinfo/templates/hpa.yaml\n"
        + (realdata / "manifests" / "podinfo-kustomize-hpa.yaml").read_text()
    )
    chart = 'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ include "x" . }}\n'
    chart += "spec:\n  replicas: {{ .Values.replicas }}\n  {{- with .Values.x }}\n"
    got = read_desired_workloads(
        [
            SourceFile("out/podinfo.yaml", rendered.encode()),
            SourceFile("chart/templates/deployment.yaml", chart.encode()),
        ]
    )
    assert sorted(o.key.kind for o in got.objects) == ["Deployment", "HorizontalPodAutoscaler"]
    assert got.skipped[0].reason.startswith("an unrendered Helm template")


def test_a_configmap_holding_braces_is_not_mistaken_for_a_template(realdata):
    got = read_desired_workloads(
        [source(realdata / "manifests" / "microservices-demo-otel-collector.yaml")]
    )
    assert {o.key.kind for o in got.objects} == {"Deployment", "ConfigMap"}


def test_broken_yaml_is_an_error_naming_the_file_and_line():
    with pytest.raises(FormatError) as exc:
        read_desired_workloads([SourceFile("bad.yaml", b"kind: Deployment\n  name: [x\n")])
    assert exc.value.path == "bad.yaml" and exc.value.line is not None


# --------------------------------------------------------------------------- Argo CD


def argocd_response(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """What GET /api/v1/applications/{name}/manifests returns (manifests as JSON strings)."""
    return {
        "manifests": [json.dumps(d) for d in docs],
        "namespace": "boutique",
        "server": "https://kubernetes.default.svc",
        "revision": "4c2a8d1c7f0b5e6d",
        "sourceType": "Kustomize",
    }


def test_argocd_manifest_response_gives_the_same_objects(realdata, tmp_path):
    docs = load_docs(realdata / "manifests" / "microservices-demo-release-all.yaml")
    from_api = parse_argocd_manifests("argocd:shop", argocd_response(docs))
    assert [d.body for d in from_api] == docs
    saved = tmp_path / "shop-manifests.json"
    saved.write_text(json.dumps(argocd_response(docs)))
    plain = read_desired_workloads(
        [source(realdata / "manifests" / "microservices-demo-release-all.yaml")]
    )
    via_file = read_desired_workloads([source(saved)])
    assert [o.key for o in via_file.objects] == [o.key for o in plain.objects]


def test_the_live_argocd_seam_gives_indexable_objects(realdata):
    """What the Argo CD client's manifests() returns becomes a desired index in one step."""
    docs = load_docs(realdata / "manifests" / "microservices-demo-otel-collector.yaml")
    objs = objects_from_documents(parse_argocd_manifests("argocd:shop", argocd_response(docs)))
    assert sorted(o.key.kind for o in objs) == ["ConfigMap", "Deployment"]
    assert {o.source for o in objs} == {"argocd:shop"}
    assert len(wl.ObjectIndex(objs)) == 2


def test_a_bad_manifest_in_the_response_is_named():
    with pytest.raises(FormatError) as exc:
        parse_argocd_manifests("argocd:shop", {"manifests": ['{"kind": "Deployment"}', "{bad"]})
    assert exc.value.field == "manifests[1]"
    with pytest.raises(FormatError):
        parse_argocd_manifests("argocd:shop", {"items": []})


# --------------------------------------------------------------------------- observed dumps


def kubectl_list(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": objs, "metadata": {"resourceVersion": ""}}


@pytest.fixture()
def dump(realdata) -> dict[str, Any]:
    docs = [d for d in load_docs(realdata / "manifests" / "microservices-demo-release-all.yaml")]
    live = [liveify(d, namespace="boutique") for d in docs if d["kind"] in wl.KINDS]
    services = [d for d in docs if d["kind"] == "Service"]
    secret = liveify(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "payment-keys"},
            "stringData": {"stripe": "sk_live_TOTALLY_SECRET_VALUE"},
        },
        namespace="boutique",
    )
    return kubectl_list([*live, *services, secret])


def test_kubectl_dump_json_and_yaml_read_the_same(dump):
    from_json = parse_workload_dump("eu.json", json.dumps(dump, indent=4).encode())
    from_yaml = parse_workload_dump("eu.yaml", yaml.safe_dump(dump).encode())
    assert [o.key for o in from_json] == [o.key for o in from_yaml]
    assert len(from_json) == 13  # 12 Deployments and the Secret; Services are not read
    assert {o.app for o in from_json} == {"shop"}
    assert [o.body for o in from_json] == [o.body for o in from_yaml]


def test_secrets_are_redacted_by_the_reader(dump):
    objs = parse_workload_dump("eu.json", json.dumps(dump).encode())
    text = repr([o.body for o in objs])
    assert "TOTALLY_SECRET" not in text
    assert base64.b64encode(b"sk_live_TOTALLY_SECRET_VALUE").decode() not in text
    secret = next(o for o in objs if o.key.kind == "Secret")
    assert secret.body["data"]["stripe"].startswith("sha256:")
    assert wl.LAST_APPLIED not in secret.body["metadata"].get("annotations", {})


def test_want_filter_materialises_only_what_is_asked(dump):
    def want(key: wl.ObjectKey, app: str | None) -> bool:
        return key.name in ("frontend", "cartservice")

    for data in (json.dumps(dump).encode(), yaml.safe_dump(dump).encode()):
        got = parse_workload_dump("eu", data, want=want)
        assert sorted(o.key.name for o in got) == ["cartservice", "frontend"]


def test_configured_app_label(dump):
    for item in dump["items"]:
        item["metadata"].setdefault("labels", {})["example.com/app"] = "boutique"
    objs = parse_workload_dump("eu.json", json.dumps(dump).encode(), app_label="example.com/app")
    assert {o.app for o in objs} == {"boutique"}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b'{"kind": "List", "items": [1]}', "items[0]"),
        (b'{"kind": "List", "items": {"a": 1}}', "items"),
        (b"[1, 2]", "[0]"),
        (b"just text", "items"),
    ],
)
def test_bad_dumps_name_the_file_and_item(data, field):
    with pytest.raises(FormatError) as exc:
        parse_workload_dump("eu.json", data)
    assert exc.value.path == "eu.json" and exc.value.field == field


def test_invalid_json_names_the_line():
    with pytest.raises(FormatError) as exc:
        parse_workload_dump("eu.json", b'{"kind": "List",\n "items": [}')
    assert "invalid JSON" in exc.value.reason


@settings(max_examples=200)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_input_reads_or_fails_with_a_format_error(data):
    with contextlib.suppress(FormatError):
        parse_workload_dump("fuzz.json", data)


# --------------------------------------------------------------------------- settings


def test_fleet_settings_from_argocd_formats():
    settings_ = fleet_settings(
        {
            "appLabel": "example.com/app",
            "namespace": "shop",
            "ignoreDifferences": [
                {"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]},
                {"kind": "ConfigMap", "jqPathExpressions": ['.data["config.yaml"]']},
            ],
            "resourceCustomizations": {
                "resource.customizations.ignoreDifferences.all": (
                    "managedFieldsManagers:\n- kube-controller-manager\n"
                ),
                "resource.customizations.ignoreDifferences.apps_Deployment": (
                    "jqPathExpressions:\n"
                    '- .spec.template.spec.containers[] | select(.name == "istio-proxy")\n'
                ),
                "resource.customizations.ignoreDifferences.Secret": "jsonPointers: [/data/tls.crt]",
            },
            "severities": {"WORKLOAD/env.*": "low"},
            "ignore": [{"cluster": "dev-*", "field": "image.*"}],
        },
        source="fw.yaml",
    )
    opts = settings_.options
    assert settings_.app_label == "example.com/app" and opts.namespace == "shop"
    rules = opts.ignore_differences
    assert [(r.group, r.kind) for r in rules] == [
        ("apps", "Deployment"),
        ("", "ConfigMap"),
        ("*", "*"),
        ("apps", "Deployment"),
        ("", "Secret"),
    ]
    assert rules[2].managers == ("kube-controller-manager",)
    assert opts.ignores[0].layer == "WORKLOAD" and opts.ignores[0].cluster == "dev-*"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (
            {"ignoreDifferences": [{"kind": "Deployment", "jsonPointer": ["/x"]}]},
            "fleet.ignoreDifferences.0",
        ),
        (
            {"ignoreDifferences": [{"kind": "Deployment", "jqPathExpressions": ["..x"]}]},
            "fleet.ignoreDifferences[0]",
        ),
        ({"severities": {"WORKLOAD/*": "urgent"}}, "fleet.severities.WORKLOAD/*"),
        ({"appLabel": ""}, "fleet.appLabel"),
        (
            {"resourceCustomizations": {"ignoreDifferences.all": "x: 1"}},
            "fleet.resourceCustomizations.ignoreDifferences.all",
        ),
        (
            {
                "resourceCustomizations": {
                    "resource.customizations.ignoreDifferences.all": "jsonPointers: [x]"
                }
            },
            "fleet.resourceCustomizations.resource.customizations.ignoreDifferences.all",
        ),
    ],
)
def test_bad_fleet_settings_name_the_field(raw, field):
    with pytest.raises(FormatError) as exc:
        fleet_settings(raw, source="fw.yaml")
    assert exc.value.path == "fw.yaml" and exc.value.field == field


# --------------------------------------------------------------------------- kustomize trees
# A kustomization that changes what it lists (kustomize's api/types/kustomization.go fields)
# makes the listed files something other than the desired state: read as written, a stale
# cluster compares equal to the un-rewritten base (images: newTag) and passes in silence.

_DEPLOY = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "guestbook-ui"},
    "spec": {
        "selector": {"matchLabels": {"app": "guestbook-ui"}},
        "template": {
            "metadata": {"labels": {"app": "guestbook-ui"}},
            "spec": {
                "containers": [{"name": "ui", "image": "gcr.io/google-samples/gb-frontend:v5"}]
            },
        },
    },
}
_REWRITES = {
    "images": [{"name": "gcr.io/google-samples/gb-frontend", "newTag": "v6"}],
    "namePrefix": "kustomize-",
    "nameSuffix": "-eu",
    "namespace": "shop",
    "commonLabels": {"team": "a"},
    "labels": [{"pairs": {"team": "a"}}],
    "commonAnnotations": {"a": "b"},
    "replicas": [{"name": "guestbook-ui", "count": 3}],
    "patches": [{"patch": "- op: replace\n  path: /spec/replicas\n  value: 2"}],
    "configMapGenerator": [{"name": "cfg", "literals": ["a=b"]}],
    "components": ["../components/sidecar"],
    "replacements": [{"path": "repl.yaml"}],
    "helmCharts": [{"name": "x"}],
}


def _files(tree: dict[str, Any]) -> list[SourceFile]:
    return [SourceFile(path, yaml.safe_dump(body).encode()) for path, body in tree.items()]


def _kustomization(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", **fields}


def test_a_rewritten_base_is_not_read_as_the_desired_state():
    """The argocd-example-apps kustomize-guestbook shape with an image override: the base
    Deployment is skipped as unreadable, naming the kustomization and what it changes."""
    files = _files(
        {
            "app/kustomization.yaml": _kustomization(
                resources=["guestbook-ui-deployment.yaml"], images=_REWRITES["images"]
            ),
            "app/guestbook-ui-deployment.yaml": _DEPLOY,
        }
    )
    got = read_desired_workloads(files)
    assert got.objects == []
    assert [s.path for s in got.unparsed] == ["app/guestbook-ui-deployment.yaml"]
    (skip,) = got.unparsed
    assert skip.problem and "rewritten by app/kustomization.yaml (images)" in skip.reason
    assert "kustomize build app" in skip.reason


def test_a_kustomization_that_only_lists_resources_changes_nothing(realdata):
    """podinfo's real kustomization lists its files and nothing else: they are read as is."""
    k = realdata / "manifests" / "podinfo-kustomize-kustomization.yaml"
    d = realdata / "manifests" / "podinfo-kustomize-deployment.yaml"
    files = [
        SourceFile("podinfo/kustomization.yaml", k.read_bytes()),
        SourceFile("podinfo/deployment.yaml", d.read_bytes()),
    ]
    assert kustomize_rewrites(files) == {}
    assert len(read_desired_workloads(files).objects) == 1


def test_an_overlay_rewrites_every_file_under_the_base_it_lists_and_its_patches():
    files = _files(
        {
            "base/kustomization.yaml": _kustomization(resources=["deploy.yaml"]),
            "base/deploy.yaml": _DEPLOY,
            "overlays/prd/kustomization.yaml": _kustomization(
                resources=["../../base", "https://github.com/org/repo//x?ref=v1"],
                patchesStrategicMerge=["replicas.yaml", "apiVersion: apps/v1\nkind: X\n"],
                patches=[{"path": "p.yaml", "target": {"kind": "Deployment"}}],
            ),
            "overlays/prd/replicas.yaml": {**_DEPLOY, "spec": {"replicas": 5}},
            "overlays/prd/p.yaml": [{"op": "add", "path": "/x", "value": 1}],
            "other/deploy.yaml": {**_DEPLOY, "metadata": {"name": "other"}},
        }
    )
    got = kustomize_rewrites(files)
    assert sorted(got) == ["base/deploy.yaml", "overlays/prd/p.yaml", "overlays/prd/replicas.yaml"]
    assert (
        "a patch that overlays/prd/kustomization.yaml applies" in got["overlays/prd/p.yaml"].reason
    )
    read = read_desired_workloads(files)
    assert [o.key.name for o in read.objects] == ["other"]


def test_a_flux_kustomization_named_so_is_not_read_as_kustomize_config():
    flux = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps"},
        "spec": {"path": "./apps", "images": [{"name": "x", "newTag": "2"}]},
    }
    files = _files({"kustomization.yaml": flux, "deploy.yaml": _DEPLOY})
    assert kustomize_rewrites(files) == {}


_KEEPS = ("crds", "openapi", "sortOptions", "metadata")


@settings(max_examples=150, deadline=None)
@given(
    rewrites=st.sets(st.sampled_from(sorted(_REWRITES)), max_size=4),
    keeps=st.sets(st.sampled_from(_KEEPS), max_size=2),
    listed=st.sets(st.sampled_from(["a.yaml", "b.yaml", "sub", "sub/c.yaml"]), min_size=1),
    with_api_version=st.booleans(),
)
def test_listed_files_are_rewritten_exactly_when_the_kustomization_changes_them(
    rewrites, keeps, listed, with_api_version
):
    """Property: every file a kustomization reaches (directly or below a listed directory) is
    skipped when, and only when, it has a field that changes objects; nothing else is."""
    body: dict[str, Any] = {"resources": sorted(listed)}
    body.update({k: _REWRITES[k] for k in rewrites})
    body.update({k: {} for k in keeps})
    if with_api_version:
        body = _kustomization(**body)
    tree = {"k/kustomization.yaml": body}
    for name in ("a.yaml", "b.yaml", "sub/c.yaml", "sub/d.yaml", "z.yaml"):
        tree[f"k/{name}"] = {**_DEPLOY, "metadata": {"name": name.replace("/", "-")[:-5]}}
    got = kustomize_rewrites(_files(tree))
    reached = {
        f"k/{n}"
        for n in ("a.yaml", "b.yaml", "sub/c.yaml", "sub/d.yaml")
        if n in listed or (n.startswith("sub/") and "sub" in listed)
    }
    assert set(got) == (reached if rewrites else set())
    read = read_desired_workloads(_files(tree))
    assert {o.source for o in read.objects}.isdisjoint(got)
    assert {s.path for s in read.unparsed} == set(got)


# --------------------------------------------------------------------------- GitOps renders
# An Argo CD Application (argo-cd types.go ApplicationSource: kustomize, helm, plugin,
# directory.jsonnet) or a Flux Kustomization (images, patches, postBuild...) that renders its
# path with changes: the files under that path are not the desired state as written.


def _application(**source: Any) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "guestbook", "namespace": "argocd"},
        "spec": {
            "project": "default",
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "default"},
            "source": {"repoURL": "https://github.com/argoproj/argocd-example-apps.git", **source},
        },
    }


def test_an_application_with_a_kustomize_image_override_renders_its_path():
    """The argocd-example-apps guestbook with an Application overriding its image: the base
    was compared as written and a stale cluster passed."""
    tree = {
        "repo/apps/guestbook.yaml": _application(
            path="guestbook", kustomize={"images": ["gcr.io/heptio-images/ks-guestbook-demo:0.3"]}
        ),
        "repo/guestbook/guestbook-ui-deployment.yaml": _DEPLOY,
        "repo/other/deploy.yaml": {**_DEPLOY, "metadata": {"name": "other"}},
    }
    got = read_desired_workloads(_files(tree))
    assert [o.key.name for o in got.objects] == ["other"]
    (skip,) = got.unparsed
    assert skip.path == "repo/guestbook/guestbook-ui-deployment.yaml" and skip.problem
    assert "Argo CD Application argocd/guestbook" in skip.reason
    assert "kustomize.images" in skip.reason and "--argocd-app guestbook" in skip.reason


def test_multiple_sources_helm_values_and_flux_postbuild_render_their_paths():
    app = _application(path="x")
    app["spec"]["sources"] = [
        {"repoURL": "https://charts", "chart": "podinfo", "helm": {"valuesObject": {"a": 1}}},
        {"repoURL": "https://git", "path": "charts/web", "helm": {"valueFiles": ["v.yaml"]}},
    ]
    flux = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system"},
        "spec": {"path": "./apps/production", "postBuild": {"substitute": {"cluster": "eu"}}},
    }
    tree = {
        "t/app.yaml": app,
        "t/flux.yaml": flux,
        "t/x/d.yaml": _DEPLOY,
        "t/charts/web/d.yaml": _DEPLOY,
        "t/apps/production/d.yaml": _DEPLOY,
        "t/apps/staging/d.yaml": _DEPLOY,
    }
    got = gitops_rewrites(_files(tree))
    assert sorted(got) == ["t/apps/production/d.yaml", "t/charts/web/d.yaml"]
    assert "Flux Kustomization flux-system/apps" in got["t/apps/production/d.yaml"].reason
    assert "flux build kustomization apps" in got["t/apps/production/d.yaml"].reason


@settings(max_examples=120, deadline=None)
@given(
    tool=st.sampled_from(["kustomize", "helm", "plugin", "directory"]),
    settings_=st.dictionaries(
        st.sampled_from(
            [
                "images",
                "namePrefix",
                "valuesObject",
                "parameters",
                "name",
                "jsonnet",
                "recurse",
                "include",
            ]
        ),
        st.sampled_from([None, "", [], {}, False, "x", ["a:1"], {"k": "v"}, True]),
        max_size=3,
    ),
    repo_path=st.sampled_from(["guestbook", "./guestbook", "guestbook/", ".", ""]),
)
def test_an_application_marks_its_path_exactly_when_its_source_changes_it(
    tool, settings_, repo_path
):
    """Property: files under the source's path are skipped iff the source sets a tool field
    to something (directory: only jsonnet renders); the repository root (``.`` or ``""``, as
    Argo CD joins it) is every directory, the Application's own file aside."""
    tree = {
        "r/app.yaml": _application(path=repo_path, **{tool: settings_}),
        "r/guestbook/d.yaml": _DEPLOY,
        "r/elsewhere/d.yaml": _DEPLOY,
    }
    got = gitops_rewrites(_files(tree))
    set_keys = {k for k, v in settings_.items() if v not in (None, "", [], {}, False)}
    if tool == "directory":
        set_keys &= {"jsonnet"}
    marked = (
        {"r/guestbook/d.yaml"}
        if repo_path.strip("./")
        else {"r/guestbook/d.yaml", "r/elsewhere/d.yaml"}
    )
    assert set(got) == (marked if set_keys else set())
