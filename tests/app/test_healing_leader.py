"""The healer under leader election (an ``Elector`` on an in-memory Lease, a fake Argo CD, a
real SQLite audit store): a follower decides, runs and approves nothing; the leader records
its term with each decision; a remediation whose term no longer holds when it is about to go
out (the Lease changed hands, or cannot be read) is not sent and is on record as a skipped
outcome saying why."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.electing import Elector, Fence
from fleetwarden.app.healing import Healer, NotLeading
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.leadership import ElectionTiming
from fleetwarden.core.policy import Mode, Status
from fleetwarden.core.tracking import FindingEventType
from fleetwarden.ports.audit import AuditStore
from tests.app.test_electing import MemoryLease
from tests.app.test_healing_retries import OWNERS, ROOMY, Argo, drift

# long enough that the elector does not run a round of its own during a test
SLOW = ElectionTiming(lease_duration=30, renew_deadline=20, retry_period=10)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AuditStore]:
    opened = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    yield opened
    await opened.close()


def healer(store: AuditStore, argo: Argo, elector: Elector) -> Healer:
    h = Healer(
        ownership=OWNERS,
        remediator=Remediator(argocd=argo),
        audit=store,
        policy=ROOMY,
        mode=Mode.ENFORCE,
        elector=elector,
        fence=Fence(elector, timeout=0.2),
    )
    h.set_pool_counts({"c0": 10})
    return h


async def leading(elector: Elector) -> asyncio.Task[None]:
    task = asyncio.create_task(elector.run())
    async with asyncio.timeout(5):
        await elector.leading_event.wait()
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def records(store: AuditStore, kind: AuditKind) -> list[Any]:
    return list(await store.query(kind=kind, limit=100))


async def test_a_follower_decides_runs_and_approves_nothing(store):
    argo = Argo(0, RuntimeError("unused"))
    elector = Elector(MemoryLease(), identity="me", timing=SLOW)  # never run: not leading
    h = healer(store, argo, elector)
    assert not h.acting
    assert await h.process([drift()]) == []
    assert argo.calls == [] and await records(store, AuditKind.DECISION) == []
    with pytest.raises(NotLeading):
        await h.approve("d-anything")


async def test_the_leader_heals_and_records_the_term_it_decided_in(store):
    argo = Argo(0, RuntimeError("unused"))
    lease = MemoryLease()
    elector = Elector(lease, identity="me", timing=SLOW)
    task = await leading(elector)
    try:
        h = healer(store, argo, elector)
        (decision,) = await h.process([drift()])
        assert decision.status is Status.EXECUTE and argo.calls == ["c0-nodes"]
        (rec,) = await records(store, AuditKind.DECISION)
        assert rec.payload["leaseTerm"] == elector.fencing_token
    finally:
        await stop(task)


@pytest.mark.parametrize("how", ["taken", "unreadable"])
async def test_a_remediation_whose_term_ended_is_not_sent_and_is_on_record(store, how):
    argo = Argo(0, RuntimeError("unused"))
    lease = MemoryLease()
    elector = Elector(lease, identity="me", timing=SLOW)
    task = await leading(elector)
    try:
        h = healer(store, argo, elector)
        assert lease.record is not None
        if how == "taken":  # another replica took the Lease; this one has not noticed yet
            lease._put(
                dataclasses.replace(
                    lease.record,
                    holder_identity="other",
                    lease_transitions=lease.record.lease_transitions + 1,
                )
            )
        else:
            lease.mode = "hang"  # the API server does not answer
        assert h.acting  # locally the term still holds: only the fence can tell
        (decision,) = await h.process([drift()])
        assert decision.status is Status.EXECUTE
        assert argo.calls == []
        (outcome,) = await records(store, AuditKind.OUTCOME)
        assert outcome.payload["outcome"]["status"] == "skipped"
        assert "fencing token" in outcome.payload["outcome"]["detail"]
    finally:
        lease.mode = "ok"
        await stop(task)


async def test_a_follower_drops_what_it_is_given_and_takes_every_current_finding_on_takeover(
    store,
):
    """``run`` on a follower empties the queue (the leader decides those); the serve wiring
    hands a new leader every current finding again (``Serving._took_over``)."""
    argo = Argo(0, RuntimeError("unused"))
    elector = Elector(MemoryLease(), identity="me", timing=SLOW)
    h = healer(store, argo, elector)
    h.handle(drift())
    runner = asyncio.create_task(h.run())
    try:
        async with asyncio.timeout(5):
            while h.ignored == 0:
                await asyncio.sleep(0.01)
        assert h.queue.empty() and argo.calls == []
        task = await leading(elector)
        try:
            h.handle(drift(FindingEventType.APPEARED))  # what the takeover hands over
            async with asyncio.timeout(5):
                while not argo.calls:
                    await asyncio.sleep(0.01)
            assert argo.calls == ["c0-nodes"]
        finally:
            await stop(task)
    finally:
        await stop(runner)
