"""Reading node dump files: streamed in chunks, one big dump split over processes.

``read_node_file`` never holds a JSON ``List`` of nodes in memory whole: ``formats.nodestream``
reads it a chunk at a time. ``summarise_node_file`` reduces the nodes with a caller's
``summarise`` (``scan``: to what the diff reads, ``core.node_summaries``). With ``workers`` > 1
and a dump of at least ``SPLIT_MIN_BYTES``, the items array is cut into byte ranges (at a
guessed item boundary, proved by the range before it decoding exactly up to it), the first
range is read here and the others in forked worker processes; each process summarises the
nodes it read, and only the summaries cross, merged here in range order (``merge``).
``start_split`` starts the workers early (``scan`` does so before it reads the desired state:
the workers are sent ``summarise`` when the read starts). Whatever the stream refuses (YAML, a
single Node, anything malformed or unusual) is read whole by ``formats.nodes.parse_document``,
which names the problem; a split whose guess was wrong is read again in one stream.
"""

from __future__ import annotations

import gc
import multiprocessing
import operator
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from fleetwarden.core.nodes import ObservedNode
from fleetwarden.formats import nodestream
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.nodes import parse_document, stream_nodes, streamed_kind_ok

__all__ = ["SPLIT_MIN_BYTES", "read_node_file", "start_split", "summarise_node_file"]

S = TypeVar("S")

SPLIT_MIN_BYTES = 64 * 2**20
"""Below this a second process costs more (start, sending nodes back) than it saves."""

_PROBE_BYTES = 2**20  # looked at around a split point for the next item's start
_FIRST_SHARE = 1.0
"""The first range, read here, is this much of an even share (every process summarises its
own nodes; a worker started at the read has no head start)."""


def read_node_file(path: str, *, limit: int, workers: int = 1) -> list[ObservedNode]:
    """Every Node in one dump file. Raises ``FormatError`` naming the file (and where)."""
    return summarise_node_file(path, list, operator.add, limit=limit, workers=workers)


def summarise_node_file(
    path: str,
    summarise: Callable[[list[ObservedNode]], S],
    merge: Callable[[S, S], S],
    *,
    limit: int,
    workers: int = 1,
) -> S:
    """``summarise`` of every Node in one dump file, read by up to ``workers`` processes
    (each summarises what it read; ``merge(a, b)`` must be the summary of ``a``'s nodes
    followed by ``b``'s, and ``summarise`` picklable). Raises ``FormatError`` naming the file
    (and where)."""
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
                    split = _read_split(path, open_at, size, workers, summarise, merge)
                    if split is not None:
                        return split[0]
                nodes = stream_nodes(open_at)
                out = summarise(nodes)
                if path in _ENDING:
                    _keep_till_exit(nodes)
                return out
        except nodestream.Unstreamable:
            pass  # the whole-document reader decides, and names any problem
        except OSError as exc:
            raise FormatError(path, f"cannot read: {exc.strerror or exc}") from None
    return summarise(parse_document(path, _read_whole(file, limit)))


def start_split(path: str, *, limit: int, workers: int, ending: bool = False) -> None:
    """Start the workers of ``read_node_file(path, limit=limit, workers=workers)`` now, so they
    read while this process does other work (the command line loads the desired state); that
    call then reads only its own range. Does nothing when that call would not split the dump;
    a problem found here is left for that call to report.

    ``ending``: this process ends soon after the read (a command line run), so the nodes it
    reads from ``path`` are never freed (``_keep_till_exit``): ~10^6 objects at 50,000 nodes,
    ~0.06 s; with one process, too."""
    if ending:
        _ENDING.add(path)
    if workers < 2 or not _CAN_FORK or (path, workers) in _STARTED:
        return
    try:
        if _checked_size(Path(path), limit) < SPLIT_MIN_BYTES:
            return
        with _files(path) as open_at:
            plan = _plan(open_at, os.path.getsize(path), workers, _STARTED_SHARE)
    except (FormatError, OSError, nodestream.Unstreamable):
        return
    if plan is not None:
        _STARTED[(path, workers)] = _Split(path, *plan)


_STARTED: dict[tuple[str, int], _Split] = {}
_ENDING: set[str] = set()
_CAN_FORK = "fork" in multiprocessing.get_all_start_methods()
_STARTED_SHARE = 0.85
"""Started early, a worker reads while this process loads the desired state (~0.15 s at 200
pools) and reaches the read: this process's range is this much of an even share, so both end
their reading and summarising at about the same time (0.425 of the dump with two)."""


def _plan(
    open_at: _Opener, size: int, workers: int, share: float
) -> tuple[nodestream.Head, list[int]] | None:
    """The dump's head and where each range starts (guessed item starts); None when it
    cannot be split (one item, no separator seen, no item start near a cut)."""
    head = nodestream.read_head(open_at(0))
    if head.separator is None:
        return None
    starts = [head.items_at]
    mine = size * share // workers  # this process also unpacks the others' nodes
    for k in range(1, workers):
        offset = int(mine + (size - mine) * (k - 1) // (workers - 1))
        fh = open_at.file(offset)
        guess = nodestream.split_point(fh.read(_PROBE_BYTES), offset, head.separator)
        if guess is None or guess <= starts[-1]:
            return None
        starts.append(guess)
    return head, starts


class _Split:
    """Worker processes reading the ranges after the first, each told how to summarise its
    nodes (``send``) and sending back the summary (or the exception that stopped it) through
    a pipe. Daemonic: a command that exits before collecting them (an error elsewhere) does
    not wait for them."""

    def __init__(self, path: str, head: nodestream.Head, starts: list[int]) -> None:
        self.head, self.starts = head, starts
        assert head.separator is not None
        ctx = multiprocessing.get_context("fork")  # this process's modules, no re-import
        ends: list[int | None] = [*starts[2:], None]
        self.workers = []
        for start, stop in zip(starts[1:], ends, strict=True):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(
                target=_read_range, args=(theirs, path, start, head.separator, stop), daemon=True
            )
            proc.start()
            theirs.close()
            self.workers.append((proc, mine))

    def send(self, summarise: Callable[[list[ObservedNode]], Any]) -> None:
        """How each worker summarises its nodes (a worker that already stopped has said why:
        ``results`` raises it)."""
        for _proc, conn in self.workers:
            with suppress(BrokenPipeError, ConnectionResetError):
                conn.send(summarise)

    def results(self) -> list[tuple[Any, dict[str, Any] | None]]:
        """Every worker's summary and the top-level keys it read after the items array, in
        range order; ``Unstreamable`` if one refused its range or ended without a word."""
        out = []
        try:
            for _proc, conn in self.workers:
                try:
                    got = conn.recv()
                except EOFError:
                    raise nodestream.Unstreamable from None
                if isinstance(got, BaseException):
                    raise got
                out.append(got)
        finally:
            self.stop()
        return out

    def stop(self) -> None:
        for proc, conn in self.workers:
            conn.close()
            if proc.is_alive():
                proc.terminate()
            proc.join()


def _read_split(
    path: str,
    open_at: _Opener,
    size: int,
    workers: int,
    summarise: Callable[[list[ObservedNode]], S],
    merge: Callable[[S, S], S],
) -> tuple[S] | None:
    """The items array in ``workers`` byte ranges, the first one read here (the others by the
    workers ``start_split`` started, else started now), each range summarised where it was
    read; the summaries merged in range order. None when the dump cannot be split (one item,
    no separator seen) or a split point was not an item's start; ``Unstreamable`` when a range
    was refused."""
    split = _STARTED.pop((path, workers), None)
    if split is None:
        if not _CAN_FORK:
            return None  # no fork (Windows): one stream
        plan = _plan(open_at, size, workers, _FIRST_SHARE)
        if plan is None:
            return None
        split = _Split(path, *plan)
    split.send(summarise)
    head, starts = split.head, split.starts
    try:
        first = nodestream.read_items(
            open_at(starts[0]), start=starts[0], separator=head.separator, stop=starts[1]
        )
    except nodestream.Unstreamable:
        split.stop()
        return None  # the split point was a wrong guess (or this range is odd): one stream
    out = summarise(first.nodes)
    if path in _ENDING:
        _keep_till_exit(first)
    rest = split.results()  # Unstreamable re-raises here
    if not streamed_kind_ok(head.keys, rest[-1][1] or {}):
        raise nodestream.Unstreamable
    for summary, _keys in rest:
        out = merge(out, summary)
    return (out,)


def _keep_till_exit(value: object) -> None:
    """Never free ``value``: held by a reference cycle of its own (module teardown at exit does
    not reach it) that no collection visits (``gc.freeze``: every object so far goes to the
    permanent generation, so no later collection walks the ~10^6 objects either). For a
    process that is about to end: the memory goes back with the process."""
    holder: list[object] = [value]
    holder.append(holder)
    gc.freeze()


def _read_range(
    conn: Connection, path: str, start: int, separator: bytes, stop: int | None
) -> None:
    """One worker's range: read, summarised as the parent says once it knows (its message is
    taken in as it comes, so the parent never waits on this worker), sent back -- or the
    exception that stopped it. Then the worker ends at once: freeing its nodes would only
    delay the parent, which waits for it to end."""
    told: list[Any] = []
    listener = threading.Thread(target=_listen, args=(conn, told), daemon=True)
    listener.start()
    result: Any
    try:
        with _files(path) as open_at, _gc_paused():
            got = nodestream.read_items(open_at(start), start=start, separator=separator, stop=stop)
            listener.join()
            if not told:  # the parent is gone
                os._exit(0)
            result = (told[0](got.nodes), got.keys)
    except (nodestream.Unstreamable, OSError) as exc:
        result = exc
    conn.send(result)
    conn.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _listen(conn: Connection, told: list[Any]) -> None:
    with suppress(EOFError, OSError):
        told.append(conn.recv())


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
