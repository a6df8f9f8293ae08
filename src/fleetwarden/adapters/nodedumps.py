"""Reading node dump files: streamed in chunks, one big dump split over processes.

``read_node_file`` never holds a JSON ``List`` of nodes in memory whole: ``formats.nodestream``
reads it a chunk at a time. With ``workers`` > 1 and a dump of at least ``SPLIT_MIN_BYTES``,
the items array is cut into byte ranges (at a guessed item boundary, proved by the range before
it decoding exactly up to it), the first range is read here and the others in worker processes,
which send back their nodes. Whatever the stream refuses (YAML, a single Node, anything
malformed or unusual) is read whole by ``formats.nodes.parse_document``, which names the
problem; a split whose guess was wrong is read again in one stream.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from fleetwarden.core.nodes import ObservedNode
from fleetwarden.formats import nodestream
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.nodes import parse_document, stream_nodes, streamed_kind_ok

__all__ = ["SPLIT_MIN_BYTES", "read_node_file"]

SPLIT_MIN_BYTES = 64 * 2**20
"""Below this a second process costs more (start, sending nodes back) than it saves."""

_PROBE_BYTES = 2**20  # looked at around a split point for the next item's start
_FIRST_SHARE = 0.9
"""The first range, read here, is this much of an even share: unpacking the nodes the workers
send back costs this process about a fifth of reading them (measured at 100,000 nodes)."""


def read_node_file(path: str, *, limit: int, workers: int = 1) -> list[ObservedNode]:
    """Every Node in one dump file. Raises ``FormatError`` naming the file (and where)."""
    file = Path(path)
    size = _checked_size(file, limit)
    try:
        with file.open("rb") as fh:
            start = fh.read(64).lstrip()
    except OSError as exc:
        raise FormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if start[:1] == b"{":
        try:
            with _files(path) as open_at, _gc_paused():
                if workers > 1 and size >= SPLIT_MIN_BYTES:
                    split = _read_split(path, open_at, size, workers)
                    if split is not None:
                        return split
                return stream_nodes(open_at)
        except nodestream.Unstreamable:
            pass  # the whole-document reader decides, and names any problem
        except OSError as exc:
            raise FormatError(path, f"cannot read: {exc.strerror or exc}") from None
    return parse_document(path, _read_whole(file, limit))


def _read_split(path: str, open_at: _Opener, size: int, workers: int) -> list[ObservedNode] | None:
    """The items array in ``workers`` byte ranges, the first one read here. None when the
    dump cannot be split (one item, no separator seen) or a split point was not an item's
    start; ``Unstreamable`` when a range was refused."""
    head = nodestream.read_head(open_at(0))
    if head.separator is None:
        return None
    starts = [head.items_at]
    mine = size * _FIRST_SHARE // workers  # this process also unpacks the others' nodes
    for k in range(1, workers):
        offset = int(mine + (size - mine) * (k - 1) // (workers - 1))
        fh = open_at.file(offset)
        guess = nodestream.split_point(fh.read(_PROBE_BYTES), offset, head.separator)
        if guess is None or guess <= starts[-1]:
            return None
        starts.append(guess)
    ends: list[int | None] = [*starts[1:], None]
    with ProcessPoolExecutor(max_workers=workers - 1) as pool:
        futures: list[Future[tuple[bytes, dict[str, Any] | None]]] = [
            pool.submit(_read_range, path, s, head.separator, e)
            for s, e in zip(starts[1:], ends[1:], strict=True)
        ]
        try:
            first = nodestream.read_items(
                open_at(starts[0]), start=starts[0], separator=head.separator, stop=ends[0]
            )
        except nodestream.Unstreamable:
            for fut in futures:
                fut.cancel()
            return None  # the split point was a wrong guess (or this range is odd): one stream
        rest = [fut.result() for fut in futures]  # Unstreamable re-raises here
    if not streamed_kind_ok(head.keys, rest[-1][1] or {}):
        raise nodestream.Unstreamable
    nodes = first.nodes
    for blob, _keys in rest:
        nodes.extend(nodestream.unpack_nodes(blob))
    return nodes


def _read_range(
    path: str, start: int, separator: bytes, stop: int | None
) -> tuple[bytes, dict[str, Any] | None]:
    """One worker's range, its nodes packed (module level: it is sent to a process)."""
    with _files(path) as open_at, _gc_paused():
        got = nodestream.read_items(open_at(start), start=start, separator=separator, stop=stop)
        return nodestream.pack_nodes(got.nodes), got.keys


class _Opener:
    """``open_at(offset)``: a ``readinto`` of the file from ``offset``; every handle it opened
    is closed when the ``with`` block ends."""

    def __init__(self, path: str, stack: ExitStack) -> None:
        self._path, self._stack = path, stack

    def file(self, offset: int) -> BinaryIO:
        fh = self._stack.enter_context(open(self._path, "rb", buffering=0))  # noqa: SIM115
        fh.seek(offset)
        return fh

    def __call__(self, offset: int) -> nodestream.ReadInto:
        return self.file(offset).readinto  # type: ignore[attr-defined,no-any-return]


@contextmanager
def _files(path: str) -> Iterator[_Opener]:
    with ExitStack() as stack:
        yield _Opener(path, stack)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic collection while ~10^6 acyclic objects are made: each full pass would walk
    all the nodes read so far."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _checked_size(file: Path, limit: int) -> int:
    try:
        size = file.stat().st_size
    except OSError as exc:
        raise FormatError(str(file), f"cannot read: {exc.strerror or exc}") from None
    if size > limit:
        raise FormatError(
            str(file), f"file too large: {size / 2**20:.1f} MiB (limit {limit / 2**20:.0f} MiB)"
        )
    return size


def _read_whole(file: Path, limit: int) -> bytes:
    try:
        with file.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise FormatError(str(file), f"cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise FormatError(str(file), f"file too large (limit {limit / 2**20:.0f} MiB)")
    return data
