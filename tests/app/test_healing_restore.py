"""A restart of the healer keeps its guards: the actions taken before it still count against the
blast radius, requests still wait for approval (and can be approved) — unless they expired or
the mode or the configuration changed: then they are cancelled, on record, and never run — and
a record that cannot be read is skipped and counted; all read back from the real audit store,
SQLite and PostgreSQL (scripts/pg-test-env), through its time-bounded query."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import structlog

from fleetwarden.adapters.storage.audit_sql import SqlAuditStore, open_audit_store
from fleetwarden.app import healing_records
from fleetwarden.app.healing import Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.audit import AuditDraft, AuditKind
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.core.policy import Decision, Guard, Mode, Status, UnknownDecision
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.sources import FixedClock
from tests.support import pg_env

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
POOLS = {"prod": 20}  # blast radius: 10 % of 20 pools = 2 actions per 10 minutes
_files = itertools.count(1)


class FakeNodes:
    """The node port: keeps the patches it was asked for."""

    def __init__(self, log: list[tuple[str, str]]) -> None:
        self.log = log

    async def patch_labels(self, node: str, labels: Any) -> dict[str, Any]:
        self.log.append((node, "labels"))
        return {"node": node}

    async def patch_taints(self, node: str, taints: Any, *, replace: Any = None) -> dict[str, Any]:
        self.log.append((node, "taints"))
        return {"node": node}


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    state_dir = tmp_path_factory.mktemp("pg")
    url = pg_env.start_server(state_dir)
    try:
        yield url
    finally:
        pg_env.stop_server(state_dir)


@dataclass
class World:
    """One audit store (by URL) and the healer processes started over it, one at a time."""

    url: str
    clock: FixedClock = field(default_factory=lambda: FixedClock(T0))
    patched: list[tuple[str, str]] = field(default_factory=list)
    stores: list[SqlAuditStore] = field(default_factory=list)

    async def start(
        self, mode: Mode, *, restore: bool = True, config: str | None = "cfg-1", keep: bool = False
    ) -> Healer:
        """A new process: a new store connection and a new healer (restored, unless not).
        ``keep``: the processes before it keep running (replicas sharing the store)."""
        for store in self.stores if not keep else ():
            await store.close()
        store = await open_audit_store(self.url, clock=self.clock)
        self.stores.append(store)
        healer = Healer(
            ownership=OwnershipMap(),
            remediator=Remediator(nodes=lambda _: FakeNodes(self.patched), clock=self.clock),
            audit=store,
            mode=mode,
            clock=self.clock,
            config=config,
        )
        healer.set_pool_counts(POOLS)
        if restore:
            await healer.restore()
        return healer


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.live)])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/audit-{next(_files)}.db"
    else:
        url = await pg_env.fresh_database_async(request.getfixturevalue("pg_server"))
    w = World(url)
    try:
        yield w
    finally:
        for store in w.stores:
            await store.close()


def drift(k: int, *, pool: str = "general") -> FindingEvent:
    """A critical label drift on one node: restored directly by the default policy."""
    finding = Finding(
        "prod",
        pool,
        Layer.L1,
        f"labels.k{k}",
        "platform",
        "intruder",
        Severity.CRITICAL,
        nodes=(f"{pool}-n{k}",),
    )
    return FindingEvent(FindingEventType.APPEARED, finding, T0)


def statuses(decisions: Sequence[Decision]) -> list[tuple[Status, Guard | None]]:
    return [(d.status, d.guard) for d in decisions]


async def test_after_a_restart_the_blast_radius_still_counts_the_actions_before_it(world):
    first = await world.start(Mode.ENFORCE)
    done = await first.process([drift(0), drift(1, pool="gpu")])
    assert statuses(done) == [(Status.EXECUTE, None)] * 2  # the limit: 2 in 10 minutes
    assert len(world.patched) == 2

    world.clock.advance(minutes=1)
    second = await world.start(Mode.ENFORCE)
    assert second.state.executed_in_window(world.clock.now(), timedelta(minutes=10)) == 2
    (refused,) = await second.process([drift(2, pool="spot")])
    assert (refused.status, refused.guard) == (Status.BLOCKED, Guard.BLAST_CLUSTER)
    assert "already had 2 of 2 actions" in refused.reasons[-1]
    assert len(world.patched) == 2  # nothing went out

    # the control: the same restart without the replay would have acted
    world.clock.advance(seconds=1)
    forgetful = await world.start(Mode.ENFORCE, restore=False)
    (allowed,) = await forgetful.process([drift(3, pool="spot")])
    assert allowed.status is Status.EXECUTE


async def test_a_flapping_pool_stays_quarantined_across_a_restart(world):
    healer = await world.start(Mode.ENFORCE)
    healer.set_pool_counts({"prod": 1000})  # room in the blast radius: only the flap guard
    for k in range(4):  # the same pool, healed every 3 minutes
        (d,) = await healer.process([drift(k)])
        world.clock.advance(minutes=3)
    assert (d.status, d.guard) == (Status.BLOCKED, Guard.FLAP)

    restarted = await world.start(Mode.ENFORCE)
    restarted.set_pool_counts({"prod": 1000})
    (d,) = await restarted.process([drift(9)])
    assert (d.status, d.guard) == (Status.BLOCKED, Guard.QUARANTINE)


async def test_a_pending_approval_survives_a_restart_and_can_be_approved_after_it(world):
    first = await world.start(Mode.APPROVAL)
    (request,) = await first.process([drift(0)])
    assert request.status is Status.PENDING_APPROVAL and world.patched == []

    world.clock.advance(minutes=10)
    second = await world.start(Mode.APPROVAL)
    assert [d.id for d in second.pending()] == [request.id]
    assert second.decisions[request.id] == request  # listed by /api/decisions
    # the same drift reported again is coalesced onto the restored request
    (again,) = await second.process([drift(0)])
    assert (again.status, again.guard) == (Status.PLANNED, Guard.COALESCED)

    approved = await second.approve(request.id)
    assert approved.status is Status.EXECUTE and len(world.patched) == 1

    world.clock.advance(minutes=1)
    third = await world.start(Mode.APPROVAL)
    assert third.pending() == []  # approved: it does not come back
    assert third.state.executed_in_window(world.clock.now(), timedelta(minutes=10)) == 1
    with pytest.raises(UnknownDecision):
        await third.approve(request.id)


async def cancellation_notes(healer: Healer, request: Decision) -> list[Decision]:
    assert healer.audit is not None
    notes = await healer.audit.query(kind=AuditKind.NOTE, ref=request.id)
    return [
        Decision.from_json(n.payload["cancellation"]) for n in notes if "cancellation" in n.payload
    ]


async def test_a_request_that_expired_while_nothing_ran_is_cancelled_on_record_at_the_start(
    world,
):
    first = await world.start(Mode.APPROVAL)
    (request,) = await first.process([drift(0)])
    world.clock.advance(hours=1, minutes=1)  # the request waited an hour (pending_ttl)
    second = await world.start(Mode.APPROVAL)
    assert second.pending() == []
    (note,) = await cancellation_notes(second, request)
    assert (note.id, note.status, note.guard) == (request.id, Status.CANCELLED, Guard.EXPIRED)
    assert second.decisions[request.id] == note  # listed by /api/decisions as cancelled
    refused = await second.approve(request.id)
    assert refused == note and world.patched == []  # says so, does nothing
    (fresh,) = await second.process([drift(0)])  # the drift gets a new request
    assert fresh.status is Status.PENDING_APPROVAL and fresh.id != request.id
    # a third start finds it closed: no second note, and approving still says why
    world.clock.advance(minutes=1)
    third = await world.start(Mode.APPROVAL)
    assert len(await cancellation_notes(third, request)) == 1
    assert (await third.approve(request.id)).guard is Guard.EXPIRED
    assert [d.id for d in third.pending()] == [fresh.id]


@pytest.mark.parametrize(
    ("mode", "config", "guard"),
    [
        (Mode.DRY_RUN, "cfg-1", Guard.MODE_CHANGED),
        (Mode.ENFORCE, "cfg-1", Guard.MODE_CHANGED),
        (Mode.APPROVAL, "cfg-2", Guard.CONFIG_CHANGED),
    ],
)
async def test_a_request_does_not_outlive_its_mode_or_configuration_across_a_restart(
    world, mode, config, guard
):
    """The issue's case: approval mode, a request waits; the service is switched to dry-run
    (or enforce, or its rules change) and restarted; approving the request then runs nothing."""
    first = await world.start(Mode.APPROVAL)
    (request,) = await first.process([drift(0)])
    world.clock.advance(minutes=5)
    second = await world.start(mode, config=config)
    assert second.pending() == []
    (note,) = await cancellation_notes(second, request)
    assert (note.status, note.guard, note.cancelled_at) == (
        Status.CANCELLED,
        guard,
        world.clock.now(),
    )
    refused = await second.approve(request.id)
    assert (refused.status, refused.guard) == (Status.CANCELLED, guard)
    assert world.patched == []
    assert second.state.executed_in_window(world.clock.now(), timedelta(hours=1)) == 0
    # switched back: the cancelled request stays cancelled
    world.clock.advance(minutes=1)
    back = await world.start(Mode.APPROVAL)
    assert back.pending() == []
    assert (await back.approve(request.id)).status is Status.CANCELLED and world.patched == []


async def test_a_request_cancelled_by_another_replica_is_not_run(world):
    """Two replicas on one store: one still in approval mode, one started in dry-run. The
    dry-run one cancels the request at its start; approving it on the other then finds the
    cancellation in the store and runs nothing."""
    old = await world.start(Mode.APPROVAL)
    (request,) = await old.process([drift(0)])
    world.clock.advance(minutes=2)
    await world.start(Mode.DRY_RUN, keep=True)
    assert [d.id for d in old.pending()] == [request.id]  # it has not heard of it yet
    refused = await old.approve(request.id)
    assert (refused.status, refused.guard) == (Status.CANCELLED, Guard.MODE_CHANGED)
    assert world.patched == [] and old.pending() == []
    assert len(await cancellation_notes(old, request)) == 1


async def test_an_idle_healer_cancels_an_expired_request_on_time(world):
    healer = await world.start(Mode.APPROVAL)
    healer.sweep_every = 0.02
    (request,) = await healer.process([drift(0)])
    runner = asyncio.create_task(healer.run())
    try:
        world.clock.advance(hours=1, seconds=1)
        deadline = time.monotonic() + 10
        while not await cancellation_notes(healer, request):
            assert time.monotonic() < deadline, "the expired request was not cancelled"
            await asyncio.sleep(0.02)
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    assert healer.pending() == [] and healer.decisions[request.id].guard is Guard.EXPIRED


async def test_dry_run_rehearsals_come_back_apart_from_real_actions(world):
    rehearsal = await world.start(Mode.DRY_RUN)
    done = await rehearsal.process([drift(0), drift(1, pool="gpu"), drift(2, pool="spot")])
    assert [d.status for d in done] == [Status.DRY_RUN, Status.DRY_RUN, Status.BLOCKED]

    again = await world.start(Mode.DRY_RUN)
    (d,) = await again.process([drift(3, pool="arm")])
    assert (d.status, d.guard) == (Status.BLOCKED, Guard.BLAST_CLUSTER)
    real = await world.start(Mode.ENFORCE)
    (d,) = await real.process([drift(3, pool="arm")])
    assert d.status is Status.EXECUTE  # rehearsals spend no real budget


async def test_only_the_replay_span_is_read(world):
    first = await world.start(Mode.ENFORCE)
    await first.process([drift(0), drift(1, pool="gpu")])
    world.clock.advance(hours=2, seconds=1)  # past the span (2 h: twice the approval wait)
    second = await world.start(Mode.ENFORCE, restore=False)
    restored = await second.restore()
    # the store's time bound left the old decisions out: none read, none replayed
    assert (restored.replayed, restored.too_old, restored.pending) == (0, 0, 0)
    (d,) = await second.process([drift(2, pool="spot")])
    assert d.status is Status.EXECUTE


async def test_the_span_is_read_in_pages_and_replayed_oldest_first(
    world, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(healing_records, "RESTORE_PAGE", 2)
    first = await world.start(Mode.ENFORCE)
    done = await first.process([drift(k, pool=f"p{k}") for k in range(5)])
    assert [d.status for d in done] == [Status.EXECUTE] * 2 + [Status.BLOCKED] * 3
    second = await world.start(Mode.ENFORCE, restore=False)
    restored = await second.restore()
    assert restored.replayed == 5
    assert second.state.executed_in_window(world.clock.now(), timedelta(minutes=10)) == 2
    (d,) = await second.process([drift(0, pool="p0")])  # the first drift, again
    assert (d.status, d.guard) == (Status.BLOCKED, Guard.COOLDOWN)


async def test_records_without_a_readable_decision_are_skipped_counted_and_logged(world):
    first = await world.start(Mode.ENFORCE)
    await first.process([drift(0)])
    await first.audit.append_many(
        [
            AuditDraft(kind=AuditKind.DECISION, summary="x", payload={"decision": {"id": "d-1"}}),
            AuditDraft(kind=AuditKind.NOTE, summary="x", payload={"approval": "yes"}),
            AuditDraft(kind=AuditKind.NOTE, summary="an operator's note", payload={"text": "hi"}),
        ]
    )
    world.clock.advance(minutes=1)
    second = await world.start(Mode.ENFORCE, restore=False)
    with structlog.testing.capture_logs() as lines:
        restored = await second.restore()
    assert (restored.replayed, restored.pending, restored.malformed) == (1, 0, 2)
    (line,) = [x for x in lines if x["event"].startswith("policy state restored")]
    assert (line["replayed"], line["pending"], line["malformed"]) == (1, 0, 2)
    (warning,) = [x for x in lines if x["log_level"] == "warning"]
    assert warning["count"] == 2
    assert "seq " in warning["first"] and "decision.action" in warning["first"]
    assert second.state.executed_in_window(world.clock.now(), timedelta(minutes=10)) == 1


async def test_decisions_are_on_record_before_their_calls_go_out(world):
    """Write-ahead: a crash between the call and the audit append must not hide the action
    from the guards after the restart."""
    healer = await world.start(Mode.ENFORCE)
    store = healer.audit
    seen: list[set[str]] = []
    real = healer.remediator

    class Watching:
        async def carry_out_all(self, decisions: Sequence[Decision]) -> list[Any]:
            stored = await store.query(kind=AuditKind.DECISION)
            seen.append({r.id for r in stored} & {d.id for d in decisions})
            return await real.carry_out_all(decisions)

    healer.remediator = Watching()  # type: ignore[assignment]
    done = await healer.process([drift(0), drift(1, pool="gpu")])
    assert seen == [{d.id for d in done}]
