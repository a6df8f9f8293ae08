"""``app.scanning.run_scan`` and ``app.explaining.run_explain`` over the real file adapter:
nothing to compare is refused naming what was read (unless allowed), the progress bar is
shown when asked (or on a terminal for big dumps) and advanced by each cluster's bytes, and
explain refuses a glob that matches no pool, naming the pools there are."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fleetwarden.adapters import files
from fleetwarden.app.explaining import run_explain
from fleetwarden.app.scanning import PROGRESS_MIN_BYTES, ScanRequest, run_scan
from fleetwarden.core.fleet import NothingToCompare
from fleetwarden.formats.settings import Settings

POOLS = """\
apiVersion: fleetwarden.io/v1alpha1
kind: NodePools
pools:
  general:
    provider: aws
    instanceTypes: [m5.large]
    labels: {tier: web}
clusters:
  tiny: {}
  small: {}
"""


def _node(i: int, instance: str = "m5.large") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"ip-10-0-0-{i}.ec2.internal",
            "labels": {
                "eks.amazonaws.com/nodegroup": "general",
                "node.kubernetes.io/instance-type": instance,
                "tier": "web",
            },
        },
        "spec": {},
        "status": {"allocatable": {"cpu": "1930m", "memory": "7220Mi", "pods": "29"}},
    }


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pools.yaml").write_text(POOLS)
    (tmp_path / "nodes").mkdir()
    for cluster, count in (("tiny", 2), ("small", 5)):
        items = [_node(i, "t3.medium" if cluster == "small" else "m5.large") for i in range(count)]
        dump = {"apiVersion": "v1", "kind": "List", "items": items}
        (tmp_path / "nodes" / f"{cluster}.json").write_text(json.dumps(dump))
    return tmp_path


class Bar:
    """A progress bar that notes what it was given."""

    def __init__(self) -> None:
        self.totals: list[int] = []
        self.advanced: list[int] = []

    @contextmanager
    def __call__(self, total: int) -> Iterator[Callable[[int], None]]:
        self.totals.append(total)
        yield self.advanced.append


def _request(tree: Path, **kwargs: object) -> ScanRequest:
    return ScanRequest([str(tree / "pools.yaml")], [str(tree / "nodes")], Settings(), **kwargs)  # type: ignore[arg-type]


def test_a_scan_diffs_every_cluster_and_advances_the_bar_by_each_clusters_bytes(tree):
    bar = Bar()
    report = run_scan(_request(tree, progress=True), files, progress=bar, terminal=lambda: False)
    assert {f.cluster for f in report.findings} == {"small"}  # t3.medium instead of m5.large
    sizes = sorted((tree / "nodes" / f"{c}.json").stat().st_size for c in ("tiny", "small"))
    assert bar.totals == [sum(sizes)]
    assert sorted(bar.advanced) == sizes


@pytest.mark.parametrize(
    ("progress", "terminal", "shown"),
    [(None, False, False), (None, True, False), (False, True, False), (True, False, True)],
)
def test_the_bar_shows_when_asked_or_on_a_terminal_for_big_dumps(tree, progress, terminal, shown):
    """The dumps here are far below ``PROGRESS_MIN_BYTES``: by default no bar, even on a
    terminal."""
    assert sum(p.stat().st_size for p in (tree / "nodes").iterdir()) < PROGRESS_MIN_BYTES
    bar = Bar()
    run_scan(_request(tree, progress=progress), files, progress=bar, terminal=lambda: terminal)
    assert bool(bar.totals) is shown


def test_no_pool_under_desired_is_nothing_to_compare_unless_allowed(tree):
    """Allowed, the scan runs: every pool of the dumps is one nobody declared."""
    (tree / "empty").mkdir()
    (tree / "empty" / "notes.yaml").write_text("kind: ConfigMap\n")
    request = ScanRequest([str(tree / "empty")], [str(tree / "nodes")], Settings())
    with pytest.raises(NothingToCompare, match=r"read 1 file.*kinds seen: ConfigMap"):
        run_scan(request, files, progress=Bar(), terminal=lambda: False)
    allowed = ScanRequest([str(tree / "empty")], [str(tree / "nodes")], Settings(), True)
    report = run_scan(allowed, files, progress=Bar(), terminal=lambda: False)
    assert {(f.cluster, f.field) for f in report.findings} == {("tiny", "pool"), ("small", "pool")}


def test_explain_refuses_a_glob_that_matches_no_pool_naming_the_pools(tree):
    desired = [str(tree / "pools.yaml")]
    result = run_explain(files, desired, Settings(), pool="gen*", cluster="tiny")
    assert [(p.cluster, p.name) for p in result.pools] == [("tiny", "general")]
    with pytest.raises(NothingToCompare) as caught:
        run_explain(files, desired, Settings(), pool="gpu-*")
    assert str(caught.value) == "no pool matches --pool gpu-* --cluster * (pools: general)"
    assert run_explain(files, desired, Settings(), pool="gpu-*", allow_empty=True).pools == ()


UNNAMED = """\
resource "aws_eks_node_group" "this" {
  cluster_name    = "tiny"
  node_group_name = var.name
  scaling_config {
    desired_size = 2
    max_size     = 3
    min_size     = 1
  }
}
"""


def test_a_pool_whose_name_is_unknown_is_skipped_with_why_never_given_a_name(tree):
    """``node_group_name = var.name``: the pool cannot be matched to nodes. With a named pool
    beside it, it is listed as skipped and gives no COUNT finding, and its fields are not
    counted as compared; alone, the scan compares nothing, which is an error unless
    ``--allow-empty``."""
    (tree / "tf").mkdir()
    (tree / "tf" / "main.tf").write_text(UNNAMED)
    request = ScanRequest([str(tree / "tf")], [str(tree / "nodes")], Settings())
    with pytest.raises(NothingToCompare, match=r"names are not known \('this': var.name\)"):
        run_scan(request, files, progress=Bar(), terminal=lambda: False)
    both = _request(tree)
    both = ScanRequest([str(tree / "pools.yaml"), str(tree / "tf")], both.nodes, Settings())
    report = run_scan(both, files, progress=Bar(), terminal=lambda: False)
    assert not [f for f in report.findings if f.pool == "this"]
    assert [s.reason for s in report.skipped if s.path.endswith("main.tf")] == [
        "pool defined as 'this': not compared, its name is not known (var.name), so its "
        "nodes cannot be told apart"
    ]
    # not compared at all, so none of its values is counted or listed as "unresolved (not
    # checked)": the skip above names the expression
    assert "this" not in {u.pool for u in report.unresolved}
    assert report.fields["unresolved"] == len(report.unresolved)
    explained = run_explain(files, [str(tree / "tf")], Settings()).to_json()
    assert "var.name" in explained["pools"][0]["notCompared"]
