"""EKS Auto Mode in Terraform (formats.terraform.eks_auto): the built-in NodePools that
``aws_eks_cluster.compute_config`` or terraform-aws-eks's ``compute_config`` (v21) /
``cluster_compute_config`` (v20) enable are desired pools; what cannot be read is said."""

from __future__ import annotations

import pytest

from fleetwarden.core.pools import Taint
from fleetwarden.formats import terraform
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.terraform import TfFile

RESOURCE = """
resource "aws_eks_cluster" "auto" {
  name    = "prod-auto"
  version = "1.33"
  role_arn = aws_iam_role.cluster.arn
  compute_config {
    enabled       = true
    node_pools    = ["general-purpose", "system"]
    node_role_arn = aws_iam_role.node.arn
  }
}
"""


def _read(text: str):
    return terraform.read_pools([TfFile("/x/main.tf", text)])


def test_the_built_in_pools_of_an_aws_eks_cluster_with_compute_config():
    got = _read(RESOURCE)
    pools = {p.name: p for p in got.pools}
    assert sorted(pools) == ["general-purpose", "system"]
    system = pools["system"]
    assert system.cluster == "prod-auto" and system.kubernetes_version == "1.33"
    assert system.taints == (Taint("CriticalAddonsOnly", None, "NoSchedule"),)
    assert system.provenance["name"] == "/x/main.tf:8"
    assert system.provenance["requirements.kubernetes.io/arch"].startswith("default: EKS Auto")
    statuses = {a.path: a.status.value for a in system.account}
    assert statuses["compute_config[0].node_role_arn"] == "ignored"


@pytest.mark.parametrize(
    ("attr", "cluster", "version"),
    [("compute_config", "name", "kubernetes_version"),  # v21
     ("cluster_compute_config", "cluster_name", "cluster_version")],  # v20.31+
)  # fmt: skip
def test_the_terraform_aws_eks_module_input_in_either_major(attr, cluster, version):
    text = f"""
module "eks" {{
  source  = "terraform-aws-modules/eks/aws"
  {cluster} = "c1"
  {version} = "1.32"
  {attr} = {{
    enabled    = true
    node_pools = ["general-purpose"]
  }}
}}
"""
    (pool,) = _read(text).pools
    assert (pool.name, pool.cluster, pool.kubernetes_version) == ("general-purpose", "c1", "1.32")
    assert pool.taints == ()


@pytest.mark.parametrize(
    ("block", "remark"),
    [
        ("compute_config {\n enabled = var.auto\n node_pools = [\"system\"]\n}",
         "whether Auto Mode is on is unknown"),
        ("compute_config {\n enabled = true\n}", "creates no built-in pool"),
        ("compute_config {\n enabled = true\n node_pools = var.pools\n}", "pools unknown"),
        ("compute_config {\n enabled = false\n node_pools = [\"system\"]\n}", None),
    ],
)  # fmt: skip
def test_no_pool_when_auto_mode_is_off_or_unknown_and_the_note_says_why(block, remark):
    got = _read(f'resource "aws_eks_cluster" "c" {{\n name = "c"\n {block}\n}}\n')
    assert got.pools == []
    (note,) = got.notes.values()
    assert "no node-pool definition" in note
    if remark:
        assert remark in note


def test_an_unknown_built_in_pool_name_is_an_error_naming_the_field():
    with pytest.raises(FormatError, match="invalid NodePool 'gpu'") as exc:
        _read(RESOURCE.replace('"system"', '"gpu"'))
    assert "compute_config" in str(exc.value) and "/x/main.tf" in str(exc.value)
