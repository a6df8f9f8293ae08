"""The native NodePools format: JSON Schema validation and the clusters: overlay."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.pools import Provisioner, Taint
from fleetwarden.formats import native
from fleetwarden.formats.documents import parse_yaml_documents
from fleetwarden.formats.errors import FormatError

OVERLAY = """\
apiVersion: fleetwarden.io/v1alpha1
kind: NodePools
pools:
  general:
    provider: aws
    instanceTypes: [m5.large]
    minSize: 3
    maxSize: 10
    labels: {team: platform, tier: general}
    taints: [{key: dedicated, value: general, effect: NoSchedule}]
    kubernetesVersion: "1.30"
    osImage: AmazonLinux2023
    allocatable: {memory: 7220184Ki}
  gpu:
    instanceTypes: [g5.xlarge]
clusters:
  prod-eu-1:
    overrides:
      general: {maxSize: 20, labels: {region: eu}}
  staging:
    pools: [general]
    overrides:
      general: {instanceTypes: [t3.large], labels: {tier: cheap}}
      canary: {instanceTypes: [m7g.large], minSize: 1}
"""


def _pools(text: str):
    return native.read_pools(parse_yaml_documents("pools.yaml", text)).pools


def test_overlay_reuses_pools_across_clusters_with_overrides():
    pools = {(p.cluster, p.name): p for p in _pools(OVERLAY)}
    assert set(pools) == {
        ("prod-eu-1", "general"),
        ("prod-eu-1", "gpu"),
        ("staging", "general"),
        ("staging", "canary"),
    }
    eu = pools[("prod-eu-1", "general")]
    assert (eu.max_size, eu.min_size, eu.instance_types) == (20, 3, ("m5.large",))
    assert dict(eu.labels) == {"team": "platform", "tier": "general", "region": "eu"}
    assert eu.taints == (Taint("dedicated", "general", "NoSchedule"),)
    assert (eu.provider, eu.os_family, eu.kubernetes_version) == (
        Provisioner.AWS,
        "amazonlinux2023",
        "1.30",
    )
    assert dict(eu.allocatable) == {"memory": "7220184Ki"}
    st_general = pools[("staging", "general")]
    assert st_general.instance_types == ("t3.large",)
    assert dict(st_general.labels) == {"team": "platform", "tier": "cheap"}  # merged by key
    assert pools[("staging", "canary")].min_size == 1  # a pool only this cluster has


def test_single_cluster_file_and_no_cluster_file():
    text = (
        "apiVersion: fleetwarden.io/v1alpha1\nkind: NodePools\ncluster: c1\n"
        "pools: {a: {minSize: 1}}\n"
    )
    (p,) = _pools(text)
    assert (p.cluster, p.name, p.min_size) == ("c1", "a", 1)
    (q,) = _pools(text.replace("cluster: c1\n", ""))
    assert q.cluster is None


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ("pools: {a: {minSize: -1}}", "pools.a.minSize", "less than the minimum"),
        ("pools: {a: {minSize: two}}", "pools.a.minSize", "not of type 'integer'"),
        ("pools: {a: {taints: [{key: k, effect: Always}]}}", "pools.a.taints.0.effect", "Always"),
        ("pools: {a: {instanceType: m5.large}}", "pools.a", "instanceType"),
        ("pools: {a: {minSize: 5, maxSize: 2}}", "pools.a", "larger than maxSize"),
        ("pools: {a: {osImage: Plan9}}", "pools.a.osImage", "unknown OS family"),
        ("pools: {}", "pools", "should be non-empty"),
        ("pools: {a: {}}\nclusters: {c: {pools: [b]}}", "clusters.c.pools", "unknown pool 'b'"),
        ("pools: {a: {}}\ncluster: x\nclusters: {c: {}}", "(top level)", "should not be valid"),
    ],
)
def test_schema_errors_name_the_field(body, field, reason):
    text = f"apiVersion: fleetwarden.io/v1alpha1\nkind: NodePools\n{body}\n"
    with pytest.raises(FormatError) as err:
        _pools(text)
    assert err.value.field == field
    assert reason in err.value.reason
    assert str(err.value).startswith("pools.yaml: ")


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "minSize",
                "maxSize",
                "labels",
                "taints",
                "instanceTypes",
                "osImage",
                "allocatable",
                "bogus",
            ]
        ),
        st.one_of(
            st.none(),
            st.integers(-3, 50),
            st.text(max_size=5),
            st.lists(st.text(max_size=3), max_size=2),
            st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
        ),
        max_size=4,
    )
)
def test_any_pool_body_gives_specs_or_a_format_error(pool):
    from fleetwarden.formats.documents import Document

    doc = Document(
        "p.yaml", 0, {"apiVersion": native.API_VERSION, "kind": native.KIND, "pools": {"a": pool}}
    )
    try:
        native.read_pools([doc])
    except FormatError as exc:
        assert exc.path == "p.yaml"
