"""Terraform: the defaults the provisioner applies are desired values (issue #10).

The false-negative set: for each provisioner (aws_eks_node_group, terraform-aws-eks v20 and
v21, GKE node pools and the kubernetes-engine module, AKS), nodes exactly as it creates them
give no finding, and one drift per default gives exactly that finding, with a ``default:``
provenance. Then how each default is chosen (module major, launch template, zones, vCPUs ...).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.core.diffing import diff_cluster
from fleetwarden.core.pools import FieldStatus, NodePoolSpec, Taint
from fleetwarden.formats.desired import SourceFile, read_desired
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.provisioners import Assumed
from fleetwarden.formats.terraform.aks import vcpus_of
from fleetwarden.formats.terraform.eks_majors import constraint_majors, majors_of
from tests.support.nodes import node, observed

Nodes = list[dict[str, Any]]
Change = Callable[[Nodes], Nodes]


def _specs(text: str, assume: Assumed | None = None) -> list[NodePoolSpec]:
    return read_desired([SourceFile("infra/main.tf", text.encode())], assume=assume).pools


def _spec(text: str, name: str, assume: Assumed | None = None) -> NodePoolSpec:
    found = {s.name: s for s in _specs(text, assume)}
    assert name in found, sorted(found)
    return found[name]


def _findings(text: str, cluster: str, nodes: Nodes) -> list[tuple[str | None, str, Any]]:
    specs = _specs(text)
    found = diff_cluster(cluster, specs, observed(*nodes)).findings
    return [(f.pool, f.field, f.expected) for f in found]


# -- changes to the nodes ---------------------------------------------------------------------


def _on(name: str, change: Callable[[dict[str, Any]], None]) -> Change:
    def apply(nodes: Nodes) -> Nodes:
        for n in nodes:
            if n["metadata"]["name"] == name:
                change(n)
        return nodes

    return apply


def _label(key: str, value: str | None) -> Callable[[dict[str, Any]], None]:
    def change(n: dict[str, Any]) -> None:
        if value is None:
            n["metadata"]["labels"].pop(key, None)
        else:
            n["metadata"]["labels"][key] = value

    return change


def _os(image: str) -> Callable[[dict[str, Any]], None]:
    return lambda n: n["status"]["nodeInfo"].__setitem__("osImage", image)


def _disk(gib: int) -> Callable[[dict[str, Any]], None]:
    return lambda n: n["status"]["capacity"].__setitem__(
        "ephemeral-storage", f"{int(gib * 0.96 * 2**20)}Ki"
    )


def _no_taints(n: dict[str, Any]) -> None:
    n["spec"]["taints"] = []


def _more(count: int, like: str) -> Change:
    def apply(nodes: Nodes) -> Nodes:
        model = next(n for n in nodes if n["metadata"]["name"] == like)
        for i in range(count):
            extra = copy.deepcopy(model)
            extra["metadata"]["name"] = f"{like}-extra-{i}"
            nodes.append(extra)
        return nodes

    return apply


def _without(*names: str) -> Change:
    return lambda nodes: [n for n in nodes if n["metadata"]["name"] not in names]


def _check_drift(
    text: str, cluster: str, nodes: Nodes, change: Change, pool: str, field: str, expected: Any
) -> None:
    specs = _specs(text)
    found = diff_cluster(cluster, specs, observed(*change(nodes))).findings
    assert [(f.pool, f.field, f.expected) for f in found] == [(pool, field, expected)]
    assert "default: " in (found[0].provenance or ""), found[0].provenance


# -- aws_eks_node_group: the EKS API's defaults -------------------------------------------------

EKS_NODE_GROUP = """\
resource "aws_eks_node_group" "ng" {
  cluster_name    = "prod"
  node_group_name = "ng"
  version         = "1.31"
  node_role_arn   = aws_iam_role.node.arn
  subnet_ids      = var.subnets
  scaling_config {
    min_size     = 2
    max_size     = 4
    desired_size = 2
  }
}
"""


def _eks_api_nodes() -> Nodes:
    """What EKS creates for EKS_NODE_GROUP: t3.medium AL2023 nodes, 20 GiB, ON_DEMAND."""
    labels = {"eks.amazonaws.com/nodegroup": "ng", "eks.amazonaws.com/capacityType": "ON_DEMAND"}
    return [
        node(f"ng-{i}", labels=dict(labels), instance_type="t3.medium", disk_gib=20)
        for i in range(2)
    ]


EKS_API_DRIFTS = [
    (
        "instance type",
        _on("ng-0", _label("node.kubernetes.io/instance-type", "m5.large")),
        "instanceType",
        "t3.medium",
    ),
    ("disk size", _on("ng-1", _disk(80)), "diskSize", 20),
    (
        "capacity type",
        _on("ng-1", _label("eks.amazonaws.com/capacityType", "SPOT")),
        "labels.eks.amazonaws.com/capacityType",
        "ON_DEMAND",
    ),
    (
        "AMI family",
        _on("ng-0", _os("Ubuntu 22.04.5 LTS")),
        "osImage",
        ["amazonlinux2023", "amazonlinux2"],
    ),
]


def test_eks_node_group_nodes_as_eks_creates_them_match_its_defaults():
    assert _findings(EKS_NODE_GROUP, "prod", _eks_api_nodes()) == []


def test_eks_node_group_during_an_update_the_eks_taint_is_tolerated():
    nodes = _eks_api_nodes()
    nodes[0]["spec"]["taints"] = [
        {"key": "eks.amazonaws.com/nodegroup", "value": "unschedulable", "effect": "NoSchedule"}
    ]
    assert _findings(EKS_NODE_GROUP, "prod", nodes) == []


@pytest.mark.parametrize(
    ("change", "field", "expected"),
    [d[1:] for d in EKS_API_DRIFTS],
    ids=[d[0] for d in EKS_API_DRIFTS],
)
def test_eks_node_group_drift_from_a_default_is_found(change, field, expected):
    _check_drift(EKS_NODE_GROUP, "prod", _eks_api_nodes(), change, "ng", field, expected)


@pytest.mark.parametrize(
    ("version", "families"),
    [
        ("1.29", ("amazonlinux2",)),
        ("1.31", ("amazonlinux2023", "amazonlinux2")),
        ("1.33", ("amazonlinux2023",)),
    ],
)
def test_eks_node_group_ami_default_follows_the_kubernetes_version(version, families):
    spec = _spec(EKS_NODE_GROUP.replace('"1.31"', f'"{version}"'), "ng")
    assert (spec.os_family, *spec.os_family_alternatives) == families


def test_eks_node_group_with_a_launch_template_takes_no_type_disk_or_ami_default():
    text = EKS_NODE_GROUP.replace(
        "  scaling_config {",
        "  launch_template {\n    id = aws_launch_template.x.id\n  }\n  scaling_config {",
    )
    spec = _spec(text, "ng")
    assert (spec.instance_types, spec.disk_size_gib, spec.os_family) == ((), None, None)
    assert {"instanceTypes", "diskSizeGiB", "osImage"} <= spec.unresolved_fields


def test_eks_node_group_windows_default_disk_is_50():
    text = EKS_NODE_GROUP.replace(
        '  version         = "1.31"\n', '  ami_type = "WINDOWS_CORE_2022_x86_64"\n'
    )
    spec = _spec(text, "ng")
    assert (spec.disk_size_gib, spec.os_family) == (50, "windows-2022")


# -- terraform-aws-eks v21: sub-module defaults --------------------------------------------------

EKS_V21 = """\
module "eks" {
  source             = "terraform-aws-modules/eks/aws"
  version            = "~> 21.0"
  name               = "prod"
  kubernetes_version = "1.31"
  vpc_id             = var.vpc_id

  eks_managed_node_groups = {
    general = {}
  }

  self_managed_node_groups = {
    workers = {
      cloudinit_pre_nodeadm = [{
        content_type = "application/node.eks.aws"
        content      = <<-EOT
          apiVersion: node.eks.aws/v1alpha1
          kind: NodeConfig
          spec:
            kubelet:
              flags:
                - --node-labels=node.kubernetes.io/pool=workers
        EOT
      }]
    }
  }
}
"""
SUFFIX = "-20240521093015123400000001"  # what the provider appends to a name prefix


def _eks_v21_nodes() -> Nodes:
    """v21 creates: general, 1 t3.medium AL2023 node (20 GiB AMI volume, ON_DEMAND); workers,
    1 m6i.large AL2023 node carrying the NodeConfig's label."""
    general = {
        "eks.amazonaws.com/nodegroup": "general" + SUFFIX,
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
    }
    return [
        node("general-0", labels=general, instance_type="t3.medium", disk_gib=20),
        node(
            "workers-0",
            labels={"node.kubernetes.io/pool": "workers"},
            instance_type="m6i.large",
            disk_gib=20,
        ),
    ]


EKS_V21_DRIFTS = [
    (
        "managed instance type",
        _on("general-0", _label("node.kubernetes.io/instance-type", "m5.large")),
        "general",
        "instanceType",
        "t3.medium",
    ),
    ("managed max size", _more(3, "general-0"), "general", "nodeCount", "1..3"),
    (
        "managed AMI",
        _on("general-0", _os("Amazon Linux 2")),
        "general",
        "osImage",
        "amazonlinux2023",
    ),
    ("managed disk", _on("general-0", _disk(80)), "general", "diskSize", 20),
    (
        "managed capacity",
        _on("general-0", _label("eks.amazonaws.com/capacityType", "SPOT")),
        "general",
        "labels.eks.amazonaws.com/capacityType",
        "ON_DEMAND",
    ),
    (
        "self-managed instance type",
        _on("workers-0", _label("node.kubernetes.io/instance-type", "m5.large")),
        "workers",
        "instanceType",
        "m6i.large",
    ),
    ("self-managed min size", _without("workers-0"), "workers", "nodeCount", "1..3"),
    (
        "self-managed AMI",
        _on("workers-0", _os("Bottlerocket OS 1.20.0 (aws-k8s-1.31)")),
        "workers",
        "osImage",
        "amazonlinux2023",
    ),
]


def test_eks_v21_nodes_as_the_module_creates_them_match_its_defaults():
    assert _findings(EKS_V21, "prod", _eks_v21_nodes()) == []


@pytest.mark.parametrize(
    ("change", "pool", "field", "expected"),
    [d[1:] for d in EKS_V21_DRIFTS],
    ids=[d[0] for d in EKS_V21_DRIFTS],
)
def test_eks_v21_drift_from_a_default_is_found(change, pool, field, expected):
    _check_drift(EKS_V21, "prod", _eks_v21_nodes(), change, pool, field, expected)


def test_eks_v21_provenance_names_the_major_and_how_it_was_found():
    spec = _spec(EKS_V21, "general")
    assert spec.provenance["minSize"].startswith(
        'default: terraform-aws-eks v21 (version "~> 21.0"): '
    )
    workers = _spec(EKS_V21, "workers")  # the label from the NodeConfig part: stated
    assert workers.provenance["labels.node.kubernetes.io/pool"] == "infra/main.tf:14"


# -- terraform-aws-eks v20: root-module fallbacks ------------------------------------------------

EKS_V20 = """\
module "eks" {
  source          = "terraform-aws-modules/eks/aws"
  version         = "~> 20.0"
  cluster_name    = "prod"
  cluster_version = "1.29"

  eks_managed_node_groups = {
    general = {
      desired_size = 2
    }
  }

  self_managed_node_groups = {
    workers = {
      bootstrap_extra_args = "--kubelet-extra-args '--node-labels=node.kubernetes.io/pool=workers'"
    }
  }
}
"""


def _eks_v20_nodes() -> Nodes:
    """v20 creates: general, 2 t3.medium AL2 nodes (EKS's default before 1.30) of 20 GiB;
    workers, 1 m6i.large AL2 node with the label from bootstrap_extra_args."""
    general = {
        "eks.amazonaws.com/nodegroup": "general" + SUFFIX,
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
    }
    al2 = "Amazon Linux 2"
    kubelet = "v1.29.10-eks-94953ac"
    return [
        *(
            node(
                f"general-{i}",
                labels=dict(general),
                instance_type="t3.medium",
                disk_gib=20,
                os_image=al2,
                kubelet=kubelet,
            )
            for i in range(2)
        ),
        node(
            "workers-0",
            labels={"node.kubernetes.io/pool": "workers"},
            instance_type="m6i.large",
            disk_gib=20,
            os_image=al2,
            kubelet=kubelet,
        ),
    ]


EKS_V20_DRIFTS = [
    (
        "managed max size (desired_size is only initial)",
        _more(2, "general-0"),
        "general",
        "nodeCount",
        "1..3",
    ),
    (
        "managed AMI",
        _on("general-1", _os("Amazon Linux 2023.6.20241010")),
        "general",
        "osImage",
        "amazonlinux2",
    ),
    ("self-managed max size", _more(3, "workers-0"), "workers", "nodeCount", "0..3"),
    (
        "self-managed instance type",
        _on("workers-0", _label("node.kubernetes.io/instance-type", "c5.large")),
        "workers",
        "instanceType",
        "m6i.large",
    ),
    (
        "self-managed AMI",
        _on("workers-0", _os("Amazon Linux 2023.6.20241010")),
        "workers",
        "osImage",
        "amazonlinux2",
    ),
    ("self-managed disk", _on("workers-0", _disk(50)), "workers", "diskSize", 20),
]


def test_eks_v20_nodes_as_the_module_creates_them_match_its_defaults():
    assert _findings(EKS_V20, "prod", _eks_v20_nodes()) == []


def test_eks_v20_a_self_managed_group_may_be_scaled_to_zero():
    """v18-v20 self-managed groups default to min 0: no nodes is only noted (info)."""
    nodes = _without("workers-0")(_eks_v20_nodes())
    found = diff_cluster("prod", _specs(EKS_V20), observed(*nodes)).findings
    assert [(f.pool, f.field, f.expected, f.severity.value) for f in found] == [
        ("workers", "nodeCount", "0..3", "info")
    ]


@pytest.mark.parametrize(
    ("change", "pool", "field", "expected"),
    [d[1:] for d in EKS_V20_DRIFTS],
    ids=[d[0] for d in EKS_V20_DRIFTS],
)
def test_eks_v20_drift_from_a_default_is_found(change, pool, field, expected):
    _check_drift(EKS_V20, "prod", _eks_v20_nodes(), change, pool, field, expected)


def test_a_group_stating_only_desired_size_is_not_an_exact_count():
    """The issue's example: desired_size = 5 alone is min 1 / max 3 (the module's), not 5."""
    spec = _spec(EKS_V20.replace("desired_size = 2", "desired_size = 5"), "general")
    assert (spec.min_size, spec.max_size, spec.desired_size) == (1, 3, 5)
    assert spec.provenance["desiredSize"] == "infra/main.tf:9"
    assert spec.provenance["maxSize"].startswith("default: terraform-aws-eks v20")


# -- GKE: google_container_node_pool -------------------------------------------------------------

GKE_RESOURCE = """\
resource "google_container_cluster" "c" {
  name                     = "prod"
  location                 = "europe-west1-b"
  node_locations           = ["europe-west1-c"]
  remove_default_node_pool = true
}

resource "google_container_node_pool" "p" {
  name       = "p"
  cluster    = google_container_cluster.c.name
  node_count = 1
}

resource "google_container_node_pool" "empty" {
  name    = "empty"
  cluster = google_container_cluster.c.name
  node_config {
    spot = true
  }
}
"""
COS = "Container-Optimized OS from Google"


def _gke_nodes() -> Nodes:
    """GKE creates for pool p: one e2-medium COS node of 100 GB in each of the 2 zones."""
    return [
        node(
            f"p-{i}",
            labels={"cloud.google.com/gke-nodepool": "p"},
            instance_type="e2-medium",
            os_image=COS,
            disk_gib=100,
            kubelet="v1.31.5-gke.1068000",
        )
        for i in range(2)
    ]


GKE_DRIFTS = [
    (
        "machine type",
        _on("p-0", _label("node.kubernetes.io/instance-type", "n2-standard-2")),
        "p",
        "instanceType",
        "e2-medium",
    ),
    ("disk size", _on("p-1", _disk(30)), "p", "diskSize", 100),
    ("image type", _on("p-0", _os("Ubuntu 22.04.5 LTS")), "p", "osImage", "cos"),
]


def test_gke_nodes_as_gke_creates_them_match_the_defaults():
    found = _findings(GKE_RESOURCE, "prod", _gke_nodes())
    assert found == []  # the empty pool is created with no node and has none: no finding


@pytest.mark.parametrize(
    ("change", "pool", "field", "expected"),
    [d[1:] for d in GKE_DRIFTS],
    ids=[d[0] for d in GKE_DRIFTS],
)
def test_gke_drift_from_a_default_is_found(change, pool, field, expected):
    text = GKE_RESOURCE.split('resource "google_container_node_pool" "empty"')[0]
    _check_drift(text, "prod", _gke_nodes(), change, pool, field, expected)


def test_gke_a_pool_without_counts_is_created_empty():
    spot = {"cloud.google.com/gke-nodepool": "empty", "cloud.google.com/gke-spot": "true"}
    nodes = [node("e-0", labels=spot, instance_type="e2-medium", os_image=COS, disk_gib=100)]
    found = diff_cluster("prod", _specs(GKE_RESOURCE), observed(*_gke_nodes(), *nodes)).findings
    assert [(f.pool, f.field, f.expected, f.actual) for f in found] == [
        ("empty", "nodeCount", 0, 1)
    ]
    assert "created empty" in (found[0].provenance or "")


def test_gke_zone_count_of_a_zonal_cluster_multiplies_per_zone_counts():
    spec = _spec(GKE_RESOURCE, "p")
    assert spec.desired_size == 2  # 1 per zone, the cluster's zone + 1 node location


def test_gke_regional_cluster_without_zones_leaves_the_count_open():
    text = GKE_RESOURCE.replace('"europe-west1-b"', '"europe-west1"').replace(
        '  node_locations           = ["europe-west1-c"]\n', ""
    )
    spec = _spec(text, "p")
    assert spec.desired_size is None
    assert "desiredSize" in spec.unresolved_fields


def test_gke_taints_gke_adds_itself_are_tolerated():
    text = GKE_RESOURCE.replace(
        "  node_count = 1\n",
        '  node_count = 1\n  node_config {\n    machine_type = "t2a-standard-1"\n  }\n',
    )
    nodes = _gke_nodes()
    for n in nodes:
        n["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "t2a-standard-1"
        n["spec"]["taints"] = [
            {"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"}
        ]
    found = diff_cluster("prod", _specs(text), observed(*nodes)).findings
    assert [f.pool for f in found] == []


@pytest.mark.parametrize(
    "block", ["ephemeral_storage_local_ssd_config", "ephemeral_storage_config"]
)
def test_gke_ephemeral_storage_on_local_ssds_leaves_a_stated_disk_size_uncompared(block):
    """The nodes' ephemeral storage is then the local SSDs: a stated boot disk size (once
    compared, reporting the SSDs' size as drift) is ignored with the reason, so is the block."""
    text = GKE_RESOURCE.replace(
        "  node_count = 1\n",
        f"  node_count = 1\n  node_config {{\n    disk_size_gb = 50\n"
        f"    {block} {{\n      local_ssd_count = 1\n    }}\n  }}\n",
    )
    spec = _spec(text, "p")
    assert spec.disk_size_gib is None
    reasons = {a.path: (a.status.value, a.detail) for a in spec.account}
    assert reasons["node_config[0].disk_size_gb"] == (
        "ignored",
        "ephemeral storage is on local SSDs: not compared",
    )
    assert reasons[f"node_config[0].{block}"][0] == "ignored"
    assert all(a.status.value != "unaccounted" for a in spec.account)


# -- GKE: the kubernetes-engine module ------------------------------------------------------------

GKE_MODULE = """\
module "gke" {
  source     = "terraform-google-modules/kubernetes-engine/google"
  version    = "~> 33.0"
  project_id = var.project_id
  name       = "prod"
  regional   = false
  zones      = [var.zone_a, var.zone_b]

  node_pools = [
    {
      name = "pool-01"
    },
    {
      name        = "fixed"
      autoscaling = false
    },
  ]
}
"""


def _gke_module_nodes() -> Nodes:
    """The module creates: pool-01, min 1 per zone (2 zones: 2 nodes); fixed, node_count 1 per
    zone (2 nodes); e2-medium COS 100 GB, with its cluster_name and node_pool labels."""
    out = []
    for pool in ("pool-01", "fixed"):
        labels = {"cloud.google.com/gke-nodepool": pool, "cluster_name": "prod", "node_pool": pool}
        out.extend(
            node(
                f"{pool}-{i}",
                labels=dict(labels),
                instance_type="e2-medium",
                os_image=COS,
                disk_gib=100,
            )
            for i in range(2)
        )
    return out


GKE_MODULE_DRIFTS = [
    (
        "machine type",
        _on("pool-01-0", _label("node.kubernetes.io/instance-type", "e2-standard-4")),
        "pool-01",
        "instanceType",
        "e2-medium",
    ),
    ("disk size", _on("pool-01-1", _disk(50)), "pool-01", "diskSize", 100),
    ("image type", _on("pool-01-0", _os("Ubuntu 22.04.5 LTS")), "pool-01", "osImage", "cos"),
    ("min count (1 per zone)", _without("pool-01-1"), "pool-01", "nodeCount", "2..200"),
    ("node_count (1 per zone)", _more(1, "fixed-0"), "fixed", "nodeCount", 2),
    (
        "node_pool label",
        _on("fixed-1", _label("node_pool", None)),
        "fixed",
        "labels.node_pool",
        "fixed",
    ),
    (
        "cluster_name label",
        _on("pool-01-0", _label("cluster_name", "staging")),
        "pool-01",
        "labels.cluster_name",
        "prod",
    ),
]


def test_gke_module_nodes_as_the_module_creates_them_match_its_defaults():
    assert _findings(GKE_MODULE, "prod", _gke_module_nodes()) == []


@pytest.mark.parametrize(
    ("change", "pool", "field", "expected"),
    [d[1:] for d in GKE_MODULE_DRIFTS],
    ids=[d[0] for d in GKE_MODULE_DRIFTS],
)
def test_gke_module_drift_from_a_default_is_found(change, pool, field, expected):
    _check_drift(GKE_MODULE, "prod", _gke_module_nodes(), change, pool, field, expected)


def test_gke_module_default_labels_can_be_switched_off():
    switches = "{ cluster_name = false, node_pool = false }"
    text = GKE_MODULE.replace(
        "  node_pools = [",
        f"  node_pools_labels = {{\n    default_values = {switches}\n  }}\n  node_pools = [",
    )
    assert dict(_spec(text, "pool-01").labels) == {}


def test_gke_module_regional_cluster_without_zones_leaves_counts_open():
    text = GKE_MODULE.replace("  regional   = false\n", "").replace(
        "  zones      = [var.zone_a, var.zone_b]\n", ""
    )
    spec = _spec(text, "pool-01")
    assert (spec.min_size, spec.max_size) == (None, None)
    assert {"minSize", "maxSize"} <= spec.unresolved_fields


@pytest.mark.parametrize(
    "source",
    [
        "terraform-google-modules/kubernetes-engine/google//modules/beta-private-cluster-update-variant",
        "terraform-google-modules/kubernetes-engine/google//modules/public-cluster-update-variant",
        "git::https://github.com/terraform-google-modules/terraform-google-kubernetes-engine.git"
        "//modules/private-cluster-update-variant?ref=v33.0.0",
        "../../modules/beta-public-cluster-update-variant",
    ],
)
def test_gke_update_variant_pools_are_matched_by_their_name_and_random_suffix(source):
    """The update-variant modules name each pool ``<name>-<4 hex>``; its nodes carry that
    name in ``cloud.google.com/gke-nodepool`` and the plain name in the ``node_pool`` label."""
    text = GKE_MODULE.replace('"terraform-google-modules/kubernetes-engine/google"', f'"{source}"')
    assert _spec(text, "pool-01").name_prefix == "pool-01-"
    nodes = _gke_module_nodes()
    for n in nodes:
        labels = n["metadata"]["labels"]
        labels["cloud.google.com/gke-nodepool"] += "-a1b2"
    assert _findings(text, "prod", nodes) == []


def test_gke_module_without_update_variant_names_pools_exactly():
    assert _spec(GKE_MODULE, "pool-01").name_prefix is None


# -- AKS ---------------------------------------------------------------------------------------

AKS = """\
resource "azurerm_kubernetes_cluster" "aks" {
  name       = "prod"
  dns_prefix = "prod"
  default_node_pool {
    name       = "system"
    vm_size    = "Standard_D2s_v5"
    node_count = 2
  }
}

resource "azurerm_kubernetes_cluster_node_pool" "spot" {
  name                  = "spot"
  kubernetes_cluster_id = azurerm_kubernetes_cluster.aks.id
  vm_size               = "Standard_D4s_v5"
  priority              = "Spot"
  eviction_policy       = "Delete"
  auto_scaling_enabled  = true
  min_count             = 1
  max_count             = 3
}
"""
UBUNTU = "Ubuntu 22.04.5 LTS"
SPOT_TAINT = {
    "key": "kubernetes.azure.com/scalesetpriority",
    "value": "spot",
    "effect": "NoSchedule",
}


def _aks_nodes() -> Nodes:
    """AKS creates: system, 2 Ubuntu nodes with 128 GB OS disks; spot, 1 node labelled and
    tainted as Spot by AKS."""
    out = [
        node(
            f"system-{i}",
            labels={"kubernetes.azure.com/agentpool": "system"},
            instance_type="Standard_D2s_v5",
            os_image=UBUNTU,
            disk_gib=128,
            kubelet="v1.31.2",
        )
        for i in range(2)
    ]
    spot = {
        "kubernetes.azure.com/agentpool": "spot",
        "kubernetes.azure.com/scalesetpriority": "spot",
    }
    out.append(
        node(
            "spot-0",
            labels=spot,
            instance_type="Standard_D4s_v5",
            os_image=UBUNTU,
            disk_gib=128,
            kubelet="v1.31.2",
            taints=[dict(SPOT_TAINT)],
        )
    )
    return out


AKS_DRIFTS = [
    ("OS SKU", _on("system-0", _os("Microsoft Azure Linux 3.0")), "system", "osImage", "ubuntu"),
    ("OS disk by vCPUs", _on("system-1", _disk(256)), "system", "diskSize", 128),
    (
        "spot label",
        _on("spot-0", _label("kubernetes.azure.com/scalesetpriority", None)),
        "spot",
        "labels.kubernetes.azure.com/scalesetpriority",
        "spot",
    ),
    (
        "spot taint",
        _on("spot-0", _no_taints),
        "spot",
        "taints.kubernetes.azure.com/scalesetpriority:NoSchedule",
        "spot",
    ),
]


def test_aks_nodes_as_aks_creates_them_match_the_defaults():
    assert _findings(AKS, "prod", _aks_nodes()) == []


@pytest.mark.parametrize(
    ("change", "pool", "field", "expected"),
    [d[1:] for d in AKS_DRIFTS],
    ids=[d[0] for d in AKS_DRIFTS],
)
def test_aks_drift_from_a_default_is_found(change, pool, field, expected):
    _check_drift(AKS, "prod", _aks_nodes(), change, pool, field, expected)


def test_aks_a_pool_without_node_count_or_autoscaling_gets_no_nodes():
    text = AKS + (
        'resource "azurerm_kubernetes_cluster_node_pool" "idle" {\n'
        '  name                  = "idle"\n'
        "  kubernetes_cluster_id = azurerm_kubernetes_cluster.aks.id\n"
        '  vm_size               = "Standard_D2s_v5"\n'
        "}\n"
    )
    spec = _spec(text, "idle")
    assert spec.desired_size == 0 and spec.provenance["desiredSize"].startswith("default: azurerm")


@pytest.mark.parametrize(
    ("setting", "value"),
    [("enable_auto_scaling", "true"), ("auto_scaling_enabled", "true")],
    ids=["azurerm v3", "azurerm v4"],
)
def test_aks_both_autoscaling_spellings_are_read(setting, value):
    text = AKS.replace("  auto_scaling_enabled  = true", f"  {setting} = {value}")
    spec = _spec(text, "spot")
    assert (spec.min_size, spec.max_size, spec.desired_size) == (1, 3, None)
    assert not [a for a in spec.account if a.status is FieldStatus.UNACCOUNTED]


@pytest.mark.parametrize(
    ("vm_size", "vcpus"),
    [
        ("Standard_D2s_v5", 2),
        ("Standard_E4-2s_v3", 2),  # constrained vCPUs
        ("Standard_B2ms", 2),
        ("Standard_F16s_v2", 16),
        ("Standard_DS2_v2", 2),
        ("Standard_DS3_v2", 4),  # Dv2 names do not give the count: the table does
        ("Standard_NC24ads_A100_v4", 24),
        ("Standard_A5", None),  # old sizes: not known, so no disk default
        ("Standard_D3", None),
        ("custom", None),
    ],
)
def test_aks_vcpus_are_read_from_a_vm_size_only_when_certain(vm_size, vcpus):
    assert vcpus_of(vm_size) == vcpus


def test_aks_os_disk_of_8_vcpus_or_more_is_not_asserted():
    """256 GB from July 2022, 128 GB before: the creation date is not in the files."""
    spec = _spec(AKS.replace("Standard_D2s_v5", "Standard_D8s_v5"), "system")
    assert spec.disk_size_gib is None
    assert "diskSizeGiB" not in spec.provenance


# -- terraform-aws-eks: which major, and what each major does -------------------------------------


@pytest.mark.parametrize(
    ("constraint", "majors"),
    [
        ("~> 21.0", (21, 21)),
        ("~> 20.8.4", (20, 20)),
        ("20.8.4", (20, 20)),
        ("= 19.21.0", (19, 19)),
        (">= 19, < 20", (19, 19)),
        (">= 19.0, < 21.0", (19, 20)),
        ("~> 20", (20, None)),  # one component: any later major too
        (">= 19", (19, None)),
        ("< 18", (0, 17)),
        (">= 21, < 20", None),
        ("latest", None),
    ],
)
def test_version_constraints_give_the_majors_they_allow(constraint, majors):
    assert constraint_majors(constraint) == majors


@pytest.mark.parametrize(
    ("module", "assume", "majors"),
    [
        ({"source": "terraform-aws-modules/eks/aws", "version": "~> 20.0"}, None, (20,)),
        (
            {
                "source": "git::https://github.com/terraform-aws-modules/terraform-aws-eks.git?ref=v19.21.0"
            },
            None,
            (19,),
        ),
        ({"source": "../..", "cluster_name": "x"}, None, (18, 19, 20)),
        ({"source": "../..", "name": "x"}, None, (21,)),
        ({"source": "../..", "node_groups": {}}, None, (17,)),
        ({"source": "terraform-aws-modules/eks/aws", "cluster_name": "x"}, 20, (20,)),
        ({"source": "terraform-aws-modules/eks/aws", "cluster_name": "x"}, 21, (18, 19, 20)),
        ({"source": "terraform-aws-modules/eks/aws", "version": "~> 20"}, None, (20, 21)),
    ],
    ids=[
        "version",
        "git-ref",
        "v18-v20-inputs",
        "v21-inputs",
        "v17-inputs",
        "assumed",
        "assumption-that-does-not-fit",
        "open-constraint",
    ],
)
def test_module_major_from_version_ref_assumption_or_inputs(module, assume, majors):
    assert majors_of(module, "cluster", Assumed(terraform_aws_eks=assume)).majors == majors


def test_an_assumed_major_picks_the_defaults_of_an_unpinned_module():
    text = EKS_V20.replace('  version         = "~> 20.0"\n', "")
    assert _spec(text, "workers").min_size == 0  # v18-v20 all say 0
    spec = _spec(text, "general", Assumed(terraform_aws_eks=19))
    assert "assumed" in spec.provenance["maxSize"]


def test_an_unpinned_sub_module_accepts_what_every_major_would_give():
    text = """\
module "mng" {
  source       = "terraform-aws-modules/eks/aws//modules/eks-managed-node-group"
  name         = "mng"
  cluster_name = "prod"
}
"""
    spec = _spec(text, "mng")
    assert spec.min_size == 0  # v18-v20 sub-module 0, v21 1: the lowest
    assert (spec.os_family, *spec.os_family_alternatives) == ("amazonlinux2023", "amazonlinux2")
    assert "the major is not pinned" in spec.provenance["minSize"]


def test_mixed_instances_overrides_sit_where_each_major_reads_them():
    v20 = """\
module "eks" {
  source          = "terraform-aws-modules/eks/aws"
  version         = "~> 20.0"
  cluster_name    = "prod"
  self_managed_node_groups = {
    mixed = {
      use_mixed_instances_policy = true
      mixed_instances_policy = {
        instances_distribution = { on_demand_percentage_above_base_capacity = 20 }
        override = [
          { instance_type = "m5.large" },
          { instance_type = "m6i.large", weighted_capacity = "2" },
        ]
      }
    }
  }
}
"""
    assert _spec(v20, "mixed").instance_types == ("m5.large", "m6i.large")
    v21 = v20.replace('"~> 20.0"', '"~> 21.0"').replace("cluster_name", "name")
    spec = _spec(v21, "mixed")  # v21 reads launch_template.override: the top-level one is dropped
    assert spec.instance_types == ("m6i.large",)
    dropped = [a for a in spec.account if a.path == "mixed_instances_policy.override"]
    assert dropped and dropped[0].status is FieldStatus.IGNORED
    nested = v21.replace(
        "        override = [", "        launch_template = {\n        override = ["
    ).replace("        ]\n      }\n", "        ]\n        }\n      }\n")
    assert _spec(nested, "mixed").instance_types == ("m5.large", "m6i.large")
    off = v20.replace("use_mixed_instances_policy = true", "use_mixed_instances_policy = false")
    assert _spec(off, "mixed").instance_types == ("m6i.large",)


def _managed(group: str, major: str = "~> 20.0") -> str:
    inputs = 'cluster_name = "prod"' if "20" in major else 'name = "prod"'
    return f"""\
module "eks" {{
  source  = "terraform-aws-modules/eks/aws"
  version = "{major}"
  {inputs}
  eks_managed_node_groups = {{
    g = {{
{group}
    }}
  }}
}}
"""


def test_al2_bootstrap_args_on_a_managed_group_count_only_with_the_module_bootstrap():
    args = "      bootstrap_extra_args = \"--kubelet-extra-args '--node-labels=team=a'\"\n"
    spec = _spec(_managed('      ami_type = "AL2_x86_64"\n' + args), "g")
    assert "team" not in spec.labels
    ignored = [a for a in spec.account if a.path == "bootstrap_extra_args"]
    assert (
        ignored[0].status is FieldStatus.IGNORED
        and "enable_bootstrap_user_data" in ignored[0].detail
    )
    custom = "".join(
        f"      {line}\n"
        for line in (
            'ami_type = "AL2_x86_64"',
            'ami_id = "ami-1"',
            "enable_bootstrap_user_data = true",
        )
    )
    assert _spec(_managed(custom + args), "g").labels["team"] == "a"


def test_al2023_ignores_bootstrap_args_and_reads_nodeadm_parts():
    group = """\
      ami_type = "AL2023_x86_64_STANDARD"
      bootstrap_extra_args = "--kubelet-extra-args '--node-labels=team=a'"
      cloudinit_pre_nodeadm = [{
        content_type = "application/node.eks.aws"
        content      = <<-EOT
          apiVersion: node.eks.aws/v1alpha1
          kind: NodeConfig
          spec:
            kubelet:
              flags:
                - --register-with-taints=gpu=true:NoSchedule
        EOT
      }]
"""
    spec = _spec(_managed(group, "~> 21.0"), "g")
    assert "team" not in spec.labels
    assert Taint("gpu", "true", "NoSchedule") in spec.taints
    assert spec.provenance["taints.gpu:NoSchedule"].startswith("infra/main.tf:")


def test_bottlerocket_toml_labels_and_taints_are_read():
    group = """\
      ami_type = "BOTTLEROCKET_x86_64"
      bootstrap_extra_args = <<-EOT
        [settings.kubernetes.node-labels]
        "team" = "a"
        [settings.kubernetes.node-taints]
        dedicated = "data:NoSchedule"
      EOT
"""
    spec = _spec(_managed(group), "g")
    assert spec.labels["team"] == "a"
    assert Taint("dedicated", "data", "NoSchedule") in spec.taints
    assert spec.os_family == "bottlerocket" and spec.disk_size_gib == 20


def test_labels_in_shell_user_data_are_read_but_not_asserted():
    group = """\
      ami_type = "AL2_x86_64"
      pre_bootstrap_user_data = <<-EOT
        export KUBELET_EXTRA_ARGS="--node-labels=team=a --register-with-taints=x=y:NoSchedule"
      EOT
"""
    spec = _spec(_managed(group), "g")
    assert "team" not in spec.labels and spec.taints == ()
    assert "taints" in spec.unresolved_fields  # extra taints on the nodes are no drift
    entry = next(a for a in spec.account if a.path == "pre_bootstrap_user_data")
    assert entry.status is FieldStatus.UNRESOLVED


def test_the_module_launch_template_voids_disk_size_and_mappings_size_the_root():
    spec = _spec(
        _managed('      ami_type = "AL2023_x86_64_STANDARD"\n      disk_size = 100\n'), "g"
    )
    assert spec.disk_size_gib == 20  # the AMI's: disk_size has no effect
    entry = next(a for a in spec.account if a.path == "disk_size")
    assert entry.status is FieldStatus.IGNORED
    eks_template = "      use_custom_launch_template = false\n      disk_size = 100\n"
    assert _spec(_managed(eks_template), "g").disk_size_gib == 100
    mapped = """\
      ami_type = "BOTTLEROCKET_x86_64"
      block_device_mappings = {
        xvda = { device_name = "/dev/xvda", ebs = { volume_size = 4 } }
        xvdb = { device_name = "/dev/xvdb", ebs = { volume_size = 60, kms_key_id = var.key } }
      }
"""
    assert _spec(_managed(mapped), "g").disk_size_gib == 60  # Bottlerocket's data volume


@pytest.mark.parametrize("major", ["~> 20.0", "~> 21.0"])
@pytest.mark.parametrize("ami_type", ["AL2_x86_64", "CUSTOM"])
def test_an_ami_type_beside_a_custom_ami_that_names_no_os_is_accounted_for(major, ami_type):
    """terraform-aws-eks v20's examples/eks_managed_node_group ``custom_ami`` group: with
    ``ami_id`` the module sends EKS no ami_type; AL2's (or CUSTOM) only picks the user data
    format, which boots other OSes too. The attribute is ignored with that reason, not left
    unaccounted (nor noted as "not stated")."""
    group = f'      ami_id   = data.aws_ami.eks_default.image_id\n      ami_type = "{ami_type}"\n'
    spec = _spec(_managed(group, major), "g")
    statuses = {(a.status, a.fact) for a in spec.account if a.path == "ami_type"}
    assert (FieldStatus.UNACCOUNTED, None) not in statuses
    entry = next(a for a in spec.account if a.path == "ami_type" and a.fact is None)
    assert entry.status is FieldStatus.IGNORED and "user data format" in entry.detail
    assert spec.os_family is None


def test_a_custom_ami_of_a_stated_os_family_is_read_with_it():
    """v20 tests/eks-managed-node-group ``complete-eks-mng``: ``ami_id`` with an AL2023
    ``ami_type`` (from the defaults) — the AMI is of that family: ami_id is accounted for with
    the OS image, not left unaccounted."""
    group = "      ami_id = data.aws_ami.eks_default.image_id\n"
    text = _managed(group).replace(
        "  eks_managed_node_groups = {",
        '  eks_managed_node_group_defaults = { ami_type = "AL2023_x86_64_STANDARD" }\n'
        "  eks_managed_node_groups = {",
    )
    spec = _spec(text, "g")
    (entry,) = [a for a in spec.account if a.path == "ami_id" and a.fact == "osImage"]
    assert entry.status is FieldStatus.COMPARED and spec.os_family == "amazonlinux2023"


@pytest.mark.parametrize("kind", ["eks_managed", "self_managed"])
def test_v18_vpc_id_and_default_tags_inputs_are_ignored_with_why(kind):
    """v18 examples/complete ``separate-*-mng``: node_groups.tf v18.31.2 passes ``vpc_id``
    (the group's security group) and ``use_default_tags`` (self-managed) per group."""
    text = (
        'module "eks" {\n  source = "terraform-aws-modules/eks/aws"\n  version = "~> 18.31"\n'
        '  cluster_name = "prod"\n'
        f"  {kind}_node_groups = {{\n    g = {{\n      vpc_id = module.vpc.vpc_id\n"
        "      use_default_tags = true\n    }\n  }\n}\n"
    )
    spec = _spec(text, "g")
    statuses = {a.path: a.status for a in spec.account if a.path in ("vpc_id", "use_default_tags")}
    assert statuses == {"vpc_id": FieldStatus.IGNORED, "use_default_tags": FieldStatus.IGNORED}


# v18 node groups shaped as examples/eks_managed_node_group/main.tf of terraform-aws-eks v18.31.2
# (and v18.0.0 for the eks_managed_node_group_defaults one): module block, defaults, groups
EKS_V18 = """\
module "eks" {
  source  = "terraform-aws-modules/eks/aws"
  version = "%s"

  cluster_name    = "ex-eks"
  cluster_version = "1.24"

  eks_managed_node_group_defaults = {
    ami_type       = "AL2_x86_64"
    instance_types = ["m6i.large", "m5.large", "m5n.large", "m5zn.large"]
%s
  }

  eks_managed_node_groups = {
    default_node_group = {
      create_launch_template = false
      launch_template_name   = ""

      disk_size = 50
    }
    bottlerocket_default = {
      create_launch_template = false
      launch_template_name   = ""

      ami_type = "BOTTLEROCKET_x86_64"
      platform = "bottlerocket"
    }
    bottlerocket_custom = {
      ami_id   = data.aws_ami.eks_default_bottlerocket.image_id
      platform = "bottlerocket"
    }
    custom_ami = {
      ami_type = "AL2_ARM_64"
      ami_id   = data.aws_ami.eks_default_arm.image_id
      instance_types = ["t4g.medium"]
    }
    containerd = {
      name = "containerd"
    }
    complete-eks-mng = {
      name            = "complete-eks-mng"
      use_name_prefix = true
      ami_id                     = data.aws_ami.eks_default.image_id
      enable_bootstrap_user_data = true
      block_device_mappings = {
        xvda = {
          device_name = "/dev/xvda"
          ebs = {
            volume_size = 75
            volume_type = "gp3"
          }
        }
      }
    }
  }
}
"""
_V18_GROUPS = (
    "default_node_group",
    "bottlerocket_default",
    "bottlerocket_custom",
    "custom_ami",
    "containerd",
    "complete-eks-mng",
)


def _disk_notes(spec: NodePoolSpec, path: str = "disk_size") -> list[str]:
    return [f"{a.status.value} {a.fact} {a.detail}" for a in spec.account if a.path == path]


@pytest.mark.parametrize("version", ["~> 18.31", "~> 18.0"])
@pytest.mark.parametrize("defaults", ["", "    disk_size      = 50"], ids=["-", "defaults"])
@pytest.mark.parametrize("group", _V18_GROUPS)
def test_v18_disk_size_is_accounted_for_once_with_one_reason(version, defaults, group):
    """terraform-aws-eks v18 (modules/eks-managed-node-group/main.tf: ``disk_size =
    local.use_custom_launch_template ? null : var.disk_size``): a group that does not state
    disk_size has exactly one ``disk_size`` note (the default compared, or why no size is
    compared), never an unresolved note plus ignored notes repeating the same reason."""
    spec = _spec(EKS_V18 % (version, defaults), group)
    own = _disk_notes(spec)
    of_defaults = _disk_notes(spec, "eks_managed_node_group_defaults: disk_size")
    assert len(of_defaults) == (1 if defaults else 0), of_defaults
    if group == "default_node_group":  # states its own: that note, and the defaults' replaced
        assert len(own) == 1 and own[0].startswith("compared diskSizeGiB"), own
        return
    # not stated by the group: the size compared (a default), else one reason why not —
    # the defaults' disk_size note when try() reads it, else the group's own
    assert len(own) <= 1 and len(own + of_defaults) >= 1, own + of_defaults
    if own and own[0].startswith("compared"):
        assert "diskSizeGiB" in own[0]
    else:
        assert len(own + of_defaults) == 1, own + of_defaults


def test_v18_unpinned_disk_size_is_one_unresolved_note_naming_each_major():
    """``source = "../.."`` (an example in its own checkout): v18 sends disk_size 50 with
    EKS's launch template, v19-v20 use the module's template (the AMI's 20 GiB): one
    unresolved note on disk_size that says both, not three notes."""
    text = (EKS_V18 % ("~> 18.31", "")).replace(
        'source  = "terraform-aws-modules/eks/aws"\n  version = "~> 18.31"', 'source = "../.."'
    )
    spec = _spec(text, "default_node_group")
    (note,) = [a for a in spec.account if a.path == "disk_size"]
    assert note.status is FieldStatus.UNRESOLVED and note.fact == "diskSizeGiB"
    assert "v18: 50 stated at" in note.detail and "v19-v20:" in note.detail
    assert spec.disk_size_gib is None and "diskSizeGiB" in spec.unresolved_fields


_V18_SHAPED_INPUTS = {  # attribute -> values as the v18-v20 examples write them
    "disk_size": ["50", "var.disk_size", "null"],
    "create_launch_template": ["false", "true"],
    "launch_template_name": ['""', '"lt"'],
    "launch_template_id": ["aws_launch_template.external.id"],
    "use_custom_launch_template": ["false", "true"],
    "ami_type": ['"AL2_x86_64"', '"BOTTLEROCKET_x86_64"', '"WINDOWS_CORE_2019_x86_64"'],
    "ami_id": ["data.aws_ami.eks_default.image_id"],
    "platform": ['"bottlerocket"', '"windows"', '"linux"'],
    "block_device_mappings": [
        '{ xvda = { device_name = "/dev/xvda", ebs = { volume_size = 75 } } }',
        '{ xvdb = { device_name = "/dev/xvdb", ebs = { volume_size = 30 } } }',
    ],
    "instance_types": ['["m6i.large"]', "var.types"],
    "cluster_version": ['"1.24"', "module.eks.cluster_version"],
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pin=st.sampled_from(['version = "~> 18.31"', 'version = "~> 19.0"', 'version = "~> 20.0"', ""]),
    group=st.dictionaries(
        st.sampled_from(sorted(_V18_SHAPED_INPUTS)), st.integers(0, 2), max_size=6
    ),
    defaults=st.dictionaries(
        st.sampled_from(sorted(_V18_SHAPED_INPUTS)), st.integers(0, 2), max_size=3
    ),
    kind=st.sampled_from(["eks_managed", "self_managed"]),
)
def test_each_attribute_has_one_note_per_fact_over_any_v18_v20_group(pin, group, defaults, kind):
    """A terraform-aws-eks group (pinned or not) notes each of its attributes once per fact,
    with one reason: never a fact note and a bare note on one attribute, nor a fact's note
    twice on one attribute (an unresolved value plus "not resolved", say)."""

    def body(chosen: dict[str, int]) -> str:
        values = _V18_SHAPED_INPUTS
        return "\n".join(f"      {k} = {values[k][i % len(values[k])]}" for k, i in chosen.items())

    text = (
        f'module "eks" {{\n  source = "terraform-aws-modules/eks/aws"\n  {pin}\n'
        f'  cluster_name = "prod"\n'
        f"  {kind}_node_group_defaults = {{\n{body(defaults)}\n  }}\n"
        f"  {kind}_node_groups = {{\n    g = {{\n{body(group)}\n    }}\n  }}\n}}\n"
    )
    try:
        (spec,) = _specs(text)
    except FormatError:
        return  # a combination the module refuses (an AMI type EKS rejects, say)
    by_path: dict[str, list[str | None]] = {}
    for a in spec.account:
        if not a.is_default and a.status is not FieldStatus.COMPARED:
            by_path.setdefault(a.path, []).append(a.fact)
    for path, facts in by_path.items():
        assert len(facts) == len(set(facts)), (path, facts)
        assert None not in facts or len(facts) == 1, (path, facts)


def test_self_managed_groups_never_expect_labels_taints_or_instance_types_keys():
    text = EKS_V21.replace(
        "    workers = {\n",
        '    workers = {\n      labels = { team = "a" }\n      instance_types = ["c5.large"]\n',
    )
    spec = _spec(text, "workers")
    assert "team" not in spec.labels and spec.instance_types == ("m6i.large",)
    ignored = {a.path for a in spec.account if a.status is FieldStatus.IGNORED}
    assert {"labels", "instance_types"} <= ignored


V17 = """\
module "eks" {
  source          = "terraform-aws-modules/eks/aws"
  version         = "17.24.0"
  cluster_name    = "prod"
  cluster_version = "1.21"

  workers_group_defaults = {
    root_volume_size = 50
  }
  node_groups_defaults = {
    k8s_labels = { env = "prod" }
  }
  node_groups = {
    main = {
      k8s_labels = { team = "a" }
    }
  }
  worker_groups_launch_template = [
    {
      name                    = "spot"
      override_instance_types = ["m5.large", "m5a.large"]
      kubelet_extra_args      = "--node-labels=node.kubernetes.io/lifecycle=spot"
    },
  ]
}
"""


def test_v17_node_groups_and_worker_groups_with_their_defaults():
    main, spot = _spec(V17, "main"), _spec(V17, "spot")
    assert (main.min_size, main.max_size, main.instance_types) == (1, 3, ("m4.large",))
    assert main.disk_size_gib == 50  # root_volume_size from workers_group_defaults
    assert dict(main.labels) == {
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
        "env": "prod",
        "team": "a",  # k8s_labels are merged, not replaced
    }
    assert main.os_family == "amazonlinux2"  # created on 1.21: before AL2023
    assert main.name_prefix == "prod-main"  # no name: <cluster>-<key> and a suffix
    assert spot.instance_types == ("m5.large", "m5a.large")
    assert spot.labels == {"node.kubernetes.io/lifecycle": "spot"}
    assert (spot.min_size, spot.max_size, spot.os_family) == (1, 3, "amazonlinux2")


def test_every_attribute_of_the_inline_modules_is_accounted_for():
    for text in (EKS_NODE_GROUP, EKS_V21, EKS_V20, GKE_RESOURCE, GKE_MODULE, AKS, V17):
        for spec in _specs(text):
            assert not [a.path for a in spec.account if a.status is FieldStatus.UNACCOUNTED], (
                spec.name
            )


@pytest.mark.parametrize("key", ["node_groups", "worker_groups", "worker_groups_launch_template"])
def test_v17_groups_of_a_locally_sourced_module_are_read(key):
    """The module's own v17 examples call it as ``../..``: its groups are pools."""
    group = '{ a = { name = "a" } }' if key == "node_groups" else '[{ name = "a" }]'
    text = f'module "eks" {{\n  source = "../.."\n  cluster_name = "prod"\n  {key} = {group}\n}}\n'
    assert [s.name for s in _specs(text)] == ["a"]


# every key of terraform-aws-eks v17.24.0's workers_group_defaults (locals.tf), in its order
V17_WORKER_KEYS = [
    "name",
    "tags",
    "ami_id",
    "ami_id_windows",
    "asg_desired_capacity",
    "asg_max_size",
    "asg_min_size",
    "asg_force_delete",
    "asg_initial_lifecycle_hooks",
    "default_cooldown",
    "health_check_type",
    "health_check_grace_period",
    "instance_type",
    "spot_price",
    "placement_tenancy",
    "root_volume_size",
    "root_volume_type",
    "root_volume_throughput",
    "root_iops",
    "key_name",
    "cpu_credits",
    "kubelet_extra_args",
    "subnets",
    "additional_userdata",
    "ebs_optimized",
    "enable_monitoring",
    "enclave_support",
    "public_ip",
    "protect_from_scale_in",
    "iam_instance_profile_name",
    "iam_role_id",
    "suspended_processes",
    "target_group_arns",
    "load_balancers",
    "enabled_metrics",
    "placement_group",
    "service_linked_role_arn",
    "termination_policies",
    "platform",
    "userdata_template_file",
    "userdata_template_extra_args",
    "additional_ebs_volumes",
    "additional_instance_store_volumes",
    "warm_pool",
    "timeouts",
    "bootstrap_extra_args",
    "snapshot_id",
    "root_encrypted",
    "root_kms_key_id",
    "root_block_device_name",
    "root_block_device_name_windows",
    "launch_template_id",
    "launch_template_version",
    "update_default_version",
    "instance_refresh_enabled",
    "instance_refresh_strategy",
    "instance_refresh_min_healthy_percentage",
    "instance_refresh_instance_warmup",
    "instance_refresh_triggers",
    "capacity_rebalance",
    "max_instance_lifetime",
    "metadata_http_endpoint",
    "metadata_http_tokens",
    "metadata_http_put_response_hop_limit",
]
V17_LT_KEYS = [
    "instance_store_virtual_name",
    "launch_template_placement_tenancy",
    "launch_template_placement_group",
    "interface_type",
    "market_type",
    "elastic_inference_accelerator",
    "eni_delete",
]


def test_every_v17_worker_group_input_is_accounted_for():
    """A real v17 file may set any input of workers_group_defaults: none is unknown."""
    texts = {"instance_type": '"m5.large"', "asg_min_size": "1", "asg_max_size": "3"}
    body = "\n".join(f"      {k} = {texts.get(k, 'var.x')}" for k in V17_WORKER_KEYS + V17_LT_KEYS)
    text = (
        'module "eks" {\n  source = "terraform-aws-modules/eks/aws"\n  version = "17.24.0"\n'
        f'  cluster_name = "prod"\n  worker_groups_launch_template = [\n    {{\n{body}\n'
        "    },\n  ]\n}\n"
    )
    (spec,) = _specs(text.replace("name = var.x", 'name = "w"'))
    unknown = [a.path for a in spec.account if a.status is FieldStatus.UNACCOUNTED]
    assert unknown == []


@pytest.mark.parametrize("locations", ["var.zones", '["europe-west1-c", var.zone]'])
def test_gke_zonal_cluster_whose_node_locations_are_not_known_leaves_the_count_open(locations):
    """A zonal cluster's pools span its zone plus its node_locations: with those unknown the
    total is unknown (it was taken as the one zone: 1 node per zone read as 1 node)."""
    text = GKE_RESOURCE.replace('["europe-west1-c"]', locations)
    spec = _spec(text, "p")
    assert spec.desired_size is None
    (note,) = [u for u in spec.unresolved if u.field == "desiredSize"]
    assert "number of zones is not stated" in note.expression
