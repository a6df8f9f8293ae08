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
from fleetwarden.formats.errors import FormatError
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


# -- AKS: a dynamic default_node_pool ------------------------------------------------------------

AKS_DYNAMIC = """\
resource "azurerm_kubernetes_cluster" "aks" {
  name       = "prod"
  dns_prefix = "prod"
  dynamic "default_node_pool" {
    for_each = %s
    content {
      name       = "system"
      vm_size    = "Standard_D2s_v5"
      node_count = 2
    }
  }
}

resource "azurerm_kubernetes_cluster_node_pool" "user" {
  name                  = "user"
  kubernetes_cluster_id = azurerm_kubernetes_cluster.aks.id
  vm_size               = "Standard_D4s_v5"
  node_count            = 1
}
"""


def test_aks_dynamic_default_node_pool_is_read_with_its_existence_unresolved():
    """The Azure/aks module's own shape: ``for_each`` on a variable decides whether the
    block exists; the pool is read from ``content``, never dropped beside another pool."""
    specs = {s.name: s for s in _specs(AKS_DYNAMIC % 'var.autoscale ? [] : ["manual"]')}
    assert sorted(specs) == ["system", "user"]
    system = specs["system"]
    assert (system.cluster, system.instance_types, system.desired_size) == (
        "prod",
        ("Standard_D2s_v5",),
        2,
    )
    assert "count" in system.unresolved_fields


@pytest.mark.parametrize(("each", "names"), [("[]", ["user"]), ('["one"]', ["system", "user"])])
def test_aks_dynamic_default_node_pool_with_a_literal_for_each(each, names):
    specs = _specs(AKS_DYNAMIC % each)
    assert sorted(s.name for s in specs) == names
    assert all("count" not in s.unresolved_fields for s in specs)


def test_aks_dynamic_default_node_pool_drift_is_found():
    nodes = [
        node(
            f"aks-system-1234-vmss00000{i}",
            labels={"kubernetes.azure.com/agentpool": "system"},
            instance_type="Standard_D2s_v5",
            os_image="Ubuntu 22.04.5 LTS",
            disk_gib=128,
        )
        for i in range(3)
    ]
    found = _findings(AKS_DYNAMIC % '["one"]', "prod", nodes)
    assert ("system", "nodeCount", 2, 3) in found


def test_aks_azurerm_1x_agent_pool_profile_is_named_not_silently_skipped():
    text = (
        'resource "azurerm_kubernetes_cluster" "aks" {\n  name = "prod"\n'
        '  agent_pool_profile {\n    name = "default"\n    count = 2\n  }\n}\n'
    )
    read = read_desired([SourceFile("infra/main.tf", text.encode())])
    assert read.pools == []
    assert "agent_pool_profile is azurerm 1.x" in str(read.skipped)


_HCL_VALUES = st.sampled_from(
    [
        "[]",
        '["a"]',
        '["a", "b"]',
        "{}",
        "{ a = 1 }",
        "1",
        '"x"',
        "true",
        "null",
        "var.x",
        "local.y",
        "[var.x]",
        "{ for k in var.m : k => k }",
        '"${var.x}"',
        "[[]]",
    ]
)


@given(each=_HCL_VALUES, count=_HCL_VALUES)
def test_aks_dynamic_default_node_pool_with_odd_values_raises_only_format_errors(each, count):
    text = AKS_DYNAMIC.replace("node_count = 2", f"node_count = {count}") % each
    try:
        _specs(text)
    except FormatError as exc:
        assert "infra/main.tf" in str(exc)


# -- GKE: a dynamic node_pool of google_container_cluster ----------------------------------------

GKE_DYNAMIC = """\
resource "google_container_cluster" "c" {
  name     = "prod"
  location = "europe-west1-b"
  dynamic "node_pool" {
    for_each = %s
    content {
      name       = %s
      node_count = 2
      node_config {
        machine_type = "n2-standard-4"
      }
    }
  }
}
"""


def test_gke_dynamic_node_pool_is_read_with_its_name_and_count_unresolved():
    (spec,) = _specs(GKE_DYNAMIC % ("var.pools", "node_pool.value.name"))
    assert {"count", "name"} <= spec.unresolved_fields
    assert (spec.instance_types, spec.desired_size) == (("n2-standard-4",), 2)


def test_gke_dynamic_node_pool_with_a_literal_name_is_compared():
    text = GKE_DYNAMIC % ('["one"]', '"general"')
    (spec,) = _specs(text)
    assert spec.name == "general" and "count" not in spec.unresolved_fields
    nodes = [
        node(
            f"gke-prod-general-{i}",
            labels={"cloud.google.com/gke-nodepool": "general"},
            instance_type="e2-medium",
            os_image=COS,
            disk_gib=100,
        )
        for i in range(2)
    ]
    assert [f[:3] for f in _findings(text, "prod", nodes)] == [
        ("general", "instanceType", "n2-standard-4")
    ]


def test_gke_dynamic_node_pool_with_an_empty_for_each_makes_no_pool_and_no_default_pool():
    assert _specs(GKE_DYNAMIC % ("[]", '"general"')) == []


@given(each=_HCL_VALUES, name=_HCL_VALUES)
def test_gke_dynamic_node_pool_with_odd_values_raises_only_format_errors(each, name):
    try:
        _specs(GKE_DYNAMIC % (each, name))
    except FormatError as exc:
        assert "infra/main.tf" in str(exc)
