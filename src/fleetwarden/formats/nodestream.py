"""The fast reader of big ``kubectl get nodes -o json`` dumps: the ``items`` array streamed in
chunks, only the fields the diff reads decoded, one dump split across processes by byte range.

A 100,000-node dump is ~900 MB, ~90 % of it image lists, conditions, addresses and annotations
the diff never reads. Here a chunk of whole items is decoded by msgspec into small structs that
name only ``metadata.name/labels``, ``spec.taints/unschedulable`` and
``status.allocatable/capacity/nodeInfo``: everything else is validated and skipped in C, and
memory is one chunk plus the nodes, never the document.

Where a chunk ends is *guessed*: the bytes that separate the first two items (``},`` and the
next ``{`` with the indentation around them, as the dump's printer lays out items) are looked
for near the end of the window. A guess is *proved* by decoding: a chunk that starts where an
item starts and decodes as ``[item, item, ...]`` ends where an item ends, because reading JSON
from a known place is deterministic. So a wrong guess (the separator inside a nested list of a
compactly printed dump) is never taken for a boundary: it fails to decode, and the reader falls
back. The same argument lets two processes read the two halves of one file at once: the split
point is a guess too, proved when the first half decodes up to it exactly.

This reader never decides a hard case. Anything it is not sure of -- not a ``List``/``NodeList``
object, a chunk that does not decode, a value of an unexpected type (labels given as numbers, a
taint without effect, a resource amount that is not a quantity -- checked once per distinct
map), non-ASCII text that is not UTF-8, a missing name -- raises ``Unstreamable``, and the
caller parses the document whole with ``nodes.parse_document``, which accepts every shape the
full reader accepts and names every problem precisely (file, line or item and field).
Malformed input is therefore never reported here.

Leniency kept on purpose: a number the full parser rejects as out of range (``1e999``) inside a
field the diff does not read is skipped, as jq would.

A chunk is first offered to the native fast path (``_nodescan.c``, built at install where a C
compiler is found; x86-64 with AVX2): it validates the chunk as JSON and makes the same rows
~2.5x faster, or says it is not sure (a surrogate escape, an escape in a field it reads, a key
it reads given twice, a value of another type...) and the chunk is decoded with msgspec as
before. It never accepts what msgspec would refuse, and its rows are msgspec's rows
(``tests/formats/test_nodescan.py`` holds it to both).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import starmap
from typing import Any, Protocol

import msgspec
import orjson

from fleetwarden.core.nodes import ObservedNode
from fleetwarden.core.pools import Taint
from fleetwarden.core.quantities import parse_quantity

try:
    from fleetwarden.formats import _nodescan as _native_module
except ImportError:  # built without a C compiler: every chunk is decoded with msgspec
    _native_module = None

_native: Any = _native_module if _native_module is not None and _native_module.available() else None
"""The native fast path, or None (not built, or the CPU lacks AVX2/PCLMUL)."""

__all__ = [
    "CHUNK_BYTES",
    "Head",
    "ItemsRead",
    "NodeRow",
    "Opener",
    "ReadInto",
    "Sink",
    "Unstreamable",
    "read_head",
    "read_items",
    "split_point",
]

CHUNK_BYTES = 8 * 2**20
"""Bytes read per step: the reader's working memory is about this plus one item."""

ReadInto = Callable[[memoryview], int]
"""Fills the view from the current position, returns the byte count (0 at the end): a file's
``readinto``."""
Opener = Callable[[int], ReadInto]
"""``open_at(offset)``: a ``ReadInto`` of the input from ``offset`` on."""

_EFFECTS = frozenset(("NoSchedule", "PreferNoSchedule", "NoExecute"))

LabelKeys = tuple[str, ...] | None
"""The labels a reader gives of each node, as their values in this order; None: every label,
as a dict (``NodeRow``)."""


class Sink(Protocol):
    """Takes a range's rows chunk by chunk as they are read (``read_items``' ``sink``)."""

    def label_keys(self) -> LabelKeys:
        """Asked before each chunk: the labels its rows are to give (None: all, as a dict)."""

    def __call__(self, rows: list[Any], label_keys: LabelKeys, /) -> None:
        """The next rows, in node order, made for ``label_keys``."""


class Unstreamable(Exception):
    """The fast reader cannot decide this document: parse it whole."""


# --- the fields the diff reads (everything else is skipped by the decoder) -----------------
# gc=False: these structs never hold a reference cycle, so the collector need not track them
# (cheaper to make and free, ~10^6 of them per 100,000 nodes)


class _Taint(msgspec.Struct, frozen=True, gc=False):  # hashable: nodes share a few taint sets
    key: str
    effect: str
    value: str | None = None


class _Meta(msgspec.Struct, gc=False):
    name: str | None = None
    labels: dict[str, str] | None = None


class _Spec(msgspec.Struct, gc=False):
    taints: list[_Taint] | None = None
    unschedulable: bool = False


class _Info(msgspec.Struct, gc=False):
    kubeletVersion: str | None = None  # the API's spelling
    osImage: str | None = None


class _Status(msgspec.Struct, gc=False):
    # kept as bytes: the nodes of a pool share them, so they share one decoded map
    allocatable: msgspec.Raw = msgspec.Raw(b"null")
    capacity: msgspec.Raw = msgspec.Raw(b"null")
    nodeInfo: _Info | None = None


class _Item(msgspec.Struct, gc=False):
    kind: str | None = "Node"
    metadata: _Meta | None = None
    spec: _Spec | None = None
    status: _Status | None = None


_ITEMS = msgspec.json.Decoder(list[_Item])
_STR_MAP = msgspec.json.Decoder(dict[str, str] | None)
_TAINTS = msgspec.json.Decoder(list[_Taint])


@functools.cache
def _items_reading(label_keys: tuple[str, ...]) -> msgspec.json.Decoder[list[Any]]:
    """A decoder of items like ``_ITEMS`` whose labels are read into a struct of just these
    keys: the other labels are skipped, not made into strings. A value that is not a string
    (null, a number) is a decode error, as in ``_ITEMS``."""
    fields = [(f"l{i}", str, msgspec.field(default=None, name=k)) for i, k in enumerate(label_keys)]
    labels = msgspec.defstruct("_Labels", fields, gc=False)  # type: ignore[arg-type]
    meta = msgspec.defstruct(
        "_MetaOf", [("name", str | None, None), ("labels", labels | None, None)], gc=False
    )
    item = msgspec.defstruct(
        "_ItemOf",
        [
            ("kind", str | None, "Node"),
            ("metadata", meta | None, None),
            ("spec", _Spec | None, None),
            ("status", _Status | None, None),
        ],
        gc=False,
    )
    return msgspec.json.Decoder(list[item])  # type: ignore[valid-type]


_CACHED = 20_000
"""Decoded resource maps and taint sets are kept by content for the process (the ranges of a
split dump, the dumps of a fleet share them) up to about this many of each."""
_MAPS: dict[bytes, dict[str, str]] = {}
_TAINT_SETS: dict[tuple[_Taint, ...], tuple[Taint, ...]] = {}
_RAW_TAINTS: dict[bytes, tuple[Taint, ...]] = {}


class _Shared:
    """What the nodes of a dump share: decoded resource maps and taint sets, by content (kept
    for the process: the same text always decodes the same way); and the names read so far
    (a name twice is refused)."""

    __slots__ = ("maps", "names", "raw_taints", "taints")

    def __init__(self) -> None:
        for cache in (_MAPS, _TAINT_SETS, _RAW_TAINTS):
            if len(cache) > _CACHED:
                cache.clear()
        self.maps = _MAPS
        self.taints = _TAINT_SETS
        self.raw_taints = _RAW_TAINTS  # the native path's, by JSON text
        self.names: set[str] = set()

    def taints_of(self, raw: bytes) -> tuple[Taint, ...]:
        """A non-empty taint list's JSON text -> its taints, as ``_rows_of`` reads
        ``spec.taints`` (the native path's callback)."""
        found = self.raw_taints.get(raw)
        if found is None:
            try:
                seen = tuple(_TAINTS.decode(raw))
            except msgspec.DecodeError:
                raise Unstreamable from None
            if any(t.effect not in _EFFECTS for t in seen):
                raise Unstreamable
            found = tuple(Taint(t.key, t.value, t.effect) for t in seen)
            self.raw_taints[raw] = found
        return found

    def map_of(self, raw: msgspec.Raw) -> dict[str, str]:
        key = bytes(raw)
        found = self.maps.get(key)
        if found is None:
            try:
                found = _STR_MAP.decode(key) or {}
                for text in found.values():
                    parse_quantity(text)  # once per distinct map: the nodes of a pool share it
            except (msgspec.DecodeError, ValueError):  # numbers, not a map, not quantities
                raise Unstreamable from None  # the full reader decides
            self.maps[key] = found
        return found


NodeRow = tuple[
    str,
    dict[str, str],
    tuple[Taint, ...],
    str | None,
    str | None,
    Mapping[str, str],
    Mapping[str, str],
    bool,
]
"""A node's fields in ``ObservedNode``'s order (``ObservedNode(*row)`` is the node)."""


def _rows_of(items: list[Any], out: list[Any], shared: _Shared, keys: LabelKeys) -> None:
    """Slim items -> node rows (``keys`` None: ``NodeRow``), or summary rows with the values of
    ``keys`` as the labels (``node_summaries.Row``), with exactly ``nodes.node_from_object``'s
    reading; whatever that reading would refuse is ``Unstreamable`` (the full reader then
    says why)."""
    append = out.append
    if keys is None:
        no_labels: Any = {}
        labels_of: Callable[[Any], Any] = _dict_or_empty
    else:
        no_labels = (None,) * len(keys)
        labels_of = msgspec.structs.astuple
    map_of = shared.map_of
    taint_sets = shared.taints
    names = shared.names
    add_name = names.add
    named, made = len(names), len(out)
    for item in items:
        if item.kind != "Node" and item.kind is not None:
            raise Unstreamable  # another kind (kubectl get nodes,pods): the full reader says so
        meta, spec, status = item.metadata, item.spec, item.status
        if meta is None or not meta.name:
            raise Unstreamable
        add_name(meta.name)
        taints: tuple[Taint, ...] = ()
        unschedulable = False
        if spec is not None:
            unschedulable = spec.unschedulable
            if spec.taints:
                seen = tuple(spec.taints)
                found = taint_sets.get(seen)
                if found is None:
                    if any(t.effect not in _EFFECTS for t in seen):
                        raise Unstreamable
                    found = tuple(Taint(t.key, t.value, t.effect) for t in seen)
                    taint_sets[seen] = found
                taints = found
        labels = no_labels if meta.labels is None else labels_of(meta.labels)
        if status is None:
            append((meta.name, labels, taints, None, None, {}, {}, unschedulable))
            continue
        info = status.nodeInfo
        append(
            (
                meta.name,
                labels,
                taints,
                None if info is None else info.kubeletVersion,
                None if info is None else info.osImage,
                map_of(status.allocatable),
                map_of(status.capacity),
                unschedulable,
            )
        )
    if len(names) - named != len(out) - made:
        raise Unstreamable  # a name twice (a concatenated dump?): the full reader names it


def _dict_or_empty(labels: dict[str, str]) -> dict[str, str]:
    return labels  # never None here: no labels is ``no_labels``


# --- a window on the input ------------------------------------------------------------------


class _Window:
    """Bytes of the input from offset ``base`` on; ``pos`` is where reading goes on."""

    __slots__ = ("_ascii", "_read", "base", "buf", "eof", "pos", "size")

    def __init__(self, read: ReadInto, start: int = 0) -> None:
        self._read = read
        # byte 0 is a pad: the decoder borrows the byte before an item for its "["
        self.buf = _SPARE.pop() if _SPARE else bytearray(CHUNK_BYTES + 2)
        self.size = 1  # valid bytes in buf
        self.base = start - 1  # the input offset of buf[0]
        self.pos = 1
        self.eof = False
        self._ascii: bool | None = None  # is the buffer all ASCII (asked once per chunk)

    def release(self) -> None:
        """Done: the buffer is kept for the next window (a fresh 8 MiB one is zeroed and
        faulted in page by page: ~30 of them for a split 900 MB dump) unless it grew."""
        if len(self.buf) <= 2 * (CHUNK_BYTES + 2) and not _SPARE:
            _SPARE.append(self.buf)
        self.buf = bytearray()

    def ascii(self) -> bool:
        if self._ascii is None:
            self._ascii = self.buf.isascii()
        return self._ascii

    def more(self) -> bool:
        """Read another chunk, dropping what was consumed (one byte before ``pos`` is kept:
        the decoder borrows it). False at the end of the input."""
        if self.eof:
            return False
        self._ascii = None
        drop = max(self.pos - 1, 0)
        if drop:  # move the unread tail to the front (usually part of one item)
            rest = self.size - drop
            self.buf[:rest] = self.buf[drop : self.size]
            self.size = rest
            self.base += drop
            self.pos -= drop
        free = len(self.buf) - self.size - 1  # one byte stays free for a closing "]"
        if free < CHUNK_BYTES:  # an item longer than a chunk
            self.buf.extend(bytes(CHUNK_BYTES - free))
        n = self._read(memoryview(self.buf)[self.size : self.size + CHUNK_BYTES])
        if n <= 0:
            self.eof = True
            return False
        self.size += n
        return True

    def skip_ws(self) -> int | None:
        """The next non-blank byte (``pos`` moves to it); None at the end of the input."""
        while True:
            m = _WS.match(self.buf, self.pos, self.size)
            assert m is not None
            self.pos = m.end()
            if self.pos < self.size:
                return self.buf[self.pos]
            if not self.more():
                return None

    def value(self) -> Any:
        """The JSON value at ``pos`` (a small one: a key, ``kind``, ``metadata``), parsed."""
        while True:
            end = _value_end(self.buf, self.pos, self.size)
            if end is not None:
                try:
                    value = orjson.loads(bytes(self.buf[self.pos : end]))
                except orjson.JSONDecodeError:
                    raise Unstreamable from None
                self.pos = end
                return value
            if not self.more():
                raise Unstreamable  # truncated


_SPARE: list[bytearray] = []  # a released window's buffer

_WS = re.compile(rb"[ \t\r\n]*")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(rb"[-+.0-9eEa-z]+")
_FLAT = re.compile(rb'(?:[^"\[\]{}]+|"(?:[^"\\]|\\.)*")*', re.DOTALL)


def _value_end(buf: bytearray, pos: int, size: int) -> int | None:
    """Where the value starting at ``pos`` ends (brackets counted outside strings); None when
    the window ends first. Not a validator: the value is parsed afterwards."""
    if pos >= size:
        return None
    c = buf[pos]
    if c == 0x22:  # "
        m = _STRING.match(buf, pos, size)
        return m.end() if m else None
    if c not in b"{[":
        m = _SCALAR.match(buf, pos, size)
        if m is None:
            raise Unstreamable
        return m.end() if m.end() < size else None
    depth = 0
    while True:
        if pos >= size:
            return None
        c = buf[pos]
        if c in b"{[":
            depth += 1
        elif c in b"}]":
            depth -= 1
            if depth == 0:
                return pos + 1
        else:  # an unterminated string: the window ends inside it
            return None
        m = _FLAT.match(buf, pos + 1, size)
        assert m is not None
        pos = m.end()


# --- the document around the items ----------------------------------------------------------


@dataclass(slots=True)
class Head:
    """What precedes the first item: the top-level keys read so far, where the first item
    starts (``items_at``; at ``]`` for an empty list) and the separator between items."""

    keys: dict[str, Any]
    items_at: int
    separator: bytes | None


@dataclass(slots=True)
class ItemsRead:
    """The node rows of a byte range of the items array (none when they were fed on as read;
    ``items``: how many items); ``keys`` are the top-level keys after the array when the
    range reached the end of the document; ``names``: every node's name (each once: a name
    twice in one range is refused, across ranges the caller checks)."""

    rows: list[NodeRow]
    end: int
    keys: dict[str, Any] | None = None
    items: int = 0
    names: set[str] = field(default_factory=set)

    def nodes(self) -> list[ObservedNode]:
        return list(starmap(ObservedNode, self.rows))


def _object_keys(win: _Window, keys: dict[str, Any], *, until_items: bool) -> bool:
    """Top-level ``"key": value`` pairs into ``keys`` until ``"items"`` (True, ``pos`` after
    its ``[``) or the closing brace (False)."""
    first = not keys and until_items
    while True:
        c = win.skip_ws()
        if c == 0x7D:  # }
            win.pos += 1
            return False
        if not first:
            if c != 0x2C:  # ,
                raise Unstreamable
            win.pos += 1
            c = win.skip_ws()
        first = False
        if c != 0x22:
            raise Unstreamable
        key = win.value()
        if win.skip_ws() != 0x3A:  # :
            raise Unstreamable
        win.pos += 1
        c = win.skip_ws()
        if key == "items" and until_items and c == 0x5B:  # [
            win.pos += 1
            return True
        if key == "items" or c is None:
            raise Unstreamable  # items twice, or not a list (null): the full reader decides
        keys[key] = win.value()


def read_head(read: ReadInto) -> Head:
    """The document up to its first item: ``{`` and the keys before ``"items": [``, and the
    layout of the separator between the first two items."""
    win = _Window(read)
    try:
        return _head(win)
    finally:
        win.release()


def _head(win: _Window) -> Head:
    win.more()
    if win.skip_ws() != 0x7B:  # {
        raise Unstreamable
    win.pos += 1
    keys: dict[str, Any] = {}
    if not _object_keys(win, keys, until_items=True):
        raise Unstreamable  # no items: a single Node, or not a node dump
    c = win.skip_ws()
    items_at = win.base + win.pos
    if c != 0x7B:  # an empty list, or not objects
        return Head(keys, items_at, None)
    while (end := _value_end(win.buf, win.pos, win.size)) is None:
        if not win.more():
            raise Unstreamable
    # the separator: the blanks before the first item's closing brace, the brace, and
    # everything up to the next item's opening brace
    body = win.buf[win.pos : end - 1]
    indent = len(body) - len(body.rstrip())
    win.pos = end
    close_at = win.base + end - 1 - indent  # input offsets: more() may move the window
    if win.skip_ws() != 0x2C:  # one item
        return Head(keys, items_at, None)
    win.pos += 1
    if win.skip_ws() != 0x7B:
        raise Unstreamable
    if close_at - win.base < 0:
        return Head(keys, items_at, None)  # a separator longer than a window: none
    return Head(keys, items_at, bytes(win.buf[close_at - win.base : win.pos + 1]))


def read_items(
    read: ReadInto,
    *,
    start: int,
    separator: bytes | None,
    stop: int | None = None,
    sink: Sink | None = None,
) -> ItemsRead:
    """The node rows of the items array from byte ``start`` (where an item, or the closing
    ``]``, starts) to ``stop`` (where an item starts: this range then ends exactly before the
    separator in front of it), or to the end of the document (then the top-level keys after
    the array are read too). ``read`` reads the input from ``start`` on. ``sink``: each
    chunk's rows are handed to it as they are read, in order, and not kept here."""
    win = _Window(read, start)
    try:
        return _read_items(win, separator=separator, stop=stop, sink=sink)
    finally:
        win.release()


def _read_items(
    win: _Window, *, separator: bytes | None, stop: int | None, sink: Sink | None
) -> ItemsRead:
    win.more()
    rows: list[NodeRow] = []
    items = 0
    first = True
    close = separator.index(b"}") if separator else 0
    shared = _Shared()
    while True:
        c = win.skip_ws()
        if c is None:
            raise Unstreamable  # truncated
        if c == 0x5D:  # ]
            if stop is not None:
                raise Unstreamable  # the split was not where an item starts
            win.pos += 1
            keys: dict[str, Any] = {}
            _object_keys(win, keys, until_items=False)
            if win.skip_ws() is not None:
                raise Unstreamable  # something after the document
            return ItemsRead(rows, win.base + win.pos, keys, items, shared.names)
        if not first:
            if c != 0x2C:
                raise Unstreamable
            win.pos += 1
            c = win.skip_ws()
        first = False
        at = win.base + win.pos
        if stop is not None and at >= stop:
            if at != stop:
                raise Unstreamable  # the split was not where an item starts
            return ItemsRead(rows, at, None, items, shared.names)
        if c != 0x7B:
            raise Unstreamable  # not an object: the full reader names the item
        # items from pos to the last separator in the window (or to stop)
        limit = win.size if stop is None else min(win.size, stop - win.base)
        cut = win.buf.rfind(separator, win.pos, limit) if separator else -1
        if cut <= win.pos and separator and limit == win.size and win.more():
            # the window ends inside this item: read on and look again, rather than walk
            # the item's brackets (more() keeps the item and moves pos with it)
            limit = win.size if stop is None else min(win.size, stop - win.base)
            cut = win.buf.rfind(separator, win.pos, limit)
        if cut > win.pos:
            end = cut + close + 1
        elif stop is not None and win.base + win.size > stop:
            end = _range_end(win, stop)
        else:
            end = _one_item(win)
        if sink is None:
            items += _decode(win, end, rows, shared, None)
        else:
            chunk: list[Any] = []
            keys = sink.label_keys()
            items += _decode(win, end, chunk, shared, keys)
            sink(chunk, keys)


def _range_end(win: _Window, stop: int) -> int:
    """The end of the range's last item: the closing brace before ``stop``'s separator."""
    i = stop - win.base
    last = win.buf.rfind(b"}", win.pos, i)
    if last < 0:
        raise Unstreamable
    return last + 1


def _one_item(win: _Window) -> int:
    """The end of the item at ``pos`` found by counting brackets (no separator in sight: the
    last item, or a compactly printed dump); reads more of the input as needed."""
    while (end := _value_end(win.buf, win.pos, win.size)) is None:
        if not win.more():
            raise Unstreamable
    return end


def _decode(win: _Window, end: int, rows: list[Any], shared: _Shared, keys: LabelKeys) -> int:
    """Decode ``[`` + items from ``pos`` to ``end`` + ``]`` in place (the byte before ``pos``
    and the one at ``end`` are borrowed for the brackets), then move ``pos`` to ``end``."""
    buf, pos = win.buf, win.pos
    if pos == 0 or end > win.size:
        raise Unstreamable
    before, after = buf[pos - 1], buf[end]
    buf[pos - 1], buf[end] = 0x5B, 0x5D
    view = memoryview(buf)[pos - 1 : end + 1]
    items: list[_Item] = []
    count = -1
    try:
        got = None
        if _native is not None:  # it checks the chunk's UTF-8 itself
            got = _native.rows(view, keys, shared.map_of, shared.taints_of, shared.names)
            if got is False:
                raise Unstreamable  # a name twice: the full reader names it
        if got is not None:
            rows.extend(got)
            count = len(got)
        else:  # not sure, or no native path
            if not win.ascii():  # msgspec skips fields without checking their UTF-8
                try:
                    bytes(buf[pos:end]).decode("utf-8")
                except UnicodeDecodeError:
                    raise Unstreamable from None
            items = (_ITEMS if keys is None else _items_reading(keys)).decode(view)
            _rows_of(items, rows, shared, keys)  # copies what it keeps: raw maps point into buf
            count = len(items)
    except (msgspec.DecodeError, Unstreamable):
        pass  # handled here, so no traceback keeps the raw maps (and the buffer) alive
    finally:
        del items
        view.release()
        buf[pos - 1], buf[end] = before, after
    if count < 0:
        raise Unstreamable
    win.pos = end
    return count


def split_point(window: bytes, offset: int, separator: bytes) -> int | None:
    """Where an item seems to start in ``window`` (bytes of the input from ``offset``): after
    the first separator. Only a guess -- ``read_items`` proves or refuses it."""
    i = window.find(separator)
    if i < 0:
        return None
    return offset + i + len(separator) - 1
