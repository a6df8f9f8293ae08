"""The streamed node reader (formats/nodestream.py) reads exactly what the whole-document reader
reads: same nodes for every dump, the same precise error for every bad one, chunk and split
boundaries anywhere."""

from __future__ import annotations

import gc
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fleetwarden.adapters import nodedumps
from fleetwarden.formats import nodes as nodes_fmt
from fleetwarden.formats import nodestream
from fleetwarden.formats.errors import FormatError


@pytest.fixture(scope="module", params=["native", "msgspec"], autouse=True)
def chunk_reader(request: pytest.FixtureRequest) -> Any:
    """Every test twice: chunks read by the native fast path (where it is built) and by
    msgspec alone (``_native`` None), the two readers a user's install may have."""
    saved = nodestream._native
    if request.param == "native" and saved is None:
        pytest.skip("the native node reader is not built here")
    if request.param == "msgspec":
        nodestream._native = None
    yield request.param
    nodestream._native = saved


# strings that stress a byte scanner: quotes, backslashes, brackets and separators inside
# strings, non-ASCII text
TRICKY = st.sampled_from(
    ['"', "\\", "}, {", "},\n        {", "]", "[", "{", "}", ",", ":", "é", "节点", "🙂", "\t"]
)
TEXT = st.lists(st.text(max_size=6) | TRICKY, max_size=4).map("".join)
NAME = TEXT.filter(bool)
# resource amounts: Kubernetes quantities in their usual spellings
QUANTITY = st.sampled_from(["2", "1930m", "7Gi", "7910Mi", "29", "20959212Ki", "1e3", "0", "1.5"])


@st.composite
def node_objects(draw: st.DrawFn, *, odd_amounts: bool = True) -> dict[str, Any]:
    """A Node as the API serves it; ``odd_amounts``: a resource amount may be any text (a
    dump no API server wrote: both readers must refuse it alike)."""
    amount = (QUANTITY | TEXT) if odd_amounts and draw(st.integers(0, 9)) == 0 else QUANTITY
    labels = draw(st.dictionaries(TEXT, TEXT, max_size=5))
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": draw(st.sampled_from(["Node", "Node", "Node", "Pod"])),
        "metadata": {
            "name": draw(NAME),
            "labels": labels,
            "annotations": draw(st.dictionaries(TEXT, TEXT, max_size=3)),
        },
        "spec": {
            "taints": draw(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "key": TEXT,
                            "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
                        },
                        optional={"value": TEXT | st.none(), "timeAdded": TEXT},
                    ),
                    max_size=3,
                )
            ),
        },
        "status": {
            "allocatable": draw(st.dictionaries(TEXT, amount, max_size=3)),
            "capacity": draw(st.dictionaries(TEXT, amount, max_size=3)),
            "nodeInfo": {"kubeletVersion": draw(TEXT), "osImage": draw(TEXT)},
            "images": [{"names": [draw(TEXT)], "sizeBytes": 1}],
            "conditions": [{"type": "Ready", "message": draw(TEXT)}],
        },
    }
    if draw(st.booleans()):
        node["spec"]["unschedulable"] = draw(st.booleans())
    if draw(st.booleans()):
        del node["kind"]
    return node


@st.composite
def dumps(draw: st.DrawFn) -> bytes:
    """A node dump as kubectl, jq or Go would print it: List/NodeList in any key order (the
    kind before or after the items), empty items, items null, or a single Node."""
    shape = draw(st.sampled_from(["list", "list", "list", "empty", "null", "node"]))
    if shape == "node":
        body: Any = draw(node_objects())
        body["kind"] = "Node"
    else:
        items: Any = {"list": draw(st.lists(node_objects(), max_size=6)), "empty": []}.get(shape)
        pairs = [
            ("apiVersion", "v1"),
            ("kind", draw(st.sampled_from(["List", "NodeList"]))),
            ("metadata", {"resourceVersion": draw(TEXT)}),
            ("items", items),
        ]
        body = dict(draw(st.permutations(pairs)))
    indent = draw(st.sampled_from([None, 1, 2, 4]))
    ascii_only = draw(st.booleans())
    return json.dumps(body, indent=indent, ensure_ascii=ascii_only).encode()


def distinct_names(items: list[dict[str, Any]]) -> None:
    """Each node a name of its own (drawn names may repeat: a dump both readers refuse)."""
    for i, item in enumerate(items):
        item["metadata"]["name"] += f"#{i}"


def _reference(raw: bytes) -> list[Any]:
    return nodes_fmt.nodes_of_body("x.json", json.loads(raw))


def _streamed(raw: bytes) -> list[Any]:
    return nodes_fmt.stream_nodes(lambda offset: nodes_fmt._bytes_reader(raw, offset))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dumps(), st.integers(8, 600))
def test_streamed_nodes_are_exactly_the_json_loads_nodes(raw, chunk):
    """Any chunk size: windows that end inside strings, items longer than a window."""
    try:
        want = _reference(raw)
    except FormatError:
        want = None
    saved = nodestream.CHUNK_BYTES
    nodestream.CHUNK_BYTES = chunk
    try:
        assert (nodes_fmt.parse_nodes("x.json", raw) if want is not None else None) == want
        try:
            got = _streamed(raw)
        except nodestream.Unstreamable:
            return  # refused: parse_nodes above took the whole-document reader
        assert got == want
    finally:
        nodestream.CHUNK_BYTES = saved


@settings(max_examples=80, deadline=None)
@given(
    st.lists(node_objects(odd_amounts=False), min_size=1, max_size=6), st.sampled_from([1, 2, 4])
)
def test_a_plain_list_is_streamed_not_refused(items, indent):
    """The fast path really runs: a List of well-formed Nodes is never handed back."""
    distinct_names(items)
    for item in items:
        item["kind"] = "Node"
    raw = json.dumps({"apiVersion": "v1", "items": items, "kind": "List"}, indent=indent)
    assert _streamed(raw.encode()) == _reference(raw.encode())


@settings(max_examples=80, deadline=None)
@given(st.lists(node_objects(odd_amounts=False), min_size=2, max_size=6), st.data())
def test_a_split_anywhere_gives_the_same_nodes_or_is_refused(items, data):
    """Byte-range splits (the two-process path): a guessed split point either proves right
    and the two ranges give exactly the nodes, or the first range refuses it."""
    distinct_names(items)
    for item in items:
        item["kind"] = "Node"
    compact = data.draw(st.booleans())
    raw = json.dumps(
        {"apiVersion": "v1", "items": items, "kind": "List"}, indent=None if compact else 4
    ).encode()
    want = _reference(raw)
    head = nodestream.read_head(nodes_fmt._bytes_reader(raw, 0))
    assume(head.separator is not None)
    assert head.separator is not None
    offset = data.draw(st.integers(head.items_at, len(raw) - 1))
    guess = nodestream.split_point(raw[offset:], offset, head.separator)
    assume(guess is not None and guess > head.items_at)
    assert guess is not None
    try:
        first = nodestream.read_items(
            nodes_fmt._bytes_reader(raw, head.items_at),
            start=head.items_at,
            separator=head.separator,
            stop=guess,
        )
        rest = nodestream.read_items(
            nodes_fmt._bytes_reader(raw, guess), start=guess, separator=head.separator
        )
    except nodestream.Unstreamable:
        # "},{" inside a string of a compact dump looks like a separator: refused, never
        # taken; a pretty-printed dump's separator carries its indentation and is unique
        assert compact
        return
    assert first.nodes() + rest.nodes() == want


def test_a_guess_inside_an_item_is_refused():
    """A compact dump's "},{" inside a nested list looks like a separator: never taken."""
    items = [
        {"metadata": {"name": f"n{i}"}, "status": {"conditions": [{"a": 1}, {"b": 2}]}}
        for i in range(3)
    ]
    raw = json.dumps({"kind": "List", "items": items}, separators=(",", ":")).encode()
    head = nodestream.read_head(nodes_fmt._bytes_reader(raw, 0))
    inner = raw.index(b'{"b"')
    with pytest.raises(nodestream.Unstreamable):
        nodestream.read_items(
            nodes_fmt._bytes_reader(raw, head.items_at),
            start=head.items_at,
            separator=head.separator,
            stop=inner,
        )


def _write_big(tmp_path: Path, count: int) -> tuple[Path, bytes]:
    items = [
        {
            "kind": "Node",
            "metadata": {"name": f"node-{i}", "labels": {"pool": f"p{i % 3}", "x": '"}, {"'}},
            "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "1930m"},
                "nodeInfo": {"kubeletVersion": "v1.30.4", "osImage": "AL2023"},
                "images": [{"names": [f"img{i}:{j}" for j in range(20)]}],
            },
        }
        for i in range(count)
    ]
    raw = json.dumps({"apiVersion": "v1", "items": items, "kind": "List"}, indent=4).encode()
    path = tmp_path / "nodes.json"
    path.write_bytes(raw)
    return path, raw


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_dump_split_over_processes_reads_every_node_once(tmp_path, monkeypatch, workers):
    path, raw = _write_big(tmp_path, 400)
    monkeypatch.setattr(nodedumps, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(nodestream, "CHUNK_BYTES", 4096)
    got = nodedumps.read_node_file(str(path), limit=2**30, workers=workers)
    assert got == _reference(raw)
    assert [n.name for n in got] == [f"node-{i}" for i in range(400)]


@pytest.mark.parametrize("workers", [2, 3])
def test_a_dump_in_many_ranges_with_smaller_last_ones_reads_every_node_once(
    tmp_path, monkeypatch, workers
):
    """Ranges far smaller than the dump (the last ``workers`` of them cut in quarters) are
    taken by whichever process is free: every node once, in order."""
    path, raw = _write_big(tmp_path, 400)
    monkeypatch.setattr(nodedumps, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(nodedumps, "RANGE_BYTES", len(raw) // 9)
    monkeypatch.setattr(nodestream, "CHUNK_BYTES", 4096)
    got = nodedumps.read_node_file(str(path), limit=2**30, workers=workers)
    assert got == _reference(raw)


@given(size=st.integers(1, 2**34), workers=st.integers(1, 8))
def test_the_ranges_cover_the_dump_in_order_and_the_last_ones_are_smaller(size, workers):
    cuts = nodedumps._cuts(size, workers)
    bounds = [0, *cuts, size]
    lengths = [b - a for a, b in itertools.pairwise(bounds)]
    assert cuts == sorted(cuts) and all(0 <= c <= size for c in cuts)
    full = max(workers, -(-size // nodedumps.RANGE_BYTES))
    assert len(lengths) >= full
    if full > workers:  # the last ranges: a quarter of the others (give or take a byte)
        tail = lengths[-workers * nodedumps._TAIL_PIECES :]
        assert len(lengths) == full - workers + workers * nodedumps._TAIL_PIECES
        assert max(tail) <= max(lengths[: -len(tail)]) // nodedumps._TAIL_PIECES + 1


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (lambda raw: raw[: len(raw) // 2], "invalid JSON"),  # truncated mid-way
        (lambda raw: raw.replace(b'"node-321"', b'"node-321', 1), "invalid JSON"),
        (lambda raw: raw.replace(b'"1930m"', b"[1]", 1), "items[0].status.allocatable.cpu"),
        (lambda raw: raw.replace(b'"NoSchedule"', b'"Sometimes"', 1), "effect"),
        (lambda raw: raw + b"{}", "invalid JSON"),
        (lambda raw: raw.replace(b'"List"', b'"PodList"'), "kind"),
        (  # two dumps put together: names again, in another range of a split read
            lambda raw: _replace_last(raw, b'"node-399"', b'"node-3"'),
            "items[399].metadata.name: node 'node-3' is listed twice (items[3] and items[399])",
        ),
        (  # twice in one chunk
            lambda raw: raw.replace(b'"node-1"', b'"node-0"', 1),
            "items[1].metadata.name: node 'node-0' is listed twice",
        ),
        (  # kubectl get nodes,pods: the last item a Pod
            lambda raw: _replace_last(raw, b'"kind": "Node"', b'"kind": "Pod"'),
            "items[399].kind: a 'Pod' item, not a Node",
        ),
        (
            lambda raw: raw.replace(b'"1930m"', b'"lots"', 1),
            "items[0].status.allocatable.cpu: node 'node-0': not a Kubernetes quantity: 'lots'",
        ),
        (  # the last node: in the last range of a split read, a map of its own
            lambda raw: _replace_last(raw, b'"1930m"', b'"12XB"'),
            "items[399].status.allocatable.cpu: node 'node-399': not a Kubernetes quantity",
        ),
        (
            lambda raw: _replace_last(raw, b'"v1.30.4"', b"130"),
            "items[399].status.nodeInfo.kubeletVersion: node 'node-399': expected a string",
        ),
    ],
)
def test_a_bad_big_dump_gets_the_whole_reader_s_precise_error(tmp_path, damage, needle):
    """Errors are never the stream's: refused, the file is read whole and the problem named
    with the file and the line or the item and field (one line, no traceback)."""
    path, raw = _write_big(tmp_path, 400)
    path.write_bytes(damage(raw))
    for workers in (1, 2):
        with pytest.raises(FormatError) as err:
            nodedumps.read_node_file(str(path), limit=2**30, workers=workers)
        assert err.value.path == str(path)
        assert needle in str(err.value)
        assert "\n" not in str(err.value)


def _replace_last(raw: bytes, old: bytes, new: bytes) -> bytes:
    at = raw.rindex(old)
    return raw[:at] + new + raw[at + len(old) :]


def test_numbers_as_label_values_are_read_as_the_whole_reader_reads_them(tmp_path):
    path, raw = _write_big(tmp_path, 50)
    path.write_bytes(raw.replace(b'"p1"', b"7"))
    got = nodedumps.read_node_file(str(path), limit=2**30)
    assert got == _reference(path.read_bytes())
    assert got[1].labels["pool"] == "7"


def test_items_null_is_an_empty_list():
    """Go marshals an empty slice as null: a NodeList with no nodes, not an error."""
    assert nodes_fmt.parse_nodes("x.json", b'{"kind": "NodeList", "items": null}') == []


def test_invalid_utf8_in_a_skipped_field_is_still_an_error(tmp_path):
    path, raw = _write_big(tmp_path, 20)
    path.write_bytes(raw.replace(b"img3:4", b"img3:\xff", 1))
    with pytest.raises(FormatError) as err:
        nodedumps.read_node_file(str(path), limit=2**30)
    assert "UTF-8" in str(err.value) or "invalid JSON" in str(err.value)


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_started_early_are_the_ones_that_read_the_dump(tmp_path, monkeypatch, workers):
    """``start_split`` (what ``scan`` calls before it reads the desired state) starts the
    workers; the read then collects their ranges: every node once, in order."""
    path, raw = _write_big(tmp_path, 400)
    monkeypatch.setattr(nodedumps, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(nodestream, "CHUNK_BYTES", 4096)
    nodedumps.start_split(str(path), limit=2**30, workers=workers)
    started = nodedumps._STARTED[(str(path), workers)]
    assert all(proc.is_alive() or proc.exitcode == 0 for proc, _ in started.workers)
    got = nodedumps.read_node_file(str(path), limit=2**30, workers=workers)
    assert not nodedumps._STARTED  # collected, not started again
    assert got == _reference(raw)
    assert [n.name for n in got] == [f"node-{i}" for i in range(400)]
    assert all(proc.exitcode is not None for proc, _ in started.workers)


def test_a_bad_dump_read_by_early_workers_gets_the_whole_reader_s_error(tmp_path, monkeypatch):
    path, raw = _write_big(tmp_path, 400)
    path.write_bytes(raw.replace(b'"NoSchedule"', b'"Sometimes"', 390))  # in the 2nd half too
    monkeypatch.setattr(nodedumps, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(nodestream, "CHUNK_BYTES", 4096)
    nodedumps.start_split(str(path), limit=2**30, workers=2)
    with pytest.raises(FormatError) as err:
        nodedumps.read_node_file(str(path), limit=2**30, workers=2)
    assert "items[0].spec.taints[0].effect" in str(err.value)
    assert not nodedumps._STARTED


def test_without_fork_a_big_dump_is_read_in_one_stream(tmp_path, monkeypatch):
    """Where processes cannot be forked (Windows) nothing is split: the same nodes, one
    process."""
    path, raw = _write_big(tmp_path, 100)
    monkeypatch.setattr(nodedumps, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(nodedumps, "_CAN_FORK", False)
    monkeypatch.setattr(nodedumps, "_Split", None)  # starting a worker would fail loudly
    nodedumps.start_split(str(path), limit=2**30, workers=2)
    assert not nodedumps._STARTED
    assert nodedumps.read_node_file(str(path), limit=2**30, workers=2) == _reference(raw)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_command_line_run_keeps_the_nodes_it_read_till_the_exit(tmp_path, monkeypatch, workers):
    """``ending`` (``scan``): the nodes this process read are not freed before the exit (they
    go to the permanent generation, no collection walks them); what is read is the same."""
    path, raw = _write_big(tmp_path, 400)
    monkeypatch.setattr(nodedumps, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(nodedumps, "_ENDING", set())
    monkeypatch.setattr(nodestream, "CHUNK_BYTES", 4096)
    frozen = gc.get_freeze_count()
    try:
        nodedumps.start_split(str(path), limit=2**30, workers=workers, ending=True)
        got = nodedumps.read_node_file(str(path), limit=2**30, workers=workers)
        assert gc.get_freeze_count() > frozen + 400  # at least this process's nodes
    finally:
        gc.unfreeze()
    assert got == _reference(raw)
