"""The embedded event queue: one SQLite file, one writer thread, group commit.

Durability
    The file is in WAL mode with ``synchronous=FULL``: every commit fsyncs the WAL before
    ``put_many`` returns, so an event acknowledged to the producer survives ``kill -9`` *and*
    a power loss, as far as SQLite and the disk's fsync guarantee.  ``synchronous=NORMAL``
    (the usual WAL pairing) would survive ``kill -9`` too, but only fsyncs at checkpoints: a
    power loss could roll back the last commits, i.e. drop events the gateway already
    answered 202 for.  FULL costs one fsync per commit; group commit pays it once for many
    producers (see below), which is what makes thousands of single-event puts a second
    possible on a small machine.

Group commit
    Every operation (put, lease, ack, nack) goes to one writer thread through a queue.
    The thread takes the first operation, gathers what else arrives within ``batch_window``
    seconds (and whatever queued up meanwhile, up to ``MAX_OPS_PER_COMMIT``), runs them all
    in one transaction, commits once, and only then resolves their futures (through
    ``loop.call_soon_threadsafe``).  Each operation runs under its own savepoint, so a full
    queue refuses one ``put_many`` without failing its neighbours; an SQLite error retries
    the operations one per transaction, so one bad operation cannot fail the others.
    Inside a transaction runs SQLite's own work only (the rows are bound before it, leased
    rows decoded after it, puts share statements), since the write lock it holds is what
    the other process of a shared file waits for.

Dedupe
    An event put again while it still waits is stored once, and ``put_many`` says how many
    it folded so.  The keys are random (hashes), so a unique index on them would be written
    all over at every commit once many events wait (at 100,000 waiting, ~4x the CPU of a put
    and an ack, and most of the bytes written): the process that puts keeps instead a map of
    the keys it stored to their rows (``seq``, never reused: AUTOINCREMENT), built from the
    file on open, and a key found in it folds only while its row is still there -- checked by
    ``seq`` inside the put's transaction, so a row the consumer acked (or an older lease
    dropped) in the meantime is stored again.  Only one process puts into a file (the file
    locks below), so no row can be stored without the map knowing it.  Once acknowledged, an event
    is gone from the file: the queue keeps no "already processed" marks (version 1 kept them
    for 24 h in a ``processed`` table, dropped on open).  Whether an event was processed is
    for the stores the workers write to decide -- each is idempotent by the event key -- so a
    store that is new, or restored from a backup, is never starved of events an old queue
    file had seen.

Leases
    ``get_batch`` leases rows until ``now + ack_wait`` (``attempt += 1``); ``ack`` deletes
    them, ``nack(delay)`` makes them visible again after ``delay``.  A lease that is neither
    acked nor nacked expires and the row is delivered again.  The file is owned by one
    process (an ``flock`` on ``<path>.lock``): when it opens the file, no other consumer can
    hold a lease, so leases left by a crashed process are released at once.
    Several processes or hosts: use ``NatsQueue``.

Two processes (``role: all``'s gateway and worker)
    ``share="producer"`` opens the file to put only, ``share="consumer"`` to lease, ack and
    nack only; each takes a lock of its own (``<path>.producer.lock``,
    ``<path>.consumer.lock``), so there is one of each, and only the consumer frees leases on
    open (it is the only one that can hold them).  SQLite serialises their transactions (WAL,
    busy timeout).  The consumer's connection commits with ``synchronous=NORMAL``: a lease or
    an ack lost to a power cut only makes an event come back, which the idempotent stores
    absorb, and the producer's next ``FULL`` commit fsyncs the WAL with the consumer's frames
    in it -- so the consumer holds the write lock for microseconds, not for an fsync.  A put
    wakes the consumer through ``wake_fd`` (one end of a datagram socket pair: the producer
    sends a byte after a commit that stored something; the consumer's loop reads the other
    end); ``poll_interval`` is the fallback.  ``depth()`` is the producer's or the consumer's
    own count, corrected by a ``COUNT(*)`` at most once per ``depth_refresh`` seconds (the
    other process's puts or acks are seen then).

Limits
    ``max_depth`` is checked before each ``put_many``: a batch that starts below the limit is
    stored whole (all or none), so the depth can pass the limit by less than one batch.
    ``depth()`` is a counter kept by the writer thread, set from ``COUNT(*)`` on open.
    Every ``sqlite3`` error (and a lock held by another process) is ``QueueUnavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from fleetwarden.core.events import ChangeEvent
from fleetwarden.logs import get_logger
from fleetwarden.ports.queue import Delivery, QueueFull, QueueUnavailable
from fleetwarden.ports.sources import SYSTEM_CLOCK, Clock

__all__ = ["MAX_OPS_PER_COMMIT", "SqliteQueue"]

log = get_logger(__name__)

MAX_OPS_PER_COMMIT = 512  # bounds one transaction's time (and the latency it adds)
_PARAMS_PER_STATEMENT = 32_000  # at most; an SQLite built with a lower limit sets it (open)
# 1 had the "processed" table (see Dedupe), 2 a unique index on key: upgraded on open
_SCHEMA_VERSION = 3

_COLUMNS = """(
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    key        TEXT    NOT NULL,            -- unique among the rows: see Dedupe
    body       BLOB    NOT NULL,
    visible_at REAL    NOT NULL,            -- epoch seconds: when it may be leased (again)
    leased     INTEGER NOT NULL DEFAULT 0,  -- 1 while a consumer holds it
    attempt    INTEGER NOT NULL DEFAULT 0,  -- deliveries so far
    stored_at  REAL    NOT NULL
)"""
_VISIBILITY_INDEX = "CREATE INDEX IF NOT EXISTS events_by_visibility ON events (visible_at, seq)"
_SCHEMA = f"CREATE TABLE IF NOT EXISTS events {_COLUMNS};\n{_VISIBILITY_INDEX};\n"
_KEY_MAP_SLACK = 4096  # the key map is rebuilt from the file when it outgrows 2 x depth + this


@functools.lru_cache(maxsize=64)
def _insert_rows(n: int) -> str:
    """``INSERT`` of ``n`` events (key, body, visible_at, stored_at), already folded (see
    Dedupe); each row's ``seq`` comes back with its key (``RETURNING``, in no set order)."""
    rows = ",".join(["(?,?,?,?)"] * n)
    return f"INSERT INTO events (key, body, visible_at, stored_at) VALUES {rows} RETURNING seq, key"


@functools.lru_cache(maxsize=64)
def _rows_alive(n: int) -> str:
    return f"SELECT seq, key FROM events WHERE seq IN ({','.join('?' * n)})"


_LEASE = (
    "UPDATE events SET visible_at = ?1, leased = 1, attempt = attempt + 1 "
    "WHERE seq IN (SELECT seq FROM events WHERE visible_at <= ?2 "
    "ORDER BY visible_at, seq LIMIT ?3) "
    "RETURNING seq, body, attempt"
)


@dataclass(slots=True)
class _Op:
    kind: str  # "put" | "lease" | "ack" | "nack" | "count"
    args: tuple[Any, ...]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    result: Any = None
    error: BaseException | None = None
    depth_delta: int = 0
    wakes_consumers: bool = False


_STOP = object()
_LOCK_SUFFIX = {None: ".lock", "producer": ".producer.lock", "consumer": ".consumer.lock"}


class SqliteQueue:
    """``EventQueue`` over a local SQLite file (see the module docstring for the guarantees).

    Opens the file synchronously (create, WAL, schema, count): construct it at startup.
    ``clock`` (its ``time()``: epoch seconds) is injectable so tests can step time.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_depth: int = 100_000,
        ack_wait: float = 30.0,
        batch_window: float = 0.002,
        op_timeout: float = 30.0,
        poll_interval: float = 1.0,
        clock: Clock = SYSTEM_CLOCK,
        share: str | None = None,
        wake_fd: int | None = None,
        depth_refresh: float = 1.0,
    ) -> None:
        if share not in _LOCK_SUFFIX:
            raise ValueError(f"share must be 'producer', 'consumer' or None, not {share!r}")
        self.path = Path(path)
        self.share = share
        self._wake_fd = wake_fd
        self._wake_loop: asyncio.AbstractEventLoop | None = None
        self.depth_refresh = depth_refresh
        self._counted_at = time.monotonic()
        self.max_depth = max_depth
        self.ack_wait = ack_wait
        self.batch_window = batch_window
        self.op_timeout = op_timeout
        self.poll_interval = poll_interval
        self._clock = clock
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()
        self._waiters_lock = threading.Lock()
        self._closed = False
        self.commits = 0  # transactions committed: fewer than operations is group commit
        self._keys: dict[str, int] | None = None  # key -> seq of the rows put (see Dedupe)
        self._stored: dict[str, int] = {}  # the same, for the transaction under way
        self._lock_fh = self._take_file_lock()
        try:
            self._conn, self._depth = self._open()
        except BaseException:
            self._release_file_lock()
            raise
        self._thread = threading.Thread(
            target=self._writer, name=f"sqlite-queue:{self.path.name}", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------ EventQueue

    async def put_many(self, events: Sequence[ChangeEvent]) -> int:
        if not events:
            return 0
        if self.share == "consumer":
            raise QueueUnavailable(f"sqlite queue {self.path} is open to consume only")
        if self._depth >= self.max_depth and not self._depth_stale():
            # fast refusal; the writer checks again
            raise QueueFull(self._depth, self.max_depth)
        rows = [(e.key, orjson.dumps(e.to_json())) for e in events]
        folded: int = await self._submit("put", rows)
        return folded

    async def get_batch(self, max_items: int, timeout: float) -> list[Delivery]:
        loop = asyncio.get_running_loop()
        if self._wake_fd is not None and self.share == "consumer" and self._wake_loop is None:
            loop.add_reader(self._wake_fd, self._on_wake_fd)  # the producer's puts
            self._wake_loop = loop
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            # Registered before leasing: a put committed in between still wakes us.
            waiter = self._add_waiter(loop)
            try:
                leased: tuple[list[Delivery], float | None] = await self._submit("lease", max_items)
                deliveries, next_visible = leased
                if deliveries:
                    return deliveries
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                pause = min(remaining, self.poll_interval)
                if next_visible is not None:  # a lease expires or a nack delay ends
                    pause = min(pause, max(next_visible - self._clock.time(), 0.001))
                await asyncio.wait({waiter}, timeout=pause)
            finally:
                self._drop_waiter(loop, waiter)

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        if deliveries:
            await self._submit("ack", [_seq_of(d.token)[0] for d in deliveries])

    async def nack(self, deliveries: Sequence[Delivery], *, delay: float = 0.0) -> None:
        if deliveries:
            await self._submit("nack", [_seq_of(d.token) for d in deliveries], max(delay, 0.0))

    async def depth(self) -> int:
        if self._depth_stale() and not self._closed:
            await self._submit("count")  # a transaction counts the other process's changes
        return self._depth

    def _depth_stale(self) -> bool:
        """Shared file: the other process's puts or acks are not in our count yet."""
        return self.share is not None and time.monotonic() - self._counted_at >= self.depth_refresh

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._wake_loop is not None and self._wake_fd is not None:
            with contextlib.suppress(RuntimeError, ValueError, OSError):
                self._wake_loop.remove_reader(self._wake_fd)
        self._inbox.put(_STOP)
        await asyncio.to_thread(self._thread.join)
        self._release_file_lock()

    # ------------------------------------------------------------------ async <-> thread

    async def _submit(self, kind: str, *args: Any) -> Any:
        if self._closed:
            raise QueueUnavailable(f"sqlite queue {self.path} is closed")
        loop = asyncio.get_running_loop()
        op = _Op(kind, args, loop, loop.create_future())
        self._inbox.put(op)
        try:
            return await asyncio.wait_for(op.future, self.op_timeout)
        except TimeoutError:
            raise QueueUnavailable(
                f"sqlite queue {self.path} did not answer within {self.op_timeout:.0f}s "
                "(disk stalled?)"
            ) from None

    def _add_waiter(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = loop.create_future()
        with self._waiters_lock:
            self._waiters.add((loop, fut))
        return fut

    def _drop_waiter(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
        with self._waiters_lock:
            self._waiters.discard((loop, fut))

    def _wake_consumers(self) -> None:
        with self._waiters_lock:
            waiters, self._waiters = self._waiters, set()
        for loop, fut in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_resolve, fut, None, None)

    def _on_wake_fd(self) -> None:
        assert self._wake_fd is not None
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while os.read(self._wake_fd, 4096):  # drain: one wake-up covers them all
                pass
        self._wake_consumers()

    def _wake_other_process(self) -> None:
        if self._wake_fd is None or self.share != "producer":
            return
        # a full socket buffer means a wake-up is already pending: nothing is lost
        with contextlib.suppress(BlockingIOError, InterruptedError, OSError):
            os.write(self._wake_fd, b"!")

    # ------------------------------------------------------------------ open

    def _take_file_lock(self) -> Any:
        lock_path = self.path.with_name(self.path.name + _LOCK_SUFFIX[self.share])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(lock_path, "a+")  # noqa: SIM115 - held for the queue's lifetime
        except OSError as exc:
            raise QueueUnavailable(f"cannot open {lock_path}: {exc}") from exc
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise QueueUnavailable(
                f"{self.path} is open in another process (lock {lock_path}); one process "
                "owns an embedded queue: use the NATS queue for several replicas"
            ) from None
        except OSError as exc:
            fh.close()
            raise QueueUnavailable(f"cannot lock {lock_path}: {exc}") from exc
        return fh

    def _release_file_lock(self) -> None:
        fh, self._lock_fh = self._lock_fh, None
        if fh is not None:
            fh.close()  # closing drops the flock

    def _open(self) -> tuple[sqlite3.Connection, int]:
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=10.0
            )
        except sqlite3.Error as exc:
            raise QueueUnavailable(f"cannot open sqlite queue {self.path}: {exc}") from exc
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise QueueUnavailable(f"{self.path}: journal_mode is {mode!r}, WAL is required")
            # why FULL, and NORMAL for a consumer of a shared file: see the module docstring
            sync = "NORMAL" if self.share == "consumer" else "FULL"
            conn.execute(f"PRAGMA synchronous={sync}")
            conn.executescript(_SCHEMA)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != _SCHEMA_VERSION:
                self._upgrade(conn)
            if self.share != "producer":
                # Only this process can hold leases now (file lock): free those of a dead one.
                conn.execute(
                    "UPDATE events SET leased = 0, visible_at = ? WHERE leased = 1",
                    (self._clock.time(),),
                )
            depth = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
            # the keys waiting, for the one process that puts (see Dedupe)
            self._keys = None if self.share == "consumer" else _key_map(conn)
            # host parameters per statement: this build's limit (999 on old ones), or ours
            limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
            self._params_per_statement = max(4, min(_PARAMS_PER_STATEMENT, limit))
        except sqlite3.Error as exc:
            conn.close()
            raise QueueUnavailable(f"cannot open sqlite queue {self.path}: {exc}") from exc
        except QueueUnavailable:
            conn.close()
            raise
        return conn, int(depth)

    def _upgrade(self, conn: sqlite3.Connection) -> None:
        """Bring a new file (version 0) or an older schema to ``_SCHEMA_VERSION``, in one
        transaction (the other process of a shared file may be opening it too)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 1:  # its processed marks must not outlive it (see Dedupe)
                conn.execute("DROP TABLE IF EXISTS processed")
                version = 2
            if version == 2:  # the unique index on key goes (see Dedupe); rows, seqs stay
                last = conn.execute(
                    "SELECT seq FROM sqlite_sequence WHERE name = 'events'"
                ).fetchone()
                conn.execute(f"CREATE TABLE events_v3 {_COLUMNS}")
                conn.execute("INSERT INTO events_v3 SELECT * FROM events")
                conn.execute("DROP TABLE events")
                conn.execute("ALTER TABLE events_v3 RENAME TO events")
                conn.execute(_VISIBILITY_INDEX)
                if last is not None:  # a seq acked before the upgrade is never used again
                    conn.execute("DELETE FROM sqlite_sequence WHERE name = 'events'")
                    conn.execute(
                        "INSERT INTO sqlite_sequence (name, seq) VALUES ('events', ?)", last
                    )
                version = 0
            if version == 0:
                conn.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
            elif version != _SCHEMA_VERSION:
                raise QueueUnavailable(
                    f"{self.path} has queue schema {version}; this version reads "
                    f"{_SCHEMA_VERSION}: drain it with the matching fleetwarden, or move it away"
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------------ writer thread

    def _writer(self) -> None:
        stopping = False
        try:
            while not stopping:
                first = self._inbox.get()
                if first is _STOP:
                    break
                ops: list[_Op] = [first]
                # Only puts wait for company: leases and acks have no fsync to share
                # unless a put is there anyway, and their callers should not wait.
                deadline = time.monotonic() + (self.batch_window if first.kind == "put" else 0)
                while len(ops) < MAX_OPS_PER_COMMIT:
                    remaining = deadline - time.monotonic()
                    try:
                        item = self._inbox.get(timeout=remaining) if remaining > 0 else None
                        if item is None:
                            item = self._inbox.get_nowait()
                    except queue.Empty:
                        break
                    if item is _STOP:
                        stopping = True
                        break
                    ops.append(item)
                try:
                    self._commit(ops)
                except Exception as exc:  # a bug must fail the callers, not kill the thread
                    log.exception("sqlite queue batch failed", path=str(self.path))
                    for op in ops:
                        op.error = QueueUnavailable(f"sqlite queue {self.path}: {exc!r}")
                        self._resolve(op)
                    continue
        finally:
            self._fail_leftovers()
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()

    def _commit(self, ops: list[_Op]) -> None:
        try:
            self._run_in_transaction(ops)
        except sqlite3.Error as exc:
            if len(ops) == 1:
                ops[0].error = QueueUnavailable(f"sqlite queue {self.path}: {exc}")
                ops[0].result = None
            else:
                # Retry each alone: one bad operation must not fail its neighbours.
                for op in ops:
                    self._commit([op])
                return
        else:
            self._depth += sum(op.depth_delta for op in ops if op.error is None)
            self.commits += 1
        for op in ops:
            if op.kind == "lease" and op.error is None:
                self._deliveries(op)  # decoded after the commit: see _run_in_transaction
        wake = False
        for op in ops:
            wake = wake or (op.error is None and op.wakes_consumers)
            self._resolve(op)
        if wake:
            self._wake_consumers()
            self._wake_other_process()

    def _run_in_transaction(self, ops: list[_Op]) -> None:
        """One transaction for ``ops``. While it runs, the file's write lock is held -- the
        other process of a shared file waits for it -- so what happens inside is SQLite's own
        work: the rows are bound before it starts, leased rows decoded after it ends, and
        puts in a row that cannot reach ``max_depth`` share their statements. (Each return
        to Python inside would wait for this process's GIL, with the lock still held.)"""
        conn = self._conn
        now = self._clock.time()
        for op in ops:
            op.error, op.result, op.depth_delta, op.wakes_consumers = None, None, 0, False
        params = {id(op): _bind(op.args[0], now) for op in ops if op.kind == "put"}
        try:
            conn.execute("BEGIN IMMEDIATE")
            if self._depth_stale():
                # the other process's puts or acks: counted inside the write lock
                self._depth = int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
                self._counted_at = time.monotonic()
            depth = self._depth
            i = 0
            while i < len(ops):
                run = _puts_from(ops, i)
                if run and depth + sum(len(op.args[0]) for op in run[:-1]) < self.max_depth:
                    # none of them starts at the limit: no savepoints, shared statements
                    depth += self._put_together(run, params)
                    i += len(run)
                    continue
                op = ops[i]
                i += 1
                if op.kind != "put":
                    self._apply(op, now)
                    depth += op.depth_delta
                    continue
                if depth >= self.max_depth:
                    op.error = QueueFull(depth, self.max_depth)
                    continue
                depth += self._put_together([op], params)
            conn.execute("COMMIT")
        except BaseException:
            self._stored.clear()  # rolled back: the key map learns nothing
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        if self._stored:
            assert self._keys is not None  # only a process that puts stores rows
            self._keys.update(self._stored)
            self._stored.clear()
            if len(self._keys) > 2 * depth + _KEY_MAP_SLACK:
                # keys of rows acked since: read the map anew (rows stored are all committed)
                self._keys = _key_map(conn)

    def _put_together(self, puts: list[_Op], params: dict[int, list[tuple[Any, ...]]]) -> int:
        """Store the rows of ``puts`` (in their order) in as few statements as the host
        parameter limit allows; each put learns how many of its rows were stored (a key
        still waiting, or met earlier in these puts, is folded: see Dedupe). Returns the
        rows stored."""
        keys, stored = self._keys, self._stored
        if keys is None:  # pragma: no cover - put_many refuses on a consumer
            raise QueueUnavailable(f"sqlite queue {self.path} is open to consume only")
        # the rows the key map names for these keys: still there, or acked since?
        named = [
            seq
            for op in puts
            for row in params[id(op)]
            if (seq := stored.get(row[0]) or keys.get(row[0])) is not None
        ]
        alive: set[tuple[int, str]] = set()
        for chunk in _chunks(named, self._params_per_statement):
            alive.update(self._conn.execute(_rows_alive(len(chunk)), chunk).fetchall())
        taken: set[str] = set()
        fresh: list[Any] = []
        for op in puts:
            added = 0
            for row in params[id(op)]:
                key = row[0]
                if key in taken:
                    continue  # met earlier in these puts
                seq = stored.get(key) or keys.get(key)
                if seq is not None and (seq, key) in alive:
                    continue  # still waiting
                taken.add(key)
                fresh.extend(row)
                added += 1
            op.depth_delta = added
            op.result = len(op.args[0]) - added  # folded into one already waiting
            op.wakes_consumers = added > 0
        for chunk in _chunks(fresh, self._params_per_statement // 4 * 4):
            for seq, key in self._conn.execute(_insert_rows(len(chunk) // 4), chunk):
                stored[key] = seq
        return len(taken)

    def _apply(self, op: _Op, now: float) -> None:
        conn = self._conn
        if op.kind == "lease":
            (max_items,) = op.args
            found = conn.execute(_LEASE, (now + self.ack_wait, now, max(int(max_items), 0)))
            rows = found.fetchall()
            next_visible = None
            if not rows:
                next_visible = conn.execute("SELECT MIN(visible_at) FROM events").fetchone()[0]
            op.result = (rows, next_visible)  # rows -> deliveries: _deliveries, after COMMIT
        elif op.kind == "ack":
            (seqs,) = op.args
            gone = 0
            for chunk in _chunks(seqs, self._params_per_statement):
                marks = ",".join("?" * len(chunk))
                gone += conn.execute(f"DELETE FROM events WHERE seq IN ({marks})", chunk).rowcount
            op.depth_delta = -gone
        elif op.kind == "nack":
            tokens, delay = op.args
            # Only the current lease holder may hand a row back (attempt matches).
            cur = conn.executemany(
                "UPDATE events SET leased = 0, visible_at = ? WHERE seq = ? AND attempt = ?",
                [(now + delay, seq, attempt) for seq, attempt in tokens],
            )
            op.wakes_consumers = delay == 0 and cur.rowcount > 0
        elif op.kind == "count":
            pass  # the transaction itself refreshed the count (_run_in_transaction)
        else:  # pragma: no cover - _submit callers are all above
            raise AssertionError(f"unknown queue operation {op.kind!r}")

    def _deliveries(self, op: _Op) -> None:
        """A committed lease's rows as deliveries, in queue order. A row that does not
        decode (written by another version?) would be leased forever: it is deleted."""
        rows, next_visible = op.result
        deliveries = []
        unreadable = []
        for seq, body, attempt in sorted(rows):
            try:
                event = ChangeEvent.from_json(orjson.loads(body))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                log.error(
                    "dropping unreadable queued event",
                    path=str(self.path),
                    seq=seq,
                    error=repr(exc),
                )
                unreadable.append(seq)
                continue
            deliveries.append(Delivery(event=event, token=f"{seq}:{attempt}", attempt=attempt))
        if unreadable:
            drop = _Op("ack", (unreadable,), op.loop, op.future)  # resolved by nobody
            try:
                self._run_in_transaction([drop])
            except sqlite3.Error as exc:  # leased still: it comes back, and is dropped then
                log.error(
                    "cannot drop unreadable queued events", path=str(self.path), error=str(exc)
                )
            else:
                self._depth += drop.depth_delta
            if not deliveries:
                next_visible = self._clock.time()  # more rows may wait: lease again at once
        op.result = (deliveries, next_visible)

    def _resolve(self, op: _Op) -> None:
        with contextlib.suppress(RuntimeError):  # the caller's loop is closed
            op.loop.call_soon_threadsafe(_resolve, op.future, op.result, op.error)

    def _fail_leftovers(self) -> None:
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, _Op):
                item.error = QueueUnavailable(f"sqlite queue {self.path} is closed")
                self._resolve(item)


def _resolve(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.done():  # cancelled or timed out: the caller has gone
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


def _bind(rows: Sequence[tuple[str, bytes]], now: float) -> list[tuple[Any, ...]]:
    """A put's rows as the INSERT's parameters: key, body, visible_at, stored_at."""
    return [(key, body, now, now) for key, body in rows]


def _key_map(conn: sqlite3.Connection) -> dict[str, int]:
    """The rows waiting in the file, by key (see Dedupe)."""
    return dict(conn.execute("SELECT key, seq FROM events"))


def _puts_from(ops: list[_Op], i: int) -> list[_Op]:
    """The puts that follow one another in ``ops`` from ``i`` on."""
    j = i
    while j < len(ops) and ops[j].kind == "put":
        j += 1
    return ops[i:j]


def _seq_of(token: str) -> tuple[int, int]:
    seq, _, attempt = token.partition(":")
    try:
        return int(seq), int(attempt)
    except ValueError:
        raise ValueError(f"not a sqlite queue delivery token: {token!r}") from None


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
