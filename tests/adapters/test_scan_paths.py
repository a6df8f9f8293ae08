"""The fast scan path gives exactly the plain path's findings, and the plain path's errors.

Fast: ``adapters.nodedumps.read_node_file`` (the items array streamed in small chunks, the
dump split over two or three processes) and ``core.diffing.diff_cluster`` (shared checks); and
what ``scan`` runs, ``nodedumps.summarise_node_file`` with a ``diffing.ClusterSummariser``:
the dump cut into many ranges, each process feeding the rows of the ranges it takes into a
summary builder (reading only the labels the summary reads, once it knows them), the range
summaries merged (``node_summaries.merge_clusters``) and diffed (``diffing.diff_summary``) --
the same as summarising whole node lists (``diffing.summarise_cluster``).
Plain: ``formats.nodes.parse_document`` (the whole document decoded at once), every pool
diffed node by node (``tests/support/plain_diff.py``). Over every real node dump in
../shared/realdata/nodes and hypothesis-drawn dumps (key order, unicode, escaped quotes and
brackets in strings, missing fields, nulls, empty items, long strings, nested arrays), and
over damaged dumps: the same one-line ``FormatError``.
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.adapters import nodedumps
from fleetwarden.core.diffing import (
    ClusterSummariser,
    diff_cluster,
    diff_summary,
    group_nodes,
    summarise_cluster,
)
from fleetwarden.core.findings import Finding
from fleetwarden.core.node_summaries import merge_clusters
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import NodePoolSpec, Taint
from fleetwarden.core.rules import DiffOptions
from fleetwarden.formats import nodes as nodes_fmt
from fleetwarden.formats import nodestream
from fleetwarden.formats.errors import FormatError
from tests.conftest import realdata_files
from tests.formats.test_nodes_stream import (
    TEXT,
    _replace_last,
    _write_big,
    distinct_names,
    node_objects,
)
from tests.support.plain_diff import plain_cluster_findings


def _specs_for(nodes: list[ObservedNode]) -> list[NodePoolSpec]:
    """Desired pools for the groups the nodes carry, each stating facts some nodes miss (so
    there are findings to compare), plus one pool with no node (COUNT)."""
    specs = [
        NodePoolSpec(
            name=group,
            cluster="c",
            labels={"kubernetes.io/os": "linux", "team": "x"},
            taints=(Taint("dedicated", "x", "NoSchedule"),),
            kubernetes_version="1.29",
            instance_types=("m5.large",),
            os_family="AmazonLinux2",
            disk_size_gib=50,
            allocatable={"pods": "110"} if i % 2 else {},
        )
        for i, group in enumerate(g for g in group_nodes(nodes) if g is not None)
    ]
    return [*specs[:-1], NodePoolSpec(name="empty", cluster="c", desired_size=2)]


def _plain(path: Path) -> list[ObservedNode]:
    return nodes_fmt.parse_document(str(path), path.read_bytes())


def _fast(path: Path, workers: int) -> list[ObservedNode]:
    return nodedumps.read_node_file(str(path), limit=2**30, workers=workers)


def _findings(nodes: list[ObservedNode], specs: list[NodePoolSpec]) -> list[Finding]:
    return diff_cluster("c", specs, nodes, options=DiffOptions()).findings


def _summarised(path: Path, specs: list[NodePoolSpec], workers: int) -> list[Finding]:
    """What ``scan`` does (every process feeds a summary builder the rows it reads, the
    summaries merged), checked against summarising whole node lists."""
    options = DiffOptions()
    got = []
    for summarise in (
        ClusterSummariser(tuple(specs), options),
        partial(summarise_cluster, specs, options=options),
    ):
        summary = nodedumps.summarise_node_file(
            str(path), summarise, merge_clusters, limit=2**30, workers=workers
        )
        got.append(diff_summary("c", specs, summary, options=options).findings)
    assert got[0] == got[1]
    return got[0]


@pytest.fixture()
def small_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of a few KiB, splits of any size and ranges of a few KiB: real dumps are small."""
    monkeypatch.setattr(nodestream, "CHUNK_BYTES", 2048)
    monkeypatch.setattr(nodedumps, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(nodedumps, "RANGE_BYTES", 3000)


@pytest.mark.parametrize("workers", [2, 3])
def test_small_steps_really_split_a_dump_whose_items_outsize_the_tail_ranges(
    tmp_path, small_steps, monkeypatch, workers
):
    """The tests above run with ranges of a few KiB, smaller than one item of ``_write_big``
    in the last, quarter-size ranges: two cuts then fall in one item. The plan drops the
    second cut rather than the whole split, so the dump is still read by several processes
    (and these tests test the split)."""
    path, _raw = _write_big(tmp_path, 400)
    split: list[bool] = []
    read_split = nodedumps._read_split

    def spy(*args: Any, **kwargs: Any) -> Any:
        got = read_split(*args, **kwargs)
        split.append(got is not None)
        return got

    monkeypatch.setattr(nodedumps, "_read_split", spy)
    got = nodedumps.read_node_file(str(path), limit=2**30, workers=workers)
    assert split == [True]
    assert [n.name for n in got] == [f"node-{i}" for i in range(400)]


@pytest.mark.parametrize("path", realdata_files("nodes"), ids=lambda p: p.name)
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_every_real_dump_gives_the_plain_path_s_findings(realdata, path, workers, small_steps):
    plain = _plain(path)
    fast = _fast(path, workers)
    assert fast == plain
    specs = _specs_for(plain)
    got = _findings(fast, specs)
    assert got == plain_cluster_findings("c", specs, plain, DiffOptions())
    assert _summarised(path, specs, workers) == got
    if group_nodes(plain):  # not a lone control-plane node: there was node-level drift to see
        assert any(f.nodes for f in got)


@st.composite
def odd_dumps(draw: st.DrawFn) -> bytes:
    """Lists of nodes as kubectl, jq or Go print them, with the odd cases added: nulls for
    objects, missing sections, long strings, nested arrays in skipped fields, pool labels."""
    items: list[Any] = draw(st.lists(node_objects(odd_amounts=False), max_size=7))
    distinct_names(items)
    for node in items:
        node["kind"] = "Node"
        node["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] = draw(st.sampled_from("ab"))
        for section in ("spec", "status"):
            choice = draw(st.sampled_from(["keep", "keep", "null", "missing"]))
            if choice == "null":
                node[section] = None
            elif choice == "missing":
                del node[section]
        node["metadata"]["annotations"]["long"] = draw(TEXT) * draw(st.integers(0, 3000))
        node["extra"] = [[[draw(TEXT)], {"x": [1, [2, "]}"]]}], []]
    pairs = [("apiVersion", "v1"), ("kind", "List"), ("metadata", {}), ("items", items)]
    body = dict(draw(st.permutations(pairs)))
    indent = draw(st.sampled_from([None, 2, 4]))
    return json.dumps(body, indent=indent, ensure_ascii=draw(st.booleans())).encode()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(odd_dumps(), st.sampled_from([1, 2]))
def test_drawn_dumps_give_the_plain_path_s_findings(tmp_path, small_steps, raw, workers):
    path = tmp_path / "c.json"
    path.write_bytes(raw)
    plain = _plain(path)
    fast = _fast(path, workers)
    assert fast == plain
    specs = _specs_for(plain)
    want = plain_cluster_findings("c", specs, plain, DiffOptions())
    assert _findings(fast, specs) == want
    assert _summarised(path, specs, workers) == want


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(odd_dumps(), st.data())
def test_damaged_dumps_give_the_plain_path_s_error(tmp_path, small_steps, raw, data):
    """Cut anywhere or one byte changed: the fast path fails exactly as the plain path does
    (the same one-line message naming the file and where), or both read the same nodes."""
    at = data.draw(st.integers(0, max(len(raw) - 1, 0)))
    damage = data.draw(st.sampled_from([b"", b"{", b"]", b'"', b"\\", b"\xff", b",", b"7"]))
    bad = raw[:at] + damage + (raw[at + 1 :] if damage else b"")
    path = tmp_path / "c.json"
    path.write_bytes(bad)
    try:
        want: Any = _plain(path)
    except FormatError as exc:
        want = str(exc)
    for workers in (1, 2):
        try:
            got: Any = _fast(path, workers)
        except FormatError as exc:
            got = str(exc)
            assert "\n" not in got
        assert got == want
    if isinstance(want, str):  # what scan runs fails alike
        with pytest.raises(FormatError) as err:
            _summarised(path, [], 2)
        assert str(err.value) == want


def test_a_control_character_in_a_dump_that_is_not_json_is_a_one_line_error(tmp_path):
    """Not JSON (a stray "]" first), so read as YAML, whose reader refuses DEL with a message
    over two lines: the error is still one line, the same from both paths."""
    path = tmp_path / "c.json"
    path.write_bytes(b']"kind": "List", "items": [{"metadata": {"name": "\x7f"}}]}')
    messages = set()
    for read in (_plain, lambda p: _fast(p, 2)):
        with pytest.raises(FormatError) as err:
            read(path)
        messages.add(str(err.value))
    (message,) = messages
    assert "\n" not in message and "control characters are not allowed" in message


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_told_late_give_the_same_summary(tmp_path, small_steps, workers):
    """Workers started before the desired state is read (``start_split``) read their first
    ranges with every label, and only the labels the summary reads once they are told how
    to summarise: the same findings as the plain path."""
    path, _raw = _write_big(tmp_path, 400)
    plain = _plain(path)
    options = DiffOptions(pool_labels=("pool",))
    specs = [
        NodePoolSpec(
            name=f"p{i}", cluster="c", labels={"x": "y", "gone": "z"}, kubernetes_version="1.29"
        )
        for i in range(2)
    ]  # p2: nodes of no desired pool
    want = plain_cluster_findings("c", specs, plain, options)
    assert {f.field for f in want} >= {"labels.x", "labels.gone", "kubeletVersion", "pool"}
    nodedumps.start_split(str(path), limit=2**30, workers=workers)
    time.sleep(0.5)  # the workers read ranges before they are told how to summarise them
    summary = nodedumps.summarise_node_file(
        str(path), ClusterSummariser(tuple(specs), options), merge_clusters, limit=2**30,
        workers=workers,
    )  # fmt: skip
    assert diff_summary("c", specs, summary, options=options).findings == want


def test_a_compared_label_that_is_not_a_string_is_read_as_the_plain_path_reads_it(
    tmp_path, small_steps
):
    """Only the labels a summary reads are decoded, as strings: a number there makes the
    stream refuse the dump, and the whole reader reads it (``7`` as the text ``"7"``)."""
    items = [
        {
            "kind": "Node",
            "metadata": {"name": f"n{i}", "labels": {"team": 7, "pool": "a", "other": 1}},
        }
        for i in range(40)
    ]
    path = tmp_path / "c.json"
    path.write_bytes(json.dumps({"kind": "List", "items": items}, indent=4).encode())
    spec = NodePoolSpec(name="a", cluster="c", labels={"team": "x"})
    options = DiffOptions(pool_labels=("pool",))
    plain = _plain(path)
    want = plain_cluster_findings("c", [spec], plain, options)
    assert any(f.field == "labels.team" and f.actual == "7" for f in want)
    for workers in (1, 2):
        summary = nodedumps.summarise_node_file(
            str(path), ClusterSummariser((spec,), options), merge_clusters, limit=2**30,
            workers=workers,
        )  # fmt: skip
        assert diff_summary("c", [spec], summary, options=options).findings == want


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("twice", ["node-7", "cp-0"])
def test_a_node_name_in_two_ranges_gets_the_plain_path_s_error(
    tmp_path, small_steps, monkeypatch, workers, twice
):
    """Two dumps put together: a name seen again in another range (another process) is
    refused, the whole reader names it -- a control-plane node too, which no summary keeps."""
    path, raw = _write_big(tmp_path, 400)
    monkeypatch.setattr(nodedumps, "RANGE_BYTES", len(raw) // 9)  # the last ranges > one item
    cp = b'"labels": {"node-role.kubernetes.io/control-plane": "",'
    raw = raw.replace(b'"node-0"', b'"cp-0"', 1).replace(b'"labels": {', cp, 1)
    raw = _replace_last(raw, b'"node-399"', f'"{twice}"'.encode())
    path.write_bytes(raw)
    with pytest.raises(FormatError) as err:
        _plain(path)
    want = str(err.value)
    assert f"node '{twice}' is listed twice" in want
    specs = [NodePoolSpec(name="p0", cluster="c", kubernetes_version="1.30")]
    options = DiffOptions(pool_labels=("pool",))
    with pytest.raises(FormatError) as err:
        nodedumps.summarise_node_file(
            str(path), ClusterSummariser(tuple(specs), options), merge_clusters, limit=2**30,
            workers=workers,
        )  # fmt: skip
    assert str(err.value) == want


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sets(st.sampled_from(["n0", "n1", "n2", "n3", "n4", "n5"]), max_size=4), max_size=4)
)
def test_one_cluster_s_dumps_are_refused_exactly_when_they_share_a_node(names):
    """``refuse_shared_nodes``: an error naming the node and both files iff a name is in two
    dumps of one cluster; disjoint dumps pass."""
    from fleetwarden.adapters.files import refuse_shared_nodes

    paths = [f"d{i}.json" for i in range(len(names))]
    shared = {n for i, a in enumerate(names) for b in names[i + 1 :] for n in a & b}
    if not shared:
        refuse_shared_nodes(paths, names)
        return
    with pytest.raises(FormatError) as err:
        refuse_shared_nodes(paths, names)
    (node,) = [n for n in shared if f"node {n!r}" in str(err.value)]
    holders = [p for p, found in zip(paths, names, strict=True) if node in found]
    assert err.value.path == holders[1] and holders[0] in err.value.reason
