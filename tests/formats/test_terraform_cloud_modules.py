"""Terraform: pools that GKE and AKS modules create though the file does not list them.

Each module's own defaults (its ``variables.tf``) are desired values: a module call that states
no pool still creates one, and silence about it would read as "no drift".
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.diffing import diff_cluster
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.formats.desired import SourceFile, read_desired
from fleetwarden.formats.terraform.sources import gke_module_kind
from tests.support.nodes import node, observed

COS = "Container-Optimized OS from Google"


def _specs(text: str) -> list[NodePoolSpec]:
    return read_desired([SourceFile("infra/main.tf", text.encode())]).pools


def _findings(text: str, cluster: str, nodes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    found = diff_cluster(cluster, _specs(text), observed(*nodes)).findings
    return [(f.pool, f.field, f.expected, f.actual) for f in found]


# -- GKE: the kubernetes-engine module without node_pools ------------------------------------------

GKE_MODULE_NO_POOLS = """\
module "gke" {
  source     = "terraform-google-modules/kubernetes-engine/google%s"
  version    = "~> 44.0"
  project_id = var.project_id
  name       = "prod"
  regional   = false
  zones      = ["europe-west1-b"]
}
"""


def _default_pool_nodes(count: int = 1, suffix: str = "") -> list[dict[str, Any]]:
    """As the module creates them: its labels name the pool; GKE's may add a suffix."""
    pool = "default-node-pool"
    labels = {"cloud.google.com/gke-nodepool": pool + suffix, "cluster_name": "prod"}
    labels["node_pool"] = pool
    return [
        node(f"n-{i}", labels=dict(labels), instance_type="e2-medium", os_image=COS, disk_gib=100)
        for i in range(count)
    ]


@pytest.mark.parametrize(
    "sub",
    ["", "//modules/private-cluster", "//modules/beta-public-cluster", "//modules/safer-cluster"],
)
def test_gke_module_without_node_pools_creates_its_default_node_pool(sub):
    """variables.tf (v5-v44): ``node_pools`` defaults to ``[{ name = "default-node-pool" }]``."""
    (spec,) = _specs(GKE_MODULE_NO_POOLS % sub)
    assert spec.name == "default-node-pool"
    assert spec.instance_types == ("e2-medium",)
    assert (spec.min_size, spec.max_size, spec.disk_size_gib) == (1, 100, 100)
    assert spec.provenance["name"].startswith("default: terraform-google-modules")


def test_gke_module_default_node_pool_nodes_match_and_drift_is_found():
    text = GKE_MODULE_NO_POOLS % ""
    assert _findings(text, "prod", _default_pool_nodes()) == []
    drifted = _default_pool_nodes()
    drifted[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "n2-standard-4"
    assert _findings(text, "prod", drifted) == [
        ("default-node-pool", "instanceType", "e2-medium", "n2-standard-4")
    ]


def test_gke_update_variant_default_node_pool_carries_the_random_suffix():
    text = GKE_MODULE_NO_POOLS % "//modules/private-cluster-update-variant"
    (spec,) = _specs(text)
    assert spec.name_prefix == "default-node-pool-"
    assert _findings(text, "prod", _default_pool_nodes(suffix="-3f2a")) == []


@pytest.mark.parametrize(
    "sub",
    [
        "//modules/gke-autopilot-cluster",
        "//modules/beta-autopilot-private-cluster",
        "//modules/workload-identity",
        "//modules/auth",
    ],
)
def test_gke_sub_modules_without_a_node_pools_list_get_no_default_pool(sub):
    assert _specs(GKE_MODULE_NO_POOLS % sub) == []


def test_gke_module_stated_node_pools_replace_the_default():
    text = (GKE_MODULE_NO_POOLS % "").replace("}\n", '  node_pools = [{ name = "general" }]\n}\n')
    assert [s.name for s in _specs(text)] == ["general"]


_POOL_LIST = [
    "",
    "private-cluster",
    "beta-private-cluster",
    "beta-public-cluster",
    "safer-cluster",
    "safer-cluster-update-variant",
    "private-cluster-update-variant",
    "beta-private-cluster-update-variant",
    "public-cluster-update-variant",
    "beta-public-cluster-update-variant",
]
_SUB = st.sampled_from(_POOL_LIST) | st.from_regex(r"[a-z][a-z0-9-]{0,30}", fullmatch=True)


@given(
    sub=_SUB,
    form=st.sampled_from(
        [
            "terraform-google-modules/kubernetes-engine/google{}",
            "git::https://github.com/terraform-google-modules/terraform-google-kubernetes-engine"
            ".git{}?ref=v40.0.0",
            "github.com/terraform-google-modules/terraform-google-kubernetes-engine{}",
        ]
    ),
    slash=st.booleans(),
)
def test_gke_module_kind_is_pools_exactly_for_the_node_pools_list_modules(sub, form, slash):
    path = f"//modules/{sub}" + ("/" if slash else "") if sub else ""
    kind = gke_module_kind({"source": form.format(path)})
    assert kind == ("pools" if sub in _POOL_LIST else "other")


@given(st.text(max_size=60))
def test_gke_module_kind_of_any_source_is_a_kind_or_none(source):
    assert gke_module_kind({"source": source}) in ("pools", "other", None)
