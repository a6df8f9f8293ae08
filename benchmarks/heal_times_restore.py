"""What rebuilding ``healedAt`` from the audit store adds to a healer's restart (issue #14 item 2).

    .venv/bin/python benchmarks/heal_times_restore.py [--heals 5000] [--runs 3]

1. A real SQLite audit store in a temporary directory, filled by a ``Healer`` in enforce mode
   (Argo CD syncs through a port fake that answers at once): ``--heals`` findings over 50
   clusters x 100 pools, each decided, synced and on record (finding, decision, action,
   outcome ``ok``); then half of them cleared (their ``cleared`` records, stamped healedAt).
2. A new healer on the same store, as after a restart: ``Healer.restore`` timed end to end
   (the policy replay, the sweep and the heal rebuild), and ``HealTimes.load`` alone as
   ``restore`` calls it (the decision records it read passed in: two more paged queries,
   outcomes and clears, and the replay), each best of ``--runs``. The ratio of the two is the
   share of a restart the rebuild takes; ``rebuilt`` must be the findings healed and not
   cleared. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.app.healing import Healer
from fleetwarden.app.healing_records import records_since
from fleetwarden.app.remediating import Remediator
from fleetwarden.core.findings import Finding, Layer, Severity
from fleetwarden.core.ownership import ArgoApp, OwnershipMap, OwnershipRule
from fleetwarden.core.policy import Guards, Mode, Policy
from fleetwarden.core.tracking import FindingEvent, FindingEventType

OWNERS = OwnershipMap([OwnershipRule(direct_restore=False, argocd=ArgoApp("{cluster}-{pool}"))])
CLUSTERS, POOLS = 50, 100


class Argo:
    async def sync(self, app: str, **_: Any) -> dict[str, Any]:
        return {"application": app}


class Clock:
    def __init__(self) -> None:
        self.t = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.t


def event(kind: FindingEventType, i: int, at: datetime) -> FindingEvent:
    cluster, pool = f"c{i % CLUSTERS:02d}", f"p{i // CLUSTERS % POOLS:03d}"
    f = Finding(
        cluster,
        pool,
        Layer.L1,
        f"labels.k{i}",
        "a",
        "b",
        Severity.CRITICAL,
        nodes=(f"{cluster}-{pool}-n0",),
    )
    return FindingEvent(kind, f, at)


def healer(store: Any, clock: Clock, policy: Policy) -> Healer:
    h = Healer(
        ownership=OWNERS,
        remediator=Remediator(argocd=Argo(), clock=clock),
        audit=store,
        policy=policy,
        mode=Mode.ENFORCE,
        clock=clock,
        shared=store,
    )
    h.set_pool_counts(dict.fromkeys((f"c{c:02d}" for c in range(CLUSTERS)), POOLS))
    return h


async def run(heals: int, runs: int) -> dict[str, Any]:
    n = heals
    big = n * 10
    policy = Policy(guards=Guards(max_per_cluster=big, max_fleet=big, flap_heals=big, fraction=1.0))
    clock = Clock()
    with tempfile.TemporaryDirectory(prefix="fw-heal-times-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'audit.db'}"
        store = await open_audit_store(url, clock=clock)
        first = healer(store, clock, policy)
        await first.restore()
        for lo in range(0, n, 500):
            await first.process(
                [event(FindingEventType.APPEARED, i, clock.t) for i in range(lo, min(n, lo + 500))]
            )
        clock.t += timedelta(minutes=1)
        for lo in range(0, n // 2, 500):
            await first.process(
                [
                    event(FindingEventType.CLEARED, i, clock.t)
                    for i in range(lo, min(n // 2, lo + 500))
                ]
            )
        records = (await store.last() or (0, ""))[0]
        await store.close()
        clock.t += timedelta(minutes=1)
        restore_best = load_best = float("inf")
        rebuilt = 0
        for _ in range(runs):
            store = await open_audit_store(url, clock=clock)
            try:
                h = healer(store, clock, policy)
                t = time.perf_counter()
                await h.restore()
                restore_best = min(restore_best, time.perf_counter() - t)
                rebuilt = len(h.healed)
                again = healer(store, clock, policy)
                # as restore calls it: the decisions and notes it read already passed in
                since = clock.t - policy.guards.replay_span
                read = await records_since(store, since)
                t = time.perf_counter()
                await again.healed.load(store, since, upto=None, decisions=read)
                load_best = min(load_best, time.perf_counter() - t)
            finally:
                await store.close()
        return {
            "heals": n,
            "cleared": n // 2,
            "records": records,
            "rebuilt": rebuilt,
            "rebuiltAsExpected": rebuilt == n - n // 2,
            "restoreSeconds": round(restore_best, 3),
            "healLoadSeconds": round(load_best, 3),
            "healLoadShare": round(load_best / restore_best, 3),
            "runs": runs,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heals", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(json.dumps(asyncio.run(run(args.heals, args.runs)), indent=2))


if __name__ == "__main__":
    main()
