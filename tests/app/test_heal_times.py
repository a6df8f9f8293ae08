"""``healedAt`` survives a restart and crosses replicas (issue #14 item 2): a finding healed
before the healer restarts, or healed by another replica on the same store, and cleared
afterwards, is stamped ``healedAt`` from the store's records (the executed decision and its
``ok`` outcome), and ``fleetwarden report`` counts it healed with its MTTR. A heal of an
earlier drift of the same id, a dry-run, a failed call or a heal already consumed by a clear
on record stamp nothing. Pure ``HealTimes`` rules first, then the real SQLite file and the
real PostgreSQL (scripts/pg-test-env)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters.storage.audit_sql import SqlAuditStore, open_audit_store
from fleetwarden.app.heal_times import HealTimes
from fleetwarden.app.healing import Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.app.reporting import build_report
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import ArgoApp, OwnershipMap, OwnershipRule
from fleetwarden.core.policy import Action, Decision, Guards, Mode, Policy, Status
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.remediation import Outcome, OutcomeStatus
from fleetwarden.ports.sources import FixedClock
from tests.support import pg_env

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OWNERS = OwnershipMap([OwnershipRule(direct_restore=False, argocd=ArgoApp("{cluster}-nodes"))])
ROOMY = Policy(guards=Guards(max_per_cluster=100, max_fleet=100, flap_heals=10))
_files = itertools.count(1)


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def drift(kind: FindingEventType, at: datetime, **extra: str) -> FindingEvent:
    f = Finding(
        "c0",
        "general",
        Layer.L1,
        "labels.team",
        "platform",
        "x",
        Severity.CRITICAL,
        nodes=("n-1",),
        extra={"startedAt": iso(T0 - timedelta(seconds=30)), "detectedAt": iso(T0), **extra},
    )
    return FindingEvent(kind, f, at)


def cleared(at: datetime, **extra: str) -> FindingEvent:
    return drift(FindingEventType.CLEARED, at, clearedAt=iso(at), **extra)


class Argo:  # Argo CD's API cannot run here: a port fake that syncs, or fails
    def __init__(self, *, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.fail = fail

    async def sync(self, app: str, **_: Any) -> dict[str, Any]:
        self.calls.append(app)
        if self.fail:
            raise RuntimeError("argo cd said no")
        return {"application": app}


# --- the pure rules -----------------------------------------------------------------------


def _decision(status: Status, fid: str = "f1") -> Decision:
    return Decision(
        id=f"d-{fid}-{status.value}",
        finding_id=fid,
        cluster="c0",
        pool="general",
        action=Action.SYNC,
        mode=Mode.ENFORCE,
        status=status,
        reasons=("r",),
        target=None,
        at=T0,
    )


def _outcome(decision_id: str, status: OutcomeStatus, at: datetime) -> Outcome:
    return Outcome(decision_id, status, (), at, at)


@pytest.mark.parametrize(
    ("status", "outcome", "healed"),
    [
        (Status.EXECUTE, OutcomeStatus.OK, True),
        (Status.EXECUTE, OutcomeStatus.ERROR, False),
        (Status.EXECUTE, OutcomeStatus.SKIPPED, False),
        (Status.DRY_RUN, OutcomeStatus.DRY_RUN, False),
        (Status.DRY_RUN, OutcomeStatus.OK, False),
    ],
)
def test_only_an_executed_heal_that_ended_ok_is_noted(status, outcome, healed):
    times = HealTimes(window=timedelta(hours=1))
    d = _decision(status)
    times.note([d], [_outcome(d.id, outcome, T0)])
    assert (times.get("f1") == T0) is healed


def test_a_clear_is_stamped_once_and_the_heal_forgotten():
    times = HealTimes(window=timedelta(hours=1))
    appeared = drift(FindingEventType.APPEARED, T0)
    d = _decision(Status.EXECUTE, appeared.finding.id)
    times.note([d], [_outcome(d.id, OutcomeStatus.OK, T0)])
    assert times.stamp(appeared) is appeared  # only a clear is stamped
    first = times.stamp(cleared(T0 + timedelta(minutes=1)))
    assert first.finding.extra["healedAt"] == iso(T0)
    again = times.stamp(cleared(T0 + timedelta(minutes=5)))
    assert "healedAt" not in again.finding.extra  # a later drift of the id is not healed


@pytest.mark.parametrize(
    ("healed_at", "started", "stamped"),
    [
        (T0, T0 - timedelta(seconds=30), True),
        (T0, T0 + timedelta(seconds=1), False),  # the heal of an earlier drift of the id
        (T0 - timedelta(hours=2), T0 - timedelta(hours=3), False),  # older than the window
        (T0 + timedelta(seconds=61), T0, True),  # the call returned after the watch saw it
    ],
)
def test_a_heal_stamps_only_the_drift_it_fixed(healed_at, started, stamped):
    times = HealTimes(window=timedelta(hours=1))
    ev = cleared(T0 + timedelta(minutes=1), startedAt=iso(started))
    times.note(
        [_decision(Status.EXECUTE, ev.finding.id)],
        [_outcome(f"d-{ev.finding.id}-execute", OutcomeStatus.OK, healed_at)],
    )
    assert ("healedAt" in times.stamp(ev).finding.extra) is stamped


# --- over a real store ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    state_dir = tmp_path_factory.mktemp("pg")
    url = pg_env.start_server(state_dir)
    try:
        yield url
    finally:
        pg_env.stop_server(state_dir)


@dataclass
class Rig:
    url: str
    clock: FixedClock = field(default_factory=lambda: FixedClock(T0))
    stores: list[SqlAuditStore] = field(default_factory=list)

    async def healer(
        self, name: str, *, mode: Mode = Mode.ENFORCE, shared: bool = True, argo: Argo | None = None
    ) -> Healer:
        store = await open_audit_store(self.url, clock=self.clock)
        self.stores.append(store)
        h = Healer(
            ownership=OWNERS,
            remediator=Remediator(argocd=argo or Argo(), clock=self.clock),
            audit=store,
            policy=ROOMY,
            mode=mode,
            clock=self.clock,
            shared=store if shared else None,
            identity=name,
        )
        h.set_pool_counts({"c0": 10})
        await h.restore()
        return h

    async def stop(self, h: Healer) -> None:
        assert h.audit is not None
        await h.audit.close()
        self.stores.remove(h.audit)  # type: ignore[arg-type]

    async def cleared_record(self) -> dict[str, Any]:
        records = await self.stores[-1].query(kind=AuditKind.FINDING, limit=100)
        (rec,) = [r for r in records if r.payload["event"] == FindingEventType.CLEARED.value]
        finding: dict[str, Any] = rec.payload["finding"]
        return finding


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.live)])
async def rig(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Rig]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/audit-{next(_files)}.db"
    else:
        url = await pg_env.fresh_database_async(request.getfixturevalue("pg_server"))
    r = Rig(url)
    try:
        yield r
    finally:
        for store in r.stores:
            await store.close()


@pytest.mark.parametrize("shared", [True, False])
async def test_a_heal_before_a_restart_stamps_the_clear_after_it_and_the_report(rig, shared):
    first = await rig.healer("worker-0", shared=shared)
    await first.process([drift(FindingEventType.APPEARED, T0)])
    await rig.stop(first)  # the restart: nothing of the first healer's memory is left
    rig.clock.at = T0 + timedelta(minutes=2)
    second = await rig.healer("worker-0", shared=shared)
    await second.process([cleared(rig.clock.at)])
    finding = await rig.cleared_record()
    assert finding["healedAt"] == iso(T0) and finding["clearedAt"] == iso(rig.clock.at)
    report = await build_report(rig.stores[-1], since="1d", now=rig.clock.at + timedelta(seconds=1))
    total = report.to_json()["total"]
    assert total["cleared"] == 1 and total["healed"] == 1
    assert total["mttr"]["p50Seconds"] == 150.0  # startedAt T0-30s -> clearedAt T0+2m


async def test_a_heal_by_another_replica_stamps_the_clear_decided_here(rig):
    """Shared guard state: the healer that clears the finding learns of the other's heal from
    the guarded transaction's news (the cluster moved to it, say)."""
    other, here = await rig.healer("worker-0"), await rig.healer("worker-1")
    await other.process([drift(FindingEventType.APPEARED, T0)])
    rig.clock.at = T0 + timedelta(minutes=2)
    await here.process([cleared(rig.clock.at)])
    assert (await rig.cleared_record())["healedAt"] == iso(T0)


@pytest.mark.parametrize("case", ["dry-run", "failed", "cleared-before-restart"])
async def test_no_heal_on_record_stamps_nothing_after_a_restart(rig, case):
    argo = Argo(fail=case == "failed")
    mode = Mode.DRY_RUN if case == "dry-run" else Mode.ENFORCE
    first = await rig.healer("worker-0", mode=mode, argo=argo)
    await first.process([drift(FindingEventType.APPEARED, T0)])
    if case == "cleared-before-restart":  # the heal was used up by the first clear
        await first.process([cleared(T0 + timedelta(minutes=1))])
        recs = await rig.stores[-1].query(kind=AuditKind.FINDING, limit=100)
        assert sum("healedAt" in r.payload["finding"] for r in recs) == 1
    await rig.stop(first)
    rig.clock.at = T0 + timedelta(minutes=3)
    second = await rig.healer("worker-0", mode=mode, argo=argo)
    await second.process([cleared(rig.clock.at)])
    records = await rig.stores[-1].query(kind=AuditKind.FINDING, limit=100)
    last = next(r for r in records if r.payload["event"] == FindingEventType.CLEARED.value)
    assert last.payload["finding"]["clearedAt"] == iso(rig.clock.at)
    assert "healedAt" not in last.payload["finding"]
