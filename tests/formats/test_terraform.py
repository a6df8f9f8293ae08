"""Terraform reader: the real files of ../shared/realdata/terraform, and small inline modules.

The corpus keeps unrelated examples in one folder, so read together they share one Terraform
module: names defined in several files (``local.name``, ``google_container_cluster.default``)
are ambiguous there and must come out unresolved. Read alone, a file resolves its own names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.core.pools import NodePoolSpec, Provisioner, Taint, Unresolved
from fleetwarden.formats.documents import PoolsRead
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.terraform import TfFile, read_pools
from tests.conftest import realdata_files
from tests.formats.test_field_accounting import missing_provenance

TF_FILES = realdata_files("terraform", ".tf")


def _tf(path: Path) -> TfFile:
    return TfFile(str(path), path.read_text(encoding="utf-8"))


def _read(**files: str) -> PoolsRead:
    """Inline files: keyword ``dir__name`` is the path ``dir/name.tf``."""
    return read_pools([TfFile(k.replace("__", "/") + ".tf", v) for k, v in files.items()])


def _pool(read: PoolsRead, file: str, name: str) -> NodePoolSpec:
    found = [p for p in read.pools if Path(p.source).name == file and p.name == name]
    assert len(found) == 1, f"{file}: pools {[p.name for p in read.pools if file in p.source]}"
    return found[0]


def _only(read: PoolsRead) -> NodePoolSpec:
    assert len(read.pools) == 1, [p.name for p in read.pools]
    return read.pools[0]


@pytest.fixture(scope="module")
def corpus(realdata: Path) -> PoolsRead:
    """The whole folder read as one directory, as ``fleetwarden`` reads a desired-state tree."""
    return read_pools([_tf(p) for p in sorted((realdata / "terraform").glob("*.tf"))])


# -- 1. every real file loads -----------------------------------------------------------------

POOLS_PER_FILE = {
    "tf-aws-eks-karpenter-main.tf": 1,
    "tf-aws-eks-managed-node-group-al2023.tf": 1,
    "tf-aws-eks-managed-node-group-bottlerocket.tf": 1,
    "tf-aws-eks-managed-node-group-main.tf": 0,
    "tf-aws-eks-self-managed-node-group-al2023.tf": 1,
    "tf-aws-eks-tests-eks-managed-node-group-main.tf": 10,
    "tf-aws-eks-v19-complete-main.tf": 5,
    "tf-aws-eks-v19-eks-managed-node-group-main.tf": 6,
    "tf-aws-provider-eks-getting-started-worker-nodes.tf": 1,
    "tf-azurerm-aks-basic-cluster-main.tf": 1,
    "tf-azurerm-aks-egress-with-udr-azure-cni-main.tf": 1,
    "tf-azurerm-aks-network-policy-calico-main.tf": 2,
    "tf-azurerm-aks-nodes-on-internal-network-main.tf": 2,
    "tf-azurerm-aks-spot-node-pool-main.tf": 2,
    "tf-gke-docs-regional-node-pool-main.tf": 1,
    "tf-gke-docs-regional-node-system-config-main.tf": 2,
    "tf-gke-docs-regional-windows-main.tf": 2,
    "tf-gke-docs-zonal-arm-main.tf": 2,
    "tf-gke-docs-zonal-reservation-main.tf": 3,
    "tf-gke-node-pool-main.tf": 7,  # and the module cluster's default-pool
    "tf-gke-node-pool-update-variant-main.tf": 3,
    "tf-gke-regional-private-node-pool-oauth-scopes-main.tf": 1,
    "tf-gke-simple-regional-private-main.tf": 1,
    "tf-gke-simple-windows-node-pool-main.tf": 2,
}


@pytest.mark.realdata
@pytest.mark.parametrize("path", TF_FILES, ids=lambda p: p.name)
def test_every_real_file_reads_to_pools_or_a_clear_note(path: Path, corpus: PoolsRead) -> None:
    """Each file parses, is claimed, and either yields pools or says what it had instead;
    alone and within the whole folder it yields the same pools (by name)."""
    alone = read_pools([_tf(path)])
    assert (str(path), 0) in alone.claimed
    names = sorted(p.name for p in alone.pools)
    assert names == sorted(p.name for p in corpus.pools if p.source == str(path))
    if names:
        assert str(path) not in alone.notes
    else:
        assert alone.notes[str(path)].startswith("no node-pool definition (Terraform: ")
    for pool in alone.pools:
        assert pool.source == str(path) and pool.source_format == "terraform"


@pytest.mark.realdata
@pytest.mark.parametrize("path", TF_FILES, ids=lambda p: p.name)
def test_pool_count_per_real_file_is_pinned(path: Path) -> None:
    """How many pools each corpus file yields: a new or lost pool is a visible change."""
    assert len(read_pools([_tf(path)]).pools) == POOLS_PER_FILE[path.name]


@pytest.mark.realdata
def test_every_corpus_file_is_pinned(realdata: Path) -> None:
    assert sorted(p.name for p in (realdata / "terraform").glob("*.tf")) == sorted(POOLS_PER_FILE)


@pytest.mark.realdata
def test_file_without_pools_says_what_it_had(corpus: PoolsRead) -> None:
    note = next(v for k, v in corpus.notes.items() if k.endswith("managed-node-group-main.tf"))
    assert note == "no node-pool definition (Terraform: only module vpc)"


# -- 2. the facts read from real files --------------------------------------------------------

TF = "tf-"
AWS_DEMO = "tf-aws-provider-eks-getting-started-worker-nodes.tf"
SPOT = "tf-azurerm-aks-spot-node-pool-main.tf"
ARM = "tf-gke-docs-zonal-arm-main.tf"
V19 = "tf-aws-eks-v19-complete-main.tf"
V19_MNG = "tf-aws-eks-v19-eks-managed-node-group-main.tf"
CURRENT = "tf-aws-eks-tests-eks-managed-node-group-main.tf"

# (file, pool, facts pinned exactly, unresolved entries that must be present)
CORPUS_FACTS: list[tuple[str, str, dict[str, Any], set[Unresolved]]] = [
    (  # aws_eks_node_group: the cluster resource is not in the corpus; EKS's defaults
        AWS_DEMO,
        "demo",
        dict(
            provider=Provisioner.AWS,
            cluster=None,
            instance_types=("t3.medium",),
            disk_size_gib=20,
            min_size=1,
            max_size=1,
            desired_size=1,
            labels={"eks.amazonaws.com/capacityType": "ON_DEMAND"},
            taints=(),
            kubernetes_version=None,
            os_family="amazonlinux2023",
            os_family_alternatives=("amazonlinux2",),  # the version is not stated
        ),
        {Unresolved("cluster", "aws_eks_cluster.demo.name")},
    ),
    (  # azurerm node pool: azurerm_kubernetes_cluster.example is defined in 5 files -> unknown
        SPOT,
        "spot",
        dict(
            provider=Provisioner.AZURE,
            cluster=None,
            instance_types=("Standard_DS2_v2",),
            desired_size=1,
            min_size=None,
            max_size=None,
            labels={"kubernetes.azure.com/scalesetpriority": "spot"},
            taints=(Taint("kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule"),),
        ),
        {Unresolved("cluster", "azurerm_kubernetes_cluster.example.id")},
    ),
    (  # azurerm default_node_pool: the cluster name is built from a variable
        "tf-azurerm-aks-basic-cluster-main.tf",
        "default",
        dict(
            provider=Provisioner.AZURE,
            cluster=None,
            instance_types=("Standard_DS2_v2",),
            desired_size=1,
            taints=(),
        ),
        {Unresolved("cluster", '"${var.prefix}-k8s"')},
    ),
    (  # google_container_node_pool: google_container_cluster.default is in 5 files -> unknown
        ARM,
        "gke-standard-zonal-arm-node-pool",
        dict(
            provider=Provisioner.GCP,
            cluster=None,
            instance_types=("t2a-standard-1",),
            desired_size=1,
            min_size=None,
            max_size=None,
        ),
        {Unresolved("cluster", "google_container_cluster.default.id")},
    ),
    (  # GKE's implicit default-pool: initial_node_count 2 per zone, in a + b + f
        ARM,
        "default-pool",
        dict(
            provider=Provisioner.GCP,
            cluster="gke-standard-zonal-arm-cluster",
            instance_types=("t2a-standard-1",),
            desired_size=6,
            unresolved=(),
        ),
        set(),
    ),
    (  # image_type -> os family; machine_type unset: the provider's e2-medium
        "tf-gke-docs-regional-windows-main.tf",
        "windows-node-pool",
        dict(os_family="windows", instance_types=("e2-medium",), desired_size=0),
        {Unresolved("cluster", "google_container_cluster.default.name")},
    ),
    (  # terraform-aws-eks v19: taints as a map, defaults merged, disk from the block device
        V19,
        "green",
        dict(
            provider=Provisioner.AWS,
            cluster=None,
            instance_types=("t3.large",),
            min_size=1,
            max_size=10,
            desired_size=1,
            disk_size_gib=100,
            disk_type="gp3",
            labels={
                "eks.amazonaws.com/capacityType": "SPOT",
                "Environment": "test",
                "GithubRepo": "terraform-aws-eks",
                "GithubOrg": "terraform-aws-modules",
            },
            taints=(Taint("dedicated", "gpuGroup", "NoSchedule"),),
            os_family="amazonlinux2",
            kubernetes_version=None,
        ),
        {
            Unresolved("cluster", "local.name"),
            Unresolved("name", '"green-" + a suffix Terraform generates (use_name_prefix)'),
        },
    ),
    (  # v19: a group of nothing but the defaults (the module's and its *_defaults)
        V19,
        "blue",
        dict(
            instance_types=("m6i.large", "m5.large", "m5n.large", "m5zn.large"),
            os_family="amazonlinux2",
            min_size=1,
            max_size=3,
            disk_size_gib=20,  # the module's launch template: the AL2 AMI's root volume
            labels={"eks.amazonaws.com/capacityType": "ON_DEMAND"},
            taints=(),
        ),
        {Unresolved("cluster", "local.name")},
    ),
    (  # v19: self-managed group, instance_type singular; labels from bootstrap_extra_args
        V19,
        "spot",
        dict(
            instance_types=("m5.large",),
            os_family="amazonlinux2",
            min_size=0,
            labels={"node.kubernetes.io/lifecycle": "spot"},
            taints=(),
        ),
        set(),
    ),
    (  # v19: taints as a list; the version from a local defined once in the folder; a
        # custom AMI booted the AL2 way says no OS, so no root device: the disk is not
        # compared; schedules scale down to 0
        V19_MNG,
        "complete-eks-mng",
        dict(
            kubernetes_version="1.27",
            disk_size_gib=None,
            os_family=None,
            min_size=0,
            max_size=7,
            desired_size=1,
            taints=(Taint("dedicated", "gpuGroup", "NoSchedule"),),
        ),
        {Unresolved("cluster", "local.name")},
    ),
    (  # v19: platform = "bottlerocket" names the OS of a custom AMI over the default ami_type;
        # the major is not pinned and v20 renders the user data by ami_type (AL2 here): the
        # TOML's labels and taints are not asserted
        V19_MNG,
        "bottlerocket_custom",
        dict(os_family="bottlerocket", labels={"eks.amazonaws.com/capacityType": "ON_DEMAND"}),
        {
            Unresolved(
                "taints",
                "its effect depends on the terraform-aws-eks major, which is not pinned",
            )
        },
    ),
    (  # current module (v21): kubernetes_version from local.kubernetes_version
        CURRENT,
        "efa",
        dict(
            instance_types=("p4d.24xlarge",),
            min_size=0,
            max_size=1,
            desired_size=0,
            labels={
                "eks.amazonaws.com/capacityType": "ON_DEMAND",
                "vpc.amazonaws.com/efa.present": "true",
                "nvidia.com/gpu.present": "true",
            },
            taints=(Taint("nvidia.com/gpu", "true", "NoSchedule"),),
            os_family="amazonlinux2023",
            kubernetes_version="1.33",
        ),
        {Unresolved("cluster", "local.name")},
    ),
    (  # disk_size counts only without the module's own launch template; EKS's t3.medium
        CURRENT,
        "default_node_group",
        dict(disk_size_gib=50, instance_types=("t3.medium",)),
        set(),
    ),
    (  # the eks-managed-node-group sub-module; module.eks is defined in 4 files -> unknown
        CURRENT,
        "separate-eks-mng",
        dict(cluster=None, os_family="bottlerocket"),
        {Unresolved("cluster", "module.eks.cluster_name")},
    ),
    (  # current module, cluster name = a template over a local
        "tf-aws-eks-managed-node-group-bottlerocket.tf",
        "example",
        dict(
            instance_types=("m6i.large",),
            min_size=2,
            max_size=5,
            desired_size=2,
            os_family="bottlerocket",
            kubernetes_version="1.33",
            cluster=None,
        ),
        {Unresolved("cluster", '"${local.name}-bottlerocket"')},
    ),
    (  # GKE module: literal cluster name; counts per zone with zones not stated
        "tf-gke-regional-private-node-pool-oauth-scopes-main.tf",
        "my-node-pool",
        dict(
            cluster="random-test-cluster",
            instance_types=("e2-medium",),
            disk_size_gib=100,
            disk_type="pd-ssd",
            min_size=None,
            max_size=None,
            desired_size=None,
        ),
        {Unresolved("minSize", "min_count = 1 per zone; the number of zones is not stated")},
    ),
    (  # GKE module: node_pools_labels / node_pools_taints, "all" merged with the pool's own
        "tf-gke-node-pool-main.tf",
        "pool-01",
        dict(  # node_pool: the label the module adds to every pool
            labels={"node_pool": "pool-01", "all-pools-example": "true", "pool-01-example": "true"},
            taints=(
                Taint("all-pools-example", "true", "PreferNoSchedule"),
                Taint("pool-01-example", "true", "PreferNoSchedule"),
            ),
        ),
        {Unresolved("cluster", '"${local.cluster_type}-cluster${var.cluster_name_suffix}"')},
    ),
]


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("file", "name", "facts", "unresolved"),
    CORPUS_FACTS,
    ids=[f"{row[0].removeprefix(TF)}:{row[1]}" for row in CORPUS_FACTS],
)
def test_real_file_facts(
    corpus: PoolsRead, file: str, name: str, facts: dict[str, Any], unresolved: set[Unresolved]
) -> None:
    """Pins the facts read from each kind of definition, and that unknowns are listed as
    unresolved (with the expression as written), never guessed."""
    pool = _pool(corpus, file, name)
    got = {k: dict(v) if k == "labels" else v for k in facts for v in [getattr(pool, k)]}
    assert got == facts
    assert unresolved <= set(pool.unresolved)


# Read alone, a file's own definitions are unique: references to its cluster resolve.
ALONE_CLUSTERS = [
    (ARM, "gke-standard-zonal-arm-node-pool", "gke-standard-zonal-arm-cluster"),
    (
        "tf-gke-docs-regional-node-pool-main.tf",
        "gke-standard-regional-node-pool",
        "gke-standard-regional-cluster",
    ),
    (
        "tf-gke-docs-zonal-reservation-main.tf",
        "gke-standard-zonal-any-node-pool",
        "gke-standard-zonal-cluster",
    ),
]


@pytest.mark.realdata
@pytest.mark.parametrize(("file", "name", "cluster"), ALONE_CLUSTERS)
def test_real_file_alone_resolves_its_own_cluster(
    realdata: Path, file: str, name: str, cluster: str
) -> None:
    pool = _pool(read_pools([_tf(realdata / "terraform" / file)]), file, name)
    assert pool.cluster == cluster
    assert not [u for u in pool.unresolved if u.field == "cluster"]


@pytest.mark.realdata
def test_zonal_pool_counts_are_totals_when_the_zone_is_known(realdata: Path) -> None:
    """initial_node_count = 3 in the zonal cluster's one zone: 3 nodes."""
    file = "tf-gke-docs-zonal-reservation-main.tf"
    pool = _pool(
        read_pools([_tf(realdata / "terraform" / file)]), file, "gke-standard-zonal-any-node-pool"
    )
    assert (pool.desired_size, pool.unresolved) == (3, ())


# -- 3. inline modules: resolution rules and errors -------------------------------------------

NODE_GROUP = """
resource "aws_eks_node_group" "workers" {
  cluster_name    = %s
  node_group_name = "workers"
  instance_types  = %s
  scaling_config {
    min_size     = %s
    max_size     = 5
    desired_size = 2
  }
}
"""


def _node_group(cluster: str = '"prod"', types: str = '["m5.large"]', lo: str = "1") -> str:
    return NODE_GROUP % (cluster, types, lo)


def test_locals_resolve_through_other_locals_and_templates() -> None:
    read = _read(
        m__main=_node_group("local.cluster", "local.types")
        + """
locals {
  env     = "prod"
  cluster = "${local.env}-eu"
  types   = [local.small, "m5.xlarge"]
  small   = "m5.large"
}
"""
    )
    pool = _only(read)
    assert (pool.cluster, pool.instance_types) == ("prod-eu", ("m5.large", "m5.xlarge"))
    assert pool.unresolved == ()


def test_variables_are_never_resolved_even_with_a_default() -> None:
    read = _read(
        m__main=_node_group("var.cluster", '[var.type, "m5.large"]', "var.min")
        + 'variable "cluster" {\n  default = "prod"\n}\n'
    )
    pool = _only(read)
    assert (pool.cluster, pool.instance_types, pool.min_size) == (None, (), None)
    assert set(pool.unresolved) == {
        Unresolved("cluster", "var.cluster"),
        Unresolved("instanceTypes", "var.type"),  # one unknown element: the list is unknown
        Unresolved("minSize", "var.min"),
    }
    assert (pool.max_size, pool.desired_size) == (5, 2)


def test_functions_and_interpolated_unknowns_are_unresolved() -> None:
    read = _read(
        m__main=_node_group('"ex-${basename(path.cwd)}"', 'split(",", "a,b")')
        + "locals {\n  loop = local.loop\n}\n"
    )
    pool = _only(read)
    assert pool.cluster is None and pool.instance_types == ()
    assert Unresolved("cluster", '"ex-${basename(path.cwd)}"') in pool.unresolved
    assert Unresolved("instanceTypes", 'split(",", "a,b")') in pool.unresolved


def test_cyclic_locals_are_unresolved_not_a_hang() -> None:
    read = _read(m__main=_node_group("local.a") + "locals {\n  a = local.b\n  b = local.a\n}\n")
    assert _only(read).unresolved == (Unresolved("cluster", "local.a"),)


def test_a_name_defined_in_two_files_of_one_directory_is_ambiguous() -> None:
    read = _read(
        m__pools=_node_group("local.cluster"),
        m__one='locals {\n  cluster = "prod"\n}\n',
        m__two='locals {\n  cluster = "staging"\n}\n',
    )
    pool = _only(read)
    assert pool.cluster is None
    assert pool.unresolved == (Unresolved("cluster", "local.cluster"),)


def test_references_resolve_across_files_of_one_directory_only() -> None:
    cluster = 'resource "aws_eks_cluster" "main" {\n  name = "%s"\n}\n'
    read = _read(
        prod__pools=_node_group("aws_eks_cluster.main.name"),
        prod__cluster=cluster % "prod",
        staging__cluster=cluster % "staging",  # same address, other directory: no ambiguity
        other__pools=_node_group("aws_eks_cluster.main.name"),  # its directory has no cluster
    )
    by_dir = {p.source.split("/")[0]: p for p in read.pools}
    assert by_dir["prod"].cluster == "prod" and by_dir["prod"].unresolved == ()
    assert by_dir["other"].cluster is None
    assert by_dir["other"].unresolved == (Unresolved("cluster", "aws_eks_cluster.main.name"),)
    assert read.notes == {
        "prod/cluster.tf": "no node-pool definition (Terraform: only aws_eks_cluster)",
        "staging/cluster.tf": "no node-pool definition (Terraform: only aws_eks_cluster)",
    }


def test_cluster_id_references_name_the_cluster() -> None:
    read = _read(
        m__main="""
resource "azurerm_kubernetes_cluster" "aks" {
  name               = "aks-prod"
  kubernetes_version = "1.29"
  default_node_pool {
    name                         = "system"
    vm_size                      = "Standard_D4s_v5"
    only_critical_addons_enabled = true
    os_sku                       = "AzureLinux"
  }
}
resource "azurerm_kubernetes_cluster_node_pool" "gpu" {
  name                  = "gpu"
  kubernetes_cluster_id = azurerm_kubernetes_cluster.aks.id
  vm_size               = "Standard_NC6s_v3"
  min_count             = 0
  max_count             = 3
  os_disk_size_gb       = 128
  os_type               = "Windows"
  node_taints           = ["sku=gpu:NoSchedule", "dedicated:PreferNoSchedule"]
}
"""
    )
    system, gpu = _pool(read, "main.tf", "system"), _pool(read, "main.tf", "gpu")
    assert (system.cluster, system.kubernetes_version, system.os_family) == (
        "aks-prod",
        "1.29",
        "azurelinux",
    )
    assert system.taints == (Taint("CriticalAddonsOnly", "true", "NoSchedule"),)
    assert (gpu.cluster, gpu.min_size, gpu.max_size, gpu.disk_size_gib, gpu.os_family) == (
        "aks-prod",
        0,
        3,
        128,
        "windows",
    )
    assert gpu.taints == (
        Taint("dedicated", None, "PreferNoSchedule"),
        Taint("sku", "gpu", "NoSchedule"),
    )


def test_eks_module_merges_defaults_and_skips_disabled_groups() -> None:
    read = _read(
        m__main="""
module "eks" {
  source          = "terraform-aws-modules/eks/aws"
  cluster_name    = "prod"
  cluster_version = "1.29"
  eks_managed_node_group_defaults = {
    instance_types = ["m5.large"]
    labels         = { tier = "default" }
  }
  eks_managed_node_groups = {
    general = {
      min_size        = 1
      use_name_prefix = false
    }
    gpu = {
      name   = "gpu-nodes"
      labels = { tier = "gpu" }
      taints = [{ key = "nvidia.com/gpu", effect = "NO_SCHEDULE" }]
      use_name_prefix = false
    }
    off = {
      create = false
    }
  }
}
"""
    )
    general, gpu = _pool(read, "main.tf", "general"), _pool(read, "main.tf", "gpu-nodes")
    assert (general.cluster, general.kubernetes_version, general.instance_types) == (
        "prod",
        "1.29",
        ("m5.large",),
    )
    capacity = {"eks.amazonaws.com/capacityType": "ON_DEMAND"}  # EKS's default
    assert dict(general.labels) == {"tier": "default", **capacity}
    assert general.unresolved == ()
    assert dict(gpu.labels) == {"tier": "gpu", **capacity}  # a group's map replaces the default's
    assert gpu.taints == (Taint("nvidia.com/gpu", None, "NoSchedule"),)
    assert len(read.pools) == 2


def test_for_each_and_generated_names_are_unresolved_not_guessed() -> None:
    read = _read(
        m__main="""
resource "aws_eks_node_group" "each" {
  for_each        = var.pools
  cluster_name    = "prod"
  node_group_name = "ng-${each.key}"
}
resource "aws_eks_node_group" "prefixed" {
  cluster_name           = "prod"
  node_group_name_prefix = "pre-"
}
resource "aws_eks_node_group" "off" {
  count        = 0
  cluster_name = "prod"
}
"""
    )
    each, prefixed = _pool(read, "main.tf", "each"), _pool(read, "main.tf", "pre-")
    assert set(each.unresolved) == {
        Unresolved("count", "for_each = var.pools"),
        Unresolved("name", '"ng-${each.key}"'),
    }
    assert prefixed.unresolved == (
        Unresolved("name", 'node_group_name_prefix = "pre-": Terraform appends a suffix'),
    )
    assert len(read.pools) == 2  # count = 0 defines no pool


def test_dynamic_taint_blocks_make_taints_unresolved() -> None:
    read = _read(
        m__main="""
resource "google_container_cluster" "c" {
  name                     = "c"
  location                 = "europe-west1-b"
  remove_default_node_pool = true
}
resource "google_container_node_pool" "p" {
  name     = "p"
  cluster  = google_container_cluster.c.name
  location = "europe-west1-b"
  autoscaling {
    min_node_count = 1
    max_node_count = 4
  }
  node_config {
    image_type = "COS_CONTAINERD"
    dynamic "taint" {
      for_each = var.taints
      content {
        key    = taint.value.key
        effect = taint.value.effect
      }
    }
  }
}
"""
    )
    pool = _only(read)
    assert (pool.min_size, pool.max_size, pool.os_family) == (1, 4, "cos")  # a zonal cluster
    assert pool.unresolved == (Unresolved("taints", 'dynamic "taint"'),)


def test_gke_counts_are_per_zone_times_the_stated_zones() -> None:
    """node_count is per zone: 2 in each of 3 listed zones is 6 nodes; a cluster's own
    node_pool blocks are pools (and then there is no default-pool)."""
    read = _read(
        m__main="""
resource "google_container_cluster" "c" {
  name           = "prod"
  location       = "europe-west1"
  node_locations = ["europe-west1-b", "europe-west1-c", "europe-west1-d"]
  node_pool {
    name       = "inline"
    node_count = 1
  }
}
resource "google_container_node_pool" "p" {
  name       = "p"
  cluster    = "projects/acme/locations/europe-west1/clusters/prod"
  location   = "europe-west1"
  node_count = 2
  autoscaling {
    total_min_node_count = 2
    total_max_node_count = 9
  }
}
"""
    )
    inline, p = _pool(read, "main.tf", "inline"), _pool(read, "main.tf", "p")
    assert (inline.cluster, inline.desired_size, inline.unresolved) == ("prod", 3, ())
    assert p.cluster == "prod"  # a literal cluster id names the cluster
    assert (p.min_size, p.max_size) == (2, 9)  # total_* are totals already
    assert p.desired_size is None  # regional, its zones not stated on the pool: not guessed
    assert p.unresolved == (
        Unresolved("desiredSize", "node_count = 2 per zone; the number of zones is not stated"),
    )
    assert len(read.pools) == 2


def test_strings_lose_quotes_and_escapes_labels_lose_quotes() -> None:
    read = _read(
        m__main=r"""
resource "aws_eks_node_group" "quoted" {
  cluster_name    = "prod"
  node_group_name = "a\"b"
  labels = {
    "example.com/role" = "say \"hi\" $${literal}"
    plain              = true
  }
}
"""
    )
    pool = _only(read)
    assert pool.name == 'a"b'
    assert dict(pool.labels) == {
        "example.com/role": 'say "hi" ${literal}',
        "plain": "true",
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
    }


def test_syntax_error_names_the_file_and_line() -> None:
    with pytest.raises(FormatError) as err:
        _read(m__ok=_node_group(), m__broken='resource "aws_eks_node_group" "x" {\n  a = \n}\n')
    assert err.value.path == "m/broken.tf" and err.value.line == 2
    assert "HCL syntax error" in str(err.value)


@pytest.mark.parametrize(
    ("snippet", "field"),
    [
        ('taint {\n key = "k"\n effect = "SOMETIMES"\n}', "taint[0].effect"),
        ('instance_types = "m5.large"', "instance_types"),
        ("disk_size = -20", "disk_size"),
        ('labels = ["a"]', "labels"),
    ],
)
def test_wrong_types_are_format_errors_naming_the_attribute(snippet: str, field: str) -> None:
    body = f'resource "aws_eks_node_group" "x" {{\n  cluster_name = "c"\n  {snippet}\n}}\n'
    with pytest.raises(FormatError) as err:
        _read(m__main=body)
    assert err.value.field == f"aws_eks_node_group.x.{field}"


@pytest.mark.parametrize(
    ("attr", "value", "allowed"),
    [
        ("capacity_type", "SPOTT", "ON_DEMAND, SPOT, CAPACITY_BLOCK"),
        ("ami_type", "UBUNTU_x86_64", "AL2_x86_64, AL2_x86_64_GPU"),
    ],
)
def test_an_enum_value_eks_rejects_is_a_format_error_naming_the_allowed_ones(
    attr: str, value: str, allowed: str
) -> None:
    """Not ignored: EKS's API rejects the value, so the file is wrong. Checked in the resource,
    and in terraform-aws-eks groups of v18+ and v17; an expression stays unresolved."""
    node_group = (
        f'resource "aws_eks_node_group" "x" {{\n  cluster_name = "c"\n  {attr} = "{value}"\n}}\n'
    )
    v20 = (
        'module "eks" {\n  source = "terraform-aws-modules/eks/aws"\n  version = "~> 20.0"\n'
        f'  cluster_name = "c"\n'
        f'  eks_managed_node_groups = {{ g = {{ {attr} = "{value}" }} }}\n}}\n'
    )
    v17 = v20.replace("~> 20.0", "17.24.0").replace("eks_managed_node_groups", "node_groups")
    for text, where in (
        (node_group, f"aws_eks_node_group.x.{attr}"),
        (v20, attr),
        (v17, attr),
    ):
        with pytest.raises(FormatError, match=allowed) as err:
            _read(m__main=text)
        assert err.value.field is not None and err.value.field.endswith(where), err.value.field
        assert value in str(err.value)
    unresolved = _only(_read(m__main=node_group.replace(f'"{value}"', "var.x")))
    assert attr not in {a.path for a in unresolved.account if a.status.value == "compared"}


@pytest.mark.parametrize(
    ("sizes", "field", "reason"),
    [
        ((1, 3, 5), "desired", "desired size 5 is above max size 3"),
        ((2, 3, 1), "desired", "desired size 1 is below min size 2"),
        ((4, 3, None), "min", "min size 4 is above max size 3"),
    ],
)
def test_sizes_eks_rejects_are_format_errors(
    sizes: tuple[int, int, int | None], field: str, reason: str
) -> None:
    """Literal min/max/desired out of order: EKS refuses the group, so the file is wrong, in
    the resource and in terraform-aws-eks groups (v18+ and v17); expressions are not checked."""
    lo, hi, desired = sizes
    node_group = (
        'resource "aws_eks_node_group" "x" {\n  cluster_name = "c"\n  scaling_config {\n'
        f"    min_size = {lo}\n    max_size = {hi}\n"
        + (f"    desired_size = {desired}\n" if desired is not None else "")
        + "  }\n}\n"
    )
    group = f"min_size = {lo}, max_size = {hi}" + (
        f", desired_size = {desired}" if desired is not None else ""
    )
    v20 = (
        'module "eks" {\n  source = "terraform-aws-modules/eks/aws"\n  version = "~> 20.0"\n'
        f'  cluster_name = "c"\n  eks_managed_node_groups = {{ g = {{ {group} }} }}\n}}\n'
    )
    v17 = (
        v20.replace("~> 20.0", "17.24.0")
        .replace("eks_managed_node_groups", "node_groups")
        .replace("_size", "_capacity")
    )
    for text, where in (
        (node_group, f"aws_eks_node_group.x.scaling_config[0].{field}_size"),
        (v20, f"{field}_size"),
        (v17, f"{field}_capacity"),
    ):
        with pytest.raises(FormatError, match=reason) as err:
            _read(m__main=text)
        assert err.value.field is not None and err.value.field.endswith(where), err.value.field
    unknown = node_group.replace(f"min_size = {lo}", "min_size = var.min")
    unknown = unknown.replace(f"max_size = {hi}", "max_size = var.max")
    assert len(_read(m__main=unknown).pools) == 1


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("\x00\x01\x02binary", "binary data"),
        ("a = 1\n" * 50_000, "too large"),
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "RecursionError|nested too deeply"),
    ],
    ids=["binary", "huge", "deep"],
)
def test_hostile_input_is_a_format_error(text: str, reason: str) -> None:
    with pytest.raises(FormatError, match=reason) as err:
        _read(m__main=text)
    assert err.value.path == "m/main.tf"


def test_only_tf_files_are_read() -> None:
    read = read_pools([TfFile("m/vars.tfvars", "{{{ not hcl"), TfFile("m/x.tf", "")])
    assert read.claimed == {("m/x.tf", 0)} and read.pools == []


# -- 4. properties: nothing but FormatError escapes -------------------------------------------


def _read_or_format_error(path: str, text: str) -> PoolsRead | None:
    try:
        return read_pools([TfFile(path, text)])
    except FormatError as exc:
        assert exc.path == path
        return None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), st.binary().map(lambda b: b.decode("utf-8", "replace"))))
def test_arbitrary_text_raises_nothing_but_format_error(text: str) -> None:
    _read_or_format_error("h/main.tf", text)


HCL_VALUES = st.sampled_from(
    [
        '"m5.large"',
        "3",
        "-1",
        "2.5",
        "true",
        "null",
        "var.x",
        "local.x",
        '"${var.x}-a"',
        '["m5.large"]',
        "[var.x]",
        "[1, [2]]",
        '{ a = "b" }',
        "{ a = { b = 1 } }",
        '{ "k" = var.x }',
        '[{ key = "k", effect = "NO_SCHEDULE" }]',
        '["k=v:NoSchedule"]',
        '["nonsense"]',
        '{ t = { key = "k" } }',
        "aws_eks_cluster.c.name",
        "module.eks.cluster_name",
        "google_container_cluster.x.id",
        # shapes inside module node groups / node pool lists
        '{ g = { instance_types = "m5", min_size = "x" } }',
        "{ g = { taints = [1] } }",
        "{ g = { block_device_mappings = { a = 1, b = 2 } } }",
        "{ g = { block_device_mappings = { a = { ebs = 5 } } } }",
        "{ g = var.x }",
        '[{ name = "p", min_count = "x" }]',
        "[{ name = var.x, node_locations = 5 }]",
        '[{ name = "p", autoscaling = false, node_count = 2 }]',
        "[var.x]",
        '{ all = { a = [1] }, p = "x" }',
        "{ all = [{ key = 1 }] }",
    ]
)
ATTRIBUTES = st.sampled_from(
    [
        "cluster_name",
        "node_group_name",
        "instance_types",
        "disk_size",
        "labels",
        "version",
        "ami_type",
        "count",
        "for_each",
        "taints",
        "min_size",
        "name",
        "kubernetes_cluster_id",
        "node_taints",
        "node_labels",
        "vm_size",
        "node_count",
        "cluster",
        "node_locations",
        "eks_managed_node_groups",
        "eks_managed_node_group_defaults",
        "node_pools",
        "zones",
    ]
)
HEADERS = st.sampled_from(
    [
        'resource "aws_eks_node_group" "x"',
        'resource "azurerm_kubernetes_cluster_node_pool" "x"',
        'resource "google_container_node_pool" "x"',
        'resource "google_container_cluster" "x"',
        'module "x"',
        "locals",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            HEADERS,
            st.lists(st.tuples(ATTRIBUTES, HCL_VALUES), max_size=6),
            st.sampled_from(
                [
                    "",
                    "terraform-aws-modules/eks/aws",
                    "terraform-google-modules/kubernetes-engine/google",
                ]
            ),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_well_formed_hcl_with_odd_values_raises_nothing_but_format_error(
    blocks: list[tuple[str, list[tuple[str, str]], str]],
) -> None:
    """Valid HCL whose values have the wrong shapes: a FormatError naming the attribute, or
    pools; never a crash."""
    text = ""
    for header, attributes, source in blocks:
        lines = [f"  {k} = {v}" for k, v in dict(attributes).items()]
        if header.startswith("module"):
            lines.append(f'  source = "{source}"')
        text += header + " {\n" + "\n".join(lines) + "\n}\n"
    _read_or_format_error("h/main.tf", text)


@pytest.mark.realdata
@pytest.mark.parametrize("path", TF_FILES, ids=lambda p: p.name)
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.floats(min_value=0.0, max_value=1.0))
def test_truncated_real_file_gives_pools_a_note_or_format_error(path: Path, cut: float) -> None:
    text = path.read_text(encoding="utf-8")
    read = _read_or_format_error(str(path), text[: int(len(text) * cut)])
    if read is not None:
        assert (str(path), 0) in read.claimed
        assert read.pools or str(path) in read.notes


GROUP_KEYS = st.sampled_from(
    [
        "ami_type",
        "ami_id",
        "platform",
        "instance_type",
        "instance_types",
        "min_size",
        "desired_size",
        "disk_size",
        "block_device_mappings",
        "use_custom_launch_template",
        "create_launch_template",
        "launch_template_id",
        "bootstrap_extra_args",
        "enable_bootstrap_user_data",
        "cloudinit_pre_nodeadm",
        "pre_bootstrap_user_data",
        "use_mixed_instances_policy",
        "mixed_instances_policy",
        "schedules",
        "desired_size_type",
        "labels",
        "taints",
        "capacity_type",
        "k8s_labels",
        "override_instance_types",
        "kubelet_extra_args",
        "node_count",
        "autoscaling",
        "node_locations",
        "max_pods_per_node",
        "local_ssd_ephemeral_storage_count",
    ]
)
GROUP_VALUES = st.sampled_from(
    [
        '"AL2023_x86_64_STANDARD"',
        '"BOTTLEROCKET_x86_64"',
        '"WINDOWS_CORE_2022_x86_64"',
        '"CUSTOM"',
        '"bottlerocket"',
        '"m5.large"',
        '["m5.large", var.x]',
        "3",
        '"x"',
        "true",
        "false",
        "null",
        "var.x",
        "\"--kubelet-extra-args '--node-labels=a=b --register-with-taints=k=v:NoSchedule'\"",
        '"[settings.kubernetes.node-labels]\\na = \\"b\\""',
        '[{ content = "kind: NodeConfig\\nspec: 1" }]',
        "[{ content = var.x }]",
        '{ xvda = { device_name = "/dev/xvda", ebs = { volume_size = var.x } } }',
        '{ xvda = { device_name = "/dev/xvda", ebs = { volume_size = "²" } } }',
        '{ s = { min_size = "²", max_size = "-²" } }',
        '"²"',
        "{ a = { device_name = var.x } }",
        "{ override = [{ instance_type = var.x }] }",
        "{ launch_template = { override = [{ instance_requirements = {} }] } }",
        "{ s = { min_size = -1, max_size = var.x } }",
        '{ a = "b" }',
        '[{ key = "k", effect = "NO_SCHEDULE" }]',
        "[1, [2]]",
        "{}",
        "[]",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(
        [
            (
                'module "m" {\n  source = "terraform-aws-modules/eks/aws"\n  %s\n'
                "  eks_managed_node_groups = { g = {\n%s\n  } }\n}\n"
            ),
            (
                'module "m" {\n  source = "terraform-aws-modules/eks/aws"\n  %s\n'
                "  self_managed_node_groups = { g = {\n%s\n  } }\n}\n"
            ),
            (
                'module "m" {\n  source = "terraform-aws-modules/eks/aws"\n  %s\n'
                "  node_groups = { g = {\n%s\n  } }\n}\n"
            ),
            (
                'module "m" {\n  source = "terraform-aws-modules/eks/aws"\n  %s\n'
                "  worker_groups_launch_template = [{\n%s\n  }]\n}\n"
            ),
            (
                'module "m" {\n  source = "terraform-google-modules/kubernetes-engine/google"\n'
                '  %s\n  node_pools = [{\n    name = "p"\n%s\n  }]\n}\n'
            ),
        ]
    ),
    st.sampled_from(
        [
            'version = "~> 20.0"',
            'version = "~> 21.0"',
            'version = "17.24.0"',
            'cluster_name = "c"',
            'name = "c"',
            "regional = false",
            "zones = [var.a]",
            "",
        ]
    ),
    st.lists(st.tuples(GROUP_KEYS, GROUP_VALUES), max_size=6),
)
def test_module_groups_with_odd_values_raise_nothing_but_format_error(
    template: str, root: str, attributes: list[tuple[str, str]]
) -> None:
    """Group maps of every kind and major with values of the wrong shapes (or unresolved):
    pools whose every desired value has a provenance, or a FormatError naming the file."""
    body = "\n".join(f"    {k} = {v}" for k, v in dict(attributes).items())
    read = _read_or_format_error("h/main.tf", template % (root, body))
    for pool in read.pools if read is not None else []:
        assert pool.account and missing_provenance(pool) == []


def test_a_pool_name_that_is_an_expression_gives_no_name_and_no_prefix() -> None:
    """``var.name`` (or terraform-aws-eks ``name = var.x`` with ``use_name_prefix``) leaves
    the name unknown: never the block label or the map key as a name, nor as a prefix."""
    read = _read(
        m__main="""
resource "aws_eks_node_group" "this" {
  cluster_name    = "prod"
  node_group_name = var.name
}
module "eks" {
  source          = "terraform-aws-modules/eks/aws"
  version         = "~> 20.0"
  cluster_name    = "prod"
  eks_managed_node_groups = {
    app = { name = var.app_name }
    web = {}
  }
}
module "v17" {
  source       = "terraform-aws-modules/eks/aws"
  version      = "17.24.0"
  cluster_name = "prod"
  node_groups  = { old = { name_prefix = var.prefix } }
}
"""
    )
    this, app, web = (_pool(read, "main.tf", n) for n in ("this", "app", "web"))
    assert this.unknown_name == "var.name"
    assert (app.unknown_name, app.name_prefix) == ("var.app_name", None)
    assert (web.unknown_name, web.name_prefix) == (None, "web-")
    old = _pool(read, "main.tf", "old")  # not <cluster>-<key>: the prefix is stated, unknown
    assert (old.unknown_name, old.name_prefix) == ("var.prefix", None)


@pytest.mark.parametrize(
    ("removed", "pools"),
    [("true", []), ('"true"', []), ("false", ["default-pool"]), ('"false"', ["default-pool"])],
)
def test_a_removed_default_pool_is_removed_whether_the_flag_is_a_bool_or_its_string(removed, pools):
    """Terraform converts the strings "true" / "false" to the bool the attribute takes."""
    read = _read(
        m__main=f"""
resource "google_container_cluster" "c" {{
  name                     = "c"
  location                 = "europe-west1-b"
  initial_node_count       = 1
  remove_default_node_pool = {removed}
}}
"""
    )
    assert [p.name for p in read.pools] == pools
