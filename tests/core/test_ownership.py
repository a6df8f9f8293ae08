"""Ownership (seed 001): which layer owns a drifted field, and which object its fix goes to."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import (
    DEFAULT_RULES,
    ArgoApp,
    FluxKind,
    FluxRef,
    Owner,
    OwnershipMap,
    OwnershipRule,
    parse_rules,
)


def finding(layer: Layer, field: str, *, cluster: str = "prod-eu-1", pool: str | None = "general"):
    return Finding(cluster, pool, layer, field, "x", "y", Severity.HIGH, nodes=("n-1",))


@pytest.mark.parametrize(
    ("layer", "field", "owner"),
    [
        (Layer.SPEC, "instanceType", Owner.INFRASTRUCTURE),
        (Layer.SPEC, "diskSize", Owner.INFRASTRUCTURE),
        (Layer.SPEC, "osImage", Owner.INFRASTRUCTURE),
        (Layer.SPEC, "requirements.karpenter.sh/capacity-type", Owner.INFRASTRUCTURE),
        (Layer.COUNT, "nodeCount", Owner.INFRASTRUCTURE),
        (Layer.L4, "kubeletVersion", Owner.INFRASTRUCTURE),
        (Layer.L4, "kubeletVersion.mixed", Owner.INFRASTRUCTURE),
        (Layer.L3, "allocatable.memory", Owner.INFRASTRUCTURE),
        (Layer.L1, "labels.team", Owner.CLUSTER),
        (Layer.L2, "taints.dedicated:NoSchedule", Owner.CLUSTER),
        (Layer.WORKLOAD, "image.app", Owner.CLUSTER),
        (Layer.SPEC, "pool", Owner.NONE),
        (Layer.SPEC, "somethingNew", Owner.NONE),
    ],
)
def test_default_split_follows_seed_001(layer, field, owner):
    route = OwnershipMap().route(finding(layer, field))
    assert route.owner is owner
    assert route.target is None  # the defaults know owners, not objects
    assert field in route.reason and "default rule" in route.reason


def test_stray_node_without_pool_is_nobodys():
    route = OwnershipMap().route(finding(Layer.SPEC, "pool", pool=None))
    assert route.owner is Owner.NONE and route.target is None


def test_target_rules_give_objects_per_cluster_and_pool_with_templates():
    """A rule without an owner only supplies targets: field ownership stays the default's."""
    omap = OwnershipMap(
        [
            OwnershipRule(
                cluster="prod-*",
                flux=FluxRef(FluxKind.HELM_RELEASE, "flux-system", "{cluster}-{pool}", "mgmt"),
            ),
            OwnershipRule(cluster="prod-*", argocd=ArgoApp("{cluster}-node-config")),
            OwnershipRule(flux=FluxRef(FluxKind.KUSTOMIZATION, "flux-system", "pools")),
        ]
    )
    infra = omap.route(finding(Layer.SPEC, "instanceType"))
    assert infra.owner is Owner.INFRASTRUCTURE
    assert infra.target == FluxRef(
        FluxKind.HELM_RELEASE, "flux-system", "prod-eu-1-general", "mgmt"
    )
    assert "rule #1" in infra.reason
    cluster = omap.route(finding(Layer.L1, "labels.team"))
    assert cluster.owner is Owner.CLUSTER
    assert cluster.target == ArgoApp("prod-eu-1-node-config")
    assert "rule #2" in cluster.reason
    # another cluster falls through to the catch-all Kustomization (context: its own cluster)
    staging = omap.route(finding(Layer.COUNT, "nodeCount", cluster="staging"))
    assert staging.target == FluxRef(FluxKind.KUSTOMIZATION, "flux-system", "pools", "staging")
    # ... and has no Argo CD application: the reason says so
    no_app = omap.route(finding(Layer.L1, "labels.team", cluster="staging"))
    assert no_app.target is None and "no Argo CD application" in no_app.reason


def test_a_user_rule_reassigns_a_field_and_direct_restore_is_per_rule():
    omap = OwnershipMap(
        [
            OwnershipRule(pool="gpu", field="labels.nvidia.com/*", owner=Owner.INFRASTRUCTURE),
            OwnershipRule(cluster="prod-*", direct_restore=False, argocd=ArgoApp("nodes")),
        ]
    )
    gpu = omap.route(finding(Layer.L1, "labels.nvidia.com/gpu.product", pool="gpu"))
    assert gpu.owner is Owner.INFRASTRUCTURE and "rule #1" in gpu.reason
    team = omap.route(finding(Layer.L1, "labels.team"))
    assert team.owner is Owner.CLUSTER
    assert team.direct_restore is False and "direct restore disallowed" in team.reason
    assert omap.route(finding(Layer.L1, "labels.team", cluster="dev")).direct_restore is True


def test_owner_mismatched_target_rules_are_skipped():
    """A rule naming owner=infrastructure does not lend its Argo app to cluster findings."""
    omap = OwnershipMap(
        [
            OwnershipRule(owner=Owner.INFRASTRUCTURE, field="diskSize", argocd=ArgoApp("wrong")),
            OwnershipRule(argocd=ArgoApp("right")),
        ]
    )
    assert omap.route(finding(Layer.L1, "labels.a")).target == ArgoApp("right")


def test_without_defaults_unmatched_fields_have_no_owner():
    route = OwnershipMap([], defaults=False).route(finding(Layer.SPEC, "instanceType"))
    assert route.owner is Owner.NONE and "no rule names an owner" in route.reason


@given(
    layer=st.sampled_from(list(Layer)),
    field=st.text(min_size=1, max_size=30),
    cluster=st.text(min_size=1, max_size=10),
    pool=st.none() | st.text(max_size=10),
)
def test_every_finding_gets_exactly_one_owner_and_a_reason(layer, field, cluster, pool):
    route = OwnershipMap().route(Finding(cluster, pool, layer, field, 1, 2, Severity.LOW))
    assert route.owner in Owner and route.reason


def test_templates_are_not_format_strings():
    """Braces other than {cluster}/{pool} are kept literally (no str.format surprises)."""
    omap = OwnershipMap([OwnershipRule(argocd=ArgoApp("{cluster}-{0}-{pool.__class__}"))])
    assert omap.route(finding(Layer.L1, "labels.a")).target == ArgoApp(
        "prod-eu-1-{0}-{pool.__class__}"
    )


def test_parse_rules_reads_config_and_names_bad_keys():
    rules = parse_rules(
        [
            {"cluster": "prod-*", "argocd": "{cluster}-nodes", "directRestore": False},
            {
                "pool": "gpu",
                "owner": "Infrastructure",
                "flux": {"kind": "HelmRelease", "name": "{pool}", "cluster": "mgmt"},
            },
            {"argocd": {"application": "fallback"}},
        ]
    )
    assert rules[0] == OwnershipRule(
        cluster="prod-*", argocd=ArgoApp("{cluster}-nodes"), direct_restore=False
    )
    assert rules[1].owner is Owner.INFRASTRUCTURE
    assert rules[1].flux == FluxRef(FluxKind.HELM_RELEASE, "flux-system", "{pool}", "mgmt")
    assert rules[2].argocd == ArgoApp("fallback")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([{"clustr": "x"}], r"ownership\[0\]: unknown key\(s\) clustr"),
        ([{"owner": "flux"}], r"ownership\[0\]\.owner: 'flux' is not one of"),
        ([{"flux": {"kind": "Bucket", "name": "x"}}], r"ownership\[0\]\.flux\.kind"),
        ([{}, {"flux": {"kind": "HelmRelease"}}], r"ownership\[1\]\.flux\.name"),
        ([{"argocd": 3}], r"ownership\[0\]\.argocd: expected an application name"),
        ([{"directRestore": "no"}], r"directRestore: expected true or false"),
        ([{"pool": ""}], r"ownership\[0\]\.pool: expected a non-empty glob"),
        ("nope", r"ownership: expected a list"),
        ([3], r"ownership\[0\]: expected a mapping"),
    ],
)
def test_parse_rules_errors_name_the_rule_and_key(data, message):
    with pytest.raises(ValueError, match=message):
        parse_rules(data)


def test_defaults_end_with_a_catch_all():
    assert DEFAULT_RULES[-1] == OwnershipRule(owner=Owner.NONE)
