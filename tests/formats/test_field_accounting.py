"""An account of every field: each attribute of every real pool definition in the corpus is
compared, unresolved or ignored with a reason — none is dropped without a trace — and every
desired value has a provenance (issue #10, part 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwarden.adapters import files
from fleetwarden.core.pools import FieldStatus, NodePoolSpec
from tests.conftest import REALDATA

FORMATS = ("eksctl", "karpenter", "capi", "terraform")


def _pools(category: str) -> list[NodePoolSpec]:
    root = REALDATA / category
    # the Karpenter files are unrelated examples, most of them NodePools named `default`: one
    # tree would refuse all but one of each name, so each file is read as its own tree
    trees = sorted(root.glob("*.yaml")) if category == "karpenter" else [root]
    loaded = files.load_desired([files.PathArg(None, tree) for tree in trees])
    return loaded.pools


def missing_provenance(spec: NodePoolSpec) -> list[str]:
    """Facts the spec states without saying where they came from."""
    facts = {
        "instanceTypes": bool(spec.instance_types),
        "diskSizeGiB": spec.disk_size_gib is not None,
        "minSize": spec.min_size is not None,
        "maxSize": spec.max_size is not None,
        "desiredSize": spec.desired_size is not None,
        "kubernetesVersion": spec.kubernetes_version is not None,
        "osImage": spec.os_family is not None,
    }
    facts.update({f"labels.{k}": True for k in spec.labels})
    facts.update({t.field_name: True for t in spec.taints})
    facts.update({f"allocatable.{k}": True for k in spec.allocatable})
    facts.update({f"requirements.{r.key}": True for r in spec.requirements})
    return sorted(f for f, stated in facts.items() if stated and f not in spec.provenance)


@pytest.mark.parametrize("category", FORMATS)
def test_every_attribute_of_every_real_pool_is_accounted_for(realdata, category):
    pools = _pools(category)
    assert pools, f"no pools read from {category}"
    unaccounted = [
        f"{Path(p.source).name} {p.name}: {a.path}"
        for p in pools
        for a in p.account
        if a.status is FieldStatus.UNACCOUNTED
    ]
    assert unaccounted == []
    assert all(p.account for p in pools), [p.name for p in pools if not p.account]


@pytest.mark.parametrize("category", FORMATS)
def test_every_desired_value_of_a_real_pool_has_a_provenance(realdata, category):
    gaps = {
        f"{Path(p.source).name} {p.name}": missing
        for p in _pools(category)
        if (missing := missing_provenance(p))
    }
    assert gaps == {}
