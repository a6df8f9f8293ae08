"""Critical finding -> Argo CD sync request sent: ownership route, policy decision and the
remediator, through the real Argo CD client over a fake HTTP transport.

    .venv/bin/python benchmarks/policy_to_sync.py [--findings 10000] [--clusters 100] [--pools 100]

Goal: p99 <= 50 ms. Each finding is a critical L1 label drift on a pool whose ownership rule
names an Argo CD application and forbids direct restore, so the default policy says "sync".
The clock (a fake one, 1 s per finding) keeps every finding under the guards' limits with the
default guards (10 % of pools per 10 min), so each one really goes out; the guards' history
is the live one (hundreds of entries). Timed per finding from before ``route`` to the moment
the HTTP transport receives ``POST /api/v1/applications/{app}/sync`` (``sent``), and to the
outcome returned (``done``); ``sent_cpu`` is the same span in this thread's CPU time, which
shows how much of a wall-clock tail is the machine's other load. A warm-up of 500 findings
is not counted. Then a storm: 1,000 simultaneous critical findings, decided and recorded in
one go (``decide_all``), with the executed/blocked counts. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta

import httpx

from fleetwarden.adapters.argocd.client import ArgoCDClient
from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.healing import Healer
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import ArgoApp, OwnershipMap, OwnershipRule
from fleetwarden.core.policy import Guards, Mode, PolicyState, Status, decide, decide_all, record
from fleetwarden.core.tracking import FindingEvent, FindingEventType
from fleetwarden.ports.remediation import OutcomeStatus
from fleetwarden.ports.sources import FixedClock

WARMUP = 500
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def finding(i: int, clusters: int, pools: int) -> Finding:
    c, p = i % clusters, (i // clusters) % pools
    return Finding(
        f"prod-{c:03d}",
        f"pool-{p:03d}",
        Layer.L1,
        f"labels.team-{i}",
        "platform",
        "payments",
        Severity.CRITICAL,
        nodes=(f"ip-10-0-{c}-{p}.ec2.internal",),
    )


async def main(n: int, clusters: int, pools: int) -> dict[str, object]:
    sent: dict[str, tuple[float, float]] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        name = request.url.path.split("/")[-2]
        sent[name] = (time.perf_counter(), time.thread_time())
        body = {"metadata": {"name": name, "namespace": "argocd"}, "status": {}}
        return httpx.Response(200, json=body)

    omap = OwnershipMap([OwnershipRule(argocd=ArgoApp("{cluster}-{pool}"), direct_restore=False)])
    state = PolicyState({f"prod-{c:03d}": pools for c in range(clusters)})
    clock = FixedClock(T0)

    sent_ms: list[float] = []
    sent_cpu_ms: list[float] = []
    done_ms: list[float] = []
    policy_ms: list[float] = []
    executed = 0
    async with ArgoCDClient(
        "https://argocd.example", token="bench", transport=httpx.MockTransport(handler)
    ) as argocd:
        remediator = Remediator(argocd=argocd, clock=clock)
        for i in range(n + WARMUP):
            now = clock.at = T0 + timedelta(seconds=i)
            f = finding(i, clusters, pools)
            c0, t0 = time.thread_time(), time.perf_counter()
            d = decide(f, omap.route(f), state, now, Mode.ENFORCE)
            record(d, state)
            t1 = time.perf_counter()
            out = await remediator.carry_out(d)
            t2 = time.perf_counter()
            if d.status is not Status.EXECUTE or out.status is not OutcomeStatus.OK:
                raise SystemExit(f"finding {i} was not synced: {d.reasons} {out.to_json()}")
            if i >= WARMUP:
                executed += 1
                policy_ms.append((t1 - t0) * 1000)
                wall, cpu = sent[f"{f.cluster}-{f.pool}"]
                sent_ms.append((wall - t0) * 1000)
                sent_cpu_ms.append((cpu - c0) * 1000)
                done_ms.append((t2 - t0) * 1000)

    # the storm: 1,000 simultaneous critical findings on 1,000 distinct pools of 20 clusters
    # (50 each): 10 % of 100 pools per cluster may act, i.e. 10 x 20 = 200 of the 1,000
    storm_state = PolicyState({f"prod-{c:03d}": pools for c in range(clusters)})
    items = [(f, omap.route(f)) for f in (finding(i, 20, pools) for i in range(1000))]
    t0 = time.perf_counter()
    decisions = decide_all(items, storm_state, T0, Mode.ENFORCE)
    storm_s = time.perf_counter() - t0
    return {
        "figure": "critical finding -> Argo CD sync request sent (policy + client)",
        "findings": executed,
        "clusters": clusters,
        "pools": clusters * pools,
        "goal_p99_ms": 50,
        "sent_p50_ms": round(pct(sent_ms, 50), 3),
        "sent_p99_ms": round(pct(sent_ms, 99), 3),
        "sent_max_ms": round(max(sent_ms), 3),
        "sent_mean_ms": round(statistics.fmean(sent_ms), 3),
        "sent_cpu_p99_ms": round(pct(sent_cpu_ms, 99), 3),
        "done_p99_ms": round(pct(done_ms, 99), 3),
        "policy_p50_ms": round(pct(policy_ms, 50), 4),
        "policy_p99_ms": round(pct(policy_ms, 99), 4),
        "storm": {
            "findings": len(decisions),
            "expected_executable": 20 * Guards().cluster_limit(pools),
            "executable": sum(d.status is Status.EXECUTE for d in decisions),
            "blocked": sum(d.status is Status.BLOCKED for d in decisions),
            "decide_all_ms": round(storm_s * 1000, 2),
        },
    }


async def through_healer(n: int, clusters: int, pools: int, store_url: str) -> dict[str, object]:
    """The same, the way ``serve`` does it: a finding event into ``Healer.process``, the
    decision appended to the audit store (hash chain, fsync) *before* the call goes out."""
    sent: dict[str, float] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        name = request.url.path.split("/")[-2]
        sent[name] = time.perf_counter()
        body = {"metadata": {"name": name, "namespace": "argocd"}, "status": {}}
        return httpx.Response(200, json=body)

    clock = FixedClock(T0)

    omap = OwnershipMap([OwnershipRule(argocd=ArgoApp("{cluster}-{pool}"), direct_restore=False)])
    store = await open_audit_store(store_url)
    sent_ms: list[float] = []
    try:
        async with ArgoCDClient(
            "https://argocd.example", token="bench", transport=httpx.MockTransport(handler)
        ) as argocd:
            healer = Healer(
                ownership=omap,
                remediator=Remediator(argocd=argocd, clock=clock),
                audit=store,
                mode=Mode.ENFORCE,
                clock=clock,
            )
            healer.set_pool_counts({f"prod-{c:03d}": pools for c in range(clusters)})
            for i in range(n + WARMUP):
                now = clock.at = T0 + timedelta(seconds=i)
                f = finding(i, clusters, pools)
                t0 = time.perf_counter()
                (d,) = await healer.process([FindingEvent(FindingEventType.APPEARED, f, now)])
                if d.status is not Status.EXECUTE:
                    raise SystemExit(f"finding {i} was not synced: {d.reasons}")
                if i >= WARMUP:
                    sent_ms.append((sent[f"{f.cluster}-{f.pool}"] - t0) * 1000)
    finally:
        await store.close()
    return {
        "figure": "finding event -> sync sent through Healer.process (write-ahead audit)",
        "store": store_url.split(":", 1)[0],
        "findings": len(sent_ms),
        "sent_p50_ms": round(pct(sent_ms, 50), 3),
        "sent_p99_ms": round(pct(sent_ms, 99), 3),
        "sent_max_ms": round(max(sent_ms), 3),
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--findings", type=int, default=10_000)
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--pools", type=int, default=100)
    ap.add_argument(
        "--healer-findings",
        type=int,
        default=2_000,
        help="findings for the second figure, through Healer.process and a SQLite audit store",
    )
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main(args.findings, args.clusters, args.pools))))
    with tempfile.TemporaryDirectory(prefix="fw-bench-heal-") as tmp:
        url = f"sqlite:///{tmp}/audit.db"
        result = asyncio.run(through_healer(args.healer_findings, args.clusters, args.pools, url))
    print(json.dumps(result))
