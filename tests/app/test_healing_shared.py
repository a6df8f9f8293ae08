"""Worker replicas on one store share one policy history (``Healer(shared=store)``): fed the
same storm of findings, N replicas together stay within ONE blast radius (not N), act on each
drift at most once, and an approval sent to every replica at once runs once — the others say
who approved it. A worker killed -9 in the middle of its guarded transaction leaves nothing:
the action is either counted and on record, or neither. On the real PostgreSQL
(scripts/pg-test-env) and on SQLite (one process, ``BEGIN IMMEDIATE``), in-process replicas
with their own store connections, and three OS processes."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters.storage import guarding
from fleetwarden.adapters.storage.audit_sql import SqlAuditStore, open_audit_store
from fleetwarden.app.healing import AlreadyApproved, Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.ownership import OwnershipMap
from fleetwarden.core.policy import Decision, Guard, Mode, Status, UnknownDecision
from fleetwarden.ports.audit import AuditUnavailable
from fleetwarden.ports.guards import SharedGuards
from fleetwarden.ports.sources import FixedClock
from tests.support import pg_env
from tests.support.shared_worker import (
    CLUSTERS,
    FLEET,
    PER_CLUSTER,
    POOLS,
    FakeNodes,
    drift,
    storm,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
WORKER = Path(__file__).resolve().parents[1] / "support" / "shared_worker.py"
ROOT = Path(__file__).resolve().parents[2]
_files = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    state_dir = tmp_path_factory.mktemp("pg")
    url = pg_env.start_server(state_dir)
    try:
        yield url
    finally:
        pg_env.stop_server(state_dir)


@dataclass
class Fleet:
    """One store (by URL) and the worker replicas started over it, each with its own store
    connection."""

    url: str
    clock: FixedClock = field(default_factory=lambda: FixedClock(T0))
    patched: list[str] = field(default_factory=list)
    stores: list[SqlAuditStore] = field(default_factory=list)

    async def worker(self, mode: Mode, name: str, *, shared: bool = True) -> Healer:
        store = await open_audit_store(self.url, clock=self.clock)
        self.stores.append(store)
        healer = Healer(
            ownership=OwnershipMap(),
            remediator=Remediator(nodes=lambda _: FakeNodes(self.patched), clock=self.clock),
            audit=store,
            mode=mode,
            clock=self.clock,
            config="cfg-1",
            shared=store if shared else None,
            identity=name,
        )
        healer.set_pool_counts(POOLS)
        await healer.restore()
        return healer

    async def workers(self, mode: Mode, n: int = 3, *, shared: bool = True) -> list[Healer]:
        return [await self.worker(mode, f"worker-{i}", shared=shared) for i in range(n)]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.live)])
async def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Fleet]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/audit-{next(_files)}.db"
    else:
        url = await pg_env.fresh_database_async(request.getfixturevalue("pg_server"))
    f = Fleet(url)
    try:
        yield f
    finally:
        for store in f.stores:
            await store.close()


async def feed(healer: Healer) -> list[Decision]:
    made = []
    for batch in storm():
        made.extend(await healer.process(batch))
    return made


def executed(decisions: Sequence[Decision]) -> list[Decision]:
    return [d for d in decisions if d.status is Status.EXECUTE]


async def sent_actions(store: SqlAuditStore) -> list[str]:
    """The decision ids of the calls on record as sent."""
    actions = await store.query(kind=AuditKind.ACTION, limit=10_000)
    return [a.refs[0] for a in actions if a.payload["dryRun"] is False]


def test_the_store_is_the_shared_guard_port():
    assert issubclass(SqlAuditStore, SharedGuards)


async def test_three_workers_fed_the_same_storm_stay_within_one_blast_radius(fleet):
    workers = await fleet.workers(Mode.ENFORCE)
    results = await asyncio.gather(*(feed(w) for w in workers))
    done = [d for made in results for d in executed(made)]
    assert len(done) == FLEET  # the fleet-wide bound, not three times it
    assert Counter(d.cluster for d in done) == dict.fromkeys(CLUSTERS, PER_CLUSTER)
    assert len({d.finding_id for d in done}) == len(done)  # each drift acted on once
    assert sorted(fleet.patched) == sorted(set(fleet.patched)) and len(fleet.patched) == FLEET
    assert sorted(await sent_actions(fleet.stores[0])) == sorted(d.id for d in done)
    # the others refused for the reason that holds: the budget, or the first one's action
    refused = [d for made in results for d in made if d.status is Status.BLOCKED]
    assert {d.guard for d in refused} <= {Guard.BLAST_CLUSTER, Guard.BLAST_FLEET, Guard.COOLDOWN}
    assert (await fleet.stores[0].verify()).ok


async def test_without_shared_state_each_worker_spends_its_own_blast_radius(fleet):
    """The control: the same storm to three unshared workers acts three times as often,
    every drift three times (what the shared state prevents)."""
    workers = await fleet.workers(Mode.ENFORCE, shared=False)
    results = await asyncio.gather(*(feed(w) for w in workers))
    assert sum(len(executed(made)) for made in results) == 3 * FLEET
    assert max(Counter(fleet.patched).values()) == 3


async def test_a_worker_counts_its_own_actions_once(fleet):
    """Catching up reads this replica's records too: they must not count twice."""
    (worker,) = await fleet.workers(Mode.ENFORCE, 1)
    first = await worker.process([drift("c0", 0)])
    assert executed(first)
    await worker.process([drift("c1", 0)])
    assert worker.state.executed_in_window(fleet.clock.now(), timedelta(minutes=10)) == 2
    (second,) = await worker.process([drift("c0", 1)])
    assert second.status is Status.EXECUTE  # c0's second action: the budget is 2, not 1


async def test_a_restarted_worker_sees_the_actions_of_the_others(fleet):
    a, b = await fleet.workers(Mode.ENFORCE, 2)
    await feed(a)
    c = await fleet.worker(Mode.ENFORCE, "worker-late")  # restored, then caught up
    assert executed(await feed(b)) == [] and executed(await feed(c)) == []
    assert c.state.executed_in_window(fleet.clock.now(), timedelta(minutes=10)) == FLEET


async def test_one_approval_sent_to_three_replicas_at_once_runs_once(fleet):
    workers = await fleet.workers(Mode.APPROVAL)
    (request,) = await workers[0].process([drift("c0", 0)])
    assert request.status is Status.PENDING_APPROVAL
    answers = await asyncio.gather(
        *(w.approve(request.id) for w in workers), return_exceptions=True
    )
    approved = [a for a in answers if isinstance(a, Decision)]
    refusals = [a for a in answers if isinstance(a, AlreadyApproved)]
    assert len(approved) == 1 and len(refusals) == 2, answers
    (winner,) = approved
    assert winner.status is Status.EXECUTE
    holder = workers[answers.index(winner)].identity
    for refusal in refusals:
        assert refusal.holder == holder
        assert f"already approved by {holder}" in str(refusal)
        assert "nothing was done here" in str(refusal)
    assert fleet.patched == ["c0-p0-n0"]  # carried out once
    assert await sent_actions(fleet.stores[0]) == [request.id]
    notes = await fleet.stores[0].query(kind=AuditKind.NOTE, ref=request.id)
    assert [n.payload["by"] for n in notes if "approval" in n.payload] == [holder]
    # asked again later, every replica says the same, and still nothing runs
    for w in workers:
        with pytest.raises(AlreadyApproved, match=f"already approved by {holder}"):
            await w.approve(request.id)
    assert fleet.patched == ["c0-p0-n0"]


async def test_a_request_made_on_one_replica_is_known_and_coalesced_on_the_others(fleet):
    a, b = await fleet.workers(Mode.APPROVAL, 2)
    (request,) = await a.process([drift("c0", 0)])
    (again,) = await b.process([drift("c0", 0)])  # the same drift reported to b
    assert (again.status, again.guard) == (Status.PLANNED, Guard.COALESCED)
    assert [d.id for d in b.pending()] == [request.id]
    with pytest.raises(UnknownDecision):  # an id nobody made: nothing is claimed
        await b.approve("d-nosuchthing")
    assert (await b.approve(request.id)).status is Status.EXECUTE


@pytest.mark.parametrize("first", ["approve", "cancel"])
async def test_a_request_is_either_approved_or_cancelled_never_both(fleet, first):
    """One replica approves a request while another, switched to dry-run, sweeps it as
    stale: whichever comes first wins; the approval runs with no cancellation on record, or
    the cancellation stands and approving it runs nothing."""
    approver, sweeper = await fleet.workers(Mode.APPROVAL, 2)
    (request,) = await approver.process([drift("c0", 0)])
    await sweeper.sweep()  # it has heard of the request: it would cancel it
    assert [d.id for d in sweeper.pending()] == [request.id]
    sweeper.mode = Mode.DRY_RUN
    if first == "approve":
        approved = await approver.approve(request.id)
        assert await sweeper.sweep() == []
    else:
        (cancelled,) = await sweeper.sweep()
        approved = await approver.approve(request.id)
        assert approved == cancelled
    notes = await fleet.stores[0].query(kind=AuditKind.NOTE, ref=request.id)
    kinds = sorted(k for n in notes for k in ("approval", "cancellation") if k in n.payload)
    if first == "approve":
        assert approved.status is Status.EXECUTE and fleet.patched == ["c0-p0-n0"]
        assert kinds == ["approval"]
    else:
        assert (approved.status, approved.guard) == (Status.CANCELLED, Guard.MODE_CHANGED)
        assert fleet.patched == [] and kinds == ["cancellation"]


async def test_a_guarded_write_that_fails_runs_nothing_and_is_decided_again_later(
    fleet, monkeypatch: pytest.MonkeyPatch
):
    """The store fails after the batch's records were written, before the commit: nothing
    of the batch is on record, counted (here or elsewhere) or run; the findings come back as
    retries and are decided again from the store's state."""
    (worker,) = await fleet.workers(Mode.ENFORCE, 1)
    other = await fleet.worker(Mode.ENFORCE, "worker-other")
    original = guarding.SqlGuardedWrite.append
    failures = iter([True])

    async def failing(self: guarding.SqlGuardedWrite, drafts: Any) -> list[bool]:
        fresh = await original(self, drafts)
        if drafts and next(failures, False):
            raise AuditUnavailable("appending audit records failed: the disk is full")
        return fresh

    monkeypatch.setattr(guarding.SqlGuardedWrite, "append", failing)
    assert await worker.process([drift("c0", 0), drift("c0", 1)]) == []
    assert fleet.patched == [] and worker.audit_failures == 1
    assert await fleet.stores[0].query(kind=AuditKind.DECISION) == []
    assert worker.decisions == {} and set(worker.retries) == {
        drift("c0", 0).finding.id,
        drift("c0", 1).finding.id,
    }
    # counted nowhere: this replica still has the cluster's whole budget (its state was
    # rebuilt from the store), and spends it; the other replica then sees it spent
    done = await worker.process([drift("c0", 2), drift("c0", 3)])
    assert len(executed(done)) == PER_CLUSTER
    (late,) = await other.process([drift("c0", 4)])
    assert (late.status, late.guard) == (Status.BLOCKED, Guard.BLAST_CLUSTER)
    fleet.clock.advance(timedelta(seconds=worker.sweep_every))
    again = await worker.retry_due()
    assert [(d.status, d.guard) for d in again] == [(Status.BLOCKED, Guard.BLAST_CLUSTER)] * 2
    assert fleet.patched == ["c0-p2-n0", "c0-p3-n0"]


async def test_a_decision_whose_id_another_replica_has_is_not_taken_as_on_record(fleet):
    """Two replicas deciding one finding at one instant after as many records make one id:
    the second one's batch is rolled back (its decision would not be stored under the key
    the first one has) and decided again later, not run as if it were on record."""
    a, b = await fleet.workers(Mode.ENFORCE, 2)
    (first,) = await a.process([drift("c0", 0)])
    assert first.status is Status.EXECUTE
    b.state.recorded = a.state.recorded - 2  # b's catch-up of a's record evens them up
    assert await b.process([drift("c0", 0)]) == []
    assert b.audit_failures == 1 and first.id not in b.decisions
    assert set(b.retries) == {drift("c0", 0).finding.id}
    decisions = await fleet.stores[0].query(kind=AuditKind.DECISION)
    assert [r.id for r in decisions] == [first.id] and fleet.patched == ["c0-p0-n0"]


# --------------------------------------------------------------------------- OS processes


def start_worker(url: str, out: Path, *, go: Path, mode: str = "storm") -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, str(out), str(go), mode],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for(path: Path, procs: Sequence[subprocess.Popen[bytes]], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"worker exited early: {p.communicate()[1].decode()[-2000:]}")
        assert time.monotonic() < deadline, f"{path.name} did not appear"
        time.sleep(0.05)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.live)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/audit.db"
    return pg_env.fresh_database(request.getfixturevalue("pg_server"), "shared")


def test_three_worker_processes_fed_the_same_storm_stay_within_one_blast_radius(
    store_url: str, tmp_path: Path
):
    go = tmp_path / "go"
    outs = [tmp_path / f"worker-{i}.json" for i in range(3)]
    procs = [start_worker(store_url, out, go=go) for out in outs]
    try:
        for i, _ in enumerate(procs):  # each one restored and waiting: then all at once
            wait_for(tmp_path / f"worker-{i}.json.ready", procs)
        go.touch()
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()[-2000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    reports = [json.loads(out.read_text()) for out in outs]
    done = [d for r in reports for d in r["executed"]]
    patched = [n for r in reports for n in r["patched"]]
    assert len(done) == FLEET, reports
    assert Counter(d["cluster"] for d in done) == dict.fromkeys(CLUSTERS, PER_CLUSTER)
    assert len({d["findingId"] for d in done}) == FLEET  # each remediation at most once
    assert len(patched) == len(set(patched)) == FLEET
    assert sorted(asyncio.run(_sent(store_url))) == sorted(d["id"] for d in done)


async def _sent(url: str) -> list[str]:
    async with await open_audit_store(url) as store:
        assert (await store.verify()).ok
        return await sent_actions(store)


def test_a_worker_killed_mid_transaction_leaves_no_partial_state(store_url: str, tmp_path: Path):
    """The worker stores its decisions in the guarded transaction and is killed -9 before
    the commit: no decision of it is on record, the chain is whole, nothing went out, and the
    next worker has the whole blast radius to spend (nothing counted that is not recorded)."""
    go = tmp_path / "go"
    go.touch()
    out = tmp_path / "victim.json"
    victim = start_worker(store_url, out, go=go, mode="die-in-transaction")
    try:
        wait_for(tmp_path / "victim.json.inside", [victim])
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
    assert victim.returncode == -signal.SIGKILL
    inside = json.loads((tmp_path / "victim.json.inside").read_text())
    assert inside["appended"] > 0  # it had written its records, uncommitted

    async def after() -> tuple[list[Any], list[str], Any]:
        async with await open_audit_store(store_url) as store:
            decisions = await store.query(kind=AuditKind.DECISION, limit=10_000)
            return decisions, await sent_actions(store), await store.verify()

    decisions, sent, verified = asyncio.run(after())
    assert decisions == [] and sent == [] and verified.ok
    survivor = tmp_path / "survivor.json"
    p = start_worker(store_url, survivor, go=go)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err.decode()[-2000:]
    report = json.loads(survivor.read_text())
    assert len(report["executed"]) == FLEET  # the budget the dead worker never spent


@pytest.mark.live
def test_a_worker_that_hangs_in_its_transaction_delays_the_others_only_for_the_lock_timeout(
    pg_server: str, tmp_path: Path
):
    """PostgreSQL: a replica stuck holding the policy lock makes the others' guarded writes
    fail after ``lock_timeout`` (nothing decided, nothing run, retried later), not wait for
    ever; once it is gone they decide with the whole budget."""
    url = pg_env.fresh_database(pg_server, "hung")
    go = tmp_path / "go"
    go.touch()
    stuck = start_worker(url, tmp_path / "stuck.json", go=go, mode="die-in-transaction")

    async def other() -> tuple[list[Decision], float, int, list[Decision]]:
        store = await open_audit_store(url, lock_timeout=1.0)
        try:
            healer = Healer(
                ownership=OwnershipMap(),
                remediator=Remediator(nodes=lambda _: FakeNodes([])),
                audit=store,
                mode=Mode.ENFORCE,
                shared=store,
            )
            healer.set_pool_counts(POOLS)
            await healer.restore()
            await asyncio.to_thread(wait_for, tmp_path / "stuck.json.inside", [stuck])
            started = time.monotonic()
            refused = await healer.process([drift("c0", 0)])
            waited = time.monotonic() - started
            failures = healer.audit_failures
            stuck.kill()
            await asyncio.to_thread(stuck.wait, 30)
            return refused, waited, failures, await healer.process([drift("c0", 1)])
        finally:
            await store.close()

    try:
        refused, waited, failures, after = asyncio.run(other())
    finally:
        if stuck.poll() is None:
            stuck.kill()
            stuck.wait()
    assert refused == [] and failures == 1
    assert 0.9 <= waited < 10
    assert [d.status for d in after] == [Status.EXECUTE]
