"""Argo CD ``ignoreDifferences``: JSON pointers, the supported jq paths, managed-fields managers.

Rules are Argo CD's own examples (``argocd-application-reference.yaml``, ``argocd-cm``) where
they exist, applied to gitops-engine's real desired/live pairs.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core import workloads as wl
from fleetwarden.core.ignoring import (
    IgnoreDifference,
    apply_ignore_differences,
    managed_paths,
    parse_jq_path,
    parse_json_pointer,
    remove_paths,
    resolve_pointer,
    rule_from_mapping,
)
from tests.core.test_workloads import _pair, diff, liveify, load_docs

LABEL = "applications.argoproj.io/app-name"


# --------------------------------------------------------------------------- pointers


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("", ()),
        ("/spec/replicas", ("spec", "replicas")),
        ("/metadata/annotations/a~1b", ("metadata", "annotations", "a/b")),
        ("/x/~0tilde", ("x", "~tilde")),
        ("/webhooks/0/clientConfig/caBundle", ("webhooks", "0", "clientConfig", "caBundle")),
    ],
)
def test_json_pointers_parse(text, steps):
    assert parse_json_pointer(text) == steps


@pytest.mark.parametrize("text", ["spec/replicas", "/a/~2", "/a/~"])
def test_bad_json_pointers_are_refused(text):
    with pytest.raises(ValueError):
        parse_json_pointer(text)


def test_pointer_indices_only_address_lists():
    obj = {"a": [{"b": 1}, {"b": 2}], "m": {"0": "zero"}}
    assert resolve_pointer(obj, ("a", "1", "b")) == [("a", 1, "b")]
    assert resolve_pointer(obj, ("m", "0")) == [("m", "0")]
    assert resolve_pointer(obj, ("a", "01")) == []
    assert resolve_pointer(obj, ("a", "5")) == []
    assert resolve_pointer(obj, ("nope",)) == []


# --------------------------------------------------------------------------- jq


CONTAINERS = {
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {"name": "app", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
                    {"name": "istio-proxy", "image": "proxy:1"},
                ],
                "initContainers": [{"name": "istio-init", "image": "proxy:1"}],
            }
        }
    },
    "data": {"config.yaml": "x", "other": "y"},
    "metadata": {"annotations": {"autoscaling.alpha.kubernetes.io/behavior": "{}"}},
}


@pytest.mark.parametrize(
    ("expr", "paths"),
    [
        (".data.other", [("data", "other")]),
        ('.data["config.yaml"]', [("data", "config.yaml")]),
        (
            '.metadata.annotations."autoscaling.alpha.kubernetes.io/behavior"',
            [("metadata", "annotations", "autoscaling.alpha.kubernetes.io/behavior")],
        ),
        (
            ".spec.template.spec.containers[0].image",
            [("spec", "template", "spec", "containers", 0, "image")],
        ),
        (
            ".spec.template.spec.containers[-1]",
            [("spec", "template", "spec", "containers", 1)],
        ),
        (
            ".spec.template.spec.containers[].image",
            [
                ("spec", "template", "spec", "containers", 0, "image"),
                ("spec", "template", "spec", "containers", 1, "image"),
            ],
        ),
        (
            '.spec.template.spec.containers[] | select(.name == "istio-proxy")',
            [("spec", "template", "spec", "containers", 1)],
        ),
        (
            '.spec.template.spec.containers[] | select(.name != "istio-proxy") | .env[0].value',
            [("spec", "template", "spec", "containers", 0, "env", 0, "value")],
        ),
        (
            '.spec.template.spec.initContainers[] | select(.name == "istio-init")',
            [("spec", "template", "spec", "initContainers", 0)],
        ),
        (
            ".spec.template.spec.containers[] | select(.env) | .name",
            [("spec", "template", "spec", "containers", 0, "name")],
        ),
        (".spec.missing?.x", []),
    ],
)
def test_supported_jq_paths(expr, paths):
    assert parse_jq_path(expr).paths(CONTAINERS) == paths


@pytest.mark.parametrize(
    "expr",
    [
        "..image",
        ".a[1:2]",
        "map(.x)",
        '.a | select(.x == "a" and .y == "b")',
        ".a + .b",
        "spec.replicas",
        ".",
        "",
        '.a | select(.x == "unterminated)',
    ],
)
def test_unsupported_jq_is_refused_with_the_position(expr):
    with pytest.raises(ValueError) as exc:
        parse_jq_path(expr)
    assert "jq" in str(exc.value) or "empty" in str(exc.value)


# --------------------------------------------------------------------------- managed fields


def test_managed_fields_of_a_real_live_object(realdata):
    _, live = _pair(realdata, "ssd-deploy-manual-apply")
    patterns = managed_paths(live[0], ["kubectl-client-side-apply"])
    # the hand-applied sidecar is owned as a whole ("." inside its k:{"name":"idle"} entry)
    assert (
        ("f", "spec"),
        ("f", "template"),
        ("f", "spec"),
        ("f", "containers"),
        ("k", {"name": "idle"}),
    ) in patterns
    assert managed_paths(live[0], ["nobody"]) == []


def test_managed_fields_manager_rule_silences_its_fields(realdata):
    desired, live = _pair(realdata, "ssd-deploy-manual-apply")
    rule = rule_from_mapping(
        {"kind": "*", "group": "*", "managedFieldsManagers": ["kubectl-client-side-apply"]}
    )
    found = diff(
        desired,
        live,
        app="manual-apply-app",
        app_label=LABEL,
        options=wl.WorkloadOptions(ignore_differences=(rule,)),
    )
    assert found == []


def test_status_manager_owns_nothing_that_is_compared(realdata):
    desired, live = _pair(realdata, "smd-deploy2")
    rule = rule_from_mapping(
        {"kind": "*", "group": "*", "managedFieldsManagers": ["kube-controller-manager"]}
    )
    found = diff(
        desired,
        live,
        app="nginx",
        app_label=LABEL,
        options=wl.WorkloadOptions(ignore_differences=(rule,)),
    )
    assert [f.field for f in found] == [
        "resources.nginx.requests.cpu",
        "resources.nginx.requests.memory",
    ]


# --------------------------------------------------------------------------- rules on real pairs


def test_jq_select_removes_a_sidecar_on_both_sides(realdata):
    desired, live = _pair(realdata, "ssd-deploy-manual-apply")
    rule = rule_from_mapping(
        {
            "group": "apps",
            "kind": "Deployment",
            "jqPathExpressions": ['.spec.template.spec.containers[] | select(.name == "idle")'],
        }
    )
    options = wl.WorkloadOptions(ignore_differences=(rule,))
    assert diff(desired, live, app="manual-apply-app", app_label=LABEL, options=options) == []


def test_json_pointer_into_resources(realdata):
    desired, live = _pair(realdata, "smd-deploy2")
    rule = rule_from_mapping(
        {
            "group": "apps",
            "kind": "Deployment",
            "jsonPointers": ["/spec/template/spec/containers/0/resources/requests/cpu"],
        }
    )
    options = wl.WorkloadOptions(ignore_differences=(rule,))
    found = diff(desired, live, app="nginx", app_label=LABEL, options=options)
    assert [f.field for f in found] == ["resources.nginx.requests.memory"]


def test_argocd_configmap_key_example(realdata):
    docs = load_docs(realdata / "manifests" / "microservices-demo-otel-collector.yaml")
    cms = [d for d in docs if d["kind"] == "ConfigMap"]
    live = [liveify(d) for d in cms]
    key = "collector-gateway-config-template.yaml"
    live[0]["data"][key] += "# edited\n"
    rule = rule_from_mapping({"kind": "ConfigMap", "jqPathExpressions": [f'.data["{key}"]']})
    assert [f.field for f in diff(cms, live)] == ["config.collector-gateway-config-template"]
    assert diff(cms, live, options=wl.WorkloadOptions(ignore_differences=(rule,))) == []


def test_rules_match_group_kind_globs_and_exact_names(realdata):
    desired, live = _pair(realdata, "smd-deploy2")
    pointer = ["/spec/template/spec/containers/0/resources"]

    def found(**match: Any) -> list[str]:
        rule = rule_from_mapping({**match, "jsonPointers": pointer})
        options = wl.WorkloadOptions(ignore_differences=(rule,))
        return [f.field for f in diff(desired, live, app="nginx", app_label=LABEL, options=options)]

    assert found(group="apps", kind="Deployment") == []
    assert found(group="*", kind="Deploy*") == []
    assert found(group="", kind="Deployment") != []  # core group: not apps
    assert found(group="apps", kind="Deployment", name="nginx-deployment") == []
    assert found(group="apps", kind="Deployment", name="nginx") != []
    assert found(group="apps", kind="Deployment", namespace="other") != []


def test_unknown_rule_fields_and_bad_paths_are_refused():
    with pytest.raises(ValueError, match="jsonPointer"):
        rule_from_mapping({"kind": "Deployment", "jsonPointer": ["/spec/replicas"]})
    with pytest.raises(ValueError, match=r"jqPathExpressions\[1\]"):
        rule_from_mapping({"kind": "Deployment", "jqPathExpressions": [".a", "..b"]})
    with pytest.raises(ValueError, match="list of strings"):
        rule_from_mapping({"kind": "Deployment", "jsonPointers": "/spec/replicas"})


def test_objects_no_rule_matches_are_returned_as_they_are():
    obj = {"spec": {"replicas": 1}}
    rule = IgnoreDifference(kind="StatefulSet", group="apps", json_pointers=(("spec", "replicas"),))
    d, lv = apply_ignore_differences([rule], ("apps", "Deployment", "ns", "x"), obj, obj)
    assert d is obj and lv is obj


# --------------------------------------------------------------------------- properties

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab", max_size=3),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text("abc", min_size=1, max_size=2), children, max_size=3)
    ),
    max_leaves=15,
)


def _all_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_all_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_all_paths(v, (*prefix, i)))
    return out


@settings(max_examples=200)
@given(st.dictionaries(st.text("abc", min_size=1, max_size=2), JSON, max_size=4), st.data())
def test_pointer_and_jq_name_the_same_path_and_removal_never_mutates(obj, data):
    paths = _all_paths(obj)
    if not paths:
        return
    path = data.draw(st.sampled_from(paths))
    pointer = "/" + "/".join(str(s).replace("~", "~0").replace("/", "~1") for s in path)
    jq = "".join(f"[{s}]" if isinstance(s, int) else f"[{json.dumps(s)}]" for s in path)
    assert resolve_pointer(obj, parse_json_pointer(pointer)) == [path]
    assert parse_jq_path("." + jq).paths(obj) == [path]
    before = copy.deepcopy(obj)
    removed = remove_paths(obj, [path])
    assert obj == before
    assert resolve_pointer(removed, parse_json_pointer(pointer)) != [path] or isinstance(
        path[-1], int
    )  # a list shifts: the same index may exist again


@settings(max_examples=100)
@given(
    st.lists(st.text("xyz", min_size=1, max_size=3), min_size=1, max_size=6, unique=True), st.data()
)
def test_removing_several_list_items_removes_exactly_those(names, data):
    obj = {"items": [{"name": n} for n in names]}
    doomed = data.draw(st.lists(st.sampled_from(names), unique=True))
    paths = [
        p for n in doomed for p in parse_jq_path(f'.items[] | select(.name == "{n}")').paths(obj)
    ]
    left = remove_paths(obj, paths)
    assert [i["name"] for i in left["items"]] == [n for n in names if n not in doomed]
    assert parse_jq_path('.items[] | select(.name == "none")').paths(obj) == []
