"""The native fast path of the node reader (formats/_nodescan.c) against nodestream's msgspec
path, chunk by chunk: whenever it answers, its rows are msgspec's rows; it never accepts a
chunk msgspec refuses; and on ordinary dumps it does answer (it is not "not sure" of
everything).

``.ci/run`` sets FW_REQUIRE_NATIVE=1: there the extension must have been built and must run.
"""

from __future__ import annotations

import json
import os
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.formats import nodestream
from tests.conftest import REALDATA
from tests.formats.test_nodes_stream import TEXT, distinct_names, node_objects

native = nodestream._native
needs_native = pytest.mark.skipif(
    native is None, reason="the native node reader is not built here (msgspec reads every chunk)"
)
KEYS = ("eks.amazonaws.com/nodegroup", "team", "kubernetes.io/os", "", "é")

REFUSED = "refused"
UNSURE = "unsure"


def test_the_native_path_is_built_where_ci_runs():
    """A fresh clone on this machine kind has gcc and AVX2: the fast path must be there, or
    the scan silently falls back to a slower reader."""
    if os.environ.get("FW_REQUIRE_NATIVE") != "1":
        pytest.skip("FW_REQUIRE_NATIVE is not set (only .ci/run requires the native reader)")
    assert native is not None


def by_msgspec(chunk: bytes, keys: tuple[str, ...] | None) -> Any:
    """As ``_decode`` reads a chunk without the native path (its UTF-8 checked first)."""
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        return REFUSED
    shared = nodestream._Shared()
    out: list[Any] = []
    try:
        items = (nodestream._ITEMS if keys is None else nodestream._items_reading(keys)).decode(
            chunk
        )
        nodestream._rows_of(items, out, shared, keys)
    except (msgspec.DecodeError, nodestream.Unstreamable):
        return REFUSED
    return out


def by_native(chunk: bytes, keys: tuple[str, ...] | None, names: set[str] | None = None) -> Any:
    shared = nodestream._Shared()
    if names is not None:
        shared.names = names
    try:
        got = native.rows(chunk, keys, shared.map_of, shared.taints_of, shared.names)
    except nodestream.Unstreamable:
        return REFUSED
    if got is None:
        return UNSURE
    if got is False:
        return REFUSED
    return got


def agrees(chunk: bytes, keys: tuple[str, ...] | None) -> tuple[Any, Any]:
    """Both answers; the native one is msgspec's, or "not sure"."""
    want = by_msgspec(chunk, keys)
    got = by_native(chunk, keys)
    if got != UNSURE:
        assert got == want, (chunk[:300], got, want)
    return got, want


def chunk_of(items: list[Any], indent: int | None, ascii_only: bool = True) -> bytes:
    return json.dumps(items, indent=indent, ensure_ascii=ascii_only).encode()


@needs_native
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(node_objects(), max_size=5),
    st.sampled_from([None, 1, 2, 4]),
    st.booleans(),
    st.sampled_from([None, KEYS]),
)
def test_native_rows_are_msgspec_rows(items, indent, ascii_only, keys):
    """Any nodes (odd kinds, odd amounts, names twice, tricky text in every field)."""
    agrees(chunk_of(items, indent, ascii_only), keys)


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(node_objects(odd_amounts=False), min_size=1, max_size=5),
    st.sampled_from([None, 2, 4]),
    st.sampled_from([None, KEYS]),
)
def test_plain_nodes_are_read_natively(items, indent, keys):
    """The fast path really answers for ordinary Nodes (no escapes in the fields it reads)."""
    distinct_names(items)
    for item in items:
        item["kind"] = "Node"
        meta = item["metadata"]
        meta["name"] = "n" + str(abs(hash(meta["name"])))
        meta["labels"] = {f"k{i}": f"v{i}" for i, _ in enumerate(meta["labels"])}
        info = item["status"]["nodeInfo"]
        info["kubeletVersion"], info["osImage"] = "v1.30.2-eks-1", "Bottlerocket OS 1.20.3"
    got, want = agrees(chunk_of(items, indent), keys)
    assert got != UNSURE and got == want


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_objects(), st.dictionaries(TEXT, JSON_VALUES, max_size=3), st.data())
def test_any_json_beside_and_instead_of_the_fields_read(item, extra, data):
    """Unread fields hold any JSON; a read field may hold a value of another type."""
    item.update(extra)
    where = data.draw(
        st.sampled_from(
            [
                ("metadata",),
                ("metadata", "name"),
                ("metadata", "labels"),
                ("spec",),
                ("spec", "taints"),
                ("spec", "unschedulable"),
                ("status",),
                ("status", "allocatable"),
                ("status", "nodeInfo"),
                ("status", "nodeInfo", "osImage"),
                ("kind",),
            ]
        )
    )
    if data.draw(st.booleans()):
        target = item
        for key in where[:-1]:
            target = target[key]
        target[where[-1]] = data.draw(JSON_VALUES)
    for keys in (None, KEYS, ("k",)):
        agrees(chunk_of([item], data.draw(st.sampled_from([None, 2]))), keys)


@needs_native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(node_objects(odd_amounts=False), min_size=1, max_size=3),
    st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.sampled_from(["delete", "insert", "replace"]),
            st.sampled_from(
                list(b'"\\{}[],: \n\t\x00\x1fa0-.eE+tfnu\x7f\x80\xa0\xa9\xbf\xc0\xc3\xe0\xed')
                + list(b"\xf0\xf4\xf5\xff")
            ),
        ),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from([None, KEYS]),
)
def test_broken_json_is_never_accepted(items, edits, keys):
    """Bytes deleted, inserted or replaced anywhere (UTF-8 broken too): the native path is
    "not sure" or gives msgspec's answer; it never reads a chunk msgspec refuses."""
    distinct_names(items)
    raw = bytearray(chunk_of(items, 2))
    for at, how, byte in edits:
        at %= len(raw) + (how == "insert")
        if how == "delete" and len(raw) > 1:
            del raw[at]
        elif how == "insert":
            raw.insert(at, byte)
        else:
            raw[at % len(raw)] = byte
    chunk = bytes(raw)
    agrees(chunk, keys)


@needs_native
@pytest.mark.parametrize(
    "text",
    [
        "0",
        "-0",
        "1",
        "-1",
        "10",
        "1.5",
        "-1.5e3",
        "1E+2",
        "1e-2",
        "0.0",
        "123456789012",
        "1e999",
        "01",
        "-",
        "1.",
        ".5",
        "1e",
        "1e+",
        "+1",
        "--1",
        "0x1",
        "1.2.3",
        "Infinity",
        "NaN",
        "tru",
        "true1",
        "nul",
        "nulll",
        "falsey",
        "1 2",
        "9" * 41,
        "1" * 300,
    ],
)
def test_numbers_and_literals_in_unread_fields(text):
    """JSON's number and literal grammar in a field the diff does not read: what the native
    path accepts, msgspec accepts (a long number is left to msgspec)."""
    chunk = ('[{"kind":"Node","metadata":{"name":"a"},"status":{"x":' + text + "}}]").encode()
    got, want = agrees(chunk, None)
    if want == REFUSED:
        assert got in (UNSURE, REFUSED)


@needs_native
@pytest.mark.parametrize(
    ("fragment", "sure"),
    [
        (r'"a\"b"', True),
        (r'"a\\"', True),
        (r'"a\\\\\"b"', True),
        (r'"\u00e9\u003c\n\t\/\b\f\r"', True),
        (r'"\ud83d\ude42"', True),  # a surrogate pair
        (r'"\ud800"', False),  # lone surrogates: msgspec refuses them
        (r'"\udc00"', False),
        (r'"\ud800\u0041"', False),
        (r'"\udc00\ud800"', False),
        (r'"\\ud800\udc00"', False),  # an escaped backslash, then a lone low surrogate
        (r'"\x41"', False),  # not an escape: refused
        (r'"\u12G4"', False),
        ('"tab\there"', False),  # a raw control character
        ('"nl\nhere"', False),
    ],
)
def test_escapes_and_control_characters_in_unread_strings(fragment, sure):
    chunk = ('[{"metadata":{"name":"a","uid":' + fragment + "}}]").encode()
    got, _ = agrees(chunk, KEYS)
    assert (got != UNSURE) == sure


@needs_native
@pytest.mark.parametrize(
    "item",
    [
        '{"kin\\u0064":"Pod","metadata":{"name":"a"}}',  # an escaped key it reads
        '{"metadata":{"name":"a\\u0062"}}',  # an escape in a value it reads
        '{"metadata":{"name":"a"},"metadata":{"name":"b"}}',  # a key it reads twice
        '{"metadata":{"name":"a","labels":{"team":"x","team":"y"}}}',
        '{"metadata":{"name":"a","labels":{"team":1}}}',
        '{"metadata":{"name":"a"},"spec":{"unschedulable":null}}',
        '{"metadata":{"name":"a"},"status":{"allocatable":"x"}}',
    ],
)
def test_what_it_is_not_sure_of_goes_to_msgspec(item):
    got, _ = agrees(f"[{item}]".encode(), None)
    assert got == UNSURE


@needs_native
@pytest.mark.parametrize("pad", range(56, 72))
def test_backslash_runs_across_block_boundaries(pad):
    """Escapes and quotes on either side of stage 1's 64-byte blocks."""
    for run in range(1, 6):
        value = "x" * pad + "\\" * run + ('"' if run % 2 else "") + "y"
        item = {"metadata": {"name": "a", "annotations": {"k": value}}, "kind": "Node"}
        chunk = json.dumps([item]).encode()
        got, want = agrees(chunk, KEYS)
        assert got != UNSURE and got == want


@needs_native
def test_a_name_twice_or_already_read_is_refused():
    one = '{"metadata":{"name":"a"}}'
    assert by_native(f"[{one},{one}]".encode(), None) == REFUSED
    assert by_native(f"[{one}]".encode(), None, names={"a"}) == REFUSED
    assert by_native(f"[{one}]".encode(), None, names={"b"}) != REFUSED


@needs_native
def test_the_real_node_dumps_read_natively():
    """Every node dump of the corpus: the native rows are msgspec's, and it is sure of them."""
    if not REALDATA.is_dir():
        pytest.skip(f"realdata not found at {REALDATA}")
    dumps = 0
    for path in sorted((REALDATA / "nodes").glob("*.json")):
        body = json.loads(path.read_bytes())
        items = body.get("items") if body.get("kind") in ("List", "NodeList") else [body]
        for indent in (None, 4):
            got, want = agrees(chunk_of(items, indent), KEYS)
            assert want != REFUSED and got != UNSURE, path
            got, want = agrees(chunk_of(items, indent), None)
            assert want != REFUSED and got != UNSURE, path
        dumps += 1
    assert dumps >= 8


@needs_native
def test_the_streamed_reader_takes_the_native_rows(monkeypatch):
    """``read_items`` hands its chunks to the native path and keeps what it answers; with
    the native path gone, msgspec gives the same nodes."""
    from tests.formats.test_nodes_stream import _reference, _streamed

    items = [
        {"kind": "Node", "metadata": {"name": f"n{i}", "labels": {"team": "a"}}} for i in range(50)
    ]
    raw = json.dumps({"apiVersion": "v1", "items": items, "kind": "List"}, indent=4).encode()
    answered = []

    class Counting:
        def rows(self, *args: Any) -> Any:
            got = native.rows(*args)
            answered.append(isinstance(got, list))
            return got

    monkeypatch.setattr(nodestream, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(nodestream, "_native", Counting())
    assert _streamed(raw) == _reference(raw)
    assert len(answered) > 1 and all(answered)
    monkeypatch.setattr(nodestream, "_native", None)
    assert _streamed(raw) == _reference(raw)


# UTF-8's edges: each lead byte class with second bytes at and beyond its range
UTF8_PIECES = st.lists(
    st.tuples(
        st.sampled_from(
            list(
                b"\x41\x7f\x80\xbf\xc0\xc1\xc2\xdf\xe0\xe1\xec\xed\xee\xef\xf0\xf1\xf3\xf4\xf5\xff"
            )
        ),
        st.lists(
            st.sampled_from([0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0]), max_size=3
        ),
    ).map(lambda t: bytes([t[0], *t[1]])),
    min_size=1,
    max_size=4,
).map(b"".join)


@needs_native
@settings(max_examples=500, deadline=None)
@given(st.binary(min_size=1, max_size=12) | UTF8_PIECES, st.integers(0, 80))
def test_utf8_is_checked_as_python_checks_it(text, pad):
    """Any bytes in a string the diff does not read, at any offset from a block boundary:
    read only if they are UTF-8 as Python's strict decoder takes it."""
    body = text.replace(b"\\", b"").replace(b'"', b"")
    body = bytes(b for b in body if b >= 0x20)
    chunk = b'[{"metadata":{"name":"a","uid":"' + b"x" * pad + body + b'"}}]'
    got, want = agrees(chunk, KEYS)
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        assert got == UNSURE and want == REFUSED
    else:
        assert got != UNSURE and got == want


@needs_native
@pytest.mark.parametrize(
    ("text", "valid"),
    [
        (b"\xc3\xa9", True),
        (b"\xe2\x82\xac", True),
        (b"\xf0\x9f\x99\x82", True),
        (b"\xed\x9f\xbf", True),  # U+D7FF, the last before the surrogates
        (b"\xee\x80\x80", True),  # U+E000, the first after them
        (b"\xf4\x8f\xbf\xbf", True),  # U+10FFFF
        (b"\xc0\x80", False),  # overlong
        (b"\xc1\xbf", False),
        (b"\xe0\x9f\xbf", False),
        (b"\xf0\x8f\xbf\xbf", False),
        (b"\xed\xa0\x80", False),  # an encoded surrogate
        (b"\xed\xbf\xbf", False),
        (b"\xf4\x90\x80\x80", False),  # above U+10FFFF
        (b"\xf5\x80\x80\x80", False),
        (b"\xe2\x82", False),  # cut short
        (b"\xe2\x28\xa1", False),
        (b"\x80", False),
    ],
)
def test_utf8_edges(text, valid):
    for pad in (0, 61, 62, 63):
        chunk = b'[{"metadata":{"name":"a","uid":"' + b"x" * pad + text + b'"}}]'
        got, want = agrees(chunk, KEYS)
        assert (got != UNSURE) == valid and (want != REFUSED) == valid
