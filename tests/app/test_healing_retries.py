"""A heal that failed in a way that may pass (Argo CD unavailable, a timeout) is decided again
after the cooldown, then after twice that, at most ``heal_retries`` times, each attempt a
decision of its own on record once; a heal that failed for good, a drift that cleared or was
reported anew, is not retried (fake Argo CD port, fake clock, real SQLite audit store)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.healing import Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import ArgoApp, OwnershipMap, OwnershipRule
from fleetwarden.core.policy import Guards, Mode, Policy, Status
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.argocd import ArgoNotFound, ArgoUnavailable
from fleetwarden.ports.audit import AuditStore
from fleetwarden.ports.sources import FixedClock

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OWNERS = OwnershipMap([OwnershipRule(direct_restore=False, argocd=ArgoApp("{cluster}-nodes"))])
ROOMY = Policy(guards=Guards(max_per_cluster=100, max_fleet=100, flap_heals=10))


class Argo:
    """Fails the first ``failures`` syncs with ``error``, then syncs."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error = failures, error
        self.calls: list[str] = []

    async def sync(self, app: str, **_: Any) -> dict[str, Any]:
        self.calls.append(app)
        if len(self.calls) <= self.failures:
            raise self.error
        return {"application": app}

    async def rollback(self, app: str, history_id: int) -> object:
        raise AssertionError("not used")

    async def get_application(self, app: str) -> dict[str, Any]:
        raise AssertionError("not used")


def drift(kind: FindingEventType = FindingEventType.APPEARED) -> FindingEvent:
    finding = Finding(
        "c0", "general", Layer.L1, "labels.team", "platform", "x", Severity.CRITICAL,
        nodes=("n-1",),
    )  # fmt: skip
    return FindingEvent(kind, finding, T0)


@pytest.fixture
async def stores() -> AsyncIterator[list[AuditStore]]:
    opened: list[AuditStore] = []
    yield opened
    for store in opened:
        await store.close()


async def healer(
    tmp_path: Path, argo: Argo, clock: FixedClock, opened: list[AuditStore], retries: int = 5
) -> Healer:
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}", clock=clock)
    opened.append(store)
    h = Healer(
        ownership=OWNERS,
        remediator=Remediator(argocd=argo, clock=clock),
        audit=store,
        policy=ROOMY,
        mode=Mode.ENFORCE,
        clock=clock,
        heal_retries=retries,
    )
    h.set_pool_counts({"c0": 10})
    return h


async def outcomes(h: Healer) -> list[str]:
    assert h.audit is not None
    recs = await h.audit.query(kind=AuditKind.OUTCOME, limit=1000)
    return [r.payload["outcome"]["status"] for r in reversed(recs)]


async def test_a_heal_failed_by_an_outage_is_decided_again_until_it_succeeds(tmp_path, stores):
    clock, argo = FixedClock(T0), Argo(2, ArgoUnavailable("argocd-server: HTTP 503"))
    h = await healer(tmp_path, argo, clock, stores)
    (first,) = await h.process([drift()])
    assert first.status is Status.EXECUTE and await outcomes(h) == ["error"]
    assert await h.retry_due() == []  # not before the cooldown
    clock.advance(timedelta(minutes=2, seconds=1))
    (second,) = await h.retry_due()
    assert second.status is Status.EXECUTE and second.id != first.id
    clock.advance(timedelta(minutes=2, seconds=1))
    assert await h.retry_due() == []  # the second wait is twice the first
    clock.advance(timedelta(minutes=2))
    (third,) = await h.retry_due()
    assert await outcomes(h) == ["error", "error", "ok"] and h.retries == {}
    assert argo.calls == ["c0-nodes"] * 3
    # each attempt is a decision of its own, on record once
    assert h.audit is not None
    decisions = await h.audit.query(kind=AuditKind.DECISION, limit=100)
    assert Counter(r.id for r in decisions) == {first.id: 1, second.id: 1, third.id: 1}


async def test_retries_are_bounded_and_giving_up_is_on_record(tmp_path, stores):
    clock, argo = FixedClock(T0), Argo(100, ArgoUnavailable("argocd-server: HTTP 503"))
    h = await healer(tmp_path, argo, clock, stores, retries=2)
    await h.process([drift()])
    for _ in range(5):
        clock.advance(timedelta(hours=1))
        await h.retry_due()
    assert len(argo.calls) == 3 and h.retries == {}
    assert h.audit is not None
    (note,) = await h.audit.query(kind=AuditKind.NOTE)
    assert note.payload["givenUp"]["attempts"] == 3


async def test_a_heal_that_failed_for_good_is_not_retried(tmp_path, stores):
    clock, argo = FixedClock(T0), Argo(100, ArgoNotFound("application c0-nodes not found"))
    h = await healer(tmp_path, argo, clock, stores)
    await h.process([drift()])
    assert h.retries == {}


async def test_a_drift_that_cleared_or_changed_meanwhile_is_not_retried(tmp_path, stores):
    clock, argo = FixedClock(T0), Argo(100, ArgoUnavailable("argocd-server: HTTP 503"))
    h = await healer(tmp_path, argo, clock, stores)
    await h.process([drift()])
    assert set(h.retries) == {drift().finding.id}
    await h.process([drift(FindingEventType.CLEARED)])
    assert h.retries == {}
    clock.advance(timedelta(hours=1))
    assert await h.retry_due() == [] and len(argo.calls) == 1
