"""Warn mode per field (``core.policy.warning``): the policy's ``warn`` rules are parsed
strictly; a field they cover is reported (an alert naming the rule) and never healed, in every
mode; the matching rule is pinned by property tests over owners, names and field globs."""

from __future__ import annotations

from datetime import UTC, datetime
from fnmatch import fnmatchcase

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import (
    ArgoApp,
    FluxKind,
    FluxRef,
    Owner,
    OwnershipMap,
    OwnershipRule,
)
from fleetwarden.core.policy import (
    Action,
    Decision,
    Mode,
    Policy,
    PolicyState,
    Status,
    decide,
    fingerprint,
    parse_warn,
)
from fleetwarden.core.policy.warning import object_paths, warned

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
APPS = FluxRef(FluxKind.KUSTOMIZATION, "flux-system", "apps-eu")
FLUX = OwnershipMap([OwnershipRule(owner=Owner.INFRASTRUCTURE, flux=APPS)])
WARN = parse_warn([{"owner": {"kind": "Kustomization", "name": "apps-*"},
                    "fields": ["spec.replicas", "metadata.labels.*"]}])  # fmt: skip


def finding(field: str, layer: Layer = Layer.L1, cluster: str = "eu") -> Finding:
    return Finding(cluster, "general", layer, field, "a", "b", Severity.HIGH, nodes=("n1",))


@pytest.mark.parametrize("mode", list(Mode))
def test_a_warned_field_is_alerted_with_the_rule_and_never_healed_in_any_mode(mode):
    f = finding("labels.team")
    d = decide(f, FLUX.route(f), PolicyState({"eu": 10}), NOW, mode, policy=Policy(warn=WARN))
    assert (d.action, d.status, d.target, d.notify) == (Action.ALERT, Status.PLANNED, None, True)
    assert d.warn == ("metadata.labels.*", "Flux Kustomization flux-system/apps-eu in cluster eu")
    assert any(
        r.startswith("warn mode for labels.team (owner Flux Kustomization flux-system/apps-eu")
        for r in d.reasons
    ), d.reasons
    assert Decision.from_json(d.to_json()) == d  # kept in the audit log, read back alike


def test_an_unwarned_field_of_the_same_owner_is_healed_in_enforce():
    f = finding("instanceType", Layer.SPEC)
    d = decide(
        f, FLUX.route(f), PolicyState({"eu": 10}), NOW, Mode.ENFORCE, policy=Policy(warn=WARN)
    )
    assert (d.action, d.status, d.warn) == (Action.RECONCILE, Status.EXECUTE, None)
    assert d.target == FluxRef(APPS.kind, APPS.namespace, APPS.name, "eu")
    assert "warn" not in d.to_json()  # additive: absent unless warn mode held a heal back


def test_warn_rules_take_part_in_the_fingerprint_only_when_there_are_some():
    assert fingerprint(Policy()) == fingerprint(Policy(warn=()))
    assert fingerprint(Policy()) != fingerprint(Policy(warn=WARN))


# --- the matching rule ------------------------------------------------------------------------

_key = st.from_regex(r"[a-z][a-z0-9./-]{0,20}", fullmatch=True)
_name = st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True)
_glob = st.one_of(_name, st.builds(lambda n: n + "*", _name), st.just("*"))


@given(_key)
def test_a_label_matches_as_written_and_as_its_object_path(key):
    f = finding(f"labels.{key}")
    route = FLUX.route(f)
    for glob in (f"labels.{key}", f"metadata.labels.{key}", "metadata.labels.*", "labels.*"):
        rules = parse_warn([{"owner": {"kind": "Kustomization"}, "fields": [glob]}])
        assert warned(f, route, rules) is not None, glob
    # a taint glob never covers a label, nor a label glob another field
    for glob in ("spec.taints.*", f"metadata.labels.{key}x", "replicas"):
        rules = parse_warn([{"owner": {"kind": "Kustomization"}, "fields": [glob]}])
        assert warned(f, route, rules) is None, glob


@given(_name, _name, _glob, _glob, st.sampled_from([k.value for k in FluxKind]))
def test_a_flux_owner_matches_by_kind_name_and_namespace_globs(name, ns, nglob, nsglob, kind):
    target = FluxRef(FluxKind.KUSTOMIZATION, ns, name)
    omap = OwnershipMap([OwnershipRule(owner=Owner.INFRASTRUCTURE, flux=target)])
    f = finding("spec.replicas")
    rules = parse_warn([{"owner": {"kind": kind, "name": nglob, "namespace": nsglob},
                         "fields": ["*"]}])  # fmt: skip
    expect = kind == "Kustomization" and fnmatchcase(name, nglob) and fnmatchcase(ns, nsglob)
    assert (warned(f, omap.route(f), rules) is not None) == expect


@given(_name, _glob)
def test_an_argo_cd_application_matches_by_name_and_no_flux_kind_matches_it(name, glob):
    omap = OwnershipMap([OwnershipRule(owner=Owner.CLUSTER, argocd=ArgoApp(name))])
    f = finding("labels.team")
    route = omap.route(f)
    app = parse_warn([{"owner": {"kind": "Application", "name": glob}, "fields": ["labels.*"]}])
    flux = parse_warn([{"owner": {"kind": "Kustomization", "name": "*"}, "fields": ["*"]}])
    assert (warned(f, route, app) is not None) == fnmatchcase(name, glob)
    assert warned(f, route, flux) is None


@given(st.text(max_size=30))
def test_object_paths_always_include_the_field_itself(field):
    assert object_paths(field)[0] == field


def test_a_finding_no_owner_object_is_routed_to_is_never_warned():
    f = finding("labels.team")
    route = OwnershipMap().route(f)  # the default rules name no Argo CD application
    everything = parse_warn([{"owner": {"kind": "Application", "name": "*"}, "fields": ["*"]}])
    assert route.target is None and warned(f, route, everything) is None


# --- strict parsing ---------------------------------------------------------------------------


KUS = {"kind": "Kustomization"}
HR = {"kind": "HelmRelease"}
ALL = ["*"]
W0 = "policy.warn[0]"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"owner": KUS}, "policy.warn: expected a list"),
        ([{"owner": KUS}], f"{W0}: missing key(s) fields"),
        ([{"owner": KUS, "fields": [], "x": 1}], f"{W0}: unknown key(s) x"),
        (
            [{"owner": {"kind": "Deployment"}, "fields": ALL}],
            f"{W0}.owner.kind: 'Deployment' is not one of Kustomization, HelmRelease, "
            "GitRepository, Application",
        ),
        ([{"owner": {**KUS, "nam": "a"}, "fields": ALL}], f"{W0}.owner: unknown key(s) nam"),
        ([{"owner": "apps", "fields": ALL}], f"{W0}.owner: expected a mapping"),
        (
            [{"owner": {"kind": "Application", "namespace": "argocd"}, "fields": ALL}],
            f"{W0}.owner.namespace: an Argo CD Application is matched by name only",
        ),
        ([{"owner": {**HR, "name": ""}, "fields": ALL}], f"{W0}.owner.name: expected a non-empty"),
        ([{"owner": HR, "fields": "spec.replicas"}], f"{W0}.fields: expected a non-empty list"),
        ([{"owner": HR, "fields": ["ok", 3]}], f"{W0}.fields[1]: expected a non-empty glob string"),
        (["x"], f"{W0}: expected a mapping"),
    ],
)
def test_every_mistake_is_named_by_rule_and_key(raw, message):
    with pytest.raises(ValueError) as err:
        parse_warn(raw)
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)
