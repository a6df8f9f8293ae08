"""Where attributes of a .tf file are written: the line index that gives stated values their
``file:line`` provenance (python-hcl2 returns values without lines)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.formats.terraform.lines import line_index

TEXT = """\
resource "aws_eks_node_group" "demo" {
  cluster_name = "prod" # a comment { with braces
  scaling_config {
    min_size = 1
  }
  taint {
    key = "a"
  }
  taint {
    key    = "b"
    effect = "NO_SCHEDULE"
  }
  labels = { "example.com/role" = "x", plain = "${var.y}" }
}
/* a block comment
   resource "x" "y" { */
module "eks" {
  user_data = <<-EOT
    [settings.kubernetes.node-labels]
    "not" = "an attribute"
  EOT
  groups = {
    one = {
      min_size = merge({ a = 1 }, {
        b = 2
      })
      max_size = 3
    }
  }
  pools = [
    { name = "p0" },
    {
      name = "p1"
    },
  ]
  loop = [for k, v in local.x : { name = k }]
}
"""


@pytest.mark.parametrize(
    ("path", "line"),
    [
        (("resource", "aws_eks_node_group", "demo"), 1),
        (("resource", "aws_eks_node_group", "demo", "cluster_name"), 2),
        (("resource", "aws_eks_node_group", "demo", "scaling_config", 0, "min_size"), 4),
        (("resource", "aws_eks_node_group", "demo", "taint", 1, "effect"), 11),
        (("resource", "aws_eks_node_group", "demo", "labels", "example.com/role"), 13),
        (("resource", "aws_eks_node_group", "demo", "labels", "plain"), 13),
        (("module", "eks", "user_data"), 18),
        (("module", "eks", "groups", "one", "min_size"), 24),
        (("module", "eks", "groups", "one", "max_size"), 27),
        (("module", "eks", "pools", 0, "name"), 31),
        (("module", "eks", "pools", 1, "name"), 33),
        (("module", "eks", "loop"), 36),
    ],
)
def test_attributes_blocks_keys_and_list_items_have_their_line(path, line):
    assert line_index(TEXT)[path] == line


def test_heredoc_comment_and_comprehension_bodies_are_not_attributes():
    index = line_index(TEXT)
    assert ("module", "eks", "not") not in index
    assert ("resource", "x", "y") not in index
    assert not any(p[:3] == ("module", "eks", "loop") and len(p) > 3 for p in index)


@pytest.mark.realdata
def test_a_real_module_group_attribute_is_found(realdata: Path) -> None:
    path = realdata / "terraform" / "tf-aws-eks-tests-eks-managed-node-group-main.tf"
    index = line_index(path.read_text(encoding="utf-8"))
    volume = ("block_device_mappings", "xvda", "ebs", "volume_size")
    assert index[("module", "eks", "eks_managed_node_groups", "complete", *volume)] == 264


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_gives_an_index_and_never_raises(text: str) -> None:
    assert isinstance(line_index(text), dict)
