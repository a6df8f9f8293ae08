"""The dashboard's views as JSON (``presenting.dashboard``), over the demo fleet's real scan
(its desired files read by the same readers as ``scan``) and over generated findings: the
heatmap's worst severity per cell, a pool's desired facts with where each came from, and the
drift timeline's counts and MTTD/MTTR."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import orjson
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.adapters import simulated
from fleetwarden.app.watching import FleetWatcher
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.formats.nodes import parse_nodes
from fleetwarden.presenting.dashboard import (
    SEVERITY_RANK,
    cluster_list,
    drift_timeline,
    fleet_grid,
    pool_detail,
)

NOW = datetime(2026, 12, 1, 5, 0, tzinfo=UTC)


def _demo():
    fleet = simulated.build_fleet()
    desired = simulated.demo_desired()
    report = simulated.scan_fleet(fleet, desired)
    return fleet, desired, report


def test_the_demo_fleet_heatmap_shows_each_pools_worst_severity():
    _, desired, report = _demo()
    known: dict[str, set[str]] = defaultdict(set)
    for spec in desired.pools:
        if spec.cluster:
            known[spec.cluster].add(spec.name)
    grid = fleet_grid(sorted(known), known, report.findings)
    assert [r["cluster"] for r in grid["rows"]] == ["prod-asia-1", "prod-eu-1", "prod-us-1"]
    eu = next(r for r in grid["rows"] if r["cluster"] == "prod-eu-1")
    cell = dict(zip(grid["pools"], eu["cells"], strict=True))
    # seed 000's incident: general's instance type changed in the console (critical)
    assert cell["general"][0] == "critical" and eu["worst"] == "critical"
    assert cell["system"] == ["ok", 0]  # the cordoned node's taint is not drift
    assert cell["batch"] is None  # prod-eu-1 has no batch pool
    # the stray pool nobody declared is a column too (its finding is somewhere)
    assert "legacy" in grid["pools"]


_finding = st.builds(
    Finding,
    cluster=st.sampled_from(["a", "b", "c"]),
    pool=st.sampled_from(["p1", "p2", None]),
    layer=st.sampled_from(list(Layer)),
    field=st.sampled_from(["labels.x", "instanceType"]),
    expected=st.just("e"),
    actual=st.text(max_size=3),
    severity=st.sampled_from(list(Severity)),
)


@given(st.lists(_finding, max_size=30))
def test_every_cell_is_the_worst_of_its_findings_and_counts_each_once(findings):
    grid = fleet_grid(["a"], {"a": ["p1"]}, findings)
    total = 0
    for row in grid["rows"]:
        for pool, cell in zip(grid["pools"], row["cells"], strict=True):
            mine = [
                f
                for f in findings
                if f.cluster == row["cluster"] and (f.pool or "(cluster)") == pool
            ]
            if cell is None:
                assert not mine
                continue
            total += cell[1]
            assert cell[1] == len(mine)
            worst = max((SEVERITY_RANK[f.severity.value] for f in mine), default=None)
            assert cell[0] == ("ok" if worst is None else list(SEVERITY_RANK)[worst])
    assert total == len(findings)


def test_pool_detail_names_where_each_expected_value_came_from():
    fleet, desired, report = _demo()
    nodes = parse_nodes("demo", orjson.dumps(fleet.node_list("prod-eu-1")))
    doc = pool_detail("prod-eu-1", "general", desired.pools, nodes, report.findings, [])
    facts = {f["fact"]: f for f in doc["desired"]["facts"]}
    assert facts["instanceTypes"]["value"] == ["m5.large"]
    assert facts["instanceTypes"]["from"].startswith("demo/prod-eu-1/eksctl.yaml:")
    assert doc["worst"] == "critical"
    assert len(doc["nodes"]) == 20
    drifting = [n for n in doc["nodes"] if n["drifting"]]
    assert [n["name"] for n in drifting] == ["ip-10-0-1-23.eu-west-1.compute.internal"]
    assert any(f["field"] == "instanceType" for f in doc["layers"]["SPEC"])


def _event(kind, at, pool="p1", **finding):
    return {
        "type": kind,
        "at": at.isoformat().replace("+00:00", "Z"),
        "finding": {"cluster": "a", "pool": pool, **finding},
    }


def test_the_timeline_counts_opened_and_cleared_and_measures_mttd_and_mttr():
    start = NOW - timedelta(minutes=50)
    events = [
        _event("finding.appeared", start, startedAt=(start - timedelta(seconds=30)).isoformat()),
        _event(
            "finding.cleared",
            start + timedelta(minutes=10),
            startedAt=(start - timedelta(seconds=30)).isoformat(),
        ),
        # attributed to a change event: its time is the start
        _event(
            "finding.appeared",
            NOW - timedelta(minutes=1),
            pool="p2",
            cause={"time": (NOW - timedelta(minutes=1, seconds=4)).isoformat()},
        ),
        _event("finding.appeared", NOW - timedelta(hours=3)),  # outside the window
        {"type": "cluster.health", "at": NOW.isoformat()},  # not a finding event
    ]
    doc = drift_timeline(events, now=NOW, window=timedelta(hours=1), buckets=6)
    assert doc["opened"] == [0, 1, 0, 0, 0, 1] and doc["cleared"] == [0, 0, 1, 0, 0, 0]
    pools = {p["pool"]: p for p in doc["pools"]}
    assert pools["a/p1"]["mttdSeconds"] == 30.0
    assert pools["a/p1"]["mttrSeconds"] == 630.0
    assert pools["a/p2"]["mttdSeconds"] == 4.0 and pools["a/p2"]["mttrSeconds"] is None


def test_the_cluster_list_names_where_each_cluster_is_known_from_and_its_findings():
    """Dumps give a node count, findings alone a row from ``events``, and with sharding the
    clusters another replica watches are listed too, each row with its owner."""
    fleet, _desired, report = _demo()
    snapshot = {c: parse_nodes(c, orjson.dumps(fleet.node_list(c))) for c in sorted(fleet.nodes)}
    gone = Finding(
        cluster="retired-1", pool="general", layer=Layer.L1, field="labels.tier",
        expected="web", actual=None, severity=Severity.LOW,
    )  # fmt: skip
    watcher = FleetWatcher([], client_factory=lambda endpoint: None, emit=lambda event: None)
    rows = cluster_list(watcher, snapshot, [*report.findings, gone], {})
    assert [r["cluster"] for r in rows] == sorted([*snapshot, "retired-1"])
    for row in rows:
        if row["cluster"] in snapshot:
            assert row["source"] == "node dump"
            assert row["nodes"] == len(snapshot[row["cluster"]])
            count = sum(1 for f in report.findings if f.cluster == row["cluster"])
            assert row["findings"] == count > 0
    by_name = {r["cluster"]: r for r in rows}
    assert by_name["retired-1"] == {
        "cluster": "retired-1", "source": "events", "health": None, "version": None,
        "nodes": None, "synced": None, "workloadObjects": None, "findings": 1,
    }  # fmt: skip
    assert "owner" not in by_name["retired-1"]  # no sharding: no owner column
    first = sorted(snapshot)[0]
    owners = {first: "replica-a", "elsewhere-1": "replica-b"}
    sharded = {r["cluster"]: r for r in cluster_list(watcher, snapshot, [gone], owners)}
    assert sharded["elsewhere-1"]["source"] == "another replica"
    assert sharded["elsewhere-1"]["owner"] == "replica-b"
    assert sharded[first]["owner"] == "replica-a"
    assert sharded["retired-1"]["owner"] is None
    assert list(sharded) == sorted(sharded)


def test_a_pool_not_compared_is_no_ok_cell_and_its_detail_says_why():
    """``general`` of ``a`` defined in two files: its cell is ``notCompared`` (a finding on it,
    a FIGHT say, still shows its severity), and its detail gives the skips of both files, not
    the facts of the first definition as if it were the one compared."""
    from fleetwarden.core.pools import NodePoolSpec

    twice = [
        NodePoolSpec("general", "a", instance_types=("m5.large",), source="eksctl.yaml"),
        NodePoolSpec("general", "a", instance_types=("m5.xlarge",), source="general.tf"),
        NodePoolSpec("general", "b", instance_types=("m5.large",), source="eksctl.yaml"),
    ]
    known = {"a": {"general"}, "b": {"general"}}
    grid = fleet_grid(["a", "b"], known, [], {"a": ["general"]})
    assert [r["cells"] for r in grid["rows"]] == [[["notCompared", 0]], [["ok", 0]]]
    fight = Finding("a", "general", Layer.FIGHT, "labels.role", None, None, Severity.HIGH)
    grid = fleet_grid(["a"], known, [fight], {"a": ["general"]})
    assert grid["rows"][0]["cells"] == [["high", 1]]
    doc = pool_detail("a", "general", twice, [], [], [])
    assert doc["desired"] is None
    assert [(s["path"], s["pool"]) for s in doc["skipped"]] == [
        ("eksctl.yaml", "general"),
        ("general.tf", "general"),
    ]
    other = pool_detail("b", "general", twice, [], [], [])
    assert other["skipped"] == [] and other["desired"]["source"] == "eksctl.yaml"
