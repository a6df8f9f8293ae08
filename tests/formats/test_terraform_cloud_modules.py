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
    spec = _by_name(_specs(GKE_MODULE_NO_POOLS % sub))["default-node-pool"]
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
    spec = _by_name(_specs(text))["default-node-pool"]
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
    assert [s.name for s in _specs(text)] == ["general", "default-pool"]


def _by_name(specs: list[NodePoolSpec]) -> dict[str, NodePoolSpec]:
    return {s.name: s for s in specs}


# -- GKE: the module's own default-pool (cluster.tf node_pool block) ------------------------------


def _gke_module(sub: str = "", version: str = "~> 44.0", **inputs: str) -> str:
    lines = "".join(f"  {k} = {v}\n" for k, v in inputs.items())
    return (
        (GKE_MODULE_NO_POOLS % sub)
        .replace('"~> 44.0"', f'"{version}"')
        .replace("}\n", lines + "}\n")
    )


def _pool_nodes(pool: str, count: int, machine: str = "e2-medium") -> list[dict[str, Any]]:
    labels = {"cloud.google.com/gke-nodepool": pool}
    return [
        node(f"{pool}-{i}", labels=dict(labels), instance_type=machine, os_image=COS, disk_gib=100)
        for i in range(count)
    ]


@pytest.mark.parametrize(
    "sub",
    [
        "",
        "//modules/private-cluster",
        "//modules/beta-public-cluster",
        "//modules/beta-private-cluster-update-variant",
    ],
)
def test_gke_module_keeps_its_default_pool_with_initial_node_count_per_zone(sub):
    """cluster.tf (v5-v44): the cluster's ``node_pool { name = "default-pool" }`` with
    ``initial_node_count`` (variables.tf: 0) nodes per zone, removed only by
    ``remove_default_node_pool`` (default false); no labels, GKE's 100 GB disk."""
    default = _by_name(_specs(_gke_module(sub)))["default-pool"]
    assert (default.desired_size, default.min_size, default.max_size) == (0, None, None)
    assert default.provenance["desiredSize"].endswith("v44: initial_node_count 0")
    assert (default.instance_types, default.disk_size_gib, default.os_family) == (
        ("e2-medium",),
        100,
        "cos",
    )
    assert (default.labels, default.taints, default.name_prefix) == ({}, (), None)
    assert default.cluster == "prod"
    two = _by_name(_specs(_gke_module(sub, initial_node_count="2")))["default-pool"]
    assert two.desired_size == 2  # one zone
    assert all(a.status.value != "unaccounted" for a in two.account)


@pytest.mark.parametrize(
    ("sub", "inputs"),
    [
        ("", {"remove_default_node_pool": "true"}),
        ("//modules/private-cluster", {"remove_default_node_pool": '"true"'}),
        ("//modules/safer-cluster", {}),  # remove_default_node_pool = true in its main.tf
        ("//modules/safer-cluster-update-variant", {"initial_node_count": "3"}),
    ],
)
def test_gke_module_default_pool_is_gone_when_removed(sub, inputs):
    assert "default-pool" not in _by_name(_specs(_gke_module(sub, **inputs)))


def test_gke_module_default_pool_whose_removal_is_not_known_is_unresolved():
    default = _by_name(_specs(_gke_module(remove_default_node_pool="var.remove")))["default-pool"]
    assert ("count", "var.remove") in [(u.field, u.expression) for u in default.unresolved]


def test_gke_module_default_pool_nodes_are_compared_not_an_unknown_pool():
    """Its nodes were reported as a pool missing from the desired state; now they are
    compared: the head pool's machine type (v17.2+), the count from initial_node_count."""
    text = _gke_module(
        initial_node_count="2",
        node_pools='[{ name = "general", machine_type = "n2-standard-4", autoscaling = false }]',
    )
    nodes = _pool_nodes("default-pool", 2, "n2-standard-4")
    assert [f for f in _findings(text, "prod", nodes) if f[0] != "general"] == []
    nodes += _pool_nodes("default-pool", 1, "e2-small")
    nodes[-1]["metadata"]["name"] = "default-pool-2"
    assert sorted(f for f in _findings(text, "prod", nodes) if f[0] == "default-pool") == [
        ("default-pool", "instanceType", "n2-standard-4", "e2-small"),
        ("default-pool", "nodeCount", 2, 3),
    ]


@pytest.mark.parametrize(
    ("version", "machine", "image"),
    [
        ("~> 44.0", "n2-standard-4", "ubuntu"),  # node_pools[0]'s (v17.2+)
        ("~> 18.0", "n2-standard-4", "ubuntu"),
        ("~> 16.0", "e2-medium", "cos"),  # before v17.2 the block sets neither: GKE's
        ("~> 17.0", None, None),  # 17.0-17.1 or 17.2+: not compared
    ],
)
def test_gke_module_default_pool_takes_the_head_pools_machine_from_v17_2(version, machine, image):
    head = '[{ name = "a", machine_type = "n2-standard-4", image_type = "UBUNTU_CONTAINERD" }]'
    default = _by_name(_specs(_gke_module(version=version, node_pools=head)))["default-pool"]
    assert default.instance_types == ((machine,) if machine else ())
    if image is None:
        assert default.os_family is None
    else:
        assert default.os_family is not None and default.os_family.startswith(image)


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


# -- AKS: the Azure/aks/azurerm module ------------------------------------------------------------

AKS_MODULE = """\
module "aks" {
  source              = "Azure/aks/azurerm"
  version             = "%s"
  prefix              = "prod"
  resource_group_name = var.resource_group_name
  agents_labels       = { team = "core" }
  agents_type         = "VirtualMachineScaleSets"
  agents_tags         = { env = "prod" }
  node_pools = {
    batch = {
      name           = "batch"
      vm_size        = "Standard_D4s_v5"
      node_count     = 1
      node_labels    = { role = "batch" }
      vnet_subnet    = { id = var.subnet_id }
    }
  }
}
"""


def _aks_nodes(batch: str = "batch1a2b") -> list[dict[str, Any]]:
    """As the module creates them: nodepool, 2 Standard_D2s_v3 nodes with a 50 GB OS disk;
    batch (v7+: with 4 generated characters), 1 Standard_D4s_v5 of 128 GB."""
    ubuntu = "Ubuntu 22.04.5 LTS"
    out = [
        node(
            f"aks-nodepool-1234-vmss00000{i}",
            labels={"kubernetes.azure.com/agentpool": "nodepool", "team": "core"},
            instance_type="Standard_D2s_v3",
            os_image=ubuntu,
            disk_gib=50,
        )
        for i in range(2)
    ]
    out.append(
        node(
            f"aks-{batch}-5678-vmss000000",
            labels={"kubernetes.azure.com/agentpool": batch, "role": "batch"},
            instance_type="Standard_D4s_v5",
            os_image=ubuntu,
            disk_gib=128,
        )
    )
    return out


def test_aks_module_pools_with_the_module_defaults():
    specs = {s.name: s for s in _specs(AKS_MODULE % "~> 11.0")}
    assert sorted(specs) == ["batch", "nodepool"]
    default = specs["nodepool"]
    assert (default.cluster, default.instance_types, default.desired_size) == (
        "prod-aks",
        ("Standard_D2s_v3",),
        2,
    )
    assert default.disk_size_gib == 50
    assert default.provenance["desiredSize"].startswith("default: Azure/aks/azurerm")
    assert specs["batch"].name_prefix == "batch"


def test_aks_module_nodes_as_the_module_creates_them_match():
    assert _findings(AKS_MODULE % "~> 11.0", "prod-aks", _aks_nodes()) == []


def test_aks_module_drift_from_a_module_default_is_found():
    nodes = _aks_nodes()
    nodes[0]["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "Standard_D8s_v5"
    found = _findings(AKS_MODULE % "~> 11.0", "prod-aks", nodes)
    assert found == [("nodepool", "instanceType", "Standard_D2s_v3", "Standard_D8s_v5")]


def test_aks_module_v6_names_node_pools_exactly():
    assert _findings(AKS_MODULE % "~> 6.8", "prod-aks", _aks_nodes(batch="batch")) == []
    (batch,) = [s for s in _specs(AKS_MODULE % "~> 6.8") if s.name == "batch"]
    assert batch.name_prefix is None


def test_aks_module_create_before_destroy_false_keeps_the_name():
    text = (AKS_MODULE % "~> 11.0").replace(
        'name           = "batch"', 'name = "batch"\n      create_before_destroy = false'
    )
    (batch,) = [s for s in _specs(text) if s.name == "batch"]
    assert batch.name_prefix is None


def test_aks_module_autoscaling_reads_min_and_max():
    text = (AKS_MODULE % "~> 9.0").replace(
        "  agents_tags",
        "  enable_auto_scaling = true\n  agents_min_count = 1\n"
        "  agents_max_count = 5\n  agents_count = 3\n  agents_tags",
    )
    (default,) = [s for s in _specs(text) if s.name == "nodepool"]
    assert (default.min_size, default.max_size, default.desired_size) == (1, 5, None)


def test_aks_module_node_pools_that_cannot_be_read_are_listed_not_dropped():
    text = (AKS_MODULE % "~> 11.0").split("  node_pools = {")[0] + "  node_pools = local.pools\n}\n"
    specs = {s.name: s for s in _specs(text)}
    assert sorted(specs) == ["node_pools", "nodepool"]
    unknown = specs["node_pools"]  # not compared, and a scan lists it as skipped
    assert [(u.field, u.expression) for u in unknown.unresolved] == [("name", "local.pools")]


def test_aks_module_called_by_a_local_path_with_agents_inputs_is_read():
    text = (AKS_MODULE % "~> 11.0").replace('"Azure/aks/azurerm"', '"../.."')
    assert sorted(s.name for s in _specs(text)) == ["batch", "nodepool"]


def test_aks_module_every_input_of_its_pools_is_accounted_for():
    for spec in _specs(AKS_MODULE % "~> 11.0"):
        assert all(a.status.value != "unaccounted" for a in spec.account), spec.name


@given(
    key=st.sampled_from(
        [
            "agents_count",
            "agents_size",
            "agents_labels",
            "agents_pool_name",
            "os_disk_size_gb",
            "enable_auto_scaling",
            "agents_taints",
            "cluster_name",
            "prefix",
            "node_pools",
            "only_critical_addons_enabled",
            "os_sku",
            "version",
        ]
    ),
    value=_HCL_VALUES,
)
def test_aks_module_with_odd_values_raises_only_format_errors(key, value):
    text = (AKS_MODULE % "~> 11.0").replace("  agents_tags", f"  {key} = {value}\n  agents_tags")
    try:
        _specs(text)
    except FormatError as exc:
        assert "infra/main.tf" in str(exc)


# -- GKE: the gke-node-pool sub-module (v38+) ------------------------------------------------------

GKE_NODE_POOL = """\
resource "google_container_cluster" "primary" {
  name                     = "prod"
  location                 = "europe-west1-b"
  remove_default_node_pool = true
  initial_node_count       = 1
}

module "pool" {
  source     = "terraform-google-modules/kubernetes-engine/google//modules/gke-node-pool"
  version    = "~> 44.0"
  project_id = var.project_id
  location   = "europe-west1-b"
  cluster    = google_container_cluster.primary.name
  name       = "pool-a"
%s}
"""


def _node_pool_module(extra: str = "") -> NodePoolSpec:
    (spec,) = _specs(GKE_NODE_POOL % extra)
    return spec


def test_gke_node_pool_sub_module_is_read_with_its_variables_defaults():
    """variables.tf (v38-v44): autoscaling 1..100 per zone, node_count 1, node_config
    e2-medium / 100 GB / COS_CONTAINERD, auto-upgrade on; provenance names the sub-module."""
    spec = _node_pool_module()
    assert (spec.name, spec.cluster) == ("pool-a", "prod")
    assert (spec.min_size, spec.max_size, spec.desired_size) == (1, 100, 1)
    assert (spec.instance_types, spec.disk_size_gib, spec.os_family) == (
        ("e2-medium",),
        100,
        "cos",
    )
    assert spec.kubernetes_version is None and spec.labels == {}
    for fact in ("minSize", "instanceTypes", "diskSizeGiB"):
        assert "gke-node-pool v44" in spec.provenance[fact], fact
    assert all(a.status.value != "unaccounted" for a in spec.account)


def test_gke_node_pool_sub_module_reads_what_it_is_given():
    spec = _node_pool_module(
        """  autoscaling = null
  node_count  = 3
  node_locations = ["europe-west1-b", "europe-west1-c"]
  max_pods_per_node = 64
  management = { auto_upgrade = false }
  kubernetes_version = "1.30.5-gke.1014001"
  node_config = {
    machine_type    = "n2-standard-8"
    image_type      = "UBUNTU_CONTAINERD"
    spot            = true
    labels          = { team = "data" }
    taint           = [{ key = "dedicated", value = "data", effect = "NO_SCHEDULE" }]
    service_account = var.sa
  }
"""
    )
    assert (spec.min_size, spec.max_size, spec.desired_size) == (None, None, 6)  # 3 x 2 zones
    assert spec.instance_types == ("n2-standard-8",)
    assert spec.disk_size_gib == 100 and spec.provenance["diskSizeGiB"].startswith(
        "default: Google provider"  # an object in its place: GKE's default, not the module's
    )
    assert spec.os_family is not None and spec.os_family.startswith("ubuntu")
    assert spec.labels == {"team": "data", "cloud.google.com/gke-spot": "true"}
    assert [(t.key, t.value, t.effect) for t in spec.taints] == [
        ("dedicated", "data", "NoSchedule")
    ]
    assert spec.allocatable == {"pods": "64"}
    assert spec.kubernetes_version == "1.30.5-gke.1014001"
    assert all(a.status.value != "unaccounted" for a in spec.account)


def test_gke_node_pool_sub_module_total_limits_win_over_per_zone_ones():
    spec = _node_pool_module(
        "  autoscaling = { total_min_node_count = 2, total_max_node_count = 9, "
        "min_node_count = 1 }\n"
    )
    assert (spec.min_size, spec.max_size) == (2, 9)
    assert all(a.status.value != "unaccounted" for a in spec.account)


def test_gke_node_pool_sub_module_nodes_match_and_drift_is_found():
    text = GKE_NODE_POOL % ""
    assert _findings(text, "prod", _pool_nodes("pool-a", 2)) == []
    drifted = _pool_nodes("pool-a", 2, "n2-standard-4")
    assert _findings(text, "prod", drifted) == [
        ("pool-a", "instanceType", "e2-medium", "n2-standard-4")
    ]


def test_gke_node_pool_sub_module_node_config_that_is_not_known_is_not_defaulted():
    """``node_config = var.nodes`` may set any machine, disk or image: e2-medium, 100 GB and
    COS would be guesses (they were asserted, and the input was left unaccounted)."""
    spec = _node_pool_module("  node_config = var.nodes\n")
    assert (spec.instance_types, spec.disk_size_gib, spec.os_family) == ((), None, None)
    unresolved = {u.field for u in spec.unresolved if u.expression == "var.nodes"}
    assert {"instanceTypes", "diskSizeGiB", "osImage", "labels", "taints"} <= unresolved
    assert all(a.status.value != "unaccounted" for a in spec.account)


def test_gke_node_pool_sub_module_object_inputs_from_known_locals_are_read_in_place():
    text = (GKE_NODE_POOL % "  node_config = local.nodes\n  autoscaling = local.scaling\n") + (
        'locals {\n  nodes   = { machine_type = "c3-standard-4" }\n'
        "  scaling = { total_min_node_count = 2, total_max_node_count = 6 }\n}\n"
    )
    (spec,) = _specs(text)
    assert spec.instance_types == ("c3-standard-4",)
    assert (spec.min_size, spec.max_size) == (2, 6)
    assert all(a.status.value != "unaccounted" for a in spec.account)


def test_gke_node_pool_sub_module_autoscaling_that_is_not_known_leaves_limits_unresolved():
    spec = _node_pool_module("  autoscaling = var.scaling\n")
    assert (spec.min_size, spec.max_size, spec.desired_size) == (None, None, 1)
    unresolved = {(u.field, u.expression) for u in spec.unresolved}
    assert {("minSize", "var.scaling"), ("maxSize", "var.scaling")} <= unresolved
    assert all(a.status.value != "unaccounted" for a in spec.account)


def _refusal(text: str) -> str:
    """Why the file is not read (a directory's file that cannot be read is a problem skip)."""
    read = read_desired([SourceFile("infra/main.tf", text.encode())])
    (skip,) = read.skipped
    assert skip.problem and read.pools == []
    return skip.reason


def test_gke_node_pool_sub_module_initial_node_count_needs_node_count_null():
    """The Google provider refuses initial_node_count beside a non-zero node_count, which the
    module passes (default 1)."""
    reason = _refusal(GKE_NODE_POOL % "  initial_node_count = 2\n")
    assert reason.startswith("module.pool.initial_node_count: ")
    assert "node_count = null" in reason
    spec = _node_pool_module("  initial_node_count = 2\n  node_count = null\n")
    assert spec.desired_size == 2


def test_gke_node_pool_sub_module_before_v38_does_not_exist():
    reason = _refusal((GKE_NODE_POOL % "").replace("~> 44.0", "~> 37.0"))
    assert reason == "module.pool.version: the gke-node-pool sub-module exists from v38, not v37"


# -- AKS: the module called by a local path ------------------------------------------------------

AKS_LOCAL = """\
module "aks" {
  source              = "../.."
  prefix              = "prod"
  resource_group_name = var.resource_group_name
  location            = var.location
  rbac_aad_tenant_id  = var.tenant_id
%s}
"""


def test_aks_module_called_by_a_local_path_without_agents_inputs_is_read():
    """Its own examples (named_cluster, with_acr, multiple_node_pools ...) call it as ../..
    without any agents_* input: every input is one the module declares."""
    (spec,) = _specs(AKS_LOCAL % "")
    assert (spec.name, spec.cluster, spec.desired_size) == ("nodepool", "prod-aks", 2)


@pytest.mark.parametrize("extra", ['  team = "payments"\n', ""])
def test_a_local_module_with_an_input_of_its_own_is_not_taken_for_the_aks_module(extra):
    text = (AKS_LOCAL % extra).replace('"../.."', '"../modules/aks"')
    if extra:  # an input Azure/aks/azurerm does not declare: another module
        assert _specs(text) == []
    else:
        assert [s.name for s in _specs(text)] == ["nodepool"]


def test_the_called_directory_decides_when_its_files_are_read():
    """A local module whose directory is among the files read is Azure/aks/azurerm when it
    declares the module's variables, whatever inputs the call gives."""
    module_vars = "".join(
        f'variable "{v}" {{}}\n' for v in ("prefix", "resource_group_name", "agents_size")
    )
    wrapper_vars = 'variable "prefix" {}\nvariable "resource_group_name" {}\n'
    caller = (AKS_LOCAL % '  agents_count = 3\n  extra_input = "x"\n').encode()
    module_files = [
        SourceFile("repo/variables.tf", module_vars.encode()),
        SourceFile("repo/examples/basic/main.tf", caller),
    ]
    pools = read_desired(module_files).pools
    assert [(s.name, s.desired_size) for s in pools if s.source.endswith("main.tf")] == [
        ("nodepool", 3)
    ]
    wrapper_files = [
        SourceFile("repo/variables.tf", wrapper_vars.encode()),
        SourceFile("repo/examples/basic/main.tf", caller),
    ]
    assert read_desired(wrapper_files).pools == []
