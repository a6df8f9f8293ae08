""" "²" where a number is expected: ``str.isdigit()`` says yes and ``int()`` refuses it, so
every reader that checked with the one and converted with the other raised a ValueError
(a traceback, a 500) instead of its own answer. Each reader below had that bug; each now
answers as it does for any other text that is not a number (``core/integers.ascii_int``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleetwarden.app.auditing import parse_anchors
from fleetwarden.core.actors import PathElement
from fleetwarden.core.ignoring import parse_jq_path, resolve_pointer
from fleetwarden.formats import bootstrap, karpenter
from fleetwarden.formats.desired import SourceFile, read_desired
from fleetwarden.formats.documents import parse_yaml_documents
from fleetwarden.formats.errors import FormatError
from fleetwarden.presenting.rendering import make_console

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-cpu, operator: Gte, values: ["²"]}
        - {key: karpenter.k8s.aws/instance-memory, operator: Gte, values: ["8192"]}
"""


def test_a_kubelet_max_pods_flag_of_superscript_digits_is_not_a_number():
    """Refused as the kubelet refuses any other text that is not a number (it does not start):
    the reader's own error, never int()'s."""
    with pytest.raises(bootstrap.KubeletFlagError, match="not an integer"):
        bootstrap.from_kubelet_flags("/etc/eks/bootstrap.sh c --kubelet-extra-args '--max-pods=²'")
    assert bootstrap.from_kubelet_flags("--max-pods=58").max_pods == 58


def test_a_karpenter_gte_bound_of_superscript_digits_is_refused_as_karpenter_refuses_it():
    """The NodePool CRD takes one non-negative integer for Gt/Lt/Gte/Lte: "²" is not one
    (str.isdigit says it is); a plain number is read, Gte 8192 as Gt 8191."""
    with pytest.raises(FormatError, match=r"single non-negative integer value, got \['²'\]"):
        karpenter.read_pools(parse_yaml_documents("nodepool.yaml", NODEPOOL))
    fine = NODEPOOL.replace('values: ["²"]', 'values: ["2"]')
    (pool,) = karpenter.read_pools(parse_yaml_documents("nodepool.yaml", fine)).pools
    got = {(r.key, r.operator, r.values) for r in pool.requirements}
    assert ("karpenter.k8s.aws/instance-memory", "Gt", ("8191",)) in got


def test_terraform_sizes_of_superscript_digits_are_a_precise_problem():
    text = """\
resource "aws_eks_node_group" "g" {
  cluster_name    = "prod"
  node_group_name = "g"
  scaling_config {
    min_size     = "²"
    max_size     = "3"
    desired_size = 1
  }
}
"""
    read = read_desired([SourceFile("main.tf", text.encode())])
    assert read.pools == []
    (skip,) = read.skipped
    assert skip.problem and 'min_size: expected a whole number, got "²"' in skip.reason


def test_ignore_paths_with_superscript_indexes_match_nothing_or_are_refused():
    assert resolve_pointer({"a": [1, 2, 3]}, ["a", "²"]) == []
    assert resolve_pointer({"a": [1, 2, 3]}, ["a", "2"]) == [("a", 2)]
    with pytest.raises(ValueError, match="expected an index"):
        parse_jq_path(".a[²]")
    with pytest.raises(ValueError, match="takes a list index"):
        PathElement.decode("i:²")


def test_an_audit_anchor_with_a_superscript_seq_is_a_clear_error():
    with pytest.raises(ValueError, match="expected SEQ:HASH"):
        parse_anchors(["²:" + "a" * 64])
    assert parse_anchors(["2:" + "a" * 64]) == {2: "a" * 64}


def test_a_columns_variable_of_superscript_digits_is_no_width(monkeypatch: pytest.MonkeyPatch):
    # rich itself int()s COLUMNS once isdigit() says yes: the CLI drops such a value first
    env = {**os.environ, "COLUMNS": "²", "LINES": "①"}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "fleetwarden"), "scan", "--help"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "Usage" in done.stdout
    monkeypatch.setenv("COLUMNS", "77")
    assert make_console().width == 77
