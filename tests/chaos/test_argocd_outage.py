"""Argo CD answering 5xx and timing out for 5 minutes while drift keeps arriving: the healer
(enforce mode) keeps deciding, every call is retried a bounded number of times, every decision
is on record once with its action and outcome, and every drift whose heal failed in the outage
is healed after it — by the healer's own retries, not by the drift being reported again.

Time is compressed: the healer, the audit store, the Argo CD client (its back-off sleeps too)
and the simulator share a test clock that the test steps — a finding every 20 s, the client's
back-off waits advancing the clock instead of sleeping — so the 5-minute outage (and the
minutes after it) take a few seconds of real time. The faults are the simulator's, over real
HTTP: sync requests answered 503 then 502, reads answered 500 then held past the client's
timeout (0.2 s of real time)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.argocd.simulator import ArgoCDSimulator
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.healing import Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.audit import AuditKind
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import ArgoApp, OwnershipMap, OwnershipRule
from fleetwarden.core.policy import Decision, Guards, Mode, Policy, Status
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.sources import FixedClock
from tests.support.asgi_server import serve_asgi

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OUTAGE = timedelta(minutes=5)
EVERY = timedelta(seconds=20)  # a new drift this often, during the outage and after it
RETRIES = 2  # the client's retries per call: 3 attempts
CLUSTERS = 18  # one drift per cluster: 15 in the outage, 3 after it


def app(k: int) -> dict[str, object]:
    return {
        "metadata": {"name": f"c{k}-nodes"},
        "spec": {
            "source": {"repoURL": "https://git.example.com/fleet.git", "path": f"c{k}"},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "nodes"},
        },
    }


def drift(k: int, at: datetime) -> FindingEvent:
    finding = Finding(
        f"c{k}", "general", Layer.L1, "labels.team", "platform", "x", Severity.CRITICAL,
        nodes=(f"c{k}-n1",),
    )  # fmt: skip
    return FindingEvent(FindingEventType.APPEARED, finding, at)


async def test_argocd_failing_for_five_minutes_loses_no_decision_and_heals_after(tmp_path, figures):
    clock = FixedClock(T0)  # read by the simulator's thread too: each reading is one attribute

    async def sleep(seconds: float) -> None:  # the client's back-off, on the test clock
        clock.advance(timedelta(seconds=seconds))
        await asyncio.sleep(0)

    sim = ArgoCDSimulator([app(k) for k in range(CLUSTERS)], tokens=["tok"], clock=clock)
    half = T0 + OUTAGE / 2
    end = T0 + OUTAGE
    faults = [
        sim.fail_next(10**9, status=503, method="POST", path="/sync", until=half),
        sim.fail_next(10**9, status=500, method="GET", until=half),
        sim.fail_next(10**9, status=502, method="POST", path="/sync", until=end),
        sim.hang_next(10**9, seconds=0.5, method="GET", until=end),
    ]
    store = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}", clock=clock)
    started = time.monotonic()
    with serve_asgi(sim) as url:
        client = ArgoCDClient(
            url, token="tok", timeout=0.2, retries=RETRIES, sleep=sleep, clock=clock
        )
        healer = Healer(
            ownership=OwnershipMap(
                [OwnershipRule(direct_restore=False, argocd=ArgoApp("{cluster}-nodes"))]
            ),
            remediator=Remediator(argocd=client, clock=clock, timeout=30),
            audit=store,
            # room in the blast radius: only the outage stands in the way
            policy=Policy(guards=Guards(max_per_cluster=100, max_fleet=100)),
            mode=Mode.ENFORCE,
            clock=clock,
        )
        healer.set_pool_counts({f"c{k}": 1 for k in range(CLUSTERS)})
        made: list[Decision] = []
        requests_of: dict[str, int] = {}
        recovered: datetime | None = None
        k = 0
        while clock.now() < end + timedelta(minutes=20):
            if k < CLUSTERS and clock.now() >= T0 + k * EVERY:
                seen = len(sim.requests)
                made += await healer.process([drift(k, clock.now())])
                requests_of[made[-1].id] = len(sim.requests) - seen
                k += 1
            seen = len(sim.requests)
            for d in await healer.retry_due():  # what the healer's timer does
                made.append(d)
                requests_of[d.id] = len(sim.requests) - seen
            if (
                recovered is None
                and clock.now() >= end
                and sim.count("POST", "/sync") > _refused(faults)
            ):
                recovered = clock.now()
            clock.advance(timedelta(seconds=5))
        await client.aclose()
    real = time.monotonic() - started

    records = await store.query(limit=100_000)
    await store.close()
    by_kind = Counter(r.kind for r in records)
    decisions = Counter(r.id for r in records if r.kind == AuditKind.DECISION)
    actions = Counter(r.refs[0] for r in records if r.kind == AuditKind.ACTION)
    outcome_of = {
        r.payload["outcome"]["decisionId"]: r.payload["outcome"]["status"]
        for r in records
        if r.kind == AuditKind.OUTCOME
    }
    executed = [d for d in made if d.status is Status.EXECUTE]
    healed = {d.finding_id for d in executed if outcome_of.get(d.id) == "ok"}
    findings = {d.finding_id for d in made}
    in_outage = {d.finding_id for d in made if d.at < end}
    failed = [d for d in executed if outcome_of.get(d.id) == "error"]
    lost = len(findings - healed) + sum(1 for d in made if decisions[d.id] != 1)
    twice = sum(1 for d in made if decisions[d.id] > 1 or actions[d.id] > 1)
    names = [f"c{k}-nodes" for k in range(CLUSTERS)]
    synced = {name: len(sim.application(name)["status"].get("history") or []) for name in names}
    injected = sum(10**9 - f.remaining for f in faults)
    figures(
        faults=f"Argo CD 5xx and timeouts for {OUTAGE.seconds // 60} min "
        f"({injected} requests refused or held)",
        acknowledged=len(made),
        lost=lost,
        twice=twice,
        # on the test clock: from the outage's end to the first sync that went through
        recover_s=(recovered - end).total_seconds() if recovered else None,
        notes=f"{len(findings)} drifts, {len(in_outage)} in the outage; {len(failed)} heals "
        f"failed and were retried; at most {max(requests_of.values())} HTTP requests per "
        f"decision; all healed by {_minutes(max(d.at for d in executed) - T0)} on the test "
        f"clock; {real:.1f}s of real time",
    )
    assert set(by_kind) >= {AuditKind.FINDING, AuditKind.DECISION, AuditKind.ACTION}
    # bounded: per attempt one sync and one verifying read, each tried at most RETRIES+1 times
    assert max(requests_of.values()) <= (RETRIES + 1) * (1 + RETRIES + 1)
    # no decision lost: each on record once, each executed one with one action and one outcome
    assert all(n == 1 for n in decisions.values()) and len(decisions) == len(made)
    assert all(actions[d.id] == 1 and d.id in outcome_of for d in executed)
    assert in_outage and all(outcome_of[d.id] == "error" for d in executed if d.at < end)
    # every drift healed after the outage, each application synced once
    assert len(findings) == CLUSTERS and healed == findings
    assert synced == dict.fromkeys(names, 1)
    assert lost == 0 and twice == 0


def _refused(faults: list[object]) -> int:
    """Sync requests the faults answered (so one more means a sync got through)."""
    return sum(10**9 - f.remaining for f in faults if f.method == "POST")  # type: ignore[attr-defined]


def _minutes(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 60:.1f} min"
