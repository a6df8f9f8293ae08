"""Reading node dump files: streamed in chunks, one big dump split over processes.

``read_node_file`` never holds a JSON ``List`` of nodes in memory whole: ``formats.nodestream``
reads it a chunk at a time. ``summarise_node_file`` reduces the nodes with a caller's
``summarise`` (``scan``: to what the diff reads, ``core.node_summaries``). With ``workers`` > 1
and a dump of at least ``SPLIT_MIN_BYTES``, the items array is cut into byte ranges of about
``RANGE_BYTES`` (at guessed item boundaries, each proved by the range before it decoding
exactly up to it), read by this process and forked worker processes, each taking the next
range nobody has taken; each process summarises the ranges it read (a ``summarise`` with a
``builder()`` is fed the rows as they are read: no node objects), and only the summaries
cross, merged here in range order (``merge``). ``start_split`` starts the workers early
(``scan`` does so before it reads the desired state: the workers are sent ``summarise`` when
the read starts, and summarise what they read before then). Whatever the stream refuses (YAML, a
single Node, anything malformed or unusual) is read whole by ``formats.nodes.parse_document``,
which names the problem; a split whose guess was wrong is read again in one stream.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from fleetwarden.core.node_summaries import Row
from fleetwarden.core.nodes import ObservedNode
from fleetwarden.formats import nodestream
from fleetwarden.formats.errors import FormatError
from fleetwarden.formats.nodes import parse_document, stream_rows, streamed_kind_ok

__all__ = ["SPLIT_MIN_BYTES", "read_node_file", "start_split", "summarise_node_file"]

S = TypeVar("S")

SPLIT_MIN_BYTES = 64 * 2**20
"""Below this a second process costs more (start, sending nodes back) than it saves."""

RANGE_BYTES = 40 * 2**20
"""A split dump is cut into ranges of about this size (at least one per process), and each
process takes the next range not yet taken until none is left -- the last ones a quarter of
this size (``_cuts``) --: the processes end their reading within about a quarter range of each
other, whatever else one of them had to do (this process loads the desired state meanwhile)
and however fast each one runs."""

_Part = tuple[Any, dict[str, Any] | None, set[str]]
"""A range read: its summary, the top-level keys after the array (the last range), its nodes'
names."""

_PROBE_BYTES = 2**20  # looked at around a split point for the next item's start
_TAIL_PIECES = 4


def read_node_file(path: str, *, limit: int, workers: int = 1) -> list[ObservedNode]:
    """Every Node in one dump file. Raises ``FormatError`` naming the file (and where)."""
    return summarise_node_file(path, list, _concat, limit=limit, workers=workers)


def _concat(*parts: list[ObservedNode]) -> list[ObservedNode]:
    return [node for part in parts for node in part]


def summarise_node_file(
    path: str,
    summarise: Callable[[list[ObservedNode]], S],
    merge: Callable[..., S],
    *,
    limit: int,
    workers: int = 1,
    names: set[str] | None = None,
) -> S:
    """``summarise`` of every Node in one dump file, read by up to ``workers`` processes
    (each summarises what it read; ``merge(a, b, ...)`` must be the summary of ``a``'s nodes
    followed by ``b``'s and so on, and ``summarise`` picklable). ``names``, when given, gets
    every node's name (control-plane ones too, which no summary keeps). Raises
    ``FormatError`` naming the file (and where)."""
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
                        if names is not None:
                            names.update(split[1])
                        return split[0]
                feeder = _Feeder([summarise], keep=path in _ENDING)
                got = stream_rows(open_at, sink=feeder)
                out = feeder.result()
                if names is not None:
                    names.update(got.names)
                if path in _ENDING:
                    _keep_till_exit(feeder.chunks)
                return out
        except nodestream.Unstreamable:
            pass  # the whole-document reader decides, and names any problem
        except OSError as exc:
            raise FormatError(path, f"cannot read: {exc.strerror or exc}") from None
    nodes = parse_document(path, _read_whole(file, limit))
    if names is not None:
        names.update(n.name for n in nodes)
    return summarise(nodes)


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
            plan = _plan(open_at, os.path.getsize(path), workers)
    except (FormatError, OSError, nodestream.Unstreamable):
        return
    if plan is not None:
        _STARTED[(path, workers)] = _Split(path, *plan, workers - 1)


_STARTED: dict[tuple[str, int], _Split] = {}
_ENDING: set[str] = set()
_CAN_FORK = "fork" in multiprocessing.get_all_start_methods()


def _plan(open_at: _Opener, size: int, workers: int) -> tuple[nodestream.Head, list[int]] | None:
    """The dump's head and where each range starts (guessed item starts); None when it
    cannot be split (one item, no separator seen). A cut with no item start after it near
    enough (inside the last item, or an item over ``_PROBE_BYTES``), or whose next item start
    is one already taken (two cuts inside one item: items longer than the tail's small
    ranges), is dropped: the ranges around it are read as one."""
    head = nodestream.read_head(open_at(0))
    if head.separator is None:
        return None
    starts = [head.items_at]
    for offset in _cuts(size, workers):
        fh = open_at.file(offset)
        guess = nodestream.split_point(fh.read(_PROBE_BYTES), offset, head.separator)
        if guess is not None and guess > starts[-1]:
            starts.append(guess)
    return (head, starts) if len(starts) > 1 else None


def _cuts(size: int, workers: int) -> list[int]:
    """Where the ranges after the first begin: ``size`` cut into ranges of about
    ``RANGE_BYTES`` (at least one per process), the last ``workers`` of them cut in
    ``_TAIL_PIECES``: whoever is free takes the next range, so the processes end at most
    about a small range apart."""
    ranges = max(workers, -(-size // RANGE_BYTES))
    cuts = [size * k // ranges for k in range(1, ranges)]
    if ranges > workers:
        tail = size * (ranges - workers) // ranges
        cuts = cuts[: ranges - workers - 1] + [
            tail + (size - tail) * k // (workers * _TAIL_PIECES)
            for k in range(workers * _TAIL_PIECES)
        ]
    return cuts


class _Ranges:
    """Where each range of a split dump starts, and the first range nobody has taken yet
    (shared by the processes: each takes the next one when it is free)."""

    def __init__(self, starts: list[int], taken: Any) -> None:
        self.starts, self._taken = starts, taken

    def take(self) -> tuple[int, int, int | None] | None:
        """The next range nobody has taken: its number, where it starts and where the next
        one starts (None: it is the last); None when every range is taken."""
        with self._taken.get_lock():
            k = self._taken.value
            if k >= len(self.starts):
                return None
            self._taken.value = k + 1
        stop = self.starts[k + 1] if k + 1 < len(self.starts) else None
        return k, self.starts[k], stop


class _Split:
    """Worker processes reading ranges of the items array -- each range taken by whichever
    process is free (``ranges.take``; this process takes them too) --, each told how to
    summarise its nodes (``send``) and sending back each range's summary (or the exception
    that stopped it) through a pipe. Daemonic: a command that exits before collecting them
    (an error elsewhere) does not wait for them."""

    def __init__(self, path: str, head: nodestream.Head, starts: list[int], workers: int) -> None:
        self.head = head
        assert head.separator is not None
        ctx = multiprocessing.get_context("fork")  # this process's modules, no re-import
        self.ranges = _Ranges(starts, ctx.Value("l", 0))
        self.workers = []
        for _ in range(workers):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(
                target=_read_ranges, args=(theirs, path, head.separator, self.ranges), daemon=True
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

    def collect(self) -> None:
        """Take in the workers' summaries as they come (a thread of this process: a worker
        never waits on its pipe while this process reads its own ranges)."""
        self._got: dict[int, _Part] = {}
        self._failed: list[BaseException] = []
        self._collector = threading.Thread(target=self._receive, daemon=True)
        self._collector.start()

    def _receive(self) -> None:
        try:
            for _proc, conn in self.workers:
                while True:
                    try:
                        got = conn.recv()
                    except (EOFError, OSError):
                        raise nodestream.Unstreamable from None
                    if isinstance(got, BaseException):
                        raise got
                    if got is None:  # this worker is done
                        break
                    k, summary, keys, names = got
                    self._got[k] = (summary, keys, names)
        except BaseException as exc:  # handed to results(), which raises it
            self._failed.append(exc)

    def results(self) -> dict[int, _Part]:
        """Every range the workers read: its summary, the top-level keys read after the
        items array (for the last range) and its nodes' names; ``Unstreamable`` if one
        refused its range or a worker ended without a word."""
        try:
            self._collector.join()
            if self._failed:
                raise self._failed[0]
            return self._got
        finally:
            self.stop()

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
    merge: Callable[..., S],
) -> tuple[S, set[str]] | None:
    """The items array in byte ranges read by ``workers`` processes, this one included (the
    others started by ``start_split``, else now), each range summarised where it was read,
    the summaries merged in range order, with every node's name. None when the dump cannot
    be split (one item, no separator seen), a split point was not an item's start or a range
    was refused: the caller then reads it in one stream, which decides."""
    split = _STARTED.pop((path, workers), None)
    if split is None:
        if not _CAN_FORK:
            return None  # no fork (Windows): one stream
        plan = _plan(open_at, size, workers)
        if plan is None:
            return None
        split = _Split(path, *plan, workers - 1)
    split.send(summarise)
    split.collect()
    separator = split.head.separator
    ending = path in _ENDING
    parts: dict[int, _Part] = {}
    kept: list[object] = []
    try:
        while (taken := split.ranges.take()) is not None:
            k, start, stop = taken
            feeder = _Feeder([summarise], keep=ending)
            got = nodestream.read_items(
                open_at(start), start=start, separator=separator, stop=stop, sink=feeder
            )
            parts[k] = (feeder.result(), got.keys, got.names)
            kept.append(feeder.chunks)
        parts.update(split.results())
    except nodestream.Unstreamable:
        split.stop()
        return None  # a split point was a wrong guess (or a range is odd): one stream
    except BaseException:
        split.stop()
        raise
    if ending:
        _keep_till_exit(kept)
    last = len(split.ranges.starts) - 1
    if sorted(parts) != list(range(last + 1)):
        return None
    if not streamed_kind_ok(split.head.keys, parts[last][1] or {}):
        raise nodestream.Unstreamable
    sets = [names for _summary, _keys, names in parts.values()]
    if not _disjoint(sets):
        raise nodestream.Unstreamable  # a node name in two ranges: the full reader names it
    return merge(*(parts[k][0] for k in range(last + 1))), set().union(*sets)


def _disjoint(sets: list[set[str]]) -> bool:
    """No name in two of the sets (each range's names are distinct already)."""
    return sum(map(len, sets)) == len(set().union(*sets))


class _Feeder:
    """Takes a range's rows as they are read (a ``nodestream.Sink``) for the summarise in
    ``told`` -- a worker's arrives while it reads. A summarise with a ``builder()``
    (``diffing.ClusterSummariser``) is fed each chunk as soon as it is known, the chunks read
    before first: no node objects are made, and once it is known only the labels it reads
    are read. Any other is called once with every node at the end. ``keep``: every chunk is
    kept (for a process that ends without freeing them), else a chunk is dropped once fed."""

    def __init__(self, told: list[Any], *, keep: bool) -> None:
        self.told, self.keep = told, keep
        self.chunks: list[tuple[list[Any], nodestream.LabelKeys]] = []
        self._builder: Any = None
        self._fed = 0  # chunks fed so far

    def label_keys(self) -> nodestream.LabelKeys:
        return None if self._known() is None else self._builder.label_keys

    def __call__(self, rows: list[Any], label_keys: nodestream.LabelKeys, /) -> None:
        self.chunks.append((rows, label_keys))
        self._catch_up()

    def _known(self) -> Any:
        if self._builder is None and self.told:
            make = getattr(self.told[0], "builder", None)
            if make is not None:  # else a summarise of whole node lists
                self._builder = make()
        return self._builder

    def _catch_up(self) -> None:
        builder = self._known()
        if builder is None:
            return
        chunks, keys = self.chunks, builder.label_keys
        while self._fed < len(chunks):
            rows, made_for = chunks[self._fed]
            if made_for is None:  # read before the labels to read were known
                rows = _label_values(rows, keys)
            builder.add(rows)
            if not self.keep:
                chunks[self._fed] = ([], None)
            self._fed += 1

    def result(self) -> Any:
        """The summary of every row fed (``told`` must hold the summarise by now)."""
        self._catch_up()
        if self._builder is not None:
            return self._builder.summary()
        return self.told[0]([ObservedNode(*row) for rows, _ in self.chunks for row in rows])


def _label_values(rows: list[nodestream.NodeRow], keys: tuple[str, ...]) -> list[Row]:
    """Node rows as summary rows: their labels as the values of ``keys``."""
    return [
        (name, tuple(map(labels.get, keys)), taints, kubelet, os_image, alloc, capacity, off)
        for name, labels, taints, kubelet, os_image, alloc, capacity, off in rows
    ]


def _keep_till_exit(value: object) -> None:
    """Never free ``value``: held by a reference cycle of its own (module teardown at exit does
    not reach it) that no collection visits (``gc.freeze``: every object so far goes to the
    permanent generation, so no later collection walks the ~10^6 objects either). For a
    process that is about to end: the memory goes back with the process."""
    holder: list[object] = [value]
    holder.append(holder)
    gc.freeze()


_Waiting = list[tuple[int, "_Feeder", dict[str, Any] | None, set[str]]]
"""A worker's ranges read but not sent yet: number, rows, top-level keys after the array,
names."""


def _read_ranges(conn: Connection, path: str, separator: bytes, ranges: _Ranges) -> None:
    """One worker: the next range nobody has taken, read and summarised as the parent says
    once it knows (its message is taken in as it comes, so the parent never waits on this
    worker; ranges read before are summarised then), each summary sent back as soon as it can
    be made, then ``None`` -- or the exception that stopped it. Then the worker ends at once:
    freeing its nodes would only delay the parent, which waits for it to end."""
    told: list[Any] = []
    listener = threading.Thread(target=_listen, args=(conn, told), daemon=True)
    listener.start()
    waiting: _Waiting = []
    result: Any = None
    try:
        with _files(path) as open_at, _gc_paused():
            while (taken := ranges.take()) is not None:
                k, start, stop = taken
                feeder = _Feeder(told, keep=True)  # this process ends without freeing anything
                got = nodestream.read_items(
                    open_at(start), start=start, separator=separator, stop=stop, sink=feeder
                )
                waiting.append((k, feeder, got.keys, got.names))
                if told:
                    _send_parts(conn, waiting)
            listener.join()
            if not told:  # the parent is gone
                os._exit(0)
            _send_parts(conn, waiting)
    except (nodestream.Unstreamable, OSError) as exc:
        result = exc
    conn.send(result)
    conn.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _send_parts(conn: Connection, waiting: _Waiting) -> None:
    for k, feeder, keys, names in waiting:
        # one message: the names are sent once, the summary's refer to them
        conn.send((k, feeder.result(), keys, names))
    waiting.clear()


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
