"""The workers' sinks, each idempotent by event key on its own (real event log, real SQLite
audit store, real SQLite queue): a crash between any two steps is repaired by the replay, and
no sink's memory of an event stands in for another's."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fleetwarden.adapters.journal import EventJournal
from fleetwarden.adapters.queue.sqlite import SqliteQueue
from fleetwarden.adapters.storage.audit_sql import SqlAuditStore, open_audit_store
from fleetwarden.app.inspecting import Inspector, NodeDiffer
from fleetwarden.app.recording import Recorder
from fleetwarden.core.attribution import Attribution
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.tracking import FindingTracker


class Crash(BaseException):
    """Stands for kill -9 at a checkpoint: nothing after it runs."""


def crash_at(step: str):
    def checkpoint(at: str) -> None:
        if at == step:
            raise Crash(at)

    return checkpoint


def event(i: int) -> ChangeEvent:
    return ChangeEvent(
        id=f"e{i}",
        source="aws.eks",
        type="aws.eks.UpdateNodegroupConfig",
        provider=EventSource.AWS,
        operation=Operation.SCALE,
        cluster="prod-eu-1",
        pool="general",
    ).via("aws")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlAuditStore]:
    s = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    yield s
    await s.close()


async def stored_ids(store: SqlAuditStore) -> Counter[str]:
    return Counter(
        [r.payload["event"]["id"] async for r in store.iterate() if r.kind is AuditKind.EVENT]
    )


def logged_ids(path: Path) -> Counter[str]:
    return Counter(json.loads(line)["id"] for line in path.read_text().splitlines())


@pytest.mark.parametrize("step", ["after-log", "after-audit"])
async def test_a_crash_at_any_step_is_repaired_by_the_replay_once_per_sink(
    tmp_path: Path, store: SqlAuditStore, step: str
):
    log = EventJournal(tmp_path / "events.jsonl")
    batch = [event(1), event(2)]
    with pytest.raises(Crash):
        await Recorder(log=log, audit=store, checkpoint=crash_at(step)).record(batch)
    replay = await Recorder(log=log, audit=store).record([*batch, event(3)])
    log.close()
    # the store of record decides what was a redelivery: after-log, the store lacked them
    assert replay == ([True, True, True] if step == "after-log" else [False, False, True])
    assert logged_ids(tmp_path / "events.jsonl") == Counter({"e1": 1, "e2": 1, "e3": 1})
    assert await stored_ids(store) == Counter({"e1": 1, "e2": 1, "e3": 1})


async def test_a_new_store_gets_every_event_an_old_event_log_already_holds(
    tmp_path: Path, store: SqlAuditStore
):
    """The event log's keys used to mark a redelivery done: a store that is new (or restored
    from a backup) then never got those events. Each sink answers only for itself."""
    log = EventJournal(tmp_path / "events.jsonl")
    await log.record([event(1), event(2)])  # written by an earlier run, with another store
    assert await Recorder(log=log, audit=store).record([event(1), event(2)]) == [True, True]
    log.close()
    assert await stored_ids(store) == Counter({"e1": 1, "e2": 1})
    assert logged_ids(tmp_path / "events.jsonl") == Counter({"e1": 1, "e2": 1})


def inspector(queue: SqliteQueue, recorder: Recorder, counts: Counter[str]) -> Inspector:
    spec = NodePoolSpec(name="general", cluster="prod-eu-1")
    return Inspector(
        queue,
        [spec],
        NodeDiffer([spec], lambda cluster: [], FindingTracker(), lambda ev: None),
        Attribution(),
        debounce=0.0,
        record=recorder.record,
        on_count=lambda name, n: counts.update({name: n}),
        checkpoint=recorder.checkpoint,
    )


async def test_a_redelivery_is_counted_acknowledged_and_not_inspected_again(
    tmp_path: Path, store: SqlAuditStore
):
    queue = SqliteQueue(tmp_path / "q.db")
    counts: Counter[str] = Counter()
    worker = inspector(queue, Recorder(audit=store), counts)
    try:
        await queue.put_many([event(1)])
        await worker.handle(await queue.get_batch(10, 1.0))
        await queue.put_many([event(1)])  # sent again by its source after processing
        await worker.handle(await queue.get_batch(10, 1.0))
        assert counts == Counter({"inspected": 1, "duplicate": 1})
        assert await queue.depth() == 0
    finally:
        await queue.close()
    assert await stored_ids(store) == Counter({"e1": 1})


async def test_a_crash_before_the_ack_redelivers_and_the_replay_is_a_duplicate(
    tmp_path: Path, store: SqlAuditStore
):
    path = tmp_path / "q.db"
    queue = SqliteQueue(path)
    counts: Counter[str] = Counter()
    await queue.put_many([event(1), event(2)])
    with pytest.raises(Crash):
        dying = inspector(queue, Recorder(audit=store, checkpoint=crash_at("before-ack")), counts)
        await dying.handle(await queue.get_batch(10, 1.0))
    await queue.close()  # the process is gone: its leases go with it
    queue = SqliteQueue(path)
    try:
        worker = inspector(queue, Recorder(audit=store), counts)
        await worker.handle(await queue.get_batch(10, 1.0))
        assert counts["duplicate"] == 2
        assert await queue.depth() == 0
    finally:
        await queue.close()
    assert await stored_ids(store) == Counter({"e1": 1, "e2": 1})
