"""``upgrade plan`` (``plan_live``) and a pool name defined more than once in the cluster: as
``scan`` compares none of its definitions, it is not planned -- refused naming both files and
why -- rather than planned against the definition read last (its version, its size, its
owner), a silent guess. A pool defined once is planned against its definition."""

from __future__ import annotations

import pytest

from fleetwarden.app.upgrading import plan_live
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.ports.kube import ListResult

POOL_LABEL = "eks.amazonaws.com/nodegroup"


class _Nodes:
    """The one call ``plan_live`` makes: the cluster's nodes."""

    def __init__(self, *pools: str) -> None:
        self.items = [
            {
                "metadata": {"name": f"{p}-{i}", "labels": {POOL_LABEL: p}},
                "status": {"nodeInfo": {"kubeletVersion": "v1.29.4"}},
            }
            for i, p in enumerate(pools)
        ]
        self.calls = 0

    async def list(self, path: str, **_: object) -> ListResult:
        self.calls += 1
        return ListResult(self.items, "1")


def _spec(name: str, source: str, cluster: str | None = "c1", size: int = 1) -> NodePoolSpec:
    return NodePoolSpec(name=name, cluster=cluster, source=source, min_size=size, max_size=size)


@pytest.mark.parametrize("second_cluster", ["c1", None])  # a file naming no cluster is c1's here
async def test_a_pool_defined_twice_is_not_planned_and_the_refusal_says_why(second_cluster):
    specs = [_spec("general", "eksctl.yaml"), _spec("general", "general.tf", second_cluster, 3)]
    kube = _Nodes("general", "general")
    with pytest.raises(ValueError) as raised:
        await plan_live(kube, "c1", "general", "1.30", specs=[*specs, _spec("web", "w.yaml")])
    said = str(raised.value)
    assert said.startswith("c1/general is not planned: pool 'general' of cluster 'c1' is defined")
    assert "defined 2 times (eksctl.yaml, general.tf)" in said and "none is compared" in said
    assert kube.calls == 0  # refused before the cluster is asked anything


async def test_a_pool_defined_once_is_planned_against_its_definition():
    specs = [_spec("general", "eksctl.yaml", size=3), _spec("general", "other.yaml", "c2")]
    plan = await plan_live(_Nodes("general"), "c1", "general", "1.30", specs=specs)
    assert plan.spec is not None and plan.spec.source == "eksctl.yaml"
    assert plan.old_nodes == ("general-0",)
