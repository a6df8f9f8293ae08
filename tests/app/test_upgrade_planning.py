"""``upgrade plan`` (``plan_live``) and a pool name defined more than once in the cluster: as
``scan`` compares none of its definitions, it is not planned -- refused naming both files and
why -- rather than planned against the definition read last (its version, its size, its
owner), a silent guess. A pool defined once is planned against its definition."""

from __future__ import annotations

import pytest

from fleetwarden.app.upgrading import plan_live
from fleetwarden.core import workloads as wl
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.schedulability import PlannedWorkload
from fleetwarden.core.upgrades import AppObjects
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


def _node(name: str, pool: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "labels": {POOL_LABEL: pool}},
        "status": {
            "nodeInfo": {"kubeletVersion": "v1.29.4"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        },
    }


def _pinned_to_batch() -> AppObjects:
    """2 pods of 3 CPU pinned to pool ``batch``, whose one node has 4: they fit only if
    ``batch`` can grow -- which depends on its definition."""
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "jobs", "namespace": "shop"},
        "spec": {
            "replicas": 2,
            "template": {
                "spec": {
                    "nodeSelector": {POOL_LABEL: "batch"},
                    "containers": [{"name": "job", "resources": {"requests": {"cpu": "3"}}}],
                }
            },
        },
    }
    model = wl.model_from(doc)
    assert isinstance(model, wl.Workload)
    return AppObjects("shop", workloads=[PlannedWorkload(model, model.key.ref, 2)])


@pytest.mark.parametrize("order", ["eksctl first", "terraform first"])
async def test_the_schedulability_check_uses_no_definition_of_another_pool_defined_twice(order):
    """Pool ``batch`` (not the one planned) is defined in eksctl.yaml (1 node at most) and
    batch.tf (up to 5). The check was given every definition and placed the workload against
    the last one read: the plan passed ("needs a scale-up") with batch.tf last and was blocked
    with eksctl.yaml last. As ``scan`` assigns them, neither is used: the same answer in both
    orders (batch's size not known: it cannot be counted on to grow), and a note says why."""
    small, large = _spec("batch", "eksctl.yaml", size=1), _spec("batch", "batch.tf", size=5)
    twice = [small, large] if order == "eksctl first" else [large, small]
    kube = _Nodes()
    kube.items = [
        _node("general-0", "general"),
        _node("general-1", "general"),
        _node("b-0", "batch"),
    ]
    plan = await plan_live(
        kube, "c1", "general", "1.30",
        specs=[_spec("general", "eksctl.yaml", size=2), *twice], apps=[_pinned_to_batch()],
    )  # fmt: skip
    check = plan.checks[1]
    assert check.blocking == (
        "Deployment/shop/jobs: would not schedule: 2 pods request 6 cpu in all; "
        "the pool(s) batch have 4 allocatable",
    )
    files = "eksctl.yaml, batch.tf" if order == "eksctl first" else "batch.tf, eksctl.yaml"
    note = (
        f"batch: pool 'batch' of cluster 'c1' is defined 2 times ({files}): its nodes carry "
        "only the pool's name, so which definition they follow cannot be told; none is "
        "compared: its nodes are placed on as they are; no definition's labels, taints or "
        "size is used"
    )
    assert note in check.notes
