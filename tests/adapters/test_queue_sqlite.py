"""The EventQueue contract, pinned for both backends (``queue``/``queue_kit`` run each test on
SQLite and on a real nats-server), then what only the embedded SQLite queue promises: group
commit, no lasting "processed" marks, one owning process, reopening, and a kill -9 crash test.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetwarden.adapters.queue import sqlite as sqlite_queue
from fleetwarden.adapters.queue.sqlite import SqliteQueue
from fleetwarden.ports.queue import Delivery, EventQueue, QueueFull, QueueUnavailable
from tests.adapters.conftest import QueueKit, event
from tests.support import queue_crash


async def take(q: EventQueue, n: int, *, timeout: float = 10.0, batch: int = 50) -> list[Delivery]:
    """Exactly the next n deliveries (fails if they do not come within timeout)."""
    got: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"only {len(got)} of {n} deliveries within {timeout}s"
        got += await q.get_batch(min(batch, n - len(got)), min(remaining, 1.0))
    return got


async def take_and_ack(q: EventQueue, n: int, **kw: float) -> list[Delivery]:
    got = await take(q, n, **kw)
    await q.ack(got)
    return got


def ids(deliveries: Sequence[Delivery]) -> list[str]:
    return sorted(d.event.id for d in deliveries)


# --------------------------------------------------------------------------- the contract


async def test_put_get_ack_round_trips_the_event_and_empties_the_queue(queue: EventQueue):
    sent = event(1, actor="arn:aws:iam::1:user/alice", changed=("scaling.desired",))
    await queue.put_many([sent])
    assert await queue.depth() == 1
    (got,) = await take(queue, 1)
    assert got.event == sent
    assert got.attempt == 1
    await queue.ack([got])
    assert await queue.depth() == 0
    assert await queue.get_batch(10, 0.2) == []


async def test_get_batch_on_an_empty_queue_returns_nothing_after_its_timeout(queue: EventQueue):
    t0 = time.monotonic()
    assert await queue.get_batch(10, 0.3) == []
    assert 0.2 <= time.monotonic() - t0 < 3


async def test_get_batch_wakes_for_an_event_put_while_it_waits(queue: EventQueue):
    waiting = asyncio.ensure_future(queue.get_batch(10, 5.0))
    await asyncio.sleep(0.1)  # let it start waiting (not synchronisation: the result is)
    t0 = time.monotonic()
    await queue.put_many([event(1)])
    got = await asyncio.wait_for(waiting, 6)
    assert ids(got) == ["1"]
    assert time.monotonic() - t0 < 1.0, "woken by the put, not by a poll"


async def test_the_same_key_is_stored_once_while_it_waits_and_the_copies_are_counted(
    queue: EventQueue,
):
    assert await queue.put_many([event(1), event(1), event(2)]) == 1
    assert await queue.put_many([event(1)]) == 1
    assert await queue.depth() == 2
    first = await take_and_ack(queue, 2)
    assert ids(first) == ["1", "2"]


async def test_a_batch_larger_than_one_statement_is_stored_whole_in_order_folded_across_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A put of more events than one INSERT takes (125 rows under a limit of 500 host
    parameters, as an old SQLite build has) is several statements in one transaction: every
    event once, in the order sent, a copy folded whichever part its first came in, and the
    copies counted."""
    monkeypatch.setattr(sqlite_queue, "_PARAMS_PER_STATEMENT", 500)
    q = SqliteQueue(tmp_path / "q.db")
    assert q._params_per_statement == 500
    try:
        sent = [event(i) for i in range(300)] + [event(3), event(200), event(299)]
        assert await q.put_many(sent) == 3
        assert await q.put_many([event(130), event(300)]) == 1
        assert await q.depth() == 301
        got = await q.get_batch(1000, timeout=1.0)
        assert [d.event.id for d in got] == [str(i) for i in range(301)]
    finally:
        await q.close()


async def test_same_id_from_another_source_is_another_event(queue: EventQueue):
    await queue.put_many([event(1, source="a"), event(1, source="b")])
    got = await take_and_ack(queue, 2)
    assert sorted(d.event.source for d in got) == ["a", "b"]


async def test_an_unacked_delivery_comes_back_after_its_lease_expires(queue: EventQueue):
    await queue.put_many([event(1)])  # queue fixture: ack_wait=1.0
    (first,) = await take(queue, 1)
    assert await queue.get_batch(10, 0.3) == [], "leased: not given to anyone else"
    t0 = time.monotonic()
    (again,) = await take(queue, 1, timeout=10)
    assert again.event == first.event
    assert again.attempt == 2
    assert time.monotonic() - t0 > 0.3
    await queue.ack([again])
    assert await queue.depth() == 0


async def test_nack_with_delay_hides_the_event_until_the_delay_ends(queue: EventQueue):
    await queue.put_many([event(1)])
    (first,) = await take(queue, 1)
    t0 = time.monotonic()
    await queue.nack([first], delay=0.8)
    assert await queue.get_batch(10, 0.3) == []
    (again,) = await take(queue, 1, timeout=5)
    assert time.monotonic() - t0 >= 0.7
    assert again.attempt == 2
    await queue.ack([again])


async def test_nack_without_delay_redelivers_at_once(queue: EventQueue):
    await queue.put_many([event(1)])
    (first,) = await take(queue, 1)
    await queue.nack([first])
    t0 = time.monotonic()
    (again,) = await take(queue, 1, timeout=5)
    assert time.monotonic() - t0 < 0.9  # sooner than the 1 s lease
    assert again.event == first.event


async def test_put_is_refused_with_queue_full_at_max_depth_until_some_are_acked(
    queue_kit: QueueKit,
):
    q = await queue_kit.open(max_depth=5)
    for i in range(5):
        await q.put_many([event(i)])
    with pytest.raises(QueueFull) as full:
        await q.put_many([event(99)])
    assert (full.value.depth, full.value.limit) == (5, 5)
    await take_and_ack(q, 1)
    await q.put_many([event(99)])
    assert await q.depth() == 5


async def test_1000_puts_from_50_concurrent_producers_are_all_delivered_once(queue: EventQueue):
    async def produce(task: int) -> None:
        for i in range(20):
            await queue.put_many([event(f"{task}-{i}")])

    async with asyncio.TaskGroup() as tg:
        for task in range(50):
            tg.create_task(produce(task))
    assert await queue.depth() == 1000
    got = await take_and_ack(queue, 1000, timeout=30, batch=100)
    assert len(set(ids(got))) == 1000
    assert await queue.get_batch(10, 0.3) == []
    assert await queue.depth() == 0


async def test_two_consumers_share_the_work_and_no_event_goes_to_both(queue_kit: QueueKit):
    producer = await queue_kit.open(ack_wait=10.0)
    await producer.put_many([event(i) for i in range(200)])
    consumers = [producer, await queue_kit.replica(producer)]
    seen: list[Counter[str]] = [Counter(), Counter()]

    async def consume(index: int) -> None:
        q = consumers[index]
        while sum(sum(c.values()) for c in seen) < 200:
            batch = await q.get_batch(5, 0.5)
            seen[index].update(d.event.id for d in batch)
            await q.ack(batch)
            await asyncio.sleep(0)  # a worker's "processing": lets the other one fetch

    async with asyncio.timeout(30), asyncio.TaskGroup() as tg:
        for index in (0, 1):
            tg.create_task(consume(index))
    both = seen[0] + seen[1]
    assert len(both) == 200 and set(both.values()) == {1}, "each event to exactly one consumer"
    assert seen[0] and seen[1], "both consumers got work"


async def test_a_closed_queue_refuses_with_queue_unavailable(queue_kit: QueueKit):
    q = await queue_kit.open()
    await q.close()
    with pytest.raises(QueueUnavailable):
        await q.put_many([event(1)])


# --------------------------------------------------------------------------- SQLite only


def test_the_file_is_in_wal_mode_with_full_sync(tmp_path: Path):
    q = SqliteQueue(tmp_path / "q.db")
    try:
        with sqlite3.connect(tmp_path / "q.db") as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert q._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        asyncio.run(q.close())


async def test_concurrent_single_puts_share_commits(tmp_path: Path):
    """Group commit: 200 concurrent one-event puts need far fewer than 200 transactions."""
    q = SqliteQueue(tmp_path / "q.db")
    try:
        before = q.commits
        await asyncio.gather(*(q.put_many([event(i)]) for i in range(200)))
        assert await q.depth() == 200
        assert q.commits - before <= 20
    finally:
        await q.close()


@pytest.mark.parametrize("params", [32_000, 8])
async def test_puts_of_one_commit_share_statements_and_each_counts_its_own_folds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, params: int
):
    """Puts gathered into one commit are stored by shared statements (one row per statement
    at 8 host parameters, too); each put is told how many of its own events were folded: a
    key already waiting, or one an earlier put of the same commit (or the same put) holds."""
    monkeypatch.setattr(sqlite_queue, "_PARAMS_PER_STATEMENT", params)
    q = SqliteQueue(tmp_path / "q.db", batch_window=0.2)
    try:
        assert await q.put_many([event(0)]) == 0
        before = q.commits
        results = await asyncio.gather(
            q.put_many([event(1), event(2)]),
            q.put_many([event(2), event(3)]),
            q.put_many([event(3), event(3), event(4), event(0)]),
        )
        assert q.commits == before + 1
        assert results == [0, 1, 3]
        assert await q.depth() == 5
        got = await q.get_batch(100, timeout=1.0)
        assert [d.event.id for d in got] == ["0", "1", "2", "3", "4"]
    finally:
        await q.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    puts=st.lists(st.lists(st.integers(0, 12), max_size=6), min_size=1, max_size=8),
    waiting=st.lists(st.integers(0, 12), max_size=4),
    max_depth=st.integers(1, 20),
    params=st.sampled_from([8, 40, 32_000]),
)
def test_puts_answer_as_if_stored_one_by_one_in_order(
    tmp_path_factory: pytest.TempPathFactory,
    puts: list[list[int]],
    waiting: list[int],
    max_depth: int,
    params: int,
):
    """Whether a commit's puts share statements or not (near the limit they do not), each
    put is answered as if the puts were stored one after another in the order sent: refused
    (QueueFull) when the queue is at ``max_depth`` as it starts, else stored whole with its
    copies -- of an event waiting, or met earlier -- counted as folded."""
    path = tmp_path_factory.mktemp("q") / "q.db"

    async def run() -> tuple[list[object], list[str]]:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sqlite_queue, "_PARAMS_PER_STATEMENT", params)
            q = SqliteQueue(path, max_depth=max_depth, batch_window=0.05)
        try:
            if waiting:
                await q.put_many([event(i) for i in waiting])
            got = await asyncio.gather(
                *(q.put_many([event(i) for i in ids]) for ids in puts), return_exceptions=True
            )
            stored = await q.get_batch(1000, timeout=0.5)
            return [type(r) if isinstance(r, BaseException) else r for r in got], [
                d.event.id for d in stored
            ]
        finally:
            await q.close()

    answers, stored = asyncio.run(run())
    held = list(dict.fromkeys(str(i) for i in waiting))
    expected: list[object] = []
    for ids in puts:
        if not ids:
            expected.append(0)
        elif len(held) >= max_depth:
            expected.append(QueueFull)
        else:
            new = [k for k in dict.fromkeys(str(i) for i in ids) if k not in held]
            held += new
            expected.append(len(ids) - len(new))
    assert answers == expected
    assert stored == held


async def test_a_lease_is_decoded_after_its_transaction_and_an_unreadable_row_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """While a transaction runs the file's write lock is held (the other process of a shared
    file waits): the leased rows become events after the commit, not inside it. A row no
    version can read would be leased forever: it is deleted, the others are delivered."""
    q = SqliteQueue(tmp_path / "q.db")
    try:
        await q.put_many([event(1), event(2), event(3)])
        await asyncio.to_thread(
            q._conn.execute, "UPDATE events SET body = ? WHERE key = ?", (b"{", event(2).key)
        )
        decoded_in_transaction = []
        loads = sqlite_queue.orjson.loads

        def watched_loads(body: bytes) -> object:
            decoded_in_transaction.append(q._conn.in_transaction)
            return loads(body)

        monkeypatch.setattr(sqlite_queue.orjson, "loads", watched_loads)
        got = await q.get_batch(10, timeout=1.0)
        assert [d.event.id for d in got] == ["1", "3"]
        assert decoded_in_transaction == [False, False, False]
        assert await q.depth() == 2
        monkeypatch.undo()
        await q.ack(got)
        assert await q.get_batch(10, timeout=0.1) == []
        assert await q.depth() == 0
    finally:
        await q.close()


async def test_queue_full_refuses_one_put_without_failing_the_puts_in_its_commit(tmp_path: Path):
    q = SqliteQueue(tmp_path / "q.db", max_depth=3, batch_window=0.05)
    try:
        results = await asyncio.gather(
            *(q.put_many([event(i)]) for i in range(6)), return_exceptions=True
        )
        assert sum(r == 0 for r in results) == 3
        assert all(isinstance(r, QueueFull) for r in results if r != 0)
        assert await q.depth() == 3
    finally:
        await q.close()


async def test_an_event_sent_again_after_its_ack_is_queued_again_for_the_stores_to_judge(
    tmp_path: Path,
):
    """The queue keeps no "already processed" marks: a store that is new or restored from a
    backup must get the event; the workers' stores (idempotent by key) call it a duplicate."""
    q = SqliteQueue(tmp_path / "q.db")
    try:
        await q.put_many([event(1)])
        await take_and_ack(q, 1)
        assert await q.put_many([event(1)]) == 0
        (again,) = await take(q, 1, timeout=2)
        assert again.event.id == "1"
    finally:
        await q.close()


async def test_a_version_1_file_loses_its_processed_marks_and_keeps_its_events(tmp_path: Path):
    path = tmp_path / "q.db"
    q = SqliteQueue(path)
    await q.put_many([event(1), event(2)])
    await take_and_ack(q, 1)
    await q.close()
    with sqlite3.connect(path) as conn:  # what version 1 left behind
        conn.execute("CREATE TABLE processed (key TEXT PRIMARY KEY, done_at REAL NOT NULL)")
        conn.execute("INSERT INTO processed VALUES (?, ?)", (event(7).key, time.time()))
        conn.execute("PRAGMA user_version=1")
    q = SqliteQueue(path)
    try:
        assert await q.depth() == 1
        await q.put_many([event(7)])  # marked processed by version 1: queued all the same
        assert sorted(ids(await take(q, 2, timeout=2))) == ["2", "7"]
    finally:
        await q.close()
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "processed" not in tables
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3


async def test_reopening_keeps_unacked_events_and_counts_them(tmp_path: Path):
    path = tmp_path / "q.db"
    q = SqliteQueue(path)
    await q.put_many([event(i) for i in range(3)])
    await take_and_ack(q, 1)
    await take(q, 1)  # leased, never acked: the process "dies" with the lease
    await q.close()
    q = SqliteQueue(path, ack_wait=3600)
    try:
        assert await q.depth() == 2
        got = await take(q, 2, timeout=2)  # the dead lease is released on open
        assert len(set(ids(got))) == 2
    finally:
        await q.close()


async def test_a_second_process_cannot_open_the_same_file(tmp_path: Path):
    path = tmp_path / "q.db"
    q = SqliteQueue(path)
    try:
        code = (
            "import sys\nfrom fleetwarden.adapters.queue.sqlite import SqliteQueue\n"
            "from fleetwarden.ports.queue import QueueUnavailable\n"
            "try:\n    SqliteQueue(sys.argv[1])\nexcept QueueUnavailable as e:\n"
            "    print(e)\n    sys.exit(3)\n"
        )
        r = subprocess.run(
            [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 3, r.stderr
        assert "open in another process" in r.stdout
    finally:
        await q.close()
    await SqliteQueue(path).close()  # the lock was released on close


@pytest.mark.parametrize("content", [b"this is not a database" * 100, None])
def test_an_unusable_file_is_queue_unavailable(tmp_path: Path, content: bytes | None):
    if content is None:
        path = tmp_path / "missing-dir-is-a-file" / "q.db"
        (tmp_path / "missing-dir-is-a-file").write_text("a file where a directory should be")
    else:
        path = tmp_path / "q.db"
        path.write_bytes(content)
    with pytest.raises(QueueUnavailable, match=str(tmp_path)):
        SqliteQueue(path)


async def test_an_sqlite_error_during_a_put_is_queue_unavailable(tmp_path: Path):
    q = SqliteQueue(tmp_path / "q.db")
    try:
        await asyncio.to_thread(q._conn.execute, "DROP TABLE events")  # a broken file
        with pytest.raises(QueueUnavailable, match="no such table"):
            await q.put_many([event(1)])
    finally:
        await q.close()


# --------------------------------------------------------------------------- crash


def test_kill9_of_producer_and_consumer_loses_nothing_acknowledged_sqlite(tmp_path: Path):
    """Producer and then consumer killed -9 mid-run; a fresh consumer drains the file: every
    event the producer saw acknowledged is processed, no acked event is delivered again,
    and with dedupe by key nothing is processed twice."""
    r = queue_crash.run_scenario(["--sqlite", str(tmp_path / "crash.db")])
    assert len(r.produced) >= 100 and len(r.consumer_acked) >= 100  # re-sends repeat keys
    assert r.produced - set(r.processed) == set(), "acknowledged events lost"
    assert set(r.consumer_acked) & set(r.redelivered) == set(), "acked events delivered again"
    assert [k for k, n in Counter(r.processed).items() if n > 1] == [], "processed twice"


# --------------------------------------------------------------------------- shared file


async def test_a_producer_and_a_consumer_share_one_file_and_a_put_wakes_the_consumer(
    tmp_path: Path,
):
    """role: all's two processes: the producer's put wakes the consumer through the socket
    pair at once (its poll interval is an hour), and the consumer's acks reach the producer's
    depth at its next count."""
    import socket

    path = tmp_path / "q.db"
    producer_end, consumer_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for s in (producer_end, consumer_end):
        s.setblocking(False)
    producer = SqliteQueue(path, share="producer", wake_fd=producer_end.fileno(), depth_refresh=0)
    consumer = SqliteQueue(
        path, share="consumer", wake_fd=consumer_end.fileno(), poll_interval=3600
    )
    try:
        assert await consumer.get_batch(10, timeout=0.05) == []  # registers the reader
        waiting = asyncio.ensure_future(consumer.get_batch(10, timeout=30))
        await asyncio.sleep(0.05)
        started = time.monotonic()
        await producer.put_many([event(1), event(2)])
        got = await asyncio.wait_for(waiting, 5)
        assert time.monotonic() - started < 1.0, "woken by the poll, not by the producer"
        assert ids(got) == sorted([event(1).id, event(2).id])
        assert await producer.depth() == 2
        await consumer.ack(got)
        assert await producer.depth() == 0  # counted again (depth_refresh=0)
    finally:
        await consumer.close()
        await producer.close()
        producer_end.close()
        consumer_end.close()


async def test_only_the_consumer_frees_leases_and_each_side_is_exclusive(tmp_path: Path):
    """A new producer must not free the live consumer's leases; a new consumer frees a dead
    one's at once; a second producer (or consumer) of the same file is refused."""
    path = tmp_path / "q.db"
    producer = SqliteQueue(path, share="producer")
    consumer = SqliteQueue(path, share="consumer", ack_wait=3600)
    try:
        await producer.put_many([event(1)])
        leased = await take(consumer, 1)
        with pytest.raises(QueueUnavailable, match=r"producer\.lock"):
            SqliteQueue(path, share="producer")
        with pytest.raises(QueueUnavailable, match=r"consumer\.lock"):
            SqliteQueue(path, share="consumer")
        await producer.close()
        producer = SqliteQueue(path, share="producer")  # a restarted gateway
        assert await consumer.get_batch(1, timeout=0.2) == []  # the lease still holds
        await consumer.close()  # the worker "dies" holding it
        consumer = SqliteQueue(path, share="consumer", ack_wait=3600)
        again = await take(consumer, 1, timeout=2)
        assert ids(again) == ids(leased) and again[0].attempt == 2
        await consumer.ack(again)
    finally:
        await consumer.close()
        await producer.close()


async def test_a_producer_sees_the_consumers_acks_when_it_refuses_at_max_depth(tmp_path: Path):
    """The producer's count is corrected inside its write lock: once the consumer drained
    the file, a put at the old depth limit is accepted (no 429 stuck on a stale count)."""
    path = tmp_path / "q.db"
    producer = SqliteQueue(path, share="producer", max_depth=2, depth_refresh=0.2)
    consumer = SqliteQueue(path, share="consumer")
    try:
        await producer.put_many([event(1), event(2)])
        with pytest.raises(QueueFull):
            await producer.put_many([event(3)])
        await take_and_ack(consumer, 2)
        await asyncio.sleep(0.25)
        assert await producer.put_many([event(3)]) == 0
    finally:
        await consumer.close()
        await producer.close()


def test_the_consumer_of_a_shared_file_commits_without_its_own_fsync(tmp_path: Path):
    """Only the producer's commits answer a sender: FULL there, NORMAL for leases and acks."""
    path = tmp_path / "q.db"
    producer = SqliteQueue(path, share="producer")
    consumer = SqliteQueue(path, share="consumer")
    try:
        assert producer._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert consumer._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    finally:
        asyncio.run(consumer.close())
        asyncio.run(producer.close())


# ------------------------------------------------------------------ dedupe without an index

_STEP = st.one_of(
    st.tuples(st.just("put"), st.lists(st.integers(0, 9), min_size=1, max_size=6)),
    st.tuples(st.just("ack"), st.integers(1, 6)),
    st.tuples(st.just("nack"), st.integers(1, 3)),
    st.tuples(st.just("reopen"), st.just(0)),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(_STEP, min_size=1, max_size=14),
    shared=st.booleans(),
    slack=st.sampled_from([0, 3, 4096]),
)
def test_a_key_folds_exactly_while_its_event_waits_across_acks_nacks_and_reopens(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[str, object]],
    shared: bool,
    slack: int,
):
    """The file keeps no index on the key: the process that puts knows which keys wait. Over
    any run of puts, acks (of what a lease returns), nacks, reopenings, in one process or as
    a producer and a consumer of one file, and however often the key map is read anew, a put
    folds exactly the copies of events still waiting -- an event acked is stored again when
    sent again -- and the file holds each waiting event once."""
    path = tmp_path_factory.mktemp("q") / "q.db"

    def open_both() -> tuple[SqliteQueue, SqliteQueue]:
        if not shared:
            q = SqliteQueue(path, batch_window=0)
            return q, q
        return (
            SqliteQueue(path, share="producer", depth_refresh=0, batch_window=0),
            SqliteQueue(path, share="consumer", depth_refresh=0),
        )

    async def close(producer: SqliteQueue, consumer: SqliteQueue) -> None:
        await producer.close()
        if consumer is not producer:
            await consumer.close()

    async def run() -> None:
        waiting: set[str] = set()
        producer, consumer = open_both()
        try:
            for kind, arg in steps:
                if kind == "put":
                    ids_ = [str(i) for i in arg]  # type: ignore[attr-defined]
                    new = set(ids_) - waiting
                    assert await producer.put_many([event(i) for i in ids_]) == len(ids_) - len(new)
                    waiting |= new
                elif kind == "ack":
                    got = await consumer.get_batch(int(arg), timeout=0)  # type: ignore[arg-type]
                    assert {d.event.id for d in got} <= waiting
                    await consumer.ack(got)
                    waiting -= {d.event.id for d in got}
                elif kind == "nack":
                    got = await consumer.get_batch(int(arg), timeout=0)  # type: ignore[arg-type]
                    await consumer.nack(got, delay=0)
                else:
                    await close(producer, consumer)
                    producer, consumer = open_both()
            rest = await consumer.get_batch(1000, timeout=0)
            assert sorted(d.event.id for d in rest) == sorted(waiting)  # each once
        finally:
            await close(producer, consumer)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sqlite_queue, "_KEY_MAP_SLACK", slack)
        asyncio.run(run())


async def test_a_version_2_file_keeps_its_events_seqs_and_folds_and_drops_its_key_index(
    tmp_path: Path,
):
    """What version 2 left (a unique index on key; events 1 and 2 waiting, 3 and 4 acked)
    is read by this version: the events wait still, a copy of one waiting folds, an acked
    seq is never given again, and the index is gone."""
    path = tmp_path / "q.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            PRAGMA journal_mode=WAL;
            CREATE TABLE events (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE,
                body BLOB NOT NULL, visible_at REAL NOT NULL,
                leased INTEGER NOT NULL DEFAULT 0, attempt INTEGER NOT NULL DEFAULT 0,
                stored_at REAL NOT NULL);
            CREATE INDEX events_by_visibility ON events (visible_at, seq);
            PRAGMA user_version=2;
            """
        )
        for i in range(1, 5):
            e = event(i)
            conn.execute(
                "INSERT INTO events (key, body, visible_at, stored_at) VALUES (?, ?, 0, 0)",
                (e.key, sqlite_queue.orjson.dumps(e.to_json())),
            )
        conn.execute("DELETE FROM events WHERE seq >= 3")
    q = SqliteQueue(path)
    try:
        assert await q.depth() == 2
        assert await q.put_many([event(1), event(5)]) == 1
        got = await take(q, 3, timeout=2)
        assert [d.event.id for d in got] == ["1", "2", "5"]
        assert [d.token.split(":")[0] for d in got] == ["1", "2", "5"]
    finally:
        await q.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert indexes == {"events_by_visibility"}


async def test_the_consumer_of_a_shared_file_refuses_to_put(tmp_path: Path):
    """Only the producer puts (its key map is what folds copies): a put on the consumer's
    side is refused, not stored behind the producer's back."""
    consumer = SqliteQueue(tmp_path / "q.db", share="consumer")
    try:
        with pytest.raises(QueueUnavailable, match="consume only"):
            await consumer.put_many([event(1)])
    finally:
        await consumer.close()
